/* The "s3" group of stagein.conf. */
#include "config.h"
#include "daemon/s3/s3.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/sigv4.h"
#include "common/text.h"

const si_conf_key_t s3_conf_keys[] = {
    {"s3", SI_CONF_GROUP, 0, 0, NULL},
    {"s3.enabled", SI_CONF_BOOL, 0, 0, NULL},
    {"s3.bind", SI_CONF_STRING, 0, 0, NULL},
    {"s3.port", SI_CONF_INT, 0, 65535, NULL},
    {"s3.secrets_file", SI_CONF_STRING, 0, 0, NULL},
    {"s3.region", SI_CONF_STRING, 0, 0, NULL},
    {"s3.clock_skew", SI_CONF_INT, 1, 604800, NULL},
    {"s3.public_buckets", SI_CONF_LIST, 0, -1, NULL},
    {"s3.public_buckets.[]", SI_CONF_STRING, 0, 0, NULL},
    {"s3.transparent_recall_buckets", SI_CONF_LIST, 0, -1, NULL},
    {"s3.transparent_recall_buckets.[]", SI_CONF_STRING, 0, 0, NULL},
    {"s3.transparent_recall_max_wait", SI_CONF_INT, 0, 86400, NULL},
    {"s3.archive_buckets", SI_CONF_LIST, 0, -1, NULL},
    {"s3.archive_buckets.[]", SI_CONF_STRING, 0, 0, NULL},
    /* configured archive buckets are shared: root owns them, with this
     * group and mode; each object stays its writer's (doc/s3.md) */
    {"s3.archive_bucket_mode", SI_CONF_STRING, 0, 0, NULL}, /* octal, "0600" */
    {"s3.archive_bucket_group", SI_CONF_INT, 0, 4294967294LL, NULL},
    /* uploads: a floor on each body's rate, and per-user bounds */
    {"s3.min_upload_rate", SI_CONF_INT, 0, 1LL << 40, NULL},
    {"s3.max_user_uploads", SI_CONF_INT, 0, 1000000, NULL},
    {"s3.max_user_upload_bytes", SI_CONF_INT, 0, 9.2e18, NULL},
    {"s3.max_header_size", SI_CONF_INT, 1024, 1048576, NULL},
    {"s3.timeout", SI_CONF_INT, 1, 86400, NULL},
    {"s3.threads", SI_CONF_INT, 1, 1024, NULL},
    {"s3.io_threads", SI_CONF_INT, 0, 256, NULL},
    {"s3.max_connections", SI_CONF_INT, 0, 1000000, NULL},
    /* virtual-host style: "bucket.DOMAIN" in Host names the bucket */
    {"s3.virtual_host_domain", SI_CONF_STRING, 0, 0, NULL},
    /* TLS: PEM certificate (chain) and key; the key file must be 0600 */
    {"s3.tls_cert_file", SI_CONF_STRING, 0, 0, NULL},
    {"s3.tls_key_file", SI_CONF_STRING, 0, 0, NULL},
    SI_CONF_KEYS_END,
};

void s3_conf_defaults(s3_conf_t *conf)
{
    memset(conf, 0, sizeof(*conf));
    snprintf(conf->bind, sizeof(conf->bind), "127.0.0.1");
    conf->port = 9000;
    snprintf(conf->secrets_file, sizeof(conf->secrets_file), "%s/stagein/s3-secrets",
             SYSCONFDIR);
    snprintf(conf->region, sizeof(conf->region), "us-east-1");
    conf->clock_skew = SI_SIGV4_DEFAULT_SKEW_S;
    conf->transparent_recall_max_wait = 60;
    conf->max_header_size = 16384;
    conf->timeout = 60;
    conf->threads = 16;
    conf->archive_bucket_mode = 0600;
    conf->min_upload_rate = 16384;
    conf->max_user_uploads = 64;
    conf->max_user_upload_bytes = S3_HALF_CACHE;
}

bool s3_bucket_list_has(const s3_bucket_list_t *l, const char *bucket)
{
    for (size_t i = 0; i < l->count; i++)
        if (strcmp(l->name[i], bucket) == 0)
            return true;
    return false;
}

static int bucket_list(const si_conf_t *conf, const char *path, s3_bucket_list_t *out,
                       si_error_t *err)
{
    const config_setting_t *list = si_conf_setting(conf, path);
    out->count = 0;
    if (!list)
        return 0;
    int n = config_setting_length(list);
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
        const char *name = config_setting_get_string(e);
        const char *file = si_conf_file_of(conf, e);
        int line = config_setting_source_line(e);
        if (!name || si_bucket_check(name, strlen(name), err) < 0)
            return si_errprefix(err, "%s:%d: %s", file, line, path);
        if (out->count == S3_BUCKET_LIST_MAX)
            return si_errprintf(err, "%s:%d: %s names more than %d buckets",
                                file, line, path, S3_BUCKET_LIST_MAX);
        snprintf(out->name[out->count++], SI_BUCKET_MAX + 1, "%s", name);
    }
    return 0;
}

/* A string setting into buf; absent leaves buf as it is. */
static int copy_setting(const si_conf_t *conf, const char *path, char *buf, size_t size,
                        si_error_t *err)
{
    const char *v = si_conf_string(conf, path, NULL);
    if (v && (size_t)snprintf(buf, size, "%s", v) >= size)
        return si_errprintf(err, "%s: too long (at most %zu bytes)", path, size - 1);
    return 0;
}

int s3_conf_from(const si_conf_t *conf, s3_conf_t *out, si_error_t *err)
{
    s3_conf_t *c = calloc(1, sizeof(*c));
    if (!c)
        return si_errprintf(err, "out of memory");
    s3_conf_defaults(c);
    c->enabled = si_conf_bool(conf, "s3.enabled", c->enabled);
    const char *bind = si_conf_string(conf, "s3.bind", c->bind);
    if (strlen(bind) >= sizeof(c->bind)) {
        si_errprintf(err, "s3.bind: '%.80s' is not a numeric address", bind);
        goto error;
    }
    if (bind != c->bind) /* the default is c->bind itself: no overlapping copy */
        snprintf(c->bind, sizeof(c->bind), "%s", bind);
    c->port = (int)si_conf_int(conf, "s3.port", c->port);
    const char *secrets = si_conf_string(conf, "s3.secrets_file", c->secrets_file);
    if (strlen(secrets) >= sizeof(c->secrets_file)) {
        si_errprintf(err, "s3.secrets_file: path too long");
        goto error;
    }
    if (secrets != c->secrets_file) /* the default is c->secrets_file itself: no overlapping copy */
        snprintf(c->secrets_file, sizeof(c->secrets_file), "%s", secrets);
    const char *region = si_conf_string(conf, "s3.region", c->region);
    if (!*region || strlen(region) > S3_REGION_MAX || strspn(region,
            "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(region)) {
        si_errprintf(err, "s3.region: '%.80s' is not a region name ([a-z0-9-], 1 to %d)",
                     region, S3_REGION_MAX);
        goto error;
    }
    if (region != c->region) /* the default is c->region itself: no overlapping copy */
        snprintf(c->region, sizeof(c->region), "%s", region);
    c->clock_skew = (int)si_conf_int(conf, "s3.clock_skew", c->clock_skew);
    c->transparent_recall_max_wait =
        (int)si_conf_int(conf, "s3.transparent_recall_max_wait", c->transparent_recall_max_wait);
    c->max_header_size = (size_t)si_conf_int(conf, "s3.max_header_size",
                                             (int64_t)c->max_header_size);
    c->timeout = (unsigned)si_conf_int(conf, "s3.timeout", c->timeout);
    c->threads = (unsigned)si_conf_int(conf, "s3.threads", c->threads);
    c->io_threads = (unsigned)si_conf_int(conf, "s3.io_threads", c->io_threads);
    c->max_connections = (unsigned)si_conf_int(conf, "s3.max_connections", c->max_connections);
    const char *mode = si_conf_string(conf, "s3.archive_bucket_mode", NULL);
    if (mode) {
        if (si_parse_mode(mode, &c->archive_bucket_mode) < 0) {
            si_errprintf(err, "s3.archive_bucket_mode: '%.20s' is not an octal permission mode"
                         " (\"0600\" to \"0777\")", mode);
            goto error;
        }
    }
    c->archive_bucket_group = (gid_t)si_conf_int(conf, "s3.archive_bucket_group",
                                                 c->archive_bucket_group);
    c->min_upload_rate = (uint64_t)si_conf_int(conf, "s3.min_upload_rate",
                                               (int64_t)c->min_upload_rate);
    c->max_user_uploads = (unsigned)si_conf_int(conf, "s3.max_user_uploads",
                                                c->max_user_uploads);
    c->max_user_upload_bytes = (uint64_t)si_conf_int(conf, "s3.max_user_upload_bytes",
                                                     (int64_t)c->max_user_upload_bytes);
    if (copy_setting(conf, "s3.virtual_host_domain", c->vhost_domain,
                     sizeof(c->vhost_domain), err) < 0 ||
        copy_setting(conf, "s3.tls_cert_file", c->tls_cert_file, sizeof(c->tls_cert_file),
                     err) < 0 ||
        copy_setting(conf, "s3.tls_key_file", c->tls_key_file, sizeof(c->tls_key_file),
                     err) < 0)
        goto error;
    if (c->vhost_domain[0] && (c->vhost_domain[0] == '.' ||
                               strspn(c->vhost_domain, "abcdefghijklmnopqrstuvwxyz0123456789.-") !=
                                   strlen(c->vhost_domain))) {
        si_errprintf(err, "s3.virtual_host_domain: '%.80s' is not a lower-case DNS name",
                     c->vhost_domain);
        goto error;
    }
    if (!c->tls_cert_file[0] != !c->tls_key_file[0]) {
        si_errprintf(err, "s3.tls_cert_file and s3.tls_key_file go together (TLS needs both)");
        goto error;
    }
    if (bucket_list(conf, "s3.public_buckets", &c->public_buckets, err) < 0 ||
        bucket_list(conf, "s3.transparent_recall_buckets", &c->transparent_recall_buckets,
                    err) < 0 ||
        bucket_list(conf, "s3.archive_buckets", &c->archive_buckets, err) < 0)
        goto error;
    *out = *c;
    free(c);
    return 0;
error:
    free(c);
    return -1;
}
