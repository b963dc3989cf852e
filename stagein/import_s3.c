/* stagein catalog import --from-s3 BUCKET[/PREFIX]: the objects of an S3
 * archive (the upstream of the s3 backend, archive.s3.*) listed with
 * ListObjectsV2, page by page, into the catalog in one transaction, so that
 * datasets can be defined over an existing archive. */
#include "config.h"
#include "stagein/import_s3.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/s3client.h"
#include "daemon/archive/glacier.h"

typedef struct {
    const archive_s3_conf_t *conf;
    si_s3_xfer_t *x;
    const char *bucket, *prefix;
    bool etag_md5;
    si_s3_list_t page;
    size_t at;
    bool last_page;
    uint64_t skipped;
    char local_bucket[SI_BUCKET_MAX + 1];
    char checksum[SI_CHECKSUM_TEXT_MAX];
} lister_t;

/* A single-part ETag is the MD5 of the object (not so for multipart
 * uploads, "...-N", nor for SSE-KMS: --no-etag-checksum). */
static bool md5_etag(const char *etag)
{
    if (strlen(etag) != 32)
        return false;
    for (const char *c = etag; *c; c++)
        if (!isxdigit((unsigned char)*c))
            return false;
    return true;
}

static int next_object(void *arg, catalog_listed_object_t *out, si_error_t *err)
{
    lister_t *l = arg;
    for (;;) {
        while (l->at < l->page.n) {
            const si_s3_object_t *o = &l->page.objects[l->at++];
            size_t klen = strlen(o->key);
            if (klen && o->key[klen - 1] == '/' && o->size == 0) {
                l->skipped++; /* a "directory" marker, not an object */
                continue;
            }
            const char *key;
            archive_s3_local_name(l->conf, l->bucket, o->key, l->local_bucket, &key);
            out->bucket = l->local_bucket;
            out->key = key;
            out->size = o->size;
            out->etag = o->etag[0] ? o->etag : NULL;
            out->storage_class = o->storage_class;
            out->mtime = o->mtime;
            out->checksum = NULL;
            if (l->etag_md5 && md5_etag(o->etag)) {
                snprintf(l->checksum, sizeof(l->checksum), "md5:%s", o->etag);
                for (char *c = l->checksum; *c; c++)
                    *c = (char)tolower((unsigned char)*c);
                out->checksum = l->checksum;
            }
            return 1;
        }
        if (l->last_page)
            return 0;
        char *token = l->page.next_token ? strdup(l->page.next_token) : NULL;
        si_s3_list_free(&l->page);
        l->at = 0;
        si_s3_response_t rs;
        int rc = si_s3_list_page(l->x, l->bucket, l->prefix, token, &l->page, &rs, err);
        si_s3_response_free(&rs);
        free(token);
        if (rc < 0)
            return -1;
        l->last_page = !l->page.truncated;
    }
}

int import_from_s3(catalog_t *cat, const si_conf_t *conf, const char *spec, bool etag_md5,
                   catalog_import_stats_t *stats, uint64_t *skipped, si_error_t *err)
{
    char bucket[SI_BUCKET_MAX + 1];
    const char *slash = strchr(spec, '/');
    size_t blen = slash ? (size_t)(slash - spec) : strlen(spec);
    if (blen >= sizeof(bucket) || si_bucket_check(spec, blen, err) < 0)
        return si_errprefix(err, "--from-s3 '%s'", spec);
    memcpy(bucket, spec, blen);
    bucket[blen] = '\0';
    archive_s3_conf_t *c = malloc(sizeof(*c));
    if (!c)
        return si_errprintf(err, "out of memory");
    int rc = -1;
    si_s3_t *s3 = NULL;
    lister_t l = {.conf = c, .bucket = bucket, .prefix = slash ? slash + 1 : NULL,
                  .etag_md5 = etag_md5};
    if (archive_s3_conf_from(conf, c, err) < 0 || !(s3 = archive_s3_client(c, err)) ||
        !(l.x = si_s3_xfer_new(s3, err)))
        goto out;
    char name[SI_BUCKET_MAX + SI_KEY_MAX + 8];
    snprintf(name, sizeof(name), "s3://%s", spec);
    rc = catalog_import_listing(cat, name, next_object, &l, stats, err);
    if (skipped)
        *skipped = l.skipped;
out:
    si_s3_list_free(&l.page);
    si_s3_xfer_free(l.x);
    si_s3_free(s3);
    free(c);
    return rc;
}
