/* The S3 client; see s3client.h. */
#include "config.h"
#include "common/aws/s3client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/checksum.h"
#include "common/strbuf.h"
#include "common/text.h"
#include "common/uri.h"
#include "common/xml.h"

#define ERROR_BODY_MAX (64u << 10)
#define ENCODED_MAX (3 * SI_KEY_MAX + 256) /* a bucket and a key, percent-encoded */
#define MAX_EXTRA_HEADERS 16
#define HEADER_LINE_MAX 2048

struct si_s3 {
    char *endpoint;                /* without a trailing '/' */
    const char *host;              /* into endpoint: "HOST[:PORT]" */
    si_sigv4_signer_t *signer;
    long connect_timeout_s, stall_timeout_s, request_timeout_s;
    char *ca_file;                 /* NULL: the system's */
};

struct si_s3_xfer {
    si_s3_t *s;
    CURL *curl;
    struct curl_slist *headers;
    char *url;
    si_s3_response_t *out;
    const si_s3_request_t *rq;
    uint64_t sent;                 /* body bytes read so far (file bodies) */
    si_strbuf_t kept;
    const atomic_bool *stop;
    char curl_error[CURL_ERROR_SIZE];
};

si_s3_t *si_s3_new(const si_s3_conf_t *conf, si_error_t *err)
{
    const char *ep = conf->endpoint;
    size_t scheme = ep && strncmp(ep, "http://", 7) == 0 ? 7
                    : ep && strncmp(ep, "https://", 8) == 0 ? 8 : 0;
    if (!scheme || !ep[scheme] || strchr(ep + scheme, '?'))
        return si_errprintf(err, "S3 endpoint '%s': expected http://HOST[:PORT] or "
                            "https://HOST[:PORT]", ep ? ep : "(none)"), NULL;
    si_s3_t *s = calloc(1, sizeof(*s));
    if (!s || !(s->endpoint = strdup(ep))) {
        free(s);
        return si_errprintf(err, "out of memory"), NULL;
    }
    size_t n = strlen(s->endpoint);
    while (n > scheme && s->endpoint[n - 1] == '/')
        s->endpoint[--n] = '\0';
    if (strchr(s->endpoint + scheme, '/')) {
        si_errprintf(err, "S3 endpoint '%s': no path allowed (requests are path-style)", ep);
        si_s3_free(s);
        return NULL;
    }
    s->host = s->endpoint + scheme;
    if (!(s->signer = si_sigv4_signer_new(conf->access_key, conf->secret, conf->region, "s3",
                                          err))) {
        si_s3_free(s);
        return NULL;
    }
    s->connect_timeout_s = conf->connect_timeout_s > 0 ? conf->connect_timeout_s : 10;
    s->stall_timeout_s = conf->stall_timeout_s > 0 ? conf->stall_timeout_s : 60;
    s->request_timeout_s = conf->request_timeout_s;
    if (conf->ca_file && !(s->ca_file = strdup(conf->ca_file))) {
        si_s3_free(s);
        return si_errprintf(err, "out of memory"), NULL;
    }
    return s;
}

void si_s3_free(si_s3_t *s)
{
    if (!s)
        return;
    si_sigv4_signer_free(s->signer);
    free(s->endpoint);
    free(s->ca_file);
    free(s);
}

const char *si_s3_endpoint(const si_s3_t *s)
{
    return s->endpoint;
}

void si_s3_response_free(si_s3_response_t *r)
{
    if (r) {
        free(r->body);
        r->body = NULL;
        r->body_len = 0;
    }
}

bool si_s3_retryable(const si_s3_response_t *r)
{
    if (r->sink_failed)
        return false;
    if (r->curl_code != CURLE_OK && r->status == 0)
        switch (r->curl_code) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
            return true;
        default:
            return false;
        }
    if (r->curl_code != CURLE_OK) /* an answer began, then the connection failed */
        return r->curl_code != CURLE_ABORTED_BY_CALLBACK && r->curl_code != CURLE_READ_ERROR;
    if (r->status >= 500 || r->status == 429)
        return true;
    return strcmp(r->code, "SlowDown") == 0 || strcmp(r->code, "RequestTimeout") == 0 ||
           strcmp(r->code, "InternalError") == 0 || strcmp(r->code, "ServiceUnavailable") == 0;
}

void si_s3_describe(const si_s3_response_t *r, char *out, size_t size)
{
    if (r->status == 0 || (r->curl_code != CURLE_OK && r->status < 300)) {
        snprintf(out, size, "%s%s", r->status ? "transfer failed: " : "no answer: ",
                 r->curl_error[0] ? r->curl_error : curl_easy_strerror((CURLcode)r->curl_code));
        return;
    }
    snprintf(out, size, "HTTP %ld%s%s%s%s", r->status, r->code[0] ? " " : "", r->code,
             r->message[0] ? ": " : "", r->message);
}

double si_s3_backoff(int attempt, double base, double max, uint64_t *rng)
{
    double d = base;
    for (int i = 1; i < attempt && d < max; i++)
        d *= 2;
    if (d > max)
        d = max;
    /* xorshift64*: a per-caller state, no global generator */
    uint64_t x = *rng ? *rng : UINT64_C(0x9e3779b97f4a7c15);
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *rng = x;
    double u = (double)((x * UINT64_C(2685821657736338717)) >> 11) / 9007199254740992.0;
    return d / 2 + u * d / 2;
}

/* ---- transfers ------------------------------------------------------------- */

si_s3_xfer_t *si_s3_xfer_new(si_s3_t *s, si_error_t *err)
{
    si_s3_xfer_t *x = calloc(1, sizeof(*x));
    if (!x || !(x->curl = curl_easy_init())) {
        free(x);
        return si_errprintf(err, "cannot make a libcurl handle"), NULL;
    }
    x->s = s;
    si_strbuf_init(&x->kept, SI_S3_BODY_MAX);
    return x;
}

void si_s3_xfer_free(si_s3_xfer_t *x)
{
    if (!x)
        return;
    curl_easy_cleanup(x->curl);
    curl_slist_free_all(x->headers);
    free(x->url);
    si_strbuf_free(&x->kept);
    free(x);
}

void si_s3_xfer_stop_on(si_s3_xfer_t *x, const atomic_bool *stop)
{
    x->stop = stop;
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    si_s3_xfer_t *x = arg;
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    return atomic_load(x->stop) ? 1 : 0;
}

void *si_s3_xfer_curl(si_s3_xfer_t *x)
{
    return x->curl;
}

static void copy_value(char *out, size_t size, const char *v)
{
    v += strspn(v, " \t");
    size_t n = strcspn(v, "\r\n");
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    snprintf(out, size, "%.*s", (int)n, v);
}

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
    si_s3_xfer_t *x = arg;
    si_s3_response_t *o = x->out;
    size_t len = size * n;
    char text[HEADER_LINE_MAX];
    if (len >= sizeof(text))
        return len;
    memcpy(text, line, len);
    text[len] = '\0';
    if (x->rq->on_header) {
        char cut[HEADER_LINE_MAX];
        snprintf(cut, sizeof(cut), "%.*s", (int)strcspn(text, "\r\n"), text);
        x->rq->on_header(x->rq->arg, cut);
    }
    if (strncmp(text, "HTTP/", 5) == 0) {
        /* a new answer (after 100 Continue, or a redirect): start over */
        const char *sp = strchr(text, ' ');
        o->status = sp ? strtol(sp + 1, NULL, 10) : 0;
        o->has_length = false;
        o->range_total = 0;
        o->etag[0] = o->storage_class[0] = o->restore[0] = '\0';
    } else if (strncasecmp(text, "content-length:", 15) == 0) {
        o->content_length = strtoull(text + 15, NULL, 10);
        o->has_length = true;
    } else if (strncasecmp(text, "content-range:", 14) == 0) {
        const char *slash = strchr(text + 14, '/');
        if (slash && slash[1] != '*')
            o->range_total = strtoull(slash + 1, NULL, 10);
    } else if (strncasecmp(text, "etag:", 5) == 0) {
        char v[SI_S3_ETAG_MAX + 4];
        copy_value(v, sizeof(v), text + 5);
        const char *p = v + (v[0] == '"');
        snprintf(o->etag, sizeof(o->etag), "%.*s", (int)strcspn(p, "\""), p);
    } else if (strncasecmp(text, "x-amz-storage-class:", 20) == 0) {
        copy_value(o->storage_class, sizeof(o->storage_class), text + 20);
    } else if (strncasecmp(text, "x-amz-restore:", 14) == 0) {
        copy_value(o->restore, sizeof(o->restore), text + 14);
    }
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    si_s3_xfer_t *x = arg;
    si_s3_response_t *o = x->out;
    size_t len = size * n;
    bool success = o->status >= 200 && o->status < 300;
    if (success && x->rq->on_data) {
        if (x->rq->on_data(x->rq->arg, data, len) < 0) {
            o->sink_failed = true;
            return 0;
        }
    } else {
        size_t limit = success ? SI_S3_BODY_MAX : ERROR_BODY_MAX;
        if (x->kept.len + len > limit)
            return success ? 0 : len; /* an error body is cut, a listing refused */
        si_strbuf_append(&x->kept, data, len);
    }
    o->received += len;
    return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    si_s3_xfer_t *x = arg;
    const si_s3_request_t *rq = x->rq;
    size_t want = size * n;
    uint64_t left = rq->body_len - x->sent;
    if (want > left)
        want = (size_t)left;
    if (want == 0)
        return 0;
    ssize_t got;
    do
        got = pread(rq->body_fd, buf, want, (off_t)(rq->body_off + x->sent));
    while (got < 0 && errno == EINTR);
    if (got <= 0)
        return CURL_READFUNC_ABORT; /* the file is shorter than said, or unreadable */
    x->sent += (uint64_t)got;
    return (size_t)got;
}

static int seek_body(void *arg, curl_off_t offset, int origin)
{
    si_s3_xfer_t *x = arg;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->rq->body_len)
        return CURL_SEEKFUNC_FAIL;
    x->sent = (uint64_t)offset;
    return CURL_SEEKFUNC_OK;
}

static int add_header(struct curl_slist **list, const char *name, const char *value)
{
    char line[SI_SIGV4_AUTHORIZATION_MAX + 64];
    snprintf(line, sizeof(line), "%s: %s", name, value);
    struct curl_slist *l = curl_slist_append(*list, line);
    if (!l)
        return -1;
    *list = l;
    return 0;
}

/* "/bucket/key" with the key encoded as S3 wants ('/' kept) */
static int build_path(const si_s3_request_t *rq, si_strbuf_t *path)
{
    si_strbuf_putc(path, '/');
    si_uri_encode(path, rq->bucket, strlen(rq->bucket), false);
    if (rq->key) {
        si_strbuf_putc(path, '/');
        si_uri_encode(path, rq->key, strlen(rq->key), true);
    }
    return path->failed ? -1 : 0;
}

int si_s3_xfer_prepare(si_s3_xfer_t *x, const si_s3_request_t *rq, si_s3_response_t *out,
                       si_error_t *err)
{
    memset(out, 0, sizeof(*out));
    x->out = out;
    x->rq = rq;
    x->sent = 0;
    si_strbuf_reset(&x->kept);
    curl_slist_free_all(x->headers);
    x->headers = NULL;
    free(x->url);
    x->url = NULL;
    if (rq->nheaders > MAX_EXTRA_HEADERS)
        return si_errprintf(err, "S3 request with %zu headers (at most %d)", rq->nheaders,
                            MAX_EXTRA_HEADERS);
    si_strbuf_t path;
    si_strbuf_init(&path, ENCODED_MAX);
    if (build_path(rq, &path) < 0) {
        si_strbuf_free(&path);
        return si_errprintf(err, "S3 request path too long");
    }
    /* the payload hash: given, of the memory body, or unsigned for a file */
    char hash[SI_SIGV4_HEX_LEN + 1];
    const char *payload = rq->payload_sha256;
    if (!payload && !rq->body_from_fd) {
        si_checksum_t *c = si_checksum_new("sha256", err);
        if (!c) {
            si_strbuf_free(&path);
            return -1;
        }
        char text[SI_CHECKSUM_TEXT_MAX];
        if (rq->body_len)
            si_checksum_update(c, rq->body, rq->body_len);
        si_checksum_final(c, text);
        si_checksum_free(c);
        snprintf(hash, sizeof(hash), "%s", text + strlen("sha256:"));
        payload = hash;
    }
    si_http_header_t hs[MAX_EXTRA_HEADERS + 1];
    hs[0] = (si_http_header_t){"Host", x->s->host};
    for (size_t i = 0; i < rq->nheaders; i++)
        hs[i + 1] = rq->headers[i];
    si_sigv4_request_t sr = {.method = rq->method, .path = si_strbuf_str(&path),
                             .query = rq->query, .headers = hs, .nheaders = rq->nheaders + 1,
                             .payload_hash = payload};
    si_sigv4_signed_t sig;
    if (si_sigv4_sign(x->s->signer, &sr, (int64_t)time(NULL), &sig, err) < 0) {
        si_strbuf_free(&path);
        return si_errprefix(err, "signing S3 %s", rq->method);
    }
    int bad = 0;
    for (size_t i = 0; i < rq->nheaders + 1; i++)
        bad |= add_header(&x->headers, hs[i].name, hs[i].value);
    bad |= add_header(&x->headers, "x-amz-date", sig.amz_date);
    bad |= add_header(&x->headers, "x-amz-content-sha256", sig.content_sha256);
    bad |= add_header(&x->headers, "Authorization", sig.authorization);
    /* no "Expect: 100-continue" round trip, no default Content-Type */
    struct curl_slist *l = curl_slist_append(x->headers, "Expect:");
    if (l)
        x->headers = l;
    bool has_type = false;
    for (size_t i = 0; i < rq->nheaders; i++)
        has_type |= strcasecmp(rq->headers[i].name, "Content-Type") == 0;
    if (l && !has_type && (l = curl_slist_append(x->headers, "Content-Type:")))
        x->headers = l;
    size_t ulen = strlen(x->s->endpoint) + path.len + (rq->query ? strlen(rq->query) + 1 : 0) + 1;
    x->url = malloc(ulen);
    if (bad || !l || !x->url) {
        si_strbuf_free(&path);
        return si_errprintf(err, "out of memory");
    }
    snprintf(x->url, ulen, "%s%s%s%s", x->s->endpoint, si_strbuf_str(&path),
             rq->query && *rq->query ? "?" : "", rq->query ? rq->query : "");
    si_strbuf_free(&path);

    CURL *c = x->curl;
    curl_easy_reset(c); /* keeps the connection cache */
    x->curl_error[0] = '\0';
    curl_easy_setopt(c, CURLOPT_URL, x->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, x->curl_error);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, x->s->connect_timeout_s);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, x->s->stall_timeout_s);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, x->s->request_timeout_s);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_PRIVATE, x);
    if (x->s->ca_file)
        curl_easy_setopt(c, CURLOPT_CAINFO, x->s->ca_file);
    if (x->stop) {
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
    }
    if (strcmp(rq->method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else if (strcmp(rq->method, "GET") == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        /* a streamed body in large receives: a 16 KiB one per callback cost
         * the s3 backend's GET workers a recv, a hash call and a copy each */
        if (rq->on_data)
            curl_easy_setopt(c, CURLOPT_BUFFERSIZE, (long)SI_S3_RECEIVE_BUFFER);
    } else if (rq->body_from_fd) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, x);
        curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, seek_body);
        curl_easy_setopt(c, CURLOPT_SEEKDATA, x);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)rq->body_len);
        if (strcmp(rq->method, "PUT") != 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method);
    } else if (strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "POST") == 0) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, rq->body_len ? rq->body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
        if (strcmp(rq->method, "PUT") == 0)
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
    } else {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method);
    }
    return 0;
}

typedef struct {
    si_s3_response_t *out;
} error_body_t;

static int error_element(si_xml_ctx_t *x, const char *path, const char *text, size_t len)
{
    si_s3_response_t *o = ((error_body_t *)x->arg)->out;
    if (strcmp(path, "Error/Code") == 0)
        snprintf(o->code, sizeof(o->code), "%.*s", (int)len, text);
    else if (strcmp(path, "Error/Message") == 0)
        snprintf(o->message, sizeof(o->message), "%.*s", (int)len, text);
    return 0;
}

void si_s3_xfer_done(si_s3_xfer_t *x, int cc)
{
    si_s3_response_t *o = x->out;
    o->curl_code = cc;
    if (cc != CURLE_OK)
        snprintf(o->curl_error, sizeof(o->curl_error), "%s",
                 x->curl_error[0] ? x->curl_error : curl_easy_strerror((CURLcode)cc));
    long status = 0;
    if (curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK && status)
        o->status = status;
    if (x->kept.len && !x->kept.failed) {
        o->body_len = x->kept.len;
        o->body = si_strbuf_take(&x->kept);
    }
    si_strbuf_reset(&x->kept);
    if (o->status >= 300 && o->body) {
        error_body_t eb = {o};
        const char *code;
        si_xml_parse(o->body, o->body_len, ERROR_BODY_MAX, "Error", error_element, &eb, &code,
                     NULL);
    }
    curl_easy_setopt(x->curl, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(x->curl, CURLOPT_ERRORBUFFER, NULL);
}

int si_s3_xfer_perform(si_s3_xfer_t *x, const si_s3_request_t *rq, si_s3_response_t *out,
                       si_error_t *err)
{
    if (si_s3_xfer_prepare(x, rq, out, err) < 0)
        return -1;
    si_s3_xfer_done(x, (int)curl_easy_perform(x->curl));
    return 0;
}

void si_s3_complete_xml(si_strbuf_t *xml, const char *const *etags, size_t n)
{
    si_strbuf_puts(xml, "<CompleteMultipartUpload>");
    for (size_t i = 0; i < n; i++)
        si_strbuf_printf(xml, "<Part><PartNumber>%zu</PartNumber><ETag>\"%s\"</ETag></Part>",
                         i + 1, etags[i]);
    si_strbuf_puts(xml, "</CompleteMultipartUpload>");
}

/* ---- bodies ----------------------------------------------------------------- */

typedef struct {
    const char *path;
    char *out;
    size_t size;
    bool found;
} text_find_t;

static int text_element(si_xml_ctx_t *x, const char *path, const char *text, size_t len)
{
    text_find_t *t = x->arg;
    if (!t->found && strcmp(path, t->path) == 0) {
        if (len >= t->size)
            return si_errprintf(x->err, "<%s> is longer than %zu bytes", path, t->size - 1);
        memcpy(t->out, text, len);
        t->out[len] = '\0';
        t->found = true;
    }
    return 0;
}

int si_s3_xml_text(const char *body, size_t len, const char *path, char *out, size_t size,
                   si_error_t *err)
{
    char root[128];
    snprintf(root, sizeof(root), "%.*s", (int)strcspn(path, "/"), path);
    text_find_t t = {path, out, size, false};
    const char *code;
    if (si_xml_parse(body ? body : "", len, SI_S3_BODY_MAX, root, text_element, &t, &code,
                     err) < 0)
        return -1;
    if (!t.found)
        return si_errprintf(err, "no <%s> in the answer", path);
    return 0;
}

typedef struct {
    si_s3_list_t *l;
    si_s3_object_t cur;
    size_t cap_objects;            /* of l->objects */
} list_parse_t;

static int64_t parse_iso8601(const char *text)
{
    struct tm tm = {0};
    if (!strptime(text, "%Y-%m-%dT%H:%M:%S", &tm))
        return 0;
    return (int64_t)timegm(&tm);
}

static int list_element(si_xml_ctx_t *x, const char *path, const char *text, size_t len)
{
    list_parse_t *p = x->arg;
    si_s3_object_t *c = &p->cur;
    if (strcmp(path, "ListBucketResult/Contents/Key") == 0) {
        free(c->key);
        if (!(c->key = strndup(text, len)))
            return si_errprintf(x->err, "out of memory");
    } else if (strcmp(path, "ListBucketResult/Contents/Size") == 0) {
        char *end;
        c->size = strtoull(text, &end, 10);
        if (end == text)
            return si_errprintf(x->err, "<Size> '%.40s' is not a number", text);
    } else if (strcmp(path, "ListBucketResult/Contents/ETag") == 0) {
        const char *v = text + (len && text[0] == '"');
        size_t n = strcspn(v, "\"");
        snprintf(c->etag, sizeof(c->etag), "%.*s", (int)n, v);
    } else if (strcmp(path, "ListBucketResult/Contents/StorageClass") == 0) {
        snprintf(c->storage_class, sizeof(c->storage_class), "%.*s", (int)len, text);
    } else if (strcmp(path, "ListBucketResult/Contents/LastModified") == 0) {
        c->mtime = parse_iso8601(text);
    } else if (strcmp(path, "ListBucketResult/Contents") == 0) {
        if (!c->key)
            return si_errprintf(x->err, "a <Contents> without <Key>");
        si_s3_list_t *l = p->l;
        if (si_array_grow((void **)&l->objects, &p->cap_objects, l->n + 1, sizeof(*l->objects)) < 0)
            return si_errprintf(x->err, "out of memory");
        if (!c->storage_class[0])
            snprintf(c->storage_class, sizeof(c->storage_class), "STANDARD");
        l->objects[l->n++] = *c;
        memset(c, 0, sizeof(*c));
    } else if (strcmp(path, "ListBucketResult/IsTruncated") == 0) {
        p->l->truncated = len == 4 && strncmp(text, "true", 4) == 0;
    } else if (strcmp(path, "ListBucketResult/NextContinuationToken") == 0) {
        free(p->l->next_token);
        if (!(p->l->next_token = strndup(text, len)))
            return si_errprintf(x->err, "out of memory");
    }
    return 0;
}

int si_s3_parse_list(const char *body, size_t len, si_s3_list_t *out, si_error_t *err)
{
    memset(out, 0, sizeof(*out));
    list_parse_t p = {out, {0}, 0};
    const char *code;
    int rc = si_xml_parse(body ? body : "", len, SI_S3_BODY_MAX, "ListBucketResult",
                          list_element, &p, &code, err);
    free(p.cur.key);
    if (rc == 0 && out->truncated && !out->next_token)
        rc = si_errprintf(err, "a truncated listing without <NextContinuationToken>");
    if (rc < 0) {
        si_errprefix(err, "ListObjectsV2 answer");
        si_s3_list_free(out);
    }
    return rc;
}

void si_s3_list_free(si_s3_list_t *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->objects[i].key);
    free(l->objects);
    free(l->next_token);
    memset(l, 0, sizeof(*l));
}

int si_s3_list_page(si_s3_xfer_t *x, const char *bucket, const char *prefix, const char *token,
                    si_s3_list_t *out, si_s3_response_t *rs, si_error_t *err)
{
    si_strbuf_t q;
    si_strbuf_init(&q, 4 * ENCODED_MAX);
    si_strbuf_puts(&q, "list-type=2");
    if (token) {
        si_strbuf_puts(&q, "&continuation-token=");
        si_uri_encode(&q, token, strlen(token), false);
    }
    if (prefix && *prefix) {
        si_strbuf_puts(&q, "&prefix=");
        si_uri_encode(&q, prefix, strlen(prefix), false);
    }
    if (q.failed) {
        si_strbuf_free(&q);
        return si_errprintf(err, "listing query too long");
    }
    si_s3_request_t rq = {.method = "GET", .bucket = bucket, .query = si_strbuf_str(&q)};
    int rc = si_s3_xfer_perform(x, &rq, rs, err);
    si_strbuf_free(&q);
    if (rc < 0)
        return -1;
    if (rs->status != 200 || rs->curl_code != CURLE_OK) {
        char text[400];
        si_s3_describe(rs, text, sizeof(text));
        return si_errprintf(err, "ListObjectsV2 of %s: %s", bucket, text);
    }
    return si_s3_parse_list(rs->body, rs->body_len, out, err);
}
