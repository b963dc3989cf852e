#include "config.h"
#include "common/text.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool si_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = p + len;
    while (p < end) {
        unsigned c = *p;
        size_t n;
        uint32_t cp;
        if (c < 0x80) {
            p++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if ((size_t)(end - p) <= n)
            return false;
        for (size_t i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        /* reject overlong forms, surrogates and values past U+10FFFF */
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
            (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
            return false;
        p += n + 1;
    }
    return true;
}

int si_key_check(const char *key, size_t len, si_error_t *err)
{
    if (len == 0)
        return si_errprintf(err, "empty object key");
    if (len > SI_KEY_MAX)
        return si_errprintf(err, "object key is %zu bytes, longer than %d", len, SI_KEY_MAX);
    if (memchr(key, '\0', len))
        return si_errprintf(err, "object key contains a NUL byte");
    if (!si_utf8_valid(key, len))
        return si_errprintf(err, "object key is not valid UTF-8");
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)key[i] < 0x20 || key[i] == 0x7f)
            return si_errprintf(err, "object key contains control byte 0x%02x at offset %zu",
                                (unsigned char)key[i], i);
    }
    if (key[0] == '/')
        return si_errprintf(err, "object key starts with '/'");
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && key[i] != '/')
            continue;
        size_t clen = i - start;
        /* a trailing '/' marks a prefix; an empty component elsewhere is "//" */
        if (clen == 0 && i < len)
            return si_errprintf(err, "object key contains '//'");
        if ((clen == 1 && key[start] == '.') ||
            (clen == 2 && key[start] == '.' && key[start + 1] == '.'))
            return si_errprintf(err, "object key contains a '%.*s' path component",
                                (int)clen, key + start);
        start = i + 1;
    }
    return 0;
}

int si_bucket_check(const char *b, size_t len, si_error_t *err)
{
    if (len < SI_BUCKET_MIN || len > SI_BUCKET_MAX)
        return si_errprintf(err, "bucket name '%.*s' must be %d to %d characters",
                            (int)(len > 80 ? 80 : len), b, SI_BUCKET_MIN, SI_BUCKET_MAX);
    for (size_t i = 0; i < len; i++) {
        char c = b[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '.' && c != '-')
            return si_errprintf(err, "bucket name '%.*s' has invalid character at offset %zu "
                                "(allowed: a-z 0-9 . -)", (int)len, b, i);
        if ((i == 0 || i == len - 1) && !alnum)
            return si_errprintf(err, "bucket name '%.*s' must start and end with a letter or digit",
                                (int)len, b);
        if (c == '.' && i > 0 && b[i - 1] == '.')
            return si_errprintf(err, "bucket name '%.*s' contains '..'", (int)len, b);
    }
    return 0;
}

int si_parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

int si_parse_mode(const char *s, unsigned *mode)
{
    if (!s || !*s)
        return -1;
    unsigned m = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '7')
            return -1;
        m = m * 8 + (unsigned)(*s - '0');
        if (m > 0777)
            return -1;
    }
    *mode = m;
    return 0;
}

int si_parse_i64(const char *s, int64_t *out)
{
    if (!s || !*s)
        return -1;
    const char *digits = (*s == '-') ? s + 1 : s;
    if (*digits < '0' || *digits > '9')
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

int si_parse_iso8601_duration(const char *s, int64_t *seconds, si_error_t *err)
{
    static const char date_units[] = "WD", time_units[] = "HMS";
    static const int64_t date_scale[] = {7 * 86400, 86400}, time_scale[] = {3600, 60, 1};
    if (!s || s[0] != 'P' || !s[1])
        return si_errprintf(err, "'%.40s' is not an ISO 8601 duration (P[nW][nD][T[nH][nM][nS]],"
                                 " e.g. P1D or PT12H)", s ? s : "");
    int64_t total = 0;
    bool in_time = false, any = false;
    size_t next_unit = 0; /* units come in order, each once */
    for (const char *p = s + 1; *p;) {
        if (*p == 'T') {
            if (in_time || !p[1])
                return si_errprintf(err, "'%.40s': misplaced 'T' in the duration", s);
            in_time = true;
            next_unit = 0;
            p++;
            continue;
        }
        if (*p < '0' || *p > '9')
            return si_errprintf(err, "'%.40s': expected a number at '%.8s'", s, p);
        int64_t n = 0;
        while (*p >= '0' && *p <= '9') {
            if (n > (INT64_MAX - 9) / 10)
                return si_errprintf(err, "'%.40s': number too large", s);
            n = n * 10 + (*p++ - '0');
        }
        const char *units = in_time ? time_units : date_units;
        const int64_t *scale = in_time ? time_scale : date_scale;
        const char *u = *p ? strchr(units + next_unit, *p) : NULL;
        if (!u)
            return si_errprintf(err, "'%.40s': unit '%.1s' not allowed there (date: W, D; after"
                                     " T: H, M, S; years and months are not accepted)",
                                s, *p ? p : "?");
        size_t idx = (size_t)(u - units);
        if (n > (INT64_MAX / 2 - total) / scale[idx])
            return si_errprintf(err, "'%.40s': duration too long", s);
        total += n * scale[idx];
        next_unit = idx + 1;
        any = true;
        p++;
    }
    if (!any)
        return si_errprintf(err, "'%.40s': the duration names no amount", s);
    if (total < 1)
        return si_errprintf(err, "'%.40s': the duration must be at least one second", s);
    *seconds = total;
    return 0;
}

char *si_format_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB", "PB", "EB"};
    double v = (double)bytes;
    size_t u = 0;
    while (v >= 1000.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1000.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

char *si_format_duration(double seconds, char *buf, size_t size)
{
    if (seconds < 0 || !isfinite(seconds)) {
        snprintf(buf, size, "-");
    } else if (seconds < 60) {
        snprintf(buf, size, "%.1fs", seconds);
    } else {
        uint64_t s = (uint64_t)llround(seconds);
        if (s < 3600)
            snprintf(buf, size, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
        else
            snprintf(buf, size, "%" PRIu64 "h%02" PRIu64 "m%02" PRIu64 "s", s / 3600,
                     (s / 60) % 60, s % 60);
    }
    return buf;
}

void si_hex(const unsigned char *bytes, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[bytes[i] >> 4];
        out[2 * i + 1] = digits[bytes[i] & 0xf];
    }
    out[2 * len] = '\0';
}

int si_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int si_unhex(const char *hex, size_t len, unsigned char *out)
{
    for (size_t i = 0; i < len; i++) {
        int hi = si_hex_digit(hex[2 * i]), lo = hi >= 0 ? si_hex_digit(hex[2 * i + 1]) : -1;
        if (lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

unsigned si_digits(uint64_t v, unsigned base)
{
    unsigned n = 1;
    while (v >= base) {
        v /= base;
        n++;
    }
    return n;
}

bool si_is_lower_hex(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

int si_dataset_check(const char *name, si_error_t *err)
{
    size_t n = strlen(name);
    if (n == 0 || n > 128)
        return si_errprintf(err, "dataset name '%.40s' must be 1 to 128 characters", name);
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return si_errprintf(err, "dataset name '%s' has invalid character '%c' "
                                "(allowed: A-Z a-z 0-9 . _ -)", name, c);
    }
    if (name[0] == '.' || name[0] == '-')
        return si_errprintf(err, "dataset name '%s' must not start with '.' or '-'", name);
    return 0;
}

uint32_t si_fnv1a(uint32_t h, const void *bytes, size_t len)
{
    for (const unsigned char *p = bytes, *end = p + len; p < end; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}
