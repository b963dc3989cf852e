/* The pax/ustar encoder and decoder on their own. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/volume/tar.h"

/* Every record's length prefix must equal its real length, including
 * across the 9->10 and 99->100 digit boundaries. */
static bool records_consistent(const char *data, size_t len)
{
    size_t at = 0;
    while (at < len) {
        char *end;
        unsigned long rlen = strtoul(data + at, &end, 10);
        if (*end != ' ' || rlen == 0 || at + rlen > len || data[at + rlen - 1] != '\n')
            return false;
        at += rlen;
    }
    return at == len;
}

static void test_records(void)
{
    char buf[4096];
    size_t checksum_at = 0;
    size_t len = tar_pax_records(buf, sizeof(buf), "bkt", "a/b.dat", 12345, 1700000000,
                                 &checksum_at);
    is_int(len, tar_pax_records_len("bkt", "a/b.dat", 12345, 1700000000),
           "length-only pass agrees with the written length");
    ok(records_consistent(buf, len), "record lengths are self-consistent");
    ok(strncmp(buf + checksum_at, "sha256:0000", 11) == 0, "checksum placeholder located");
    ok(memmem(buf, len, "path=bkt/a/b.dat\n", 17) != NULL, "path record holds bucket/key");
    ok(memmem(buf, len, " size=12345\n", 12) != NULL, "size record");

    /* keys sized so the path record crosses 99 -> 100 bytes */
    bool all = true;
    for (size_t klen = 70; klen < 100; klen++) {
        char key[128];
        memset(key, 'k', klen);
        key[klen] = '\0';
        len = tar_pax_records(buf, sizeof(buf), "bkt", key, 1, 0, &checksum_at);
        if (!records_consistent(buf, len) ||
            len != tar_pax_records_len("bkt", key, 1, 0))
            all = false;
    }
    ok(all, "record lengths right across the 2->3 digit boundary");

    tar_pax_t pax;
    si_error_t err = {{0}};
    len = tar_pax_records(buf, sizeof(buf), "bkt", "x/y", 42, 7, &checksum_at);
    memcpy(buf + checksum_at, "sha256:", 7);
    memset(buf + checksum_at + 7, 'a', 64);
    ok(tar_pax_parse(buf, len, &pax, &err) == 0, "parse what was written");
    is_str(pax.path, "bkt/x/y", "path");
    is_str(pax.bucket, "bkt", "bucket");
    is_str(pax.key, "x/y", "key");
    ok(pax.has_size && pax.size == 42, "size");
    ok(pax.has_mtime && pax.mtime == 7, "mtime");
    ok(strncmp(pax.checksum, "sha256:aaaa", 11) == 0, "checksum");
    tar_pax_clear(&pax);

    static const char *const bad[] = {
        "5 a=b\n",             /* length 6 declared 5 */
        "30 path=x\n",         /* length past the data */
        "6 =bb\n",             /* empty keyword */
        "12 size=-1\n\n",      /* wrong length and a negative size */
        "10 size=x\n",         /* not a number */
        "x path=y\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ok(tar_pax_parse(bad[i], strlen(bad[i]), &pax, &err) < 0,
           "malformed pax data %zu refused: %s", i, err.text);
    }
    const char checksum_bad[] = "30 STAGEIN.checksum=sha256:zz\n";
    ok(tar_pax_parse(checksum_bad, strlen(checksum_bad), &pax, &err) < 0 &&
           strstr(err.text, "checksum"), "bad checksum text refused: %s", err.text);
    const char nul_path[] = "12 path=a\0b\n";
    ok(tar_pax_parse(nul_path, sizeof(nul_path) - 1, &pax, &err) < 0 &&
           strstr(err.text, "NUL"), "NUL in a path refused: %s", err.text);
    const char frac[] = "22 mtime=1700000000.5\n";
    ok(tar_pax_parse(frac, strlen(frac), &pax, &err) == 0 && pax.mtime == 1700000000,
       "fractional mtime keeps whole seconds");
    tar_pax_clear(&pax);
}

static void test_header(void)
{
    unsigned char block[TAR_BLOCK];
    tar_header_t h;
    si_error_t err = {{0}};

    tar_header(block, "bkt/dir/file", '0', 1000, 1700000000);
    ok(tar_header_parse(block, &h, &err) == 0, "header parses: %s", err.text);
    is_str(h.name, "bkt/dir/file", "name");
    is_int(h.size, 1000, "size");
    is_int(h.mtime, 1700000000, "mtime");
    is_int(h.typeflag, '0', "typeflag");
    ok(memcmp(block + 257, "ustar\0" "00", 8) == 0, "POSIX ustar magic and version");

    /* larger than 11 octal digits: 0 here, the pax size record carries it */
    tar_header(block, "b/f", '0', UINT64_C(10) << 30, 0);
    ok(tar_header_parse(block, &h, &err) == 0 && h.size == 0, "8 GiB+ size left to pax");

    char longname[220];
    memset(longname, 'd', 120);
    longname[120] = '/';
    memset(longname + 121, 'f', 50);
    longname[171] = '\0';
    tar_header(block, longname, '0', 1, 0);
    ok(tar_header_parse(block, &h, &err) == 0 && strcmp(h.name, longname) == 0,
       "long name split into prefix and name");

    tar_header(block, "b/f", '0', 1, 0);
    block[10] ^= 1;
    ok(tar_header_parse(block, &h, &err) < 0 && strstr(err.text, "checksum"),
       "flipped byte fails the checksum: %s", err.text);
    memset(block, 0, sizeof(block));
    ok(tar_block_is_zero(block), "zero block");
    memcpy(block, "hello", 5);
    ok(tar_header_parse(block, &h, &err) < 0 && strstr(err.text, "magic"),
       "no magic: %s", err.text);
    is_int(tar_member_bytes("bkt", "k", 1, 0),
           TAR_BLOCK + tar_round_up(tar_pax_records_len("bkt", "k", 1, 0)) + TAR_BLOCK +
               TAR_BLOCK, "member size in blocks");
}

int main(void)
{
    test_records();
    test_header();
    return done_testing();
}
