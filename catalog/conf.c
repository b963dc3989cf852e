#include "config.h"
#include "catalog/catalog_conf.h"

#include <stdio.h>

const si_conf_key_t catalog_conf_keys[] = {
    {"catalog", SI_CONF_GROUP, 0, 0, NULL},
    {"catalog.path", SI_CONF_STRING, 0, 0, NULL},
    SI_CONF_KEYS_END,
};

const char *catalog_conf_path(const si_conf_t *conf, char *buf, size_t size)
{
    const char *path = si_conf_string(conf, "catalog.path", NULL);
    const char *state_dir = si_conf_string(conf, "state_dir", LOCALSTATEDIR "/lib/stagein");
    if (path)
        snprintf(buf, size, "%s", path);
    else
        snprintf(buf, size, "%s/catalog.db", state_dir);
    return buf;
}
