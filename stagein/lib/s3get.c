/* Reading objects from stageind's S3 endpoint into caller memory: a HEAD
 * for the size and ETag, then SigV4-signed range GETs run by a few threads,
 * each landing its ranges straight at their offsets (host memory) or
 * through a pinned bounce buffer into GPU memory. */
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
    t->host = h->s3_endpoint + strlen("http://");
    if (!(t->path = object_path(t->bucket, t->key)))
        return lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
    return STAGEIN_SUCCESS;
}

/* Where one GET's body goes. */
typedef struct {
    unsigned char *dst;      /* host memory for [0, len) */
    uint64_t len, got;
    char error_body[S3_ERROR_BODY_MAX];
    size_t error_len;
    long status;
    uint64_t content_length;
    char etag[STAGEIN_CHECKSUM_MAX];
    char storage_class[32];
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
    } else if (strncasecmp(text, "content-length:", 15) == 0) {
        t->content_length = strtoull(text + 15, NULL, 10);
    } else if (strncasecmp(text, "etag:", 5) == 0) {
        const char *v = text + 5 + strspn(text + 5, " \t\"");
        snprintf(t->etag, sizeof(t->etag), "%.*s", (int)strcspn(v, "\""), v);
    } else if (strncasecmp(text, "x-amz-storage-class:", 20) == 0) {
        const char *v = text + 20 + strspn(text + 20, " \t");
        snprintf(t->storage_class, sizeof(t->storage_class), "%s", v);
    }
    return len;
}

/* One signed request: HEAD (dst NULL, len 0) or GET of [offset, offset+len). */
static int s3_call(CURL *curl, const target_t *tg, bool head, uint64_t offset, uint64_t len,
                   uint64_t object_size, transfer_t *t, si_error_t *err)
{
    char range[80] = "", host_header[300], range_header[100];
    si_http_header_t hs[2] = {{"Host", tg->host}};
    size_t nh = 1;
    bool ranged = !head && !(offset == 0 && len == object_size);
    if (ranged) {
        snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)offset,
                 (unsigned long long)(offset + len - 1));
        hs[nh++] = (si_http_header_t){"Range", range};
    }
    si_sigv4_request_t rq = {.method = head ? "HEAD" : "GET", .path = tg->path,
                             .headers = hs, .nheaders = nh};
    si_sigv4_signed_t sig;
    if (si_sigv4_sign(tg->signer, &rq, (int64_t)time(NULL), &sig, err) < 0)
        return -1;
    char date_header[64], sha_header[128], auth_header[SI_SIGV4_AUTHORIZATION_MAX + 32];
    snprintf(host_header, sizeof(host_header), "Host: %s", tg->host);
    snprintf(date_header, sizeof(date_header), "x-amz-date: %s", sig.amz_date);
    snprintf(sha_header, sizeof(sha_header), "x-amz-content-sha256: %s", sig.content_sha256);
    snprintf(auth_header, sizeof(auth_header), "Authorization: %s", sig.authorization);
    snprintf(range_header, sizeof(range_header), "Range: %s", range);
    struct curl_slist *list = NULL, *l;
    const char *lines[] = {host_header, date_header, sha_header, auth_header,
                           ranged ? range_header : NULL};
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]) && lines[i]; i++) {
        if (!(l = curl_slist_append(list, lines[i]))) {
            curl_slist_free_all(list);
            return si_errprintf(err, "out of memory");
        }
        list = l;
    }
    char url[4096 + 600];
    if ((size_t)snprintf(url, sizeof(url), "%s%s", tg->h->s3_endpoint, tg->path) >= sizeof(url)) {
        curl_slist_free_all(list);
        return si_errprintf(err, "object path too long");
    }
    char curl_error[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_NOBODY, head ? 1L : 0L);
    curl_easy_setopt(curl, CURLOPT_HTTPGET, head ? 0L : 1L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, S3_TIMEOUT_S);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_error);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, t);
    CURLcode cc = curl_easy_perform(curl);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(list);
    if (t->stop && *t->stop)
        return si_errprintf(err, "stopped");
    if (cc != CURLE_OK && t->status < 300)
        return si_errprintf(err, "S3 %s %s%s: %s", head ? "HEAD" : "GET", tg->h->s3_endpoint,
                            tg->path, curl_error[0] ? curl_error : curl_easy_strerror(cc));
    if (t->status >= 300) {
        const char *code = strstr(t->error_body, "<Code>");
        return si_errprintf(err, "S3 %s %s/%s: HTTP %ld%s%.*s", head ? "HEAD" : "GET",
                            tg->bucket, tg->key, t->status, code ? " " : "",
                            code ? (int)strcspn(code + 6, "<") : 0, code ? code + 6 : "");
    }
    if (!head && t->got != len)
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

static stagein_err_t head(stagein_t *h, const target_t *tg, uint64_t *size, char *etag,
                          bool *cached)
{
    CURL *curl = curl_easy_init();
    if (!curl)
        return lib_fail(h, STAGEIN_ERR_NOMEM, "cannot make a libcurl handle");
    transfer_t t = {0};
    si_error_t err;
    stagein_err_t rc = STAGEIN_SUCCESS;
    if (s3_call(curl, tg, true, 0, 0, 0, &t, &err) < 0) {
        rc = lib_fail_err(h, code_of(&t), &err);
    } else {
        *size = t.content_length;
        if (etag)
            snprintf(etag, STAGEIN_CHECKSUM_MAX, "%s", t.etag);
        /* GLACIER without a restore copy is not readable (see doc/s3.md) */
        *cached = strcmp(t.storage_class, "GLACIER") != 0;
    }
    curl_easy_cleanup(curl);
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
        rc = head(h, &tg, size, etag, &cached);
    free(tg.path);
    return rc;
}

/* --- parallel read ------------------------------------------------------ */

typedef struct {
    const target_t *tg;
    unsigned char *dst;      /* host destination, or NULL for the GPU */
    lib_cuda_t *cuda;        /* GPU destination */
    uint64_t device_ptr;
    uint64_t size, chunk, nchunks;
    _Atomic uint64_t next;
    _Atomic int stop;
    pthread_mutex_t lock;
    stagein_err_t code;
    si_error_t err;
} job_t;

static void job_fail(job_t *j, stagein_err_t code, const si_error_t *err)
{
    pthread_mutex_lock(&j->lock);
    if (j->code == STAGEIN_SUCCESS) {
        j->code = code;
        j->err = *err;
    }
    pthread_mutex_unlock(&j->lock);
    atomic_store(&j->stop, 1);
}

static void *worker(void *arg)
{
    job_t *j = arg;
    si_error_t err;
    void *bounce = NULL;
    CURL *curl = curl_easy_init();
    if (!curl) {
        si_errprintf(&err, "cannot make a libcurl handle");
        job_fail(j, STAGEIN_ERR_NOMEM, &err);
        return NULL;
    }
    if (!j->dst && lib_cuda_bounce_alloc(j->cuda, j->chunk, &bounce, &err) < 0) {
        job_fail(j, STAGEIN_ERR_NO_DEVICE, &err);
        goto done;
    }
    for (;;) {
        uint64_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->nchunks || atomic_load(&j->stop))
            break;
        uint64_t off = i * j->chunk;
        uint64_t len = j->size - off < j->chunk ? j->size - off : j->chunk;
        transfer_t t = {.dst = j->dst ? j->dst + off : bounce, .len = len,
                        .landed = j->dst ? &j->tg->h->landed : NULL, .stop = &j->stop};
        int rdma = 0;
        if (j->tg->h->transport == LIB_TRANSPORT_RDMA) {
            rdma = lib_rdma_read(j->tg->h, j->tg->bucket, j->tg->key, off, t.dst, len, &err);
            if (rdma < 0) {
                job_fail(j, STAGEIN_ERR_SERVER, &err);
                break;
            }
        }
        if (!rdma && s3_call(curl, j->tg, false, off, len, j->size, &t, &err) < 0) {
            if (!atomic_load(&j->stop))
                job_fail(j, t.status ? code_of(&t) : STAGEIN_ERR_CONNECT, &err);
            break;
        }
        if (!j->dst) {
            if (lib_cuda_copy_to_device(j->cuda, j->device_ptr + off, bounce, len, &err) < 0) {
                job_fail(j, STAGEIN_ERR_NO_DEVICE, &err);
                break;
            }
            atomic_fetch_add(&j->tg->h->landed, len);
        }
    }
done:
    if (bounce)
        lib_cuda_bounce_free(j->cuda, bounce);
    curl_easy_cleanup(curl);
    return NULL;
}

static stagein_err_t run_job(stagein_t *h, job_t *j)
{
    pthread_t threads[LIB_MAX_PARALLEL];
    int n = (int)(j->nchunks < (uint64_t)h->parallel ? j->nchunks : (uint64_t)h->parallel);
    int started = 0;
    for (; started < n; started++)
        if (pthread_create(&threads[started], NULL, worker, j) != 0)
            break;
    if (started == 0)
        return lib_fail(h, STAGEIN_ERR_SYSTEM, "cannot start a reader thread");
    for (int i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    if (j->code != STAGEIN_SUCCESS)
        return lib_fail_err(h, j->code, &j->err);
    return STAGEIN_SUCCESS;
}

stagein_err_t stagein_read(stagein_t *h, const char *path, void *buf, uint64_t capacity, int gpu,
                           uint64_t *size)
{
    if (!h)
        return STAGEIN_ERR_ARGUMENT;
    h->error[0] = '\0';
    atomic_store(&h->landed, 0);
    if (!buf && capacity > 0)
        return lib_fail(h, STAGEIN_ERR_ARGUMENT, "no buffer for %llu bytes",
                        (unsigned long long)capacity);
    if (h->transport == LIB_TRANSPORT_RDMA && !lib_rdma_available())
        return lib_fail(h, STAGEIN_ERR_UNSUPPORTED,
                        "transport rdma: not available in this build (no RDMA client yet)");
    target_t tg;
    job_t j = {.code = STAGEIN_SUCCESS};
    bool cached = true;
    uint64_t object_size = 0;
    stagein_err_t rc = target_init(h, path, &tg);
    if (rc != STAGEIN_SUCCESS)
        goto done;
    if ((rc = head(h, &tg, &object_size, NULL, &cached)) != STAGEIN_SUCCESS)
        goto done;
    if (!cached) {
        rc = lib_fail(h, STAGEIN_ERR_NOT_CACHED, "%s is on tape only: stage it first", path);
        goto done;
    }
    if (object_size > capacity) {
        rc = lib_fail(h, STAGEIN_ERR_TOO_SMALL, "%s is %llu bytes, the buffer %llu", path,
                      (unsigned long long)object_size, (unsigned long long)capacity);
        goto done;
    }
    if (size)
        *size = object_size;
    if (object_size == 0)
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
    j.tg = &tg;
    j.size = object_size;
    j.chunk = h->chunk;
    j.nchunks = (object_size + h->chunk - 1) / h->chunk;
    pthread_mutex_init(&j.lock, NULL);
    rc = run_job(h, &j);
    pthread_mutex_destroy(&j.lock);
done:
    lib_cuda_close(j.cuda);
    free(tg.path);
    return rc;
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
