/* ListObjects pagination over a sorted cursor. */
#include "config.h"
#include "daemon/s3/list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"

bool s3_list_successor(const char *s, char *out, size_t size)
{
    size_t n = strlen(s);
    while (n > 0 && (unsigned char)s[n - 1] == 0xff)
        n--;
    if (n == 0 || n + 1 > size)
        return false;
    memcpy(out, s, n);
    out[n - 1] = (char)((unsigned char)out[n - 1] + 1);
    out[n] = '\0';
    return true;
}

static bool starts_with(const char *s, const char *prefix, size_t plen)
{
    return strncmp(s, prefix, plen) == 0;
}

static int add_entry(s3_list_result_t *r, const s3_list_entry_t *e, si_error_t *err)
{
    if (si_array_grow((void **)&r->entries, &r->entries_cap, r->nentries + 1,
                      sizeof(*r->entries)) < 0)
        return si_errprintf(err, "out of memory listing objects");
    r->entries[r->nentries++] = *e;
    return 0;
}

static int add_prefix(s3_list_result_t *r, const char *p, size_t len, si_error_t *err)
{
    if (si_array_grow((void **)&r->prefixes, &r->prefixes_cap, r->nprefixes + 1,
                      sizeof(*r->prefixes)) < 0)
        return si_errprintf(err, "out of memory listing objects");
    if (!(r->prefixes[r->nprefixes] = strndup(p, len)))
        return si_errprintf(err, "out of memory listing objects");
    r->nprefixes++;
    return 0;
}

int s3_list_run(const s3_list_query_t *q, s3_list_next_fn next, void *arg,
                s3_list_result_t *out, si_error_t *err)
{
    s3_list_result_t r = {0};
    const char *prefix = q->prefix ? q->prefix : "";
    const char *delim = q->delimiter && *q->delimiter ? q->delimiter : NULL;
    const char *after = q->after && *q->after ? q->after : NULL;
    size_t plen = strlen(prefix);
    char *from = malloc(SI_KEY_MAX + 2);
    s3_list_entry_t *e = malloc(sizeof(*e));
    if (!from || !e) {
        si_errprintf(err, "out of memory listing objects");
        goto error;
    }
    bool inclusive = true;
    snprintf(from, SI_KEY_MAX + 2, "%s", prefix);
    if (after && strcmp(after, prefix) >= 0) {
        snprintf(from, SI_KEY_MAX + 2, "%s", after);
        inclusive = false;
    }
    int count = 0;
    const char *last = NULL;
    for (;;) {
        int rc = next(arg, from, inclusive, e, err);
        if (rc < 0)
            goto error;
        if (rc == 0 || !starts_with(e->key, prefix, plen))
            break;
        const char *d = delim ? strstr(e->key + plen, delim) : NULL;
        if (d) {
            size_t cplen = (size_t)(d - e->key) + strlen(delim);
            char cp[SI_KEY_MAX + 2];
            memcpy(cp, e->key, cplen);
            cp[cplen] = '\0';
            /* rolled up on an earlier page (the start key is inside it): skip */
            bool seen = after && strcmp(cp, after) <= 0;
            if (!seen) {
                if (count == q->max_keys) {
                    r.truncated = true;
                    break;
                }
                if (add_prefix(&r, cp, cplen, err) < 0)
                    goto error;
                count++;
                last = r.prefixes[r.nprefixes - 1];
            }
            if (!s3_list_successor(cp, from, SI_KEY_MAX + 2))
                break;
            inclusive = true;
            continue;
        }
        if (count == q->max_keys) {
            r.truncated = true;
            break;
        }
        if (add_entry(&r, e, err) < 0)
            goto error;
        count++;
        last = r.entries[r.nentries - 1].key;
        snprintf(from, SI_KEY_MAX + 2, "%s", e->key);
        inclusive = false;
    }
    if (r.truncated && last && !(r.next = strdup(last))) {
        si_errprintf(err, "out of memory listing objects");
        goto error;
    }
    if (r.truncated && !last)
        r.truncated = false; /* max-keys 0: nothing returned, nothing to continue from */
    free(from);
    free(e);
    *out = r;
    return 0;
error:
    free(from);
    free(e);
    s3_list_result_free(&r);
    return -1;
}

void s3_list_result_free(s3_list_result_t *r)
{
    free(r->entries);
    for (size_t i = 0; i < r->nprefixes; i++)
        free(r->prefixes[i]);
    free(r->prefixes);
    free(r->next);
    memset(r, 0, sizeof(*r));
}

char *s3_list_token_encode(const char *key)
{
    size_t n = strlen(key);
    char *t = malloc(2 * n + 1);
    if (t)
        si_hex((const unsigned char *)key, n, t);
    return t;
}

int s3_list_token_decode(const char *token, char *key, size_t size, si_error_t *err)
{
    size_t n = strlen(token);
    if (n == 0 || n % 2 || n / 2 + 1 > size)
        return si_errprintf(err, "The continuation token provided is incorrect");
    for (size_t i = 0; i < n / 2; i++) {
        int hi = si_hex_digit(token[2 * i]), lo = si_hex_digit(token[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return si_errprintf(err, "The continuation token provided is incorrect");
        key[i] = (char)(hi << 4 | lo);
        if (key[i] == '\0')
            return si_errprintf(err, "The continuation token provided is incorrect");
    }
    key[n / 2] = '\0';
    return 0;
}
