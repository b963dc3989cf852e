/* stagein push PATH... --dataset NAME: stage-out through stageind's
 * POST /api/v1/push, one file per call, every file into one push; --wait
 * follows GET /api/v1/push/{id} until the files are DURABLE on tape. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/array.h"
#include "common/checksum.h"
#include "common/clock.h"
#include "common/text.h"
#include "stagein/api.h"
#include "stagein/client_cmd.h"

#define POLL_S 1.0
#define PARALLEL_DEFAULT 4
#define PARALLEL_MAX 64

typedef struct {
    char *path;   /* on this machine */
    char *key;    /* inside the dataset */
} push_entry_t;

typedef struct {
    push_entry_t *v;
    size_t n, cap;
} push_list_t;

static void list_free(push_list_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].path);
        free(l->v[i].key);
    }
    free(l->v);
}

static int list_add(push_list_t *l, const char *path, const char *key, si_error_t *err)
{
    void *v = l->v;
    if (si_array_grow(&v, &l->cap, l->n + 1, sizeof(*l->v)) < 0)
        return si_errprintf(err, "out of memory");
    l->v = v;
    push_entry_t e = {strdup(path), strdup(key)};
    if (!e.path || !e.key) {
        free(e.path);
        free(e.key);
        return si_errprintf(err, "out of memory");
    }
    l->v[l->n++] = e;
    return 0;
}

/* Every regular file under dir, in name order, keyed prefix/relative path;
 * symbolic links to directories are not followed. */
static int walk(push_list_t *l, const char *dir, const char *prefix, si_error_t *err)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        return si_errprintf(err, "%s: %s", dir, strerror(errno));
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        char *path = NULL, *key = NULL;
        struct stat st;
        if (rc < 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
            /* skipped */
        } else if (asprintf(&path, "%s/%s", dir, name) < 0 ||
                   asprintf(&key, "%s/%s", prefix, name) < 0) {
            path = key = NULL;
            rc = si_errprintf(err, "out of memory");
        } else if (lstat(path, &st) < 0) {
            rc = si_errprintf(err, "%s: %s", path, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            rc = walk(l, path, key, err);
        } else if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            rc = list_add(l, path, key, err);
        } else {
            rc = si_errprintf(err, "%s: not a regular file or directory", path);
        }
        free(path);
        free(key);
        free(names[i]);
    }
    free(names);
    return rc;
}

/* A file is keyed by its name; a directory's files by their path below
 * the directory's parent (as cp -r would name them). */
static int collect(push_list_t *l, const char *arg, si_error_t *err)
{
    struct stat st;
    if (stat(arg, &st) < 0)
        return si_errprintf(err, "%s: %s", arg, strerror(errno));
    char *copy = strdup(arg);
    if (!copy)
        return si_errprintf(err, "out of memory");
    size_t len = strlen(copy);
    while (len > 1 && copy[len - 1] == '/')
        copy[--len] = '\0';
    const char *slash = strrchr(copy, '/');
    const char *name = slash ? slash + 1 : copy;
    int rc;
    if (S_ISREG(st.st_mode))
        rc = list_add(l, arg, name, err);
    else if (S_ISDIR(st.st_mode))
        rc = walk(l, copy, *name ? name : "root", err);
    else
        rc = si_errprintf(err, "%s: not a regular file or directory", arg);
    free(copy);
    return rc;
}

/* One file into the push (push_id "" for the first: the answer makes one).
 * The file is read once: hashed as it is sent, its sha256 sent after the
 * body (a trailer), so that stageind refuses the bytes unless they match
 * it; the answer's checksum is checked against it too (an older stageind
 * ignores the trailer). */
static int push_one(client_t *c, const char *dataset, const char *mode, const push_entry_t *e,
                    const char *push_id, client_reply_t *r, si_error_t *err)
{
    memset(r, 0, sizeof(*r));
    FILE *f = fopen(e->path, "rb");
    if (!f)
        return si_errprintf(err, "%s: %s", e->path, strerror(errno));
    struct stat st;
    char checksum[SI_CHECKSUM_TEXT_MAX] = "";
    int rc = -1;
    if (fstat(fileno(f), &st) < 0) {
        si_errprintf(err, "%s: %s", e->path, strerror(errno));
        goto done;
    }
    api_push_file_t file = {.dataset = dataset, .key = e->key, .push = push_id, .mode = mode,
                            .body = f, .size = (int64_t)st.st_size, .sent_checksum = checksum,
                            .mtime = (int64_t)st.st_mtime};
    rc = api_push_file(c, &file, r, err);
    if (rc < 0) {
        si_errprefix(err, "%s", e->path);
        goto done;
    }
    if (ferror(f)) {
        rc = si_errprintf(err, "%s: read error", e->path);
        goto done;
    }
    const char *stored = json_string_value(json_object_get(r->json, "checksum"));
    if (!stored || strcmp(stored, checksum) != 0)
        rc = si_errprintf(err, "%s: stageind recorded checksum %s, but the file sent was %s",
                          e->path, stored ? stored : "(none)", checksum);
done:
    fclose(f);
    return rc;
}

/* Files sent several at a time (--parallel), each worker on its own
 * connection, so that their acknowledgements share the daemon's group
 * commits; every file is tried, and each failure is named. */
typedef struct {
    cli_t *cli;
    const push_list_t *files;
    const char *dataset, *mode;
    const char *push_id;        /* the push the first file made */
    bool json;
    pthread_mutex_t mu;         /* guards what follows, and stdout/stderr */
    size_t next;
    size_t failed;
    uint64_t bytes;
    json_t **answers;           /* per file, NULL when it failed */
    char first_error[sizeof(((si_error_t *)0)->text)]; /* for the summary */
} push_batch_t;

/* Prints (or keeps, for --json) one file's answer; -1 when the answer is
 * not one (then named). Lock held. */
static int note_answer(push_batch_t *b, size_t i, client_reply_t *r)
{
    const char *id = json_string_value(json_object_get(r->json, "pushId"));
    si_error_t err;
    if (!id || client_cmd_check_id(id, &err) < 0) {
        cli_fail(b->cli, "%s: stageind's answer names no push id: %.200s", b->files->v[i].path,
                 r->body);
        return -1;
    }
    json_int_t size = json_integer_value(json_object_get(r->json, "size"));
    b->bytes += (uint64_t)size;
    b->answers[i] = json_incref(r->json);
    if (!b->json) {
        char text[32];
        printf("%s -> %s (%s, %s)\n", b->files->v[i].path,
               json_string_value(json_object_get(r->json, "path")) ?: b->files->v[i].key,
               si_format_bytes((uint64_t)size, text, sizeof(text)),
               json_string_value(json_object_get(r->json, "state")) ?: "?");
    }
    return 0;
}

static void push_indexed(push_batch_t *b, client_t *c, size_t i)
{
    client_reply_t r;
    si_error_t err;
    int rc = push_one(c, b->dataset, b->mode, &b->files->v[i], b->push_id, &r, &err);
    pthread_mutex_lock(&b->mu);
    if (rc < 0) {
        cli_fail(b->cli, "%s", err.text);
        if (!b->first_error[0])
            snprintf(b->first_error, sizeof(b->first_error), "%s", err.text);
    }
    if (rc < 0 || note_answer(b, i, &r) < 0)
        b->failed++;
    pthread_mutex_unlock(&b->mu);
    client_reply_free(&r);
}

typedef struct {
    push_batch_t *batch;
    client_t *client;
    pthread_t thread;
} push_worker_t;

static void *push_worker(void *arg)
{
    push_worker_t *w = arg;
    push_batch_t *b = w->batch;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        size_t i = b->next < b->files->n ? b->next++ : SIZE_MAX;
        pthread_mutex_unlock(&b->mu);
        if (i == SIZE_MAX)
            return NULL;
        push_indexed(b, w->client, i);
    }
}

/* Files [b->next, n) on up to parallel connections (the first is c). */
static void push_rest(push_batch_t *b, client_t *c, const char *endpoint, unsigned parallel)
{
    size_t left = b->files->n - b->next;
    unsigned n = parallel < left ? parallel : (unsigned)left;
    push_worker_t *w = calloc(n ? n : 1, sizeof(*w));
    unsigned started = 0;
    for (unsigned k = 0; w && k < n; k++) {
        si_error_t err;
        w[k].batch = b;
        w[k].client = k == 0 ? c : client_cmd_open(b->cli, endpoint, &err);
        if (!w[k].client || pthread_create(&w[k].thread, NULL, push_worker, &w[k]) != 0) {
            if (k > 0)
                client_free(w[k].client);
            break; /* fewer workers: the ones started take every file */
        }
        started++;
    }
    if (started == 0)
        push_worker(&(push_worker_t){.batch = b, .client = c});
    for (unsigned k = 0; k < started; k++) {
        pthread_join(w[k].thread, NULL);
        if (k > 0)
            client_free(w[k].client);
    }
    free(w);
}

/* Follows the push until every file is DURABLE or one FAILED. */
static int wait_push(cli_t *cli, client_t *c, const char *id, double timeout_s, bool json)
{
    double start = si_mono_now();
    char last[64] = "";
    for (;;) {
        client_reply_t r;
        si_error_t err;
        if (api_push_status(c, id, &r, &err) < 0) {
            client_reply_free(&r);
            return cli_fail(cli, "%s", err.text);
        }
        const char *state = json_string_value(json_object_get(r.json, "state"));
        if (!state) {
            int rc = cli_fail(cli, "stageind's push status has no state: %.200s", r.body);
            client_reply_free(&r);
            return rc;
        }
        long long total = json_integer_value(json_object_get(r.json, "filesTotal"));
        long long durable = json_integer_value(json_object_get(r.json, "filesDurable"));
        long long failed = json_integer_value(json_object_get(r.json, "filesFailed"));
        char now[64];
        snprintf(now, sizeof(now), "%s %lld %lld", state, durable, failed);
        if (!json && strcmp(now, last) != 0) {
            printf("push %s: %s, %lld/%lld files durable%s", id, state, durable, total,
                   failed ? "" : "\n");
            if (failed)
                printf(", %lld failed\n", failed);
            fflush(stdout);
            snprintf(last, sizeof(last), "%s", now);
        }
        bool done = strcmp(state, "DURABLE") == 0 || strcmp(state, "FAILED") == 0;
        double t = si_mono_now();
        int rc = -1;
        if (done) {
            if (json)
                client_cmd_print_answer(&r);
            rc = 0;
            if (strcmp(state, "FAILED") == 0) {
                rc = cli_fail(cli, "push %s FAILED: %lld of %lld files failed", id, failed, total);
                client_cmd_list_failed(cli, json_object_get(r.json, "files"));
            }
        } else if (timeout_s > 0 && t - start >= timeout_s) {
            if (json)
                client_cmd_print_answer(&r);
            char waited[32];
            cli_fail(cli, "timed out after %s waiting for push %s (%s, %lld of %lld files durable)",
                     si_format_duration(t - start, waited, sizeof(waited)), id, state, durable,
                     total);
            rc = CLIENT_CMD_EXIT_TIMEOUT;
        }
        client_reply_free(&r);
        if (rc >= 0)
            return rc;
        double pause = POLL_S;
        if (timeout_s > 0 && start + timeout_s - t < pause)
            pause = start + timeout_s - t;
        si_sleep(pause);
    }
}

static const char push_usage[] =
    "usage: stagein push PATH... --dataset NAME [--mode MODE] [--parallel N]\n"
    "                    [--wait [--timeout DURATION]] [--endpoint URL|unix:PATH] [--json]\n";

int cmd_push(cli_t *cli, int argc, char **argv)
{
    static const struct option options[] = {
        {"dataset", required_argument, NULL, 'D'},
        {"mode", required_argument, NULL, 'M'},
        {"wait", no_argument, NULL, 'w'},
        {"parallel", required_argument, NULL, 'P'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        CLIENT_CMD_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    client_cmd_conn_t co = {0};
    const char *dataset = NULL, *mode = NULL;
    bool wait = false;
    double timeout_s = 0;
    unsigned parallel = PARALLEL_DEFAULT;
    int opt;
    optind = 0; /* GNU getopt: 0 re-initialises its state */
    while ((opt = getopt_long(argc, argv, "D:M:wP:t:he:j", options, NULL)) != -1) {
        if (client_cmd_conn_option(opt, &co))
            continue;
        if (opt == 'D') {
            dataset = optarg;
        } else if (opt == 'M') {
            mode = optarg;
        } else if (opt == 'w') {
            wait = true;
        } else if (opt == 'P') {
            uint64_t n;
            if (si_parse_u64(optarg, &n) < 0 || n < 1 || n > PARALLEL_MAX)
                return cli_fail(cli, "--parallel '%s' is not a number of files from 1 to %d",
                                optarg, PARALLEL_MAX), 2;
            parallel = (unsigned)n;
        } else if (opt == 't') {
            if (client_cmd_timeout(cli, optarg, &timeout_s) != 0)
                return 2;
        } else if (opt == 'h') {
            fputs(push_usage, stdout);
            return 0;
        } else {
            fputs(push_usage, stderr);
            return 2;
        }
    }
    if (!dataset || optind == argc) {
        fputs(push_usage, stderr);
        return 2;
    }
    if (timeout_s > 0 && !wait)
        return cli_fail(cli, "--timeout needs --wait");

    push_list_t files = {0};
    si_error_t err;
    client_t *c = NULL;
    json_t *answers = json_array();
    char push_id[80] = "";
    uint64_t bytes = 0;
    int rc = 1;
    for (int i = optind; i < argc; i++)
        if (collect(&files, argv[i], &err) < 0) {
            cli_fail(cli, "%s", err.text);
            goto done;
        }
    if (files.n == 0) {
        cli_fail(cli, "no files to push under %s", argv[optind]);
        goto done;
    }
    if (!(c = client_cmd_open(cli, co.endpoint, &err))) {
        cli_fail(cli, "%s", err.text);
        goto done;
    }
    push_batch_t batch = {.cli = cli, .files = &files, .dataset = dataset, .mode = mode,
                          .push_id = push_id, .json = co.json,
                          .answers = calloc(files.n, sizeof(json_t *))};
    if (!batch.answers) {
        cli_fail(cli, "out of memory");
        goto done;
    }
    pthread_mutex_init(&batch.mu, NULL);
    /* one file alone, until one is taken: its answer names the push the
     * others join */
    const char *id = NULL;
    while (!id && batch.next < files.n) {
        size_t i = batch.next++;
        push_indexed(&batch, c, i);
        if (batch.answers[i])
            id = json_string_value(json_object_get(batch.answers[i], "pushId"));
    }
    if (id) {
        snprintf(push_id, sizeof(push_id), "%s", id);
        push_rest(&batch, c, co.endpoint, parallel);
    }
    for (size_t i = 0; i < files.n; i++) {
        if (batch.answers[i])
            json_array_append(answers, batch.answers[i]);
        json_decref(batch.answers[i]);
    }
    free(batch.answers);
    pthread_mutex_destroy(&batch.mu);
    bytes = batch.bytes;
    if (batch.failed) {
        if (co.json) {
            json_dumpf(answers, stdout, JSON_COMPACT);
            putchar('\n');
        }
        if (push_id[0])
            cli_fail(cli, "%zu of %zu files were not pushed (push %s)", batch.failed, files.n,
                     push_id);
        else if (files.n > 1) /* one file: its own error is the last line */
            cli_fail(cli, "no file was pushed (%zu refused; the first: %s)", files.n,
                     batch.first_error[0] ? batch.first_error : "see above");
        goto done;
    }
    if (!co.json) {
        char b[32];
        printf("push %s: %zu files, %s received into dataset %s\n", push_id, files.n,
               si_format_bytes(bytes, b, sizeof(b)), dataset);
    } else if (!wait) {
        json_dumpf(answers, stdout, JSON_COMPACT);
        putchar('\n');
    }
    fflush(stdout);
    rc = wait ? wait_push(cli, c, push_id, timeout_s, co.json) : 0;
done:
    json_decref(answers);
    client_free(c);
    list_free(&files);
    return rc;
}
