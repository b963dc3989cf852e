#include "config.h"
#include "catalog/catalog_conf.h"

#include <stdio.h>
#include <string.h>

const si_conf_key_t catalog_conf_keys[] = {
    {"catalog", SI_CONF_GROUP, 0, 0, NULL},
    {"catalog.path", SI_CONF_STRING, 0, 0, NULL},
    {"catalog.url", SI_CONF_STRING, 0, 0, NULL},
    {"catalog.password_file", SI_CONF_STRING, 0, 0, NULL},
    {"catalog.site", SI_CONF_STRING, 0, 0, NULL},
    {"catalog.history_days", SI_CONF_FLOAT, 0, 36500, NULL},
    SI_CONF_KEYS_END,
};

const char *catalog_conf_path(const si_conf_t *conf, char *buf, size_t size)
{
    const char *url = si_conf_string(conf, "catalog.url", NULL);
    if (url) {
        snprintf(buf, size, "%s", url);
        return buf;
    }
    return si_conf_state_path(conf, "catalog.path", "catalog.db", buf, size);
}

int catalog_conf_opts(const si_conf_t *conf, const char *target, int flags,
                      catalog_open_opts_t *o, si_error_t *err)
{
    const char *url = si_conf_string(conf, "catalog.url", NULL);
    if (url && si_conf_string(conf, "catalog.path", NULL))
        return si_errprintf(err, "catalog.path (a SQLite file) and catalog.url (PostgreSQL) are "
                            "both set: keep one");
    if (url && !catalog_target_is_url(url))
        return si_errprintf(err, "catalog.url '%.200s' is not a postgresql:// URL (a SQLite file "
                            "is catalog.path)", url);
    *o = (catalog_open_opts_t){
        .target = target,
        .flags = flags,
        .site = si_conf_string(conf, "catalog.site", NULL),
        /* the password file goes with the configured server only */
        .password_file = catalog_target_is_url(target)
                             ? si_conf_string(conf, "catalog.password_file", NULL)
                             : NULL,
    };
    return 0;
}

double catalog_conf_history_days(const si_conf_t *conf)
{
    return si_conf_float(conf, "catalog.history_days", CATALOG_HISTORY_DAYS);
}

catalog_t *catalog_conf_open(const si_conf_t *conf, const char *target, int flags,
                             si_error_t *err)
{
    catalog_open_opts_t o;
    if (catalog_conf_opts(conf, target, flags, &o, err) < 0)
        return NULL;
    return catalog_open_opts(&o, err);
}
