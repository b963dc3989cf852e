/* Objects of stageind's S3 endpoint to and from caller memory, over the
 * project's S3 client and its window of parallel requests
 * (common/aws/s3client.h, s3window.h). Reading: the first range (or a HEAD)
 * for the size, then SigV4-signed range GETs a few at a time, landing
 * straight at their offsets (host memory) or through a pinned bounce
 * buffer per range in flight into GPU memory. Writing: one signed PUT, or
 * a multipart upload's parts a few at a time, the body read by the server
 * from registered memory over RDMA or sent in the request. */
#include "config.h"
#include "stagein/lib/internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "common/aws/s3client.h"
#include "common/aws/s3window.h"
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

/* The RDMA extension's headers of one answer: x-amz-rdma-reply (0: none),
 * -bytes-transferred, -reason of a 501; HEAD: the server's
 * x-amz-rdma-provider. */
typedef struct {
    int reply;
    uint64_t bytes;
    char reason[160];
    char provider[SI_RDMA_PROVIDER_MAX + 1];
} rdma_answer_t;

static void copy_header(const char *v, char *out, size_t size)
{
    snprintf(out, size, "%s", v + strspn(v, " \t"));
}

static void rdma_header(rdma_answer_t *a, const char *line)
{
    if (strncmp(line, "HTTP/", 5) == 0) {
        memset(a, 0, sizeof(*a));
    } else if (strncasecmp(line, "x-amz-rdma-reply:", 17) == 0) {
        a->reply = (int)strtol(line + 17, NULL, 10);
    } else if (strncasecmp(line, "x-amz-rdma-bytes-transferred:", 29) == 0) {
        a->bytes = strtoull(line + 29, NULL, 10);
    } else if (strncasecmp(line, "x-amz-rdma-reason:", 18) == 0) {
        copy_header(line + 18, a->reason, sizeof(a->reason));
    } else if (strncasecmp(line, "x-amz-rdma-provider:", 20) == 0) {
        copy_header(line + 20, a->provider, sizeof(a->provider));
    }
}

/* Whether an answer failed (no answer, an error status), saying so. */
static bool failed(const target_t *tg, const char *method, const si_s3_response_t *rs,
                   si_error_t *err)
{
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

static stagein_err_t code_of(long status, const char *s3_code)
{
    if (status == 403 && strcmp(s3_code, "InvalidObjectState") == 0)
        return STAGEIN_ERR_NOT_CACHED;
    return lib_code_of_http(status);
}

/* --- windows of requests (common/aws/s3window.h) -------------------------- */

/* A window of the library's requests: one object's ranges or parts (or its
 * one request), with per-slot RDMA state (job j uses slot j % nslots: the
 * window starts job j + nslots only once job j is handed on). The first
 * member of the reader's and the writer's state, the window's arg. */
typedef struct {
    stagein_t *h;
    const target_t *tg;
    si_s3_job_t *jobs;
    size_t njobs;
    int nslots;
    rdma_answer_t *answers;
    char (*tokens)[SI_RDMA_TOKEN_MAX + 1];
    bool *sent_token;
    stagein_err_t code;            /* of a failure that is not an answer's */
    long failed_status;            /* of the answer that failed the window */
} lib_window_t;

/* Jobs of len bytes each over [off, end) (one for an empty range), at most
 * parallel at a time. */
static stagein_err_t lib_window_init(lib_window_t *lw, stagein_t *h, const target_t *tg,
                                     uint64_t off, uint64_t end, uint64_t len, int parallel)
{
    size_t n;
    si_s3_job_t *jobs = si_s3_jobs_split(off, end, len, &n);
    *lw = (lib_window_t){.h = h, .tg = tg, .jobs = jobs, .njobs = n,
                         .nslots = (size_t)parallel < n ? parallel : (int)n};
    lw->answers = calloc((size_t)lw->nslots, sizeof(*lw->answers));
    lw->tokens = calloc((size_t)lw->nslots, sizeof(*lw->tokens));
    lw->sent_token = calloc((size_t)lw->nslots, sizeof(*lw->sent_token));
    if (!lw->jobs || !lw->answers || !lw->tokens || !lw->sent_token)
        return lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory for %zu requests", n);
    return STAGEIN_SUCCESS;
}

static void lib_window_free(lib_window_t *lw)
{
    free(lw->jobs);
    free(lw->answers);
    free(lw->tokens);
    free(lw->sent_token);
}

static size_t slot_of(const lib_window_t *lw, size_t j)
{
    return j % (size_t)lw->nslots;
}

static void job_header(void *arg, const char *line)
{
    si_s3_job_t *jb = arg;
    lib_window_t *lw = jb->window->arg;
    rdma_header(&lw->answers[slot_of(lw, (size_t)(jb - jb->window->jobs))], line);
}

static void lib_progress(void *arg, int *fd, int *ms)
{
    lib_rdma_progress(((lib_window_t *)arg)->h, fd, ms);
}

/* Hands the done jobs on in order. */
static void flush_done(si_s3_window_t *w)
{
    while (w->flushed < w->njobs && w->jobs[w->flushed].state == SI_S3_JOB_DONE)
        w->jobs[w->flushed++].state = SI_S3_JOB_FLUSHED;
}

/* Runs the window, the RDMA provider driven meanwhile when rdma; landed
 * (NULL: none) counts the bytes GETs land. The failure on the handle. */
static stagein_err_t lib_window_run(lib_window_t *lw, bool rdma, si_s3_job_fn setup,
                                    si_s3_check_fn check, si_s3_job_fn done,
                                    _Atomic uint64_t *landed, const char *method)
{
    si_s3_window_t w = {.client = lw->tg->s3, .jobs = lw->jobs, .njobs = lw->njobs,
                        .setup = setup, .check = check, .done = done, .arg = lw,
                        .progress = rdma ? lib_progress : NULL, .landed = landed};
    char what[16], where[400];
    snprintf(what, sizeof(what), "S3 %s", method);
    snprintf(where, sizeof(where), "%s/%s", lw->tg->bucket, lw->tg->key);
    si_error_t err;
    lw->code = STAGEIN_SUCCESS;
    if (si_s3_window_run(&w, lw->nslots, what, where, &err) == 0)
        return STAGEIN_SUCCESS;
    lw->failed_status = w.failed_status;
    stagein_err_t code = lw->code != STAGEIN_SUCCESS ? lw->code
                         : w.failed_status ? code_of(w.failed_status, w.failed_code)
                                           : STAGEIN_ERR_CONNECT;
    return lib_fail_err(lw->h, code, &err);
}

static void head_header(void *arg, const char *line)
{
    rdma_header(arg, line);
}

/* provider (may be NULL) receives the server's RDMA provider, "" for none;
 * key NULL: of the bucket. */
static stagein_err_t head(stagein_t *h, const target_t *tg, const char *key, uint64_t *size,
                          char *etag, bool *cached, char provider[SI_RDMA_PROVIDER_MAX + 1])
{
    si_error_t err;
    rdma_answer_t a = {0};
    si_s3_response_t rs = {0};
    stagein_err_t rc = STAGEIN_SUCCESS;
    si_s3_xfer_t *x = si_s3_xfer_new(tg->s3, &err);
    si_s3_request_t rq = {.method = "HEAD", .bucket = tg->bucket, .key = key,
                          .payload_sha256 = SI_SIGV4_UNSIGNED_PAYLOAD,
                          .on_header = head_header, .arg = &a};
    if (!x) {
        rc = lib_fail_err(h, STAGEIN_ERR_NOMEM, &err);
    } else if (si_s3_xfer_perform(x, &rq, &rs, &err) < 0 || failed(tg, "HEAD", &rs, &err)) {
        rc = lib_fail_err(h, rs.status ? code_of(rs.status, rs.code) : STAGEIN_ERR_CONNECT, &err);
    } else {
        if (size)
            *size = rs.content_length;
        if (etag)
            snprintf(etag, STAGEIN_CHECKSUM_MAX, "%s", rs.etag);
        /* GLACIER without a restore copy is not readable (see doc/s3.md) */
        if (cached)
            *cached = strcmp(rs.storage_class, "GLACIER") != 0;
        if (provider)
            strcpy(provider, a.provider);
    }
    si_s3_response_free(&rs);
    si_s3_xfer_free(x);
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
    stagein_err_t rc = target_init(h, path, &tg);
    if (rc == STAGEIN_SUCCESS)
        rc = head(h, &tg, tg.key, size, etag, NULL, NULL);
    return rc;
}

/* --- parallel read ------------------------------------------------------ */

typedef struct {
    lib_window_t lw;               /* first: the window's arg */
    unsigned char *dst;            /* host destination, or NULL for the GPU */
    lib_cuda_t *cuda;              /* GPU destination */
    uint64_t device_ptr;
    uint64_t size, chunk;
    bool rdma;                     /* send tokens (the handle's client is open) */
    lib_rdma_region_t *region;     /* dst registered (host destination) */
    void **bounce;                 /* GPU: a pinned buffer of chunk bytes per slot */
    lib_rdma_region_t **bounce_region; /* each registered (RDMA), or NULL */
    /* the first range of an object of unknown size: fewer bytes than asked
     * are the whole object; total: its size (Content-Range, or what came) */
    bool first;
    uint64_t total;
} reader_t;

/* The token for one range: of the registered destination, or of the
 * slot's registered bounce buffer (GPU destination). NULL: send none. */
static const char *range_token(reader_t *r, size_t slot, uint64_t off, uint64_t len)
{
    si_error_t err;
    lib_rdma_region_t *region = r->dst ? r->region : r->bounce_region[slot];
    if (!r->rdma || !region)
        return NULL;
    if (lib_rdma_token(r->lw.h, region, r->dst ? off : 0, len, r->lw.tokens[slot],
                       sizeof(r->lw.tokens[slot]), &err) < 0) {
        lib_rdma_note(r->lw.h, "no token: %s", err.text);
        return NULL;
    }
    return r->lw.tokens[slot];
}

static int range_setup(si_s3_window_t *w, size_t j, si_error_t *err)
{
    reader_t *r = w->arg;
    si_s3_job_t *jb = &w->jobs[j];
    size_t slot = slot_of(&r->lw, j);
    (void)err;
    jb->buf = r->dst ? r->dst + jb->off : r->bounce[slot];
    size_t nh = 0;
    if (r->first || !(jb->off == 0 && jb->len == r->size)) {
        snprintf(jb->range, sizeof(jb->range), "bytes=%" PRIu64 "-%" PRIu64, jb->off,
                 jb->off + jb->len - 1);
        jb->hdr[nh++] = (si_http_header_t){"Range", jb->range};
    }
    const char *token = range_token(r, slot, jb->off, jb->len);
    r->lw.sent_token[slot] = token != NULL;
    if (token)
        jb->hdr[nh++] = (si_http_header_t){"x-amz-rdma-token", token};
    jb->rq = (si_s3_request_t){.method = "GET", .bucket = r->lw.tg->bucket, .key = r->lw.tg->key,
                               .headers = jb->hdr, .nheaders = nh,
                               .payload_sha256 = SI_SIGV4_UNSIGNED_PAYLOAD,
                               .on_data = si_s3_job_land, .on_header = job_header, .arg = jb};
    return 0;
}

/* A range came whole (the first range of an object of unknown size: up to
 * the object's end), by RDMA (nothing in the body) or in the body. */
static si_s3_answer_t range_check(si_s3_window_t *w, size_t j, si_error_t *err)
{
    reader_t *r = w->arg;
    const target_t *tg = r->lw.tg;
    si_s3_job_t *jb = &w->jobs[j];
    const rdma_answer_t *a = &r->lw.answers[slot_of(&r->lw, j)];
    if (failed(tg, "GET", &jb->rs, err))
        return SI_S3_ANSWER_FAILED;
    bool by_rdma = a->reply == 200;
    uint64_t came = by_rdma ? a->bytes : jb->got;
    r->total = jb->rs.range_total ? jb->rs.range_total : came;
    if ((came == jb->len || (r->first && came < jb->len)) && (!by_rdma || jb->got == 0))
        return SI_S3_ANSWER_GOOD;
    if (by_rdma)
        si_errprintf(err, "S3 GET %s/%s: the server wrote %llu bytes by RDMA (and %zu in the"
                     " body) of the %llu asked for", tg->bucket, tg->key,
                     (unsigned long long)a->bytes, jb->got, (unsigned long long)jb->len);
    else
        si_errprintf(err, "S3 GET %s/%s: %llu bytes at %llu came short (%zu)", tg->bucket,
                     tg->key, (unsigned long long)jb->len, (unsigned long long)jb->off, jb->got);
    return SI_S3_ANSWER_FAILED;
}

/* Counts where a range's bytes came from; a GPU destination gets them
 * from the slot's bounce buffer. */
static int range_done(si_s3_window_t *w, size_t j, si_error_t *err)
{
    reader_t *r = w->arg;
    stagein_t *h = r->lw.h;
    si_s3_job_t *jb = &w->jobs[j];
    size_t slot = slot_of(&r->lw, j);
    const rdma_answer_t *a = &r->lw.answers[slot];
    uint64_t len = a->reply == 200 ? a->bytes : jb->got;
    if (a->reply == 200) {
        atomic_fetch_add(&h->bytes_rdma, len);
        if (r->dst)
            atomic_fetch_add(&h->landed, len);
    } else {
        atomic_fetch_add(&h->bytes_http, len);
        if (r->lw.sent_token[slot])
            lib_rdma_note(h, "the server answered over HTTP: %s", a->reply == 501
                          ? (a->reason[0] ? a->reason : "declined (501)")
                          : "it does not speak RDMA (no x-amz-rdma-reply)");
    }
    if (!r->dst) {
        if (lib_cuda_copy_to_device(r->cuda, r->device_ptr + jb->off, r->bounce[slot], len,
                                    err) < 0) {
            r->lw.code = STAGEIN_ERR_NO_DEVICE;
            return -1;
        }
        atomic_fetch_add(&h->landed, len);
    }
    flush_done(w);
    return 0;
}

/* Readies RDMA for a read: the provider asked for, else the server's;
 * the destination registered. Anything missing leaves the read to HTTP
 * and says why (stagein_read_info). */
static void rdma_begin(stagein_t *h, reader_t *r, const char *server_provider)
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
    if (r->dst && !(r->region = lib_rdma_register(h, r->dst, r->size, true, &err))) {
        lib_rdma_note(h, "%s", err.text);
        return;
    }
    snprintf(h->rdma_used, sizeof(h->rdma_used), "%s", provider);
    r->rdma = true;
}

/* The GPU destination's pinned bounce buffers, one a slot (registered for
 * RDMA when the read uses it). */
static stagein_err_t bounce_alloc(reader_t *r)
{
    stagein_t *h = r->lw.h;
    si_error_t err;
    size_t n = (size_t)r->lw.nslots;
    if (!(r->bounce = calloc(n, sizeof(*r->bounce))) ||
        !(r->bounce_region = calloc(n, sizeof(*r->bounce_region))))
        return lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
    for (size_t s = 0; s < n; s++) {
        if (lib_cuda_bounce_alloc(r->cuda, r->chunk, &r->bounce[s], &err) < 0)
            return lib_fail_err(h, STAGEIN_ERR_NO_DEVICE, &err);
        if (r->rdma && !(r->bounce_region[s] = lib_rdma_register(h, r->bounce[s], r->chunk,
                                                                 true, &err)))
            lib_rdma_note(h, "cannot register the bounce buffer: %s", err.text);
    }
    return STAGEIN_SUCCESS;
}

static void bounce_free(reader_t *r)
{
    for (int s = 0; r->bounce && s < r->lw.nslots; s++) {
        if (r->bounce_region && r->bounce_region[s])
            lib_rdma_unregister(r->lw.h, r->bounce_region[s]);
        if (r->bounce[s])
            lib_cuda_bounce_free(r->cuda, r->bounce[s]);
    }
    free(r->bounce);
    free(r->bounce_region);
    r->bounce = NULL;
    r->bounce_region = NULL;
}

/* Reads [from, r->size) in ranges of r->chunk. */
static stagein_err_t read_ranges(stagein_t *h, reader_t *r, uint64_t from)
{
    int parallel = h->parallel ? h->parallel : r->rdma ? LIB_RDMA_PARALLEL : LIB_DEFAULT_PARALLEL;
    stagein_err_t rc = lib_window_init(&r->lw, h, r->lw.tg, from, r->size, r->chunk, parallel);
    if (rc == STAGEIN_SUCCESS && !r->dst)
        rc = bounce_alloc(r);
    if (rc == STAGEIN_SUCCESS)
        rc = lib_window_run(&r->lw, r->rdma, range_setup, range_check, range_done,
                            r->dst ? &h->landed : NULL, "GET");
    bounce_free(r);
    lib_window_free(&r->lw);
    return rc;
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
static int read_first(stagein_t *h, reader_t *r, uint64_t first, uint64_t *object_size,
                      stagein_err_t *rc)
{
    r->first = true;
    *rc = lib_window_init(&r->lw, h, r->lw.tg, 0, first, first, 1);
    if (*rc == STAGEIN_SUCCESS)
        *rc = lib_window_run(&r->lw, r->rdma, range_setup, range_check, range_done, &h->landed,
                             "GET");
    r->first = false;
    lib_window_free(&r->lw);
    if (*rc == STAGEIN_SUCCESS) {
        *object_size = r->total;
        return 0;
    }
    if (r->lw.failed_status == 416) {
        h->error[0] = '\0';
        *rc = STAGEIN_SUCCESS;
        return 1;
    }
    if (*rc == STAGEIN_ERR_NOT_CACHED)
        *rc = lib_fail(h, *rc, "%s/%s is on tape only: stage it first", r->lw.tg->bucket,
                       r->lw.tg->key);
    return 0;
}

stagein_err_t stagein_read(stagein_t *h, const char *path, void *buf, uint64_t capacity, int gpu,
                           uint64_t *size)
{
    stagein_err_t rc = transfer_begin(h, buf, capacity);
    if (rc != STAGEIN_SUCCESS)
        return rc;
    target_t tg;
    reader_t r = {0};
    bool cached = true, rdma = h->transport == LIB_TRANSPORT_RDMA;
    uint64_t object_size = 0, done = 0;
    char server_provider[SI_RDMA_PROVIDER_MAX + 1] = "";
    if ((rc = target_init(h, path, &tg)) != STAGEIN_SUCCESS)
        goto done;
    r.lw.tg = &tg;
    /* Host memory, and the server's provider known when it matters: the
     * first GET tells the size. Else a HEAD first (and the provider kept). */
    if (gpu < 0 && capacity > 0 && (!rdma || h->rdma_provider || h->server_provider_known)) {
        r.dst = buf;
        r.size = capacity;
        if (rdma)
            rdma_begin(h, &r, h->server_provider);
        r.chunk = h->chunk ? h->chunk : r.rdma ? LIB_RDMA_CHUNK : LIB_DEFAULT_CHUNK;
        uint64_t first = capacity < r.chunk ? capacity : r.chunk;
        if (read_first(h, &r, first, &object_size, &rc) == 0) {
            if (rc != STAGEIN_SUCCESS)
                goto done;
            done = first;
            goto sized;
        }
        if (r.region)
            lib_rdma_unregister(h, r.region);
        r.region = NULL;
        r.rdma = false;
    }
    if ((rc = head(h, &tg, tg.key, &object_size, NULL, &cached, server_provider)) !=
        STAGEIN_SUCCESS)
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
        if (lib_cuda_open(gpu, &r.cuda, &err) < 0) {
            rc = lib_fail_err(h, lib_cuda_built() ? STAGEIN_ERR_NO_DEVICE
                                                  : STAGEIN_ERR_UNSUPPORTED, &err);
            goto done;
        }
        r.device_ptr = (uint64_t)(uintptr_t)buf;
    } else {
        r.dst = buf;
    }
    r.size = object_size;
    if (rdma && !r.rdma && !done)
        rdma_begin(h, &r, server_provider);
    if (!done)
        r.chunk = h->chunk ? h->chunk : r.rdma && r.dst ? LIB_RDMA_CHUNK : LIB_DEFAULT_CHUNK;
    rc = read_ranges(h, &r, done);
done:
    if (r.region)
        lib_rdma_unregister(h, r.region);
    lib_cuda_close(r.cuda);
    return rc;
}

/* --- write ------------------------------------------------------------- */

/* One request with a body and no token (multipart create and complete:
 * POST; abort: DELETE); 2xx bodies kept in rs->body. sha256_hex signs the
 * bytes (NULL: the client hashes the body). */
static int send_call(si_s3_xfer_t *x, const target_t *tg, const char *method, const char *query,
                     const void *body, uint64_t len, const char *sha256_hex,
                     si_s3_response_t *rs, si_error_t *err)
{
    si_http_header_t hs[1] = {{"Content-Type", "application/octet-stream"}};
    si_s3_request_t rq = {.method = method, .bucket = tg->bucket, .key = tg->key, .query = query,
                          .headers = hs, .nheaders = strcmp(method, "DELETE") != 0 ? 1 : 0,
                          .body = body, .body_len = (size_t)len, .payload_sha256 = sha256_hex};
    if (si_s3_xfer_perform(x, &rq, rs, err) < 0 || failed(tg, method, rs, err))
        return -1;
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

/* Readies RDMA for a write of [buf, buf+size): a registration the server
 * may read; NULL (with the note) leaves it to HTTP. */
static lib_rdma_region_t *rdma_write_begin(stagein_t *h, const target_t *tg, const void *buf,
                                           uint64_t size)
{
    si_error_t err;
    char server_provider[SI_RDMA_PROVIDER_MAX + 1] = "";
    const char *provider = h->rdma_provider;
    if (!provider) {
        if (head(h, tg, NULL, NULL, NULL, NULL, server_provider) != STAGEIN_SUCCESS)
            h->error[0] = '\0';   /* no provider known: HTTP */
        provider = server_provider;
    }
    if (!*provider) {
        lib_rdma_note(h, "the server offers no RDMA (no x-amz-rdma-provider on HEAD)");
        return NULL;
    }
    lib_rdma_region_t *region = NULL;
    if (lib_rdma_open(h, provider, &err) < 0 ||
        !(region = lib_rdma_register(h, (void *)buf, size, false, &err))) {
        lib_rdma_note(h, "%s", err.text);
        lib_rdma_unregister(h, region);
        return NULL;
    }
    snprintf(h->rdma_used, sizeof(h->rdma_used), "%s", provider);
    return region;
}

/* S3's bounds: parts of at least 5 MiB (but the last), at most 10,000 of
 * them, and no single PUT above 5 GiB. */
#define PART_MIN (5ull << 20)
#define PARTS_MAX 10000
#define PUT_MAX (5ull << 30)
#define PART_DEFAULT (64ull << 20)

/* The PUTs of one write: the object's one PUT (no upload id) or its parts,
 * each by RDMA (a token of the registered source) or, when the server
 * declines it (501: nothing was stored), over HTTP. */
typedef struct {
    lib_window_t lw;               /* first: the window's arg */
    const unsigned char *src;
    lib_rdma_region_t *region;     /* src registered for the server to read */
    const char *upload_id;         /* NULL: one PUT of the object */
    bool *http_only;               /* per job: the server declined RDMA for it */
} writer_t;

static int put_setup(si_s3_window_t *w, size_t j, si_error_t *err)
{
    writer_t *wr = w->arg;
    si_s3_job_t *jb = &w->jobs[j];
    size_t slot = slot_of(&wr->lw, j);
    if (!jb->hash[0] && sha256_hex(wr->src + jb->off, jb->len, jb->hash, err) < 0)
        return -1;
    jb->buf = (unsigned char *)wr->src + jb->off;
    const char *token = NULL;
    si_error_t ignored;
    if (wr->region && !wr->http_only[j] &&
        lib_rdma_token(wr->lw.h, wr->region, jb->off, jb->len, wr->lw.tokens[slot],
                       sizeof(wr->lw.tokens[slot]), &ignored) == 0)
        token = wr->lw.tokens[slot];
    wr->lw.sent_token[slot] = token != NULL;
    size_t nh = 0;
    jb->hdr[nh++] = (si_http_header_t){"Content-Type", "application/octet-stream"};
    if (token)
        jb->hdr[nh++] = (si_http_header_t){"x-amz-rdma-token", token};
    if (wr->upload_id)
        snprintf(jb->query, sizeof(jb->query), "partNumber=%zu&uploadId=%s", j + 1,
                 wr->upload_id);
    /* with a token the server reads the bytes (the body is empty); the
     * signature covers them all the same */
    jb->rq = (si_s3_request_t){.method = "PUT", .bucket = wr->lw.tg->bucket,
                               .key = wr->lw.tg->key, .query = wr->upload_id ? jb->query : NULL,
                               .headers = jb->hdr, .nheaders = nh,
                               .body = jb->len ? (const void *)jb->buf : "",
                               .body_len = token ? 0 : (size_t)jb->len,
                               .payload_sha256 = jb->hash, .on_header = job_header, .arg = jb};
    return 0;
}

static si_s3_answer_t put_check(si_s3_window_t *w, size_t j, si_error_t *err)
{
    writer_t *wr = w->arg;
    const target_t *tg = wr->lw.tg;
    si_s3_job_t *jb = &w->jobs[j];
    size_t slot = slot_of(&wr->lw, j);
    const rdma_answer_t *a = &wr->lw.answers[slot];
    bool token = wr->lw.sent_token[slot];
    if (token && a->reply == 501) {
        lib_rdma_note(wr->lw.h, "the server answered over HTTP: %s",
                      a->reason[0] ? a->reason : "declined (501)");
        wr->http_only[j] = true;
        return SI_S3_ANSWER_AGAIN;
    }
    if (failed(tg, "PUT", &jb->rs, err))
        return SI_S3_ANSWER_FAILED;
    if (token && (a->reply != 200 || a->bytes != jb->len)) {
        si_errprintf(err, "S3 PUT %s/%s: the server read %llu bytes by RDMA of %llu",
                     tg->bucket, tg->key, (unsigned long long)a->bytes,
                     (unsigned long long)jb->len);
        return SI_S3_ANSWER_FAILED;
    }
    return SI_S3_ANSWER_GOOD;
}

static int put_done(si_s3_window_t *w, size_t j, si_error_t *err)
{
    writer_t *wr = w->arg;
    stagein_t *h = wr->lw.h;
    si_s3_job_t *jb = &w->jobs[j];
    (void)err;
    atomic_fetch_add(wr->lw.sent_token[slot_of(&wr->lw, j)] ? &h->bytes_rdma : &h->bytes_http,
                     jb->len);
    atomic_fetch_add(&h->landed, jb->len);
    flush_done(w);
    return 0;
}

/* The PUTs of [buf, buf+size): one (part_size 0) or parts of part_size. */
static stagein_err_t put_window(stagein_t *h, const target_t *tg, const void *buf,
                                uint64_t size, uint64_t part_size, lib_rdma_region_t *region,
                                const char *upload_id, char (*etags)[STAGEIN_CHECKSUM_MAX])
{
    writer_t wr = {.src = buf, .region = region, .upload_id = upload_id};
    int parallel = h->parallel ? h->parallel : region ? LIB_RDMA_PARALLEL : 4;
    stagein_err_t rc = lib_window_init(&wr.lw, h, tg, 0, size, part_size ? part_size : size,
                                       part_size ? parallel : 1);
    if (rc == STAGEIN_SUCCESS && !(wr.http_only = calloc(wr.lw.njobs, sizeof(bool))))
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
    if (rc == STAGEIN_SUCCESS)
        rc = lib_window_run(&wr.lw, region != NULL, put_setup, put_check, put_done, NULL, "PUT");
    for (size_t j = 0; rc == STAGEIN_SUCCESS && j < wr.lw.njobs; j++)
        snprintf(etags[j], STAGEIN_CHECKSUM_MAX, "%s", wr.lw.jobs[j].etag);
    free(wr.http_only);
    lib_window_free(&wr.lw);
    return rc;
}

/* The text at path of an XML answer, without the quotes an ETag has. */
static int xml_text(const si_s3_response_t *rs, const char *path, char *out, size_t size,
                    si_error_t *err)
{
    char v[STAGEIN_CHECKSUM_MAX + 8];
    if (si_s3_xml_text(rs->body, rs->body_len, path, v, sizeof(v), err) < 0)
        return -1;
    const char *p = v + (v[0] == '"');
    snprintf(out, size, "%.*s", (int)strcspn(p, "\""), p);
    return out[0] ? 0 : si_errprintf(err, "<%s> is empty", path);
}

/* POST ?uploads, the parts, POST ?uploadId (or, after a failure, DELETE
 * ?uploadId so that the server drops the parts). */
static stagein_err_t write_parts(stagein_t *h, const target_t *tg, const void *buf,
                                 uint64_t size, uint64_t part_size, lib_rdma_region_t *region,
                                 char *etag)
{
    si_error_t err;
    uint64_t nparts = (size + part_size - 1) / part_size;
    char upload_id[200], query[300];
    si_s3_response_t rs = {0};
    char (*part_etags)[STAGEIN_CHECKSUM_MAX] = calloc(nparts, sizeof(*part_etags));
    const char **etags = calloc(nparts, sizeof(*etags));
    si_s3_xfer_t *x = si_s3_xfer_new(tg->s3, &err);
    stagein_err_t rc = STAGEIN_SUCCESS;
    si_strbuf_t xml;
    si_strbuf_init(&xml, 1u << 20);
    if (!x || !part_etags || !etags) {
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (send_call(x, tg, "POST", "uploads", NULL, 0, NULL, &rs, &err) < 0) {
        rc = lib_fail_err(h, rs.status ? code_of(rs.status, rs.code) : STAGEIN_ERR_CONNECT, &err);
        goto done;
    }
    if (xml_text(&rs, "InitiateMultipartUploadResult/UploadId", upload_id, sizeof(upload_id),
                 &err) < 0 ||
        strspn(upload_id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") !=
            strlen(upload_id)) {
        rc = lib_fail(h, STAGEIN_ERR_PROTOCOL, "S3 POST %s/%s?uploads: no usable UploadId in the"
                      " answer", tg->bucket, tg->key);
        goto done;
    }
    si_s3_response_free(&rs);
    snprintf(query, sizeof(query), "uploadId=%s", upload_id);
    if ((rc = put_window(h, tg, buf, size, part_size, region, upload_id, part_etags)) !=
        STAGEIN_SUCCESS) {
        si_s3_response_t ignored = {0};
        send_call(x, tg, "DELETE", query, NULL, 0, NULL, &ignored, &err);
        si_s3_response_free(&ignored);
        goto done;
    }
    for (uint64_t i = 0; i < nparts; i++)
        etags[i] = part_etags[i];
    si_s3_complete_xml(&xml, etags, nparts);
    char sha[65];
    memset(&rs, 0, sizeof(rs));
    if (xml.failed || sha256_hex(si_strbuf_str(&xml), xml.len, sha, &err) < 0) {
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
    } else if (send_call(x, tg, "POST", query, si_strbuf_str(&xml), xml.len, sha, &rs,
                         &err) < 0) {
        rc = lib_fail_err(h, rs.status ? code_of(rs.status, rs.code) : STAGEIN_ERR_CONNECT, &err);
    } else if ((rs.body && strstr(rs.body, "<Error>")) ||
               xml_text(&rs, "CompleteMultipartUploadResult/ETag", etag, STAGEIN_CHECKSUM_MAX,
                        &err) < 0) {
        /* S3 may answer 200 and an error in the body */
        char code[64] = "";
        si_s3_xml_text(rs.body, rs.body_len, "Error/Code", code, sizeof(code), &err);
        rc = lib_fail(h, STAGEIN_ERR_SERVER, "S3 POST %s/%s?uploadId=%s: %s", tg->bucket,
                      tg->key, upload_id, code[0] ? code : "no ETag in the answer");
    }
done:
    si_s3_response_free(&rs);
    si_strbuf_free(&xml);
    free(part_etags);
    free(etags);
    si_s3_xfer_free(x);
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
    char got_etag[1][STAGEIN_CHECKSUM_MAX] = {""};
    lib_rdma_region_t *region = NULL;
    if ((rc = target_init(h, path, &tg)) != STAGEIN_SUCCESS)
        goto done;
    if (h->transport == LIB_TRANSPORT_RDMA && size > 0)
        region = rdma_write_begin(h, &tg, buf, size);
    uint64_t part = part_size_of(h, size);
    if (part)
        rc = write_parts(h, &tg, buf, size, part, region, got_etag[0]);
    else
        rc = put_window(h, &tg, size ? buf : "", size, 0, region, NULL, got_etag);
done:
    if (rc == STAGEIN_SUCCESS && etag)
        snprintf(etag, STAGEIN_CHECKSUM_MAX, "%s", got_etag[0]);
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
