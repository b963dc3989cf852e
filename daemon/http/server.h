/* A small HTTP/1.1 server for the control API: TCP (loopback by default) and
 * Unix-socket listeners (daemon/http/listener.h, as under the S3 endpoint:
 * connection limits, request headers bounded in time), routes by method +
 * path pattern, bounded request bodies, JSON responses, and the peer's
 * credentials on Unix-socket connections. */
#ifndef STAGEIN_HTTP_SERVER_H
#define STAGEIN_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "common/error.h"
#include "common/log.h"

typedef struct http_server http_server_t;
typedef struct http_request http_request_t;

/* A handler answers by calling exactly one http_respond* function; one that
 * does not gets a 500 from the server. Handlers run on the server's worker
 * threads, several at a time. */
typedef void (*http_handler_fn)(http_request_t *req, void *arg);

typedef struct {
    size_t body_limit;          /* bytes; larger bodies get 413 */
    /* idle connections, and request headers that do not come whole in
     * time (a client trickling them), are cut after this; 0: none */
    unsigned timeout_s;
    unsigned threads;           /* worker threads per listener (>= 1) */
    unsigned max_connections;   /* per listener; 0: libmicrohttpd's default */
    const char *name;           /* in log lines: "control", "s3" */
    si_log_t *log;              /* may be NULL */
} http_server_opts_t;

typedef struct {
    bool is_unix;               /* connection came in on the Unix socket */
    bool have_cred;             /* SO_PEERCRED succeeded */
    pid_t pid;
    uid_t uid;
    gid_t gid;
    char address[64];           /* "127.0.0.1:53412" or "unix" */
} http_peer_t;

typedef struct {
    uint64_t requests;
    uint64_t status_2xx, status_3xx, status_4xx, status_5xx;
    uint64_t body_too_large;
} http_stats_t;

http_server_t *http_server_new(const http_server_opts_t *opts, si_error_t *err);
/* Routes are added before http_server_start. */
int http_server_route(http_server_t *s, const char *method, const char *pattern,
                      http_handler_fn fn, void *arg, si_error_t *err);
/* A streaming route, for uploads of any size: the body is handed over in
 * pieces as it arrives instead of being gathered, and the server's
 * body_limit does not apply (the route enforces its own). begin runs once
 * the headers are in and may answer at once (an early error; the body is
 * then read and dropped): it returns -1 only when it answered. data gets
 * each piece and cannot answer (libmicrohttpd takes an answer only before
 * the body or after it): it remembers a failure for end. end runs after the
 * last piece and answers. cleanup always runs last, with completed false
 * when the client went away before the end of the body (end did not run). */
typedef struct {
    int (*begin)(http_request_t *req, void *arg, void **state);
    void (*data)(http_request_t *req, void *state, const char *data, size_t len);
    void (*end)(http_request_t *req, void *state);
    void (*cleanup)(void *state, bool completed);
} http_stream_ops_t;

/* Inside a streaming route's end: the answer comes later, from another
 * thread, without holding a server thread meanwhile. The connection waits
 * until http_request_resume; end then runs again on it and answers. */
void http_request_suspend(http_request_t *req);
/* Once per suspend, from any thread. */
void http_request_resume(http_request_t *req);

int http_server_route_stream(http_server_t *s, const char *method, const char *pattern,
                             const http_stream_ops_t *ops, void *arg, si_error_t *err);
/* bind_addr: numeric IPv4 or IPv6 address; port 0 picks a free port. */
int http_server_listen_tcp(http_server_t *s, const char *bind_addr, uint16_t port,
                           si_error_t *err);
/* Binds path (a stale socket there is replaced, any other file is refused)
 * with the given permission bits. */
int http_server_listen_unix(http_server_t *s, const char *path, mode_t mode, si_error_t *err);
int http_server_start(http_server_t *s, si_error_t *err);
/* The TCP port actually bound (after start), 0 without a TCP listener. */
uint16_t http_server_port(const http_server_t *s);
void http_server_stats(const http_server_t *s, http_stats_t *out);
/* Stops accepting, waits for running handlers, closes and removes the Unix
 * socket. Safe to call twice. */
void http_server_stop(http_server_t *s);
void http_server_free(http_server_t *s);

/* ---- inside a handler ---------------------------------------------------- */
const char *http_request_method(const http_request_t *req);
const char *http_request_path(const http_request_t *req);
/* A "{name}" segment of the route's pattern. */
const char *http_request_param(const http_request_t *req, const char *name);
/* Header value or NULL (names are case-insensitive). */
const char *http_request_header(const http_request_t *req, const char *name);
/* Query-string argument or NULL. */
const char *http_request_query(const http_request_t *req, const char *name);
/* A trailer field of a chunked body (a streaming route's end): NULL before
 * the body ended or when absent. */
const char *http_request_trailer(const http_request_t *req, const char *name);
/* The whole body, NUL-terminated (len excludes the NUL); "" when none. */
const char *http_request_body(const http_request_t *req, size_t *len);
const http_peer_t *http_request_peer(const http_request_t *req);
/* size bytes (at most 64) that live as long as req's connection, zeroed
 * when it opened, shared by its requests (which never run at once): for
 * what a keep-alive connection's requests need checked only once. NULL
 * when unavailable. */
void *http_request_connection_memo(http_request_t *req, size_t size);
si_log_t *http_request_log(const http_request_t *req);
/* Free text for the access log line, e.g. "uid=1000". */
void http_request_note(http_request_t *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

int http_respond(http_request_t *req, unsigned status, const char *content_type,
                 const void *body, size_t len);
/* Takes ownership of json (decref'd here). */
int http_respond_json(http_request_t *req, unsigned status, json_t *json);
/* RFC 7807 problem+json: {"type", "title", "status", "detail": "<text>",
 * "error": "<text>"} */
int http_respond_error(http_request_t *req, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int http_add_header(http_request_t *req, const char *name, const char *value);

#endif
