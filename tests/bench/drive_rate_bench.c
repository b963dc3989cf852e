/* Recall and push at drive speed: a real stageind with the sim backend at
 * library.time_scale = 1 (each modelled LTO-9 drive reads at tape.rate,
 * 400 MB/s, in real time) stages one dataset spread over one volume per
 * drive (each volume one archive file, as `stagein tape write` makes), and
 * takes pushed files over its control socket. Per case: objects/s and MB/s
 * in the streaming phase (from the 2nd percentile of the items' finish
 * times, or of the pushes' acknowledgements, to the last), the modelled
 * drive rate, the durable-write reference measured in the same run (the
 * same number of bytes, capped at 512 MiB, written as one stream to the same
 * file system and fsync'd, write-back started as it goes, or with O_DIRECT,
 * whichever is faster: bench_opts.h; before and after the case, the disk is
 * shared), stageind's CPU seconds per GB and
 * ratio = achieved / min(model, reference) (a push: achieved / reference,
 * as it is acknowledged before the drive archives it). A push also gets
 * the window reference: the direct stream fdatasync'd once per
 * PUSH_PARALLEL files, since the bench's client has no more files than
 * that unacknowledged, so no server can flush less often for it. Every
 * case also gets the CPU bound: the rate the CPU seconds per GB of stageind
 * and of the bench itself (a push's client) allow with every core busy.
 *   drive_rate [--quick] [--json] [--dir DIR]
 * Mount and load times are shortened (tape.load_s, robot_move_s): the
 * streaming phase leaves them out anyway. Needs daemon/stageind built (or
 * $STAGEIND). $DRIVE_RATE_CACHE and $DRIVE_RATE_TAPE add settings to the
 * cache and tape groups, for comparisons (e.g. "segment_object_max = 0;": a
 * file per object; "buffer_bytes = 0.0;": drives without a buffer). */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/db.h"
#include "common/table.h"
#include "daemon/volume/volume.h"
#include "tests/bench/bench_opts.h"

#define PROG "drive_rate"
#define DRIVE_RATE 400e6   /* tape.rate of the lto9 profile, bytes/s */
#define PUSH_PARALLEL 32   /* uploads in flight at once: enough to fill a batch */
#define REF_CAP (512ull << 20)
#define CHUNK (4u << 20)

typedef struct {
    const char *direction;
    int drives;
    uint64_t object_size, objects;
    double objects_per_s, mb_per_s, model, ref, cpu_s_per_gb, ratio;
    /* a push: the reference flushed once per PUSH_PARALLEL files (what
     * the bench's uploads in flight allow at best), and the rate against it */
    double window_ref, window_ratio;
    /* the bench's own CPU (a push's client), and the rate both CPU costs
     * per GB allow on this machine's cores: where the rate meets it, the
     * CPUs bind, not the disk nor the drives */
    double client_cpu_s_per_gb, cpu_bound;
    char error[120];          /* "" unless the case failed (it then has no rate) */
} result_t;


typedef struct {
    const char *dir;          /* the run's scratch directory */
    char stageind[PATH_MAX];
    bool quick;
    double seconds;           /* streaming time each case aims at */
} run_t;

static void die(const char *what, const char *why)
{
    bench_die(PROG, what, why);
}

/* Deterministic bytes that differ per object (no two checksums alike). */
static void fill(unsigned char *buf, size_t len, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i + 8 <= len; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(buf + i, &x, 8);
    }
}

/* The durable-write reference for a case of `bytes` (capped at REF_CAP):
 * the faster of the buffered and the direct stream (stageind writes
 * recalled and pushed objects with O_DIRECT, in segments or files of
 * their own: the page cache's copy is not the limit it is held to). */
static double durable_ref(const char *dir, uint64_t bytes)
{
    uint64_t n = bytes < REF_CAP ? bytes : REF_CAP;
    return bench_durable_best_write_rate(PROG, dir, n);
}

/* A push's second reference: the direct stream made durable once per
 * PUSH_PARALLEL files of `size`, since no more are unacknowledged at once. */
static double window_ref_rate(const char *dir, uint64_t bytes, uint64_t size)
{
    uint64_t n = bytes < REF_CAP ? bytes : REF_CAP;
    return bench_durable_windowed_write_rate(PROG, dir, n, PUSH_PARALLEL * size);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Objects per second over the streaming phase of these completion times:
 * from the 2nd percentile to the last (at least one object in between). */
static double streaming_rate(double *t, size_t n, size_t *counted)
{
    qsort(t, n, sizeof(*t), cmp_double);
    size_t k = (size_t)floor(0.02 * (double)n);
    if (k + 1 >= n)
        k = n >= 2 ? n - 2 : 0;
    *counted = n - 1 - k;
    double span = t[n - 1] - t[k];
    return span > 0 ? (double)*counted / span : 0;
}

/* ---- the daemon ------------------------------------------------------------ */

typedef struct {
    pid_t pid;
    char state[PATH_MAX + 16], db[PATH_MAX + 32], sock[PATH_MAX + 16], log[PATH_MAX + 16];
} daemon_t;

static void daemon_paths(const run_t *run, daemon_t *d)
{
    snprintf(d->state, sizeof(d->state), "%s/state", run->dir);
    snprintf(d->db, sizeof(d->db), "%s/catalog.db", d->state);
    snprintf(d->sock, sizeof(d->sock), "%s/sock", run->dir);
    snprintf(d->log, sizeof(d->log), "%s/stageind.log", run->dir);
    if (mkdir(d->state, 0755) < 0)
        die(d->state, NULL);
}

static void daemon_start(const run_t *run, daemon_t *d, int drives, uint64_t capacity)
{
    char conf[PATH_MAX + 32];
    snprintf(conf, sizeof(conf), "%s/stagein.conf", run->dir);
    FILE *cf = fopen(conf, "w");
    if (!cf)
        die(conf, NULL);
    fprintf(cf,
            "state_dir = \"%s\";\n"
            "library: { drives = %d; time_scale = 1.0; };\n"
            "tape: { load_s = 0.5; unload_s = 0.5; robot_move_s = 0.2; %s };\n"
            "cache: { capacity = %llu; %s };\n"
            /* the aggregator would archive the pushed files meanwhile (to
             * no volume: each write failed and put its files back) */
            "push: { aggregate_window = 86400.0; aggregate_bytes = %llu;"
            " aggregate_files = 1000000; };\n",
            d->state, drives, getenv("DRIVE_RATE_TAPE") ? getenv("DRIVE_RATE_TAPE") : "",
            (unsigned long long)capacity,
            getenv("DRIVE_RATE_CACHE") ? getenv("DRIVE_RATE_CACHE") : "",
            (unsigned long long)capacity);
    fclose(cf);
    unlink(d->sock);
    if ((d->pid = fork()) == 0) {
        /* in the foreground it logs to stderr */
        int log = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (log >= 0)
            dup2(log, 2);
        execl(run->stageind, "stageind", "-F", "-c", conf, "-d", d->state, "-S", d->sock, "-p",
              "0", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000 && access(d->sock, F_OK) < 0; i++)
        usleep(10000);
    if (access(d->sock, F_OK) < 0)
        die("stageind did not start; its log", d->log);
}

static void daemon_stop(daemon_t *d)
{
    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        waitpid(d->pid, NULL, 0);
        d->pid = 0;
    }
}

static void scratch_clear(const run_t *run)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s/state' '%s/src'", run->dir, run->dir);
    if (system(cmd) != 0)
        fprintf(stderr, PROG ": cleanup of %s failed\n", run->dir);
    /* the deletions reach the disk before the next case: ext4 then skips
     * fewer recently freed inodes when the next case creates its files */
    sync();
}

/* ---- HTTP over the control socket ----------------------------------------------- */

typedef struct {
    char *data;
    size_t len, cap;
} body_t;

static size_t body_append(char *p, size_t size, size_t n, void *arg)
{
    body_t *b = arg;
    size_t len = size * n;
    if (b->len + len + 1 > b->cap) {
        b->cap = (b->len + len + 1) * 2;
        b->data = realloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, p, len);
    b->len += len;
    b->data[b->len] = 0;
    return len;
}

static CURL *easy_for(const daemon_t *d, const char *path, body_t *answer)
{
    CURL *h = curl_easy_init();
    char url[512];
    snprintf(url, sizeof(url), "http://localhost%s", path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, d->sock);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_append);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
    return h;
}

/* The request's uuid from POST /api/v1/stage. */
static void stage_dataset(const daemon_t *d, char uuid[64])
{
    body_t answer = {0};
    CURL *h = easy_for(d, "/api/v1/stage", &answer);
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "{\"datasets\":[\"bench\"]}");
    long code = 0;
    /* the socket exists a moment before the daemon answers on it */
    for (int i = 0; i < 100 && curl_easy_perform(h) != CURLE_OK; i++)
        usleep(50000);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    const char *id = answer.data ? strstr(answer.data, "\"requestId\":\"") : NULL;
    if (code != 201 || !id)
        die("stage request refused", answer.data ? answer.data : "no answer");
    sscanf(id + 13, "%36[0-9a-f-]", uuid);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    free(answer.data);
}

/* ---- recall ------------------------------------------------------------------ */

/* One volume per drive, each one archive file of its share of the n objects
 * (written for real, recorded in the catalog), and a dataset of them all. */
static void make_volumes(const run_t *run, const daemon_t *d, int drives, uint64_t size,
                         uint64_t n)
{
    si_error_t err = {{0}};
    catalog_t *cat = catalog_open(d->db, CATALOG_CREATE, &err);
    if (!cat)
        die("catalog", err.text);
    char vdir[PATH_MAX + 32], src[PATH_MAX + 16];
    snprintf(vdir, sizeof(vdir), "%s/volumes", d->state);
    snprintf(src, sizeof(src), "%s/src", run->dir);
    size_t chunk = size < CHUNK ? (size_t)size : CHUNK;
    unsigned char *buf = malloc(chunk);
    char *manifest = NULL;
    size_t mlen = 0;
    FILE *mf = open_memstream(&manifest, &mlen);
    /* shares differ by one at most: every volume gets objects (n >= drives) */
    uint64_t share = n / (uint64_t)drives, extra = n % (uint64_t)drives;
    for (int v = 0; v < drives; v++) {
        uint64_t vu = (uint64_t)v;
        uint64_t first = vu * share + (vu < extra ? vu : extra), count = share + (vu < extra);
        /* the members' bytes, one after the other, in one source file */
        int fd = open(src, O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            die(src, NULL);
        for (uint64_t i = 0; i < count; i++)
            for (uint64_t done = 0; done < size; done += chunk) {
                fill(buf, chunk, (first + i) * 1000003 + done);
                if (write(fd, buf, chunk) != (ssize_t)chunk)
                    die(src, NULL);
            }
        lseek(fd, 0, SEEK_SET);
        tapevol_member_t *m = calloc(count, sizeof(*m));
        char (*keys)[24] = calloc(count, 24);
        for (uint64_t i = 0; i < count; i++) {
            snprintf(keys[i], 24, "o%08" PRIu64, first + i);
            m[i] = (tapevol_member_t){.bucket = "bench", .key = keys[i], .fd = fd, .size = size};
            fprintf(mf, "bench/%s\n", keys[i]);
        }
        char label[16];
        snprintf(label, sizeof(label), "D%05d", v + 1);
        tapevol_listing_t *l = NULL;
        tapevol_info_t info;
        tapevol_t *vol = NULL;
        if (tapevol_create(vdir, label, "LTO-9", 18000000000000ULL, &err) < 0 ||
            !(vol = tapevol_open(vdir, label, TAPEVOL_RDWR, &err)) ||
            tapevol_append(vol, m, (size_t)count, &l, &err) < 0 ||
            tapevol_info(vol, &info, &err) < 0 ||
            tapevol_catalog_record(cat, &info, l, 1, NULL, &err) < 0)
            die(label, err.text);
        tapevol_listing_free(l);
        tapevol_close(vol);
        close(fd);
        unlink(src);
        free(m);
        free(keys);
    }
    free(buf);
    fclose(mf);
    FILE *min = fmemopen(manifest, mlen, "r");
    catalog_dataset_attrs_t attrs = {"bench", 0, 0, 0644, NULL, false};
    if (catalog_import_manifest(cat, &attrs, "bench.manifest", min, NULL, &err) < 0)
        die("dataset", err.text);
    fclose(min);
    free(manifest);
    catalog_close(cat);
}

/* Waits for the request to end; the items' finish times into *t. */
static size_t wait_items(const daemon_t *d, const char *uuid, double limit_s, double **t)
{
    si_error_t err;
    db_t *db = db_open(d->db, DB_OPEN_READONLY, NULL, &err);
    db_stmt_t *q = db ? db_prepare(db, "SELECT state FROM requests WHERE uuid = ?1", &err) : NULL;
    *t = NULL;
    if (!q) {
        fprintf(stderr, "drive_rate: %s\n", err.text);
        db_close(db);
        return 0;
    }
    db_bind_text(q, 1, uuid, -1);
    char state[16] = "";
    double t0 = bench_mono_s();
    while (bench_mono_s() - t0 < limit_s) {
        if (db_step(q) == DB_ROW)
            snprintf(state, sizeof(state), "%s", db_column_text(q, 0));
        db_reset(q);
        if (strcmp(state, "COMPLETED") == 0 || strcmp(state, "FAILED") == 0)
            break;
        usleep(100000); /* seldom: the daemon has the CPUs */
    }
    db_finalize(q);
    if (strcmp(state, "COMPLETED") != 0 ||
        !(q = db_prepare(db, "SELECT i.finished FROM request_items i JOIN requests r"
                             " ON r.id = i.request_id WHERE r.uuid = ?1", &err))) {
        db_close(db);
        return 0;
    }
    db_bind_text(q, 1, uuid, -1);
    size_t n = 0, cap = 1024;
    *t = malloc(cap * sizeof(**t));
    while (db_step(q) == DB_ROW) {
        if (n == cap)
            *t = realloc(*t, (cap *= 2) * sizeof(**t));
        (*t)[n++] = db_column_double(q, 0);
    }
    db_finalize(q);
    db_close(db);
    return n;
}

/* Objects for a case: enough for run->seconds at the rate the case can
 * reach, and at least two per drive (the streaming phase needs them). */
static uint64_t case_objects(const run_t *run, int drives, uint64_t size, double reach)
{
    uint64_t n = (uint64_t)ceil(run->seconds * reach / (double)size);
    uint64_t least = 2 * (uint64_t)drives + 1;
    return n < least ? least : n;
}

static void recall_case(const run_t *run, int drives, uint64_t size, double ref0, result_t *r)
{
    daemon_t d;
    daemon_paths(run, &d);
    double model = drives * DRIVE_RATE;
    uint64_t n = case_objects(run, drives, size, fmin(model, ref0));
    make_volumes(run, &d, drives, size, n);
    uint64_t bytes = n * size;
    double ref_before = durable_ref(run->dir, bytes);
    daemon_start(run, &d, drives, bytes * 2 + (1ull << 30));
    char uuid[64];
    double cpu0 = bench_cpu_seconds(d.pid), client0 = bench_cpu_seconds(getpid());
    stage_dataset(&d, uuid);
    double *t = NULL;
    size_t got = wait_items(&d, uuid, 120 + 20.0 * (double)bytes / fmin(model, ref_before), &t);
    double cpu = bench_cpu_seconds(d.pid) - cpu0;
    double client = bench_cpu_seconds(getpid()) - client0;
    daemon_stop(&d);
    double ref = bench_rate_of(ref_before,
                              durable_ref(run->dir, bytes));
    size_t counted;
    double ops = got ? streaming_rate(t, got, &counted) : 0;
    free(t);
    *r = (result_t){"recall", drives, size, n, ops, ops * (double)size / 1e6, model / 1e6,
                    ref / 1e6, cpu / ((double)bytes / 1e9), ops * (double)size / fmin(model, ref),
                    0, 0, client / ((double)bytes / 1e9), 0, ""};
    r->cpu_bound = bench_cpu_bound_mb_per_s(r->cpu_s_per_gb + r->client_cpu_s_per_gb);
    if (!got) {
        snprintf(r->error, sizeof(r->error), "the request did not complete");
        fprintf(stderr, PROG ": recall, %d drives, %" PRIu64 " byte objects: the request did"
                " not complete; stageind's log:\n", drives, size);
        char cmd[PATH_MAX + 64];
        snprintf(cmd, sizeof(cmd), "grep -E 'error|warning' '%s' | tail -5 >&2", d.log);
        if (system(cmd) != 0)
            fprintf(stderr, "(no log)\n");
    }
    scratch_clear(run);
}

/* ---- push -------------------------------------------------------------------- */

typedef struct {
    CURL *h;
    body_t answer;
    struct curl_slist *headers;
    uint64_t index, size, sent;
    unsigned char *data;      /* one chunk, the object's pattern */
    size_t data_len;
} upload_t;

static size_t upload_read(char *p, size_t size, size_t n, void *arg)
{
    upload_t *u = arg;
    size_t want = size * n, left = (size_t)(u->size - u->sent);
    if (want > left)
        want = left;
    size_t off = (size_t)(u->sent % u->data_len);
    if (want > u->data_len - off)
        want = u->data_len - off;
    memcpy(p, u->data + off, want);
    if (u->sent == 0 && want >= 8)
        memcpy(p, &u->index, 8); /* each object's bytes differ */
    u->sent += want;
    return want;
}

static void upload_start(const daemon_t *d, CURLM *m, upload_t *u, const char *push_id)
{
    char path[256];
    snprintf(path, sizeof(path), "/api/v1/push?dataset=ckpt&key=f%08" PRIu64 "%s%s", u->index,
             push_id ? "&push=" : "", push_id ? push_id : "");
    u->answer.len = 0;
    u->sent = 0;
    u->h = easy_for(d, path, &u->answer);
    u->headers = curl_slist_append(NULL, "Content-Type: application/octet-stream");
    u->headers = curl_slist_append(u->headers, "Expect:");
    curl_easy_setopt(u->h, CURLOPT_HTTPHEADER, u->headers);
    curl_easy_setopt(u->h, CURLOPT_POST, 1L);
    curl_easy_setopt(u->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)u->size);
    curl_easy_setopt(u->h, CURLOPT_READFUNCTION, upload_read);
    curl_easy_setopt(u->h, CURLOPT_READDATA, u);
    curl_easy_setopt(u->h, CURLOPT_PRIVATE, u);
    curl_multi_add_handle(m, u->h);
}

/* Every upload acknowledged (202); their acknowledgement times into t. */
static void push_files(const daemon_t *d, uint64_t size, uint64_t n, double *t)
{
    CURLM *m = curl_multi_init();
    size_t chunk = size < CHUNK ? (size_t)size : CHUNK;
    upload_t slots[PUSH_PARALLEL];
    char push_id[64] = "";
    uint64_t next = 0, acked = 0;
    for (int i = 0; i < PUSH_PARALLEL; i++) {
        slots[i] = (upload_t){.size = size, .data_len = chunk, .data = malloc(chunk)};
        fill(slots[i].data, chunk, (uint64_t)i + 99);
    }
    /* the first alone: it makes the push the others join */
    int running = 0;
    slots[0].index = next++;
    upload_start(d, m, &slots[0], NULL);
    for (;;) {
        curl_multi_perform(m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left))) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            upload_t *u;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&u);
            long code = 0;
            curl_easy_getinfo(u->h, CURLINFO_RESPONSE_CODE, &code);
            if (msg->data.result != CURLE_OK || code != 202)
                die("a push was refused", u->answer.data ? u->answer.data
                                                         : curl_easy_strerror(msg->data.result));
            t[acked++] = bench_mono_s();
            if (!*push_id) {
                const char *p = strstr(u->answer.data, "\"pushId\":\"");
                if (!p)
                    die("no pushId in the answer", u->answer.data);
                sscanf(p + 10, "%36[0-9a-f-]", push_id);
            }
            curl_multi_remove_handle(m, u->h);
            curl_easy_cleanup(u->h);
            curl_slist_free_all(u->headers);
            u->h = NULL;
        }
        for (int i = 0; *push_id && i < PUSH_PARALLEL && next < n; i++)
            if (!slots[i].h) {
                slots[i].index = next++;
                upload_start(d, m, &slots[i], push_id);
                running++;
            }
        if (acked == n)
            break;
        curl_multi_poll(m, NULL, 0, 100, NULL);
    }
    for (int i = 0; i < PUSH_PARALLEL; i++) {
        free(slots[i].data);
        free(slots[i].answer.data);
    }
    curl_multi_cleanup(m);
}

static void push_case(const run_t *run, uint64_t size, double ref0, result_t *r)
{
    daemon_t d;
    daemon_paths(run, &d);
    uint64_t n = case_objects(run, 1, size, fmin(DRIVE_RATE, ref0));
    uint64_t bytes = n * size;
    double ref_before = durable_ref(run->dir, bytes);
    double window_before = window_ref_rate(run->dir, bytes, size);
    si_error_t err;
    catalog_t *cat = catalog_open(d.db, CATALOG_CREATE, &err);
    if (!cat)
        die("catalog", err.text);
    catalog_close(cat);
    daemon_start(run, &d, 1, bytes * 2 + (1ull << 30));
    double *t = malloc(n * sizeof(*t));
    double cpu0 = bench_cpu_seconds(d.pid), client0 = bench_cpu_seconds(getpid());
    push_files(&d, size, n, t);
    double cpu = bench_cpu_seconds(d.pid) - cpu0;
    double client = bench_cpu_seconds(getpid()) - client0;
    daemon_stop(&d);
    double ref = bench_rate_of(ref_before, durable_ref(run->dir, bytes));
    double window_ref = bench_rate_of(window_before, window_ref_rate(run->dir, bytes, size));
    size_t counted;
    double ops = streaming_rate(t, n, &counted);
    free(t);
    /* a push is acknowledged once in the cache: the disk is its limit,
     * the drive (which archives it later) is not */
    double rate = ops * (double)size;
    *r = (result_t){"push", 1, size, n, ops, rate / 1e6, DRIVE_RATE / 1e6, ref / 1e6,
                    cpu / ((double)bytes / 1e9), rate / ref, window_ref / 1e6,
                    window_ref > 0 ? rate / window_ref : 0, client / ((double)bytes / 1e9), 0, ""};
    r->cpu_bound = bench_cpu_bound_mb_per_s(r->cpu_s_per_gb + r->client_cpu_s_per_gb);
    scratch_clear(run);
}

/* ---- report ------------------------------------------------------------------ */

static const char *size_name(uint64_t size, char buf[16])
{
    if (size >= (1ull << 30))
        snprintf(buf, 16, "%llu GiB", (unsigned long long)(size >> 30));
    else if (size >= (1ull << 20))
        snprintf(buf, 16, "%llu MiB", (unsigned long long)(size >> 20));
    else
        snprintf(buf, 16, "%llu KiB", (unsigned long long)(size >> 10));
    return buf;
}

/* One line per case on stderr as it ends (a full run takes minutes). */
static void progress(const result_t *r)
{
    char b[16];
    fprintf(stderr, PROG ": %s, %d drive%s, %" PRIu64 " x %s: %.1f MB/s, reference %.1f MB/s,"
            " ratio %.2f%s%s\n", r->direction, r->drives, r->drives > 1 ? "s" : "", r->objects,
            size_name(r->object_size, b), r->mb_per_s, r->ref, r->ratio, r->error[0] ? ": " : "",
            r->error);
}

/* A push's window figures as JSON members ("" for a recall). */
static const char *window_json(const result_t *r, char *buf, size_t len)
{
    if (r->window_ref <= 0)
        return "";
    snprintf(buf, len, ", \"window_ref_mb_per_s\": %.1f, \"window_ratio\": %.3f",
             r->window_ref, r->window_ratio);
    return buf;
}

static void report(const result_t *r, size_t n, bool json)
{
    char w[96];
    if (json) {
        printf("{\"results\": [");
        for (size_t i = 0; i < n; i++)
            printf("%s{\"direction\": \"%s\", \"drives\": %d, \"object_size\": %" PRIu64
                   ", \"objects\": %" PRIu64 ", \"objects_per_s\": %.1f, \"mb_per_s\": %.1f,"
                   " \"model_mb_per_s\": %.1f, \"durable_ref_mb_per_s\": %.1f,"
                   " \"cpu_s_per_gb\": %.3f, \"ratio\": %.3f, \"client_cpu_s_per_gb\": %.3f,"
                   " \"cpu_bound_mb_per_s\": %.1f, \"cpu_bound_ratio\": %.3f%s%s%s%s}",
                   i ? ", " : "", r[i].direction, r[i].drives, r[i].object_size, r[i].objects,
                   r[i].objects_per_s, r[i].mb_per_s, r[i].model, r[i].ref, r[i].cpu_s_per_gb,
                   r[i].ratio, r[i].client_cpu_s_per_gb, r[i].cpu_bound,
                   r[i].cpu_bound > 0 ? r[i].mb_per_s / r[i].cpu_bound : 0,
                   window_json(&r[i], w, sizeof(w)),
                   r[i].error[0] ? ", \"error\": \"" : "", r[i].error,
                   r[i].error[0] ? "\"" : "");
        printf("]}\n");
        return;
    }
    static const si_column_t cols[] = {
        {"direction", SI_COL_STR}, {"drives", SI_COL_INT},     {"object", SI_COL_STR},
        {"objects", SI_COL_INT},   {"objects/s", SI_COL_STR},  {"MB/s", SI_COL_STR},
        {"model MB/s", SI_COL_STR}, {"durable ref MB/s", SI_COL_STR},
        {"CPU s/GB", SI_COL_STR},  {"ratio", SI_COL_STR},
        {"window ref MB/s", SI_COL_STR}, {"of window ref", SI_COL_STR},
        {"client CPU s/GB", SI_COL_STR}, {"CPU bound MB/s", SI_COL_STR},
        {"of CPU bound", SI_COL_STR},
    };
    si_table_t *t = si_table_new(cols, sizeof(cols) / sizeof(cols[0]));
    for (size_t i = 0; i < n; i++) {
        char b[16], v[32];
        si_table_row(t);
        si_table_str(t, r[i].direction);
        si_table_int(t, r[i].drives);
        si_table_str(t, size_name(r[i].object_size, b));
        si_table_int(t, (int64_t)r[i].objects);
#define CELL(fmt, x) (snprintf(v, sizeof(v), fmt, x), si_table_str(t, v))
        CELL("%.0f", r[i].objects_per_s);
        CELL("%.1f", r[i].mb_per_s);
        CELL("%.0f", r[i].model);
        CELL("%.1f", r[i].ref);
        CELL("%.2f", r[i].cpu_s_per_gb);
        if (r[i].error[0])
            si_table_str(t, "failed");
        else
            CELL("%.2f", r[i].ratio);
        if (r[i].window_ref <= 0) {
            si_table_str(t, "-");
            si_table_str(t, "-");
        } else {
            CELL("%.1f", r[i].window_ref);
            CELL("%.2f", r[i].window_ratio);
        }
        CELL("%.2f", r[i].client_cpu_s_per_gb);
        CELL("%.0f", r[i].cpu_bound);
        CELL("%.2f", r[i].cpu_bound > 0 ? r[i].mb_per_s / r[i].cpu_bound : 0);
#undef CELL
    }
    si_table_print(t, stdout, false);
    si_table_free(t);
}

int main(int argc, char **argv)
{
    const bench_opts_t o = bench_options(argc, argv);
    run_t run = {.quick = o.quick, .seconds = o.quick ? 1.5 : 10.0};
    char self[PATH_MAX], dir[PATH_MAX];
    snprintf(self, sizeof(self), "%s", argv[0]);
    if (getenv("STAGEIND"))
        snprintf(run.stageind, sizeof(run.stageind), "%s", getenv("STAGEIND"));
    else
        snprintf(run.stageind, sizeof(run.stageind), "%s/../../daemon/stageind", dirname(self));
    if (access(run.stageind, X_OK) < 0) {
        fprintf(stderr, PROG ": %s: not built (make -C daemon, or set $STAGEIND)\n",
                run.stageind);
        return 1;
    }
    snprintf(dir, sizeof(dir), "%s/drive-rate.XXXXXX", o.dir);
    if (!mkdtemp(dir))
        die(dir, NULL);
    run.dir = dir;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);

    /* sizes the cases: how fast this file system takes durable bytes now */
    double ref0 = bench_durable_write_rate("drive_rate", dir, o.quick ? 256ull << 20 : 1ull << 30);
    static const uint64_t sizes[] = {64ull << 10, 1ull << 20, 16ull << 20, 1ull << 30};
    static const int drive_counts[] = {1, 4};
    result_t results[16];
    size_t nr = 0;
    /* $DRIVE_RATE_ONLY (e.g. "push", "recall 4", "recall 1 64 KiB"): only
     * the cases whose name starts so (for profiling one of them) */
    const char *only = getenv("DRIVE_RATE_ONLY");
    char name[64], b[16];
#define SKIP(dir, drives, size)                                                                \
    (snprintf(name, sizeof(name), "%s %d %s", dir, drives, size_name(size, b)),                \
     only && strncmp(name, only, strlen(only)) != 0)
    for (size_t di = 0; di < 2; di++)
        for (size_t si = 0; si < 4; si++) {
            /* --quick leaves out the one case of 8 GiB and more */
            if ((o.quick && drive_counts[di] > 1 && sizes[si] >= (1ull << 30)) ||
                SKIP("recall", drive_counts[di], sizes[si]))
                continue;
            recall_case(&run, drive_counts[di], sizes[si], ref0, &results[nr]);
            progress(&results[nr++]);
        }
    for (size_t si = 0; si < 4; si++) {
        if (SKIP("push", 1, sizes[si]))
            continue;
        push_case(&run, sizes[si], ref0, &results[nr]);
        progress(&results[nr++]);
    }
    report(results, nr, o.json);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, PROG ": cleanup of %s failed\n", dir);
    curl_global_cleanup();
    return 0;
}
