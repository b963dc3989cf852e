/* CopyObject and UploadPartCopy: the source read from the cache (a
 * transparent recall first where it is on tape only), written as a new
 * object through the push path or as a part of a multipart upload. */
#include "config.h"
#include "daemon/s3/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/checksum.h"
#include "common/fileio.h"
#include "common/uri.h"
#include "daemon/cache/cache.h"

/* ---- CopyObject -------------------------------------------------------------------- */

/* x-amz-copy-source: "[/]bucket/key[?versionId=...]", percent-encoded. */
static int parse_copy_source(s3_req_t *r, const char *src, char *bucket, char **key,
                             si_error_t *err)
{
    if (*src == '/')
        src++;
    size_t len = strcspn(src, "?");
    si_strbuf_t d;
    si_strbuf_init(&d, SI_KEY_MAX * 4 + SI_BUCKET_MAX + 2);
    if (si_uri_decode(&d, src, len, false, err) < 0 || d.failed) {
        si_strbuf_free(&d);
        return si_errprintf(err, "x-amz-copy-source is not valid percent-encoding");
    }
    const char *all = si_strbuf_str(&d);
    const char *slash = memchr(all, '/', d.len);
    if (!slash || slash == all || slash[1] == '\0' ||
        si_bucket_check(all, (size_t)(slash - all), err) < 0) {
        si_strbuf_free(&d);
        return si_errprintf(err, "x-amz-copy-source must be <bucket>/<key>");
    }
    size_t klen = d.len - (size_t)(slash + 1 - all);
    if (memchr(slash + 1, '\0', klen) || klen > SI_KEY_MAX) {
        si_strbuf_free(&d);
        return si_errprintf(err, "x-amz-copy-source: the key %s", klen > SI_KEY_MAX
                            ? "is over 1024 bytes" : "holds a NUL byte");
    }
    if (si_key_check(slash + 1, klen, err) < 0) {
        si_strbuf_free(&d);
        return si_errprefix(err, "x-amz-copy-source");
    }
    snprintf(bucket, SI_BUCKET_MAX + 1, "%.*s", (int)(slash - all), all);
    *key = strndup(slash + 1, klen);
    si_strbuf_free(&d);
    if (!*key)
        return si_errprintf(err, "out of memory");
    (void)r;
    return 0;
}

static void copy_result(s3_req_t *r, const char *root, const char *etag_hex)
{
    si_strbuf_t x;
    si_strbuf_init(&x, 1024);
    char when[32];
    s3_iso8601((int64_t)time(NULL), when);
    si_strbuf_printf(&x, XML_DECL "<%s xmlns=\"" S3_XMLNS "\"><LastModified>%s"
                     "</LastModified><ETag>&quot;%s&quot;</ETag></%s>", root, when, etag_hex,
                     root);
    s3_respond_xml(r, 200, &x);
}

typedef struct {
    char bucket[SI_BUCKET_MAX + 1];
    char *key;
    s3_object_t o;
    int fd;                            /* its cached bytes; -1: not opened */
    cache_place_t place;               /* where in fd's file they are */
    char etag_hex[S3_ETAG_MAX];        /* its ETag without the quotes */
} copy_source_t;

static void copy_source_close(copy_source_t *src)
{
    if (src->fd >= 0)
        close(src->fd);
    src->fd = -1;
    free(src->key);
    src->key = NULL;
}

/* The x-amz-copy-source of r, readable by r's credential and passing the
 * x-amz-copy-source-if-* conditions (any that fails: 412, as S3 answers
 * copies), with its cached bytes open when bytes: 0, or -1 answered. */
static int copy_source_open(s3_req_t *r, copy_source_t *src, bool bytes)
{
    s3_server_t *s = r->srv;
    si_error_t err = {{0}};
    src->fd = -1;
    src->key = NULL;
    if (parse_copy_source(r, s3_req_header(r, "x-amz-copy-source"), src->bucket, &src->key,
                          &err) < 0) {
        s3_respond_error(r, "InvalidArgument", "%s", err.text);
        return -1;
    }
    bool src_archive = s3_is_archive_bucket(s, src->bucket);
    const char *src_cat_bucket = src_archive ? s->push_bucket : src->bucket;
    char *src_cat_key = malloc(SI_BUCKET_MAX + 2 + strlen(src->key));
    if (!src_cat_key) {
        s3_respond_error(r, "InternalError", "out of memory");
        goto error;
    }
    sprintf(src_cat_key, "%s%s%s", src_archive ? src->bucket : "", src_archive ? "/" : "",
            src->key);
    s3_db_t *db = s3_dbpool_get(s->pool);
    int rc = s3_db_object(db, src_cat_bucket, src_cat_key, &r->who, &src->o, &err);
    int has_bucket = rc == 0 && !src_archive ? s3_db_bucket_has_objects(db, src_cat_bucket, &err)
                                             : 1;
    s3_dbpool_put(s->pool, db);
    free(src_cat_key);
    if (rc < 0 || has_bucket < 0) {
        s3_respond_error(r, "InternalError", "%s", err.text);
        goto error;
    }
    if (rc == 0) {
        if (has_bucket == 0)
            s3_respond_error(r, "NoSuchBucket", "the copy source's bucket %s does not exist",
                             src->bucket);
        else
            s3_respond_error(r, "NoSuchKey", "the copy source %s/%s does not exist",
                             src->bucket, src->key);
        goto error;
    }
    if (!src->o.readable) {
        s3_respond_error(r, "AccessDenied", "this credential may not read the copy source");
        goto error;
    }
    s3_conditions_t c = {
        .if_match = s3_req_header(r, "x-amz-copy-source-if-match"),
        .if_none_match = s3_req_header(r, "x-amz-copy-source-if-none-match"),
        .if_modified_since = s3_req_header(r, "x-amz-copy-source-if-modified-since"),
        .if_unmodified_since = s3_req_header(r, "x-amz-copy-source-if-unmodified-since")};
    if (s3_conditions_eval(&c, src->o.etag, src->o.mtime) != S3_COND_PROCEED) {
        s3_respond_error(r, "PreconditionFailed", "At least one of the pre-conditions you"
                         " specified did not hold (the copy source's ETag is %s)", src->o.etag);
        goto error;
    }
    snprintf(src->etag_hex, sizeof(src->etag_hex), "%.*s", (int)strlen(src->o.etag) - 2,
             src->o.etag + 1);
    if (bytes && cache_open_object(s->cache, src->o.id, &src->fd, &src->place, &err) < 0) {
        if (errno == ENOENT)
            s3_respond_error(r, "InvalidObjectState", "the copy source is archived and not in"
                             " the cache: restore it first (RestoreObject)");
        else
            s3_respond_error(r, "InternalError", "%s", err.text);
        goto error;
    }
    return 0;
error:
    copy_source_close(src);
    return -1;
}

/* What a copy keeps (x-amz-metadata-directive COPY: the source's headers;
 * REPLACE: the request's; the storage class always the request's), and the
 * source's part sizes. 0, or -1 answered. */
static int copy_meta(s3_req_t *r, const copy_source_t *src, si_strbuf_t *headers,
                     char storage_class[S3_STORAGE_CLASS_MAX], si_strbuf_t *part_sizes,
                     bool *replace)
{
    const char *directive = s3_req_header(r, "x-amz-metadata-directive");
    *replace = directive && strcasecmp(directive, "REPLACE") == 0;
    if (directive && !*replace && strcasecmp(directive, "COPY") != 0) {
        s3_respond_error(r, "InvalidArgument", "Unknown metadata directive '%.20s' (COPY or"
                         " REPLACE)", directive);
        return -1;
    }
    if (s3_meta_from_request(r, headers, storage_class) < 0)
        return -1;
    if (!*replace) {
        si_strbuf_reset(headers);
        si_strbuf_puts(headers, src->o.headers);
    }
    if (!src->o.multipart)
        return 0;
    si_error_t err;
    s3_db_t *db = s3_dbpool_get(r->srv->pool);
    int rc = s3_db_part_sizes(db, src->o.id, part_sizes, &err);
    s3_dbpool_put(r->srv->pool, db);
    if (rc < 0) {
        s3_respond_error(r, "InternalError", "%s", err.text);
        return -1;
    }
    return 0;
}

void s3_copy_object(s3_req_t *r)
{
    if (!s3_writable_bucket(r))
        return;
    char bucket[SI_BUCKET_MAX + 1];
    char *key = NULL;
    si_error_t err;
    if (parse_copy_source(r, s3_req_header(r, "x-amz-copy-source"), bucket, &key, &err) < 0) {
        s3_respond_error(r, "InvalidArgument", "%s", err.text);
        return;
    }
    bool itself = strcmp(bucket, r->bucket) == 0 && strcmp(key, r->key) == 0;
    free(key);
    copy_source_t src;
    if (copy_source_open(r, &src, !itself) < 0)
        return;
    si_strbuf_t headers, part_sizes;
    si_strbuf_init(&headers, S3_META_HEADERS_MAX);
    si_strbuf_init(&part_sizes, (size_t)S3_PARTS_MAX * 12);
    char storage_class[S3_STORAGE_CLASS_MAX];
    bool replace;
    if (copy_meta(r, &src, &headers, storage_class, &part_sizes, &replace) < 0)
        goto out;
    s3_meta_t meta = {.headers = si_strbuf_str(&headers), .storage_class = storage_class,
                      .part_sizes = si_strbuf_str(&part_sizes)};
    if (itself) {
        /* a copy onto itself changes what the object keeps, not its bytes */
        if (!replace && !s3_req_header(r, "x-amz-storage-class")) {
            s3_respond_error(r, "InvalidRequest", "This copy request is illegal because it is"
                             " trying to copy an object to itself without changing the"
                             " object's metadata, storage class, website redirect location or"
                             " encryption attributes.");
            goto out;
        }
        s3_db_t *db = s3_dbpool_get(r->srv->pool);
        int rc = s3_db_record_object(db, src.o.id, NULL, &meta, &err);
        s3_dbpool_put(r->srv->pool, db);
        if (rc < 0)
            s3_respond_internal(r, "recording the object's metadata", err.text);
        else
            copy_result(r, "CopyObjectResult", src.etag_hex);
        goto out;
    }
    /* the source's ETag is kept: the bytes are the same */
    char recorded[S3_ETAG_MAX];
    if (s3_push_from_files(r, &src.fd, &src.place.offset, &src.place.size, 1, src.etag_hex,
                           &meta, false, recorded,
                           sizeof(recorded)) == 0)
        copy_result(r, "CopyObjectResult", recorded);
out:
    si_strbuf_free(&headers);
    si_strbuf_free(&part_sizes);
    copy_source_close(&src);
}

/* ---- UploadPartCopy ---------------------------------------------------------------- */

/* x-amz-copy-source-range "bytes=FIRST-LAST" within a source of size bytes:
 * 0, or -1 answered. Absent: the whole source. */
static int copy_range(s3_req_t *r, uint64_t size, uint64_t *start, uint64_t *length)
{
    const char *h = s3_req_header(r, "x-amz-copy-source-range");
    *start = 0;
    *length = size;
    if (!h)
        return 0;
    unsigned long long first, last;
    int used = 0;
    if (sscanf(h, "bytes=%llu-%llu%n", &first, &last, &used) != 2 || h[used] || first > last) {
        s3_respond_error(r, "InvalidArgument", "x-amz-copy-source-range must be"
                         " bytes=FIRST-LAST, not '%.60s'", h);
        return -1;
    }
    if (last >= size) {
        s3_respond_error(r, "InvalidRange", "x-amz-copy-source-range %.60s is not within the"
                         " copy source (%" PRIu64 " bytes)", h, size);
        return -1;
    }
    *start = first;
    *length = last - first + 1;
    return 0;
}

/* Copies length bytes at start of fd into out, hashing them (md5_hex). */
static int copy_bytes(int fd, uint64_t start, uint64_t length, int out, char *md5_text,
                      si_error_t *err)
{
    enum { CHUNK = 1 << 20 };
    si_checksum_t *md5 = si_checksum_new("md5", err);
    char *buf = malloc(CHUNK);
    int rc = md5 && buf ? 0 : -1;
    while (rc == 0 && length) {
        ssize_t got = pread(fd, buf, length < CHUNK ? (size_t)length : CHUNK, (off_t)start);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0 || si_write_all(out, buf, (size_t)got) < 0) {
            rc = si_errprintf(err, "copying the source: %s",
                              got == 0 ? "it is shorter than expected" : strerror(errno));
            break;
        }
        si_checksum_update(md5, buf, (size_t)got);
        start += (uint64_t)got;
        length -= (uint64_t)got;
    }
    if (rc == 0)
        si_checksum_final(md5, md5_text);
    si_checksum_free(md5);
    free(buf);
    return rc;
}

void s3_upload_part_copy(s3_req_t *r)
{
    s3_mp_upload_t u;
    int number = s3_mp_part_target(r, &u);
    if (!number)
        return;
    copy_source_t src;
    char tmp[PATH_MAX + 64];
    int fd = -1;
    uint64_t start, length;
    if (copy_source_open(r, &src, true) < 0)
        goto out_upload;
    if (copy_range(r, src.place.size, &start, &length) < 0)
        goto out;
    if ((fd = s3_mp_part_create(r, &u, length, tmp, sizeof(tmp))) < 0)
        goto out;
    char md5[SI_CHECKSUM_TEXT_MAX];
    si_error_t err;
    if (copy_bytes(src.fd, src.place.offset + start, length, fd, md5, &err) < 0) {
        close(fd);
        unlink(tmp);
        s3_respond_internal(r, "copying the part", err.text);
        goto out;
    }
    if (s3_mp_store_part(r, u.dir, tmp, fd, number, md5 + 4) == 0)
        copy_result(r, "CopyPartResult", md5 + 4);
out:
    copy_source_close(&src);
out_upload:
    s3_mp_upload_free(&u);
}
