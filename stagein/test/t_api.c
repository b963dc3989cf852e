/* The control API's routes (api.h) against a fake stageind on a Unix socket
 * that records each request's line, body and headers: every typed call
 * sends the method and path it names, ids and names escaped. */
#define _GNU_SOURCE
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/tap.h"
#include "stagein/api.h"

#define SEEN_MAX 8192
#define BAIL_OUT(...) (printf("Bail out! " __VA_ARGS__), putchar('\n'), exit(1))

typedef struct {
    int listener;
    bool hang_up;              /* read the request, close without a byte of answer */
    int requests;              /* requests read */
    char seen[SEEN_MAX];       /* the last request: its head, then its body */
    pthread_mutex_t lock;
} fake_t;

/* One request per connection (the answer closes it): head and body kept. */
static void *serve(void *arg)
{
    fake_t *f = arg;
    for (;;) {
        int s = accept(f->listener, NULL, NULL);
        if (s < 0)
            return NULL;
        char buf[SEEN_MAX];
        size_t n = 0;
        char *end = NULL;
        long want = 0;
        for (;;) {
            ssize_t got = read(s, buf + n, sizeof(buf) - 1 - n);
            if (got <= 0)
                break;
            n += (size_t)got;
            buf[n] = '\0';
            if (!end && (end = strstr(buf, "\r\n\r\n"))) {
                const char *cl = strcasestr(buf, "\r\ncontent-length:");
                want = cl && cl < end ? strtol(cl + 17, NULL, 10) : 0;
            }
            if (end && (long)(n - (size_t)(end + 4 - buf)) >= want)
                break;
        }
        pthread_mutex_lock(&f->lock);
        snprintf(f->seen, sizeof(f->seen), "%s", buf);
        f->requests++;
        pthread_mutex_unlock(&f->lock);
        if (f->hang_up) {
            close(s);
            continue;
        }
        static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                    "Content-Length: 12\r\nConnection: close\r\n\r\n{\"ok\": true}";
        if (write(s, reply, sizeof(reply) - 1) < 0)
            perror("t_api: write");
        close(s);
    }
}

/* The request line and whether the request holds text (its head or body). */
static void sent(fake_t *f, const char *desc, int rc, const char *line, const char *has)
{
    pthread_mutex_lock(&f->lock);
    size_t n = strlen(line);
    bool match = rc == 0 && strncmp(f->seen, line, n) == 0 && f->seen[n] == ' ' &&
                 (!has || strstr(f->seen, has));
    pthread_mutex_unlock(&f->lock);
    ok(match, "%s: %s", desc, line);
    if (!match)
        diag("sent: %.200s", f->seen);
}

/* f serving on a Unix socket at path, in a thread. */
static pthread_t fake_start(fake_t *f, const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    f->listener = socket(AF_UNIX, SOCK_STREAM, 0);
    if (f->listener < 0 || bind(f->listener, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(f->listener, 8) < 0)
        BAIL_OUT("cannot listen on %s", path);
    pthread_t t;
    pthread_create(&t, NULL, serve, f);
    return t;
}

static void fake_stop(fake_t *f, pthread_t t, const char *path)
{
    shutdown(f->listener, SHUT_RDWR);
    close(f->listener);
    pthread_join(t, NULL);
    unlink(path);
}

static int requests_of(fake_t *f)
{
    pthread_mutex_lock(&f->lock);
    int n = f->requests;
    pthread_mutex_unlock(&f->lock);
    return n;
}

/* A loopback TCP port whose accept queue is full: a connect to it gets no
 * answer (the SYN is dropped), as from a host that is down. -1 if the
 * queue could not be filled. */
static int full_listener(int *listener, int fillers[4])
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    *listener = socket(AF_INET, SOCK_STREAM, 0);
    if (*listener < 0 || bind(*listener, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(*listener, 0) < 0 || getsockname(*listener, (struct sockaddr *)&a, &len) < 0)
        return -1;
    for (int i = 0; i < 4; i++) {
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (fillers[i] >= 0)
            connect(fillers[i], (struct sockaddr *)&a, sizeof(a));
    }
    usleep(100 * 1000);
    return ntohs(a.sin_port);
}

/* Several endpoints: connection errors go on to the next; a request that
 * reached one is not sent twice unless it is a GET; the endpoint that
 * answered is tried first afterwards. */
static void test_fail_over(const char *dir, fake_t *live, const char *live_sock)
{
    fake_t closer = {.lock = PTHREAD_MUTEX_INITIALIZER, .hang_up = true};
    char closer_sock[128], list[512];
    snprintf(closer_sock, sizeof(closer_sock), "%s/closer.sock", dir);
    pthread_t t = fake_start(&closer, closer_sock);
    si_error_t err;
    client_reply_t r;
    client_opts_t o = {.endpoint = list, .source = "client.endpoints", .timeout_s = 10};

    /* a missing socket first, then a live one */
    snprintf(list, sizeof(list), "unix:%s/missing.sock,unix:%s", dir, live_sock);
    client_t *c = client_new(&o, &err);
    int before = requests_of(live);
    int rc = c ? api_stage_submit(c, "{\"datasets\":[\"d\"]}", &r, &err) : -1;
    ok(rc == 0 && requests_of(live) == before + 1,
       "no socket at the first endpoint: the stage request goes to the second");
    client_reply_free(&r);
    client_free(c);

    /* the first hangs up before answering: a GET goes on, a POST does not */
    snprintf(list, sizeof(list), "unix:%s,unix:%s", closer_sock, live_sock);
    c = client_new(&o, &err);
    before = requests_of(live);
    rc = c ? api_stage_submit(c, "{\"datasets\":[\"d\"]}", &r, &err) : 0;
    ok(rc < 0 && requests_of(&closer) == 1 && requests_of(live) == before &&
           strstr(err.text, closer_sock) && strstr(err.text, "not sent to another endpoint"),
       "a stage request that reached an endpoint is not sent to the next: %s", err.text);
    client_reply_free(&r);
    rc = c ? api_queue(c, &r, &err) : -1;
    ok(rc == 0 && requests_of(&closer) == 2 && requests_of(live) == before + 1,
       "a GET whose connection broke before any answer goes to the next endpoint");
    client_reply_free(&r);
    rc = c ? api_queue(c, &r, &err) : -1;
    client_reply_free(&r);
    int rc2 = c ? api_stage_submit(c, "{\"datasets\":[\"d\"]}", &r, &err) : -1;
    ok(rc == 0 && rc2 == 0 && requests_of(&closer) == 2 && requests_of(live) == before + 3,
       "the endpoint that answered is used first from then on");
    client_reply_free(&r);
    client_free(c);

    /* an upload starts again from its beginning at the next endpoint */
    snprintf(list, sizeof(list), "unix:%s/missing.sock,unix:%s", dir, live_sock);
    c = client_new(&o, &err);
    FILE *body = tmpfile();
    fputs("hello", body);
    rewind(body);
    api_push_file_t file = {.dataset = "d", .key = "k", .body = body, .size = 5,
                            .checksum = "sha256:00", .mtime = 1};
    rc = c ? api_push_file(c, &file, &r, &err) : -1;
    pthread_mutex_lock(&live->lock);
    bool whole = strstr(live->seen, "\r\n\r\nhello") != NULL;
    pthread_mutex_unlock(&live->lock);
    ok(rc == 0 && whole, "a push's file goes whole to the second endpoint");
    client_reply_free(&r);
    fclose(body);
    client_free(c);

    /* a host that does not answer: the connect timeout, then the next */
    int listener = -1, fillers[4] = {-1, -1, -1, -1};
    int port = full_listener(&listener, fillers);
    snprintf(list, sizeof(list), "http://127.0.0.1:%d,unix:%s", port, live_sock);
    o.connect_timeout_s = 1;
    c = client_new(&o, &err);
    before = requests_of(live);
    client_request_t post = {.method = "POST", .path = "/api/v1/stage", .json_body = "{}",
                             .anonymous = true};
    rc = c && port > 0 ? client_send(c, &post, &r, &err) : -1;
    ok(rc == 0 && requests_of(live) == before + 1,
       "no connection within client.connect_timeout: the next endpoint%s%s",
       rc ? ": " : "", rc ? err.text : "");
    client_reply_free(&r);
    client_free(c);
    for (int i = 0; i < 4; i++)
        if (fillers[i] >= 0)
            close(fillers[i]);
    if (listener >= 0)
        close(listener);
    fake_stop(&closer, t, closer_sock);
}

int main(void)
{
    fake_t f = {.lock = PTHREAD_MUTEX_INITIALIZER};
    char dir[] = "/tmp/t_api.XXXXXX", sock[128], endpoint[160];
    if (!mkdtemp(dir))
        BAIL_OUT("mkdtemp");
    snprintf(sock, sizeof(sock), "%s/stageind.sock", dir);
    pthread_t t = fake_start(&f, sock);

    si_error_t err;
    snprintf(endpoint, sizeof(endpoint), "unix:%s", sock);
    client_opts_t o = {.endpoint = endpoint, .source = "test", .timeout_s = 10};
    client_t *c = client_new(&o, &err);
    if (!c)
        BAIL_OUT("client_new: %s", err.text);
    client_reply_t r;
#define CALL(expr) (rc = (expr), client_reply_free(&r), rc)
    int rc;
    const char *id = "0a1b-2c3d";
    sent(&f, "submit", CALL(api_stage_submit(c, "{\"datasets\":[\"d\"]}", &r, &err)),
         "POST /api/v1/stage", "{\"datasets\":[\"d\"]}");
    sent(&f, "status", CALL(api_stage_status(c, id, &r, &err)), "GET /api/v1/stage/0a1b-2c3d",
         NULL);
    sent(&f, "status escapes the id", CALL(api_stage_status(c, "a/b c", &r, &err)),
         "GET /api/v1/stage/a%2Fb%20c", NULL);
    sent(&f, "cancel", CALL(api_stage_cancel(c, id, NULL, &r, &err)),
         "POST /api/v1/stage/0a1b-2c3d/cancel", NULL);
    sent(&f, "bind", CALL(api_stage_bind(c, id, "{\"job\": \"7\"}", &r, &err)),
         "POST /api/v1/stage/0a1b-2c3d/job", "{\"job\": \"7\"}");
    sent(&f, "release", CALL(api_release(c, id, "{}", &r, &err)), "POST /api/v1/release/0a1b-2c3d",
         NULL);
    sent(&f, "queue", CALL(api_queue(c, &r, &err)), "GET /api/v1/queue", NULL);
    sent(&f, "every request", CALL(api_requests_all(c, &r, &err)), "GET /api/v1/requests?all=1",
         NULL);
    sent(&f, "push status", CALL(api_push_status(c, id, &r, &err)), "GET /api/v1/push/0a1b-2c3d",
         NULL);
    sent(&f, "token", CALL(api_token(c, "{\"lifetime\":60}", &r, &err)), "POST /api/v1/token",
         "{\"lifetime\":60}");
    sent(&f, "credentials", CALL(api_credentials(c, &r, &err)), "POST /api/v1/credentials", NULL);
    sent(&f, "status page login", CALL(api_ui_login(c, &r, &err)), "POST /api/v1/ui/login", NULL);
    sent(&f, "metrics", CALL(api_metrics(c, &r, &err)), "GET /metrics", NULL);

    FILE *body = tmpfile();
    fputs("hello", body);
    rewind(body);
    api_push_file_t file = {.dataset = "my set", .key = "a/b&c", .push = "", .mode = NULL,
                            .body = body, .size = 5, .checksum = "sha256:00", .mtime = 42};
    sent(&f, "push a file: dataset and key escaped, no push yet",
         CALL(api_push_file(c, &file, &r, &err)), "POST /api/v1/push?dataset=my%20set&key=a%2Fb%26c",
         "X-Stagein-Checksum: sha256:00");
    rewind(body);
    file.push = id;
    file.mode = "replace";
    sent(&f, "into a push, with a mode", CALL(api_push_file(c, &file, &r, &err)),
         "POST /api/v1/push?dataset=my%20set&key=a%2Fb%26c&push=0a1b-2c3d&mode=replace",
         "X-Stagein-Mtime: 42");
    fclose(body);

    rc = api_queue(c, &r, &err);
    ok(rc == 0 && r.json && json_is_true(json_object_get(r.json, "ok")) &&
           strcmp(r.request, "GET /api/v1/queue") == 0,
       "the reply: the answer's JSON, the request named");
    client_reply_free(&r);
    client_free(c);
    test_fail_over(dir, &f, sock);
    fake_stop(&f, t, sock);
    rmdir(dir);
    return done_testing();
}
