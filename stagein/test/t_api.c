/* The control API's routes (api.h) against a fake stageind on a Unix socket
 * that records each request's line, body and headers: every typed call
 * sends the method and path it names, ids and names escaped. */
#define _GNU_SOURCE
#include "config.h"

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
        pthread_mutex_unlock(&f->lock);
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

int main(void)
{
    fake_t f = {.lock = PTHREAD_MUTEX_INITIALIZER};
    char dir[] = "/tmp/t_api.XXXXXX", sock[128], endpoint[160];
    if (!mkdtemp(dir))
        BAIL_OUT("mkdtemp");
    snprintf(sock, sizeof(sock), "%s/stageind.sock", dir);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
    f.listener = socket(AF_UNIX, SOCK_STREAM, 0);
    if (f.listener < 0 || bind(f.listener, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(f.listener, 8) < 0)
        BAIL_OUT("cannot listen on %s", sock);
    pthread_t t;
    pthread_create(&t, NULL, serve, &f);

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
    shutdown(f.listener, SHUT_RDWR);
    close(f.listener);
    pthread_join(t, NULL);
    unlink(sock);
    rmdir(dir);
    return done_testing();
}
