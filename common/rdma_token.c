/* x-amz-rdma-token: encode and strict decode (format in rdma_token.h). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/rdma_token.h"
#include "common/text.h"

/* Provider names as libfabric spells them: "shm", "tcp;ofi_rxm", "verbs;ofi_rxm". */
static int provider_check(const char *p, size_t len, si_error_t *err)
{
    if (len == 0)
        return si_errnoprintf(err, EINVAL, "rdma token: empty provider name");
    if (len > SI_RDMA_PROVIDER_MAX)
        return si_errnoprintf(err, EINVAL, "rdma token: provider name longer than %d characters",
                              SI_RDMA_PROVIDER_MAX);
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == ';'))
            return si_errnoprintf(err, EINVAL,
                                  "rdma token: provider name has a character outside [a-z0-9_;] "
                                  "at position %zu", i + 1);
    }
    return 0;
}

static int range_check(uint64_t raddr, uint64_t len, si_error_t *err)
{
    if (len == 0)
        return si_errnoprintf(err, EINVAL, "rdma token: len is 0");
    if (raddr > UINT64_MAX - (len - 1)) /* the last byte is raddr + len - 1 */
        return si_errnoprintf(err, EINVAL,
                              "rdma token: raddr 0x%" PRIx64 " + len %" PRIu64 " overflows 64 bits",
                              raddr, len);
    return 0;
}

int si_rdma_token_is_cuobject(const char *text)
{
    size_t fields = 1, digits = 0;

    if (!text || !*text)
        return 0;
    for (const char *p = text; *p; p++) {
        if (*p == ':') {
            if (digits == 0)
                return 0;
            fields++;
            digits = 0;
        } else if (si_hex_digit(*p) >= 0) {
            digits++;
        } else {
            return 0;
        }
    }
    return fields >= 2 && digits > 0;
}

int si_rdma_token_encode(const si_rdma_token_t *t, char *out, size_t out_size, si_error_t *err)
{
    char hex[2 * SI_RDMA_ADDR_MAX + 1];
    const char *access;
    int n;

    if (provider_check(t->provider, strlen(t->provider), err) < 0)
        return -1;
    if (t->addr_len == 0 || t->addr_len > SI_RDMA_ADDR_MAX)
        return si_errnoprintf(err, EINVAL, "rdma token: address length %zu outside 1..%d",
                              t->addr_len, SI_RDMA_ADDR_MAX);
    if (range_check(t->raddr, t->len, err) < 0)
        return -1;
    switch (t->access) {
    case SI_RDMA_ACCESS_WRITE: access = "w"; break;
    case SI_RDMA_ACCESS_READ: access = "r"; break;
    case SI_RDMA_ACCESS_WRITE | SI_RDMA_ACCESS_READ: access = "rw"; break;
    default:
        return si_errnoprintf(err, EINVAL, "rdma token: access 0x%x is not w, r or rw", t->access);
    }
    si_hex(t->addr, t->addr_len, hex);
    n = snprintf(out, out_size,
                 "si%d prov=%s addr=%s key=%" PRIx64 " raddr=%" PRIx64 " len=%" PRIu64 " flags=%s",
                 SI_RDMA_TOKEN_VERSION, t->provider, hex, t->key, t->raddr, t->len, access);
    if (n < 0 || (size_t)n >= out_size)
        return si_errnoprintf(err, ENOSPC, "rdma token: %d characters do not fit in %zu", n,
                              out_size);
    return 0;
}

/* The next "name=value" field: checks the name, returns the value's span. */
static int next_field(const char **cursor, const char *name, const char **value,
                      size_t *value_len, si_error_t *err)
{
    const char *p = *cursor, *end;
    size_t name_len = strlen(name);

    if (*p != ' ')
        return si_errnoprintf(err, EINVAL, "rdma token: truncated before field '%s'", name);
    p++;
    if (strncmp(p, name, name_len) != 0 || p[name_len] != '=')
        return si_errnoprintf(err, EINVAL, "rdma token: expected field '%s=' at offset %td", name,
                              p - *cursor);
    p += name_len + 1;
    end = strchr(p, ' ');
    if (!end)
        end = p + strlen(p);
    *value = p;
    *value_len = (size_t)(end - p);
    *cursor = end;
    if (*value_len == 0)
        return si_errnoprintf(err, EINVAL, "rdma token: field '%s' is empty", name);
    return 0;
}

static int parse_hex_u64(const char *name, const char *s, size_t len, uint64_t *out,
                         si_error_t *err)
{
    uint64_t v = 0;

    if (len > 16)
        return si_errnoprintf(err, EINVAL, "rdma token: %s has %zu hex digits (at most 16)", name,
                              len);
    for (size_t i = 0; i < len; i++) {
        if (si_hex_digit(s[i]) < 0)
            return si_errnoprintf(err, EINVAL, "rdma token: %s is not hexadecimal", name);
        v = v << 4 | (uint64_t)si_hex_digit(s[i]);
    }
    *out = v;
    return 0;
}

static int parse_dec_u64(const char *name, const char *s, size_t len, uint64_t *out,
                         si_error_t *err)
{
    uint64_t v = 0;

    if (len > 20)
        return si_errnoprintf(err, EINVAL, "rdma token: %s is out of range", name);
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return si_errnoprintf(err, EINVAL, "rdma token: %s is not a decimal number", name);
        if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
            return si_errnoprintf(err, EINVAL, "rdma token: %s is out of range", name);
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

int si_rdma_token_decode(const char *text, si_rdma_token_t *out, si_error_t *err)
{
    si_rdma_token_t t;
    const char *p = text, *v;
    size_t len, vlen;
    uint64_t version = 0;

    memset(&t, 0, sizeof t);
    if (!text || !*text)
        return si_errnoprintf(err, EINVAL, "rdma token: empty");
    len = strnlen(text, SI_RDMA_TOKEN_MAX + 1);
    if (len > SI_RDMA_TOKEN_MAX)
        return si_errnoprintf(err, EINVAL, "rdma token: longer than %d characters",
                              SI_RDMA_TOKEN_MAX);
    if (si_rdma_token_is_cuobject(text))
        return si_errnoprintf(err, EPROTONOSUPPORT,
                              "rdma token: NVIDIA cuObject format (hex fields separated by ':') "
                              "is not supported");
    if (p[0] != 's' || p[1] != 'i' || p[2] < '0' || p[2] > '9')
        return si_errnoprintf(err, EINVAL, "rdma token: does not start with a version 'si<N>'");
    p += 2;
    vlen = strcspn(p, " ");
    if (parse_dec_u64("version", p, vlen, &version, err) < 0)
        return -1;
    if (version != SI_RDMA_TOKEN_VERSION)
        return si_errnoprintf(err, EPROTONOSUPPORT,
                              "rdma token: version %" PRIu64 " is not supported (this is %d)",
                              version, SI_RDMA_TOKEN_VERSION);
    p += vlen;

    if (next_field(&p, "prov", &v, &vlen, err) < 0 || provider_check(v, vlen, err) < 0)
        return -1;
    memcpy(t.provider, v, vlen);

    if (next_field(&p, "addr", &v, &vlen, err) < 0)
        return -1;
    if (vlen % 2 != 0 || vlen / 2 > SI_RDMA_ADDR_MAX)
        return si_errnoprintf(err, EINVAL,
                              "rdma token: addr must be 1..%d bytes as an even number of hex "
                              "digits (got %zu digits)", SI_RDMA_ADDR_MAX, vlen);
    t.addr_len = vlen / 2;
    if (si_unhex(v, t.addr_len, t.addr) < 0)
        return si_errnoprintf(err, EINVAL, "rdma token: addr is not hexadecimal");

    if (next_field(&p, "key", &v, &vlen, err) < 0 || parse_hex_u64("key", v, vlen, &t.key, err) < 0)
        return -1;
    if (next_field(&p, "raddr", &v, &vlen, err) < 0 ||
        parse_hex_u64("raddr", v, vlen, &t.raddr, err) < 0)
        return -1;
    if (next_field(&p, "len", &v, &vlen, err) < 0 || parse_dec_u64("len", v, vlen, &t.len, err) < 0)
        return -1;
    if (range_check(t.raddr, t.len, err) < 0)
        return -1;

    if (next_field(&p, "flags", &v, &vlen, err) < 0)
        return -1;
    if (vlen == 1 && v[0] == 'w')
        t.access = SI_RDMA_ACCESS_WRITE;
    else if (vlen == 1 && v[0] == 'r')
        t.access = SI_RDMA_ACCESS_READ;
    else if (vlen == 2 && v[0] == 'r' && v[1] == 'w')
        t.access = SI_RDMA_ACCESS_WRITE | SI_RDMA_ACCESS_READ;
    else
        return si_errnoprintf(err, EINVAL, "rdma token: flags must be w, r or rw");
    if (*p != '\0')
        return si_errnoprintf(err, EINVAL, "rdma token: unexpected text after flags");
    *out = t;
    return 0;
}

int si_rdma_token_check_range(const si_rdma_token_t *t, uint64_t offset, uint64_t len,
                              unsigned access, si_error_t *err)
{
    if ((t->access & access) != access)
        return si_errnoprintf(err, EACCES, "rdma token: does not grant %s access",
                              access & SI_RDMA_ACCESS_READ ? "read" : "write");
    if (len == 0)
        return si_errnoprintf(err, EINVAL, "rdma transfer: length 0");
    if (offset > t->len || len > t->len - offset)
        return si_errnoprintf(err, ERANGE,
                              "rdma transfer: %" PRIu64 " bytes at offset %" PRIu64
                              " exceed the %" PRIu64 " bytes the token grants", len, offset,
                              t->len);
    return 0;
}
