/* The window of parallel requests against a small S3 stand-in on loopback
 * (a thread per connection, keep-alive): ranges landing in order through
 * si_s3_job_land, the caller's check (again-now, failed), the default
 * judgement of an error answer (its status and code kept), the progress
 * hook, and how a span is cut into jobs. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/aws/s3window.h"
#include "common/tap.h"

#define OBJECT_SIZE 100000u

/* The stand-in: its listening socket, the requests it answered, and its
 * threads (joined before the test exits: a thread still serving while the
 * process exits has crashed it under load, in the libraries' finalizers). */
#define MAX_CONNS 64
typedef struct {
    int ls;
    atomic_int requests;
    pthread_t acceptor;
    pthread_t conns[MAX_CONNS];
    int fds[MAX_CONNS]; /* -1 once its thread closed it (under mu) */
    int nconns;         /* written by the acceptor only, read after it is joined */
    pthread_mutex_t mu;
} server_t;

typedef struct {
    server_t *srv;
    int fd;
    int slot; /* its place in srv->fds */
} conn_t;

/* The byte at offset i of the stand-in's object. */
static unsigned char byte_at(uint64_t i)
{
    return (unsigned char)(i * 7 + i / 251);
}

static void send_all(int fd, const void *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        p = (const char *)p + w;
        n -= (size_t)w;
    }
}

/* One connection: GET /b/missing answers 404 NoSuchKey, any other GET the
 * range asked for (206). */
static void *serve(void *arg)
{
    conn_t *conn = arg;
    int fd = conn->fd;
    char req[8192];
    size_t have = 0;
    for (;;) {
        char *end;
        while (!(end = memmem(req, have, "\r\n\r\n", 4))) {
            ssize_t r = recv(fd, req + have, sizeof(req) - 1 - have, 0);
            if (r <= 0)
                goto out;
            have += (size_t)r;
        }
        size_t used = (size_t)(end + 4 - req);
        req[have] = '\0';
        atomic_fetch_add(&conn->srv->requests, 1);
        char head[512];
        if (strncmp(req, "GET /b/missing", 14) == 0) {
            const char *body = "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code>"
                               "<Message>no such key</Message></Error>";
            int n = snprintf(head, sizeof(head), "HTTP/1.1 404 Not Found\r\nContent-Length: "
                             "%zu\r\nContent-Type: application/xml\r\n\r\n", strlen(body));
            send_all(fd, head, (size_t)n);
            send_all(fd, body, strlen(body));
        } else {
            unsigned long long a = 0, b = OBJECT_SIZE - 1;
            const char *range = strcasestr(req, "\r\nRange: bytes=");
            if (range)
                sscanf(range + 15, "%llu-%llu", &a, &b);
            int n = snprintf(head, sizeof(head), "HTTP/1.1 206 Partial Content\r\n"
                             "Content-Length: %llu\r\nContent-Range: bytes %llu-%llu/%u\r\n"
                             "ETag: \"e%llu\"\r\n\r\n", b - a + 1, a, b, OBJECT_SIZE, a);
            send_all(fd, head, (size_t)n);
            unsigned char *body = malloc(b - a + 1);
            for (unsigned long long i = a; i <= b; i++)
                body[i - a] = byte_at(i);
            send_all(fd, body, b - a + 1);
            free(body);
        }
        memmove(req, req + used, have - used);
        have -= used;
    }
out:
    pthread_mutex_lock(&conn->srv->mu);
    conn->srv->fds[conn->slot] = -1;
    close(fd);
    pthread_mutex_unlock(&conn->srv->mu);
    free(conn);
    return NULL;
}

static void *accept_loop(void *arg)
{
    server_t *srv = arg;
    while (srv->nconns < MAX_CONNS) {
        int fd = accept(srv->ls, NULL, NULL);
        if (fd < 0)
            return NULL;
        conn_t *conn = malloc(sizeof(*conn));
        *conn = (conn_t){srv, fd, srv->nconns};
        pthread_mutex_lock(&srv->mu);
        srv->fds[srv->nconns] = fd;
        pthread_mutex_unlock(&srv->mu);
        if (pthread_create(&srv->conns[srv->nconns], NULL, serve, conn) == 0)
            srv->nconns++;
    }
    return NULL;
}

/* Ends the stand-in: the acceptor, then every connection's thread. */
static void stop_server(server_t *srv)
{
    shutdown(srv->ls, SHUT_RDWR);
    pthread_join(srv->acceptor, NULL);
    close(srv->ls);
    pthread_mutex_lock(&srv->mu);
    for (int i = 0; i < srv->nconns; i++)
        if (srv->fds[i] >= 0)
            shutdown(srv->fds[i], SHUT_RDWR); /* its recv returns: its thread closes it */
    pthread_mutex_unlock(&srv->mu);
    for (int i = 0; i < srv->nconns; i++)
        pthread_join(srv->conns[i], NULL);
}

static int start_server(server_t *srv)
{
    int ls = srv->ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 16) < 0 ||
        getsockname(ls, (struct sockaddr *)&sa, &len) < 0)
        return -1;
    if (pthread_create(&srv->acceptor, NULL, accept_loop, srv) != 0)
        return -1;
    return ntohs(sa.sin_port);
}

typedef struct {
    const char *key;
    unsigned char *dst;
    size_t order[64], norder;      /* jobs in the order they were handed on */
    int again_left;                /* check: start the next this many answers again */
    bool fail_job1;                /* check: fail job 1 */
    int progress_calls;
} ctx_t;

static int setup(si_s3_window_t *w, size_t j, si_error_t *err)
{
    ctx_t *c = w->arg;
    si_s3_job_t *jb = &w->jobs[j];
    (void)err;
    jb->buf = c->dst + jb->off;
    snprintf(jb->range, sizeof(jb->range), "bytes=%llu-%llu", (unsigned long long)jb->off,
             (unsigned long long)(jb->off + jb->len - 1));
    jb->hdr[0] = (si_http_header_t){"Range", jb->range};
    jb->rq = (si_s3_request_t){.method = "GET", .bucket = "b", .key = c->key,
                               .headers = jb->hdr, .nheaders = 1,
                               .on_data = si_s3_job_land, .arg = jb};
    return 0;
}

static si_s3_answer_t check(si_s3_window_t *w, size_t j, si_error_t *err)
{
    ctx_t *c = w->arg;
    if (c->again_left > 0) {
        c->again_left--;
        return SI_S3_ANSWER_AGAIN;
    }
    if (c->fail_job1 && j == 1) {
        si_errprintf(err, "job 1 refused by the caller");
        return SI_S3_ANSWER_FAILED;
    }
    return SI_S3_ANSWER_DEFAULT;
}

static int done(si_s3_window_t *w, size_t j, si_error_t *err)
{
    ctx_t *c = w->arg;
    (void)j;
    (void)err;
    while (w->flushed < w->njobs && w->jobs[w->flushed].state == SI_S3_JOB_DONE) {
        c->order[c->norder++] = w->flushed;
        w->jobs[w->flushed++].state = SI_S3_JOB_FLUSHED;
    }
    return 0;
}

static void progress(void *arg, int *fd, int *ms)
{
    ctx_t *c = arg;
    c->progress_calls++;
    *fd = -1;
    *ms = 5;
}

/* A window over [0, OBJECT_SIZE) in ranges of 9000 bytes, 3 at a time. */
static int run(si_s3_t *s3, ctx_t *c, _Atomic uint64_t *landed, si_s3_window_t *w,
               si_error_t *err)
{
    size_t n;
    si_s3_job_t *jobs = si_s3_jobs_split(0, OBJECT_SIZE, 9000, &n);
    *w = (si_s3_window_t){.client = s3, .jobs = jobs, .njobs = n, .setup = setup,
                          .check = check, .done = done, .arg = c, .progress = progress,
                          .landed = landed};
    int rc = si_s3_window_run(w, 3, "GET", "b/key", err);
    free(jobs);
    return rc;
}

int main(void)
{
    si_error_t err;
    size_t n;

    si_s3_job_t *jobs = si_s3_jobs_split(10, 30, 8, &n);
    ok(jobs && n == 3 && jobs[0].off == 10 && jobs[0].len == 8 && jobs[1].off == 18 &&
       jobs[2].off == 26 && jobs[2].len == 4, "a span of 20 bytes in jobs of 8: 8, 8, 4");
    free(jobs);
    jobs = si_s3_jobs_split(5, 5, 8, &n);
    ok(jobs && n == 1 && jobs[0].off == 5 && jobs[0].len == 0, "an empty span: one empty job");
    free(jobs);

    server_t srv = {.ls = -1, .mu = PTHREAD_MUTEX_INITIALIZER};
    int port = start_server(&srv);
    if (port < 0) {
        diag("no loopback listener");
        return done_testing();
    }
    char endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", port);
    si_s3_conf_t conf = {.endpoint = endpoint, .region = "us-east-1", .access_key = "AKIDTEST",
                         .secret = "secret"};
    si_s3_t *s3 = si_s3_new(&conf, &err);
    ok(s3 != NULL, "a client of the stand-in");

    unsigned char *dst = calloc(1, OBJECT_SIZE);
    _Atomic uint64_t landed = 0;
    si_s3_window_t w;
    ctx_t c = {.key = "key", .dst = dst, .again_left = 2};
    int rc = run(s3, &c, &landed, &w, &err);
    ok(rc == 0, "12 ranges, 3 at a time: the window succeeds%s%s", rc ? ": " : "",
       rc ? err.text : "");
    bool same = true;
    for (uint64_t i = 0; i < OBJECT_SIZE; i++)
        same = same && dst[i] == byte_at(i);
    ok(same, "every byte landed at its offset");
    bool in_order = c.norder == 12;
    for (size_t i = 0; i < c.norder; i++)
        in_order = in_order && c.order[i] == i;
    ok(in_order, "the jobs were handed on in order, each once");
    /* the two answers started again were landed too, then zeroed */
    is_int(atomic_load(&srv.requests), 14,
           "two answers started again by the check: 14 requests");
    /* the first two answers are of the first three jobs, 9000 bytes each */
    is_int(atomic_load(&landed), OBJECT_SIZE + 2 * 9000,
           "landed counts every byte landed, the two answers started again too");
    ok(c.progress_calls > 0, "the progress hook ran while the window waited");
    is_int(w.failed_status, 0, "no failure recorded");

    ctx_t f = {.key = "key", .dst = dst, .fail_job1 = true};
    rc = run(s3, &f, NULL, &w, &err);
    ok(rc < 0 && strstr(err.text, "job 1 refused by the caller"),
       "the check fails the window with its error: %s", err.text);
    is_int(w.failed_status, 206, "... the failing answer's status kept");

    ctx_t m = {.key = "missing", .dst = dst};
    rc = run(s3, &m, NULL, &w, &err);
    ok(rc < 0 && strstr(err.text, "GET b/key (bytes ") &&
       strstr(err.text, "404"), "a 404 fails the window, saying which range: %s", err.text);
    is_int(w.failed_status, 404, "... its status kept");
    is_str(w.failed_code, "NoSuchKey", "... and its S3 code");

    free(dst);
    si_s3_free(s3);
    stop_server(&srv);
    return done_testing();
}
