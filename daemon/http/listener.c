#include "config.h"
#include "daemon/http/listener.h"

#include "common/clock.h"
#include "common/thread.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WATCHDOG_PERIOD_MS 250

typedef struct http_conn {
    int fd;
    double since;                    /* connected, or its last request answered (si_mono_now) */
    bool in_request;                 /* headers in, not yet completed */
    bool cut;
    bool receiving;                  /* a body arriving (http_listener_body_begins) */
    atomic_uint_fast64_t body_bytes;
    uint64_t window_bytes;           /* body_bytes when the window began */
    double window_since;
    char what[128];                  /* the request, for the log */
    /* http_listener_conn_memo's: the connection's requests (one at a time) share it */
    _Alignas(max_align_t) unsigned char memo[HTTP_CONN_MEMO_MAX];
    struct http_conn *prev, *next;
} http_conn_t;

struct http_listener {
    http_listener_opts_t opts;
    char name[32];
    char rate_key[64];
    struct MHD_Daemon *mhd;
    pthread_mutex_t mu;              /* guards conns, the entries, stopping */
    pthread_cond_t cv;
    http_conn_t *conns;
    bool stopping;
    bool watchdog_started;
    pthread_t watchdog;
};

/* One window of a body's arrival over: cut when it brought less than
 * min_body_rate; mu held. */
static void check_body_rate(http_listener_t *l, http_conn_t *c, double now)
{
    double window = now - c->window_since;
    if (window < (double)l->opts.timeout_s)
        return;
    uint64_t bytes = atomic_load(&c->body_bytes);
    double rate = (double)(bytes - c->window_bytes) / window;
    if (rate >= (double)l->opts.min_body_rate) {
        c->window_bytes = bytes;
        c->window_since = now;
        return;
    }
    si_log(l->opts.log, SI_LOG_WARNING, "%s: %s: connection cut after %" PRIu64 " body bytes:"
           " %.0f bytes/s over the last %.0f s, under %s (%" PRIu64 ")", l->name, c->what,
           bytes, rate, window, l->rate_key, l->opts.min_body_rate);
    shutdown(c->fd, SHUT_RDWR);
    c->cut = true;
}

static void *watchdog_main(void *arg)
{
    http_listener_t *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!l->stopping) {
        double now = si_mono_now();
        for (http_conn_t *c = l->conns; c; c = c->next) {
            if (!c->in_request && !c->cut && now - c->since > l->opts.timeout_s) {
                /* libmicrohttpd sees the end of the stream and closes it; the
                 * fd stays open until its CLOSED notice, which waits for this lock */
                shutdown(c->fd, SHUT_RDWR);
                c->cut = true;
            }
            if (c->receiving && !c->cut && l->opts.min_body_rate)
                check_body_rate(l, c, now);
        }
        struct timespec until = si_wall_deadline(WATCHDOG_PERIOD_MS / 1000.0);
        pthread_cond_timedwait(&l->cv, &l->mu, &until);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    http_listener_t *l = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        http_conn_t *c = info ? calloc(1, sizeof(*c)) : NULL;
        if (!c)
            return;
        c->fd = info->connect_fd;
        c->since = si_mono_now();
        pthread_mutex_lock(&l->mu);
        c->next = l->conns;
        if (l->conns)
            l->conns->prev = c;
        l->conns = c;
        pthread_mutex_unlock(&l->mu);
        *socket_context = c;
        return;
    }
    http_conn_t *c = *socket_context;
    if (!c)
        return;
    pthread_mutex_lock(&l->mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        l->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&l->mu);
    free(c);
    *socket_context = NULL;
}

static http_conn_t *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

void *http_listener_conn_memo(struct MHD_Connection *conn, size_t size)
{
    http_conn_t *c = size <= HTTP_CONN_MEMO_MAX ? conn_of(conn) : NULL;
    return c ? c->memo : NULL;
}

void http_listener_body_begins(http_listener_t *l, struct MHD_Connection *conn,
                               const char *what)
{
    http_conn_t *c = conn_of(conn);
    if (!c)
        return;
    pthread_mutex_lock(&l->mu);
    if (!c->receiving) {
        atomic_store(&c->body_bytes, 0);
        c->window_bytes = 0;
        c->window_since = si_mono_now();
        snprintf(c->what, sizeof(c->what), "%s", what);
    }
    c->receiving = true;
    pthread_mutex_unlock(&l->mu);
}

/* The request's headers are in (in_request) or it is over; mu not held. */
static void mark_in_request(http_listener_t *l, http_conn_t *c, bool in_request)
{
    pthread_mutex_lock(&l->mu);
    c->in_request = in_request;
    if (!in_request)
        c->receiving = false;
    c->since = si_mono_now();
    pthread_mutex_unlock(&l->mu);
}

/* libmicrohttpd calls this once the headers are in (no body data), for
 * each piece of the body, and once after the body (no data): the first
 * call starts the request for the watchdog, the pieces count towards the
 * body's rate, the last call ends it. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    http_listener_t *l = cls;
    http_conn_t *c = conn_of(conn);
    if (c && !c->in_request) {
        mark_in_request(l, c, true);
    } else if (c && *upload_data_size) {
        atomic_fetch_add(&c->body_bytes, *upload_data_size);
    } else if (c && c->receiving) {
        pthread_mutex_lock(&l->mu);
        c->receiving = false;
        pthread_mutex_unlock(&l->mu);
    }
    return l->opts.on_request(l->opts.request_arg, conn, url, method, version, upload_data,
                              upload_data_size, con_cls);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    http_listener_t *l = cls;
    http_conn_t *c = conn_of(conn);
    if (c)
        mark_in_request(l, c, false);
    if (l->opts.on_completed)
        l->opts.on_completed(l->opts.completed_arg, conn, con_cls, toe);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    http_listener_t *l = cls;
    char text[512];
    vsnprintf(text, sizeof(text), fmt, ap);
    size_t n = strlen(text);
    while (n && text[n - 1] == '\n')
        text[--n] = '\0';
    si_log(l->opts.log, SI_LOG_WARNING, "%s: libmicrohttpd: %s", l->name, text);
}

int http_listen_tcp(const char *name, const char *bind_addr, uint16_t port, uint16_t *bound,
                    si_error_t *err)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, bind_addr, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        sslen = sizeof(*v4);
    } else if (inet_pton(AF_INET6, bind_addr, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        sslen = sizeof(*v6);
    } else {
        return si_errprintf(err, "%s: bind address '%s' is not a numeric IPv4 or IPv6 address",
                            name, bind_addr);
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return si_errprintf(err, "%s: socket: %s", name, strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, sslen) < 0 || listen(fd, SOMAXCONN) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return si_errprintf(err, "%s: cannot listen on %s port %u: %s", name, bind_addr,
                            (unsigned)port, strerror(e));
    }
    struct sockaddr_storage got;
    socklen_t glen = sizeof(got);
    getsockname(fd, (struct sockaddr *)&got, &glen);
    *bound = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                            : ((struct sockaddr_in6 *)&got)->sin6_port);
    return fd;
}

http_listener_t *http_listener_start(const http_listener_opts_t *opts, si_error_t *err)
{
    http_listener_t *l = calloc(1, sizeof(*l));
    if (!l) {
        close(opts->listen_fd);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    l->opts = *opts;
    snprintf(l->name, sizeof(l->name), "%s", opts->name ? opts->name : "http");
    snprintf(l->rate_key, sizeof(l->rate_key), "%s",
             opts->min_body_rate_key ? opts->min_body_rate_key : "the minimum body rate");
    l->opts.name = l->name;
    l->opts.min_body_rate_key = l->rate_key;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_AUTO;
    if (opts->thread_per_connection)
        flags |= MHD_USE_THREAD_PER_CONNECTION;
    else if (opts->allow_suspend)
        flags |= MHD_ALLOW_SUSPEND_RESUME;
    struct MHD_OptionItem o[20];
    size_t n = 0;
    if (opts->tls_cert) {
        flags |= MHD_USE_TLS;
        o[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)opts->tls_key};
        o[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)opts->tls_cert};
    }
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, l};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, opts->listen_fd, NULL};
    if (opts->on_uri)
        o[n++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)opts->on_uri,
                                         opts->uri_arg};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, l};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, l};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, opts->timeout_s, NULL};
    if (opts->memory_limit)
        o[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                         (intptr_t)opts->memory_limit, NULL};
    if (!opts->thread_per_connection && opts->threads > 1)
        o[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, opts->threads, NULL};
    if (opts->max_connections)
        o[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, opts->max_connections,
                                         NULL};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    l->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, l, MHD_OPTION_ARRAY, o,
                              MHD_OPTION_END);
    if (!l->mhd) {
        close(opts->listen_fd);
        si_errprintf(err, "%s: libmicrohttpd did not start", l->name);
        goto error;
    }
    if (opts->timeout_s) {
        if (pthread_create(&l->watchdog, NULL, watchdog_main, l) != 0) {
            si_errprintf(err, "%s: cannot start the connection watchdog thread", l->name);
            goto error;
        }
        l->watchdog_started = true;
    }
    return l;
error:
    http_listener_stop(l);
    return NULL;
}

void http_listener_stop(http_listener_t *l)
{
    if (!l)
        return;
    if (l->watchdog_started)
        si_thread_stop(l->watchdog, &l->mu, &l->cv, &l->stopping);
    if (l->mhd)
        MHD_stop_daemon(l->mhd);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}
