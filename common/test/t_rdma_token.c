#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/rdma_token.h"
#include "common/tap.h"

static si_rdma_token_t sample(void)
{
    si_rdma_token_t t;

    memset(&t, 0, sizeof t);
    strcpy(t.provider, "tcp;ofi_rxm");
    t.addr_len = 16;
    for (size_t i = 0; i < t.addr_len; i++)
        t.addr[i] = (unsigned char)(0xf0 + i);
    t.key = 0xdeadbeefcafef00dULL;
    t.raddr = 0x7f0012340000ULL;
    t.len = 1048576;
    t.access = SI_RDMA_ACCESS_WRITE;
    return t;
}

/* Decodes text; returns errno on failure, 0 on success. */
static int decode_errno(const char *text, si_error_t *err)
{
    si_rdma_token_t t;

    errno = 0;
    return si_rdma_token_decode(text, &t, err) == 0 ? 0 : errno;
}

int main(void)
{
    si_error_t err;
    si_rdma_token_t t = sample(), back, untouched;
    char text[SI_RDMA_TOKEN_MAX + 1], bad[2048];
    size_t n;

    ok(si_rdma_token_encode(&t, text, sizeof text, &err) == 0, "encode: %s", text);
    ok(strncmp(text, "si1 prov=tcp;ofi_rxm addr=f0f1f2", 32) == 0, "starts with version and provider");
    memset(&back, 0x55, sizeof back);
    ok(si_rdma_token_decode(text, &back, &err) == 0, "decode of an encoded token");
    is_str(back.provider, "tcp;ofi_rxm", "provider round-trips");
    is_int(back.addr_len, 16, "address length round-trips");
    ok(memcmp(back.addr, t.addr, 16) == 0, "address bytes round-trip");
    ok(back.key == t.key, "key round-trips");
    ok(back.raddr == t.raddr, "raddr round-trips");
    ok(back.len == t.len, "len round-trips");
    is_int(back.access, SI_RDMA_ACCESS_WRITE, "access round-trips");

    t.access = SI_RDMA_ACCESS_READ | SI_RDMA_ACCESS_WRITE;
    t.addr_len = SI_RDMA_ADDR_MAX;
    ok(si_rdma_token_encode(&t, text, sizeof text, &err) == 0, "largest address fits in SI_RDMA_TOKEN_MAX");
    ok(si_rdma_token_decode(text, &back, &err) == 0 && back.access == 3 && back.addr_len == 256,
       "rw token with a 256-byte address decodes");
    ok(si_rdma_token_encode(&t, text, 40, &err) < 0 && errno == ENOSPC, "encode into a short buffer: %s", err.text);
    t = sample();
    strcpy(t.provider, "Bad-Name");
    ok(si_rdma_token_encode(&t, text, sizeof text, &err) < 0, "encode refuses a bad provider: %s", err.text);
    t = sample();
    t.raddr = UINT64_MAX - 10;
    ok(si_rdma_token_encode(&t, text, sizeof text, &err) < 0, "encode refuses raddr+len overflow: %s", err.text);

    /* Hostile and malformed tokens. */
    is_int(decode_errno("", &err), EINVAL, "empty token: %s", err.text);
    is_int(decode_errno("si1 prov=shm addr=0a0b key=1 raddr=0 len=10", &err), EINVAL,
           "truncated before flags: %s", err.text);
    is_int(decode_errno("si1 prov=shm addr=0a0b key=1 raddr=0 len=", &err), EINVAL,
           "truncated inside len: %s", err.text);
    is_int(decode_errno("si1 prov=shm", &err), EINVAL, "truncated after provider: %s", err.text);
    is_int(decode_errno("si2 prov=shm addr=0a0b key=1 raddr=0 len=10 flags=w", &err),
           EPROTONOSUPPORT, "unknown version: %s", err.text);
    is_int(decode_errno("si99999999999999999999999 prov=shm addr=0a key=1 raddr=0 len=1 flags=w", &err),
           EINVAL, "version overflow: %s", err.text);
    is_int(decode_errno("00007f7c2a000000:0000000000100000:0000000012345678:00abcdef", &err),
           EPROTONOSUPPORT, "cuObject token recognised as foreign: %s", err.text);
    ok(strstr(err.text, "cuObject") != NULL, "the error names cuObject");
    ok(si_rdma_token_is_cuobject("7f7c:100000"), "two hex fields: cuObject");
    ok(!si_rdma_token_is_cuobject("7f7c"), "one field is not cuObject");
    ok(!si_rdma_token_is_cuobject("7f7c::1"), "an empty field is not cuObject");
    ok(!si_rdma_token_is_cuobject("si1 prov=shm"), "our token is not cuObject");
    is_int(decode_errno("si1 prov=shm addr=0a0b key=1 raddr=0 len=0 flags=w", &err), EINVAL,
           "zero length: %s", err.text);
    is_int(decode_errno("si1 prov=shm addr=0a0b key=1 raddr=0 len=18446744073709551616 flags=w", &err),
           EINVAL, "len above 2^64-1: %s", err.text);
    is_int(decode_errno("si1 prov=shm addr=0a0b key=1 raddr=fffffffffffffff0 len=17 flags=w", &err),
           EINVAL, "raddr + len overflow: %s", err.text);
    ok(decode_errno("si1 prov=shm addr=0a0b key=1 raddr=fffffffffffffff0 len=16 flags=w", &err) == 0,
       "raddr + len up to 2^64 accepted");
    is_int(decode_errno("si1 prov=shm addr=0a0b key=10000000000000000 raddr=0 len=1 flags=w", &err),
           EINVAL, "key of 17 hex digits: %s", err.text);
    is_int(decode_errno("si1 prov=shm addr=0a0b key=xyz raddr=0 len=1 flags=w", &err), EINVAL,
           "non-hex key: %s", err.text);
    is_int(decode_errno("si1 prov=shm addr=0a0 key=1 raddr=0 len=1 flags=w", &err), EINVAL,
           "odd number of address digits: %s", err.text);
    is_int(decode_errno("si1 prov=shm addr=0g key=1 raddr=0 len=1 flags=w", &err), EINVAL,
           "non-hex address: %s", err.text);
    is_int(decode_errno("si1 prov=SHM addr=0a key=1 raddr=0 len=1 flags=w", &err), EINVAL,
           "upper-case provider: %s", err.text);
    is_int(decode_errno("si1 prov=sh/m addr=0a key=1 raddr=0 len=1 flags=w", &err), EINVAL,
           "provider with '/': %s", err.text);
    is_int(decode_errno("si1 prov=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa addr=0a key=1 raddr=0 len=1 flags=w", &err),
           EINVAL, "33-character provider: %s", err.text);
    is_int(decode_errno("si1 prov=shm addr=0a key=1 raddr=0 len=1 flags=x", &err), EINVAL,
           "unknown flags: %s", err.text);
    is_int(decode_errno("si1 prov=shm addr=0a key=1 raddr=0 len=1 flags=w extra", &err), EINVAL,
           "trailing text: %s", err.text);
    is_int(decode_errno("si1 prov=shm key=1 addr=0a raddr=0 len=1 flags=w", &err), EINVAL,
           "fields out of order: %s", err.text);
    is_int(decode_errno("si1  prov=shm addr=0a key=1 raddr=0 len=1 flags=w", &err), EINVAL,
           "double space: %s", err.text);
    is_int(decode_errno("si1 prov=shm addr=0a key=1 raddr=0 len=-1 flags=w", &err), EINVAL,
           "negative length: %s", err.text);
    n = (size_t)snprintf(bad, sizeof bad, "si1 prov=shm addr=");
    memset(bad + n, 'a', 2 * SI_RDMA_ADDR_MAX + 2);
    strcpy(bad + n + 2 * SI_RDMA_ADDR_MAX + 2, " key=1 raddr=0 len=1 flags=w");
    is_int(decode_errno(bad, &err), EINVAL, "over-long token: %s", err.text);
    memset(&untouched, 0x5a, sizeof untouched);
    back = untouched;
    ok(si_rdma_token_decode("si1 prov=shm addr=0a key=1 raddr=0 len=1 flags=q", &back, &err) < 0 &&
       memcmp(&back, &untouched, sizeof back) == 0, "output untouched on failure");

    /* Ranges against the grant. */
    t = sample();
    ok(si_rdma_token_check_range(&t, 0, t.len, SI_RDMA_ACCESS_WRITE, &err) == 0, "whole region");
    ok(si_rdma_token_check_range(&t, t.len - 1, 1, SI_RDMA_ACCESS_WRITE, &err) == 0, "last byte");
    is_int(si_rdma_token_check_range(&t, t.len - 1, 2, SI_RDMA_ACCESS_WRITE, &err), -1,
           "one byte past the end: %s", err.text);
    is_int(si_rdma_token_check_range(&t, UINT64_MAX, 2, SI_RDMA_ACCESS_WRITE, &err), -1,
           "offset + len overflow: %s", err.text);
    is_int(si_rdma_token_check_range(&t, 0, 0, SI_RDMA_ACCESS_WRITE, &err), -1, "zero length");
    is_int(si_rdma_token_check_range(&t, 0, 1, SI_RDMA_ACCESS_READ, &err), -1,
           "read not granted by a write token: %s", err.text);
    return done_testing();
}
