#include "config.h"

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
    return done_testing();
}
