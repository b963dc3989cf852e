#include "config.h"
#include "common/prom.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool name_char(char c, bool first)
{
    return isalpha((unsigned char)c) || c == '_' || c == ':' || (!first && isdigit((unsigned char)c));
}

/* name{label="value",...} value [timestamp] */
int si_prom_parse_sample(const char *line, si_prom_sample_t *s, const char **why)
{
    const char *p = line;
    size_t n = 0;
    memset(s, 0, sizeof(*s));
    while (name_char(*p, n == 0)) {
        if (n + 1 >= sizeof(s->name))
            return *why = "metric name too long", -1;
        s->name[n++] = *p++;
    }
    if (n == 0)
        return *why = "no metric name", -1;
    if (*p == '{') {
        p++;
        while (*p != '}') {
            if (s->nlabels == SI_PROM_LABELS_MAX)
                return *why = "too many labels", -1;
            si_prom_label_t *l = &s->labels[s->nlabels++];
            n = 0;
            while (name_char(*p, n == 0)) {
                if (n + 1 >= sizeof(l->name))
                    return *why = "label name too long", -1;
                l->name[n++] = *p++;
            }
            if (n == 0 || p[0] != '=' || p[1] != '"')
                return *why = "expected label=\"value\"", -1;
            p += 2;
            n = 0;
            while (*p != '"') {
                char c = *p++;
                if (c == '\0')
                    return *why = "unterminated label value", -1;
                if (c == '\\') {
                    c = *p++;
                    if (c == 'n')
                        c = '\n';
                    else if (c != '\\' && c != '"')
                        return *why = "bad escape in a label value", -1;
                }
                if (n + 1 >= sizeof(l->value))
                    return *why = "label value too long", -1;
                l->value[n++] = c;
            }
            p++;
            if (*p == ',')
                p++;
            else if (*p != '}')
                return *why = "expected ',' or '}' after a label", -1;
        }
        p++;
    }
    if (*p != ' ' && *p != '\t')
        return *why = "expected a space before the value", -1;
    char *end;
    s->value = strtod(p, &end);
    if (end == p || (*end && !isspace((unsigned char)*end)))
        return *why = "bad sample value", -1;
    return 0;
}

long si_prom_each(const char *text, si_prom_fn fn, void *arg, si_error_t *err)
{
    long count = 0;
    const char *p = text ? text : "";
    for (unsigned lineno = 1; *p; lineno++) {
        size_t len = strcspn(p, "\n");
        char line[4096];
        if (len >= sizeof(line))
            return si_errprintf(err, "metrics line %u: longer than %zu bytes", lineno,
                                sizeof(line) - 1);
        memcpy(line, p, len);
        line[len] = '\0';
        p += len + (p[len] == '\n');
        if (len && line[len - 1] == '\r')
            line[len - 1] = '\0';
        if (line[0] == '\0' || line[0] == '#')
            continue;
        si_prom_sample_t s;
        const char *why = NULL;
        if (si_prom_parse_sample(line, &s, &why) < 0)
            return si_errprintf(err, "metrics line %u: %s: %.80s", lineno, why, line);
        if (fn(&s, arg, err) < 0)
            return -1;
        count++;
    }
    return count;
}

const char *si_prom_label(const si_prom_sample_t *s, const char *name)
{
    for (size_t i = 0; i < s->nlabels; i++)
        if (strcmp(s->labels[i].name, name) == 0)
            return s->labels[i].value;
    return "";
}
