#include "config.h"
#include "tests/bench/bench_opts.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int bench_parse_options(int argc, char **argv, bench_opts_t *o)
{
    static const struct option options[] = {
        {"quick", no_argument, NULL, 'q'},
        {"json", no_argument, NULL, 'j'},
        {"dir", required_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    o->quick = false;
    o->json = false;
    o->dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    int opt;
    while ((opt = getopt_long(argc, argv, "qjd:h", options, NULL)) != -1) {
        switch (opt) {
        case 'q':
            o->quick = true;
            break;
        case 'j':
            o->json = true;
            break;
        case 'd':
            o->dir = optarg;
            break;
        default:
            fprintf(opt == 'h' ? stdout : stderr, "usage: %s [--quick] [--json] [--dir DIR]\n",
                    argv[0]);
            return opt == 'h' ? 0 : 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "usage: %s [--quick] [--json] [--dir DIR]\n", argv[0]);
        return 2;
    }
    return -1;
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
