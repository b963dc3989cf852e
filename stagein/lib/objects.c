/* Objects of stageind's S3 endpoint to and from caller memory, over the
 * project's S3 client (common/aws/s3client.h). Reading: a HEAD for the size
 * and ETag, then SigV4-signed range GETs run by a few threads, each landing
 * its ranges straight at their offsets (host memory) or through a pinned
 * bounce buffer into GPU memory. Writing: one signed PUT, or a multipart
 * upload by a few threads, the body read by the server from registered
 * memory over RDMA or sent in the request. */
#include "config.h"
#include "stagein/lib/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "common/aws/s3client.h"
#include "common/checksum.h"
#include "common/rdma_token.h"
#include "common/strbuf.h"
#include "stagein/lib/gpu.h"

#define S3_TIMEOUT_S 600L

/* Session credentials are renewed this long before they expire, so that a
 * read started with them does not outlive them. */
#define SESSION_RENEW_S 600

/* The S3 client of the handle's endpoint and credentials, made on first use
 * (and again after they changed: handle.c drops it). */
static stagein_err_t client(stagein_t *h, si_s3_t **out)
{
    bool configured = h->access_key && h->secret && !h->session_expires;
    bool stale = h->session_expires && (int64_t)time(NULL) > h->session_expires - SESSION_RENEW_S;
    if (!configured && h->endpoint && (!h->access_key || stale)) {
        stagein_err_t code = lib_session_credentials(h);
        if (code != STAGEIN_SUCCESS)
            return code;
    }
    if (!h->s3_endpoint)
        return lib_fail(h, STAGEIN_ERR_CONFIG,
                        "no S3 endpoint: set $STAGEIN_S3_ENDPOINT or STAGEIN_OPT_S3_ENDPOINT,"
                        " or a control endpoint to ask for it");
    if (!h->access_key || !h->secret)
        return lib_fail(h, STAGEIN_ERR_CONFIG,
                        "no S3 credentials: set $STAGEIN_S3_ACCESS_KEY and $STAGEIN_S3_SECRET,"
                        " or $STAGEIN_S3_CREDENTIALS, or a control endpoint to ask for them");
    if (!h->s3) {
        si_error_t err;
        /* one request may take S3_TIMEOUT_S, however slowly its bytes come
         * (an RDMA answer sends none until the server's writes are done) */
        si_s3_conf_t conf = {.endpoint = h->s3_endpoint, .region = h->region,
                             .access_key = h->access_key, .secret = h->secret,
                             .connect_timeout_s = S3_TIMEOUT_S, .stall_timeout_s = S3_TIMEOUT_S,
                             .request_timeout_s = S3_TIMEOUT_S, .ca_file = h->s3_ca_file};
        if (!(h->s3 = si_s3_new(&conf, &err)))
            return lib_fail_err(h, STAGEIN_ERR_CONFIG, &err);
    }
    *out = h->s3;
    return STAGEIN_SUCCESS;
}

typedef struct {
    stagein_t *h;
    si_s3_t *s3;
    char bucket[64];
    const char *key;
} target_t;

static stagein_err_t target_init(stagein_t *h, const char *objpath, target_t *t)
{
    si_error_t err;
    memset(t, 0, sizeof(*t));
    t->h = h;
    stagein_err_t rc = client(h, &t->s3);
    if (rc != STAGEIN_SUCCESS)
        return rc;
    if (lib_split_path(objpath, t->bucket, sizeof(t->bucket), &t->key, &err) < 0)
        return lib_fail_err(h, STAGEIN_ERR_ARGUMENT, &err);
    return STAGEIN_SUCCESS;
}

/* One request's answer: the client's response, where a GET's body went and
 * the RDMA extension's headers. */
typedef struct {
    si_s3_response_t rs;
    unsigned char *dst;      /* host memory for [0, len) */
    uint64_t len, got;
    /* the first range of an object of unknown size: fewer bytes than len
     * are the whole object; total: its size (Content-Range, or what came) */
    bool first;
    uint64_t total;
    /* the RDMA answer: x-amz-rdma-reply (0: none), -bytes-transferred,
     * -reason of a 501; HEAD: the server's x-amz-rdma-provider */
    int rdma_reply;
    uint64_t rdma_bytes;
    char rdma_reason[160];
    char rdma_provider[SI_RDMA_PROVIDER_MAX + 1];
    _Atomic uint64_t *landed;
} transfer_t;

static int on_body(void *arg, const void *data, size_t len)
{
    transfer_t *t = arg;
    if (!t->dst || t->got + len > t->len)   /* more than asked for: refuse it */
        return -1;
    memcpy(t->dst + t->got, data, len);
    t->got += len;
    if (t->landed)
        atomic_fetch_add(t->landed, len);
    return 0;
}

static void copy_header(const char *v, char *out, size_t size)
{
    snprintf(out, size, "%s", v + strspn(v, " \t"));
}

static void on_header(void *arg, const char *line)
{
    transfer_t *t = arg;
    if (strncmp(line, "HTTP/", 5) == 0) {
        t->rdma_reply = 0;
        t->rdma_bytes = 0;
        t->rdma_reason[0] = t->rdma_provider[0] = '\0';
    } else if (strncasecmp(line, "x-amz-rdma-reply:", 17) == 0) {
        t->rdma_reply = (int)strtol(line + 17, NULL, 10);
    } else if (strncasecmp(line, "x-amz-rdma-bytes-transferred:", 29) == 0) {
        t->rdma_bytes = strtoull(line + 29, NULL, 10);
    } else if (strncasecmp(line, "x-amz-rdma-reason:", 18) == 0) {
        copy_header(line + 18, t->rdma_reason, sizeof(t->rdma_reason));
    } else if (strncasecmp(line, "x-amz-rdma-provider:", 20) == 0) {
        copy_header(line + 20, t->rdma_provider, sizeof(t->rdma_provider));
    }
}

/* How one request goes: plain, or with an RDMA token (and the multi handle
 * that lets the caller drive the provider meanwhile). */
typedef struct {
    si_s3_xfer_t *x;
    CURLM *multi;            /* NULL: no RDMA */
    const char *token;       /* x-amz-rdma-token, or NULL */
    const atomic_bool *stop; /* the transfer ends once it is true; NULL: never */
} call_t;

/* A call's transfer handle, told to end when stop becomes true. */
static int call_open(call_t *c, const target_t *tg, bool rdma, const atomic_bool *stop,
                     si_error_t *err)
{
    memset(c, 0, sizeof(*c));
    c->stop = stop;
    if (!(c->x = si_s3_xfer_new(tg->s3, err)) || (rdma && !(c->multi = curl_multi_init())))
        return si_errprintf(err, "cannot make a libcurl handle");
    if (stop)
        si_s3_xfer_stop_on(c->x, stop);
    return 0;
}

static void call_close(call_t *c)
{
    if (c->multi)
        curl_multi_cleanup(c->multi);
    si_s3_xfer_free(c->x);
    c->multi = NULL;
    c->x = NULL;
}

/* Runs the request (t gets the answer; its header and body callbacks are
 * set here). With an RDMA token out, the provider is driven while the
 * answer is awaited: the server's writes complete only as this side
 * progresses (multi interface, so that the wait is interruptible). */
static int perform(const call_t *c, stagein_t *h, si_s3_request_t *rq, transfer_t *t,
                   si_error_t *err)
{
    rq->on_header = on_header;
    rq->arg = t;
    if (!c->token || !c->multi)
        return si_s3_xfer_perform(c->x, rq, &t->rs, err);
    if (si_s3_xfer_prepare(c->x, rq, &t->rs, err) < 0)
        return -1;
    CURL *curl = si_s3_xfer_curl(c->x);
    if (curl_multi_add_handle(c->multi, curl) != CURLM_OK) {
        si_s3_xfer_done(c->x, CURLE_OUT_OF_MEMORY);
        return 0;
    }
    CURLcode cc = CURLE_OK;
    int running = 1;
    while (running) {
        if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
            cc = CURLE_RECV_ERROR;
            break;
        }
        if (!running)
            break;
        int fd, ms;
        lib_rdma_progress(h, &fd, &ms);
        struct curl_waitfd extra = {.fd = fd, .events = CURL_WAIT_POLLIN};
        curl_multi_poll(c->multi, fd >= 0 ? &extra : NULL, fd >= 0 ? 1 : 0, ms, NULL);
    }
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left)))
        if (m->msg == CURLMSG_DONE && m->easy_handle == curl)
            cc = m->data.result;
    curl_multi_remove_handle(c->multi, curl);
    si_s3_xfer_done(c->x, (int)cc);
    return 0;
}

/* Whether the request failed (stopped, no answer, an error status), saying so. */
static bool failed(const call_t *c, const target_t *tg, const char *method, const transfer_t *t,
                   si_error_t *err)
{
    const si_s3_response_t *rs = &t->rs;
    if (c->stop && atomic_load(c->stop))
        return si_errprintf(err, "stopped"), true;
    if (rs->curl_code != CURLE_OK && rs->status < 300)
        return si_errprintf(err, "S3 %s %s/%s/%s: %s", method, si_s3_endpoint(tg->s3),
                            tg->bucket, tg->key, rs->curl_error), true;
    if (rs->status >= 300) {
        si_errprintf(err, "S3 %s %s/%s: HTTP %ld%s%s", method, tg->bucket, tg->key, rs->status,
                     rs->code[0] ? " " : "", rs->code);
        return true;
    }
    return false;
}

/* One signed request: HEAD (dst NULL, len 0) or GET of [offset, offset+len);
 * key NULL: of the bucket. */
static int s3_call(const call_t *c, const target_t *tg, const char *key, bool head,
                   uint64_t offset, uint64_t len, uint64_t object_size, transfer_t *t,
                   si_error_t *err)
{
    char range[80] = "";
    si_http_header_t hs[2];
    size_t nh = 0;
    bool ranged = !head && !(offset == 0 && len == object_size);
    if (ranged) {
        snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)offset,
                 (unsigned long long)(offset + len - 1));
        hs[nh++] = (si_http_header_t){"Range", range};
    }
    if (c->token)
        hs[nh++] = (si_http_header_t){"x-amz-rdma-token", c->token};
    si_s3_request_t rq = {.method = head ? "HEAD" : "GET", .bucket = tg->bucket, .key = key,
                          .headers = hs, .nheaders = nh, .payload_sha256 = SI_SIGV4_UNSIGNED_PAYLOAD,
                          .on_data = on_body};
    if (perform(c, tg->h, &rq, t, err) < 0)
        return -1;
    if (failed(c, tg, head ? "HEAD" : "GET", t, err))
        return -1;
    if (!head && t->rdma_reply == 200) {
        if ((t->rdma_bytes != len && !(t->first && t->rdma_bytes < len)) || t->got != 0)
            return si_errprintf(err, "S3 GET %s/%s: the server wrote %llu bytes by RDMA (and %llu"
                                " in the body) of the %llu asked for", tg->bucket, tg->key,
                                (unsigned long long)t->rdma_bytes, (unsigned long long)t->got,
                                (unsigned long long)len);
        t->total = t->rs.range_total ? t->rs.range_total : t->rdma_bytes;
        return 0;
    }
    t->total = t->rs.range_total ? t->rs.range_total : t->got;
    if (!head && t->got != len && !(t->first && t->got < len))
        return si_errprintf(err, "S3 GET %s/%s: %llu bytes at %llu came short (%llu)", tg->bucket,
                            tg->key, (unsigned long long)len, (unsigned long long)offset,
                            (unsigned long long)t->got);
    return 0;
}

static stagein_err_t code_of(const transfer_t *t)
{
    if (t->rs.status == 403 && strcmp(t->rs.code, "InvalidObjectState") == 0)
        return STAGEIN_ERR_NOT_CACHED;
    return lib_code_of_http(t->rs.status);
}

/* provider (may be NULL) receives the server's RDMA provider, "" for none. */
static stagein_err_t head(stagein_t *h, const target_t *tg, uint64_t *size, char *etag,
                          bool *cached, char provider[SI_RDMA_PROVIDER_MAX + 1])
{
    call_t c;
    transfer_t t = {0};
    si_error_t err;
    stagein_err_t rc = STAGEIN_SUCCESS;
    if (call_open(&c, tg, false, NULL, &err) < 0) {
        rc = lib_fail_err(h, STAGEIN_ERR_NOMEM, &err);
    } else if (s3_call(&c, tg, tg->key, true, 0, 0, 0, &t, &err) < 0) {
        rc = lib_fail_err(h, code_of(&t), &err);
    } else {
        *size = t.rs.content_length;
        if (etag)
            snprintf(etag, STAGEIN_CHECKSUM_MAX, "%s", t.rs.etag);
        /* GLACIER without a restore copy is not readable (see doc/s3.md) */
        *cached = strcmp(t.rs.storage_class, "GLACIER") != 0;
        if (provider)
            strcpy(provider, t.rdma_provider);
    }
    si_s3_response_free(&t.rs);
    call_close(&c);
    return rc;
}

stagein_err_t stagein_stat(stagein_t *h, const char *path, uint64_t *size,
                           char etag[STAGEIN_CHECKSUM_MAX])
{
    if (!h)
        return STAGEIN_ERR_ARGUMENT;
    h->error[0] = '\0';
    if (!size)
        return lib_fail(h, STAGEIN_ERR_ARGUMENT, "nowhere to put the size");
    target_t tg;
    bool cached;
    stagein_err_t rc = target_init(h, path, &tg);
    if (rc == STAGEIN_SUCCESS)
        rc = head(h, &tg, size, etag, &cached, NULL);
    return rc;
}

/* --- parallel read ------------------------------------------------------ */

/* The first failure among threads working on one transfer; the others
 * see stop and end. */
typedef struct {
    pthread_mutex_t lock;
    stagein_err_t code;
    si_error_t err;
    atomic_bool stop;
} outcome_t;

static void outcome_fail(outcome_t *o, stagein_err_t code, const si_error_t *err)
{
    pthread_mutex_lock(&o->lock);
    if (o->code == STAGEIN_SUCCESS) {
        o->code = code;
        o->err = *err;
    }
    pthread_mutex_unlock(&o->lock);
    atomic_store(&o->stop, true);
}

typedef struct {
    const target_t *tg;
    unsigned char *dst;      /* host destination, or NULL for the GPU */
    lib_cuda_t *cuda;        /* GPU destination */
    uint64_t device_ptr;
    uint64_t size, chunk, nchunks;
    bool rdma;               /* send tokens (the handle's client is open) */
    lib_rdma_region_t *region; /* dst registered (host destination) */
    _Atomic uint64_t next;
    outcome_t out;
} job_t;


/* The token for one range: of the registered destination, or of the
 * worker's registered bounce buffer (GPU destination). NULL: send none. */
static const char *range_token(job_t *j, lib_rdma_region_t *bounce_region, uint64_t off,
                               uint64_t len, char *out, size_t size)
{
    si_error_t err;
    lib_rdma_region_t *region = j->dst ? j->region : bounce_region;
    if (!j->rdma || !region)
        return NULL;
    if (lib_rdma_token(j->tg->h, region, j->dst ? off : 0, len, out, size, &err) < 0) {
        lib_rdma_note(j->tg->h, "no token: %s", err.text);
        return NULL;
    }
    return out;
}

/* Counts where a range's bytes came from. */
static void account(job_t *j, const transfer_t *t, bool token, uint64_t len)
{
    stagein_t *h = j->tg->h;
    if (t->rdma_reply == 200) {
        atomic_fetch_add(&h->bytes_rdma, len);
        if (j->dst)
            atomic_fetch_add(&h->landed, len);
        return;
    }
    atomic_fetch_add(&h->bytes_http, len);
    if (token)
        lib_rdma_note(h, "the server answered over HTTP: %s", t->rdma_reply == 501
                      ? (t->rdma_reason[0] ? t->rdma_reason : "declined (501)")
                      : "it does not speak RDMA (no x-amz-rdma-reply)");
}

static void *worker(void *arg)
{
    job_t *j = arg;
    si_error_t err;
    void *bounce = NULL;
    lib_rdma_region_t *bounce_region = NULL;
    char token[SI_RDMA_TOKEN_MAX + 1];
    call_t c;
    if (call_open(&c, j->tg, j->rdma, &j->out.stop, &err) < 0) {
        outcome_fail(&j->out, STAGEIN_ERR_NOMEM, &err);
        goto done;
    }
    if (!j->dst && lib_cuda_bounce_alloc(j->cuda, j->chunk, &bounce, &err) < 0) {
        outcome_fail(&j->out, STAGEIN_ERR_NO_DEVICE, &err);
        goto done;
    }
    if (!j->dst && j->rdma && !(bounce_region = lib_rdma_register(j->tg->h, bounce, j->chunk,
                                                                  true, &err)))
        lib_rdma_note(j->tg->h, "cannot register the bounce buffer: %s", err.text);
    for (;;) {
        uint64_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->nchunks || atomic_load(&j->out.stop))
            break;
        uint64_t off = i * j->chunk;
        uint64_t len = j->size - off < j->chunk ? j->size - off : j->chunk;
        transfer_t t = {.dst = j->dst ? j->dst + off : bounce, .len = len,
                        .landed = j->dst ? &j->tg->h->landed : NULL};
        c.token = range_token(j, bounce_region, off, len, token, sizeof(token));
        int got = s3_call(&c, j->tg, j->tg->key, false, off, len, j->size, &t, &err);
        si_s3_response_free(&t.rs);
        if (got < 0) {
            if (!atomic_load(&j->out.stop))
                outcome_fail(&j->out, t.rs.status ? code_of(&t) : STAGEIN_ERR_CONNECT, &err);
            break;
        }
        account(j, &t, c.token != NULL, len);
        if (!j->dst) {
            if (lib_cuda_copy_to_device(j->cuda, j->device_ptr + off, bounce, len, &err) < 0) {
                outcome_fail(&j->out, STAGEIN_ERR_NO_DEVICE, &err);
                break;
            }
            atomic_fetch_add(&j->tg->h->landed, len);
        }
    }
done:
    if (bounce_region)
        lib_rdma_unregister(j->tg->h, bounce_region);
    if (bounce)
        lib_cuda_bounce_free(j->cuda, bounce);
    call_close(&c);
    return NULL;
}

/* Readies RDMA for a read: the provider asked for, else the server's;
 * the destination registered. Anything missing leaves the read to HTTP
 * and says why (stagein_read_info). */
static void rdma_begin(stagein_t *h, job_t *j, const char *server_provider)
{
    si_error_t err;
    const char *provider = h->rdma_provider ? h->rdma_provider : server_provider;
    if (!*provider) {
        lib_rdma_note(h, "the server offers no RDMA (no x-amz-rdma-provider on HEAD)");
        return;
    }
    if (lib_rdma_open(h, provider, &err) < 0) {
        lib_rdma_note(h, "%s", err.text);
        return;
    }
    if (j->dst && !(j->region = lib_rdma_register(h, j->dst, j->size, true, &err))) {
        lib_rdma_note(h, "%s", err.text);
        return;
    }
    snprintf(h->rdma_used, sizeof(h->rdma_used), "%s", provider);
    j->rdma = true;
}

static stagein_err_t run_job(stagein_t *h, job_t *j)
{
    pthread_t threads[LIB_MAX_PARALLEL];
    int parallel = h->parallel ? h->parallel : j->rdma ? LIB_RDMA_PARALLEL : LIB_DEFAULT_PARALLEL;
    int n = (int)(j->nchunks < (uint64_t)parallel ? j->nchunks : (uint64_t)parallel);
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&threads[started], NULL, worker, j) != 0)
            break;
    if (started == 0)
        return lib_fail(h, STAGEIN_ERR_SYSTEM, "cannot start a reader thread");
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    if (j->out.code != STAGEIN_SUCCESS)
        return lib_fail_err(h, j->out.code, &j->out.err);
    return STAGEIN_SUCCESS;
}

/* A read or write starts: its buffer checked, the counters of
 * stagein_read_info and stagein_read_progress zeroed. */
static stagein_err_t transfer_begin(stagein_t *h, const void *buf, uint64_t size)
{
    if (!h)
        return STAGEIN_ERR_ARGUMENT;
    h->error[0] = '\0';
    if (!buf && size > 0)
        return lib_fail(h, STAGEIN_ERR_ARGUMENT, "no buffer for %llu bytes",
                        (unsigned long long)size);
    atomic_store(&h->landed, 0);
    atomic_store(&h->bytes_rdma, 0);
    atomic_store(&h->bytes_http, 0);
    atomic_store(&h->rdma_noted, 0);
    h->rdma_note[0] = h->rdma_used[0] = '\0';
    return STAGEIN_SUCCESS;
}

/* The first range of an object into host memory, its size unknown: one
 * GET of [0, first) says how big the object is (Content-Range) and, for an
 * object of at most first bytes, is the whole read: no HEAD before it.
 * 1: the server has no range of it (an empty object): read it the other way. */
static int read_first(stagein_t *h, job_t *j, uint64_t first, uint64_t *object_size,
                      stagein_err_t *rc)
{
    si_error_t err;
    char token[SI_RDMA_TOKEN_MAX + 1];
    call_t c;
    transfer_t t = {.dst = j->dst, .len = first, .landed = &h->landed, .first = true};
    *rc = STAGEIN_SUCCESS;
    if (call_open(&c, j->tg, j->rdma, NULL, &err) < 0) {
        *rc = lib_fail_err(h, STAGEIN_ERR_NOMEM, &err);
    } else {
        c.token = range_token(j, NULL, 0, first, token, sizeof(token));
        if (s3_call(&c, j->tg, j->tg->key, false, 0, first, 0, &t, &err) == 0) {
            account(j, &t, c.token != NULL, t.rdma_reply == 200 ? t.rdma_bytes : t.got);
            *object_size = t.total;
        } else if (t.rs.status != 416) {
            stagein_err_t code = t.rs.status ? code_of(&t) : STAGEIN_ERR_CONNECT;
            *rc = code == STAGEIN_ERR_NOT_CACHED
                      ? lib_fail(h, code, "%s/%s is on tape only: stage it first", j->tg->bucket,
                                 j->tg->key)
                      : lib_fail_err(h, code, &err);
        }
    }
    call_close(&c);
    si_s3_response_free(&t.rs);
    return *rc == STAGEIN_SUCCESS && t.rs.status == 416 ? 1 : 0;
}

stagein_err_t stagein_read(stagein_t *h, const char *path, void *buf, uint64_t capacity, int gpu,
                           uint64_t *size)
{
    stagein_err_t rc = transfer_begin(h, buf, capacity);
    if (rc != STAGEIN_SUCCESS)
        return rc;
    target_t tg;
    job_t j = {.out.code = STAGEIN_SUCCESS};
    bool cached = true, rdma = h->transport == LIB_TRANSPORT_RDMA;
    uint64_t object_size = 0, done = 0;
    char server_provider[SI_RDMA_PROVIDER_MAX + 1] = "";
    if ((rc = target_init(h, path, &tg)) != STAGEIN_SUCCESS)
        goto done;
    j.tg = &tg;
    /* Host memory, and the server's provider known when it matters: the
     * first GET tells the size. Else a HEAD first (and the provider kept). */
    if (gpu < 0 && capacity > 0 && (!rdma || h->rdma_provider || h->server_provider_known)) {
        j.dst = buf;
        j.size = capacity;
        if (rdma)
            rdma_begin(h, &j, h->server_provider);
        j.chunk = h->chunk ? h->chunk : j.rdma ? LIB_RDMA_CHUNK : LIB_DEFAULT_CHUNK;
        uint64_t first = capacity < j.chunk ? capacity : j.chunk;
        if (read_first(h, &j, first, &object_size, &rc) == 0) {
            if (rc != STAGEIN_SUCCESS)
                goto done;
            done = first;
            goto sized;
        }
        if (j.region)
            lib_rdma_unregister(h, j.region);
        j.region = NULL;
        j.rdma = false;
    }
    if ((rc = head(h, &tg, &object_size, NULL, &cached, server_provider)) != STAGEIN_SUCCESS)
        goto done;
    snprintf(h->server_provider, sizeof(h->server_provider), "%s", server_provider);
    h->server_provider_known = true;
    if (!cached) {
        rc = lib_fail(h, STAGEIN_ERR_NOT_CACHED, "%s is on tape only: stage it first", path);
        goto done;
    }
sized:
    if (object_size > capacity) {
        rc = lib_fail(h, STAGEIN_ERR_TOO_SMALL, "%s is %llu bytes, the buffer %llu", path,
                      (unsigned long long)object_size, (unsigned long long)capacity);
        goto done;
    }
    if (size)
        *size = object_size;
    if (object_size <= done)
        goto done;
    if (gpu >= 0) {
        si_error_t err;
        if (lib_cuda_open(gpu, &j.cuda, &err) < 0) {
            rc = lib_fail_err(h, lib_cuda_built() ? STAGEIN_ERR_NO_DEVICE
                                                  : STAGEIN_ERR_UNSUPPORTED, &err);
            goto done;
        }
        j.device_ptr = (uint64_t)(uintptr_t)buf;
    } else {
        j.dst = buf;
    }
    j.size = object_size;
    if (rdma && !j.rdma && !done)
        rdma_begin(h, &j, server_provider);
    if (!done)
        j.chunk = h->chunk ? h->chunk : j.rdma && j.dst ? LIB_RDMA_CHUNK : LIB_DEFAULT_CHUNK;
    j.nchunks = (object_size + j.chunk - 1) / j.chunk;
    atomic_store(&j.next, done ? 1 : 0); /* the first GET brought a whole chunk */
    pthread_mutex_init(&j.out.lock, NULL);
    rc = run_job(h, &j);
    pthread_mutex_destroy(&j.out.lock);
done:
    if (j.region)
        lib_rdma_unregister(h, j.region);
    lib_cuda_close(j.cuda);
    return rc;
}

/* --- write ------------------------------------------------------------- */

/* A request with a body: PUT of [body, body+len) (an object; a part, by
 * its query), or with c->token of the memory the token grants (the server
 * reads it; the request body is empty); POST with the body (multipart
 * create and complete); DELETE (abort). sha256_hex signs the bytes (NULL:
 * the client hashes the body). 2xx bodies are kept in t->rs.body. */
static int send_call(const call_t *c, const target_t *tg, const char *method,
                     const char *query, const void *body, uint64_t len,
                     const char *sha256_hex, transfer_t *t, si_error_t *err)
{
    si_http_header_t hs[2] = {{"Content-Type", "application/octet-stream"}};
    size_t nh = strcmp(method, "DELETE") != 0 ? 1 : 0;
    if (c->token)
        hs[nh++] = (si_http_header_t){"x-amz-rdma-token", c->token};
    si_s3_request_t rq = {.method = method, .bucket = tg->bucket, .key = tg->key, .query = query,
                          .headers = hs, .nheaders = nh, .body = body,
                          .body_len = c->token ? 0 : (size_t)len, .payload_sha256 = sha256_hex};
    if (perform(c, tg->h, &rq, t, err) < 0 || failed(c, tg, method, t, err))
        return -1;
    if (c->token && (t->rdma_reply != 200 || t->rdma_bytes != len))
        return si_errprintf(err, "S3 PUT %s/%s: the server read %llu bytes by RDMA of %llu",
                            tg->bucket, tg->key, (unsigned long long)t->rdma_bytes,
                            (unsigned long long)len);
    return 0;
}

/* The hex SHA-256 of [p, p+len) into hex (65 bytes). */
static int sha256_hex(const void *p, uint64_t len, char *hex, si_error_t *err)
{
    si_checksum_t *sum = si_checksum_new("sha256", err);
    if (!sum)
        return -1;
    si_checksum_update(sum, p, (size_t)len);
    char text[SI_CHECKSUM_TEXT_MAX];
    si_checksum_final(sum, text);
    si_checksum_free(sum);
    snprintf(hex, 65, "%s", strchr(text, ':') + 1);
    return 0;
}

/* One PUT (object or part), by RDMA when c->token is given, and over HTTP
 * when the server declines it (501: nothing was stored). */
static int put_bytes(stagein_t *h, call_t *c, const target_t *tg, const char *query,
                     const void *buf, uint64_t len, transfer_t *t, si_error_t *err)
{
    char sha[65];
    if (sha256_hex(buf, len, sha, err) < 0)
        return -1;
    const char *token = c->token;
    int rc = send_call(c, tg, "PUT", query, buf, len, sha, t, err);
    si_s3_response_free(&t->rs);
    if (rc == 0) {
        atomic_fetch_add(token ? &h->bytes_rdma : &h->bytes_http, len);
        return 0;
    }
    if (!token || t->rdma_reply != 501)
        return -1;
    lib_rdma_note(h, "the server answered over HTTP: %s",
                  t->rdma_reason[0] ? t->rdma_reason : "declined (501)");
    memset(t, 0, sizeof(*t));
    c->token = NULL;
    rc = send_call(c, tg, "PUT", query, buf, len, sha, t, err);
    c->token = token;
    si_s3_response_free(&t->rs);
    if (rc < 0)
        return -1;
    atomic_fetch_add(&h->bytes_http, len);
    return 0;
}

/* The server's RDMA provider, from a HEAD of the bucket ("" for none). */
static void bucket_provider(const target_t *tg, char provider[SI_RDMA_PROVIDER_MAX + 1])
{
    call_t c;
    transfer_t t = {0};
    si_error_t err;
    provider[0] = '\0';
    if (call_open(&c, tg, false, NULL, &err) == 0 && s3_call(&c, tg, NULL, true, 0, 0, 0, &t,
                                                             &err) == 0)
        strcpy(provider, t.rdma_provider);
    si_s3_response_free(&t.rs);
    call_close(&c);
}

/* Readies RDMA for a write of [buf, buf+size): a registration the server
 * may read and its token; NULL (with the note) leaves it to HTTP. */
static lib_rdma_region_t *rdma_write_begin(stagein_t *h, const target_t *tg, const void *buf,
                                           uint64_t size, char *token, size_t token_size)
{
    si_error_t err;
    char server_provider[SI_RDMA_PROVIDER_MAX + 1];
    const char *provider = h->rdma_provider;
    if (!provider) {
        bucket_provider(tg, server_provider);
        provider = server_provider;
    }
    if (!*provider) {
        lib_rdma_note(h, "the server offers no RDMA (no x-amz-rdma-provider on HEAD)");
        return NULL;
    }
    lib_rdma_region_t *region = NULL;
    if (lib_rdma_open(h, provider, &err) < 0 ||
        !(region = lib_rdma_register(h, (void *)buf, size, false, &err)) ||
        lib_rdma_token(h, region, 0, size, token, token_size, &err) < 0) {
        lib_rdma_note(h, "%s", err.text);
        lib_rdma_unregister(h, region);
        return NULL;
    }
    snprintf(h->rdma_used, sizeof(h->rdma_used), "%s", provider);
    return region;
}

/* --- multipart write ------------------------------------------------------ */

/* S3's bounds: parts of at least 5 MiB (but the last), at most 10,000 of
 * them, and no single PUT above 5 GiB. */
#define PART_MIN (5ull << 20)
#define PARTS_MAX 10000
#define PUT_MAX (5ull << 30)
#define PART_DEFAULT (64ull << 20)

typedef struct {
    stagein_t *h;
    const target_t *tg;
    const unsigned char *src;
    uint64_t size, part_size, nparts;
    lib_rdma_region_t *region;   /* src registered for the server to read */
    char upload_id[200];
    char (*etags)[STAGEIN_CHECKSUM_MAX];
    _Atomic uint64_t next;
    outcome_t out;
} parts_t;

/* The text at path of an XML answer, without the quotes an ETag has. */
static int xml_text(const transfer_t *t, const char *path, char *out, size_t size,
                    si_error_t *err)
{
    char v[STAGEIN_CHECKSUM_MAX + 8];
    if (si_s3_xml_text(t->rs.body, t->rs.body_len, path, v, sizeof(v), err) < 0)
        return -1;
    const char *p = v + (v[0] == '"');
    snprintf(out, size, "%.*s", (int)strcspn(p, "\""), p);
    return out[0] ? 0 : si_errprintf(err, "<%s> is empty", path);
}

static void *part_worker(void *arg)
{
    parts_t *m = arg;
    si_error_t err;
    char token[SI_RDMA_TOKEN_MAX + 1], query[300];
    call_t c;
    bool ready = call_open(&c, m->tg, m->region != NULL, NULL, &err) == 0;
    if (!ready)
        outcome_fail(&m->out, STAGEIN_ERR_NOMEM, &err);
    while (ready && !atomic_load(&m->out.stop)) {
        uint64_t i = atomic_fetch_add(&m->next, 1);
        if (i >= m->nparts)
            break;
        uint64_t off = i * m->part_size;
        uint64_t len = m->size - off < m->part_size ? m->size - off : m->part_size;
        c.token = NULL;
        if (m->region && lib_rdma_token(m->h, m->region, off, len, token, sizeof(token),
                                        &err) == 0)
            c.token = token;
        snprintf(query, sizeof(query), "partNumber=%llu&uploadId=%s",
                 (unsigned long long)i + 1, m->upload_id);
        transfer_t t = {0};
        if (put_bytes(m->h, &c, m->tg, query, m->src + off, len, &t, &err) < 0) {
            outcome_fail(&m->out, t.rs.status ? code_of(&t) : STAGEIN_ERR_CONNECT, &err);
            break;
        }
        snprintf(m->etags[i], STAGEIN_CHECKSUM_MAX, "%s", t.rs.etag);
        atomic_fetch_add(&m->h->landed, len);
    }
    call_close(&c);
    return NULL;
}

/* POST ?uploads, the parts by a few threads, POST ?uploadId (or, after a
 * failure, DELETE ?uploadId so that the server drops the parts). */
static stagein_err_t write_parts(stagein_t *h, const target_t *tg, const void *buf,
                                 uint64_t size, uint64_t part_size, lib_rdma_region_t *region,
                                 char *etag)
{
    si_error_t err;
    parts_t m = {.h = h, .tg = tg, .src = buf, .size = size, .part_size = part_size,
                 .nparts = (size + part_size - 1) / part_size, .region = region,
                 .out.code = STAGEIN_SUCCESS};
    char query[300];
    transfer_t t = {0};
    call_t c;
    const char **etags = NULL;
    stagein_err_t rc = STAGEIN_SUCCESS;
    si_strbuf_t xml;
    si_strbuf_init(&xml, 1u << 20);
    if (call_open(&c, tg, false, NULL, &err) < 0 ||
        !(m.etags = calloc(m.nparts, sizeof(*m.etags))) ||
        !(etags = calloc(m.nparts, sizeof(*etags)))) {
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (send_call(&c, tg, "POST", "uploads", NULL, 0, NULL, &t, &err) < 0) {
        rc = lib_fail_err(h, t.rs.status ? code_of(&t) : STAGEIN_ERR_CONNECT, &err);
        goto done;
    }
    if (xml_text(&t, "InitiateMultipartUploadResult/UploadId", m.upload_id, sizeof(m.upload_id),
                 &err) < 0 ||
        strspn(m.upload_id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") !=
            strlen(m.upload_id)) {
        rc = lib_fail(h, STAGEIN_ERR_PROTOCOL, "S3 POST %s/%s?uploads: no usable UploadId in the"
                      " answer", tg->bucket, tg->key);
        goto done;
    }
    si_s3_response_free(&t.rs);
    pthread_t threads[LIB_MAX_PARALLEL];
    int parallel = h->parallel ? h->parallel : region ? LIB_RDMA_PARALLEL : 4;
    int n = (int)(m.nparts < (uint64_t)parallel ? m.nparts : (uint64_t)parallel), started = 0;
    pthread_mutex_init(&m.out.lock, NULL);
    for (; started < n; started++)
        if (pthread_create(&threads[started], NULL, part_worker, &m) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    pthread_mutex_destroy(&m.out.lock);
    if (started == 0 && m.out.code == STAGEIN_SUCCESS) {
        m.out.code = STAGEIN_ERR_SYSTEM;
        si_errprintf(&m.out.err, "cannot start a writer thread");
    }
    snprintf(query, sizeof(query), "uploadId=%s", m.upload_id);
    if (m.out.code != STAGEIN_SUCCESS) {
        rc = lib_fail_err(h, m.out.code, &m.out.err);
        transfer_t ignored = {0};
        send_call(&c, tg, "DELETE", query, NULL, 0, NULL, &ignored, &err);
        si_s3_response_free(&ignored.rs);
        goto done;
    }
    for (uint64_t i = 0; i < m.nparts; i++)
        etags[i] = m.etags[i];
    si_s3_complete_xml(&xml, etags, m.nparts);
    char sha[65];
    memset(&t, 0, sizeof(t));
    if (xml.failed || sha256_hex(si_strbuf_str(&xml), xml.len, sha, &err) < 0) {
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
    } else if (send_call(&c, tg, "POST", query, si_strbuf_str(&xml), xml.len, sha, &t,
                         &err) < 0) {
        rc = lib_fail_err(h, t.rs.status ? code_of(&t) : STAGEIN_ERR_CONNECT, &err);
    } else if ((t.rs.body && strstr(t.rs.body, "<Error>")) ||
               xml_text(&t, "CompleteMultipartUploadResult/ETag", etag, STAGEIN_CHECKSUM_MAX,
                        &err) < 0) {
        /* S3 may answer 200 and an error in the body */
        char code[64] = "";
        si_s3_xml_text(t.rs.body, t.rs.body_len, "Error/Code", code, sizeof(code), &err);
        rc = lib_fail(h, STAGEIN_ERR_SERVER, "S3 POST %s/%s?uploadId=%s: %s", tg->bucket,
                      tg->key, m.upload_id, code[0] ? code : "no ETag in the answer");
    }
done:
    si_s3_response_free(&t.rs);
    si_strbuf_free(&xml);
    free(m.etags);
    free(etags);
    call_close(&c);
    return rc;
}

/* The part size of a write of size bytes, 0 for one PUT: the chunk size when
 * set (at least 5 MiB), else parts only past S3's 5 GiB PUT limit. */
static uint64_t part_size_of(const stagein_t *h, uint64_t size)
{
    uint64_t part = h->chunk ? h->chunk : PART_DEFAULT;
    if (part < PART_MIN)
        part = PART_MIN;
    if ((size + part - 1) / part > PARTS_MAX)
        part = (size + PARTS_MAX - 1) / PARTS_MAX;
    if (size <= part || (!h->chunk && size <= PUT_MAX))
        return 0;
    return part;
}

stagein_err_t stagein_write(stagein_t *h, const char *path, const void *buf, uint64_t size,
                            char etag[STAGEIN_CHECKSUM_MAX])
{
    stagein_err_t rc = transfer_begin(h, buf, size);
    if (rc != STAGEIN_SUCCESS)
        return rc;
    target_t tg;
    si_error_t err;
    char token[SI_RDMA_TOKEN_MAX + 1], got_etag[STAGEIN_CHECKSUM_MAX] = "";
    lib_rdma_region_t *region = NULL;
    call_t c = {0};
    if ((rc = target_init(h, path, &tg)) != STAGEIN_SUCCESS)
        goto done;
    if (h->transport == LIB_TRANSPORT_RDMA && size > 0)
        region = rdma_write_begin(h, &tg, buf, size, token, sizeof(token));
    uint64_t part = part_size_of(h, size);
    if (part) {
        rc = write_parts(h, &tg, buf, size, part, region, got_etag);
        goto done;
    }
    transfer_t t = {0};
    if (call_open(&c, &tg, region != NULL, NULL, &err) < 0) {
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "cannot make a libcurl handle");
        goto done;
    }
    c.token = region ? token : NULL;
    if (put_bytes(h, &c, &tg, NULL, size ? buf : "", size, &t, &err) < 0)
        rc = lib_fail_err(h, t.rs.status ? code_of(&t) : STAGEIN_ERR_CONNECT, &err);
    snprintf(got_etag, sizeof(got_etag), "%s", t.rs.etag);
done:
    if (rc == STAGEIN_SUCCESS && etag)
        snprintf(etag, STAGEIN_CHECKSUM_MAX, "%s", got_etag);
    call_close(&c);
    lib_rdma_unregister(h, region);
    return rc;
}

stagein_err_t stagein_read_info(const stagein_t *h, stagein_read_info_t *out)
{
    if (!h || !out)
        return STAGEIN_ERR_ARGUMENT;
    stagein_t *m = (stagein_t *)h;   /* atomics are read through a non-const pointer */
    out->bytes_rdma = atomic_load(&m->bytes_rdma);
    out->bytes_http = atomic_load(&m->bytes_http);
    snprintf(out->provider, sizeof(out->provider), "%s", h->rdma_used);
    snprintf(out->rdma_note, sizeof(out->rdma_note), "%s", h->rdma_note);
    return STAGEIN_SUCCESS;
}

uint64_t stagein_read_progress(const stagein_t *h)
{
    return h ? atomic_load(&((stagein_t *)h)->landed) : 0;
}

stagein_err_t stagein_verify(const void *bytes, uint64_t size, const char *etag,
                             char checksum[STAGEIN_CHECKSUM_MAX])
{
    if ((!bytes && size) || !etag || !checksum)
        return STAGEIN_ERR_ARGUMENT;
    size_t n = strlen(etag);
    /* stageind's ETag: the MD5 of the object (32 hex), or the first 32 hex
     * of its SHA-256 followed by "-1" (daemon/s3/proto.c, s3_etag_of). */
    bool md5 = n == 32, sha = n == 34 && strcmp(etag + 32, "-1") == 0;
    if (!md5 && !sha)
        return STAGEIN_ERR_UNSUPPORTED;
    si_error_t err;
    si_checksum_t *c = si_checksum_new(md5 ? "md5" : "sha256", &err);
    if (!c)
        return STAGEIN_ERR_NOMEM;
    si_checksum_update(c, bytes, size);
    char text[SI_CHECKSUM_TEXT_MAX];
    si_checksum_final(c, text);
    si_checksum_free(c);
    snprintf(checksum, STAGEIN_CHECKSUM_MAX, "%s", text);
    const char *hex = strchr(text, ':') + 1;
    return strncasecmp(hex, etag, 32) == 0 ? STAGEIN_SUCCESS : STAGEIN_ERR_CHECKSUM;
}
