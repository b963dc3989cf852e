/* The archive backends in front of real archives, against reading the same
 * bytes directly and against writing them durably: 1,000 objects of 1 MiB
 * and 10 of 1 GiB (--quick: 200 of 1 MiB, 2 of 256 MiB) staged through a
 * real stageind
 *   - with the s3 backend, its upstream a second stageind in archive mode on
 *     loopback holding the objects online (PUT into an archive bucket), set
 *     against S3 GETs of the same objects from that upstream with the same
 *     concurrency (archive.s3.gets connections, one per object);
 *   - with the hsm backend over a local directory (read-through), set
 *     against `cat` of the same files, as many at a time as the backend's
 *     workers.
 * Staging time is the stage request's own (created to completed, in the
 * catalog); throughput = bytes / time; ratio = staged / direct. The durable
 * reference writes the set's bytes (capped at 1 GiB) as one stream of
 * 4 MiB writes and one fsync into the staging daemon's directory (the
 * cache's file system), through the page cache and with O_DIRECT, the
 * faster of the two, before and after each staged set; the true limit
 * of staging is the slower of the direct read and that write, so
 * ratio_durable = staged / min(direct, durable). Also the staging daemon's
 * CPU seconds per GB staged, with the upstream stageind's (s3), and the CPU
 * bound: the rate both allow with every core busy (bench_opts.h).
 *   backends [--quick] [--json] [--dir DIR]
 *   BACKENDS_ONLY=hsm|s3 backends ...   (one backend)
 *   BACKENDS_S3_PARTS=N backends ...     (archive.s3.parts; default 1)
 * Needs daemon/stageind built (or $STAGEIND). */
#include "config.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "common/checksum.h"
#include "common/fileio.h"
#include "common/aws/s3client.h"
#include "common/table.h"
#include "tests/bench/bench_opts.h"
#include "tests/bench/bench_request.h"

#define GETS 8           /* s3: objects read at once, staged and direct */
#define HSM_WORKERS 4    /* hsm: copies at once; cat: files at once */
#define MIB (UINT64_C(1) << 20)
#define REF_CAP (1024 * MIB) /* the durable reference's bytes at most */
#define S3_KEY "BENCHKEY000000000001"
#define S3_SECRET "benchsecret0000000000000000000000000000"

typedef struct {
    char key[32];
    uint64_t size;
    char sum[SI_CHECKSUM_TEXT_MAX];
} obj_t;

typedef struct {
    const char *name;      /* "small", "large": also the dataset's name */
    obj_t *v;
    size_t n;
    uint64_t bytes;
} set_t;

typedef struct {
    double direct_s, durable_s, staged_s;
    double cpu_s;          /* the staging stageind's CPU seconds while it staged the set */
    double upstream_cpu_s; /* the upstream's meanwhile (s3; 0 for hsm) */
} result_t;

static char g_stageind[PATH_MAX];
/* What an early exit must undo: the daemons started, the work directory.
 * The program's only mutable globals, for its atexit handler. */
static pid_t g_daemons[4];
static char g_base[PATH_MAX];

static void cleanup(void)
{
    for (size_t i = 0; i < sizeof(g_daemons) / sizeof(g_daemons[0]); i++)
        if (g_daemons[i] > 0) {
            kill(g_daemons[i], SIGTERM);
            waitpid(g_daemons[i], NULL, 0);
        }
    if (g_base[0]) {
        bench_remove_tree("backends", g_base);
    }
}

static void track(pid_t pid, bool add)
{
    for (size_t i = 0; i < sizeof(g_daemons) / sizeof(g_daemons[0]); i++)
        if (add ? g_daemons[i] == 0 : g_daemons[i] == pid) {
            g_daemons[i] = add ? pid : 0;
            return;
        }
}

static void die(const char *what, const si_error_t *err)
{
    bench_die("backends", what, err ? err->text : NULL);
}

/* The benchmark's S3 key and secret (then tail) in a new file of mode 0600. */
static void write_secret_file(const char *path, const char *tail)
{
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%s %s%s\n", S3_KEY, S3_SECRET, tail) < 0 || fclose(f) != 0 ||
        chmod(path, 0600) < 0)
        die(path, NULL);
}

/* Runs fn(arg) on n threads at once; returns the seconds until all ended. */
static double run_threads(int n, void *(*fn)(void *), void *arg)
{
    pthread_t t[64];
    double t0 = bench_mono_s();
    for (int i = 0; i < n && i < 64; i++)
        pthread_create(&t[i], NULL, fn, arg);
    for (int i = 0; i < n && i < 64; i++)
        pthread_join(t[i], NULL);
    return bench_mono_s() - t0;
}

/* ---- the objects ------------------------------------------------------------ */

/* Files <root>/bench/<set>/<NNNNN> of pseudo-random bytes, hashed as written. */
static void make_set(set_t *s, const char *root, size_t n, uint64_t size)
{
    s->v = calloc(n, sizeof(*s->v));
    s->n = n;
    s->bytes = 0;
    unsigned char *buf = malloc(MIB);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/bench", root);
    mkdir(path, 0755);
    snprintf(path, sizeof(path), "%s/bench/%s", root, s->name);
    mkdir(path, 0755);
    uint64_t x = UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)n;
    for (size_t i = 0; i < n; i++) {
        obj_t *o = &s->v[i];
        snprintf(o->key, sizeof(o->key), "%s/%05zu", s->name, i);
        o->size = size;
        snprintf(path, sizeof(path), "%s/bench/%s", root, o->key);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        si_checksum_t *c = si_checksum_new("sha256", NULL);
        if (fd < 0 || !c)
            die(path, NULL);
        for (uint64_t done = 0; done < size;) {
            size_t len = size - done < MIB ? (size_t)(size - done) : MIB;
            for (size_t k = 0; k + 8 <= len; k += 8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                memcpy(buf + k, &x, 8);
            }
            si_checksum_update(c, buf, len);
            if (write(fd, buf, len) != (ssize_t)len)
                die(path, NULL);
            done += len;
        }
        si_checksum_final(c, o->sum);
        si_checksum_free(c);
        close(fd);
        s->bytes += size;
    }
    free(buf);
}

/* The objects of both sets in a catalog at db (volume: where the backend
 * records them), one dataset per set. */
static void catalog_sets(const char *db, set_t *sets, size_t nsets, const char *volume)
{
    si_error_t err;
    catalog_t *cat = catalog_open(db, CATALOG_CREATE, &err);
    if (!cat)
        die(db, &err);
    char *csv = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&csv, &len);
    fprintf(f, "bucket,key,size,volume,position,copy,checksum\n");
    for (size_t s = 0; s < nsets; s++)
        for (size_t i = 0; i < sets[s].n; i++)
            fprintf(f, "bench,%s,%" PRIu64 ",%s,0,1,%s\n", sets[s].v[i].key, sets[s].v[i].size,
                    volume, sets[s].v[i].sum);
    fclose(f);
    f = fmemopen(csv, len, "r");
    catalog_positions_opts_t po = {.format = CATALOG_FORMAT_CSV};
    if (catalog_import_positions(cat, "bench.csv", f, &po, NULL, &err) < 0)
        die("catalog import", &err);
    fclose(f);
    free(csv);
    for (size_t s = 0; s < nsets; s++) {
        char manifest[64];
        snprintf(manifest, sizeof(manifest), "bench/%s/\n", sets[s].name);
        f = fmemopen(manifest, strlen(manifest), "r");
        catalog_dataset_attrs_t a = {sets[s].name, 0, 0, 0644, NULL, false};
        if (catalog_import_manifest(cat, &a, "bench.manifest", f, NULL, &err) < 0)
            die("dataset", &err);
        fclose(f);
    }
    catalog_close(cat);
}

/* ---- stageind -------------------------------------------------------------------- */

typedef struct {
    char dir[PATH_MAX], conf[PATH_MAX + 32], sock[PATH_MAX + 32], log[PATH_MAX + 32];
    char db[PATH_MAX + 32];
    pid_t pid;
} daemon_t;

static void daemon_init(daemon_t *d, const char *base, const char *name)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->dir, sizeof(d->dir), "%s/%s", base, name);
    mkdir(d->dir, 0755);
    snprintf(d->conf, sizeof(d->conf), "%s/stagein.conf", d->dir);
    snprintf(d->sock, sizeof(d->sock), "%s/sock", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/stageind.log", d->dir);
    snprintf(d->db, sizeof(d->db), "%s/catalog.db", d->dir);
}

static void daemon_start(daemon_t *d, const char *wait_for)
{
    d->pid = fork();
    if (d->pid == 0) {
        char out[PATH_MAX + 32];
        snprintf(out, sizeof(out), "%s/stderr", d->dir);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(g_stageind, "stageind", "-F", "-c", d->conf, "-d", d->dir, "-S", d->sock, "-p", "0",
              "-l", d->log, (char *)NULL);
        _exit(127);
    }
    track(d->pid, true);
    for (int i = 0; i < 1000 && access(wait_for, F_OK) < 0; i++)
        usleep(10000);
    if (access(wait_for, F_OK) < 0) {
        fprintf(stderr, "backends: stageind did not start (log %s, %s/stderr)\n", d->log, d->dir);
        exit(1);
    }
}

static void daemon_stop(daemon_t *d)
{
    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        waitpid(d->pid, NULL, 0);
        track(d->pid, false);
        d->pid = 0;
    }
}

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
    FILE *f = arg;
    return fwrite(data, size, n, f);
}

/* Stages the dataset through the daemon's control API (its Unix socket:
 * the caller's own identity); returns the request's seconds. */
static double stage_dataset(daemon_t *d, const char *dataset)
{
    char body[128], *answer = NULL;
    size_t alen = 0;
    snprintf(body, sizeof(body), "{\"datasets\":[\"%s\"]}", dataset);
    FILE *out = open_memstream(&answer, &alen);
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->sock);
    curl_easy_setopt(c, CURLOPT_URL, "http://localhost/api/v1/stage");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    double t0 = bench_mono_s(), t0_wall = bench_wall_s();
    CURLcode cc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    fclose(out);
    const char *idp = answer ? strstr(answer, "\"requestId\":\"") : NULL;
    char uuid[64] = "";
    if (cc != CURLE_OK || code != 201 || !idp || sscanf(idp + 13, "%36[0-9a-f-]", uuid) != 1) {
        fprintf(stderr, "backends: stage request answered %ld: %s (log %s)\n", code,
                answer ? answer : curl_easy_strerror(cc), d->log);
        exit(1);
    }
    free(answer);
    char final[16];
    double took = bench_wait_request(d->db, uuid, t0, t0_wall, 3600, final);
    if (strcmp(final, "COMPLETED") != 0) {
        fprintf(stderr, "backends: staging %s ended %s (log %s)\n", dataset,
                *final ? final : "unfinished", d->log);
        exit(1);
    }
    return took;
}

/* Stages the set; r->durable_s: the time the durable reference takes for
 * its bytes, measured before and after; r->cpu_s: the daemon's CPU seconds
 * while it staged, r->upstream_cpu_s the upstream's (pid 0: none). Returns
 * the staging seconds. */
static double staged_around_durable(daemon_t *d, const set_t *s, pid_t upstream, result_t *r)
{
    uint64_t ref = s->bytes < REF_CAP ? s->bytes : REF_CAP;
    double before = bench_durable_best_write_rate("backends", d->dir, ref);
    double cpu0 = bench_cpu_seconds(d->pid), up0 = upstream ? bench_cpu_seconds(upstream) : 0;
    double took = stage_dataset(d, s->name);
    r->cpu_s = bench_cpu_seconds(d->pid) - cpu0;
    r->upstream_cpu_s = upstream ? bench_cpu_seconds(upstream) - up0 : 0;
    double rate = bench_rate_of(before, bench_durable_best_write_rate("backends", d->dir, ref));
    r->durable_s = rate > 0 ? (double)s->bytes / rate : 0;
    return took;
}

/* ---- direct reads ------------------------------------------------------------------ */

/* `cat` of the set's files, `workers` processes each on its share. */
static double direct_cat(const set_t *s, const char *root, int workers)
{
    double t0 = bench_mono_s();
    pid_t *pids = calloc((size_t)workers, sizeof(*pids));
    for (int w = 0; w < workers; w++) {
        if ((pids[w] = fork()) == 0) {
            char **argv = calloc(s->n + 2, sizeof(*argv));
            size_t k = 0;
            argv[k++] = "cat";
            for (size_t i = (size_t)w; i < s->n; i += (size_t)workers) {
                argv[k] = malloc(PATH_MAX + 64);
                snprintf(argv[k++], PATH_MAX + 64, "%s/bench/%s", root, s->v[i].key);
            }
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 1);
            execvp("cat", argv);
            _exit(127);
        }
    }
    for (int w = 0; w < workers; w++) {
        int st;
        waitpid(pids[w], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "backends: cat failed\n");
            exit(1);
        }
    }
    free(pids);
    return bench_mono_s() - t0;
}

typedef struct {
    si_s3_t *s3;
    const set_t *set;
    const char *root;      /* PUT: where the files are; NULL: GET */
    atomic_size_t next;
    atomic_int failed;
} s3_work_t;

typedef struct {
    uint64_t got;
} sink_t;

static int discard(void *arg, const void *data, size_t len)
{
    sink_t *k = arg;
    (void)data;
    k->got += len;
    return 0;
}

static void *s3_worker(void *arg)
{
    s3_work_t *w = arg;
    si_error_t err;
    si_s3_xfer_t *x = si_s3_xfer_new(w->s3, &err);
    for (size_t i; x && (i = atomic_fetch_add(&w->next, 1)) < w->set->n;) {
        const obj_t *o = &w->set->v[i];
        si_s3_response_t rs;
        sink_t k = {0};
        int fd = -1;
        si_s3_request_t rq = {.method = "GET", .bucket = "arch", .key = o->key,
                              .on_data = discard, .arg = &k};
        if (w->root) {
            char path[PATH_MAX + 64];
            snprintf(path, sizeof(path), "%s/bench/%s", w->root, o->key);
            fd = open(path, O_RDONLY);
            rq = (si_s3_request_t){.method = "PUT", .bucket = "arch", .key = o->key,
                                   .body_from_fd = true, .body_fd = fd,
                                   .body_len = (size_t)o->size, .payload_sha256 = o->sum + 7};
        }
        if (si_s3_xfer_perform(x, &rq, &rs, &err) < 0 || rs.status != 200 ||
            rs.curl_code != CURLE_OK || (!w->root && k.got != o->size)) {
            char text[300];
            si_s3_describe(&rs, text, sizeof(text));
            fprintf(stderr, "backends: %s %s: %s\n", rq.method, o->key, text);
            atomic_store(&w->failed, 1);
        }
        si_s3_response_free(&rs);
        if (fd >= 0)
            close(fd);
    }
    si_s3_xfer_free(x);
    return NULL;
}

/* GETs (root NULL) or PUTs of every object of the set, `conns` at a time. */
static double s3_all(si_s3_t *s3, const set_t *s, const char *root, int conns)
{
    s3_work_t w = {s3, s, root, 0, 0};
    double took = run_threads(conns, s3_worker, &w);
    if (atomic_load(&w.failed))
        exit(1);
    return took;
}

/* ---- the two backends ---------------------------------------------------------------- */

static void run_hsm(const char *base, const char *root, set_t *sets, result_t *res)
{
    daemon_t d;
    daemon_init(&d, base, "hsm");
    FILE *f = fopen(d.conf, "w");
    fprintf(f, "state_dir = \"%s\";\ncache: { capacity = %" PRIu64 "L; };\n"
               "archive: { backend = \"hsm\"; hsm: { root = \"%s\"; concurrency = %d; }; };\n",
            d.dir, (sets[0].bytes + sets[1].bytes) * 2, root, HSM_WORKERS);
    fclose(f);
    catalog_sets(d.db, sets, 2, "HSM");
    daemon_start(&d, d.sock);
    for (int s = 0; s < 2; s++) {
        direct_cat(&sets[s], root, HSM_WORKERS); /* both runs read from the page cache */
        res[s].direct_s = direct_cat(&sets[s], root, HSM_WORKERS);
        res[s].staged_s = staged_around_durable(&d, &sets[s], 0, &res[s]);
    }
    daemon_stop(&d);
    bench_remove_tree("backends", d.dir);
}

static void run_s3(const char *base, const char *root, set_t *sets, result_t *res)
{
    si_error_t err;
    /* the upstream: archive mode, its uploads kept online (not yet on tape) */
    daemon_t up, b;
    daemon_init(&up, base, "upstream");
    char secrets[PATH_MAX + 64], portfile[PATH_MAX + 64];
    snprintf(secrets, sizeof(secrets), "%s/secrets", up.dir);
    snprintf(portfile, sizeof(portfile), "%s/s3.port", up.dir);
    write_secret_file(secrets, " 0 0");
    FILE *f = fopen(up.conf, "w");
    fprintf(f, "state_dir = \"%s\";\ncache: { capacity = %" PRIu64 "L; };\n"
               "s3: { enabled = true; port = 0; bind = \"127.0.0.1\"; secrets_file = \"%s\";"
               " archive_buckets = [ \"arch\" ]; threads = 16; };\n"
               "push: { aggregate_window = 86400.0; aggregate_bytes = 1099511627776L; };\n",
            up.dir, (sets[0].bytes + sets[1].bytes) * 2, secrets);
    fclose(f);
    catalog_t *cat = catalog_open(up.db, CATALOG_CREATE, &err);
    if (!cat)
        die(up.db, &err);
    catalog_close(cat);
    daemon_start(&up, portfile);
    usleep(200000);
    f = fopen(portfile, "r");
    int port = 0;
    if (!f || fscanf(f, "%d", &port) != 1)
        die(portfile, NULL);
    fclose(f);
    char endpoint[64];
    snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", port);
    si_s3_conf_t sc = {endpoint, "us-east-1", S3_KEY, S3_SECRET, 10, 120, 0, NULL};
    si_s3_t *s3 = si_s3_new(&sc, &err);
    if (!s3)
        die("s3 client", &err);
    for (int s = 0; s < 2; s++)
        s3_all(s3, &sets[s], root, GETS); /* setup: the upstream holds them online */

    daemon_init(&b, base, "s3");
    /* ranged GETs at once per large object: one (the figures recorded
     * since issue 8) unless $BACKENDS_S3_PARTS says */
    const char *p = getenv("BACKENDS_S3_PARTS");
    char parts[48];
    snprintf(parts, sizeof(parts), "parts = %d;", p && atoi(p) > 0 ? atoi(p) : 1);
    char creds[PATH_MAX + 64];
    snprintf(creds, sizeof(creds), "%s/creds", b.dir);
    write_secret_file(creds, "");
    f = fopen(b.conf, "w");
    fprintf(f, "state_dir = \"%s\";\ncache: { capacity = %" PRIu64 "L; };\n"
               "archive: { backend = \"s3\"; s3: { endpoint = \"%s\"; credentials_file = \"%s\";"
               " buckets = ( { bucket = \"bench\"; upstream = \"arch\"; } );"
               " gets = %d; %s timeout = 120; }; };\n",
            b.dir, (sets[0].bytes + sets[1].bytes) * 2, endpoint, creds, GETS, parts);
    fclose(f);
    catalog_sets(b.db, sets, 2, "S3");
    daemon_start(&b, b.sock);
    for (int s = 0; s < 2; s++) {
        s3_all(s3, &sets[s], NULL, GETS); /* all read what the upstream's page cache holds */
        res[s].direct_s = s3_all(s3, &sets[s], NULL, GETS);
        res[s].staged_s = staged_around_durable(&b, &sets[s], up.pid, &res[s]);
    }
    daemon_stop(&b);
    daemon_stop(&up);
    si_s3_free(s3);
    bench_remove_tree("backends", b.dir);
    bench_remove_tree("backends", up.dir);
}

/* ---- report ------------------------------------------------------------------------------ */

static double mbps(uint64_t bytes, double s)
{
    return s > 0 ? bytes / s / 1e6 : 0;
}

/* The reference time of a set: direct alone, or the slower of direct and
 * the durable write (the true limit of staging). */
static double ref_s(const result_t *r, bool durable)
{
    return durable && r->durable_s > r->direct_s ? r->durable_s : r->direct_s;
}

/* Both daemons' CPU seconds per GB staged, over n results of bytes. */
static double cpu_per_gb(const result_t *r, size_t n, uint64_t bytes)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += r[i].cpu_s + r[i].upstream_cpu_s;
    return s / ((double)bytes / 1e9);
}

/* staged throughput / reference throughput over both sets (time ratio) */
static double overall_ratio(const result_t *r, bool durable)
{
    return (ref_s(&r[0], durable) + ref_s(&r[1], durable)) / (r[0].staged_s + r[1].staged_s);
}

int main(int argc, char **argv)
{
    const bench_opts_t o = bench_options(argc, argv);
    char self[PATH_MAX], bindir[PATH_MAX];
    snprintf(self, sizeof(self), "%s", argv[0]);
    snprintf(bindir, sizeof(bindir), "%s", dirname(self));
    if (getenv("STAGEIND"))
        snprintf(g_stageind, sizeof(g_stageind), "%s", getenv("STAGEIND"));
    else
        snprintf(g_stageind, sizeof(g_stageind), "%s/../../daemon/stageind", bindir);
    if (access(g_stageind, X_OK) < 0) {
        fprintf(stderr, "backends: %s: not built (make -C daemon, or set $STAGEIND)\n",
                g_stageind);
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char base[PATH_MAX], root[PATH_MAX + 16];
    snprintf(base, sizeof(base), "%s/backends-bench.XXXXXX", o.dir);
    if (!mkdtemp(base))
        die(base, NULL);
    snprintf(g_base, sizeof(g_base), "%s", base);
    atexit(cleanup);
    snprintf(root, sizeof(root), "%s/archive", base);
    mkdir(root, 0755);
    set_t sets[2] = {{.name = "small"}, {.name = "large"}};
    make_set(&sets[0], root, o.quick ? 200 : 1000, MIB);
    make_set(&sets[1], root, o.quick ? 2 : 10, o.quick ? 256 * MIB : 1024 * MIB);
    const char *only = getenv("BACKENDS_ONLY");
    if (only && strcmp(only, "hsm") != 0 && strcmp(only, "s3") != 0) {
        fprintf(stderr, "backends: BACKENDS_ONLY=%s: not hsm or s3\n", only);
        return 2;
    }
    const char *names[] = {"s3", "hsm"}, *direct[] = {"S3 GET x8", "cat x4"};
    result_t all[2][2];
    bool ran[2] = {!only || strcmp(only, "s3") == 0, !only || strcmp(only, "hsm") == 0};
    if (ran[1])
        run_hsm(base, root, sets, all[1]);
    if (ran[0])
        run_s3(base, root, sets, all[0]);

    if (o.json) {
        printf("{\"small_objects\":%zu,\"small_object_bytes\":%" PRIu64 ",\"large_objects\":%zu,"
               "\"large_object_bytes\":%" PRIu64 ",\"s3_gets\":%d,\"hsm_workers\":%d",
               sets[0].n, sets[0].v[0].size, sets[1].n, sets[1].v[0].size, GETS, HSM_WORKERS);
        for (int b = 0; b < 2; b++) {
            if (!ran[b])
                continue;
            for (int s = 0; s < 2; s++) {
                const result_t *r = &all[b][s];
                const char *n = names[b], *set = sets[s].name;
                printf(",\"%s_%s_direct_MBps\":%.1f,\"%s_%s_durable_MBps\":%.1f,"
                       "\"%s_%s_staged_MBps\":%.1f,\"%s_%s_ratio\":%.3f,"
                       "\"%s_%s_ratio_durable\":%.3f,\"%s_%s_cpu_s_per_gb\":%.2f,"
                       "\"%s_%s_upstream_cpu_s_per_gb\":%.2f,\"%s_%s_cpu_bound_MBps\":%.1f",
                       n, set, mbps(sets[s].bytes, r->direct_s), n, set,
                       mbps(sets[s].bytes, r->durable_s), n, set, mbps(sets[s].bytes, r->staged_s),
                       n, set, r->direct_s / r->staged_s, n, set, ref_s(r, true) / r->staged_s,
                       n, set, r->cpu_s / ((double)sets[s].bytes / 1e9), n, set,
                       r->upstream_cpu_s / ((double)sets[s].bytes / 1e9), n, set,
                       bench_cpu_bound_mb_per_s(cpu_per_gb(r, 1, sets[s].bytes)));
            }
            printf(",\"%s_backend_ratio\":%.3f,\"%s_backend_ratio_durable\":%.3f", names[b],
                   overall_ratio(all[b], false), names[b], overall_ratio(all[b], true));
        }
        printf("}\n");
        return 0;
    }
    static const si_column_t cols[] = {
        {"backend", SI_COL_STR},       {"objects", SI_COL_STR},
        {"direct", SI_COL_STR},        {"direct_MB_s", SI_COL_REAL},
        {"durable_MB_s", SI_COL_REAL}, {"staged_MB_s", SI_COL_REAL},
        {"ratio", SI_COL_REAL},        {"ratio_durable", SI_COL_REAL},
        {"cpu_s_per_GB", SI_COL_REAL}, {"upstream_cpu_s_per_GB", SI_COL_REAL},
        {"cpu_bound_MB_s", SI_COL_REAL}, {"of_cpu_bound", SI_COL_REAL},
    };
    si_table_t *t = si_table_new(cols, sizeof(cols) / sizeof(cols[0]));
    for (int b = 0; b < 2; b++) {
        if (!ran[b])
            continue;
        for (int s = 0; s < 2; s++) {
            const result_t *r = &all[b][s];
            char what[64];
            snprintf(what, sizeof(what), "%zu x %" PRIu64 " MiB", sets[s].n,
                     sets[s].v[0].size / MIB);
            si_table_row(t);
            si_table_str(t, names[b]);
            si_table_str(t, what);
            si_table_str(t, direct[b]);
            si_table_real(t, mbps(sets[s].bytes, r->direct_s));
            si_table_real(t, mbps(sets[s].bytes, r->durable_s));
            si_table_real(t, mbps(sets[s].bytes, r->staged_s));
            si_table_real(t, r->direct_s / r->staged_s);
            si_table_real(t, ref_s(r, true) / r->staged_s);
            si_table_real(t, r->cpu_s / ((double)sets[s].bytes / 1e9));
            si_table_real(t, r->upstream_cpu_s / ((double)sets[s].bytes / 1e9));
            double bound = bench_cpu_bound_mb_per_s(cpu_per_gb(r, 1, sets[s].bytes));
            si_table_real(t, bound);
            si_table_real(t, bound > 0 ? mbps(sets[s].bytes, r->staged_s) / bound : 0);
        }
        const result_t *r = all[b];
        uint64_t bytes = sets[0].bytes + sets[1].bytes;
        si_table_row(t);
        si_table_str(t, names[b]);
        si_table_str(t, "all");
        si_table_str(t, direct[b]);
        si_table_real(t, mbps(bytes, r[0].direct_s + r[1].direct_s));
        si_table_real(t, mbps(bytes, r[0].durable_s + r[1].durable_s));
        si_table_real(t, mbps(bytes, r[0].staged_s + r[1].staged_s));
        si_table_real(t, overall_ratio(r, false));
        si_table_real(t, overall_ratio(r, true));
        si_table_real(t, (r[0].cpu_s + r[1].cpu_s) / ((double)bytes / 1e9));
        si_table_real(t, (r[0].upstream_cpu_s + r[1].upstream_cpu_s) / ((double)bytes / 1e9));
        double bound = bench_cpu_bound_mb_per_s(cpu_per_gb(r, 2, bytes));
        si_table_real(t, bound);
        si_table_real(t, bound > 0 ? mbps(bytes, r[0].staged_s + r[1].staged_s) / bound : 0);
    }
    si_table_print(t, stdout, false);
    si_table_free(t);
    return 0;
}
