/* One libmicrohttpd listener, for both of stageind's HTTP servers (the
 * control API, daemon/http/server.c, and the S3 endpoint, daemon/s3): it
 * starts the daemon with the connection limits, and guards every
 * connection with a watchdog, because libmicrohttpd's own timeout is reset
 * by every byte that arrives:
 *   - request headers (or an idle keep-alive connection) must come whole
 *     within timeout_s, or the connection is cut (a client that trickles
 *     its headers a byte at a time cannot hold a connection: slowloris);
 *   - with min_body_rate, a request body must bring that many bytes/s over
 *     each window of timeout_s from http_listener_body_begins on, or the
 *     connection is cut.
 * The caller's request and completion callbacks are libmicrohttpd's, called
 * through the listener. */
#ifndef STAGEIN_HTTP_LISTENER_H
#define STAGEIN_HTTP_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "common/error.h"
#include "common/log.h"

typedef struct http_listener http_listener_t;

typedef struct {
    const char *name;                /* in log lines: "control", "s3" */
    si_log_t *log;                   /* may be NULL */
    int listen_fd;                   /* a listening socket (http_listen_tcp, or Unix), taken */
    /* a thread per connection (a handler that blocks holds up its own
     * connection only; file bodies go in large sendfile calls), else an
     * internal polling thread, or a pool of threads (threads > 1) */
    bool thread_per_connection;
    bool allow_suspend;              /* MHD_ALLOW_SUSPEND_RESUME (not per connection) */
    unsigned threads;
    unsigned timeout_s;              /* idle connections and request headers; 0: none */
    unsigned max_connections;        /* at once; 0: libmicrohttpd's default */
    size_t memory_limit;             /* per connection (request line, headers); 0: default */
    uint64_t min_body_rate;          /* bytes/s a body must keep; 0: none */
    const char *min_body_rate_key;   /* the setting, for the log ("s3.min_upload_rate") */
    const char *tls_cert, *tls_key;  /* PEM, kept by the caller while it runs; NULL: none */
    MHD_AccessHandlerCallback on_request;
    void *request_arg;
    MHD_RequestCompletedCallback on_completed;   /* may be NULL */
    void *completed_arg;
    /* libmicrohttpd's URI log callback (its answer is the request's
     * *con_cls); may be NULL */
    void *(*on_uri)(void *arg, const char *uri, struct MHD_Connection *conn);
    void *uri_arg;
} http_listener_opts_t;

/* A TCP socket listening on bind_addr (a numeric IPv4 or IPv6 address) and
 * port (0: a free one), for http_listener_opts_t.listen_fd: the fd and
 * *bound the port, or -1 with err ("<name>: ..."). */
int http_listen_tcp(const char *name, const char *bind_addr, uint16_t port, uint16_t *bound,
                    si_error_t *err);

http_listener_t *http_listener_start(const http_listener_opts_t *opts, si_error_t *err);
/* Stops accepting, waits for the connections' threads, frees. NULL: nothing. */
void http_listener_stop(http_listener_t *l);

/* The body of conn's request begins to arrive (after its headers were
 * accepted): from now until its last byte it must keep min_body_rate.
 * what names the request in the log line of a cut ("PUT /b/k uid=N"). */
void http_listener_body_begins(http_listener_t *l, struct MHD_Connection *conn,
                               const char *what);

/* A zeroed area of HTTP_CONN_MEMO_MAX bytes that lives as long as conn:
 * what the connection's requests share (its caller's identity, checked
 * once; daemon/control/identity.c). A connection's requests never run at
 * once, so it needs no lock. NULL when size is larger or conn has none. */
#define HTTP_CONN_MEMO_MAX 64
void *http_listener_conn_memo(struct MHD_Connection *conn, size_t size);

#endif
