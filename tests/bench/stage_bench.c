/* Staging through stageind: a dataset on three simulated volumes is staged
 * through a real stageind (control API on its Unix socket, recall service,
 * sim backend on the scaled real-time clock, cache writes), and the time it
 * took is set against the scheduler's own prediction for the same workload
 * on the virtual clock, scaled by time_scale, or against the durable write
 * of the same bytes (the faster of buffered and direct, bench_opts.h,
 * before and after the run) where that
 * takes longer: the difference is the daemon's overhead. The control API's throughput comes from tests/bench/control_api,
 * run alongside and merged.
 *   stage [--quick] [--json] [--time-scale S]   (default S = 0.05)
 * Needs daemon/stageind built (or $STAGEIND). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "common/table.h"
#include "daemon/simlib/engine.h"
#include "daemon/volume/volume.h"
#include "tests/bench/bench_opts.h"
#include "tests/bench/bench_request.h"

#define NVOLS 3

static void die(const char *what, const si_error_t *err)
{
    bench_die("stage", what, err ? err->text : NULL);
}

/* Deterministic sizes between 256 KiB and 1.5 MiB. */
static uint64_t file_size(int i)
{
    return 262144 + (uint64_t)((i * 2654435761u) % 1310720u);
}

/* One HTTP request over the Unix socket; the answer's body into out. */
static int http_unix(const char *sock, const char *method, const char *path, const char *body,
                     char *out, size_t outsize)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     method, path, body ? strlen(body) : 0, body ? body : "");
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t got = 0;
    ssize_t r;
    while (got + 1 < outsize && (r = read(fd, out + got, outsize - got - 1)) > 0)
        got += (size_t)r;
    out[got] = 0;
    close(fd);
    int status = 0;
    sscanf(out, "HTTP/1.%*d %d", &status);
    return status;
}

/* Figures from tests/bench/control_api --json. */
static void control_api_figures(const char *bindir, bool quick, double *rps, double *pps)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "'%s/control_api' --json%s", bindir, quick ? " --quick" : "");
    FILE *p = popen(cmd, "r");
    char line[4096] = "";
    if (!p || !fgets(line, sizeof(line), p))
        fprintf(stderr, "stage: %s gave no figures\n", cmd);
    if (p)
        pclose(p);
    const char *a = strstr(line, "\"stage_requests_per_s\":");
    const char *b = strstr(line, "\"status_polls_per_s\":");
    *rps = a ? strtod(a + 23, NULL) : 0;
    *pps = b ? strtod(b + 21, NULL) : 0;
}

int main(int argc, char **argv)
{
    bool quick = false, json = false;
    double scale = 0.05; /* a 45 s locate takes 2.25 s: tape time dominates, as in a library */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--json") == 0)
            json = true;
        else if (strcmp(argv[i], "--time-scale") == 0 && i + 1 < argc)
            scale = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: stage [--quick] [--json] [--time-scale S]\n");
            return 2;
        }
    }
    if (!(scale > 0)) {
        fprintf(stderr, "stage: --time-scale must be > 0\n");
        return 2;
    }
    const int per_vol = quick ? 20 : 80, drives = 4;
    char self[PATH_MAX], bindir[PATH_MAX], stageind[PATH_MAX];
    snprintf(self, sizeof(self), "%s", argv[0]);
    snprintf(bindir, sizeof(bindir), "%s", dirname(self));
    if (getenv("STAGEIND"))
        snprintf(stageind, sizeof(stageind), "%s", getenv("STAGEIND"));
    else
        snprintf(stageind, sizeof(stageind), "%s/../../daemon/stageind", bindir);
    if (access(stageind, X_OK) < 0) {
        fprintf(stderr, "stage: %s: not built (make -C daemon, or set $STAGEIND)\n", stageind);
        return 1;
    }

    si_error_t err = {{0}};
    char dir[PATH_MAX], state[PATH_MAX + 16], vdir[PATH_MAX + 32], path[PATH_MAX + 64];
    snprintf(dir, sizeof(dir), "%s/stage-bench.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        die("mkdtemp", NULL);
    snprintf(state, sizeof(state), "%s/state", dir);
    snprintf(vdir, sizeof(vdir), "%s/volumes", state);
    snprintf(path, sizeof(path), "%s/catalog.db", state);
    if (mkdir(state, 0755) < 0)
        die(state, NULL);
    catalog_t *cat = catalog_open(path, CATALOG_CREATE, &err);
    if (!cat)
        die("catalog", &err);

    /* ---- the workload: volumes written for real, recorded, one dataset */
    int n = NVOLS * per_vol;
    sched_file_t *files = calloc((size_t)n, sizeof(*files));
    simlib_config_t cfg;
    simlib_config_default(&cfg);
    cfg.drives = drives;
    char *manifest = NULL;
    size_t mlen = 0;
    FILE *mf = open_memstream(&manifest, &mlen);
    uint64_t bytes = 0;
    unsigned char *buf = malloc(1600000);
    for (int v = 0; v < NVOLS; v++) {
        char label[16];
        snprintf(label, sizeof(label), "B%05d", v + 1);
        tapevol_member_t *m = calloc((size_t)per_vol, sizeof(*m));
        char (*keys)[32] = calloc((size_t)per_vol, 32);
        char (*srcs)[PATH_MAX + 64] = calloc((size_t)per_vol, PATH_MAX + 64);
        for (int i = 0; i < per_vol; i++) {
            int k = v * per_vol + i;
            uint64_t size = file_size(k);
            for (uint64_t b = 0; b < size; b++)
                buf[b] = (unsigned char)(b * 7 + (uint64_t)k * 13);
            snprintf(srcs[i], PATH_MAX + 64, "%s/src", dir);
            FILE *f = fopen(srcs[i], "wb");
            if (!f || fwrite(buf, 1, size, f) != size || fclose(f) != 0)
                die(srcs[i], NULL);
            snprintf(srcs[i], PATH_MAX + 64, "%s/src%d", dir, k);
            char tmp[PATH_MAX + 64];
            snprintf(tmp, sizeof(tmp), "%s/src", dir);
            if (rename(tmp, srcs[i]) < 0)
                die(srcs[i], NULL);
            snprintf(keys[i], 32, "f%05d", k);
            m[i] = (tapevol_member_t){.bucket = "bench", .key = keys[i], .path = srcs[i],
                                      .fd = -1, .size = size};
            fprintf(mf, "bench/%s\n", keys[i]);
            bytes += size;
        }
        tapevol_listing_t *l = NULL;
        tapevol_info_t info;
        tapevol_t *vol = NULL;
        if (tapevol_create(vdir, label, "LTO-9", 18000000000000ULL, &err) < 0 ||
            !(vol = tapevol_open(vdir, label, TAPEVOL_RDWR, &err)) ||
            tapevol_append(vol, m, (size_t)per_vol, &l, &err) < 0 ||
            tapevol_info(vol, &info, &err) < 0 ||
            tapevol_catalog_record(cat, &info, l, 1, NULL, &err) < 0 ||
            simlib_config_add_volume(&cfg, label, info.used, &err) < 0)
            die(label, &err);
        for (int i = 0; i < per_vol; i++) {
            sched_file_t *f = &files[v * per_vol + i];
            int64_t id;
            if (catalog_object_lookup(cat, "bench", keys[i], &id, &err) < 0)
                die(keys[i], &err);
            f->object = (uint64_t)id;
            f->ncopies = 1;
            f->copies[0] = (sched_copy_t){v, l->entries[i].position, l->entries[i].size};
            unlink(srcs[i]);
        }
        tapevol_listing_free(l);
        tapevol_close(vol);
        free(m);
        free(keys);
        free(srcs);
    }
    free(buf);
    fclose(mf);
    FILE *min = fmemopen(manifest, mlen, "r");
    catalog_dataset_attrs_t attrs = {"bench", 0, 0, 0644, NULL, false};
    if (catalog_import_manifest(cat, &attrs, "bench.manifest", min, NULL, &err) < 0)
        die("dataset", &err);
    fclose(min);
    free(manifest);
    catalog_close(cat);

    /* ---- the prediction: the same request on the virtual clock */
    const sched_policy_t *policy = sched_policy_find(SCHED_DEFAULT_POLICY, &err);
    sched_options_t so;
    sched_options_default(&so);
    if (cfg.slots < cfg.nvolumes)
        cfg.slots = cfg.nvolumes;
    simlib_t *lib = simlib_new(&cfg, policy, &so, NULL, &err);
    sched_request_t req = {1, 0, 0};
    simlib_stats_t st;
    if (!lib || simlib_submit(lib, 0, &req, files, (size_t)n, &err) < 0 ||
        simlib_run(lib, &err) < 0)
        die("virtual run", &err);
    simlib_stats(lib, &st);
    simlib_free(lib);
    simlib_config_free(&cfg);
    free(files);
    double predicted = st.makespan * scale;

    /* ---- the daemon */
    char conf[PATH_MAX + 32], sock[PATH_MAX + 32], log[PATH_MAX + 32];
    snprintf(conf, sizeof(conf), "%s/stagein.conf", dir);
    snprintf(sock, sizeof(sock), "%s/sock", dir);
    snprintf(log, sizeof(log), "%s/stageind.log", dir);
    FILE *cf = fopen(conf, "w");
    fprintf(cf, "state_dir = \"%s\";\nlibrary: { drives = %d; time_scale = %g; };\n"
                "cache: { capacity = %llu; };\n",
            state, drives, scale, (unsigned long long)(bytes * 2));
    fclose(cf);
    pid_t pid = fork();
    if (pid == 0) {
        execl(stageind, "stageind", "-F", "-c", conf, "-d", state, "-S", sock, "-p", "0", "-l",
              log, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && access(sock, F_OK) < 0; i++)
        usleep(10000);
    char answer[8192];
    uint64_t ref_bytes = bytes < (1ull << 30) ? bytes : (1ull << 30);
    double ref_before = bench_durable_best_write_rate("stage", state, ref_bytes);
    double t0 = bench_mono_s(), t0_wall = bench_wall_s();
    int code = http_unix(sock, "POST", "/api/v1/stage", "{\"datasets\":[\"bench\"]}", answer,
                         sizeof(answer));
    const char *idp = strstr(answer, "\"requestId\":\"");
    if (code != 201 || !idp) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        fprintf(stderr, "stage: stage request answered %d (log %s)\n", code, log);
        return 1;
    }
    char uuid[64] = "";
    sscanf(idp + 13, "%36[0-9a-f-]", uuid);
    char final[16];
    double achieved = bench_wait_request(path, uuid, t0, t0_wall, predicted * 3 + 60, final);
    double ref_rate =
        bench_rate_of(ref_before, bench_durable_best_write_rate("stage", state, ref_bytes));
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    if (strcmp(final, "COMPLETED") != 0) {
        fprintf(stderr, "stage: the request ended %s (log %s)\n", *final ? final : "unfinished",
                log);
        return 1;
    }
    bench_remove_tree("stage", dir);

    double rps, pps;
    control_api_figures(bindir, quick, &rps, &pps);
    /* the true limit: the modelled library, or the disk's durable writes
     * of the same bytes where they take longer */
    double durable_s = ref_rate > 0 ? (double)bytes / ref_rate : 0;
    double limit = durable_s > predicted ? durable_s : predicted;
    double overhead = (achieved - limit) / limit * 100;
    if (json) {
        printf("{\"files\":%d,\"bytes\":%llu,\"volumes\":%d,\"drives\":%d,\"time_scale\":%g,"
               "\"mounts\":%llu,\"predicted_virtual_s\":%.1f,\"predicted_s\":%.3f,"
               "\"durable_ref_MBps\":%.1f,\"durable_s\":%.3f,"
               "\"achieved_s\":%.3f,\"overhead_pct\":%.2f,\"stage_requests_per_s\":%.1f,"
               "\"status_polls_per_s\":%.1f}\n",
               n, (unsigned long long)bytes, NVOLS, drives, scale,
               (unsigned long long)st.mounts, st.makespan, predicted, ref_rate / 1e6, durable_s,
               achieved, overhead, rps, pps);
        return 0;
    }
    static const si_column_t cols[] = {{"measure", SI_COL_STR}, {"value", SI_COL_STR}};
    si_table_t *t = si_table_new(cols, 2);
    char v[128];
#define ROW(name, ...)                                                                             \
    do {                                                                                           \
        snprintf(v, sizeof(v), __VA_ARGS__);                                                       \
        si_table_row(t);                                                                           \
        si_table_str(t, name);                                                                     \
        si_table_str(t, v);                                                                        \
    } while (0)
    ROW("workload", "%d files, %.1f MB on %d volumes, %d drives", n, bytes / 1e6, NVOLS, drives);
    ROW("time_scale", "%g", scale);
    ROW("scheduler prediction (virtual clock)", "%.1f s simulated = %.3f s at this scale",
        st.makespan, predicted);
    ROW("durable write of the same bytes", "%.3f s (%.1f MB/s)", durable_s, ref_rate / 1e6);
    ROW("achieved through stageind", "%.3f s", achieved);
    ROW("daemon overhead (vs the longer of the two)", "%.2f %%", overhead);
    ROW("stage requests/s (control_api)", "%.1f", rps);
    ROW("status polls/s (control_api)", "%.1f", pps);
    si_table_print(t, stdout, false);
    si_table_free(t);
    return 0;
}
