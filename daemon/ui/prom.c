#include "config.h"
#include "daemon/ui/prom.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Copies a label value ("..." with \\, \" and \n escapes) from *p into out;
 * false when malformed or too long. */
static bool label_value(const char **p, const char *end, char *out)
{
    if (*p >= end || **p != '"')
        return false;
    size_t n = 0;
    for ((*p)++; *p < end && **p != '"'; (*p)++) {
        char ch = **p;
        if (ch == '\\') {
            if (++*p >= end)
                return false;
            ch = **p == 'n' ? '\n' : **p;
        }
        if (n + 1 >= PROM_LABEL_MAX)
            return false;
        out[n++] = ch;
    }
    out[n] = '\0';
    if (*p >= end)
        return false;
    (*p)++;
    return true;
}

static bool parse_line(const char *p, const char *end, prom_sample_t *s)
{
    size_t n = 0;
    memset(s, 0, sizeof(*s));
    while (p < end && (isalnum((unsigned char)*p) || *p == '_' || *p == ':')) {
        if (n + 1 >= PROM_NAME_MAX)
            return false;
        s->name[n++] = *p++;
    }
    if (n == 0)
        return false;
    if (p < end && *p == '{') {
        p++;
        while (p < end && *p != '}') {
            if (s->nlabels == PROM_LABELS_MAX)
                return false;
            size_t k = 0;
            char *name = s->label[s->nlabels].name;
            while (p < end && (isalnum((unsigned char)*p) || *p == '_')) {
                if (k + 1 >= PROM_LABEL_MAX)
                    return false;
                name[k++] = *p++;
            }
            name[k] = '\0';
            if (k == 0 || p >= end || *p++ != '=' ||
                !label_value(&p, end, s->label[s->nlabels].value))
                return false;
            s->nlabels++;
            if (p < end && *p == ',')
                p++;
        }
        if (p >= end)
            return false;
        p++;
    }
    if (p >= end || (*p != ' ' && *p != '\t'))
        return false;
    char num[64];
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    size_t len = 0;
    while (p + len < end && p[len] != ' ' && p[len] != '\t')
        len++;
    if (len == 0 || len >= sizeof(num))
        return false;
    memcpy(num, p, len);
    num[len] = '\0';
    char *stop;
    s->value = strtod(num, &stop);
    return *stop == '\0';
}

size_t prom_parse(const char *text, prom_sample_fn fn, void *arg)
{
    size_t count = 0;
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        const char *end = nl ? nl : p + strlen(p);
        prom_sample_t s;
        if (*p != '#' && parse_line(p, end, &s)) {
            fn(&s, arg);
            count++;
        }
        p = nl ? nl + 1 : end;
    }
    return count;
}

const char *prom_label(const prom_sample_t *sample, const char *name)
{
    for (size_t i = 0; i < sample->nlabels; i++)
        if (strcmp(sample->label[i].name, name) == 0)
            return sample->label[i].value;
    return "";
}
