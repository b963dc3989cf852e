/* The "push" group of stagein.conf. */
#include "config.h"
#include "daemon/push/push.h"

#include <stdio.h>
#include <string.h>

#include "daemon/archive/backend.h"

const si_conf_key_t push_conf_keys[] = {
    {"push", SI_CONF_GROUP, 0, 0, NULL},
    {"push.bucket", SI_CONF_STRING, 0, 0, NULL},
    {"push.max_file_size", SI_CONF_INT, 1, 9.2e18, NULL},
    {"push.aggregate_bytes", SI_CONF_INT, 1, 9.2e18, NULL},
    {"push.aggregate_window", SI_CONF_FLOAT, 0.0, 86400.0, NULL},
    {"push.copies", SI_CONF_INT, 1, ARCHIVE_MAX_COPIES, NULL},
    {"push.dataset_mode", SI_CONF_INT, 0, 0777, NULL},
    {"push.max_attempts", SI_CONF_INT, 1, 1000, NULL},
    {"push.aggregate_files", SI_CONF_INT, 1, PUSH_AGGREGATE_FILES_MAX, NULL},
    SI_CONF_KEYS_END,
};

void push_conf_defaults(push_conf_t *conf)
{
    memset(conf, 0, sizeof(*conf));
    snprintf(conf->bucket, sizeof(conf->bucket), "stageout");
    conf->max_file_size = 1ull << 40;
    /* ~2 GB: the efficient size of one file on tape (TAPE-MODEL.md) */
    conf->aggregate_bytes = 2000000000ull;
    conf->aggregate_window = 60.0;
    conf->copies = 1;
    conf->dataset_mode = 0600;
    conf->max_attempts = 5;
    conf->aggregate_files = 20000;
}

int push_conf_from(const si_conf_t *conf, push_conf_t *out, si_error_t *err)
{
    push_conf_t c;
    push_conf_defaults(&c);
    const char *bucket = si_conf_string(conf, "push.bucket", NULL);
    if (bucket) {
        if (si_bucket_check(bucket, strlen(bucket), err) < 0)
            return si_errprefix(err, "push.bucket");
        snprintf(c.bucket, sizeof(c.bucket), "%s", bucket);
    }
    c.max_file_size = (uint64_t)si_conf_int(conf, "push.max_file_size", (int64_t)c.max_file_size);
    c.aggregate_bytes =
        (uint64_t)si_conf_int(conf, "push.aggregate_bytes", (int64_t)c.aggregate_bytes);
    c.aggregate_window = si_conf_float(conf, "push.aggregate_window", c.aggregate_window);
    c.copies = (int)si_conf_int(conf, "push.copies", c.copies);
    c.dataset_mode = (unsigned)si_conf_int(conf, "push.dataset_mode", c.dataset_mode);
    c.max_attempts = (int)si_conf_int(conf, "push.max_attempts", c.max_attempts);
    c.aggregate_files = (size_t)si_conf_int(conf, "push.aggregate_files",
                                            (int64_t)c.aggregate_files);
    *out = c;
    return 0;
}
