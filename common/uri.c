#include "config.h"
#include "common/uri.h"

#include <stdlib.h>
#include <string.h>

#include "common/text.h"

#define QUERY_TEXT_MAX (64 * 1024)

static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

bool si_uri_encode(si_strbuf_t *out, const char *s, size_t len, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i = 0;
    while (i < len) {
        /* a run of characters kept as they are, appended at once */
        size_t run = i;
        while (run < len && (unreserved((unsigned char)s[run]) || (keep_slash && s[run] == '/')))
            run++;
        if (run > i)
            si_strbuf_append(out, s + i, run - i);
        if (run == len)
            break;
        unsigned char c = (unsigned char)s[run];
        char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
        si_strbuf_append(out, esc, 3);
        i = run + 1;
    }
    return !out->failed;
}

int si_uri_decode(si_strbuf_t *out, const char *s, size_t len, bool plus_is_space,
                  si_error_t *err)
{
    size_t i = 0;
    while (i < len) {
        /* a run of characters that decode to themselves, appended at once */
        size_t run = i;
        while (run < len && s[run] != '%' && !(s[run] == '+' && plus_is_space))
            run++;
        if (run > i)
            si_strbuf_append(out, s + i, run - i);
        if (run == len)
            break;
        i = run;
        if (s[i] == '+') {
            si_strbuf_putc(out, ' ');
            i++;
            continue;
        }
        if (len - i < 3 || si_hex_digit(s[i + 1]) < 0 || si_hex_digit(s[i + 2]) < 0)
            return si_errprintf(err, "malformed percent-encoding at offset %zu", i);
        si_strbuf_putc(out, (char)(si_hex_digit(s[i + 1]) * 16 + si_hex_digit(s[i + 2])));
        i += 3;
    }
    if (out->failed)
        return si_errprintf(err, "decoded text is too long");
    return 0;
}

int si_uri_canonical_path(si_strbuf_t *out, const char *raw_path, si_error_t *err)
{
    si_strbuf_t seg;
    si_strbuf_init(&seg, QUERY_TEXT_MAX);
    const char *p = raw_path;
    if (*p == '\0') {
        si_strbuf_putc(out, '/');
        return out->failed ? si_errprintf(err, "canonical path is too long") : 0;
    }
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        si_strbuf_reset(&seg);
        if (si_uri_decode(&seg, p, n, false, err) < 0) {
            si_strbuf_free(&seg);
            return si_errprefix(err, "path");
        }
        si_uri_encode(out, si_strbuf_str(&seg), seg.len, false);
        if (!slash)
            break;
        si_strbuf_putc(out, '/');
        p = slash + 1;
    }
    si_strbuf_free(&seg);
    if (out->failed)
        return si_errprintf(err, "canonical path is too long");
    return 0;
}

bool si_uri_query_next(const char **cursor, si_uri_param_t *param)
{
    const char *p = *cursor ? *cursor : "";
    for (;;) {
        if (!*p) {
            *cursor = p;
            return false;
        }
        const char *amp = strchr(p, '&');
        size_t len = amp ? (size_t)(amp - p) : strlen(p);
        const char *start = p;
        p = amp ? amp + 1 : start + len;
        if (len == 0)
            continue;
        const char *eq = memchr(start, '=', len);
        param->name = start;
        param->name_len = eq ? (size_t)(eq - start) : len;
        param->value = eq ? eq + 1 : NULL;
        param->value_len = eq ? len - param->name_len - 1 : 0;
        *cursor = p;
        return true;
    }
}

bool si_uri_plain(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (s[i] == '%' || s[i] == '+')
            return false;
    return true;
}

typedef struct {
    const char *name;  /* canonical (encoded) name */
    const char *value; /* canonical (encoded) value */
} query_param_t;

static int param_cmp(const void *a, const void *b)
{
    const query_param_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

/* True when encoding s's decoded form gives s back: unreserved bytes, and
 * upper-case %XX escapes of bytes that are not (what clients send, e.g.
 * presigned URLs); such a component is copied, not decoded and encoded. */
static bool already_canonical(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (unreserved((unsigned char)s[i]))
            continue;
        if (s[i] != '%' || len - i < 3)
            return false;
        int hi = si_hex_digit(s[i + 1]), lo = si_hex_digit(s[i + 2]);
        if (hi < 0 || lo < 0 || (s[i + 1] >= 'a' && s[i + 1] <= 'f') ||
            (s[i + 2] >= 'a' && s[i + 2] <= 'f') || unreserved((unsigned char)(hi * 16 + lo)))
            return false;
        i += 2;
    }
    return true;
}

/* Re-encodes one raw query component onto the end of all (NUL-terminated);
 * with dec, its decoded form is left there. */
static int canonical_component(si_strbuf_t *all, si_strbuf_t *dec, const char *s, size_t len,
                               si_error_t *err)
{
    if (already_canonical(s, len) && (!dec || !memchr(s, '%', len))) {
        if (dec) {
            si_strbuf_reset(dec);
            si_strbuf_append(dec, s, len); /* no escape: decoded, it is itself */
        }
        si_strbuf_append(all, s, len);
        si_strbuf_putc(all, '\0');
        return 0;
    }
    si_strbuf_t own;
    if (!dec) {
        si_strbuf_init(&own, QUERY_TEXT_MAX);
        dec = &own;
    }
    si_strbuf_reset(dec);
    int rc = si_uri_decode(dec, s, len, true, err);
    if (rc == 0) {
        si_uri_encode(all, si_strbuf_str(dec), dec->len, false);
        si_strbuf_putc(all, '\0');
    }
    if (dec == &own)
        si_strbuf_free(&own);
    return rc;
}

int si_uri_canonical_query(si_strbuf_t *out, const char *raw_query, const char *skip_key,
                           si_error_t *err)
{
    /* offsets into all while it grows, pointers once it is complete */
    size_t offs[SI_URI_QUERY_PARAMS_MAX][2];
    query_param_t params[SI_URI_QUERY_PARAMS_MAX];
    size_t n = 0;
    const char *p = raw_query ? raw_query : "";
    if (strlen(p) > QUERY_TEXT_MAX)
        return si_errprintf(err, "query string is longer than %d bytes", QUERY_TEXT_MAX);
    si_strbuf_t all, dec;
    si_strbuf_init(&all, 3 * QUERY_TEXT_MAX + 2 * SI_URI_QUERY_PARAMS_MAX);
    si_strbuf_init(&dec, QUERY_TEXT_MAX);
    /* a query already canonical (every presigned URL's) and its NULs: one
     * allocation */
    si_strbuf_reserve(&all, strlen(p) + 64);
    int rc = -1;
    si_uri_param_t q;
    while (si_uri_query_next(&p, &q)) {
        if (n == SI_URI_QUERY_PARAMS_MAX) {
            si_errprintf(err, "more than %d query parameters", SI_URI_QUERY_PARAMS_MAX);
            goto out;
        }
        size_t name = all.len;
        if (canonical_component(&all, skip_key ? &dec : NULL, q.name, q.name_len, err) < 0)
            goto error_prefix;
        if (skip_key && strcmp(si_strbuf_str(&dec), skip_key) == 0) {
            all.len = name; /* dropped */
            continue;
        }
        size_t value = all.len;
        if (q.value ? canonical_component(&all, NULL, q.value, q.value_len, err) < 0
                    : !si_strbuf_putc(&all, '\0'))
            goto error_prefix;
        offs[n][0] = name;
        offs[n][1] = value;
        n++;
    }
    if (all.failed) {
        si_errprintf(err, "query component is too long");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        params[i] = (query_param_t){all.data + offs[i][0], all.data + offs[i][1]};
    if (n > 1)
        qsort(params, n, sizeof(params[0]), param_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i)
            si_strbuf_putc(out, '&');
        si_strbuf_puts(out, params[i].name);
        si_strbuf_putc(out, '=');
        si_strbuf_puts(out, params[i].value);
    }
    rc = out->failed ? si_errprintf(err, "canonical query is too long") : 0;
    goto out;

error_prefix:
    si_errprefix(err, "query");
out:
    si_strbuf_free(&all);
    si_strbuf_free(&dec);
    return rc;
}

int si_uri_query_get(const char *raw_query, const char *key, si_strbuf_t *value,
                     si_error_t *err)
{
    int count = 0;
    const char *p = raw_query;
    si_uri_param_t q;
    si_strbuf_t name;
    si_strbuf_init(&name, QUERY_TEXT_MAX);
    size_t klen = strlen(key);
    while (si_uri_query_next(&p, &q)) {
        bool match;
        if (q.name_len <= QUERY_TEXT_MAX && si_uri_plain(q.name, q.name_len)) {
            /* the usual name: compared as it is, not decoded first */
            match = q.name_len == klen && memcmp(q.name, key, klen) == 0;
        } else {
            si_strbuf_reset(&name);
            if (si_uri_decode(&name, q.name, q.name_len, true, err) < 0)
                goto error;
            match = strcmp(si_strbuf_str(&name), key) == 0;
        }
        if (match) {
            if (count == 0 && q.value && value &&
                si_uri_decode(value, q.value, q.value_len, true, err) < 0)
                goto error;
            count++;
        }
    }
    si_strbuf_free(&name);
    return count;
error:
    si_strbuf_free(&name);
    return si_errprefix(err, "query parameter %s", key);
}
