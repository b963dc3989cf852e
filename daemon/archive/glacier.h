/* The `s3` backend's configuration (the "archive.s3" group), shared with
 * `stagein catalog import --from-s3`, which lists the same upstream. */
#ifndef STAGEIN_ARCHIVE_GLACIER_H
#define STAGEIN_ARCHIVE_GLACIER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/conf.h"
#include "common/error.h"
#include "common/aws/s3client.h"
#include "common/aws/s3secrets.h"
#include "common/text.h"
#include "daemon/archive/backend.h"

#define ARCHIVE_S3_MAPS_MAX 64

/* A catalog bucket and where its objects are upstream: key K of bucket
 * `bucket` is upstream `prefix` + K in `upstream`. */
typedef struct {
    char bucket[SI_BUCKET_MAX + 1];
    char upstream[SI_BUCKET_MAX + 1];
    char prefix[SI_KEY_MAX + 1];
} archive_s3_map_t;

typedef struct {
    char endpoint[512];
    char region[SI_SIGV4_REGION_MAX + 1];
    char credentials_file[4096];
    si_secrets_client_t credentials;
    archive_s3_map_t maps[ARCHIVE_S3_MAPS_MAX];
    size_t nmaps;
    int restores;              /* objects being restored at once */
    int gets;                  /* objects being read at once */
    int parts;                 /* ranges or parts of one object in flight */
    uint64_t part_size;        /* ranged GETs and multipart parts above this size */
    char storage_class[32];    /* of what push writes */
    char restore_tier[16];     /* Expedited | Standard | Bulk */
    int restore_days;
    double poll_min, poll_max; /* seconds between HEADs of a restore in progress */
    double restore_timeout;    /* seconds a restore may take before the item fails */
    long connect_timeout, timeout;
    int retries;               /* attempts after the first, for transient failures */
    double retry_base, retry_max;
    char volume[ARCHIVE_LABEL_MAX + 1];
} archive_s3_conf_t;

/* The group, checked (errors with file:line); the credentials are read now
 * (the file must be 0600 or stricter). */
int archive_s3_conf_from(const si_conf_t *conf, archive_s3_conf_t *out, si_error_t *err);
/* A client for the configured endpoint and credentials. */
si_s3_t *archive_s3_client(const archive_s3_conf_t *c, si_error_t *err);
/* Where the catalog's bucket/key is upstream. */
const archive_s3_map_t *archive_s3_map_for(const archive_s3_conf_t *c, const char *bucket,
                                           archive_s3_map_t *scratch);
/* The catalog's name for an upstream object (the first map whose upstream
 * and prefix match; else the same bucket and key); *key points into ukey. */
void archive_s3_local_name(const archive_s3_conf_t *c, const char *ubucket, const char *ukey,
                           char bucket[SI_BUCKET_MAX + 1], const char **key);
/* Whether an object answering HEAD with these headers can be read now:
 * not an archive class (GLACIER, DEEP_ARCHIVE), or a restored copy. */
bool archive_s3_online(const char *storage_class, const char *restore);

#endif
