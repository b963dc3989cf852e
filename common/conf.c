#include "config.h"
#include "common/conf.h"
#include "common/fileio.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct si_conf {
    config_t cfg;
    char *source;
};

const char *si_conf_default_path(const char *explicit_path, bool *explicit_out)
{
    const char *env = getenv("STAGEIN_CONF");
    if (explicit_path) {
        *explicit_out = true;
        return explicit_path;
    }
    if (env && *env) {
        *explicit_out = true;
        return env;
    }
    *explicit_out = false;
    return SYSCONFDIR "/stagein/stagein.conf";
}

static const si_conf_key_t *schema_find(const si_conf_key_t *const *schemas, const char *path)
{
    for (size_t s = 0; schemas && schemas[s]; s++)
        for (const si_conf_key_t *k = schemas[s]; k->path; k++)
            if (strcmp(k->path, path) == 0)
                return k;
    return NULL;
}

static bool type_matches(si_conf_type_t want, int have)
{
    switch (want) {
    case SI_CONF_INT:
        return have == CONFIG_TYPE_INT || have == CONFIG_TYPE_INT64;
    case SI_CONF_FLOAT:
        return have == CONFIG_TYPE_FLOAT || have == CONFIG_TYPE_INT || have == CONFIG_TYPE_INT64;
    case SI_CONF_STRING:
        return have == CONFIG_TYPE_STRING;
    case SI_CONF_BOOL:
        return have == CONFIG_TYPE_BOOL;
    case SI_CONF_GROUP:
        return have == CONFIG_TYPE_GROUP;
    case SI_CONF_LIST:
        return have == CONFIG_TYPE_LIST || have == CONFIG_TYPE_ARRAY;
    }
    return false;
}

static const char *type_name(si_conf_type_t t)
{
    static const char *const names[] = {"an integer", "a number", "a string",
                                        "a boolean", "a group { }", "a list ( )"};
    return names[t];
}

/* source: the file the text came from (libconfig names none for text it
 * parsed from memory). */
static int where_error(const config_setting_t *s, const char *source, const char *path,
                       si_error_t *err, const char *what)
{
    const char *file = config_setting_source_file(s);
    return si_errprintf(err, "%s:%d: setting '%s' %s", file ? file : source,
                        config_setting_source_line(s), path, what);
}

static int validate_value(const config_setting_t *s, const si_conf_key_t *key,
                          const char *source, const char *path, si_error_t *err)
{
    char msg[400];
    if (!type_matches(key->type, config_setting_type(s))) {
        snprintf(msg, sizeof(msg), "must be %s", type_name(key->type));
        return where_error(s, source, path, err, msg);
    }
    if ((key->type == SI_CONF_INT || key->type == SI_CONF_FLOAT) && key->min <= key->max) {
        double v = config_setting_get_float(s);
        if (config_setting_type(s) != CONFIG_TYPE_FLOAT)
            v = (double)config_setting_get_int64(s);
        if (v < key->min || v > key->max) {
            snprintf(msg, sizeof(msg), "= %g is out of range [%g, %g]", v, key->min, key->max);
            return where_error(s, source, path, err, msg);
        }
    }
    if (key->type == SI_CONF_STRING && key->choices) {
        const char *v = config_setting_get_string(s);
        size_t n = strlen(v);
        for (const char *c = key->choices; c && *c;) {
            const char *bar = strchr(c, '|');
            size_t len = bar ? (size_t)(bar - c) : strlen(c);
            if (len == n && strncmp(c, v, n) == 0)
                return 0;
            c = bar ? bar + 1 : NULL;
        }
        snprintf(msg, sizeof(msg), "= \"%.100s\" is not one of %s", v, key->choices);
        return where_error(s, source, path, err, msg);
    }
    return 0;
}

static int validate(const config_setting_t *group, const char *prefix,
                    const si_conf_key_t *const *schemas, const char *source, si_error_t *err)
{
    int n = config_setting_length(group);
    bool is_list = config_setting_type(group) == CONFIG_TYPE_LIST ||
                   config_setting_type(group) == CONFIG_TYPE_ARRAY;
    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        char path[512];
        const char *name = is_list ? "[]" : config_setting_name(s);
        if (*prefix)
            snprintf(path, sizeof(path), "%s.%s", prefix, name);
        else
            snprintf(path, sizeof(path), "%s", name);
        const si_conf_key_t *key = schema_find(schemas, path);
        if (!key)
            return where_error(s, source, path, err, "is not a known setting");
        if (validate_value(s, key, source, path, err) < 0)
            return -1;
        if (key->type == SI_CONF_GROUP || key->type == SI_CONF_LIST)
            if (validate(s, path, schemas, source, err) < 0)
                return -1;
    }
    return 0;
}

static si_conf_t *conf_new(void)
{
    si_conf_t *conf = calloc(1, sizeof(*conf));
    if (!conf)
        return NULL;
    config_init(&conf->cfg);
    return conf;
}

void si_conf_free(si_conf_t *conf)
{
    if (!conf)
        return;
    config_destroy(&conf->cfg);
    free(conf->source);
    free(conf);
}

static si_conf_t *finish(si_conf_t *conf, const char *source,
                         const si_conf_key_t *const *schemas, si_error_t *err)
{
    conf->source = strdup(source);
    if (!conf->source) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    if (validate(config_root_setting(&conf->cfg), "", schemas, source, err) < 0)
        goto error;
    return conf;
error:
    si_conf_free(conf);
    return NULL;
}

/* libconfig 1.5 keeps an integer written without an L suffix in 32 bits
 * and silently truncates a larger one (1099511627776 reads as 0): such
 * literals get their L before parsing. Strings and comments are left
 * alone; the lines stay where they were, for the error messages. */
char *si_conf_widen_integers(const char *text)
{
    size_t n = strlen(text), extra = 0;
    for (size_t i = 0; i < n; i++)
        extra += text[i] >= '0' && text[i] <= '9';
    char *out = malloc(n + extra + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        char c = text[i];
        if (c == '"') { /* a string, with its escapes */
            size_t j = i + 1;
            while (j < n && text[j] != '"')
                j += text[j] == '\\' && j + 1 < n ? 2 : 1;
            j = j < n ? j + 1 : n;
            memcpy(o, text + i, j - i);
            o += j - i;
            i = j;
            continue;
        }
        if (c == '#' || (c == '/' && (text[i + 1] == '/' || text[i + 1] == '*'))) {
            const char *end = c == '/' && text[i + 1] == '*' ? strstr(text + i + 2, "*/") : NULL;
            size_t j = end ? (size_t)(end - text) + 2
                       : c == '/' && text[i + 1] == '*' ? n : i + strcspn(text + i, "\n");
            memcpy(o, text + i, j - i);
            o += j - i;
            i = j;
            continue;
        }
        bool starts = c >= '0' && c <= '9' &&
                      (i == 0 || !(isalnum((unsigned char)text[i - 1]) || text[i - 1] == '_' ||
                                   text[i - 1] == '.'));
        if (!starts) {
            *o++ = c;
            i++;
            continue;
        }
        bool hex = c == '0' && (text[i + 1] == 'x' || text[i + 1] == 'X');
        size_t j = hex ? i + 2 : i;
        while (j < n && (hex ? isxdigit((unsigned char)text[j]) : isdigit((unsigned char)text[j])))
            j++;
        bool number = j < n ? !(isalnum((unsigned char)text[j]) || text[j] == '.' ||
                                text[j] == '_') : true;
        memcpy(o, text + i, j - i);
        o += j - i;
        if (number) {
            errno = 0;
            unsigned long long v = strtoull(text + i, NULL, hex ? 16 : 10);
            if (errno == 0 && v > (hex ? 0xffffffffull : 0x7fffffffull))
                *o++ = 'L';
        }
        i = j;
    }
    *o = '\0';
    return out;
}

/* Parses text (widened) into conf; errors name source. */
static int parse(si_conf_t *conf, const char *text, const char *source, si_error_t *err)
{
    char *wide = si_conf_widen_integers(text);
    if (!wide)
        return si_errprintf(err, "out of memory");
    int ok = config_read_string(&conf->cfg, wide);
    free(wide);
    if (ok != CONFIG_TRUE) {
        const char *file = config_error_file(&conf->cfg);
        return si_errprintf(err, "%s:%d: %s", file ? file : source, config_error_line(&conf->cfg),
                            config_error_text(&conf->cfg));
    }
    return 0;
}

#define CONF_FILE_MAX (16u << 20)

si_conf_t *si_conf_load(const char *path, bool must_exist,
                        const si_conf_key_t *const *schemas, si_error_t *err)
{
    si_conf_t *conf = conf_new();
    if (!conf) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    if (!path || (!must_exist && access(path, F_OK) != 0 && errno == ENOENT))
        return finish(conf, "(defaults)", schemas, err);
    size_t len;
    char *text = si_read_file(path, CONF_FILE_MAX, false, &len, err);
    if (!text) {
        si_conf_free(conf);
        return NULL;
    }
    /* @include names files relative to this one's folder */
    char *dir = strdup(path);
    if (dir && strrchr(dir, '/')) {
        *strrchr(dir, '/') = '\0';
        config_set_include_dir(&conf->cfg, *dir ? dir : "/");
    }
    int rc = strlen(text) != len ? si_errprintf(err, "%s: holds a NUL byte", path)
                                 : parse(conf, text, path, err);
    free(dir);
    free(text);
    if (rc < 0) {
        si_conf_free(conf);
        return NULL;
    }
    return finish(conf, path, schemas, err);
}

si_conf_t *si_conf_load_string(const char *text, const si_conf_key_t *const *schemas,
                               si_error_t *err)
{
    si_conf_t *conf = conf_new();
    if (!conf) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    if (parse(conf, text, "(string)", err) < 0) {
        si_conf_free(conf);
        return NULL;
    }
    return finish(conf, "(string)", schemas, err);
}

const char *si_conf_file_of(const si_conf_t *conf, const config_setting_t *s)
{
    const char *file = s ? config_setting_source_file(s) : NULL;
    return file ? file : conf->source;
}

const char *si_conf_source(const si_conf_t *conf)
{
    return conf->source;
}

const config_setting_t *si_conf_setting(const si_conf_t *conf, const char *path)
{
    return config_lookup(&conf->cfg, path);
}

int64_t si_conf_int(const si_conf_t *conf, const char *path, int64_t def)
{
    const config_setting_t *s = si_conf_setting(conf, path);
    return s ? config_setting_get_int64(s) : def;
}

double si_conf_float(const si_conf_t *conf, const char *path, double def)
{
    const config_setting_t *s = si_conf_setting(conf, path);
    if (!s)
        return def;
    if (config_setting_type(s) == CONFIG_TYPE_FLOAT)
        return config_setting_get_float(s);
    return (double)config_setting_get_int64(s);
}

const char *si_conf_string(const si_conf_t *conf, const char *path, const char *def)
{
    const config_setting_t *s = si_conf_setting(conf, path);
    return s ? config_setting_get_string(s) : def;
}

const char *si_conf_state_path(const si_conf_t *conf, const char *path, const char *name,
                               char *buf, size_t size)
{
    const char *set = conf ? si_conf_string(conf, path, NULL) : NULL;
    const char *state = conf ? si_conf_string(conf, "state_dir", NULL) : NULL;
    if (set)
        snprintf(buf, size, "%s", set);
    else
        snprintf(buf, size, "%s/%s", state ? state : LOCALSTATEDIR "/lib/stagein", name);
    return buf;
}

int si_conf_fail(const si_conf_t *conf, const char *path, si_error_t *err, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    const config_setting_t *s = si_conf_setting(conf, path);
    if (s)
        return where_error(s, si_conf_file_of(conf, s), path, err, what);
    return si_errprintf(err, "%s: setting '%s' %s", conf->source, path, what);
}

bool si_conf_bool(const si_conf_t *conf, const char *path, bool def)
{
    const config_setting_t *s = si_conf_setting(conf, path);
    return s ? config_setting_get_bool(s) != 0 : def;
}
