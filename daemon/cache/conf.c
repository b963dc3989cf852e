/* The "cache" group of stagein.conf. */
#include "config.h"
#include "daemon/cache/cache.h"

#include <stdio.h>
#include <string.h>

const si_conf_key_t cache_conf_keys[] = {
    {"cache", SI_CONF_GROUP, 0, 0, NULL},
    {"cache.dir", SI_CONF_STRING, 0, 0, NULL},
    {"cache.capacity", SI_CONF_INT, 0, 9.2e18, NULL},
    {"cache.high_watermark", SI_CONF_FLOAT, 0.01, 1.0, NULL},
    {"cache.low_watermark", SI_CONF_FLOAT, 0.0, 1.0, NULL},
    {"cache.verify_on_start", SI_CONF_STRING, 0, 0, "none|unverified|all"},
    {"cache.write_buffer", SI_CONF_INT, 65536, 268435456, NULL},
    {"cache.access_flush_interval", SI_CONF_FLOAT, 0.0, 3600.0, NULL},
    {"cache.commit_bytes", SI_CONF_INT, 1, 9.2e18, NULL},
    {"cache.commit_objects", SI_CONF_INT, 1, 1000000, NULL},
    {"cache.commit_delay", SI_CONF_FLOAT, 0.0, 60.0, NULL},
    {"cache.segment_object_max", SI_CONF_INT, 0, 1073741824, NULL},
    {"cache.segment_bytes", SI_CONF_INT, 1048576, 9.2e18, NULL},
    {"cache.segment_memory", SI_CONF_INT, 0, 9.2e18, NULL},
    SI_CONF_KEYS_END,
};

static const char *const verify_names[] = {"none", "unverified", "all"};

const char *cache_verify_name(cache_verify_t v)
{
    return (unsigned)v < sizeof(verify_names) / sizeof(verify_names[0]) ? verify_names[v] : "?";
}

void cache_conf_defaults(cache_conf_t *conf, const char *state_dir)
{
    memset(conf, 0, sizeof(*conf));
    snprintf(conf->dir, sizeof(conf->dir), "%s/cache", state_dir ? state_dir : ".");
    conf->high_watermark = 0.90;
    conf->low_watermark = 0.80;
    conf->verify_on_start = CACHE_VERIFY_UNVERIFIED;
    conf->write_buffer = 4u << 20;
    conf->access_flush_interval = 5.0;
    conf->commit_bytes = 256u << 20;
    conf->commit_objects = 4096;
    conf->commit_delay = 0;
    conf->segment_object_max = 4u << 20;
    conf->segment_bytes = 256u << 20;
    conf->segment_memory = 256u << 20;
}

int cache_conf_from(const si_conf_t *conf, const char *state_dir, cache_conf_t *out,
                    si_error_t *err)
{
    cache_conf_t c;
    cache_conf_defaults(&c, state_dir);
    const char *dir = si_conf_string(conf, "cache.dir", NULL);
    if (dir) {
        if (!*dir)
            return si_errprintf(err, "cache.dir must not be empty");
        if ((size_t)snprintf(c.dir, sizeof(c.dir), "%s", dir) >= sizeof(c.dir))
            return si_errprintf(err, "cache.dir '%.80s...' is too long", dir);
    } else if (strlen(c.dir) + 1 >= sizeof(c.dir)) {
        return si_errprintf(err, "the state directory is too long for the cache under it");
    }
    c.capacity = (uint64_t)si_conf_int(conf, "cache.capacity", 0);
    c.high_watermark = si_conf_float(conf, "cache.high_watermark", c.high_watermark);
    c.low_watermark = si_conf_float(conf, "cache.low_watermark", c.low_watermark);
    if (!(c.low_watermark < c.high_watermark))
        return si_errprintf(err, "cache.low_watermark (%.2f) must be below"
                                 " cache.high_watermark (%.2f)",
                            c.low_watermark, c.high_watermark);
    const char *verify = si_conf_string(conf, "cache.verify_on_start", NULL);
    for (size_t i = 0; verify && i < sizeof(verify_names) / sizeof(verify_names[0]); i++)
        if (strcmp(verify, verify_names[i]) == 0)
            c.verify_on_start = (cache_verify_t)i;
    c.write_buffer = (size_t)si_conf_int(conf, "cache.write_buffer", (int64_t)c.write_buffer);
    c.access_flush_interval =
        si_conf_float(conf, "cache.access_flush_interval", c.access_flush_interval);
    c.commit_bytes = (uint64_t)si_conf_int(conf, "cache.commit_bytes", (int64_t)c.commit_bytes);
    c.commit_objects =
        (unsigned)si_conf_int(conf, "cache.commit_objects", (int64_t)c.commit_objects);
    c.commit_delay = si_conf_float(conf, "cache.commit_delay", c.commit_delay);
    c.segment_object_max = (uint64_t)si_conf_int(conf, "cache.segment_object_max",
                                                 (int64_t)c.segment_object_max);
    c.segment_bytes =
        (uint64_t)si_conf_int(conf, "cache.segment_bytes", (int64_t)c.segment_bytes);
    c.segment_memory =
        (uint64_t)si_conf_int(conf, "cache.segment_memory", (int64_t)c.segment_memory);
    *out = c;
    return 0;
}
