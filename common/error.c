#include "config.h"
#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int si_errprintf(si_error_t *err, const char *fmt, ...)
{
    int saved = errno;
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof(err->text), fmt, ap);
        va_end(ap);
    }
    errno = saved;
    return -1;
}

int si_errnoprintf(si_error_t *err, int errnum, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->text, sizeof(err->text), fmt, ap);
        va_end(ap);
    }
    errno = errnum;
    return -1;
}

int si_errprefix(si_error_t *err, const char *fmt, ...)
{
    int saved = errno;
    if (err) {
        char prefix[256];
        char old[sizeof(err->text)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof(prefix), fmt, ap);
        va_end(ap);
        memcpy(old, err->text, sizeof(old));
        snprintf(err->text, sizeof(err->text), "%s: %s", prefix, old);
    }
    errno = saved;
    return -1;
}
