/* Human-readable error text, filled by the callee, printed by the caller. */
#ifndef SI_ERROR_H
#define SI_ERROR_H

#include <stddef.h>

typedef struct {
    char text[512];
} si_error_t;

/* Formats into err (may be NULL) and returns -1, so a failing path reads
 * `return si_errprintf(err, "...")`. errno is preserved. */
int si_errprintf(si_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Like si_errprintf, and sets errno to errnum so callers can tell the kind
 * of failure (ENOENT, EACCES, ...) from the text. Returns -1. */
int si_errnoprintf(si_error_t *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefixes existing text: "context: previous text". Returns -1. */
int si_errprefix(si_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
