#include "config.h"
#include "common/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"

void si_strbuf_init(si_strbuf_t *b, size_t limit)
{
    memset(b, 0, sizeof(*b));
    b->limit = limit;
}

static bool reserve(si_strbuf_t *b, size_t extra)
{
    if (b->failed)
        return false;
    if (extra > b->limit || b->len > b->limit - extra) {
        b->failed = true;
        return false;
    }
    if (si_array_grow((void **)&b->data, &b->cap, b->len + extra + 1, 1) < 0) {
        b->failed = true;
        return false;
    }
    return true;
}

bool si_strbuf_reserve(si_strbuf_t *b, size_t extra)
{
    return reserve(b, extra);
}

bool si_strbuf_append(si_strbuf_t *b, const void *data, size_t len)
{
    if (!reserve(b, len))
        return false;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return true;
}

bool si_strbuf_puts(si_strbuf_t *b, const char *s)
{
    return si_strbuf_append(b, s, strlen(s));
}

bool si_strbuf_putc(si_strbuf_t *b, char c)
{
    return si_strbuf_append(b, &c, 1);
}

bool si_strbuf_printf(si_strbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) {
        b->failed = true;
        return false;
    }
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return true;
}

void si_strbuf_reset(si_strbuf_t *b)
{
    b->len = 0;
    b->failed = false;
    if (b->data)
        b->data[0] = '\0';
}

const char *si_strbuf_str(const si_strbuf_t *b)
{
    return b->data ? b->data : "";
}

char *si_strbuf_take(si_strbuf_t *b)
{
    char *s = b->data ? b->data : strdup("");
    size_t limit = b->limit;
    si_strbuf_init(b, limit);
    return s;
}

void si_strbuf_free(si_strbuf_t *b)
{
    free(b->data);
    si_strbuf_init(b, b->limit);
}
