/* The push endpoints of the control API: POST /api/v1/push streams one
 * file's body into an upload (a streaming route: never gathered in
 * memory), GET /api/v1/push/{id} answers the push's state per file. */
#include "config.h"
#include "daemon/push/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "daemon/control/identity.h"
#include "daemon/http/server.h"
#include "common/text.h"

#define SIZE_HEADER "X-Stagein-Size"
#define CHECKSUM_HEADER "X-Stagein-Checksum"
#define MTIME_HEADER "X-Stagein-Mtime"

/* One upload's state: the connection's, and from submit on also the
 * commit callback's (refs), since either may end first. */
typedef struct {
    push_t *p;
    push_upload_t *upload;
    uint64_t size;
    bool failed;
    int failed_errno;
    si_error_t err;
    pthread_mutex_t mu;         /* guards what follows */
    unsigned refs;
    http_request_t *req;        /* NULL once the connection is gone */
    bool begun;                 /* its rows recorded (or refused) */
    bool suspended, committed;
    int commit_rc, commit_errno;
    push_received_t file;
    si_error_t commit_err;
} upload_state_t;

static void upload_state_unref(upload_state_t *st)
{
    pthread_mutex_lock(&st->mu);
    bool last = --st->refs == 0;
    pthread_mutex_unlock(&st->mu);
    if (!last)
        return;
    push_upload_abort(st->upload);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

static unsigned status_for_errno(int errnum)
{
    switch (errnum) {
    case EINVAL:
    case EBADMSG: return 400;
    case EACCES:
    case EPERM: return 403;
    case ENOENT: return 404;
    case EEXIST: return 409;
    case EFBIG: return 413;
    case EAGAIN: return 503;
    default: return 500;
    }
}

static void respond_errno(http_request_t *req, int errnum, const si_error_t *err)
{
    unsigned status = status_for_errno(errnum);
    if (status == 503)
        http_add_header(req, "Retry-After", "10");
    http_respond_error(req, status, "%s", err->text);
}

/* The caller, or an answer (401/503); true when the handler may go on. */
static bool authenticate(push_t *p, http_request_t *req, identity_t *who)
{
    pthread_mutex_lock(&p->lock);
    char socket[sizeof(p->munge_socket)];
    memcpy(socket, p->munge_socket, sizeof(socket));
    identity_opts_t io = {.munge_socket = socket[0] ? socket : NULL, .peercred = p->peercred};
    pthread_mutex_unlock(&p->lock);
    return identity_authenticate(&io, req, who);
}

/* The file's size from Content-Length and/or X-Stagein-Size. */
static int upload_size(http_request_t *req, uint64_t *size, unsigned *status, si_error_t *err)
{
    const char *cl = http_request_header(req, "Content-Length");
    const char *declared = http_request_header(req, SIZE_HEADER);
    uint64_t a = 0, b = 0;
    *status = 400;
    if (cl && si_parse_u64(cl, &a) < 0)
        return si_errprintf(err, "Content-Length '%.40s' is not a byte count", cl);
    if (declared && si_parse_u64(declared, &b) < 0)
        return si_errprintf(err, SIZE_HEADER " '%.40s' is not a byte count", declared);
    if (cl && declared && a != b)
        return si_errprintf(err, "Content-Length (%" PRIu64 ") and " SIZE_HEADER " (%" PRIu64
                                 ") differ", a, b);
    if (!cl && !declared) {
        *status = 411;
        return si_errprintf(err, "the file's size is needed: send Content-Length, or "
                                 SIZE_HEADER " with a chunked body");
    }
    *size = cl ? a : b;
    return 0;
}

static int parse_mode(const char *text, int *mode, si_error_t *err)
{
    unsigned m;
    if (si_parse_mode(text, &m) < 0)
        return si_errprintf(err, "mode '%.20s' is not an octal permission mode (0 to 0777)",
                            text ? text : "");
    *mode = (int)m;
    return 0;
}

/* On the push's recorder thread: the file is recorded (or refused); the
 * connection, suspended since its headers, goes on to read the body. A
 * refused one reads and drops it and answers at its end. */
static void on_begun(void *arg, push_upload_t *u, int rc, int errnum, const si_error_t *err)
{
    upload_state_t *st = arg;
    pthread_mutex_lock(&st->mu);
    st->upload = u;
    if (rc < 0) {
        st->failed = true;
        st->failed_errno = errnum;
        st->err = *err;
    }
    st->begun = true;
    if (st->suspended && st->req) {
        st->suspended = false;
        http_request_resume(st->req);
    }
    pthread_mutex_unlock(&st->mu);
    upload_state_unref(st);
}

static int on_push_begin(http_request_t *req, void *arg, void **state)
{
    push_t *p = arg;
    identity_t who;
    si_error_t err;
    unsigned status = 400;
    if (!authenticate(p, req, &who))
        return -1;
    push_file_t f = {
        .uid = who.uid, .gid = who.gid, .dataset = http_request_query(req, "dataset"),
        .key = http_request_query(req, "key"), .push_uuid = http_request_query(req, "push"),
        .mode = -1, .checksum = http_request_header(req, CHECKSUM_HEADER), .mtime = -1,
    };
    const char *mode = http_request_query(req, "mode");
    const char *mtime = http_request_header(req, MTIME_HEADER);
    if (upload_size(req, &f.size, &status, &err) < 0 ||
        (mode && parse_mode(mode, &f.mode, &err) < 0))
        goto refuse;
    if (mtime && si_parse_i64(mtime, &f.mtime) < 0) {
        si_errprintf(&err, MTIME_HEADER " '%.40s' is not unix seconds", mtime);
        goto refuse;
    }
    if (f.push_uuid && !*f.push_uuid)
        f.push_uuid = NULL;
    upload_state_t *st = calloc(1, sizeof(*st));
    if (!st) {
        http_respond_error(req, 500, "out of memory");
        return -1;
    }
    st->p = p;
    st->size = f.size;
    st->refs = 2; /* the connection's and the begin callback's */
    st->req = req;
    pthread_mutex_init(&st->mu, NULL);
    /* the lock keeps the callback from resuming before the suspend */
    pthread_mutex_lock(&st->mu);
    if (push_upload_begin_async(p, &f, on_begun, st, &err) < 0) {
        st->refs--;
        pthread_mutex_unlock(&st->mu);
        respond_errno(req, errno, &err);
        upload_state_unref(st);
        return -1;
    }
    /* the body waits in the socket until the file is recorded, and no
     * thread waits with it: the uploads that begin together share one
     * transaction */
    if (!st->begun) {
        st->suspended = true;
        http_request_suspend(req);
    }
    pthread_mutex_unlock(&st->mu);
    *state = st;
    return 0;
refuse:
    http_respond_error(req, status, "%s", err.text);
    return -1;
}

static void on_push_data(http_request_t *req, void *state, const char *data, size_t len)
{
    (void)req;
    upload_state_t *st = state;
    if (st->failed)
        return; /* the rest of the body is read and dropped */
    if (push_upload_write(st->upload, data, len, &st->err) < 0) {
        st->failed = true;
        st->failed_errno = errno;
        push_upload_abort(st->upload);
        st->upload = NULL;
    }
}

/* The 202 once the file is durable, or why it is not. */
static void answer_committed(http_request_t *req, upload_state_t *st)
{
    if (st->commit_rc < 0) {
        respond_errno(req, st->commit_errno, &st->commit_err);
        return;
    }
    const push_received_t *r = &st->file;
    char location[80];
    snprintf(location, sizeof(location), "/api/v1/push/%s", r->uuid);
    http_add_header(req, "Location", location);
    const char *dataset = http_request_query(req, "dataset");
    http_respond_json(req, 202, json_pack("{s:s, s:s, s:s++, s:I, s:s, s:s}", "pushId", r->uuid,
                                          "dataset", dataset, "path", r->bucket, "/",
                                          r->object_key, "size", (json_int_t)r->size, "checksum",
                                          r->checksum, "state", "RECEIVED"));
}

/* On the cache's committer thread: the answer is due; the connection,
 * if it waits, is woken to send it (on_push_end runs again). */
static void on_committed(void *arg, int rc, int errnum, const push_received_t *file,
                         const char *why)
{
    upload_state_t *st = arg;
    pthread_mutex_lock(&st->mu);
    st->commit_rc = rc;
    st->commit_errno = errnum;
    st->file = *file;
    if (rc < 0)
        si_errprintf(&st->commit_err, "%s", why);
    st->committed = true;
    if (st->suspended && st->req) {
        st->suspended = false;
        http_request_resume(st->req);
    }
    pthread_mutex_unlock(&st->mu);
    upload_state_unref(st);
}

static void on_push_end(http_request_t *req, void *state)
{
    upload_state_t *st = state;
    pthread_mutex_lock(&st->mu);
    bool committed = st->committed;
    pthread_mutex_unlock(&st->mu);
    if (committed) { /* resumed */
        answer_committed(req, st);
        return;
    }
    if (st->failed) {
        respond_errno(req, st->failed_errno, &st->err);
        return;
    }
    uint64_t got = push_upload_received(st->upload);
    if (got != st->size) {
        push_upload_abort(st->upload);
        st->upload = NULL;
        http_respond_error(req, 400, "the body ended after %" PRIu64 " bytes; the file's size"
                                     " was given as %" PRIu64 " bytes", got, st->size);
        return;
    }
    si_error_t err;
    /* a client that hashes while it sends gives the checksum after the
     * body (chunked): one read of the file on its side */
    const char *trailer = http_request_trailer(req, CHECKSUM_HEADER);
    if (trailer && push_upload_expect(st->upload, trailer, &err) < 0) {
        int refused = errno;
        push_upload_abort(st->upload);
        st->upload = NULL;
        respond_errno(req, refused, &err);
        return;
    }
    push_upload_t *u = st->upload;
    st->upload = NULL; /* submit frees it either way */
    /* the lock keeps the callback from resuming before the suspend */
    pthread_mutex_lock(&st->mu);
    st->req = req;
    st->refs++;
    if (push_upload_submit(u, on_committed, st, &err) < 0) {
        st->refs--;
        pthread_mutex_unlock(&st->mu);
        respond_errno(req, errno, &err);
        return;
    }
    if (st->committed) {
        pthread_mutex_unlock(&st->mu);
        answer_committed(req, st);
        return;
    }
    /* no thread waits for the batch: many uploads share one */
    st->suspended = true;
    http_request_suspend(req);
    pthread_mutex_unlock(&st->mu);
}

static void on_push_cleanup(void *state, bool completed)
{
    (void)completed;
    upload_state_t *st = state;
    if (!st)
        return;
    pthread_mutex_lock(&st->mu);
    st->req = NULL;
    pthread_mutex_unlock(&st->mu);
    /* the client went away before the end of the body: nothing is kept
     * (an upload already submitted is the commit's to end) */
    push_upload_abort(st->upload);
    st->upload = NULL;
    upload_state_unref(st);
}

static json_t *status_json(const push_status_t *st)
{
    json_t *files = json_array();
    for (size_t i = 0; i < st->nitems; i++) {
        const push_item_t *it = &st->items[i];
        json_t *copies = json_array();
        for (size_t c = 0; c < it->ncopies; c++)
            json_array_append_new(copies, json_pack("{s:i, s:s, s:I, s:I}", "copy",
                                                    it->copies[c].copy, "volume",
                                                    it->copies[c].volume, "fileSeq",
                                                    (json_int_t)it->copies[c].file_seq,
                                                    "position",
                                                    (json_int_t)it->copies[c].position));
        json_t *f = json_pack("{s:s++, s:s, s:s, s:I, s:s, s:o}", "path", it->bucket, "/",
                              it->object_key, "key", it->key, "state", it->state, "size",
                              (json_int_t)it->size, "checksum", it->checksum, "copies", copies);
        if (it->error)
            json_object_set_new(f, "error", json_string(it->error));
        json_array_append_new(files, f);
    }
    return json_pack("{s:s, s:s, s:s, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:I, s:o}", "pushId",
                     st->uuid, "state", st->state, "dataset", st->dataset, "uid",
                     (json_int_t)st->uid, "gid", (json_int_t)st->gid, "createdAt", st->created,
                     "lastModified", st->updated, "filesTotal", (json_int_t)st->files_total,
                     "filesDurable", (json_int_t)st->files_durable, "filesFailed",
                     (json_int_t)st->files_failed, "bytesTotal", (json_int_t)st->bytes_total,
                     "files", files);
}

static void on_push_status(http_request_t *req, void *arg)
{
    push_t *p = arg;
    identity_t who;
    si_error_t err;
    push_status_t *st = NULL;
    if (!authenticate(p, req, &who))
        return;
    if (push_get(p, http_request_param(req, "id"), who.uid, &st, &err) < 0)
        respond_errno(req, errno, &err);
    else
        http_respond_json(req, 200, status_json(st));
    push_status_free(st);
}

int push_routes(push_t *p, http_server_t *server, si_error_t *err)
{
    static const http_stream_ops_t upload = {
        .begin = on_push_begin, .data = on_push_data, .end = on_push_end,
        .cleanup = on_push_cleanup,
    };
    if (http_server_route_stream(server, "POST", "/api/v1/push", &upload, p, err) < 0 ||
        http_server_route(server, "GET", "/api/v1/push/{id}", on_push_status, p, err) < 0)
        return -1;
    return 0;
}
