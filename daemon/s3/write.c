/* Write operations: PutObject into archive buckets (through the push path:
 * streamed into the cache, recorded and fsync'd before the 200, archived to
 * tape by the push aggregator), with the payload checked as signed
 * (x-amz-content-sha256, aws-chunked chunk signatures and trailers,
 * x-amz-checksum-* headers, Content-MD5); UploadPart (the same checks, the
 * body into a part file); CreateBucket / DeleteBucket of archive buckets;
 * DeleteObject(s). */
#include "config.h"
#include "daemon/s3/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/aws/amzchecksum.h"
#include "common/aws/awschunked.h"
#include "common/checksum.h"
#include "common/fileio.h"
#include "common/uri.h"
#include "daemon/cache/cache.h"
#include "daemon/push/push.h"

typedef struct {
    push_upload_t *upload;
    si_awschunked_t *chunked;          /* aws-chunked bodies */
    si_sigv4_body_check_t *sha;        /* x-amz-content-sha256 with a hash */
    si_checksum_t *md5;                /* the ETag; for large bodies */
    si_checksum_async_t *md5_async;    /* on a thread of its own */
    si_amz_checksum_t *amz;            /* an x-amz-checksum-* header to verify */
    char amz_expected[SI_AMZ_CHECKSUM_B64_MAX];
    char amz_header[40];
    const char *content_md5;
    int64_t object_id;
    /* UploadPart: the body goes to a part file instead of a push upload */
    int part_fd;
    char part_tmp[PATH_MAX];
    char part_dir[PATH_MAX];
    int part_number;
    uint64_t expected, written;
    bool rdma;                         /* the body is in the client's memory */
    /* x-amz-content-sha256 checked by the cache writer (the push's
     * expected checksum) rather than hashed here a second time */
    bool sha_by_cache;
    si_rdma_token_t rdma_token;
    /* PUT, once submitted: the body's MD5 ("md5:<hex>"), and how its batch
     * commit ended (put_done) */
    char etag_md5[SI_CHECKSUM_TEXT_MAX];
    bool whole;                        /* every declared byte came */
    int commit_rc, commit_errno;
    char commit_why[512];
    push_received_t committed;
    const char *fail_code;             /* the first failure, answered at the end */
    char fail_text[512];
    si_log_t *log;
    si_strbuf_t meta_headers;          /* PUT: what the object keeps (s3_meta_t) */
    s3_quota_t *quota;                 /* holds quota_bytes of quota_uid's; NULL: nothing */
    uid_t quota_uid;
    uint64_t quota_bytes;
    char storage_class[S3_STORAGE_CLASS_MAX];
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
    if (p->quota)
        s3_quota_give(p->quota, p->quota_uid, p->quota_bytes);
    si_awschunked_free(p->chunked);
    si_sigv4_body_check_free(p->sha);
    si_checksum_free(p->md5);
    si_checksum_async_free(p->md5_async);
    si_amz_checksum_free(p->amz);
    si_strbuf_free(&p->meta_headers);
    if (p->part_fd >= 0) {
        close(p->part_fd);
        unlink(p->part_tmp);
    }
    free(p);
}

/* Decoded payload bytes: into the upload and the hashes. */
static int payload(void *arg, const void *data, size_t len)
{
    put_state_t *p = arg;
    si_error_t err;
    if (p->md5_async)
        si_checksum_async_update(p->md5_async, data, len);
    else
        si_checksum_update(p->md5, data, len);
    if (p->amz)
        si_amz_checksum_update(p->amz, data, len);
    if (!p->upload) {
        p->written += len;
        if (p->written > p->expected) {
            put_fail(p, "IncompleteBody", "the body is longer than its Content-Length");
            return -1;
        }
        if (si_write_all(p->part_fd, data, len) < 0) {
            si_log(p->log, SI_LOG_ERROR, "s3: writing %s: %s", p->part_tmp, strerror(errno));
            put_fail(p, "InternalError", errno == ENOSPC ? "storing the part: no space left"
                                                           : "storing the part failed");
            return -1;
        }
        return 0;
    }
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

static int rdma_payload(void *arg, const void *data, size_t len, si_error_t *err)
{
    s3_req_t *r = arg;
    if (put_data(r, data, len) == 0)
        return 0;
    put_state_t *p = r->body_state;
    return si_errprintf(err, "%s", p->fail_text);
}

/* An RDMA body: read from the client through put_data. -1: answered (the
 * body's own error, or 501 for a transfer that failed: send it by HTTP). */
static int rdma_body(s3_req_t *r)
{
    put_state_t *p = r->body_state;
    si_error_t err;
    if (!p->rdma || s3_rdma_put_receive(r, &p->rdma_token, rdma_payload, r, &err) == 0)
        return 0;
    if (p->fail_code)
        s3_respond_error(r, p->fail_code, "%s", p->fail_text);
    else
        s3_rdma_put_failed(r, err.text);
    return -1;
}

/* The answer to a stored body: its ETag, and how it came. */
static void respond_stored(s3_req_t *r, const char *md5_hex, const char *note)
{
    put_state_t *p = r->body_state;
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return;
    char etag[S3_ETAG_MAX];
    snprintf(etag, sizeof(etag), "\"%s\"", md5_hex);
    MHD_add_response_header(resp, "ETag", etag);
    if (p->amz) /* verified: S3 answers with the checksum it stored */
        MHD_add_response_header(resp, p->amz_header, p->amz_expected);
    if (p->rdma)
        s3_rdma_replied(r, resp, p->rdma_token.len);
    if (note)
        snprintf(r->note + strlen(r->note), sizeof(r->note) - strlen(r->note), " %s", note);
    s3_respond(r, 200, resp);
}

/* After the last byte: the signatures and checksums of the body; the
 * body's MD5 into md5 ("md5:<hex>"). */
static void body_verify(put_state_t *p, char md5[SI_CHECKSUM_TEXT_MAX])
{
    si_error_t err;
    si_sigv4_status_t st;
    if (!p->fail_code && p->chunked && si_awschunked_finish(p->chunked, &st, &err) < 0)
        put_fail(p, si_sigv4_status_code(st), err.text);
    if (!p->fail_code && p->sha && si_sigv4_body_check_finish(p->sha, &st, &err) < 0)
        put_fail(p, si_sigv4_status_code(st), err.text);
    if (p->md5_async) {
        si_checksum_async_final(p->md5_async, md5);
        si_checksum_async_free(p->md5_async);
        p->md5_async = NULL;
    } else {
        si_checksum_final(p->md5, md5);
        si_checksum_free(p->md5);
        p->md5 = NULL;
    }
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
}

/* The upload was not stored (errnum, why: push_upload_submit's). */
static void respond_not_stored(s3_req_t *r, int errnum, const char *why)
{
    put_state_t *p = r->body_state;
    if (errnum == EBADMSG && p->whole && p->sha_by_cache)
        s3_respond_error(r, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256'"
                         " header does not match what was computed (%s)", why);
    else
        s3_respond_error(r, errnum == EBADMSG ? "IncompleteBody" : "InternalError", "%s", why);
}

/* The upload's batch is durable (or failed): record what the object came
 * with, then answer. On a worker. */
static void put_committed(s3_req_t *r)
{
    put_state_t *p = r->body_state;
    si_error_t err;
    if (p->commit_rc < 0) {
        respond_not_stored(r, p->commit_errno, p->commit_why);
        return;
    }
    s3_meta_t meta = {.headers = si_strbuf_str(&p->meta_headers),
                      .storage_class = p->storage_class};
    s3_db_t *db = s3_dbpool_get(r->srv->pool);
    int rc = s3_db_record_object(db, p->committed.object_id, p->etag_md5 + 4, &meta, &err);
    s3_dbpool_put(r->srv->pool, db);
    if (rc < 0) {
        /* the bytes are stored, what they came with is not: not acknowledged */
        s3_respond_internal(r, "recording the object's ETag and metadata", err.text);
        return;
    }
    char note[64];
    snprintf(note, sizeof(note), "push=%s", p->committed.uuid);
    respond_stored(r, p->etag_md5 + 4, note);
}

/* On the cache's committer thread: must not wait. */
static void put_done(void *arg, int rc, int errnum, const push_received_t *file,
                     const char *why)
{
    s3_req_t *r = arg;
    put_state_t *p = r->body_state;
    p->commit_rc = rc;
    p->commit_errno = errnum;
    if (file)
        p->committed = *file;
    snprintf(p->commit_why, sizeof(p->commit_why), "%s", why ? why : "");
    s3_continue(r, put_committed);
}

static void put_end(s3_req_t *r)
{
    put_state_t *p = r->body_state;
    si_error_t err;
    if (rdma_body(r) < 0)
        return;
    body_verify(p, p->etag_md5);
    if (p->fail_code) {
        s3_respond_error(r, p->fail_code, "%s", p->fail_text);
        return;
    }
    push_upload_t *u = p->upload;
    p->upload = NULL;
    p->whole = push_upload_received(u) == p->expected;
    /* answered once the batch holding it is durable (put_done), without
     * holding this thread meanwhile */
    s3_hold(r);
    if (push_upload_submit(u, put_done, r, &err) < 0) {
        s3_release(r);
        respond_not_stored(r, errno, err.text);
    }
}

static void put_cleanup(s3_req_t *r, bool completed)
{
    (void)completed;
    free_state(r->body_state);
    r->body_state = NULL;
}

static const s3_body_ops_t put_ops = {.data = put_data, .end = put_end, .cleanup = put_cleanup};

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

/* Bodies from this size on have their MD5 (the ETag) computed on a thread
 * of its own, beside the SHA-256 and the write on this one. */
#define MD5_ASYNC_MIN (8u << 20)

/* The ETag's hash for a body of size bytes (a sync one replaced). */
static int md5_begin(put_state_t *p, uint64_t size, si_error_t *err)
{
    si_checksum_free(p->md5);
    si_checksum_async_free(p->md5_async);
    p->md5 = NULL;
    p->md5_async = NULL;
    if (size >= MD5_ASYNC_MIN)
        return (p->md5_async = si_checksum_async_new("md5", err)) ? 0 : -1;
    return (p->md5 = si_checksum_new("md5", err)) ? 0 : -1;
}

/* The state of a body to verify as signed (its declared length in *size),
 * or NULL with the answer given. */
static put_state_t *body_begin(s3_req_t *r, uint64_t *size_out)
{
    si_error_t err;
    bool streaming = r->auth.payload != SI_SIGV4_PAYLOAD_SHA256 &&
                     r->auth.payload != SI_SIGV4_PAYLOAD_UNSIGNED;
    const char *len_text = s3_req_header(r, streaming ? "x-amz-decoded-content-length"
                                                      : "Content-Length");
    uint64_t size;
    if (!len_text || si_parse_u64(len_text, &size) < 0) {
        s3_respond_error(r, "MissingContentLength", "%s is missing or not a number",
                         streaming ? "x-amz-decoded-content-length" : "Content-Length");
        return NULL;
    }
    put_state_t *p = calloc(1, sizeof(*p));
    if (!p || md5_begin(p, size, &err) < 0) {
        free(p);
        s3_respond_error(r, "InternalError", "out of memory");
        return NULL;
    }
    p->part_fd = -1;
    p->log = r->srv->log;
    si_strbuf_init(&p->meta_headers, S3_META_HEADERS_MAX);
    p->content_md5 = s3_req_header(r, "Content-MD5");
    if (find_amz_checksum(r, p, &err) < 0) {
        free_state(p);
        s3_respond_error(r, "InvalidRequest", "%s", err.text);
        return NULL;
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
            return NULL;
        }
    } else if (r->auth.payload == SI_SIGV4_PAYLOAD_SHA256 &&
               !(p->sha = si_sigv4_body_check_new(r->auth.payload_sha256, &err))) {
        free_state(p);
        s3_respond_error(r, "InternalError", "%s", err.text);
        return NULL;
    }
    *size_out = size;
    return p;
}

/* One more arriving upload of size bytes for the caller (s3.max_user_*);
 * -1: answered 503 SlowDown (a client backs off and retries) and p freed. */
static int take_quota(s3_req_t *r, put_state_t *p, uint64_t size)
{
    si_error_t err;
    if (s3_quota_take(r->srv->quota, r->who.uid, size, &err) < 0) {
        free_state(p);
        s3_respond_error(r, "SlowDown", "%s", err.text);
        return -1;
    }
    p->quota = r->srv->quota;
    p->quota_uid = r->who.uid;
    p->quota_bytes = size;
    return 0;
}

/* The body in the client's memory (*size: its length), or in the request;
 * -1: answered 501 and p freed. */
static int body_by_rdma(s3_req_t *r, put_state_t *p, uint64_t *size)
{
    int rc = s3_rdma_put_accept(r, *size, &p->rdma_token);
    if (rc < 0) {
        free_state(p);
        return -1;
    }
    if (rc > 0) {
        si_error_t err;
        p->rdma = true;
        *size = p->rdma_token.len;
        if (md5_begin(p, *size, &err) < 0) {
            free_state(p);
            s3_respond_error(r, "InternalError", "%s", err.text);
            return -1;
        }
    }
    return 0;
}

void s3_put_object(s3_req_t *r)
{
    si_error_t err;
    if (!s3_writable_bucket(r))
        return;
    char *cat_key = s3_req_catalog_key(r);
    if (!cat_key)
        return;
    bool no_replace;
    if (s3_put_conditions(r, cat_key, &no_replace) < 0) {
        free(cat_key);
        return;
    }
    uint64_t size;
    put_state_t *p = body_begin(r, &size);
    if (!p || body_by_rdma(r, p, &size) < 0 || take_quota(r, p, size) < 0) {
        free(cat_key);
        return;
    }
    if (s3_meta_from_request(r, &p->meta_headers, p->storage_class) < 0) {
        free(cat_key);
        free_state(p);
        return;
    }
    char checksum[80];
    if (r->auth.payload == SI_SIGV4_PAYLOAD_SHA256)
        snprintf(checksum, sizeof(checksum), "sha256:%s", r->auth.payload_sha256);
    push_file_t f = {.uid = r->who.uid, .gid = r->who.gid, .dataset = r->bucket, .key = r->key,
                     .mode = -1, .size = size,
                     .checksum = r->auth.payload == SI_SIGV4_PAYLOAD_SHA256 ? checksum : NULL,
                     .mtime = -1, .shared = r->map.shared};
    int rc = s3_begin_replacing(r, cat_key, &f, no_replace, &p->upload, &err);
    free(cat_key);
    if (rc < 0 && no_replace && errno == EEXIST) {
        p->upload = NULL;
        free_state(p);
        s3_respond_error(r, "PreconditionFailed", "If-None-Match: * and %s/%s exists",
                         r->bucket, r->key);
        return;
    }
    if (rc < 0) {
        const char *code = s3_push_error_code(errno);
        p->upload = NULL;
        free_state(p);
        s3_respond_error(r, code, "%s", err.text);
        return;
    }
    p->expected = size;
    if (p->sha) {
        si_sigv4_body_check_free(p->sha);
        p->sha = NULL;
        p->sha_by_cache = true;
    }
    r->body = &put_ops;
    r->body_state = p;
}

/* ---- buckets ------------------------------------------------------------------- */

static void create_bucket_end(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    si_error_t err;
    char location[S3_LOCATION_MAX + 1];
    if (s3_parse_create_bucket(si_strbuf_str(&r->xml), r->xml.len, location, &err) < 0) {
        s3_respond_error(r, "MalformedXML", "CreateBucketConfiguration: %s", err.text);
        return;
    }
    /* one region: none named (S3's us-east-1) or this one */
    if (location[0] && strcmp(location, s->conf.region) != 0) {
        s3_respond_error(r, "IllegalLocationConstraintException", "The %.63s location"
                         " constraint is incompatible for the region specific endpoint this"
                         " request was sent to (%s)", location, s->conf.region);
        return;
    }
    uid_t owner;
    if (s3_created_bucket_owner(s, r->bucket, &owner) && owner != r->who.uid) {
        s3_respond_error(r, "BucketAlreadyExists", "'%s' belongs to another user", r->bucket);
        return;
    }
    if (s3_is_archive_bucket(s, r->bucket)) {
        s3_respond_error(r, "BucketAlreadyOwnedByYou", NULL);
        return;
    }
    s3_db_t *db = s3_dbpool_get(s->pool);
    int has = s3_db_bucket_has_objects(db, r->bucket, &err);
    owner = 0;
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
    s3_add_created_bucket(s, r->bucket, owner);
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return;
    char loc[SI_BUCKET_MAX + 2];
    snprintf(loc, sizeof(loc), "/%s", r->bucket);
    MHD_add_response_header(resp, "Location", loc);
    s3_respond(r, 200, resp);
}

void s3_create_bucket(s3_req_t *r)
{
    if (!r->srv->push) {
        s3_respond_error(r, "NotImplemented", "this server has no archive (push) service");
        return;
    }
    s3_expect_xml_body(r, create_bucket_end);
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
    if (!s3_writable_bucket(r))
        return;
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

/* ---- UploadPart ------------------------------------------------------------------ */

static void part_end(s3_req_t *r)
{
    put_state_t *p = r->body_state;
    char md5[SI_CHECKSUM_TEXT_MAX];
    if (rdma_body(r) < 0)
        return;
    body_verify(p, md5);
    if (!p->fail_code && p->written != p->expected)
        put_fail(p, "IncompleteBody", "the body is shorter than its Content-Length");
    if (p->fail_code) {
        s3_respond_error(r, p->fail_code, "%s", p->fail_text);
        return;
    }
    int fd = p->part_fd;
    p->part_fd = -1;
    if (s3_mp_store_part(r, p->part_dir, p->part_tmp, fd, p->part_number, md5 + 4) == 0)
        respond_stored(r, md5 + 4, NULL);
}

static const s3_body_ops_t part_ops = {.data = put_data, .end = part_end,
                                       .cleanup = put_cleanup};

void s3_upload_part(s3_req_t *r)
{
    s3_mp_upload_t u;
    int number = s3_mp_part_target(r, &u);
    if (!number)
        return;
    uint64_t size;
    put_state_t *p = body_begin(r, &size);
    if (!p || body_by_rdma(r, p, &size) < 0 || take_quota(r, p, size) < 0) {
        s3_mp_upload_free(&u);
        return;
    }
    p->expected = size;
    p->part_number = (int)number;
    snprintf(p->part_dir, sizeof(p->part_dir), "%s", u.dir);
    p->part_fd = s3_mp_part_create(r, &u, size, p->part_tmp, sizeof(p->part_tmp));
    s3_mp_upload_free(&u);
    if (p->part_fd < 0) {
        free_state(p);
        return;
    }
    r->body = &part_ops;
    r->body_state = p;
}

/* ---- DeleteObject(s) ------------------------------------------------------------ */

void s3_delete_object(s3_req_t *r)
{
    if (!s3_writable_bucket(r))
        return;
    char *cat_key = s3_req_catalog_key(r);
    if (!cat_key)
        return;
    const char *code;
    si_error_t err;
    int rc = s3_delete_one(r, cat_key, &code, &err);
    free(cat_key);
    if (rc < 0)
        s3_respond_error(r, code, "%s", err.text);
    else
        s3_respond_empty(r, 204);
}

static void delete_objects_end(s3_req_t *r)
{
    s3_delete_request_t d = {0};
    si_error_t err;
    if (s3_parse_delete(si_strbuf_str(&r->xml), r->xml.len, &d, &err) < 0) {
        s3_respond_error(r, "MalformedXML", "%s", err.text);
        return;
    }
    si_strbuf_t x;
    si_strbuf_init(&x, RESPONSE_XML_MAX);
    si_strbuf_puts(&x, XML_DECL "<DeleteResult xmlns=\"" S3_XMLNS "\">");
    for (size_t i = 0; i < d.nkeys; i++) {
        const char *key = d.keys[i];
        size_t klen = strlen(key);
        const char *code = NULL;
        char *cat_key = NULL;
        if (klen > SI_KEY_MAX - strlen(r->map.prefix)) {
            code = "KeyTooLongError";
            si_errprintf(&err, "the key is %zu bytes", klen);
        } else if (si_key_check(key, klen, &err) < 0) {
            code = "InvalidArgument";
        } else if (!(cat_key = malloc(strlen(r->map.prefix) + klen + 1))) {
            code = "InternalError";
            si_errprintf(&err, "out of memory");
        } else {
            sprintf(cat_key, "%s%s", r->map.prefix, key);
            s3_delete_one(r, cat_key, &code, &err);
        }
        free(cat_key);
        if (code) {
            si_strbuf_puts(&x, "<Error>");
            s3_put_xml_text(&x, "Key", key);
            s3_put_xml_text(&x, "Code", code);
            s3_put_xml_text(&x, "Message", err.text);
            si_strbuf_puts(&x, "</Error>");
        } else if (!d.quiet) {
            si_strbuf_puts(&x, "<Deleted>");
            s3_put_xml_text(&x, "Key", key);
            si_strbuf_puts(&x, "</Deleted>");
        }
    }
    si_strbuf_puts(&x, "</DeleteResult>");
    s3_delete_request_free(&d);
    s3_respond_xml(r, 200, &x);
}

void s3_delete_objects(s3_req_t *r)
{
    if (!s3_writable_bucket(r))
        return;
    s3_expect_xml_body(r, delete_objects_end);
}
