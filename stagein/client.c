#include "config.h"
#include "stagein/client.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <curl/curl.h>

#include "common/checksum.h"
#include "common/clock.h"
#include "common/strbuf.h"
#include "common/munge_auth.h"
#include "daemon/conf/stageind_conf.h"

/* Answers larger than this are refused: the largest is a request's per-file
 * status, a few hundred bytes per file. */
#define CLIENT_ANSWER_LIMIT (256u << 20)

struct client {
    CURL *curl;
    /* the connections, kept across easy handles: a handle that sent a
     * chunked body with trailers is replaced before the next request
     * (libcurl 7.88 keeps its trailer state across transfers and then
     * writes a chunk header before its upload buffer) */
    CURLSH *share;
    bool trailers_sent;
    client_endpoint_list_t eps;
    size_t current;      /* the endpoint that last answered: tried first */
    char *source;
    char *munge_socket;  /* NULL: libmunge's default */
    long timeout_s, connect_timeout_s;
    char curl_error[CURL_ERROR_SIZE];
    /* The MUNGE credential sent on the connection curl keeps open: sent
     * again there for CREDENTIAL_RESEND_S, and stageind decodes it once
     * per connection (daemon/control/identity.h). A new connection always
     * gets a fresh one, as munged refuses a credential seen before. */
    char *credential;
    double credential_at;           /* si_mono_now when encoded */
    bool credential_resent;         /* this try re-sends it: no new connection */
    bool new_connection_refused;    /* ... and curl wanted one */
    bool resend_refused;            /* stageind took no re-sent credential */
};

/* Well inside munged's default credential lifetime (300 s) and any a site
 * would shorten it to. */
#define CREDENTIAL_RESEND_S 10.0

int client_parse_endpoint(const char *text, client_endpoint_t *out, si_error_t *err)
{
    client_endpoint_t ep;
    memset(&ep, 0, sizeof(ep));
    if (strlen(text) >= sizeof(ep.text))
        return si_errprintf(err, "endpoint '%.60s...' is too long", text);
    strcpy(ep.text, text);
    if (strncmp(text, "unix:", 5) == 0) {
        const char *path = text + 5;
        if (!*path)
            return si_errprintf(err, "endpoint '%s' names no socket path", text);
        if (strlen(path) >= sizeof(ep.unix_path))
            return si_errprintf(err, "socket path of endpoint '%.60s...' is longer than %d bytes",
                                text, CLIENT_UNIX_PATH_MAX - 1);
        strcpy(ep.unix_path, path);
        strcpy(ep.base_url, "http://localhost");
    } else if (strncmp(text, "http://", 7) == 0 || strncmp(text, "https://", 8) == 0) {
        const char *host = strchr(text, ':') + 3;
        size_t len = strlen(text);
        while (len > 0 && text[len - 1] == '/')
            len--;
        if (*host == '\0' || *host == '/' || (size_t)(host - text) >= len)
            return si_errprintf(err, "endpoint '%s' names no host", text);
        if (strcspn(text, " \t\r\n") != strlen(text))
            return si_errprintf(err, "endpoint '%s' contains white space", text);
        if (len >= sizeof(ep.base_url))
            return si_errprintf(err, "endpoint '%.60s...' is too long", text);
        memcpy(ep.base_url, text, len);
    } else {
        return si_errprintf(err, "bad endpoint '%s': expected http://HOST:PORT or unix:PATH",
                            text);
    }
    *out = ep;
    return 0;
}

/* Whether a and b reach the same place, however written. */
static bool same_endpoint(const client_endpoint_t *a, const client_endpoint_t *b)
{
    return strcmp(a->base_url, b->base_url) == 0 && strcmp(a->unix_path, b->unix_path) == 0;
}

int client_parse_endpoints(const char *text, client_endpoint_list_t *out, si_error_t *err)
{
    client_endpoint_list_t *l = calloc(1, sizeof(*l));
    if (!l)
        return si_errprintf(err, "out of memory");
    size_t entries = 1;
    for (const char *p = text; *p; p++)
        entries += *p == ',';
    int rc = 0;
    if (entries > CLIENT_ENDPOINTS_MAX) {
        rc = si_errprintf(err, "endpoint list '%.80s...' names %zu endpoints, at most %d",
                          text, entries, CLIENT_ENDPOINTS_MAX);
        goto done;
    }
    for (const char *p = text; rc == 0 && l->n < entries; l->n++) {
        size_t len = strcspn(p, ",");
        const char *next = p + len + (p[len] == ',');
        while (len > 0 && isspace((unsigned char)*p))
            p++, len--;
        while (len > 0 && isspace((unsigned char)p[len - 1]))
            len--;
        char one[CLIENT_ENDPOINT_TEXT_MAX];
        if (len == 0 && entries == 1)
            rc = si_errprintf(err, "no endpoint given: expected http://HOST:PORT or unix:PATH"
                                   " (several separated by ',')");
        else if (len == 0)
            rc = si_errprintf(err, "endpoint %zu of '%.200s' is empty", l->n + 1, text);
        else if (len >= sizeof(one))
            rc = si_errprintf(err, "endpoint %zu of the list is longer than %d bytes", l->n + 1,
                              CLIENT_ENDPOINT_TEXT_MAX - 1);
        if (rc < 0)
            break;
        memcpy(one, p, len);
        one[len] = '\0';
        if (client_parse_endpoint(one, &l->at[l->n], err) < 0) {
            rc = entries > 1 ? si_errprefix(err, "endpoint %zu of %zu", l->n + 1, entries) : -1;
            break;
        }
        for (size_t i = 0; i < l->n; i++)
            if (same_endpoint(&l->at[i], &l->at[l->n]))
                rc = si_errprintf(err, "endpoint list names %s twice (endpoints %zu and %zu)",
                                  one, i + 1, l->n + 1);
        p = next;
    }
    if (rc == 0)
        *out = *l;
done:
    free(l);
    return rc;
}

int client_check_endpoints(const char *text, si_error_t *err)
{
    client_endpoint_list_t *l = malloc(sizeof(*l));
    int rc = l ? client_parse_endpoints(text, l, err) : si_errprintf(err, "out of memory");
    free(l);
    return rc;
}

/* stageind's own address from its settings: its socket, else its TCP port
 * (a wildcard bind address is reached through loopback). */
static int daemon_address(const si_conf_t *conf, char *buf, size_t size, si_error_t *err)
{
    stageind_overrides_t none = {.port = -1};
    stageind_settings_t *s = malloc(sizeof(*s));
    if (!s)
        return si_errprintf(err, "out of memory");
    int rc = stageind_settings(conf, &none, s, err);
    if (rc < 0)
        goto done;
    if (s->socket[0]) {
        snprintf(buf, size, "unix:%s", s->socket);
    } else if (s->port > 0) {
        const char *host = s->bind;
        if (strcmp(host, "0.0.0.0") == 0)
            host = "127.0.0.1";
        else if (strcmp(host, "::") == 0)
            host = "::1";
        snprintf(buf, size, strchr(host, ':') ? "http://[%s]:%d" : "http://%s:%d", host,
                 s->port);
    } else {
        rc = si_errprintf(err, "stageind is configured with no Unix socket and no fixed port:"
                               " set client.endpoints, $STAGEIN_ENDPOINT or --endpoint");
    }
done:
    free(s);
    return rc;
}

/* client.endpoints (a list) joined with ',' into buf, each element checked
 * alone so that a message names the one at fault; 0 when absent. */
static int configured_list(const si_conf_t *conf, char *buf, size_t size, si_error_t *err)
{
    const config_setting_t *list = si_conf_setting(conf, "client.endpoints");
    if (!list)
        return 0;
    int n = config_setting_length(list);
    if (n == 0)
        return si_conf_fail(conf, "client.endpoints", err,
                            "is empty: name at least one endpoint, or remove it");
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        const char *one = config_setting_get_string_elem(list, i);
        if (client_check_endpoints(one ? one : "", err) < 0)
            return si_conf_fail(conf, "client.endpoints", err, "element %d: %s", i + 1,
                                err->text);
        if (strchr(one, ','))
            return si_conf_fail(conf, "client.endpoints", err,
                                "element %d ('%.80s') holds several endpoints: give each its"
                                " own string", i + 1, one);
        int wrote = snprintf(buf + used, size - used, "%s%s", i ? "," : "", one);
        if (wrote < 0 || (size_t)wrote >= size - used)
            return si_conf_fail(conf, "client.endpoints", err, "is longer than %zu bytes",
                                size - 1);
        used += (size_t)wrote;
    }
    return 1;
}

/* The same endpoints in the same order (white space aside). */
static bool same_endpoints(const char *a, const char *b)
{
    client_endpoint_list_t *la = malloc(sizeof(*la)), *lb = malloc(sizeof(*lb));
    bool same = la && lb && client_parse_endpoints(a, la, NULL) == 0 &&
                client_parse_endpoints(b, lb, NULL) == 0 && la->n == lb->n;
    for (size_t i = 0; same && i < la->n; i++)
        same = same_endpoint(&la->at[i], &lb->at[i]);
    free(la);
    free(lb);
    return same;
}

int client_resolve_endpoint(const char *option, const si_conf_t *conf, client_address_t *out,
                            si_error_t *err)
{
    client_address_t a;
    const char *env = getenv("STAGEIN_ENDPOINT");
    const char *single = si_conf_string(conf, "client.endpoint", NULL);
    char *listed = malloc(CLIENT_ENDPOINTS_TEXT_MAX);
    const char *text = NULL;
    int rc = -1, have_list = listed ? configured_list(conf, listed, CLIENT_ENDPOINTS_TEXT_MAX, err)
                                    : si_errprintf(err, "out of memory");
    if (have_list < 0)
        goto done;
    /* both set is refused even when --endpoint wins: the file is wrong */
    if (have_list && single && !same_endpoints(single, listed)) {
        si_conf_fail(conf, "client.endpoints", err,
                     "= \"%.120s\" disagrees with client.endpoint = \"%.120s\": set only one"
                     " (client.endpoints takes them all)", listed, single);
        goto done;
    }
    if (option) {
        text = option;
        a.source = "--endpoint";
    } else if (env && *env) {
        text = env;
        a.source = "$STAGEIN_ENDPOINT";
    } else if (have_list) {
        text = listed;
        a.source = "client.endpoints";
    } else if (single) {
        text = single;
        a.source = "client.endpoint";
    } else {
        if (daemon_address(conf, a.text, sizeof(a.text), err) < 0)
            goto done;
        a.source = "stageind's settings";
    }
    if (text && (size_t)snprintf(a.text, sizeof(a.text), "%s", text) >= sizeof(a.text)) {
        si_errprintf(err, "endpoint list from %s is longer than %d bytes", a.source,
                     CLIENT_ENDPOINTS_TEXT_MAX - 1);
        goto done;
    }
    if ((rc = client_check_endpoints(a.text, err)) < 0) {
        si_errprefix(err, "%s", a.source);
        goto done;
    }
    *out = a;
done:
    free(listed);
    return rc;
}

void client_conf_opts(const si_conf_t *conf, client_opts_t *opts)
{
    const char *munge = si_conf_string(conf, "client.munge_socket", NULL);
    if (!munge)
        munge = si_conf_string(conf, "stageind.munge_socket", NULL);
    opts->munge_socket = munge;
    opts->timeout_s = (long)si_conf_int(conf, "client.timeout", CLIENT_DEFAULT_TIMEOUT);
    opts->connect_timeout_s =
        (long)si_conf_int(conf, "client.connect_timeout", CLIENT_DEFAULT_CONNECT_TIMEOUT);
}

client_t *client_new(const client_opts_t *opts, si_error_t *err)
{
    client_t *c = calloc(1, sizeof(*c));
    if (!c) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    if (client_parse_endpoints(opts->endpoint, &c->eps, err) < 0) {
        si_errprefix(err, "%s", opts->source ? opts->source : "endpoint");
        goto error;
    }
    c->source = strdup(opts->source ? opts->source : "the command line");
    if (opts->munge_socket && *opts->munge_socket)
        c->munge_socket = strdup(opts->munge_socket);
    if (!c->source || (opts->munge_socket && *opts->munge_socket && !c->munge_socket)) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    c->timeout_s = opts->timeout_s;
    c->connect_timeout_s =
        opts->connect_timeout_s > 0 ? opts->connect_timeout_s : CLIENT_DEFAULT_CONNECT_TIMEOUT;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        si_errprintf(err, "cannot initialise libcurl");
        goto error;
    }
    c->curl = curl_easy_init();
    c->share = curl_share_init();
    if (c->share && curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK) {
        curl_share_cleanup(c->share);
        c->share = NULL;
    }
    if (!c->curl || !c->share) {
        curl_easy_cleanup(c->curl);
        curl_share_cleanup(c->share);
        curl_global_cleanup();
        si_errprintf(err, "cannot initialise libcurl");
        goto error;
    }
    return c;
error:
    free(c->source);
    free(c->munge_socket);
    free(c);
    return NULL;
}

void client_free(client_t *c)
{
    if (!c)
        return;
    curl_easy_cleanup(c->curl);
    curl_share_cleanup(c->share);
    curl_global_cleanup();
    free(c->source);
    free(c->munge_socket);
    free(c->credential);
    free(c);
}

void client_reply_free(client_reply_t *reply)
{
    free(reply->body);
    json_decref(reply->json);
    memset(reply, 0, sizeof(*reply));
}

void client_answer_error(long status, const char *body, const json_t *json, si_error_t *err)
{
    /* problem+json's detail; "error" from a stageind before the Tape REST API */
    const char *text = NULL;
    if (json_is_object(json) && !(text = json_string_value(json_object_get(json, "detail"))))
        text = json_string_value(json_object_get(json, "error"));
    if (text) {
        si_errprintf(err, "%s", text);
        return;
    }
    size_t line = body ? strcspn(body, "\r\n") : 0;
    si_errprintf(err, "stageind answered HTTP %ld%s%.*s", status, line ? ": " : "",
                 (int)(line > 200 ? 200 : line), body ? body : "");
}

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
    si_strbuf_t *b = arg;
    return si_strbuf_append(b, data, size * n) ? size * n : 0;
}

static bool add_header(struct curl_slist **list, const char *line)
{
    struct curl_slist *longer = curl_slist_append(*list, line);
    if (longer)
        *list = longer;
    return longer != NULL;
}

/* Why no connection came, short, for the message that names
 * every endpoint tried; NULL when a connection was made. */
static const char *connect_failure(const client_t *c, CURLcode rc, char *buf, size_t size)
{
    long os_errno = 0;
    curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
    /* a fast connect may take 0 us: bytes sent also tell that it connected */
    curl_off_t connected_us = 0;
    long sent = 0;
    curl_easy_getinfo(c->curl, CURLINFO_CONNECT_TIME_T, &connected_us);
    curl_easy_getinfo(c->curl, CURLINFO_REQUEST_SIZE, &sent);
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        snprintf(buf, size, "%s", os_errno ? strerror((int)os_errno) : curl_easy_strerror(rc));
        return buf;
    case CURLE_COULDNT_RESOLVE_HOST:
        snprintf(buf, size, "%s", c->curl_error[0] ? c->curl_error : curl_easy_strerror(rc));
        return buf;
    case CURLE_OPERATION_TIMEDOUT:
        if (connected_us > 0 || sent > 0)
            return NULL;
        snprintf(buf, size, "no connection within %ld s", c->connect_timeout_s);
        return buf;
    default:
        return NULL;
    }
}

/* Why no answer came from endpoint ep, in the user's terms. */
static void transport_error(const client_t *c, const client_endpoint_t *ep, CURLcode rc,
                            si_error_t *err)
{
    char why[256];
    const char *refused = connect_failure(c, rc, why, sizeof(why));
    if (refused) {
        si_errprintf(err, "cannot connect to stageind at %s (from %s): %s; is stageind running?",
                     ep->text, c->source, refused);
        return;
    }
    switch (rc) {
    case CURLE_OPERATION_TIMEDOUT:
        si_errprintf(err, "stageind at %s did not answer within %ld s", ep->text, c->timeout_s);
        break;
    case CURLE_WRITE_ERROR:
        si_errprintf(err, "the answer of stageind at %s is larger than %u MiB", ep->text,
                     CLIENT_ANSWER_LIMIT >> 20);
        break;
    default:
        si_errprintf(err, "stageind at %s (from %s): %s", ep->text, c->source,
                     c->curl_error[0] ? c->curl_error : curl_easy_strerror(rc));
        break;
    }
}

/* Whether a failed try may go on to the next endpoint: when it never
 * connected (nothing was sent), or, for a GET, which has no effect, when
 * the connection broke before any byte of the answer. */
static bool may_fail_over(const client_t *c, CURLcode rc, bool idempotent)
{
    char why[8];
    if (connect_failure(c, rc, why, sizeof(why)))
        return true;
    long answer_bytes = 0;
    curl_easy_getinfo(c->curl, CURLINFO_HEADER_SIZE, &answer_bytes);
    return idempotent && answer_bytes == 0 &&
           (rc == CURLE_GOT_NOTHING || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR);
}

/* curl's socket for a new connection: none while the request carries a
 * re-sent credential (client_send then encodes a fresh one and tries
 * again, before anything was sent). */
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
    client_t *c = arg;
    (void)purpose;
    if (c->credential_resent) {
        c->new_connection_refused = true;
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype, a->protocol);
}

/* The credential for the next request: the kept one while young, else a
 * fresh one (NULL with why when munged cannot give one). */
static const char *credential_for(client_t *c, bool fresh, si_error_t *why)
{
    double now = si_mono_now();
    c->credential_resent = !fresh && !c->resend_refused && c->credential &&
                           now - c->credential_at < CREDENTIAL_RESEND_S;
    if (c->credential_resent)
        return c->credential;
    free(c->credential);
    c->credential = si_munge_encode(c->munge_socket, why);
    c->credential_at = now;
    return c->credential;
}

/* The request's headers: credential (may be NULL), content type, the
 * caller's, and no Expect; false when out of memory. */
static bool request_headers(const client_request_t *rq, const char *credential,
                            struct curl_slist **headers)
{
    bool added = true;
    if (credential) {
        char *field = NULL;
        added = asprintf(&field, "%s: %s", SI_MUNGE_HEADER, credential) >= 0 &&
                add_header(headers, field);
        free(field);
    }
    if (rq->json_body)
        added = added && add_header(headers, "Content-Type: application/json");
    else if (rq->upload)
        added = added && add_header(headers, "Content-Type: application/octet-stream");
    if (rq->upload && rq->upload_sum_trailer)
        added = added && add_header(headers, "Transfer-Encoding: chunked");
    for (const char *const *more = rq->headers; more && *more && added; more++)
        added = add_header(headers, *more);
    /* no 100-continue round trip: stageind reads or refuses the body at once */
    return added && add_header(headers, "Expect:");
}

/* An upload hashed as curl reads it (client_request_t.upload_sum_trailer). */
typedef struct {
    FILE *f;
    int64_t left;
    si_checksum_t *sum;
    const client_request_t *rq;
} hashed_upload_t;

static size_t read_hashed(char *buf, size_t size, size_t n, void *arg)
{
    hashed_upload_t *u = arg;
    size_t want = size * n;
    if ((int64_t)want > u->left)
        want = (size_t)u->left;
    size_t got = want ? fread(buf, 1, want, u->f) : 0;
    if (got < want && ferror(u->f))
        return CURL_READFUNC_ABORT;
    si_checksum_update(u->sum, buf, got);
    u->left -= (int64_t)got;
    return got;
}

static int trailer_of(struct curl_slist **list, void *arg)
{
    hashed_upload_t *u = arg;
    char line[256];
    si_checksum_final(u->sum, u->rq->upload_sum);
    snprintf(line, sizeof(line), "%s: %s", u->rq->upload_sum_trailer, u->rq->upload_sum);
    return add_header(list, line) ? CURL_TRAILERFUNC_OK : CURL_TRAILERFUNC_ABORT;
}

/* One try of rq at endpoint ep with the prepared headers. */
static CURLcode perform(client_t *c, const client_endpoint_t *ep, const client_request_t *rq,
                        struct curl_slist *headers, si_strbuf_t *answer, si_error_t *err)
{
    CURL *fresh = c->trailers_sent ? curl_easy_init() : NULL;
    if (fresh) { /* the connection stays in c->share */
        curl_easy_cleanup(c->curl);
        c->curl = fresh;
        c->trailers_sent = false;
    }
    CURL *h = c->curl;
    char url[sizeof(ep->base_url) + 2048];
    if ((size_t)snprintf(url, sizeof(url), "%s%s", ep->base_url, rq->path) >= sizeof(url)) {
        si_errprintf(err, "request path too long");
        return CURLE_URL_MALFORMAT;
    }
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_SHARE, c->share);
    c->curl_error[0] = '\0';
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->curl_error);
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (ep->unix_path[0])
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, ep->unix_path);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, c);
    c->new_connection_refused = false;
    curl_easy_setopt(h, CURLOPT_TIMEOUT, c->timeout_s);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, c->connect_timeout_s);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
    hashed_upload_t hashed = {.f = rq->upload, .left = rq->upload_size, .rq = rq};
    if (rq->upload && rq->upload_sum_trailer) {
        if (!(hashed.sum = si_checksum_new("sha256", err)))
            return CURLE_OUT_OF_MEMORY;
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, read_hashed);
        curl_easy_setopt(h, CURLOPT_READDATA, &hashed);
        curl_easy_setopt(h, CURLOPT_TRAILERFUNCTION, trailer_of);
        curl_easy_setopt(h, CURLOPT_TRAILERDATA, &hashed);
        c->trailers_sent = true;
    } else if (rq->upload) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READDATA, rq->upload);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->upload_size);
    } else if (rq->json_body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->json_body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(rq->json_body));
    } else if (strcmp(rq->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "POST") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
    CURLcode crc = curl_easy_perform(h);
    si_checksum_free(hashed.sum);
    if (crc != CURLE_OK)
        transport_error(c, ep, crc, err);
    return crc;
}

/* Every endpoint failed to connect: each with its reason, and what to do. */
static void all_failed(const client_t *c, char reasons[][256], si_error_t *err)
{
    si_strbuf_t b;
    si_strbuf_init(&b, sizeof(err->text) * 2);
    si_strbuf_printf(&b, "cannot connect to stageind at any of the %zu endpoints from %s:",
                     c->eps.n, c->source);
    for (size_t i = 0; i < c->eps.n; i++)
        si_strbuf_printf(&b, " %s: %s;", c->eps.at[i].text, reasons[i]);
    si_strbuf_printf(&b, " is stageind running on one of them? (check %s)", c->source);
    si_errprintf(err, "%s", b.data ? si_strbuf_str(&b) : "cannot connect to stageind");
    si_strbuf_free(&b);
}

int client_send(client_t *c, const client_request_t *rq, client_reply_t *reply,
                si_error_t *err)
{
    struct curl_slist *headers = NULL;
    const char *credential = NULL;
    char (*reasons)[256] = NULL;
    si_strbuf_t answer;
    si_strbuf_init(&answer, CLIENT_ANSWER_LIMIT);
    memset(reply, 0, sizeof(*reply));
    snprintf(reply->request, sizeof(reply->request), "%s %s", rq->method, rq->path);
    int rc = -1;
    bool on_socket_only = true;
    for (size_t i = 0; i < c->eps.n; i++)
        on_socket_only = on_socket_only && c->eps.at[i].unix_path[0];

    c->credential_resent = false;
    if (!rq->anonymous) {
        si_error_t why;
        credential = credential_for(c, false, &why);
        /* On the Unix socket stageind can take the caller from SO_PEERCRED. */
        if (!credential && !on_socket_only) {
            si_errprintf(err, "%s (needed for stageind at %s)", why.text,
                         c->eps.at[c->current].text);
            goto done;
        }
    }
    if (!request_headers(rq, credential, &headers) ||
        (c->eps.n > 1 && !(reasons = calloc(c->eps.n, sizeof(*reasons))))) {
        si_errprintf(err, "out of memory");
        goto done;
    }

    /* the upload starts where the caller left it, on every endpoint tried */
    off_t upload_at = rq->upload ? ftello(rq->upload) : -1;
    bool idempotent = strcmp(rq->method, "GET") == 0;
    CURLcode crc = CURLE_OK;
    size_t tried = 0, at = c->current;
    for (; tried < c->eps.n; tried++, at = (at + 1) % c->eps.n) {
        if (tried > 0 && rq->upload && upload_at >= 0 && fseeko(rq->upload, upload_at, SEEK_SET) < 0)
            break;
        si_strbuf_reset(&answer);
        crc = perform(c, &c->eps.at[at], rq, headers, &answer, err);
        long status = 0;
        if (crc == CURLE_OK && c->credential_resent)
            curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
        /* a stageind that decodes every credential (older than 2026-12)
         * refuses a re-sent one as a replay: never re-sent to it again */
        if (status == 401)
            c->resend_refused = true;
        /* a new connection (nothing sent), or refused: a fresh credential */
        if (c->new_connection_refused || status == 401) {
            si_error_t why;
            curl_slist_free_all(headers);
            headers = NULL;
            credential = credential_for(c, true, &why);
            if ((!credential && !on_socket_only) || !request_headers(rq, credential, &headers)) {
                si_errprintf(err, "%s", credential ? "out of memory" : why.text);
                goto done;
            }
            if (rq->upload && upload_at >= 0 && fseeko(rq->upload, upload_at, SEEK_SET) < 0) {
                si_errprintf(err, "cannot send the upload again: %s", strerror(errno));
                goto done;
            }
            si_strbuf_reset(&answer);
            crc = perform(c, &c->eps.at[at], rq, headers, &answer, err);
        }
        if (crc == CURLE_OK || crc == CURLE_URL_MALFORMAT || c->eps.n == 1 ||
            !may_fail_over(c, crc, idempotent))
            break;
        if (!connect_failure(c, crc, reasons[at], sizeof(reasons[at])))
            snprintf(reasons[at], sizeof(reasons[at]), "connection lost before any answer");
    }
    if (tried == c->eps.n) {
        all_failed(c, reasons, err);
        goto done;
    }
    if (crc != CURLE_OK) {
        if (c->eps.n > 1 && !idempotent && crc != CURLE_URL_MALFORMAT &&
            !connect_failure(c, crc, reasons[at], sizeof(reasons[at]))) {
            si_error_t was = *err;
            si_errprintf(err, "%s; not sent to another endpoint, as this one may have accepted it"
                              " (see `stagein status --all`)", was.text);
        }
        goto done;
    }
    c->current = at;
    if (answer.failed) {
        si_errprintf(err, "out of memory reading the answer of stageind");
        goto done;
    }
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &reply->status);
    if (reply->status < 200 || reply->status > 299) { /* the next request: a fresh credential */
        free(c->credential);
        c->credential = NULL;
    }
    reply->len = answer.len;
    reply->body = si_strbuf_take(&answer);
    if (!reply->body)
        reply->body = strdup("");
    if (!reply->body) {
        si_errprintf(err, "out of memory");
        goto done;
    }
    reply->json = json_loadb(reply->body, reply->len, 0, NULL);
    if (reply->status < 200 || reply->status > 299) {
        client_answer_error(reply->status, reply->body, reply->json, err);
        goto done;
    }
    rc = 0;
done:
    c->credential_resent = false;
    curl_slist_free_all(headers);
    free(reasons);
    si_strbuf_free(&answer);
    return rc;
}

char *client_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(3 * strlen(s) + 1);
    if (!out)
        return NULL;
    char *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}
