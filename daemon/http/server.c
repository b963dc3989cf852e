#include "config.h"
#include "daemon/http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/array.h"
#include "common/clock.h"
#include "daemon/http/listener.h"
#include "daemon/http/router.h"

/* Each connection's memory: request line, headers and the read buffer an
 * upload's body arrives in. libmicrohttpd's default (32 KiB) handed a push
 * its body 16 KiB per recv and callback; with 128 KiB one recv takes the
 * 64 KiB curl sends at once (libmicrohttpd zeroes the pool per request:
 * 256 KiB cost a 64 KiB push 7 % of its CPU in memset). */
#define CONNECTION_POOL (128u << 10)

#define MAX_LISTENERS 4
#define MAX_RESPONSE_HEADERS 8

typedef struct {
    http_handler_fn fn;
    const http_stream_ops_t *stream; /* set for streaming routes (fn is NULL) */
    void *arg;
} handler_t;

typedef struct {
    http_server_t *server;
    bool is_unix;
    int fd;                     /* ours until MHD takes it at start */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    uint16_t port;
    http_listener_t *http;      /* libmicrohttpd, once started */
} listener_t;

struct http_server {
    http_server_opts_t opts;
    char name[32];
    http_router_t *router;
    handler_t *handlers;        /* owned; the router points into... copies */
    size_t nhandlers, cap_handlers;
    listener_t listeners[MAX_LISTENERS];
    size_t nlisteners;
    bool started;
    /* suspended connections: libmicrohttpd must not stop with any */
    pthread_mutex_t suspend_mu;
    pthread_cond_t suspend_cv;
    unsigned suspended;
    atomic_uint_fast64_t requests, s2xx, s3xx, s4xx, s5xx, too_large;
};

struct http_request {
    listener_t *listener;
    struct MHD_Connection *conn;
    char method[16];
    char *path;
    http_params_t params;
    handler_t *handler;
    http_route_result_t route;
    void *stream_state;         /* a streaming route's, from its begin */
    bool stream_begun;
    bool suspending;            /* begin or end called http_request_suspend */
    bool begin_resumes;         /* the next call follows a begin's suspension */
    char allow[64];
    char *body;
    size_t body_len, body_cap;
    bool too_large;
    bool responded;
    unsigned status;
    http_peer_t peer;
    double start;                    /* si_mono_now when the headers came */
    char note[128];
    size_t nheaders;
    struct {
        char *name, *value;
    } headers[MAX_RESPONSE_HEADERS];
};

/* ---- setup ---------------------------------------------------------------- */

http_server_t *http_server_new(const http_server_opts_t *opts, si_error_t *err)
{
    if (opts->threads < 1 || opts->threads > 256) {
        si_errprintf(err, "http server: threads must be 1..256, not %u", opts->threads);
        return NULL;
    }
    if (opts->body_limit < 1) {
        si_errprintf(err, "http server: body limit must be at least 1 byte");
        return NULL;
    }
    http_server_t *s = calloc(1, sizeof(*s));
    if (!s || !(s->router = http_router_new())) {
        free(s);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    s->opts = *opts;
    snprintf(s->name, sizeof(s->name), "%s", opts->name ? opts->name : "http");
    s->opts.name = s->name;
    for (size_t i = 0; i < MAX_LISTENERS; i++)
        s->listeners[i].fd = -1;
    pthread_mutex_init(&s->suspend_mu, NULL);
    pthread_cond_init(&s->suspend_cv, NULL);
    return s;
}

static int add_route(http_server_t *s, const char *method, const char *pattern,
                     http_handler_fn fn, const http_stream_ops_t *stream, void *arg,
                     si_error_t *err)
{
    if (s->started)
        return si_errprintf(err, "route %s %s: server already started", method, pattern);
    /* Handlers live in one array that only grows before start; the router
     * stores the index (as a pointer-sized value) so growth cannot dangle. */
    if (si_array_grow((void **)&s->handlers, &s->cap_handlers, s->nhandlers + 1,
                      sizeof(*s->handlers)) < 0)
        return si_errprintf(err, "out of memory");
    if (http_router_add(s->router, method, pattern, (void *)(uintptr_t)(s->nhandlers + 1), err) < 0)
        return -1;
    s->handlers[s->nhandlers].fn = fn;
    s->handlers[s->nhandlers].stream = stream;
    s->handlers[s->nhandlers].arg = arg;
    s->nhandlers++;
    return 0;
}

int http_server_route(http_server_t *s, const char *method, const char *pattern,
                      http_handler_fn fn, void *arg, si_error_t *err)
{
    return add_route(s, method, pattern, fn, NULL, arg, err);
}

int http_server_route_stream(http_server_t *s, const char *method, const char *pattern,
                             const http_stream_ops_t *ops, void *arg, si_error_t *err)
{
    if (!ops || !ops->begin || !ops->data || !ops->end || !ops->cleanup)
        return si_errprintf(err, "route %s %s: a streaming route needs begin, data, end and"
                                 " cleanup", method, pattern);
    return add_route(s, method, pattern, NULL, ops, arg, err);
}

static listener_t *next_listener(http_server_t *s, si_error_t *err)
{
    if (s->started) {
        si_errprintf(err, "%s: listeners must be added before start", s->name);
        return NULL;
    }
    if (s->nlisteners == MAX_LISTENERS) {
        si_errprintf(err, "%s: at most %d listeners", s->name, MAX_LISTENERS);
        return NULL;
    }
    return &s->listeners[s->nlisteners];
}

int http_server_listen_tcp(http_server_t *s, const char *bind_addr, uint16_t port,
                           si_error_t *err)
{
    listener_t *l = next_listener(s, err);
    if (!l)
        return -1;
    int fd = http_listen_tcp(s->name, bind_addr, port, &l->port, err);
    if (fd < 0)
        return -1;
    l->server = s;
    l->is_unix = false;
    l->fd = fd;
    s->nlisteners++;
    return 0;
}

int http_server_listen_unix(http_server_t *s, const char *path, mode_t mode, si_error_t *err)
{
    listener_t *l = next_listener(s, err);
    if (!l)
        return -1;
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sun.sun_path))
        return si_errprintf(err, "%s: socket path %s is longer than %zu bytes", s->name, path,
                            sizeof(sun.sun_path) - 1);
    strcpy(sun.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return si_errprintf(err, "%s: socket: %s", s->name, strerror(errno));

    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            close(fd);
            return si_errprintf(err, "%s: %s exists and is not a socket; not replacing it",
                                s->name, path);
        }
        /* A socket that still accepts belongs to a live server. */
        if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0) {
            close(fd);
            return si_errprintf(err, "%s: socket %s is in use by another server", s->name, path);
        }
        unlink(path);
    }
    if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        int e = errno;
        close(fd);
        return si_errprintf(err, "%s: cannot bind %s: %s", s->name, path, strerror(e));
    }
    if (chmod(path, mode) < 0 || listen(fd, 128) < 0) {
        int e = errno;
        close(fd);
        unlink(path);
        return si_errprintf(err, "%s: cannot listen on %s: %s", s->name, path, strerror(e));
    }
    l->server = s;
    l->is_unix = true;
    l->fd = fd;
    snprintf(l->path, sizeof(l->path), "%s", path);
    s->nlisteners++;
    return 0;
}

/* ---- per request ------------------------------------------------------------ */

static void count_status(http_server_t *s, unsigned status)
{
    atomic_fetch_add(&s->requests, 1);
    if (status < 300)
        atomic_fetch_add(&s->s2xx, 1);
    else if (status < 400)
        atomic_fetch_add(&s->s3xx, 1);
    else if (status < 500)
        atomic_fetch_add(&s->s4xx, 1);
    else
        atomic_fetch_add(&s->s5xx, 1);
}

int http_respond(http_request_t *req, unsigned status, const char *content_type,
                 const void *body, size_t len)
{
    if (req->responded)
        return -1;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!resp)
        return -1;
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    for (size_t i = 0; i < req->nheaders; i++)
        MHD_add_response_header(resp, req->headers[i].name, req->headers[i].value);
    enum MHD_Result r = MHD_queue_response(req->conn, status, resp);
    MHD_destroy_response(resp);
    if (r != MHD_YES)
        return -1;
    req->responded = true;
    req->status = status;
    count_status(req->listener->server, status);
    return 0;
}

static int respond_json_as(http_request_t *req, unsigned status, const char *content_type,
                           json_t *json)
{
    char *text = json ? json_dumps(json, JSON_COMPACT) : NULL;
    json_decref(json);
    if (!text)
        return http_respond(req, 500, "application/json",
                            "{\"error\":\"cannot encode the response\"}", 38);
    size_t len = strlen(text);
    /* a trailing newline keeps curl output and shell tests readable */
    char *line = realloc(text, len + 2);
    if (line) {
        text = line;
        text[len++] = '\n';
        text[len] = '\0';
    }
    int rc = http_respond(req, status, content_type, text, len);
    free(text);
    return rc;
}

int http_respond_json(http_request_t *req, unsigned status, json_t *json)
{
    return respond_json_as(req, status, "application/json", json);
}

int http_respond_error(http_request_t *req, unsigned status, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (status >= 500)
        si_log(req->listener->server->opts.log, SI_LOG_ERROR, "%s: %s %s: %s",
               req->listener->server->name, req->method, req->path, text);
    /* RFC 7807 problem details, as the WLCG Tape REST API answers errors;
     * "error" repeats the detail for the clients that read it before */
    const char *title = MHD_get_reason_phrase_for(status);
    return respond_json_as(req, status, "application/problem+json",
                           json_pack("{s:s, s:s, s:I, s:s, s:s}", "type", "about:blank", "title",
                                     title && *title ? title : "Error", "status",
                                     (json_int_t)status, "detail", text, "error", text));
}

int http_add_header(http_request_t *req, const char *name, const char *value)
{
    if (req->nheaders == MAX_RESPONSE_HEADERS)
        return -1;
    char *n = strdup(name), *v = strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return -1;
    }
    req->headers[req->nheaders].name = n;
    req->headers[req->nheaders].value = v;
    req->nheaders++;
    return 0;
}

const char *http_request_method(const http_request_t *req) { return req->method; }
const char *http_request_path(const http_request_t *req) { return req->path; }
const http_peer_t *http_request_peer(const http_request_t *req) { return &req->peer; }
void *http_request_connection_memo(http_request_t *req, size_t size)
{
    return http_listener_conn_memo(req->conn, size);
}
si_log_t *http_request_log(const http_request_t *req) { return req->listener->server->opts.log; }

const char *http_request_param(const http_request_t *req, const char *name)
{
    return http_params_get(&req->params, name);
}

const char *http_request_header(const http_request_t *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *http_request_trailer(const http_request_t *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_FOOTER_KIND, name);
}

const char *http_request_query(const http_request_t *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *http_request_body(const http_request_t *req, size_t *len)
{
    if (len)
        *len = req->body_len;
    return req->body ? req->body : "";
}

void http_request_note(http_request_t *req, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(req->note, sizeof(req->note), fmt, ap);
    va_end(ap);
}

static void read_peer(http_request_t *req)
{
    http_peer_t *peer = &req->peer;
    peer->is_unix = req->listener->is_unix;
    if (peer->is_unix) {
        snprintf(peer->address, sizeof(peer->address), "unix");
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (ci && getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
            peer->have_cred = true;
            peer->pid = cred.pid;
            peer->uid = cred.uid;
            peer->gid = cred.gid;
        }
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr)
        return;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (ci->client_addr->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ci->client_addr;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        port = ntohs(a->sin_port);
    } else if (ci->client_addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ci->client_addr;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
        port = ntohs(a->sin6_port);
    }
    snprintf(peer->address, sizeof(peer->address), "%s:%u", host, port);
}

static http_request_t *request_new(listener_t *l, struct MHD_Connection *conn,
                                   const char *url, const char *method)
{
    http_request_t *req = calloc(1, sizeof(*req));
    if (!req || !(req->path = strdup(url))) {
        free(req);
        return NULL;
    }
    req->listener = l;
    req->conn = conn;
    snprintf(req->method, sizeof(req->method), "%s", method);
    req->start = si_mono_now();
    read_peer(req);
    void *target = NULL;
    req->route = http_router_match(l->server->router, req->method, req->path, &target,
                                   &req->params, req->allow, sizeof(req->allow));
    if (req->route == HTTP_ROUTE_FOUND)
        req->handler = &l->server->handlers[(uintptr_t)target - 1];
    return req;
}

static void request_free(http_request_t *req)
{
    for (size_t i = 0; i < req->nheaders; i++) {
        free(req->headers[i].name);
        free(req->headers[i].value);
    }
    free(req->body);
    free(req->path);
    free(req);
}

static void append_body(http_request_t *req, const char *data, size_t len)
{
    size_t limit = req->listener->server->opts.body_limit;
    if (req->too_large || len > limit - req->body_len) {
        req->too_large = true;
        return;
    }
    if (si_array_grow((void **)&req->body, &req->body_cap, req->body_len + len + 1, 1) < 0) {
        req->too_large = true;
        return;
    }
    memcpy(req->body + req->body_len, data, len);
    req->body_len += len;
    req->body[req->body_len] = '\0';
}

static const http_stream_ops_t *stream_of(const http_request_t *req)
{
    return req->handler ? req->handler->stream : NULL;
}

static void respond_too_large(http_request_t *req)
{
    atomic_fetch_add(&req->listener->server->too_large, 1);
    http_respond_error(req, 413, "request body is larger than the limit of %zu bytes",
                       req->listener->server->opts.body_limit);
}

/* What every request must not hold: a query argument with a NUL byte (%00:
 * a handler's C string would end there, "a%00b" naming "a"), or Content-Length
 * headers that disagree (RFC 9112 6.3; libmicrohttpd reads by the first). */
typedef struct {
    const char *bad_arg;
    const char *length;
    bool lengths_differ;
} framing_check_t;

static enum MHD_Result check_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    framing_check_t *c = cls;
    if (strlen(key) != key_size || (value && strlen(value) != value_size)) {
        c->bad_arg = key;
        return MHD_NO;
    }
    return MHD_YES;
}

static enum MHD_Result check_length(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    framing_check_t *c = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0 || !value)
        return MHD_YES;
    if (c->length && strcmp(c->length, value) != 0) {
        c->lengths_differ = true;
        return MHD_NO;
    }
    c->length = value;
    return MHD_YES;
}

static bool respond_bad_framing(http_request_t *req)
{
    framing_check_t c = {0};
    MHD_get_connection_values_n(req->conn, MHD_GET_ARGUMENT_KIND, check_arg, &c);
    if (c.bad_arg) {
        http_respond_error(req, 400, "query argument '%.64s' holds a NUL byte (%%00)",
                           c.bad_arg);
        return true;
    }
    MHD_get_connection_values(req->conn, MHD_HEADER_KIND, check_length, &c);
    if (c.lengths_differ) {
        http_respond_error(req, 400, "two different Content-Length headers: the body's length"
                           " is ambiguous");
        return true;
    }
    return false;
}

/* Answers that do not need the body are sent before it is read (libmicrohttpd
 * accepts a response only before the first body chunk or after the last). */
static bool respond_early(http_request_t *req)
{
    if (respond_bad_framing(req))
        return true;
    if (req->route == HTTP_ROUTE_NO_PATH) {
        http_respond_error(req, 404, "no such endpoint: %s %s", req->method, req->path);
        return true;
    }
    if (req->route == HTTP_ROUTE_NO_METHOD) {
        http_add_header(req, "Allow", req->allow);
        http_respond_error(req, 405, "%s is not allowed on %s (allowed: %s)", req->method,
                           req->path, req->allow);
        return true;
    }
    const char *cl = http_request_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && !stream_of(req)) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(cl, &end, 10);
        if (errno || *end || n > req->listener->server->opts.body_limit) {
            respond_too_large(req);
            return true;
        }
    }
    return false;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    listener_t *l = cls;
    http_request_t *req = *con_cls;
    if (!req) {
        req = request_new(l, conn, url, method);
        if (!req)
            return MHD_NO;
        *con_cls = req;
        if (!respond_early(req) && stream_of(req)) {
            req->stream_begun = true;
            if (req->handler->stream->begin(req, req->handler->arg, &req->stream_state) < 0 &&
                !req->responded)
                http_respond_error(req, 500, "internal error: %s %s refused without an answer",
                                   req->method, req->path);
            /* a begin may suspend until its body may come: libmicrohttpd
             * then calls again, with no data, which is no end yet */
            req->begin_resumes = req->suspending;
            req->suspending = false;
        }
        return MHD_YES;
    }
    bool resumed = req->begin_resumes;
    req->begin_resumes = false;
    if (resumed && !*upload_data_size)
        return MHD_YES;
    if (*upload_data_size) {
        if (!req->responded && stream_of(req))
            req->handler->stream->data(req, req->stream_state, upload_data, *upload_data_size);
        else if (!req->responded)
            append_body(req, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (req->responded)
        return MHD_YES;
    if (stream_of(req)) {
        req->handler->stream->end(req, req->stream_state);
        if (req->suspending) {
            req->suspending = false;
            return MHD_YES;
        }
        if (!req->responded)
            http_respond_error(req, 500, "internal error: the handler for %s %s gave no answer",
                               req->method, req->path);
        return req->responded ? MHD_YES : MHD_NO;
    }
    if (req->too_large) {
        respond_too_large(req);
        return MHD_YES;
    }
    req->handler->fn(req, req->handler->arg);
    if (!req->responded)
        http_respond_error(req, 500, "internal error: the handler for %s %s gave no answer",
                           req->method, req->path);
    return req->responded ? MHD_YES : MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    listener_t *l = cls;
    http_request_t *req = *con_cls;
    if (!req)
        return;
    double ms = (si_mono_now() - req->start) * 1e3;
    si_log(l->server->opts.log, SI_LOG_INFO, "%s: %s %s %s %u %.1fms%s%s%s", l->server->name,
           req->peer.address, req->method, req->path, req->status, ms,
           req->note[0] ? " " : "", req->note,
           toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
    if (req->stream_begun)
        req->handler->stream->cleanup(req->stream_state,
                                      toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    request_free(req);
    *con_cls = NULL;
}

int http_server_start(http_server_t *s, si_error_t *err)
{
    if (s->started)
        return si_errprintf(err, "%s: already started", s->name);
    if (s->nlisteners == 0)
        return si_errprintf(err, "%s: no listener configured", s->name);
    for (size_t i = 0; i < s->nlisteners; i++) {
        listener_t *l = &s->listeners[i];
        http_listener_opts_t o = {
            .name = s->name, .log = s->opts.log, .listen_fd = l->fd, .threads = s->opts.threads,
            .timeout_s = s->opts.timeout_s, .max_connections = s->opts.max_connections,
            .on_request = on_request, .request_arg = l, .on_completed = on_completed,
            .completed_arg = l, .allow_suspend = true, .memory_limit = CONNECTION_POOL};
        l->fd = -1; /* the listener's now (closed by it, also when it fails) */
        if (!(l->http = http_listener_start(&o, err))) {
            if (l->is_unix)
                si_errprintf(err, "%s: cannot start the HTTP server on %s", s->name, l->path);
            else
                si_errprintf(err, "%s: cannot start the HTTP server on port %u", s->name,
                             (unsigned)l->port);
            http_server_stop(s);
            return -1;
        }
    }
    s->started = true;
    return 0;
}

uint16_t http_server_port(const http_server_t *s)
{
    for (size_t i = 0; i < s->nlisteners; i++)
        if (!s->listeners[i].is_unix)
            return s->listeners[i].port;
    return 0;
}

void http_server_stats(const http_server_t *s, http_stats_t *out)
{
    http_server_t *m = (http_server_t *)s;
    out->requests = atomic_load(&m->requests);
    out->status_2xx = atomic_load(&m->s2xx);
    out->status_3xx = atomic_load(&m->s3xx);
    out->status_4xx = atomic_load(&m->s4xx);
    out->status_5xx = atomic_load(&m->s5xx);
    out->body_too_large = atomic_load(&m->too_large);
}

void http_request_suspend(http_request_t *req)
{
    http_server_t *s = req->listener->server;
    pthread_mutex_lock(&s->suspend_mu);
    s->suspended++;
    pthread_mutex_unlock(&s->suspend_mu);
    req->suspending = true;
    MHD_suspend_connection(req->conn);
}

void http_request_resume(http_request_t *req)
{
    http_server_t *s = req->listener->server;
    MHD_resume_connection(req->conn);
    pthread_mutex_lock(&s->suspend_mu);
    s->suspended--;
    pthread_cond_broadcast(&s->suspend_cv);
    pthread_mutex_unlock(&s->suspend_mu);
}

void http_server_stop(http_server_t *s)
{
    /* a suspended answer is due soon (its owner resumes it): wait for it */
    pthread_mutex_lock(&s->suspend_mu);
    while (s->suspended)
        pthread_cond_wait(&s->suspend_cv, &s->suspend_mu);
    pthread_mutex_unlock(&s->suspend_mu);
    for (size_t i = s->nlisteners; i-- > 0;) {
        listener_t *l = &s->listeners[i];
        http_listener_stop(l->http);
        l->http = NULL;
        if (l->fd >= 0) {
            close(l->fd);
            l->fd = -1;
        }
        if (l->is_unix && l->path[0]) {
            unlink(l->path);
            l->path[0] = '\0';
        }
    }
    s->started = false;
}

void http_server_free(http_server_t *s)
{
    if (!s)
        return;
    http_server_stop(s);
    http_router_free(s->router);
    free(s->handlers);
    pthread_cond_destroy(&s->suspend_cv);
    pthread_mutex_destroy(&s->suspend_mu);
    free(s);
}
