#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/checksum.h"
#include "common/tap.h"

int main(void)
{
    si_error_t err;
    char out[SI_CHECKSUM_TEXT_MAX];
    si_checksum_t *c = si_checksum_new("sha256", &err);
    si_checksum_update(c, "ab", 2);
    si_checksum_update(c, "c", 1);
    si_checksum_final(c, out);
    si_checksum_free(c);
    is_str(out, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
           "sha256(abc), fed in pieces");
    c = si_checksum_new("md5", &err);
    si_checksum_final(c, out);
    si_checksum_free(c);
    is_str(out, "md5:d41d8cd98f00b204e9800998ecf8427e", "md5 of nothing");
    ok(si_checksum_new("crc64", &err) == NULL && strstr(err.text, "crc64"),
       "unknown algorithm refused: %s", err.text);
    ok(si_checksum_text_valid("md5:d41d8cd98f00b204e9800998ecf8427e"), "valid md5 text");
    ok(!si_checksum_text_valid("md5:D41D8CD98F00B204E9800998ECF8427E"), "upper-case hex refused");
    ok(!si_checksum_text_valid("sha256:abc"), "short digest refused");
    ok(!si_checksum_text_valid("xyz:00"), "unknown algorithm text refused");

    /* on a thread of its own: the same digest for 9 MiB fed in odd pieces */
    size_t n = 9u << 20;
    unsigned char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)(i * 2654435761u >> 13);
    char direct[SI_CHECKSUM_TEXT_MAX], async[SI_CHECKSUM_TEXT_MAX];
    c = si_checksum_new("md5", &err);
    si_checksum_update(c, data, n);
    si_checksum_final(c, direct);
    si_checksum_free(c);
    si_checksum_async_t *a = si_checksum_async_new("md5", &err);
    for (size_t at = 0, step = 1; at < n; at += step, step = step * 7 % 1000003 + 1)
        si_checksum_async_update(a, data + at, at + step > n ? n - at : step);
    si_checksum_async_final(a, async);
    si_checksum_async_free(a);
    is_str(async, direct, "md5 on its own thread, 9 MiB in pieces of 1 B to 1 MB: the same digest");
    a = si_checksum_async_new("sha256", &err);
    si_checksum_async_final(a, async);
    si_checksum_async_free(a);
    is_str(async, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
           "sha256 of nothing on its own thread");
    a = si_checksum_async_new("md5", &err);
    si_checksum_async_update(a, data, n);
    si_checksum_async_free(a);
    ok(1, "a hash abandoned with bytes in flight is freed (no final)");
    ok(si_checksum_async_new("crc64", &err) == NULL, "unknown algorithm refused on a thread too");
    free(data);
    return done_testing();
}
