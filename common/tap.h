/* A small libtap-style TAP producer for unit tests. */
#ifndef SI_TAP_H
#define SI_TAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void plan(int tests);
void plan_skip_all(const char *reason);
bool ok_at(bool cond, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool is_str_at(const char *got, const char *want, const char *file, int line,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));
bool is_int_at(long long got, long long want, const char *file, int line,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));
bool is_near_at(double got, double want, double tolerance, const char *file,
                int line, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void skip(int count, const char *reason);
void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the plan if none was given and returns the exit status. */
int done_testing(void);
/* Fills buf with a reproducible pseudo-random pattern (xorshift) of seed:
 * test data whose bytes differ from one offset to the next. */
void tap_fill_pattern(unsigned char *buf, size_t len, unsigned seed);
/* Removes a test's directory and everything below it (links not
 * followed); what cannot be removed is named in a diag line. */
void tap_remove_tree(const char *path);

#define ok(cond, ...) ok_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_str(got, want, ...) is_str_at((got), (want), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, ...) is_int_at((long long)(got), (long long)(want), __FILE__, __LINE__, __VA_ARGS__)
#define is_near(got, want, tol, ...) is_near_at((got), (want), (tol), __FILE__, __LINE__, __VA_ARGS__)

#endif
