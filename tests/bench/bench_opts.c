#include "config.h"
#include "tests/bench/bench_opts.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

bench_opts_t bench_options(int argc, char **argv)
{
    static const struct option options[] = {
        {"quick", no_argument, NULL, 'q'},
        {"json", no_argument, NULL, 'j'},
        {"dir", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bench_opts_t o = {.dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp"};
    int opt;
    while ((opt = getopt_long(argc, argv, "qjd:h", options, NULL)) != -1) {
        switch (opt) {
        case 'q':
            o.quick = true;
            break;
        case 'j':
            o.json = true;
            break;
        case 'd':
            o.dir = optarg;
            break;
        default:
            fprintf(opt == 'h' ? stdout : stderr, "usage: %s [--quick] [--json] [--dir DIR]\n",
                    argv[0]);
            exit(opt == 'h' ? 0 : 2);
        }
    }
    if (optind != argc) {
        fprintf(stderr, "usage: %s [--quick] [--json] [--dir DIR]\n", argv[0]);
        exit(2);
    }
    return o;
}

double bench_mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

double bench_wall_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

void bench_die(const char *prog, const char *what, const char *why)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, why ? why : strerror(errno));
    exit(1);
}

double bench_cpu_seconds(int pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = 0;
    const char *p = strrchr(line, ')'); /* the name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (p)
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double bench_cpu_bound_mb_per_s(double cpu_s_per_gb)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cpu_s_per_gb > 0 && cores > 0 ? (double)cores / cpu_s_per_gb * 1e3 : 0;
}

double bench_self_cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* The references' source buffer: not zeros, so that nothing compresses it;
 * aligned for direct I/O. */
static unsigned char *reference_buffer(const char *prog, size_t size)
{
    unsigned char *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, size) != 0)
        bench_die(prog, "durable reference", "out of memory");
    uint64_t x = UINT64_C(0x9e3779b97f4a7c15);
    for (size_t i = 0; i + 8 <= size; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(buf + i, &x, 8);
    }
    return buf;
}

/* One reference stream: bytes written to dir/durable-reference (direct:
 * whole 4 MiB writes with O_DIRECT, a tail through the page cache), then
 * fsync'd; with flush_every > 0 also fdatasync'd after each flush_every
 * bytes (and written in pieces no larger); bytes/s including the syncs. */
static double durable_stream(const char *prog, const char *dir, uint64_t bytes, bool direct,
                             uint64_t flush_every)
{
    enum { CHUNK = 4 << 20, WRITEBACK_EVERY = 8 << 20 };
    size_t piece = flush_every && flush_every < CHUNK ? (size_t)flush_every : CHUNK;
    sync(); /* what earlier cases left dirty is not this write's to flush */
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/durable-reference", dir);
    unsigned char *buf = reference_buffer(prog, CHUNK);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (direct ? O_DIRECT : 0), 0600);
    if (fd < 0 && direct && errno == EINVAL) /* no direct I/O here: the buffered stream */
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        bench_die(prog, path, NULL);
    double t0 = bench_mono_s();
    for (uint64_t done = 0, from = 0, flushed = 0; done < bytes;) {
        size_t n = bytes - done < piece ? (size_t)(bytes - done) : piece;
        if (direct && n % 4096) /* the tail: no whole block */
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_DIRECT);
        if (write(fd, buf, n) != (ssize_t)n)
            bench_die(prog, path, NULL);
        done += n;
        if (flush_every && done - flushed >= flush_every) {
            if (fdatasync(fd) < 0)
                bench_die(prog, path, NULL);
            flushed = done;
        }
        /* write-back started as the stream goes, so that the disk writes
         * while the next bytes are copied: the fsync then waits for the
         * last few MiB only (measured here: 1.5-1.8 GB/s for 256 MiB, where
         * writing everything first and then fsync gave 0.4-1.1 GB/s; the
         * reference is the disk's limit, not the page cache's order) */
        if (!direct && done - from >= WRITEBACK_EVERY) {
            sync_file_range(fd, (off_t)from, (off_t)(done - from), SYNC_FILE_RANGE_WRITE);
            from = done;
        }
    }
    if (fsync(fd) < 0)
        bench_die(prog, path, NULL);
    double took = bench_mono_s() - t0;
    close(fd);
    unlink(path);
    free(buf);
    return took > 0 ? (double)bytes / took : 0;
}

double bench_durable_write_rate(const char *prog, const char *dir, uint64_t bytes)
{
    return durable_stream(prog, dir, bytes, false, 0);
}

double bench_durable_direct_write_rate(const char *prog, const char *dir, uint64_t bytes)
{
    return durable_stream(prog, dir, bytes, true, 0);
}

double bench_durable_best_write_rate(const char *prog, const char *dir, uint64_t bytes)
{
    double buffered = bench_durable_write_rate(prog, dir, bytes);
    double direct = bench_durable_direct_write_rate(prog, dir, bytes);
    return buffered > direct ? buffered : direct;
}

double bench_durable_windowed_write_rate(const char *prog, const char *dir, uint64_t bytes,
                                         uint64_t window)
{
    return durable_stream(prog, dir, bytes, true, window);
}

double bench_rate_of(double before, double after)
{
    return before > 0 && after > 0 ? 2 * before * after / (before + after) : 0;
}

void bench_print_results(const si_table_t *t, const char *name, bool quick, bool json)
{
    if (!json) {
        si_table_print(t, stdout, false);
        return;
    }
    char *rows = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&rows, &len);
    if (!mem)
        bench_die(name, "results", NULL);
    si_table_print(t, mem, true);
    fclose(mem);
    while (len && rows[len - 1] == '\n')
        rows[--len] = '\0';
    printf("{\"benchmark\":\"%s\",\"quick\":%s,\"results\":%s}\n", name,
           quick ? "true" : "false", rows);
    free(rows);
}

void bench_remove_tree(const char *prog, const char *path)
{
    char cmd[PATH_MAX + 16];
    int n = snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    if (n < 0 || (size_t)n >= sizeof(cmd) || system(cmd) != 0)
        fprintf(stderr, "%s: could not remove %s\n", prog, path);
}
