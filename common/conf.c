#include "config.h"
#include "common/conf.h"

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

static int where_error(const config_setting_t *s, const char *path, si_error_t *err,
                       const char *what)
{
    const char *file = config_setting_source_file(s);
    return si_errprintf(err, "%s:%d: setting '%s' %s", file ? file : "(config)",
                        config_setting_source_line(s), path, what);
}

static int validate_value(const config_setting_t *s, const si_conf_key_t *key,
                          const char *path, si_error_t *err)
{
    char msg[400];
    if (!type_matches(key->type, config_setting_type(s))) {
        snprintf(msg, sizeof(msg), "must be %s", type_name(key->type));
        return where_error(s, path, err, msg);
    }
    if ((key->type == SI_CONF_INT || key->type == SI_CONF_FLOAT) && key->min <= key->max) {
        double v = config_setting_get_float(s);
        if (config_setting_type(s) != CONFIG_TYPE_FLOAT)
            v = (double)config_setting_get_int64(s);
        if (v < key->min || v > key->max) {
            snprintf(msg, sizeof(msg), "= %g is out of range [%g, %g]", v, key->min, key->max);
            return where_error(s, path, err, msg);
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
        return where_error(s, path, err, msg);
    }
    return 0;
}

static int validate(const config_setting_t *group, const char *prefix,
                    const si_conf_key_t *const *schemas, si_error_t *err)
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
            return where_error(s, path, err, "is not a known setting");
        if (validate_value(s, key, path, err) < 0)
            return -1;
        if (key->type == SI_CONF_GROUP || key->type == SI_CONF_LIST)
            if (validate(s, path, schemas, err) < 0)
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
    if (validate(config_root_setting(&conf->cfg), "", schemas, err) < 0)
        goto error;
    return conf;
error:
    si_conf_free(conf);
    return NULL;
}

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
    if (access(path, R_OK) != 0) {
        si_errprintf(err, "%s: %s", path, strerror(errno));
        si_conf_free(conf);
        return NULL;
    }
    if (config_read_file(&conf->cfg, path) != CONFIG_TRUE) {
        const char *file = config_error_file(&conf->cfg);
        si_errprintf(err, "%s:%d: %s", file ? file : path, config_error_line(&conf->cfg),
                     config_error_text(&conf->cfg));
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
    if (config_read_string(&conf->cfg, text) != CONFIG_TRUE) {
        si_errprintf(err, "(string):%d: %s", config_error_line(&conf->cfg),
                     config_error_text(&conf->cfg));
        si_conf_free(conf);
        return NULL;
    }
    return finish(conf, "(string)", schemas, err);
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

int si_conf_fail(const si_conf_t *conf, const char *path, si_error_t *err, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    const config_setting_t *s = si_conf_setting(conf, path);
    if (s)
        return where_error(s, path, err, what);
    return si_errprintf(err, "%s: setting '%s' %s", conf->source, path, what);
}

bool si_conf_bool(const si_conf_t *conf, const char *path, bool def)
{
    const config_setting_t *s = si_conf_setting(conf, path);
    return s ? config_setting_get_bool(s) != 0 : def;
}
