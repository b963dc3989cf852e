/* Write operations: PutObject into archive buckets (through the push path:
 * streamed into the cache, recorded and fsync'd before the 200, archived to
 * tape by the push aggregator), with the payload checked as signed
 * (x-amz-content-sha256, aws-chunked chunk signatures and trailers,
 * x-amz-checksum-* headers, Content-MD5); CreateBucket / DeleteBucket of
 * archive buckets. */
#include "config.h"
#include "daemon/s3/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>
#include <sqlite3.h>

#include "common/amzchecksum.h"
#include "common/awschunked.h"
#include "common/checksum.h"
#include "daemon/push/push.h"

typedef struct {
    push_upload_t *upload;
    si_awschunked_t *chunked;          /* aws-chunked bodies */
    si_sigv4_body_check_t *sha;        /* x-amz-content-sha256 with a hash */
    si_checksum_t *md5;                /* the ETag */
    si_amz_checksum_t *amz;            /* an x-amz-checksum-* header to verify */
    char amz_expected[SI_AMZ_CHECKSUM_B64_MAX];
    char amz_header[40];
    const char *content_md5;
    int64_t object_id;
    const char *fail_code;             /* the first failure, answered at the end */
    char fail_text[512];
} put_state_t;

static void put_fail(put_state_t *p, const char *code, const char *text)
{
    if (p->fail_code)
        return;
    p->fail_code = code;
    snprintf(p->fail_text, sizeof(p->fail_text), "%s", text);
}

static void free_state(put_state_t *p)
{
    if (p->upload)
        push_upload_abort(p->upload);
    si_awschunked_free(p->chunked);
    si_sigv4_body_check_free(p->sha);
    si_checksum_free(p->md5);
    si_amz_checksum_free(p->amz);
    free(p);
}

/* Decoded payload bytes: into the upload and the hashes. */
static int payload(void *arg, const void *data, size_t len)
{
    put_state_t *p = arg;
    si_error_t err;
    si_checksum_update(p->md5, data, len);
    if (p->amz)
        si_amz_checksum_update(p->amz, data, len);
    if (push_upload_write(p->upload, data, len, &err) < 0) {
        put_fail(p, errno == EFBIG ? "IncompleteBody" : "InternalError", err.text);
        return -1;
    }
    return 0;
}

static int put_data(s3_req_t *r, const char *data, size_t len)
{
    put_state_t *p = r->body_state;
    if (p->fail_code)
        return -1;
    si_error_t err;
    si_sigv4_status_t st;
    if (p->chunked) {
        if (si_awschunked_feed(p->chunked, data, len, payload, p, &st, &err) < 0) {
            put_fail(p, p->fail_code ? p->fail_code : si_sigv4_status_code(st), err.text);
            return -1;
        }
        return 0;
    }
    if (p->sha)
        si_sigv4_body_check_update(p->sha, data, len);
    return payload(p, data, len);
}

static void put_end(s3_req_t *r)
{
    put_state_t *p = r->body_state;
    si_error_t err;
    si_sigv4_status_t st;
    if (!p->fail_code && p->chunked && si_awschunked_finish(p->chunked, &st, &err) < 0)
        put_fail(p, si_sigv4_status_code(st), err.text);
    if (!p->fail_code && p->sha && si_sigv4_body_check_finish(p->sha, &st, &err) < 0)
        put_fail(p, si_sigv4_status_code(st), err.text);
    char md5[SI_CHECKSUM_TEXT_MAX];
    si_checksum_final(p->md5, md5);
    si_checksum_free(p->md5);
    p->md5 = NULL;
    if (!p->fail_code && p->amz) {
        char got[SI_AMZ_CHECKSUM_B64_MAX];
        si_amz_checksum_final(p->amz, got);
        if (strcmp(got, p->amz_expected) != 0) {
            char text[256];
            snprintf(text, sizeof(text), "%s is %s but the body's is %s", p->amz_header,
                     p->amz_expected, got);
            put_fail(p, "BadDigest", text);
        }
    }
    if (!p->fail_code && p->content_md5) {
        unsigned char bin[16];
        char b64[32];
        for (int i = 0; i < 16; i++) {
            unsigned v;
            sscanf(md5 + 4 + 2 * i, "%2x", &v);
            bin[i] = (unsigned char)v;
        }
        EVP_EncodeBlock((unsigned char *)b64, bin, 16);
        if (strcmp(b64, p->content_md5) != 0)
            put_fail(p, "BadDigest", "The Content-MD5 you specified did not match what we"
                     " received.");
    }
    if (p->fail_code) {
        s3_respond_error(r, p->fail_code, "%s", p->fail_text);
        return;
    }
    push_received_t got;
    push_upload_t *u = p->upload;
    p->upload = NULL;
    if (push_upload_finish(u, &got, &err) < 0) {
        s3_respond_error(r, errno == EBADMSG ? "IncompleteBody" : "InternalError", "%s",
                         err.text);
        return;
    }
    char etag[S3_ETAG_MAX];
    snprintf(etag, sizeof(etag), "\"%s\"", md5 + 4);
    s3_db_t *db = s3_dbpool_get(r->srv->pool);
    int rc = s3_db_set_etag(db, got.object_id, md5 + 4, &err);
    s3_dbpool_put(r->srv->pool, db);
    if (rc < 0)
        si_log(r->srv->log, SI_LOG_WARNING, "s3: PUT %s/%s: recording the ETag: %s", r->bucket,
               r->key, err.text);
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return;
    MHD_add_response_header(resp, "ETag", etag);
    snprintf(r->note + strlen(r->note), sizeof(r->note) - strlen(r->note), " push=%s",
             got.uuid);
    s3_respond(r, 200, resp);
}

static void put_cleanup(s3_req_t *r, bool completed)
{
    (void)completed;
    free_state(r->body_state);
    r->body_state = NULL;
}

static const s3_body_ops_t put_ops = {.data = put_data, .end = put_end, .cleanup = put_cleanup};

static const char *push_error_code(int e)
{
    switch (e) {
    case EACCES: return "AccessDenied";
    case EEXIST: return "OperationAborted";
    case EFBIG: return "EntityTooLarge";
    case EAGAIN: return "SlowDown";
    case EINVAL: return "InvalidArgument";
    default: return "InternalError";
    }
}

/* The x-amz-checksum-<alg> header to verify, if the client sent one. */
static int find_amz_checksum(s3_req_t *r, put_state_t *p, si_error_t *err)
{
    for (size_t i = 0; i < r->nheaders; i++) {
        const char *name = r->headers[i].name;
        si_amz_checksum_alg_t alg;
        if (strncasecmp(name, "x-amz-checksum-", 15) != 0 ||
            strcasecmp(name, "x-amz-checksum-algorithm") == 0 ||
            strcasecmp(name, "x-amz-checksum-type") == 0)
            continue;
        if (si_amz_checksum_alg_parse(name, &alg) < 0)
            return si_errprintf(err, "%s is not a supported checksum (crc32, crc32c, sha1,"
                                " sha256)", name);
        if (!(p->amz = si_amz_checksum_new(alg, err)))
            return -1;
        snprintf(p->amz_header, sizeof(p->amz_header), "%s", si_amz_checksum_header(alg));
        snprintf(p->amz_expected, sizeof(p->amz_expected), "%s", r->headers[i].value);
        return 0;
    }
    return 0;
}

void s3_put_object(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    si_error_t err;
    if (!r->map.archive) {
        s3_respond_error(r, "AccessDenied", "bucket '%s' is read-only: only archive buckets"
                         " (s3.archive_buckets, or made by CreateBucket) take PUTs", r->bucket);
        return;
    }
    bool streaming = r->auth.payload != SI_SIGV4_PAYLOAD_SHA256 &&
                     r->auth.payload != SI_SIGV4_PAYLOAD_UNSIGNED;
    const char *len_text = s3_req_header(r, streaming ? "x-amz-decoded-content-length"
                                                      : "Content-Length");
    uint64_t size;
    if (!len_text || si_parse_u64(len_text, &size) < 0) {
        s3_respond_error(r, "MissingContentLength", "%s is missing or not a number",
                         streaming ? "x-amz-decoded-content-length" : "Content-Length");
        return;
    }
    put_state_t *p = calloc(1, sizeof(*p));
    if (!p || !(p->md5 = si_checksum_new("md5", &err))) {
        free(p);
        s3_respond_error(r, "InternalError", "out of memory");
        return;
    }
    p->content_md5 = s3_req_header(r, "Content-MD5");
    if (find_amz_checksum(r, p, &err) < 0) {
        free_state(p);
        s3_respond_error(r, "InvalidRequest", "%s", err.text);
        return;
    }
    if (streaming) {
        si_awschunked_conf_t cc = {.payload = r->auth.payload, .key = &r->auth.key,
                                   .amz_date = r->auth.amz_date,
                                   .seed_signature = r->auth.signature,
                                   .trailer = s3_req_header(r, "x-amz-trailer"),
                                   .decoded_length = (int64_t)size};
        if (!(p->chunked = si_awschunked_new(&cc, &err))) {
            free_state(p);
            s3_respond_error(r, "InvalidRequest", "%s", err.text);
            return;
        }
    } else if (r->auth.payload == SI_SIGV4_PAYLOAD_SHA256 &&
               !(p->sha = si_sigv4_body_check_new(r->auth.payload_sha256, &err))) {
        free_state(p);
        s3_respond_error(r, "InternalError", "%s", err.text);
        return;
    }
    char checksum[80];
    if (r->auth.payload == SI_SIGV4_PAYLOAD_SHA256)
        snprintf(checksum, sizeof(checksum), "sha256:%s", r->auth.payload_sha256);
    push_file_t f = {.uid = r->who.uid, .gid = r->who.gid, .dataset = r->bucket, .key = r->key,
                     .mode = -1, .size = size,
                     .checksum = r->auth.payload == SI_SIGV4_PAYLOAD_SHA256 ? checksum : NULL,
                     .mtime = -1};
    if (push_upload_begin(s->push, &f, &p->upload, &err) < 0) {
        const char *code = push_error_code(errno);
        p->upload = NULL;
        free_state(p);
        s3_respond_error(r, code, "%s", err.text);
        return;
    }
    r->body = &put_ops;
    r->body_state = p;
}

/* ---- buckets ------------------------------------------------------------------- */

void s3_create_bucket(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    si_error_t err;
    if (!s->push) {
        s3_respond_error(r, "NotImplemented", "this server has no archive (push) service");
        return;
    }
    if (s3_is_archive_bucket(s, r->bucket)) {
        s3_respond_error(r, "BucketAlreadyOwnedByYou", NULL);
        return;
    }
    s3_db_t *db = s3_dbpool_get(s->pool);
    int has = s3_db_bucket_has_objects(db, r->bucket, &err);
    uid_t owner = 0;
    int rc = has != 0 ? 0 : s3_db_create_archive_bucket(db, r->bucket, &r->who, &owner, &err);
    int e = errno;
    s3_dbpool_put(s->pool, db);
    if (has < 0 || (has == 0 && rc < 0 && e != EEXIST)) {
        s3_respond_error(r, "InternalError", "%s", err.text);
        return;
    }
    if (has == 1 || rc < 0) {
        s3_respond_error(r, "BucketAlreadyExists", "'%s' names %s", r->bucket,
                         has == 1 ? "a bucket of the catalog" : "an existing dataset");
        return;
    }
    s3_add_created_bucket(s, r->bucket);
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return;
    char loc[SI_BUCKET_MAX + 2];
    snprintf(loc, sizeof(loc), "/%s", r->bucket);
    MHD_add_response_header(resp, "Location", loc);
    s3_respond(r, 200, resp);
}

void s3_delete_bucket(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    si_error_t err;
    if (!r->map.archive) {
        s3_db_t *db = s3_dbpool_get(s->pool);
        int has = s3_db_bucket_has_objects(db, r->bucket, &err);
        s3_dbpool_put(s->pool, db);
        if (has == 1)
            s3_respond_error(r, "AccessDenied", "'%s' is a bucket of the catalog, not an"
                             " archive bucket: it cannot be deleted over S3", r->bucket);
        else
            s3_respond_error(r, "NoSuchBucket", NULL);
        return;
    }
    if (s3_bucket_list_has(&s->conf.archive_buckets, r->bucket)) {
        s3_respond_error(r, "AccessDenied", "'%s' is configured (s3.archive_buckets)",
                         r->bucket);
        return;
    }
    s3_db_t *db = s3_dbpool_get(s->pool);
    int rc = s3_db_delete_archive_bucket(db, r->bucket, &err);
    int e = errno;
    s3_dbpool_put(s->pool, db);
    if (rc < 0) {
        s3_respond_error(r, e == ENOTEMPTY ? "BucketNotEmpty" : "InternalError", "%s",
                         err.text);
        return;
    }
    s3_remove_created_bucket(s, r->bucket);
    s3_respond_empty(r, 204);
}
