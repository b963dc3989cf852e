/* Objects of archive buckets written and removed: the push upload that
 * replaces an existing object as S3 does, the preconditions of a write,
 * objects made from files (CompleteMultipartUpload, CopyObject) and the
 * removal of one object. Used by the write, copy and multipart operations. */
#include "config.h"
#include "daemon/s3/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/checksum.h"
#include "daemon/cache/cache.h"
#include "daemon/push/push.h"

#define DELETE_BUSY_WAIT_US (30 * 1000000L)
#define DELETE_BUSY_POLL_US 50000

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

int s3_delete_one(s3_req_t *r, const char *cat_key, const char **code, si_error_t *err)
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

const char *s3_push_error_code(int e)
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

/* push_upload_begin; an existing object of the key is replaced, as S3
 * does: deleted first (a reader in between sees no object), unless
 * no_replace (If-None-Match: *), when EEXIST is the answer. */
int s3_begin_replacing(s3_req_t *r, const char *cat_key, const push_file_t *f,
                       bool no_replace, push_upload_t **out, si_error_t *err)
{
    if (push_upload_begin(r->srv->push, f, out, err) == 0)
        return 0;
    if (errno != EEXIST || no_replace)
        return -1;
    const char *code;
    if (s3_delete_one(r, cat_key, &code, err) < 0) {
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

/* ---- objects from files: CompleteMultipartUpload, CopyObject ----------------------- */

int s3_push_from_files(s3_req_t *r, const int *fds, const uint64_t *offsets,
                       const uint64_t *sizes, size_t n, const char *etag_hex,
                       const s3_meta_t *meta, bool no_replace, char *etag_out, size_t etag_size)
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
    int rc = s3_begin_replacing(r, cat_key, &f, no_replace, &u, &err);
    free(cat_key);
    if (rc < 0 && no_replace && errno == EEXIST) {
        s3_respond_error(r, "PreconditionFailed", "If-None-Match: * and %s/%s exists",
                         r->bucket, r->key);
        return -1;
    }
    if (rc < 0) {
        s3_respond_error(r, s3_push_error_code(errno), "%s", err.text);
        return -1;
    }
    enum { CHUNK = 1 << 20 };
    if (!(buf = malloc(CHUNK)) || (!etag_hex && !(md5 = si_checksum_new("md5", &err)))) {
        s3_respond_error(r, "InternalError", "out of memory");
        goto error;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t left = sizes[i], at = offsets ? offsets[i] : 0;
        while (left) {
            ssize_t got = pread(fds[i], buf, left < CHUNK ? (size_t)left : CHUNK, (off_t)at);
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
            at += (uint64_t)got;
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
