#include "config.h"
#include "daemon/volume/tar.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

/* ustar field offsets and widths (POSIX.1-2008, pax format) */
enum {
    F_NAME = 0, F_NAME_LEN = 100,
    F_MODE = 100, F_UID = 108, F_GID = 116,
    F_SIZE = 124, F_MTIME = 136, F_CHKSUM = 148, F_TYPE = 156,
    F_MAGIC = 257, F_VERSION = 263, F_UNAME = 265, F_GNAME = 297,
    F_PREFIX = 345, F_PREFIX_LEN = 155,
};

static size_t decimal_digits(uint64_t v)
{
    size_t d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* A pax record is "LEN key=value\n" where LEN counts the whole record,
 * its own digits included. */
static size_t record_len(size_t klen, size_t vlen)
{
    size_t body = klen + vlen + 3; /* ' ', '=', '\n' */
    size_t len = body + decimal_digits(body);
    if (decimal_digits(len) != decimal_digits(body))
        len = body + decimal_digits(len);
    return len;
}

static size_t put_record(char *out, size_t size, size_t at, const char *key,
                         const char *value, size_t vlen, size_t *value_at)
{
    size_t klen = strlen(key);
    size_t len = record_len(klen, vlen);
    if (!out)
        return at + len;
    if (at + len > size)
        return 0;
    int n = snprintf(out + at, size - at, "%zu %s=", len, key);
    memcpy(out + at + (size_t)n, value, vlen);
    out[at + len - 1] = '\n';
    if (value_at)
        *value_at = at + (size_t)n;
    return at + len;
}

/* STAGEIN.headers holds several "name: value" lines: '\\', newlines and
 * other control bytes are escaped ("\\", "\n", "\xHH") so that the record
 * is one printable line, as tar tools and `stagein tape dump` show it. */
static bool needs_escape(unsigned char c)
{
    return c == '\\' || c < 0x20 || c == 0x7f;
}

size_t tar_pax_escape(char *out, const char *value)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        if (!needs_escape(*p)) {
            if (out)
                out[n] = (char)*p;
            n++;
        } else if (*p == '\\' || *p == '\n') {
            if (out) {
                out[n] = '\\';
                out[n + 1] = *p == '\n' ? 'n' : '\\';
            }
            n += 2;
        } else {
            if (out) {
                out[n] = '\\';
                out[n + 1] = 'x';
                out[n + 2] = hex[*p >> 4];
                out[n + 3] = hex[*p & 15];
            }
            n += 4;
        }
    }
    if (out)
        out[n] = '\0';
    return n;
}

/* The reverse of tar_pax_escape into a malloc'd string; an escape it does
 * not write, a raw control byte or an escaped NUL is an error. */
static int unescape(const char *v, size_t vlen, const char *key, char **dst, si_error_t *err)
{
    char *s = malloc(vlen + 1);
    size_t n = 0;
    if (!s)
        return si_errprintf(err, "out of memory");
    for (size_t i = 0; i < vlen; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c != '\\') {
            if (needs_escape(c)) {
                si_errprintf(err, "pax record %s has an unescaped control byte 0x%02x at "
                             "byte %zu", key, c, i);
                goto error;
            }
            s[n++] = (char)c;
            continue;
        }
        if (i + 1 < vlen && (v[i + 1] == '\\' || v[i + 1] == 'n')) {
            s[n++] = v[i + 1] == 'n' ? '\n' : '\\';
            i++;
            continue;
        }
        int hi = i + 3 < vlen && v[i + 1] == 'x' ? si_hex_digit(v[i + 2]) : -1;
        int lo = hi >= 0 ? si_hex_digit(v[i + 3]) : -1;
        if (lo < 0 || (hi == 0 && lo == 0)) {
            si_errprintf(err, "pax record %s has a bad escape at byte %zu (expected \\\\, "
                         "\\n or \\xHH, not NUL)", key, i);
            goto error;
        }
        s[n++] = (char)(hi << 4 | lo);
        i += 3;
    }
    s[n] = '\0';
    free(*dst);
    *dst = s;
    return 0;
error:
    free(s);
    return -1;
}

/* STAGEIN.headers as the S3 server stores and serves them: "name: value"
 * lines, each ended by a newline, names HTTP tokens, values without control
 * bytes (a volume is untrusted input: nothing in it may split a response). */
static int check_headers(const char *h, si_error_t *err)
{
    size_t len = strlen(h);
    if (len >= TAR_HEADERS_MAX)
        return si_errprintf(err, "pax record STAGEIN.headers holds %zu bytes (limit %d)", len,
                            TAR_HEADERS_MAX - 1);
    for (size_t at = 0, line = 1; at < len; line++) {
        const char *p = h + at;
        size_t n = strcspn(p, "\n");
        size_t name = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789!#$%&'*+-.^_`|~");
        if (p[n] != '\n' || name == 0 || name + 2 > n || p[name] != ':' || p[name + 1] != ' ')
            return si_errprintf(err, "pax record STAGEIN.headers line %zu is not "
                                "\"name: value\" ended by a newline", line);
        for (size_t i = name + 2; i < n; i++)
            if (((unsigned char)p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
                return si_errprintf(err, "pax record STAGEIN.headers line %zu has a control "
                                    "byte in its value", line);
        at += n + 1;
    }
    return 0;
}

static int check_storage_class(const char *c, si_error_t *err)
{
    size_t n = strspn(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_");
    if (n == 0 || c[n] || n >= TAR_STORAGE_CLASS_MAX)
        return si_errprintf(err, "pax record STAGEIN.storage_class '%.40s' is not a storage "
                            "class ([A-Z_], 1 to %d characters)", c, TAR_STORAGE_CLASS_MAX - 1);
    return 0;
}

/* An escaped record, left out when value is NULL or empty. */
static size_t put_escaped(char *out, size_t size, size_t at, const char *key,
                          const char *value)
{
    if (!at || !value || !*value)
        return at;
    size_t elen = tar_pax_escape(NULL, value);
    char *escaped = malloc(elen + 1);
    if (!escaped)
        return 0;
    tar_pax_escape(escaped, value);
    at = put_record(out, size, at, key, escaped, elen, NULL);
    free(escaped);
    return at;
}

static size_t pax_records(char *out, size_t size, const tar_pax_member_t *m,
                          size_t *checksum_at)
{
    char num[32];
    size_t at = 0;
    size_t blen = strlen(m->bucket), klen = strlen(m->key);
    char *path = malloc(blen + klen + 2);
    if (!path)
        return 0;
    memcpy(path, m->bucket, blen);
    path[blen] = '/';
    memcpy(path + blen + 1, m->key, klen + 1);

    static const char placeholder[] = "sha256:"
        "0000000000000000000000000000000000000000000000000000000000000000";
    _Static_assert(sizeof(placeholder) - 1 == TAR_CHECKSUM_LEN, "checksum length");

    at = put_record(out, size, at, "path", path, blen + klen + 1, NULL);
    if (at) {
        snprintf(num, sizeof(num), "%" PRIu64, m->size);
        at = put_record(out, size, at, "size", num, strlen(num), NULL);
    }
    if (at) {
        snprintf(num, sizeof(num), "%" PRId64, m->mtime);
        at = put_record(out, size, at, "mtime", num, strlen(num), NULL);
    }
    if (at)
        at = put_record(out, size, at, "STAGEIN.bucket", m->bucket, blen, NULL);
    if (at)
        at = put_record(out, size, at, "STAGEIN.key", m->key, klen, NULL);
    at = put_escaped(out, size, at, "STAGEIN.headers", m->headers);
    at = put_escaped(out, size, at, "STAGEIN.storage_class", m->storage_class);
    if (at)
        at = put_record(out, size, at, "STAGEIN.checksum", placeholder, TAR_CHECKSUM_LEN,
                        checksum_at);
    free(path);
    return at;
}

size_t tar_pax_records(char *out, size_t size, const tar_pax_member_t *m, size_t *checksum_at)
{
    return pax_records(out, size, m, checksum_at);
}

size_t tar_pax_records_len(const tar_pax_member_t *m)
{
    return pax_records(NULL, 0, m, NULL);
}

uint64_t tar_member_bytes(const tar_pax_member_t *m)
{
    return TAR_BLOCK + tar_round_up(tar_pax_records_len(m)) + TAR_BLOCK +
           tar_round_up(m->size);
}

/* Octal, zero-padded to width-1 digits and NUL-terminated; a value that
 * does not fit is written as 0 (the pax header carries the true value). */
static void put_octal(unsigned char *field, size_t width, uint64_t v)
{
    uint64_t max = (UINT64_C(1) << (3 * (width - 1))) - 1;
    char tmp[24];
    snprintf(tmp, sizeof(tmp), "%0*" PRIo64, (int)(width - 1), v <= max ? v : 0);
    memcpy(field, tmp, width);
}

/* Fills the ustar name (and prefix) fields; pax "path" holds the real name,
 * so a name longer than both fields is only cut here. */
static void put_name(unsigned char *block, const char *name)
{
    size_t len = strlen(name);
    if (len <= F_NAME_LEN) {
        memcpy(block + F_NAME, name, len);
        return;
    }
    for (size_t i = len - 1; i > 0; i--) {
        if (name[i] != '/')
            continue;
        if (len - i - 1 > F_NAME_LEN)
            break;
        if (i <= F_PREFIX_LEN && i < len - 1) {
            memcpy(block + F_PREFIX, name, i);
            memcpy(block + F_NAME, name + i + 1, len - i - 1);
            return;
        }
    }
    memcpy(block + F_NAME, name, F_NAME_LEN);
}

void tar_header(unsigned char block[TAR_BLOCK], const char *name, char typeflag,
                uint64_t size, int64_t mtime)
{
    memset(block, 0, TAR_BLOCK);
    put_name(block, name);
    put_octal(block + F_MODE, 8, 0644);
    put_octal(block + F_UID, 8, 0);
    put_octal(block + F_GID, 8, 0);
    put_octal(block + F_SIZE, 12, size);
    put_octal(block + F_MTIME, 12, mtime > 0 ? (uint64_t)mtime : 0);
    block[F_TYPE] = (unsigned char)typeflag;
    memcpy(block + F_MAGIC, "ustar", 6); /* with its NUL */
    memcpy(block + F_VERSION, "00", 2);
    memcpy(block + F_UNAME, "stagein", 7);
    memcpy(block + F_GNAME, "stagein", 7);
    memset(block + F_CHKSUM, ' ', 8);
    unsigned sum = 0;
    for (size_t i = 0; i < TAR_BLOCK; i++)
        sum += block[i];
    char tmp[8];
    snprintf(tmp, sizeof(tmp), "%06o", sum);
    memcpy(block + F_CHKSUM, tmp, 7); /* six digits, NUL, then the space kept */
}

bool tar_block_is_zero(const unsigned char block[TAR_BLOCK])
{
    for (size_t i = 0; i < TAR_BLOCK; i++)
        if (block[i])
            return false;
    return true;
}

static int get_octal(const unsigned char *field, size_t width, const char *what,
                     uint64_t *out, si_error_t *err)
{
    size_t i = 0;
    uint64_t v = 0;
    if (field[0] & 0x80)
        return si_errprintf(err, "tar header field '%s' uses base-256, which this format "
                            "does not write", what);
    while (i < width && field[i] == ' ')
        i++;
    size_t digits = 0;
    for (; i < width && field[i] >= '0' && field[i] <= '7'; i++, digits++) {
        if (v > (UINT64_MAX >> 3))
            return si_errprintf(err, "tar header field '%s' overflows", what);
        v = (v << 3) | (uint64_t)(field[i] - '0');
    }
    for (; i < width; i++)
        if (field[i] != ' ' && field[i] != '\0')
            return si_errprintf(err, "tar header field '%s' is not octal", what);
    if (digits == 0)
        return si_errprintf(err, "tar header field '%s' is empty", what);
    *out = v;
    return 0;
}

int tar_header_parse(const unsigned char block[TAR_BLOCK], tar_header_t *h, si_error_t *err)
{
    if (memcmp(block + F_MAGIC, "ustar", 5) != 0)
        return si_errprintf(err, "not a tar header (no ustar magic)");
    uint64_t stored;
    if (get_octal(block + F_CHKSUM, 8, "chksum", &stored, err) < 0)
        return -1;
    unsigned sum = 0;
    int ssum = 0;
    for (size_t i = 0; i < TAR_BLOCK; i++) {
        unsigned char c = (i >= F_CHKSUM && i < F_CHKSUM + 8) ? ' ' : block[i];
        sum += c;
        ssum += (signed char)c;
    }
    /* historic writers summed signed chars; both are accepted, as tar does */
    if (stored != sum && (int64_t)stored != ssum)
        return si_errprintf(err, "tar header checksum mismatch (stored %" PRIo64
                            ", computed %o)", stored, sum);
    uint64_t mtime;
    if (get_octal(block + F_SIZE, 12, "size", &h->size, err) < 0 ||
        get_octal(block + F_MTIME, 12, "mtime", &mtime, err) < 0)
        return -1;
    h->mtime = (int64_t)mtime;
    h->typeflag = (char)block[F_TYPE];
    size_t plen = strnlen((const char *)block + F_PREFIX, F_PREFIX_LEN);
    size_t nlen = strnlen((const char *)block + F_NAME, F_NAME_LEN);
    size_t at = 0;
    if (plen) {
        memcpy(h->name, block + F_PREFIX, plen);
        h->name[plen] = '/';
        at = plen + 1;
    }
    memcpy(h->name + at, block + F_NAME, nlen);
    h->name[at + nlen] = '\0';
    return 0;
}

void tar_pax_clear(tar_pax_t *pax)
{
    free(pax->path);
    free(pax->bucket);
    free(pax->key);
    free(pax->headers);
    free(pax->storage_class);
    memset(pax, 0, sizeof(*pax));
}

static int set_string(char **dst, const char *v, size_t vlen, const char *key, si_error_t *err)
{
    if (memchr(v, '\0', vlen))
        return si_errprintf(err, "pax record '%s' contains a NUL byte", key);
    char *s = strndup(v, vlen);
    if (!s)
        return si_errprintf(err, "out of memory");
    free(*dst);
    *dst = s;
    return 0;
}

static int parse_record(tar_pax_t *pax, const char *key, size_t klen, const char *v,
                        size_t vlen, si_error_t *err)
{
    char num[32];
#define IS(k) (klen == sizeof(k) - 1 && memcmp(key, k, klen) == 0)
    if (IS("path"))
        return set_string(&pax->path, v, vlen, "path", err);
    if (IS("STAGEIN.bucket"))
        return set_string(&pax->bucket, v, vlen, "STAGEIN.bucket", err);
    if (IS("STAGEIN.key"))
        return set_string(&pax->key, v, vlen, "STAGEIN.key", err);
    if (IS("STAGEIN.headers"))
        return unescape(v, vlen, "STAGEIN.headers", &pax->headers, err) < 0 ? -1
               : check_headers(pax->headers, err);
    if (IS("STAGEIN.storage_class"))
        return unescape(v, vlen, "STAGEIN.storage_class", &pax->storage_class, err) < 0 ? -1
               : check_storage_class(pax->storage_class, err);
    if (IS("STAGEIN.checksum")) {
        if (vlen >= sizeof(pax->checksum))
            return si_errprintf(err, "pax record STAGEIN.checksum is too long");
        memcpy(pax->checksum, v, vlen);
        pax->checksum[vlen] = '\0';
        if (!si_checksum_text_valid(pax->checksum))
            return si_errprintf(err, "pax record STAGEIN.checksum '%s' is not "
                                "\"algorithm:hex\"", pax->checksum);
        return 0;
    }
    if (IS("size") || IS("mtime")) {
        /* mtime may carry a fraction ("1700000000.25"); whole seconds are kept */
        size_t n = vlen;
        if (IS("mtime")) {
            const char *dot = memchr(v, '.', vlen);
            if (dot)
                n = (size_t)(dot - v);
        }
        if (n == 0 || n >= sizeof(num))
            return si_errprintf(err, "pax record '%.*s' has a bad number", (int)klen, key);
        memcpy(num, v, n);
        num[n] = '\0';
        if (IS("size")) {
            if (si_parse_u64(num, &pax->size) < 0)
                return si_errprintf(err, "pax record 'size' is not a number: '%s'", num);
            pax->has_size = true;
        } else {
            if (si_parse_i64(num, &pax->mtime) < 0)
                return si_errprintf(err, "pax record 'mtime' is not a number: '%s'", num);
            pax->has_mtime = true;
        }
        return 0;
    }
#undef IS
    return 0; /* other keywords (atime, ctime, ...) carry nothing we keep */
}

int tar_pax_parse(const char *data, size_t len, tar_pax_t *pax, si_error_t *err)
{
    size_t at = 0;
    memset(pax, 0, sizeof(*pax));
    while (at < len) {
        /* tar pads the header data with NULs up to its block */
        if (data[at] == '\0') {
            for (size_t i = at; i < len; i++)
                if (data[i] != '\0')
                    goto bad;
            break;
        }
        size_t rlen = 0, i = at;
        while (i < len && data[i] >= '0' && data[i] <= '9' && i - at < 10)
            rlen = rlen * 10 + (size_t)(data[i++] - '0');
        if (i == at || i >= len || data[i] != ' ' || rlen < (i - at) + 4 || rlen > len - at)
            goto bad;
        const char *key = data + i + 1;
        const char *end = data + at + rlen - 1; /* the '\n' */
        if (*end != '\n')
            goto bad;
        const char *eq = memchr(key, '=', (size_t)(end - key));
        if (!eq || eq == key)
            goto bad;
        if (parse_record(pax, key, (size_t)(eq - key), eq + 1, (size_t)(end - eq - 1),
                         err) < 0)
            goto error;
        at += rlen;
    }
    return 0;
bad:
    si_errprintf(err, "malformed pax record at byte %zu of the extended header", at);
error:
    tar_pax_clear(pax);
    return -1;
}
