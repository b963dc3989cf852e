#include "config.h"
#include "common/tap.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* TAP state is per test process; a unit test is one process. */
static int tap_planned = -1;
static int tap_run;
static int tap_failed;

void plan(int tests)
{
    tap_planned = tests;
    printf("1..%d\n", tests);
    fflush(stdout);
}

void plan_skip_all(const char *reason)
{
    printf("1..0 # SKIP %s\n", reason);
    fflush(stdout);
    exit(0);
}

static bool report(bool cond, const char *file, int line, const char *fmt, va_list ap)
{
    tap_run++;
    printf("%sok %d - ", cond ? "" : "not ", tap_run);
    vprintf(fmt, ap);
    printf("\n");
    if (!cond) {
        tap_failed++;
        printf("#   Failed test at %s line %d\n", file, line);
    }
    fflush(stdout);
    return cond;
}

bool ok_at(bool cond, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(cond, file, line, fmt, ap);
    va_end(ap);
    return cond;
}

bool is_str_at(const char *got, const char *want, const char *file, int line,
               const char *fmt, ...)
{
    bool cond = (got && want) ? strcmp(got, want) == 0 : got == want;
    va_list ap;
    va_start(ap, fmt);
    report(cond, file, line, fmt, ap);
    va_end(ap);
    if (!cond)
        printf("#          got: '%s'\n#     expected: '%s'\n", got ? got : "(null)",
               want ? want : "(null)");
    return cond;
}

bool is_int_at(long long got, long long want, const char *file, int line,
               const char *fmt, ...)
{
    bool cond = got == want;
    va_list ap;
    va_start(ap, fmt);
    report(cond, file, line, fmt, ap);
    va_end(ap);
    if (!cond)
        printf("#          got: %lld\n#     expected: %lld\n", got, want);
    return cond;
}

bool is_near_at(double got, double want, double tolerance, const char *file,
                int line, const char *fmt, ...)
{
    bool cond = fabs(got - want) <= tolerance;
    va_list ap;
    va_start(ap, fmt);
    report(cond, file, line, fmt, ap);
    va_end(ap);
    if (!cond)
        printf("#          got: %.6g\n#     expected: %.6g +- %.6g\n", got, want, tolerance);
    return cond;
}

void skip(int count, const char *reason)
{
    for (int i = 0; i < count; i++)
        printf("ok %d # SKIP %s\n", ++tap_run, reason);
    fflush(stdout);
}

void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

int done_testing(void)
{
    if (tap_planned < 0)
        printf("1..%d\n", tap_run);
    else if (tap_planned != tap_run)
        printf("# planned %d tests but ran %d\n", tap_planned, tap_run);
    fflush(stdout);
    return (tap_failed || (tap_planned >= 0 && tap_planned != tap_run)) ? 1 : 0;
}

void tap_fill_pattern(unsigned char *buf, size_t len, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = (unsigned char)x;
    }
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    if (remove(path) != 0)
        diag("could not remove %s: %s", path, strerror(errno));
    return 0;
}

void tap_remove_tree(const char *path)
{
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        diag("could not remove %s: %s", path, strerror(errno));
}
