/* The options shared by the benchmarks that write files: --quick, --json,
 * --dir DIR (default $TMPDIR or /tmp). */
#ifndef BENCH_OPTS_H
#define BENCH_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/table.h"

typedef struct {
    bool quick;
    bool json;
    const char *dir;
} bench_opts_t;

/* The options; exits 0 after --help, 2 on bad usage (a benchmark has
 * nothing to clean up before it has parsed them). */
bench_opts_t bench_options(int argc, char **argv);

/* Seconds on the monotonic clock (intervals) and on the wall clock (to
 * compare with times the catalog records). */
double bench_mono_s(void);
double bench_wall_s(void);
/* CPU seconds (user + system) process pid has used so far (/proc; 0 when
 * it cannot be read). */
double bench_cpu_seconds(int pid);
/* CPU seconds (user + system) this process has used so far (getrusage):
 * on a shared machine, unlike wall time, hardly moved by the other load. */
double bench_self_cpu_seconds(void);
/* The CPU bound: the rate (MB/s) that a workload costing cpu_s_per_gb CPU
 * seconds per GB, over all its processes, reaches with every core busy
 * (0 when nothing was measured). Where a rate meets it, the CPUs bind. */
double bench_cpu_bound_mb_per_s(double cpu_s_per_gb);
/* The durable-write reference of the staging benchmarks: `bytes` written
 * to a new file in dir as one stream of 4 MiB writes, write-back started
 * every 8 MiB, then fsync'd (`dd bs=4M conv=fsync` that does not leave the
 * disk idle while it copies); bytes/s including the fsync. What is dirty
 * on the file system before it is synced first, not counted. Exits on an
 * error (prog names the caller). */
double bench_durable_write_rate(const char *prog, const char *dir, uint64_t bytes);
/* The same stream written with O_DIRECT (whole 4 MiB blocks; buffered
 * where the file system has no direct I/O), then fsync'd: no copy into the
 * page cache, which on a VM that returns freed memory to its host costs
 * more than the disk (here 0.4-0.7 GB/s buffered, 1.2 GB/s direct). */
double bench_durable_direct_write_rate(const char *prog, const char *dir, uint64_t bytes);
/* The faster of the two: the disk's durable limit for a writer free to
 * choose (stageind writes large objects direct). */
double bench_durable_best_write_rate(const char *prog, const char *dir, uint64_t bytes);
/* The direct stream made durable every `window` bytes (fdatasync), as a
 * writer must whose client waits for each file's acknowledgement with no
 * more than `window` bytes in flight: the disk's limit for such a client,
 * where the one-fsync stream is the limit for an unbounded one. */
double bench_durable_windowed_write_rate(const char *prog, const char *dir, uint64_t bytes,
                                         uint64_t window);
/* Two measurements of one rate (before and after a case: the disk is
 * shared and its speed moves) as one rate over both (harmonic mean; 0 when
 * either is 0). */
double bench_rate_of(double before, double after);
/* "PROG: WHAT: WHY" on stderr (WHY NULL: errno's text), then exit 1. */
void bench_die(const char *prog, const char *what, const char *why)
    __attribute__((noreturn));

/* The results on stdout: the table as text, or with json one object
 * {"benchmark":"NAME","quick":Q,"results":[the table's rows]}. */
void bench_print_results(const si_table_t *t, const char *name, bool quick, bool json);
/* Removes path and everything below it (rm -rf); a failure is reported on
 * stderr (prog names the caller), not fatal. */
void bench_remove_tree(const char *prog, const char *path);

#endif
