/* Control-API throughput: stage requests/s and status polls/s through the
 * real HTTP layer, handlers and catalog (Unix socket, SO_PEERCRED identity,
 * one keep-alive connection per client thread); then the same status polls
 * with a bearer token (ES256, verified on every request), side by side.
 *   control_api [--quick] [--json] [--clients N] [--files N] */
#include "config.h"

#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "catalog/catalog.h"
#include "common/clock.h"
#include "common/table.h"
#include "daemon/control/control.h"
#include "daemon/control/token.h"
#include "daemon/http/server.h"

typedef struct {
    const char *sock;
    int requests;          /* stage requests per client */
    int polls;             /* status polls per client */
    char (*ids)[40];       /* this client's request ids */
    const char *auth;      /* "Authorization: Bearer ..." for the polls, or NULL */
    bool polls_only;       /* the ids are there from a run before */
    int failures;
    double stage_s, poll_s;
} client_t;

/* One request on a keep-alive connection; the body of the answer in buf. */
static int exchange(int fd, const char *method, const char *path, const char *body,
                    const char *auth, char *buf, size_t size)
{
    char req[4096];
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: bench\r\n%s%sContent-Length: %zu\r\n\r\n%s", method,
                     path, auth ? auth : "", auth ? "\r\n" : "", body ? strlen(body) : 0,
                     body ? body : "");
    if (write(fd, req, (size_t)n) != n)
        return -1;
    size_t got = 0;
    char *end = NULL;
    while (!end) {
        ssize_t r = read(fd, buf + got, size - 1 - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
        buf[got] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    int status = 0;
    sscanf(buf, "HTTP/1.1 %d", &status);
    const char *cl = strcasestr(buf, "Content-Length:");
    size_t want = cl ? strtoul(cl + 15, NULL, 10) : 0;
    size_t head = (size_t)(end + 4 - buf);
    while (got < head + want) {
        ssize_t r = read(fd, buf + got, size - 1 - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    buf[head + want] = '\0';
    memmove(buf, buf + head, want + 1);
    return status;
}

static void *client_run(void *arg)
{
    client_t *c = arg;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", c->sock);
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        c->failures = c->requests + c->polls;
        return NULL;
    }
    static char buf[1 << 20];
    char *mine = malloc(sizeof(buf));
    double t0 = si_mono_now();
    for (int i = 0; i < c->requests && !c->polls_only; i++) {
        if (exchange(fd, "POST", "/api/v1/stage", "{\"datasets\":[\"bench\"]}", NULL, mine,
                     sizeof(buf)) != 201) {
            c->failures++;
            continue;
        }
        json_t *j = json_loads(mine, 0, NULL);
        snprintf(c->ids[i], sizeof(c->ids[i]), "%s", json_string_value(json_object_get(j, "requestId")));
        json_decref(j);
    }
    double t1 = si_mono_now();
    for (int i = 0; i < c->polls; i++) {
        char path[80];
        snprintf(path, sizeof(path), "/api/v1/stage/%s", c->ids[i % c->requests]);
        if (exchange(fd, "GET", path, NULL, c->auth, mine, sizeof(buf)) != 200)
            c->failures++;
    }
    c->stage_s = t1 - t0;
    c->poll_s = si_mono_now() - t1;
    free(mine);
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    bool json = false, quick = false;
    int clients = 4, files = 100;
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"quick", no_argument, NULL, 'q'},
                                         {"clients", required_argument, NULL, 'c'},
                                         {"files", required_argument, NULL, 'f'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o == 'j')
            json = true;
        else if (o == 'q')
            quick = true;
        else if (o == 'c')
            clients = atoi(optarg);
        else if (o == 'f')
            files = atoi(optarg);
        else if (o == 'h')
            return printf("usage: control_api [--quick] [--json] [--clients N] [--files N]\n"), 0;
        else
            return 2;
    }
    if (clients < 1 || clients > 64 || files < 1 || files > 100000) {
        fprintf(stderr, "control_api: --clients 1..64, --files 1..100000\n");
        return 2;
    }
    int requests = quick ? 100 : 1000, polls = quick ? 500 : 5000;

    si_error_t err;
    char dir[] = "/tmp/control_api.XXXXXX", path[256], sock[256];
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof(path), "%s/catalog.db", dir);
    snprintf(sock, sizeof(sock), "%s/ctl.sock", dir);
    catalog_t *cat = catalog_open(path, CATALOG_CREATE, &err);
    if (!cat) {
        fprintf(stderr, "control_api: %s\n", err.text);
        return 1;
    }
    /* one dataset of `files` objects */
    catalog_volume_t v = {.label = "B00001", .media = "LTO-9", .library = "sim", .state = "online"};
    int64_t vol;
    catalog_volume_ensure(cat, &v, &vol, &err);
    char *manifest = NULL;
    size_t mlen = 0;
    FILE *m = open_memstream(&manifest, &mlen);
    catalog_begin(cat, &err);
    for (int i = 0; i < files; i++) {
        char key[32];
        snprintf(key, sizeof(key), "f/%06d", i);
        catalog_object_t obj = {.bucket = "bench", .key = key, .size = 1000000};
        int64_t id;
        catalog_object_put(cat, &obj, &id, &err);
        catalog_copy_t cp = {.object_id = id, .copy = 1, .volume = "B00001",
                             .position = (uint64_t)i * 1000000, .length = 1000000};
        catalog_copy_put(cat, &cp, &err);
        fprintf(m, "bench/%s\n", key);
    }
    catalog_commit(cat, &err);
    fclose(m);
    FILE *in = fmemopen(manifest, mlen, "r");
    catalog_dataset_attrs_t attrs = {.name = "bench", .owner_uid = getuid(),
                                     .owner_gid = getgid(), .mode = 0644};
    catalog_import_stats_t stats;
    if (catalog_import_manifest(cat, &attrs, "bench", in, &stats, &err) < 0) {
        fprintf(stderr, "control_api: %s\n", err.text);
        return 1;
    }
    fclose(in);
    free(manifest);

    char key_path[300];
    snprintf(key_path, sizeof(key_path), "%s/token.key", dir);
    control_opts_t co = {.cat = cat, .peercred = true, .pin_lifetime_default = 3600,
                         .pin_lifetime_max = 86400, .token_key_path = key_path};
    http_server_opts_t ho = {.body_limit = 1 << 20, .timeout_s = 60, .threads = 4, .name = "bench"};
    control_t *ctl = control_new(&co, &err);
    http_server_t *http = ctl ? http_server_new(&ho, &err) : NULL;
    if (!http || control_routes(ctl, http, &err) < 0 ||
        http_server_listen_unix(http, sock, 0600, &err) < 0 || http_server_start(http, &err) < 0) {
        fprintf(stderr, "control_api: %s\n", err.text);
        return 1;
    }

    client_t *cs = calloc((size_t)clients, sizeof(*cs));
    pthread_t *th = calloc((size_t)clients, sizeof(*th));
    double t0 = si_mono_now();
    for (int i = 0; i < clients; i++) {
        cs[i] = (client_t){.sock = sock, .requests = requests / clients, .polls = polls / clients};
        cs[i].ids = calloc((size_t)cs[i].requests, sizeof(*cs[i].ids));
        pthread_create(&th[i], NULL, client_run, &cs[i]);
    }
    double stage_s = 0, poll_s = 0;
    int failures = 0, done_requests = 0, done_polls = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
        stage_s = stage_s > cs[i].stage_s ? stage_s : cs[i].stage_s;
        poll_s = poll_s > cs[i].poll_s ? poll_s : cs[i].poll_s;
        failures += cs[i].failures;
        cs[i].failures = 0;
        done_requests += cs[i].requests;
        done_polls += cs[i].polls;
    }
    double wall = si_mono_now() - t0;

    /* the same polls with a bearer token stageind signed (ES256) */
    EVP_PKEY *key = token_key_load(key_path, &err);
    char *token = key ? token_sign(key, CONTROL_TOKEN_ISSUER, getuid(), getgid(),
                                   "storage.stage:/ storage.read:/", 3600, time(NULL), &err)
                      : NULL;
    char auth[2048];
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token ? token : "");
    free(token);
    EVP_PKEY_free(key);
    for (int i = 0; i < clients; i++) {
        cs[i].auth = auth;
        cs[i].polls_only = true;
        pthread_create(&th[i], NULL, client_run, &cs[i]);
    }
    double bearer_s = 0;
    for (int i = 0; i < clients; i++) {
        pthread_join(th[i], NULL);
        bearer_s = bearer_s > cs[i].poll_s ? bearer_s : cs[i].poll_s;
        failures += cs[i].failures;
        free(cs[i].ids);
    }
    http_server_free(http);
    control_free(ctl);
    catalog_close(cat);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "control_api: cleanup of %s failed\n", dir);

    double rps = done_requests / stage_s, pps = done_polls / poll_s, bps = done_polls / bearer_s;
    if (json) {
        printf("{\"clients\":%d,\"files_per_request\":%d,\"stage_requests\":%d,"
               "\"status_polls\":%d,\"stage_requests_per_s\":%.1f,\"status_polls_per_s\":%.1f,"
               "\"bearer_status_polls_per_s\":%.1f,\"bearer_over_peercred\":%.3f,"
               "\"failures\":%d,\"wall_s\":%.3f}\n",
               clients, files, done_requests, done_polls, rps, pps, bps, bps / pps, failures,
               wall);
    } else {
        static const si_column_t cols[] = {{"operation", SI_COL_STR}, {"count", SI_COL_INT},
                                           {"seconds", SI_COL_REAL}, {"per_s", SI_COL_REAL}};
        si_table_t *t = si_table_new(cols, 4);
        si_table_row(t);
        si_table_str(t, "stage request");
        si_table_int(t, done_requests);
        si_table_real(t, stage_s);
        si_table_real(t, rps);
        si_table_row(t);
        si_table_str(t, "status poll");
        si_table_int(t, done_polls);
        si_table_real(t, poll_s);
        si_table_real(t, pps);
        si_table_row(t);
        si_table_str(t, "status poll, bearer ES256");
        si_table_int(t, done_polls);
        si_table_real(t, bearer_s);
        si_table_real(t, bps);
        si_table_print(t, stdout, false);
        si_table_free(t);
        printf("%d clients, %d files per request, %d failures; bearer/peercred polls %.2f\n",
               clients, files, failures, bps / pps);
    }
    return failures ? 1 : 0;
}
