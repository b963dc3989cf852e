/* The `s3` archive backend's configuration: the archive.s3 group read and
 * checked, the bucket maps, and the helpers shared with push (glacier.h). */
#include "config.h"

#include "daemon/archive/glacier_internal.h"

const si_conf_key_t archive_s3_conf_keys[] = {
    {"archive.s3", SI_CONF_GROUP, 0, 0, NULL},
    {"archive.s3.endpoint", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.region", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.credentials_file", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.buckets", SI_CONF_LIST, 0, -1, NULL},
    {"archive.s3.buckets.[]", SI_CONF_GROUP, 0, 0, NULL},
    {"archive.s3.buckets.[].bucket", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.buckets.[].upstream", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.buckets.[].prefix", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.restores", SI_CONF_INT, 1, 100000, NULL},
    {"archive.s3.gets", SI_CONF_INT, 1, 256, NULL},
    {"archive.s3.parts", SI_CONF_INT, 1, 64, NULL},
    {"archive.s3.part_size", SI_CONF_INT, 5 * 1048576.0, 5368709120.0, NULL},
    {"archive.s3.storage_class", SI_CONF_STRING, 0, 0,
     "GLACIER|DEEP_ARCHIVE|GLACIER_IR|STANDARD|STANDARD_IA"},
    {"archive.s3.restore_tier", SI_CONF_STRING, 0, 0, "Expedited|Standard|Bulk"},
    {"archive.s3.restore_days", SI_CONF_INT, 1, 36500, NULL},
    {"archive.s3.poll_min", SI_CONF_FLOAT, 0.01, 86400, NULL},
    {"archive.s3.poll_max", SI_CONF_FLOAT, 0.01, 86400, NULL},
    {"archive.s3.restore_timeout", SI_CONF_FLOAT, 0.1, 31536000, NULL},
    {"archive.s3.connect_timeout", SI_CONF_INT, 1, 3600, NULL},
    {"archive.s3.timeout", SI_CONF_INT, 1, 86400, NULL},
    {"archive.s3.retries", SI_CONF_INT, 0, 100, NULL},
    {"archive.s3.retry_base", SI_CONF_FLOAT, 0.001, 3600, NULL},
    {"archive.s3.retry_max", SI_CONF_FLOAT, 0.001, 86400, NULL},
    {"archive.s3.volume", SI_CONF_STRING, 0, 0, NULL},
    SI_CONF_KEYS_END,
};

/* ---- configuration ---------------------------------------------------------- */

static int copy_setting(const si_conf_t *conf, const char *path, const char *def, char *out,
                        size_t size, si_error_t *err)
{
    const char *v = si_conf_string(conf, path, def);
    if (!v)
        return 0;
    if (strlen(v) >= size)
        return si_conf_fail(conf, path, err, "is longer than %zu bytes", size - 1);
    memmove(out, v, strlen(v) + 1);
    return 0;
}

static int read_maps(const si_conf_t *conf, archive_s3_conf_t *c, si_error_t *err)
{
    const config_setting_t *list = si_conf_setting(conf, "archive.s3.buckets");
    int n = list ? config_setting_length(list) : 0;
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
        const char *file = si_conf_file_of(conf, e);
        int line = config_setting_source_line(e);
        const char *bucket = NULL, *upstream = NULL, *prefix = "";
        config_setting_lookup_string(e, "bucket", &bucket);
        config_setting_lookup_string(e, "upstream", &upstream);
        config_setting_lookup_string(e, "prefix", &prefix);
        si_error_t why;
        char probe[SI_KEY_MAX + 2]; /* a prefix may end in '/': checked as the start of a key */
        snprintf(probe, sizeof(probe), "%sx", prefix);
        if (!bucket || !upstream)
            return si_errprintf(err, "%s:%d: archive.s3.buckets: each entry needs bucket and "
                                "upstream", file, line);
        if (si_bucket_check(bucket, strlen(bucket), &why) < 0 ||
            si_bucket_check(upstream, strlen(upstream), &why) < 0 ||
            (*prefix && si_key_check(probe, strlen(probe), &why) < 0))
            return si_errprintf(err, "%s:%d: archive.s3.buckets: %s", file,
                                line, why.text);
        if (c->nmaps == ARCHIVE_S3_MAPS_MAX)
            return si_errprintf(err, "%s:%d: archive.s3.buckets: more than %d entries",
                                file, line, ARCHIVE_S3_MAPS_MAX);
        archive_s3_map_t *m = &c->maps[c->nmaps++];
        snprintf(m->bucket, sizeof(m->bucket), "%s", bucket);
        snprintf(m->upstream, sizeof(m->upstream), "%s", upstream);
        snprintf(m->prefix, sizeof(m->prefix), "%s", prefix);
    }
    return 0;
}

int archive_s3_conf_from(const si_conf_t *conf, archive_s3_conf_t *c, si_error_t *err)
{
    memset(c, 0, sizeof(*c));
    if (!si_conf_string(conf, "archive.s3.endpoint", NULL))
        return si_conf_fail(conf, "archive.s3.endpoint", err, "is required by the s3 backend "
                            "(http://HOST:PORT of the tape gateway)");
    if (!si_conf_string(conf, "archive.s3.credentials_file", NULL))
        return si_conf_fail(conf, "archive.s3.credentials_file", err, "is required by the s3 "
                            "backend (a 0600 file: ACCESS_KEY SECRET)");
    if (copy_setting(conf, "archive.s3.endpoint", NULL, c->endpoint, sizeof(c->endpoint),
                     err) < 0 ||
        copy_setting(conf, "archive.s3.region", "us-east-1", c->region, sizeof(c->region),
                     err) < 0 ||
        copy_setting(conf, "archive.s3.credentials_file", NULL, c->credentials_file,
                     sizeof(c->credentials_file), err) < 0 ||
        copy_setting(conf, "archive.s3.storage_class", "GLACIER", c->storage_class,
                     sizeof(c->storage_class), err) < 0 ||
        copy_setting(conf, "archive.s3.restore_tier", "Standard", c->restore_tier,
                     sizeof(c->restore_tier), err) < 0)
        return -1;
    if (strncmp(c->endpoint, "http://", 7) != 0 && strncmp(c->endpoint, "https://", 8) != 0)
        return si_conf_fail(conf, "archive.s3.endpoint", err, "= \"%s\" is not http://HOST:PORT "
                            "or https://HOST[:PORT]", c->endpoint);
    if (si_secrets_load_client(c->credentials_file, &c->credentials, err) < 0)
        return si_conf_fail(conf, "archive.s3.credentials_file", err, "%s", err->text);
    c->restores = (int)si_conf_int(conf, "archive.s3.restores", 1000);
    c->gets = (int)si_conf_int(conf, "archive.s3.gets", 8);
    c->parts = (int)si_conf_int(conf, "archive.s3.parts", 4);
    c->part_size = (uint64_t)si_conf_int(conf, "archive.s3.part_size", (int64_t)(16 * MIB));
    c->restore_days = (int)si_conf_int(conf, "archive.s3.restore_days", 1);
    c->poll_min = si_conf_float(conf, "archive.s3.poll_min", 1.0);
    c->poll_max = si_conf_float(conf, "archive.s3.poll_max", 60.0);
    c->restore_timeout = si_conf_float(conf, "archive.s3.restore_timeout", 2 * 86400.0);
    c->connect_timeout = (long)si_conf_int(conf, "archive.s3.connect_timeout", 10);
    c->timeout = (long)si_conf_int(conf, "archive.s3.timeout", 60);
    c->retries = (int)si_conf_int(conf, "archive.s3.retries", 8);
    c->retry_base = si_conf_float(conf, "archive.s3.retry_base", 0.2);
    c->retry_max = si_conf_float(conf, "archive.s3.retry_max", 30.0);
    if (c->poll_max < c->poll_min)
        return si_conf_fail(conf, "archive.s3.poll_max", err, "(%g) is below archive.s3.poll_min "
                            "(%g)", c->poll_max, c->poll_min);
    if (read_maps(conf, c, err) < 0 ||
        archive_pseudo_volume(conf, "archive.s3.volume", "S3", c->volume, err) < 0)
        return -1;
    return 0;
}

si_s3_t *archive_s3_client(const archive_s3_conf_t *c, si_error_t *err)
{
    si_s3_conf_t sc = {c->endpoint, c->region, c->credentials.access_key, c->credentials.secret,
                       c->connect_timeout, c->timeout, 0, NULL};
    return si_s3_new(&sc, err);
}

const archive_s3_map_t *archive_s3_map_for(const archive_s3_conf_t *c, const char *bucket,
                                           archive_s3_map_t *scratch)
{
    for (size_t i = 0; i < c->nmaps; i++)
        if (strcmp(c->maps[i].bucket, bucket) == 0)
            return &c->maps[i];
    memset(scratch, 0, sizeof(*scratch));
    snprintf(scratch->bucket, sizeof(scratch->bucket), "%s", bucket);
    snprintf(scratch->upstream, sizeof(scratch->upstream), "%s", bucket);
    return scratch;
}

void archive_s3_local_name(const archive_s3_conf_t *c, const char *ubucket, const char *ukey,
                           char bucket[SI_BUCKET_MAX + 1], const char **key)
{
    for (size_t i = 0; i < c->nmaps; i++) {
        const archive_s3_map_t *m = &c->maps[i];
        size_t plen = strlen(m->prefix);
        if (strcmp(m->upstream, ubucket) == 0 && strncmp(ukey, m->prefix, plen) == 0 &&
            ukey[plen]) {
            snprintf(bucket, SI_BUCKET_MAX + 1, "%s", m->bucket);
            *key = ukey + plen;
            return;
        }
    }
    snprintf(bucket, SI_BUCKET_MAX + 1, "%s", ubucket);
    *key = ukey;
}

bool archive_s3_online(const char *storage_class, const char *restore)
{
    bool archived = strcmp(storage_class, "GLACIER") == 0 ||
                    strcmp(storage_class, "DEEP_ARCHIVE") == 0;
    return !archived || strstr(restore, "ongoing-request=\"false\"") != NULL;
}
