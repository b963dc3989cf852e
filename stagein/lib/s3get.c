/* Objects of stageind's S3 endpoint to and from caller memory. Reading: a
 * HEAD for the size and ETag, then SigV4-signed range GETs run by a few
 * threads, each landing its ranges straight at their offsets (host memory)
 * or through a pinned bounce buffer into GPU memory. Writing: one signed
 * PUT, its body read by the server from registered memory over RDMA or
 * sent in the request. */
#include "config.h"
#include "stagein/lib/internal.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "common/checksum.h"
#include "common/rdma_token.h"
#include "common/strbuf.h"
#include "stagein/lib/gpu.h"

#define S3_ERROR_BODY_MAX 4096
#define S3_TIMEOUT_S 600L

/* Session credentials are renewed this long before they expire, so that a
 * read started with them does not outlive them. */
#define SESSION_RENEW_S 600

static stagein_err_t signer(stagein_t *h, si_sigv4_signer_t **out)
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
    if (!h->signer) {
        si_error_t err;
        h->signer = si_sigv4_signer_new(h->access_key, h->secret, h->region, "s3", &err);
        if (!h->signer)
            return lib_fail_err(h, STAGEIN_ERR_CONFIG, &err);
    }
    *out = h->signer;
    return STAGEIN_SUCCESS;
}

/* "/bucket/key" with every key byte but unreserved ones and '/' escaped. */
static char *object_path(const char *bucket, const char *key)
{
    size_t n = strlen(bucket), k = strlen(key);
    char *p = malloc(n + 3 * k + 3), *o = p;
    if (!p)
        return NULL;
    o += sprintf(o, "/%s/", bucket);
    for (const unsigned char *c = (const unsigned char *)key; *c; c++) {
        if (isalnum(*c) || strchr("-._~/", *c))
            *o++ = (char)*c;
        else
            o += sprintf(o, "%%%02X", *c);
    }
    *o = '\0';
    return p;
}

typedef struct {
    stagein_t *h;
    si_sigv4_signer_t *signer;
    const char *host;        /* "host:port" of the endpoint */
    char *path;              /* "/bucket/key", escaped */
    char bucket[64];
    const char *key;
} target_t;

static stagein_err_t target_init(stagein_t *h, const char *objpath, target_t *t)
{
    si_error_t err;
    memset(t, 0, sizeof(*t));
    t->h = h;
    stagein_err_t rc = signer(h, &t->signer);
    if (rc != STAGEIN_SUCCESS)
        return rc;
    if (lib_split_path(objpath, t->bucket, sizeof(t->bucket), &t->key, &err) < 0)
        return lib_fail_err(h, STAGEIN_ERR_ARGUMENT, &err);
    t->host = strstr(h->s3_endpoint, "://") + 3;
    if (!(t->path = object_path(t->bucket, t->key)))
        return lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
    return STAGEIN_SUCCESS;
}

/* Where one GET's body goes. */
typedef struct {
    unsigned char *dst;      /* host memory for [0, len) */
    uint64_t len, got;
    /* the first range of an object of unknown size: fewer bytes than len
     * are the whole object; total: its size (Content-Range, or what came) */
    bool first;
    uint64_t total;
    char error_body[S3_ERROR_BODY_MAX];
    size_t error_len;
    long status;
    uint64_t content_length;
    char etag[STAGEIN_CHECKSUM_MAX];
    char storage_class[32];
    /* the RDMA answer: x-amz-rdma-reply (0: none), -bytes-transferred,
     * -reason of a 501; HEAD: the server's x-amz-rdma-provider */
    int rdma_reply;
    uint64_t rdma_bytes;
    char rdma_reason[160];
    char rdma_provider[SI_RDMA_PROVIDER_MAX + 1];
    _Atomic uint64_t *landed;
    const _Atomic int *stop;
} transfer_t;

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    transfer_t *t = arg;
    size_t len = size * n;
    if (t->stop && *t->stop)
        return 0;
    if (t->status >= 300 || !t->dst) {
        size_t room = sizeof(t->error_body) - 1 - t->error_len;
        size_t take = len < room ? len : room;
        memcpy(t->error_body + t->error_len, data, take);
        t->error_len += take;
        t->error_body[t->error_len] = '\0';
        return len;
    }
    if (t->got + len > t->len)   /* more than asked for: refuse it */
        return 0;
    memcpy(t->dst + t->got, data, len);
    t->got += len;
    if (t->landed)
        atomic_fetch_add(t->landed, len);
    return len;
}

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
    transfer_t *t = arg;
    size_t len = size * n;
    char text[256];
    if (len >= sizeof(text))
        return len;
    memcpy(text, line, len);
    text[len] = '\0';
    text[strcspn(text, "\r\n")] = '\0';
    if (strncmp(text, "HTTP/", 5) == 0) {
        t->status = strtol(strchr(text, ' ') ? strchr(text, ' ') + 1 : "0", NULL, 10);
    } else if (strncasecmp(text, "content-range:", 14) == 0) {
        const char *slash = strchr(text + 14, '/');
        if (slash && slash[1] != '*')
            t->total = strtoull(slash + 1, NULL, 10);
    } else if (strncasecmp(text, "content-length:", 15) == 0) {
        t->content_length = strtoull(text + 15, NULL, 10);
    } else if (strncasecmp(text, "etag:", 5) == 0) {
        const char *v = text + 5 + strspn(text + 5, " \t\"");
        snprintf(t->etag, sizeof(t->etag), "%.*s", (int)strcspn(v, "\""), v);
    } else if (strncasecmp(text, "x-amz-storage-class:", 20) == 0) {
        const char *v = text + 20 + strspn(text + 20, " \t");
        snprintf(t->storage_class, sizeof(t->storage_class), "%s", v);
    } else if (strncasecmp(text, "x-amz-rdma-reply:", 17) == 0) {
        t->rdma_reply = (int)strtol(text + 17, NULL, 10);
    } else if (strncasecmp(text, "x-amz-rdma-bytes-transferred:", 29) == 0) {
        t->rdma_bytes = strtoull(text + 29, NULL, 10);
    } else if (strncasecmp(text, "x-amz-rdma-reason:", 18) == 0) {
        const char *v = text + 18 + strspn(text + 18, " \t");
        snprintf(t->rdma_reason, sizeof(t->rdma_reason), "%s", v);
    } else if (strncasecmp(text, "x-amz-rdma-provider:", 20) == 0) {
        const char *v = text + 20 + strspn(text + 20, " \t");
        snprintf(t->rdma_provider, sizeof(t->rdma_provider), "%s", v);
    }
    return len;
}

/* Runs the request. With an RDMA token out, the provider is driven while
 * the answer is awaited: the server's writes complete only as this side
 * progresses (multi interface, so that the wait is interruptible). */
static CURLcode perform(CURL *curl, CURLM *multi, stagein_t *h)
{
    if (!multi)
        return curl_easy_perform(curl);
    if (curl_multi_add_handle(multi, curl) != CURLM_OK)
        return CURLE_OUT_OF_MEMORY;
    CURLcode cc = CURLE_OK;
    int running = 1;
    while (running) {
        if (curl_multi_perform(multi, &running) != CURLM_OK) {
            cc = CURLE_RECV_ERROR;
            break;
        }
        if (!running)
            break;
        int fd, ms;
        lib_rdma_progress(h, &fd, &ms);
        struct curl_waitfd extra = {.fd = fd, .events = CURL_WAIT_POLLIN};
        curl_multi_poll(multi, fd >= 0 ? &extra : NULL, fd >= 0 ? 1 : 0, ms, NULL);
    }
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(multi, &left)))
        if (m->msg == CURLMSG_DONE && m->easy_handle == curl)
            cc = m->data.result;
    curl_multi_remove_handle(multi, curl);
    return cc;
}

/* How one GET goes: plain, or with an RDMA token (and the multi handle
 * that lets the caller drive the provider meanwhile). */
typedef struct {
    CURL *curl;
    CURLM *multi;            /* NULL: no RDMA */
    const char *token;       /* x-amz-rdma-token, or NULL */
} call_t;

/* The headers of one signed request to path: Host, the signer's, and
 * extra (signed; an x-amz-rdma-token among them like every x-amz-*
 * header, so only this client could have sent it), into *out, with its
 * URL (query: as on the wire, or NULL). payload_hash: the body's hex
 * sha256, NULL: UNSIGNED-PAYLOAD. */
static int signed_headers(const target_t *tg, const char *method, const char *path,
                          const char *query, const si_http_header_t *extra, size_t nextra,
                          const char *payload_hash, struct curl_slist **out, char *url,
                          size_t url_size, si_error_t *err)
{
    si_http_header_t hs[4] = {{"Host", tg->host}};
    size_t nh = 1;
    for (size_t i = 0; i < nextra && nh < sizeof(hs) / sizeof(hs[0]); i++)
        hs[nh++] = extra[i];
    si_sigv4_request_t rq = {.method = method, .path = path, .query = query, .headers = hs,
                             .nheaders = nh, .payload_hash = payload_hash};
    si_sigv4_signed_t sig;
    if (si_sigv4_sign(tg->signer, &rq, (int64_t)time(NULL), &sig, err) < 0)
        return -1;
    if ((size_t)snprintf(url, url_size, "%s%s%s%s", tg->h->s3_endpoint, path,
                         query ? "?" : "", query ? query : "") >= url_size)
        return si_errprintf(err, "object path too long");
    struct curl_slist *list = NULL, *l;
    char line[SI_SIGV4_AUTHORIZATION_MAX + SI_RDMA_TOKEN_MAX + 64];
    for (size_t i = 0; i < nh + 3; i++) {
        if (i < nh)
            snprintf(line, sizeof(line), "%s: %s", hs[i].name, hs[i].value);
        else
            snprintf(line, sizeof(line), "%s: %s",
                     i == nh ? "x-amz-date" : i == nh + 1 ? "x-amz-content-sha256" : "Authorization",
                     i == nh ? sig.amz_date : i == nh + 1 ? sig.content_sha256 : sig.authorization);
        if (!(l = curl_slist_append(list, line))) {
            curl_slist_free_all(list);
            return si_errprintf(err, "out of memory");
        }
        list = l;
    }
    *out = list;
    return 0;
}

/* The common options of a request, run; the outcome in t. */
static CURLcode run_request(const call_t *c, stagein_t *h, const char *url,
                            struct curl_slist *list, transfer_t *t, char *curl_error)
{
    CURL *curl = c->curl;
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, S3_TIMEOUT_S);
    if (h->s3_ca_file)
        curl_easy_setopt(curl, CURLOPT_CAINFO, h->s3_ca_file);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_error);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, t);
    CURLcode cc = perform(curl, c->token ? c->multi : NULL, h);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(list);
    return cc;
}

/* Whether the request failed (stopped, no answer, an error status), saying so. */
static bool failed(const target_t *tg, const char *method, const transfer_t *t, CURLcode cc,
                   const char *curl_error, si_error_t *err)
{
    if (t->stop && *t->stop)
        return si_errprintf(err, "stopped"), true;
    if (cc != CURLE_OK && t->status < 300)
        return si_errprintf(err, "S3 %s %s%s: %s", method, tg->h->s3_endpoint, tg->path,
                            curl_error[0] ? curl_error : curl_easy_strerror(cc)), true;
    if (t->status >= 300) {
        const char *code = strstr(t->error_body, "<Code>");
        si_errprintf(err, "S3 %s %s/%s: HTTP %ld%s%.*s", method, tg->bucket, tg->key,
                     t->status, code ? " " : "", code ? (int)strcspn(code + 6, "<") : 0,
                     code ? code + 6 : "");
        return true;
    }
    return false;
}

/* One signed request: HEAD (dst NULL, len 0) or GET of [offset, offset+len). */
static int s3_call(const call_t *c, const target_t *tg, bool head, uint64_t offset, uint64_t len,
                   uint64_t object_size, transfer_t *t, si_error_t *err)
{
    CURL *curl = c->curl;
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
    struct curl_slist *list = NULL;
    char url[4096 + 600];
    if (signed_headers(tg, head ? "HEAD" : "GET", tg->path, NULL, hs, nh, NULL, &list, url,
                       sizeof(url), err) < 0)
        return -1;
    char curl_error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(curl, CURLOPT_NOBODY, head ? 1L : 0L);
    curl_easy_setopt(curl, CURLOPT_HTTPGET, head ? 0L : 1L);
    CURLcode cc = run_request(c, tg->h, url, list, t, curl_error);
    if (failed(tg, head ? "HEAD" : "GET", t, cc, curl_error, err))
        return -1;
    if (!head && t->rdma_reply == 200) {
        if ((t->rdma_bytes != len && !(t->first && t->rdma_bytes < len)) || t->got != 0)
            return si_errprintf(err, "S3 GET %s/%s: the server wrote %llu bytes by RDMA (and %llu"
                                " in the body) of the %llu asked for", tg->bucket, tg->key,
                                (unsigned long long)t->rdma_bytes, (unsigned long long)t->got,
                                (unsigned long long)len);
        if (!t->total)
            t->total = t->rdma_bytes;
        return 0;
    }
    if (!t->total)
        t->total = t->got;
    if (!head && t->got != len && !(t->first && t->got < len))
        return si_errprintf(err, "S3 GET %s/%s: %llu bytes at %llu came short (%llu)", tg->bucket,
                            tg->key, (unsigned long long)len, (unsigned long long)offset,
                            (unsigned long long)t->got);
    return 0;
}

static stagein_err_t code_of(const transfer_t *t)
{
    if (t->status == 403 && strstr(t->error_body, "InvalidObjectState"))
        return STAGEIN_ERR_NOT_CACHED;
    return lib_code_of_http(t->status);
}

/* provider (may be NULL) receives the server's RDMA provider, "" for none. */
static stagein_err_t head(stagein_t *h, const target_t *tg, uint64_t *size, char *etag,
                          bool *cached, char provider[SI_RDMA_PROVIDER_MAX + 1])
{
    call_t c = {.curl = curl_easy_init()};
    if (!c.curl)
        return lib_fail(h, STAGEIN_ERR_NOMEM, "cannot make a libcurl handle");
    transfer_t t = {0};
    si_error_t err;
    stagein_err_t rc = STAGEIN_SUCCESS;
    if (s3_call(&c, tg, true, 0, 0, 0, &t, &err) < 0) {
        rc = lib_fail_err(h, code_of(&t), &err);
    } else {
        *size = t.content_length;
        if (etag)
            snprintf(etag, STAGEIN_CHECKSUM_MAX, "%s", t.etag);
        /* GLACIER without a restore copy is not readable (see doc/s3.md) */
        *cached = strcmp(t.storage_class, "GLACIER") != 0;
        if (provider)
            strcpy(provider, t.rdma_provider);
    }
    curl_easy_cleanup(c.curl);
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
    free(tg.path);
    return rc;
}

/* --- parallel read ------------------------------------------------------ */

/* The first failure among threads working on one transfer; the others
 * see stop and end. */
typedef struct {
    pthread_mutex_t lock;
    stagein_err_t code;
    si_error_t err;
    _Atomic int stop;
} outcome_t;

static void outcome_fail(outcome_t *o, stagein_err_t code, const si_error_t *err)
{
    pthread_mutex_lock(&o->lock);
    if (o->code == STAGEIN_SUCCESS) {
        o->code = code;
        o->err = *err;
    }
    pthread_mutex_unlock(&o->lock);
    atomic_store(&o->stop, 1);
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
    call_t c = {.curl = curl_easy_init(), .multi = j->rdma ? curl_multi_init() : NULL};
    if (!c.curl || (j->rdma && !c.multi)) {
        si_errprintf(&err, "cannot make a libcurl handle");
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
                        .landed = j->dst ? &j->tg->h->landed : NULL, .stop = &j->out.stop};
        c.token = range_token(j, bounce_region, off, len, token, sizeof(token));
        if (s3_call(&c, j->tg, false, off, len, j->size, &t, &err) < 0) {
            if (!atomic_load(&j->out.stop))
                outcome_fail(&j->out, t.status ? code_of(&t) : STAGEIN_ERR_CONNECT, &err);
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
    if (c.multi)
        curl_multi_cleanup(c.multi);
    if (c.curl)
        curl_easy_cleanup(c.curl);
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
    call_t c = {.curl = curl_easy_init(), .multi = j->rdma ? curl_multi_init() : NULL};
    transfer_t t = {.dst = j->dst, .len = first, .landed = &h->landed, .first = true};
    *rc = STAGEIN_SUCCESS;
    if (!c.curl || (j->rdma && !c.multi)) {
        *rc = lib_fail(h, STAGEIN_ERR_NOMEM, "cannot make a libcurl handle");
    } else {
        c.token = range_token(j, NULL, 0, first, token, sizeof(token));
        if (s3_call(&c, j->tg, false, 0, first, 0, &t, &err) == 0) {
            account(j, &t, c.token != NULL, t.rdma_reply == 200 ? t.rdma_bytes : t.got);
            *object_size = t.total;
        } else if (t.status != 416) {
            stagein_err_t code = t.status ? code_of(&t) : STAGEIN_ERR_CONNECT;
            *rc = code == STAGEIN_ERR_NOT_CACHED
                      ? lib_fail(h, code, "%s/%s is on tape only: stage it first", j->tg->bucket,
                                 j->tg->key)
                      : lib_fail_err(h, code, &err);
        }
    }
    if (c.multi)
        curl_multi_cleanup(c.multi);
    if (c.curl)
        curl_easy_cleanup(c.curl);
    return *rc == STAGEIN_SUCCESS && t.status == 416 ? 1 : 0;
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
    free(tg.path);
    return rc;
}

/* --- write ------------------------------------------------------------- */

typedef struct {
    const unsigned char *src;
    uint64_t len, sent;
} upload_t;

static size_t on_read(char *out, size_t size, size_t n, void *arg)
{
    upload_t *u = arg;
    uint64_t left = u->len - u->sent;
    size_t take = size * n < left ? size * n : (size_t)left;
    memcpy(out, u->src + u->sent, take);
    u->sent += take;
    return take;
}

/* A request with a body: PUT of [body, body+len) (an object; a part, by
 * its query), or with c->token of the memory the token grants (the server
 * reads it; the request body is empty); POST with the body (multipart
 * create and complete); DELETE (abort). sha256_hex signs the bytes. */
static int send_call(const call_t *c, const target_t *tg, const char *method,
                     const char *query, const void *body, uint64_t len,
                     const char *sha256_hex, transfer_t *t, si_error_t *err)
{
    si_http_header_t hs[1];
    size_t nh = 0;
    if (c->token)
        hs[nh++] = (si_http_header_t){"x-amz-rdma-token", c->token};
    struct curl_slist *list = NULL, *l;
    char url[4096 + 600];
    if (signed_headers(tg, method, tg->path, query, hs, nh, sha256_hex, &list, url, sizeof(url),
                       err) < 0)
        return -1;
    /* no 100-continue round trip: the request is signed, the answer quick */
    if (!(l = curl_slist_append(list, "Expect:")) ||
        !(l = curl_slist_append(l, "Content-Type: application/octet-stream"))) {
        curl_slist_free_all(list);
        return si_errprintf(err, "out of memory");
    }
    list = l;
    upload_t u = {.src = body, .len = c->token ? 0 : len};
    char curl_error[CURL_ERROR_SIZE] = "";
    if (strcmp(method, "PUT") == 0) {
        curl_easy_setopt(c->curl, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c->curl, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c->curl, CURLOPT_READDATA, &u);
        curl_easy_setopt(c->curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)u.len);
    } else if (strcmp(method, "POST") == 0) {
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    } else {
        curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
    }
    CURLcode cc = run_request(c, tg->h, url, list, t, curl_error);
    if (failed(tg, method, t, cc, curl_error, err))
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

/* One PUT (object or part), by RDMA when a token is given, and over HTTP
 * when the server declines it (501: nothing was stored). */
static int put_bytes(stagein_t *h, CURL *curl, CURLM *multi, const target_t *tg,
                     const char *query, const void *buf, uint64_t len, const char *token,
                     transfer_t *t, si_error_t *err)
{
    char sha[65];
    if (sha256_hex(buf, len, sha, err) < 0)
        return -1;
    call_t c = {.curl = curl, .multi = multi, .token = token};
    if (send_call(&c, tg, "PUT", query, buf, len, sha, t, err) == 0) {
        atomic_fetch_add(token ? &h->bytes_rdma : &h->bytes_http, len);
        return 0;
    }
    if (!token || t->rdma_reply != 501)
        return -1;
    lib_rdma_note(h, "the server answered over HTTP: %s",
                  t->rdma_reason[0] ? t->rdma_reason : "declined (501)");
    memset(t, 0, sizeof(*t));
    curl_easy_reset(curl);
    c.token = NULL;
    if (send_call(&c, tg, "PUT", query, buf, len, sha, t, err) < 0)
        return -1;
    atomic_fetch_add(&h->bytes_http, len);
    return 0;
}

/* The server's RDMA provider, from a HEAD of the bucket ("" for none). */
static void bucket_provider(const target_t *tg, char provider[SI_RDMA_PROVIDER_MAX + 1])
{
    target_t bucket = *tg;
    char path[80];
    snprintf(path, sizeof(path), "/%s", tg->bucket);
    bucket.path = path;
    call_t c = {.curl = curl_easy_init()};
    transfer_t t = {0};
    si_error_t err;
    provider[0] = '\0';
    if (c.curl && s3_call(&c, &bucket, true, 0, 0, 0, &t, &err) == 0)
        strcpy(provider, t.rdma_provider);
    if (c.curl)
        curl_easy_cleanup(c.curl);
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

/* The text of the first <NAME>...</NAME> in xml (quotes, &quot; dropped). */
static bool xml_value(const char *xml, const char *name, char *out, size_t size)
{
    char open[40];
    snprintf(open, sizeof(open), "<%s>", name);
    const char *v = strstr(xml, open);
    if (!v)
        return false;
    v += strlen(open);
    size_t n = 0;
    while (*v && *v != '<' && n + 1 < size) {
        if (strncmp(v, "&quot;", 6) == 0)
            v += 6;
        else if (*v == '"')
            v++;
        else
            out[n++] = *v++;
    }
    out[n] = '\0';
    return n > 0;
}


static void *part_worker(void *arg)
{
    parts_t *m = arg;
    si_error_t err;
    char token[SI_RDMA_TOKEN_MAX + 1], query[300];
    CURL *curl = curl_easy_init();
    CURLM *multi = m->region ? curl_multi_init() : NULL;
    if (!curl || (m->region && !multi)) {
        si_errprintf(&err, "cannot make a libcurl handle");
        outcome_fail(&m->out, STAGEIN_ERR_NOMEM, &err);
    }
    while (curl && !atomic_load(&m->out.stop)) {
        uint64_t i = atomic_fetch_add(&m->next, 1);
        if (i >= m->nparts)
            break;
        uint64_t off = i * m->part_size;
        uint64_t len = m->size - off < m->part_size ? m->size - off : m->part_size;
        const char *tok = NULL;
        if (m->region && lib_rdma_token(m->h, m->region, off, len, token, sizeof(token),
                                        &err) == 0)
            tok = token;
        snprintf(query, sizeof(query), "partNumber=%llu&uploadId=%s",
                 (unsigned long long)i + 1, m->upload_id);
        transfer_t t = {0};
        curl_easy_reset(curl);
        if (put_bytes(m->h, curl, multi, m->tg, query, m->src + off, len, tok, &t, &err) < 0) {
            outcome_fail(&m->out, t.status ? code_of(&t) : STAGEIN_ERR_CONNECT, &err);
            break;
        }
        snprintf(m->etags[i], STAGEIN_CHECKSUM_MAX, "%s", t.etag);
        atomic_fetch_add(&m->h->landed, len);
    }
    if (multi)
        curl_multi_cleanup(multi);
    if (curl)
        curl_easy_cleanup(curl);
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
    call_t c = {.curl = curl_easy_init()};
    stagein_err_t rc = STAGEIN_SUCCESS;
    si_strbuf_t xml;
    si_strbuf_init(&xml, 1u << 20);
    if (!c.curl || !(m.etags = calloc(m.nparts, sizeof(*m.etags)))) {
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (send_call(&c, tg, "POST", "uploads", NULL, 0, NULL, &t, &err) < 0) {
        rc = lib_fail_err(h, t.status ? code_of(&t) : STAGEIN_ERR_CONNECT, &err);
        goto done;
    }
    if (!xml_value(t.error_body, "UploadId", m.upload_id, sizeof(m.upload_id)) ||
        strspn(m.upload_id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") !=
            strlen(m.upload_id)) {
        rc = lib_fail(h, STAGEIN_ERR_PROTOCOL, "S3 POST %s/%s?uploads: no usable UploadId in the"
                      " answer", tg->bucket, tg->key);
        goto done;
    }
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
    curl_easy_reset(c.curl);
    if (m.out.code != STAGEIN_SUCCESS) {
        rc = lib_fail_err(h, m.out.code, &m.out.err);
        transfer_t ignored = {0};
        send_call(&c, tg, "DELETE", query, NULL, 0, NULL, &ignored, &err);
        goto done;
    }
    si_strbuf_puts(&xml, "<CompleteMultipartUpload>");
    for (uint64_t i = 0; i < m.nparts; i++)
        si_strbuf_printf(&xml, "<Part><PartNumber>%llu</PartNumber><ETag>\"%s\"</ETag></Part>",
                         (unsigned long long)i + 1, m.etags[i]);
    si_strbuf_puts(&xml, "</CompleteMultipartUpload>");
    char sha[65];
    memset(&t, 0, sizeof(t));
    if (xml.failed || sha256_hex(si_strbuf_str(&xml), xml.len, sha, &err) < 0) {
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
    } else if (send_call(&c, tg, "POST", query, si_strbuf_str(&xml), xml.len, sha, &t,
                         &err) < 0) {
        rc = lib_fail_err(h, t.status ? code_of(&t) : STAGEIN_ERR_CONNECT, &err);
    } else if (strstr(t.error_body, "<Error>") ||
               !xml_value(t.error_body, "ETag", etag, STAGEIN_CHECKSUM_MAX)) {
        /* S3 may answer 200 and an error in the body */
        char code[64] = "";
        xml_value(t.error_body, "Code", code, sizeof(code));
        rc = lib_fail(h, STAGEIN_ERR_SERVER, "S3 POST %s/%s?uploadId=%s: %s", tg->bucket,
                      tg->key, m.upload_id, code[0] ? code : "no ETag in the answer");
    }
done:
    si_strbuf_free(&xml);
    free(m.etags);
    if (c.curl)
        curl_easy_cleanup(c.curl);
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
    CURL *curl = NULL;
    CURLM *multi = NULL;
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
    if (!(curl = curl_easy_init()) || (region && !(multi = curl_multi_init()))) {
        rc = lib_fail(h, STAGEIN_ERR_NOMEM, "cannot make a libcurl handle");
        goto done;
    }
    if (put_bytes(h, curl, multi, &tg, NULL, size ? buf : "", size, region ? token : NULL, &t,
                  &err) < 0)
        rc = lib_fail_err(h, t.status ? code_of(&t) : STAGEIN_ERR_CONNECT, &err);
    snprintf(got_etag, sizeof(got_etag), "%s", t.etag);
done:
    if (rc == STAGEIN_SUCCESS && etag)
        snprintf(etag, STAGEIN_CHECKSUM_MAX, "%s", got_etag);
    if (multi)
        curl_multi_cleanup(multi);
    if (curl)
        curl_easy_cleanup(curl);
    lib_rdma_unregister(h, region);
    free(tg.path);
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
