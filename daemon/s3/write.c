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
#include <fcntl.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <sqlite3.h>

#include "common/aws/amzchecksum.h"
#include "common/aws/awschunked.h"
#include "common/checksum.h"
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
        if (s3_write_all(p->part_fd, data, len) < 0) {
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

static void put_end(s3_req_t *r)
{
    put_state_t *p = r->body_state;
    si_error_t err;
    char md5[SI_CHECKSUM_TEXT_MAX];
    if (rdma_body(r) < 0)
        return;
    body_verify(p, md5);
    if (p->fail_code) {
        s3_respond_error(r, p->fail_code, "%s", p->fail_text);
        return;
    }
    push_received_t got;
    push_upload_t *u = p->upload;
    p->upload = NULL;
    bool whole = push_upload_received(u) == p->expected;
    if (push_upload_finish(u, &got, &err) < 0) {
        if (errno == EBADMSG && whole && p->sha_by_cache)
            s3_respond_error(r, "XAmzContentSHA256Mismatch", "The provided "
                             "'x-amz-content-sha256' header does not match what was computed"
                             " (%s)", err.text);
        else
            s3_respond_error(r, errno == EBADMSG ? "IncompleteBody" : "InternalError", "%s",
                             err.text);
        return;
    }
    s3_meta_t meta = {.headers = si_strbuf_str(&p->meta_headers),
                      .storage_class = p->storage_class};
    s3_db_t *db = s3_dbpool_get(r->srv->pool);
    int rc = s3_db_record_object(db, got.object_id, md5 + 4, &meta, &err);
    s3_dbpool_put(r->srv->pool, db);
    if (rc < 0) {
        /* the bytes are stored, what they came with is not: not acknowledged */
        s3_respond_internal(r, "recording the object's ETag and metadata", err.text);
        return;
    }
    char note[64];
    snprintf(note, sizeof(note), "push=%s", got.uuid);
    respond_stored(r, md5 + 4, note);
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

static int delete_one(s3_req_t *r, const char *cat_key, const char **code, si_error_t *err);

/* push_upload_begin; an existing object of the key is replaced, as S3
 * does: deleted first (a reader in between sees no object), unless
 * no_replace (If-None-Match: *), when EEXIST is the answer. */
static int begin_replacing(s3_req_t *r, const char *cat_key, const push_file_t *f,
                           bool no_replace, push_upload_t **out, si_error_t *err)
{
    if (push_upload_begin(r->srv->push, f, out, err) == 0)
        return 0;
    if (errno != EEXIST || no_replace)
        return -1;
    const char *code;
    if (delete_one(r, cat_key, &code, err) < 0) {
        errno = strcmp(code, "AccessDenied") == 0 ? EACCES
                : strcmp(code, "SlowDown") == 0  ? EAGAIN : EIO;
        return -1;
    }
    return push_upload_begin(r->srv->push, f, out, err);
}

int s3_put_conditions(s3_req_t *r, const char *cat_key, bool *no_replace)
{
    *no_replace = false;
    const char *inm = s3_req_header(r, "If-None-Match");
    const char *im = s3_req_header(r, "If-Match");
    if (inm) {
        while (*inm == ' ')
            inm++;
        if (strcmp(inm, "*") != 0) {
            s3_respond_error(r, "NotImplemented", "If-None-Match on a write takes only '*'"
                             " (write only when no object has the key)");
            return -1;
        }
        *no_replace = true;
    }
    if (!im)
        return 0;
    si_error_t err;
    s3_object_t o;
    s3_db_t *db = s3_dbpool_get(r->srv->pool);
    int rc = s3_db_object(db, r->map.cat_bucket, cat_key, &r->who, &o, &err);
    s3_dbpool_put(r->srv->pool, db);
    if (rc < 0) {
        s3_respond_error(r, "InternalError", "%s", err.text);
        return -1;
    }
    if (rc == 0) {
        s3_respond_error(r, "NoSuchKey", "If-Match: %s/%s does not exist", r->bucket, r->key);
        return -1;
    }
    if (!s3_etag_list_matches(im, o.etag)) {
        s3_respond_error(r, "PreconditionFailed", "If-Match: the ETag of %s/%s is %s", r->bucket,
                         r->key, o.etag);
        return -1;
    }
    return 0;
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
    int rc = begin_replacing(r, cat_key, &f, no_replace, &p->upload, &err);
    free(cat_key);
    if (rc < 0 && no_replace && errno == EEXIST) {
        p->upload = NULL;
        free_state(p);
        s3_respond_error(r, "PreconditionFailed", "If-None-Match: * and %s/%s exists",
                         r->bucket, r->key);
        return;
    }
    if (rc < 0) {
        const char *code = push_error_code(errno);
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

/* Makes the part file tmp (open as fd, closed here) part number of the
 * upload in dir, under its MD5: 0, or -1 answered (404 NoSuchUpload when
 * the upload was aborted or completed meanwhile). */
static int store_part(s3_req_t *r, const char *dir, const char *tmp, int fd, int number,
                      const char *md5_hex)
{
    s3_mp_upload_t u = {0};
    snprintf(u.dir, sizeof(u.dir), "%s", dir);
    char final[PATH_MAX + 64];
    s3_mp_part_path(&u, number, md5_hex, final, sizeof(final));
    int rc = fsync(fd);
    if (close(fd) < 0)
        rc = -1;
    if (rc == 0)
        rc = rename(tmp, final);
    int e = errno;
    if (rc < 0)
        unlink(tmp);
    /* an abort (or completion) may have removed the upload while the part
     * arrived: then the part belongs to no upload */
    if ((rc < 0 && e == ENOENT) || (rc == 0 && !s3_mp_exists(&u))) {
        if (rc == 0)
            unlink(final);
        s3_respond_error(r, "NoSuchUpload", "the upload was aborted or completed while part"
                         " %d arrived", number);
        return -1;
    }
    if (rc < 0) {
        char detail[PATH_MAX + 200];
        snprintf(detail, sizeof(detail), "%s: %s", final, strerror(e));
        s3_respond_internal(r, "storing the part", detail);
        return -1;
    }
    s3_mp_drop_other_parts(&u, number, md5_hex);
    return 0;
}

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
    if (store_part(r, p->part_dir, p->part_tmp, fd, p->part_number, md5 + 4) == 0)
        respond_stored(r, md5 + 4, NULL);
}

static const s3_body_ops_t part_ops = {.data = put_data, .end = part_end,
                                       .cleanup = put_cleanup};

/* The upload and part number an UploadPart(Copy) names, in a writable
 * bucket: the number (u to free), or 0 answered. */
static int part_target(s3_req_t *r, s3_mp_upload_t *u)
{
    if (!s3_writable_bucket(r))
        return 0;
    int number = s3_req_part_number(r);
    if (!number || s3_mp_find(r, u) < 0)
        return 0;
    return number;
}

void s3_upload_part(s3_req_t *r)
{
    s3_mp_upload_t u;
    int number = part_target(r, &u);
    if (!number)
        return;
    uint64_t size;
    put_state_t *p = body_begin(r, &size);
    if (!p || body_by_rdma(r, p, &size) < 0 || take_quota(r, p, size) < 0) {
        s3_mp_upload_free(&u);
        return;
    }
    if (size > S3_PART_MAX_SIZE) {
        s3_mp_upload_free(&u);
        free_state(p);
        s3_respond_error(r, "EntityTooLarge", "a part may be at most %llu bytes",
                         (unsigned long long)S3_PART_MAX_SIZE);
        return;
    }
    p->expected = size;
    p->part_number = (int)number;
    snprintf(p->part_dir, sizeof(p->part_dir), "%s", u.dir);
    snprintf(p->part_tmp, sizeof(p->part_tmp), "%s/.part-%s", u.dir, r->id);
    s3_mp_upload_free(&u);
    p->part_fd = open(p->part_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (p->part_fd < 0) {
        int e = errno;
        if (e == ENOENT) {
            s3_respond_error(r, "NoSuchUpload", NULL);
        } else {
            char detail[PATH_MAX + 200];
            snprintf(detail, sizeof(detail), "creating %s: %s", p->part_tmp, strerror(e));
            s3_respond_internal(r, "storing the part", detail);
        }
        free_state(p);
        return;
    }
    r->body = &part_ops;
    r->body_state = p;
}

/* ---- objects from files: CompleteMultipartUpload, CopyObject ----------------------- */

int s3_push_from_files(s3_req_t *r, const int *fds, const uint64_t *sizes, size_t n,
                       const char *etag_hex, const s3_meta_t *meta, bool no_replace,
                       char *etag_out, size_t etag_size)
{
    s3_server_t *s = r->srv;
    si_error_t err;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += sizes[i];
    push_file_t f = {.uid = r->who.uid, .gid = r->who.gid, .dataset = r->bucket, .key = r->key,
                     .mode = -1, .size = total, .checksum = NULL, .mtime = -1,
                     .shared = r->map.shared};
    push_upload_t *u = NULL;
    si_checksum_t *md5 = NULL;
    char *buf = NULL;
    char *cat_key = s3_req_catalog_key(r);
    if (!cat_key)
        return -1;
    int rc = begin_replacing(r, cat_key, &f, no_replace, &u, &err);
    free(cat_key);
    if (rc < 0 && no_replace && errno == EEXIST) {
        s3_respond_error(r, "PreconditionFailed", "If-None-Match: * and %s/%s exists",
                         r->bucket, r->key);
        return -1;
    }
    if (rc < 0) {
        s3_respond_error(r, push_error_code(errno), "%s", err.text);
        return -1;
    }
    enum { CHUNK = 1 << 20 };
    if (!(buf = malloc(CHUNK)) || (!etag_hex && !(md5 = si_checksum_new("md5", &err)))) {
        s3_respond_error(r, "InternalError", "out of memory");
        goto error;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t left = sizes[i];
        while (left) {
            ssize_t got = read(fds[i], buf, left < CHUNK ? (size_t)left : CHUNK);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                s3_respond_error(r, "InternalError", "reading a source file: %s",
                                 got < 0 ? strerror(errno) : "shorter than expected");
                goto error;
            }
            if (md5)
                si_checksum_update(md5, buf, (size_t)got);
            if (push_upload_write(u, buf, (size_t)got, &err) < 0) {
                s3_respond_error(r, "InternalError", "%s", err.text);
                goto error;
            }
            left -= (uint64_t)got;
        }
    }
    char md5_text[SI_CHECKSUM_TEXT_MAX];
    if (md5) {
        si_checksum_final(md5, md5_text);
        etag_hex = md5_text + 4;
    }
    snprintf(etag_out, etag_size, "%s", etag_hex);
    push_received_t got;
    push_upload_t *finishing = u;
    u = NULL;
    if (push_upload_finish(finishing, &got, &err) < 0) {
        s3_respond_error(r, "InternalError", "%s", err.text);
        goto error;
    }
    s3_db_t *db = s3_dbpool_get(s->pool);
    rc = s3_db_record_object(db, got.object_id, etag_out, meta, &err);
    s3_dbpool_put(s->pool, db);
    if (rc < 0) {
        s3_respond_internal(r, "recording the object's ETag and metadata", err.text);
        goto error;
    }
    snprintf(r->note + strlen(r->note), sizeof(r->note) - strlen(r->note), " push=%s",
             got.uuid);
    free(buf);
    si_checksum_free(md5);
    return 0;
error:
    if (u)
        push_upload_abort(u);
    free(buf);
    si_checksum_free(md5);
    return -1;
}

/* ---- DeleteObject(s) ------------------------------------------------------------ */

#define DELETE_BUSY_WAIT_US (30 * 1000000L)
#define DELETE_BUSY_POLL_US 50000

/* Deletes cat_key of an archive bucket: 0 (also when there was none), or -1
 * with *code (and err) saying why. Waits while the object is being written
 * to tape (its aggregate then commits first). */
/* Who may delete or replace an object, as in a sticky directory: root, its
 * writer, the owner of the bucket it is in; nobody who may not read it. */
static bool may_remove(const s3_req_t *r, const s3_object_t *o)
{
    uid_t owner;
    if (r->who.all)
        return true;
    if (!o->readable)
        return false;
    return !o->pushed || o->writer == r->who.uid ||
           (s3_created_bucket_owner(r->srv, r->bucket, &owner) && owner == r->who.uid);
}

static int delete_one(s3_req_t *r, const char *cat_key, const char **code, si_error_t *err)
{
    s3_server_t *s = r->srv;
    s3_object_t o;
    s3_db_t *db = s3_dbpool_get(s->pool);
    int rc = s3_db_object(db, r->map.cat_bucket, cat_key, &r->who, &o, err);
    if (rc == 1 && !may_remove(r, &o)) {
        s3_dbpool_put(s->pool, db);
        *code = "AccessDenied";
        return si_errprintf(err, "this credential may not delete or replace '%s'%s", cat_key,
                            o.readable ? ": another user wrote it" : "");
    }
    int64_t id = 0;
    for (long waited = 0; rc >= 0; waited += DELETE_BUSY_POLL_US) {
        rc = s3_db_delete_object_begin(db, r->map.cat_bucket, cat_key, &id, err);
        if (rc >= 0 || errno != EBUSY || waited >= DELETE_BUSY_WAIT_US)
            break;
        s3_dbpool_put(s->pool, db);
        usleep(DELETE_BUSY_POLL_US);
        db = s3_dbpool_get(s->pool);
        rc = 0;
    }
    if (rc == 1) {
        si_error_t cerr;
        /* the cached copy; the tape copies stay until their volume is reclaimed */
        if (cache_remove(s->cache, id, &cerr) < 0 && errno != ENOENT)
            si_log(s->log, SI_LOG_WARNING, "s3: deleting %s/%s: the cached copy: %s",
                   r->map.cat_bucket, cat_key, cerr.text);
        rc = s3_db_delete_object_finish(db, id, err);
    }
    int e = errno;
    s3_dbpool_put(s->pool, db);
    if (rc < 0) {
        *code = e == EBUSY ? "SlowDown" : "InternalError";
        return -1;
    }
    return 0;
}

void s3_delete_object(s3_req_t *r)
{
    if (!s3_writable_bucket(r))
        return;
    char *cat_key = s3_req_catalog_key(r);
    if (!cat_key)
        return;
    const char *code;
    si_error_t err;
    int rc = delete_one(r, cat_key, &code, &err);
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
            delete_one(r, cat_key, &code, &err);
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
    uint64_t size;
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
    if (bytes && cache_open_object(s->cache, src->o.id, &src->fd, &src->size, &err) < 0) {
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
    if (s3_push_from_files(r, &src.fd, &src.size, 1, src.etag_hex, &meta, false, recorded,
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
        if (got <= 0 || s3_write_all(out, buf, (size_t)got) < 0) {
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
    int number = part_target(r, &u);
    if (!number)
        return;
    copy_source_t src;
    char tmp[PATH_MAX + 64];
    snprintf(tmp, sizeof(tmp), "%s/.part-%s", u.dir, r->id);
    int fd = -1;
    uint64_t start, length;
    if (copy_source_open(r, &src, true) < 0)
        goto out_upload;
    if (copy_range(r, src.size, &start, &length) < 0)
        goto out;
    if (length > S3_PART_MAX_SIZE) {
        s3_respond_error(r, "EntityTooLarge", "a part may be at most %llu bytes",
                         (unsigned long long)S3_PART_MAX_SIZE);
        goto out;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == ENOENT) {
            s3_respond_error(r, "NoSuchUpload", NULL);
        } else {
            char detail[PATH_MAX + 200];
            snprintf(detail, sizeof(detail), "creating %s: %s", tmp, strerror(errno));
            s3_respond_internal(r, "storing the part", detail);
        }
        goto out;
    }
    char md5[SI_CHECKSUM_TEXT_MAX];
    si_error_t err;
    if (copy_bytes(src.fd, start, length, fd, md5, &err) < 0) {
        close(fd);
        unlink(tmp);
        s3_respond_internal(r, "copying the part", err.text);
        goto out;
    }
    if (store_part(r, u.dir, tmp, fd, number, md5 + 4) == 0)
        copy_result(r, "CopyPartResult", md5 + 4);
out:
    copy_source_close(&src);
out_upload:
    s3_mp_upload_free(&u);
}
