/* Starts the control API's HTTP server on a free TCP port and a Unix socket
 * and talks raw HTTP/1.1 to it, a slow client included. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "common/tap.h"
#include "daemon/http/server.h"

static void hello(http_request_t *req, void *arg)
{
    (void)arg;
    const http_peer_t *peer = http_request_peer(req);
    http_respond_json(req, 200, json_pack("{s:s, s:b, s:i, s:s?}", "name",
                                          http_request_param(req, "name"), "unix",
                                          peer->is_unix, "uid", peer->have_cred ? (int)peer->uid : -1,
                                          "q", http_request_query(req, "q")));
}

static void echo(http_request_t *req, void *arg)
{
    (void)arg;
    size_t len;
    const char *body = http_request_body(req, &len);
    const char *hdr = http_request_header(req, "x-test");
    http_respond_json(req, 201, json_pack("{s:i, s:s%, s:s?}", "length", (int)len, "body", body,
                                          len, "x-test", hdr));
}

static void silent(http_request_t *req, void *arg)
{
    (void)req;
    (void)arg;
}

/* Sends raw, reads the whole answer (the request asks to close). */
static char *exchange(int fd, const char *raw, size_t rawlen)
{
    static char buf[65536];
    size_t off = 0;
    while (off < rawlen) {
        ssize_t n = write(fd, raw + off, rawlen - off);
        if (n <= 0)
            break;
        off += (size_t)n;
    }
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    close(fd);
    return buf;
}

static int connect_tcp(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int connect_unix(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static char *request(int fd, const char *method, const char *path, const char *body)
{
    char raw[8192];
    int n = snprintf(raw, sizeof(raw),
                     "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Test: yes\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, path, body ? strlen(body) : 0, body ? body : "");
    return exchange(fd, raw, (size_t)n);
}

/* Sends a request's headers a byte every 200 ms: whether the server cut the
 * connection (a read of 0, or an error) before they were all sent. */
static bool cut_while_trickling(int fd)
{
    const char *raw = "GET /hello/slow HTTP/1.1\r\nHost: x\r\nX-Padding: "
                      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    bool cut = false;
    /* the last byte is not sent: the headers are never whole */
    for (const char *c = raw; c[1] && !cut; c++) {
        char answer[512];
        if (send(fd, c, 1, MSG_NOSIGNAL) != 1)
            cut = true;
        else if (recv(fd, answer, sizeof(answer), 0) >= 0 || errno != EAGAIN)
            cut = true; /* closed (0), reset, or an answer to headers not yet whole */
    }
    close(fd);
    return cut;
}

static int status_of(const char *resp)
{
    int status = 0;
    sscanf(resp, "HTTP/1.1 %d", &status);
    return status;
}

static json_t *json_of(const char *resp)
{
    const char *body = strstr(resp, "\r\n\r\n");
    return body ? json_loads(body + 4, 0, NULL) : NULL;
}

static const char *json_str(json_t *j, const char *key)
{
    return json_string_value(json_object_get(j, key));
}

int main(void)
{
    si_error_t err;
    char dir[] = "/tmp/t_server.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char sock[256], plain[256];
    snprintf(sock, sizeof(sock), "%s/ctl.sock", dir);
    snprintf(plain, sizeof(plain), "%s/file", dir);

    http_server_opts_t opts = {.body_limit = 64, .timeout_s = 2, .threads = 2, .name = "test"};
    http_server_t *s = http_server_new(&opts, &err);
    ok(s != NULL, "server created");
    ok(http_server_route(s, "GET", "/hello/{name}", hello, NULL, &err) == 0, "route added");
    ok(http_server_route(s, "POST", "/echo", echo, NULL, &err) == 0, "echo route added");
    ok(http_server_route(s, "GET", "/silent", silent, NULL, &err) == 0, "silent route added");
    ok(http_server_route(s, "GET", "bad", silent, NULL, &err) == -1, "bad pattern refused");
    ok(http_server_listen_tcp(s, "localhost", 0, &err) == -1 && strstr(err.text, "numeric"),
       "non-numeric bind address refused: %s", err.text);
    ok(http_server_listen_tcp(s, "127.0.0.1", 0, &err) == 0, "tcp listener on a free port");
    FILE *f = fopen(plain, "w");
    fclose(f);
    ok(http_server_listen_unix(s, plain, 0666, &err) == -1 && strstr(err.text, "not a socket"),
       "regular file at the socket path is not replaced: %s", err.text);
    ok(http_server_listen_unix(s, sock, 0666, &err) == 0, "unix listener");
    struct stat st;
    ok(stat(sock, &st) == 0 && (st.st_mode & 0777) == 0666, "socket mode applied");
    ok(http_server_start(s, &err) == 0, "started: %s", err.text);
    uint16_t port = http_server_port(s);
    ok(port > 0, "bound port reported (%u)", (unsigned)port);

    /* a second server on the same socket path is refused while the first lives */
    http_server_t *s2 = http_server_new(&opts, &err);
    ok(http_server_listen_unix(s2, sock, 0666, &err) == -1 && strstr(err.text, "in use"),
       "live socket not stolen: %s", err.text);
    http_server_free(s2);

    char *resp = request(connect_tcp(port), "GET", "/hello/world?q=1", NULL);
    is_int(status_of(resp), 200, "GET over TCP");
    ok(strstr(resp, "Content-Type: application/json") != NULL, "JSON content type");
    json_t *j = json_of(resp);
    is_str(json_str(j, "name"), "world", "path parameter reaches the handler");
    is_str(json_str(j, "q"), "1", "query argument reaches the handler");
    ok(json_is_false(json_object_get(j, "unix")), "TCP is not unix");
    is_int(json_integer_value(json_object_get(j, "uid")), -1, "no peer credentials over TCP");
    json_decref(j);

    resp = request(connect_unix(sock), "GET", "/hello/u", NULL);
    is_int(status_of(resp), 200, "GET over the Unix socket");
    j = json_of(resp);
    ok(json_is_true(json_object_get(j, "unix")), "unix flag set");
    is_int(json_integer_value(json_object_get(j, "uid")), getuid(), "SO_PEERCRED uid is ours");
    json_decref(j);

    resp = request(connect_tcp(port), "POST", "/echo", "{\"a\":1}");
    is_int(status_of(resp), 201, "POST with a body");
    j = json_of(resp);
    is_int(json_integer_value(json_object_get(j, "length")), 7, "body length");
    is_str(json_str(j, "body"), "{\"a\":1}", "body content");
    is_str(json_str(j, "x-test"), "yes", "request header visible");
    json_decref(j);

    char big[200];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    resp = request(connect_tcp(port), "POST", "/echo", big);
    is_int(status_of(resp), 413, "body over the limit: 413");
    j = json_of(resp);
    ok(json_str(j, "error") && strstr(json_str(j, "error"), "limit of 64 bytes"),
       "413 explains the limit: %s", json_str(j, "error") ? json_str(j, "error") : "(none)");
    json_decref(j);

    /* chunked: no Content-Length, the limit is enforced while reading */
    char chunked[1024];
    int n = snprintf(chunked, sizeof(chunked),
                     "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
                     (unsigned)strlen(big), big);
    resp = exchange(connect_tcp(port), chunked, (size_t)n);
    is_int(status_of(resp), 413, "chunked body over the limit: 413");
    n = snprintf(chunked, sizeof(chunked),
                 "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                 "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
    resp = exchange(connect_tcp(port), chunked, (size_t)n);
    j = json_of(resp);
    ok(status_of(resp) == 201 && json_str(j, "body") && strcmp(json_str(j, "body"), "abcde") == 0,
       "chunked body within the limit is assembled");
    json_decref(j);

    resp = request(connect_tcp(port), "GET", "/nowhere", NULL);
    is_int(status_of(resp), 404, "unknown path: 404");
    j = json_of(resp);
    ok(json_str(j, "error") && strstr(json_str(j, "error"), "GET /nowhere"), "404 names the path");
    json_decref(j);

    resp = request(connect_tcp(port), "DELETE", "/echo", NULL);
    is_int(status_of(resp), 405, "wrong method: 405");
    ok(strstr(resp, "Allow: POST") != NULL, "405 carries Allow");

    resp = request(connect_tcp(port), "GET", "/silent", NULL);
    is_int(status_of(resp), 500, "handler without an answer: 500");

    /* slowloris: headers a byte at a time (each byte resets libmicrohttpd's
     * own timeout); the 100 bytes would take 20 s, the timeout is 2 s */
    ok(cut_while_trickling(connect_tcp(port)), "TCP: a client trickling its headers is cut");
    ok(cut_while_trickling(connect_unix(sock)), "Unix socket: a client trickling its headers is cut");
    resp = request(connect_tcp(port), "GET", "/hello/again", NULL);
    is_int(status_of(resp), 200, "served afterwards");

    http_stats_t stats;
    http_server_stats(s, &stats);
    ok(stats.requests == 10 && stats.status_2xx == 5 && stats.status_4xx == 4 &&
           stats.status_5xx == 1 && stats.body_too_large == 2,
       "stats counted (%llu requests, %llu 4xx)", (unsigned long long)stats.requests,
       (unsigned long long)stats.status_4xx);

    http_server_stop(s);
    ok(access(sock, F_OK) != 0, "socket removed at stop");
    ok(connect_tcp(port) < 0, "TCP port closed at stop");
    http_server_free(s);
    unlink(plain);
    rmdir(dir);
    return done_testing();
}
