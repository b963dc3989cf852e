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
    tar_pax_member_t m = {"bkt", "a/b.dat", 12345, 1700000000, NULL, NULL};
    size_t len = tar_pax_records(buf, sizeof(buf), &m, &checksum_at);
    is_int(len, tar_pax_records_len(&m),
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
        tar_pax_member_t km = {"bkt", key, 1, 0, NULL, NULL};
        len = tar_pax_records(buf, sizeof(buf), &km, &checksum_at);
        if (!records_consistent(buf, len) || len != tar_pax_records_len(&km))
            all = false;
    }
    ok(all, "record lengths right across the 2->3 digit boundary");

    tar_pax_t pax;
    si_error_t err = {{0}};
    len = tar_pax_records(buf, sizeof(buf), &(tar_pax_member_t){"bkt", "x/y", 42, 7, NULL, NULL},
                          &checksum_at);
    ok(!memmem(buf, len, "STAGEIN.headers", 15) && !memmem(buf, len, "STAGEIN.storage", 15),
       "no headers, no records for them");
    memcpy(buf + checksum_at, "sha256:", 7);
    memset(buf + checksum_at + 7, 'a', 64);
    ok(tar_pax_parse(buf, len, &pax, &err) == 0, "parse what was written");
    is_str(pax.path, "bkt/x/y", "path");
    is_str(pax.bucket, "bkt", "bucket");
    is_str(pax.key, "x/y", "key");
    ok(pax.has_size && pax.size == 42, "size");
    ok(pax.has_mtime && pax.mtime == 7, "mtime");
    ok(strncmp(pax.checksum, "sha256:aaaa", 11) == 0, "checksum");
    ok(!pax.headers && !pax.storage_class, "no headers read back");
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

/* STAGEIN.headers and STAGEIN.storage_class: written escaped, one line
 * per record, and read back as they were. */
static void test_meta_records(void)
{
    static const char headers[] =
        "content-type: text/plain; charset=utf-8\n"
        "cache-control: max-age=60\n"
        "x-amz-meta-path: C:\\dir\\x\tand a tab\n"
        "x-amz-meta-note: caf\xc3\xa9 = 100%\n";
    char buf[8192];
    size_t checksum_at = 0;
    tar_pax_member_t m = {"bkt", "with/meta", 5, 9, headers, "DEEP_ARCHIVE"};
    size_t len = tar_pax_records(buf, sizeof(buf), &m, &checksum_at);
    is_int(len, tar_pax_records_len(&m), "length-only pass agrees, with headers");
    ok(records_consistent(buf, len), "record lengths self-consistent, with headers");
    const char *rec = memmem(buf, len, "STAGEIN.headers=", 16);
    ok(rec != NULL, "STAGEIN.headers written");
    const char *nl = rec ? memchr(rec, '\n', len - (size_t)(rec - buf)) : NULL;
    ok(nl && memmem(rec, (size_t)(nl - rec), "x-amz-meta-note", 15) &&
           memmem(rec, (size_t)(nl - rec), "C:\\\\dir\\\\x\\x09and", 17),
       "headers in one line: newlines, backslashes and tabs escaped");
    ok(memmem(buf, len, " STAGEIN.storage_class=DEEP_ARCHIVE\n", 36) != NULL,
       "STAGEIN.storage_class written");
    ok(strncmp(buf + checksum_at, "sha256:0000", 11) == 0, "checksum placeholder located");
    memcpy(buf + checksum_at, "sha256:", 7);
    memset(buf + checksum_at + 7, 'b', 64);

    tar_pax_t pax;
    si_error_t err = {{0}};
    ok(tar_pax_parse(buf, len, &pax, &err) == 0, "parse headers back: %s", err.text);
    is_str(pax.headers, headers, "headers round trip byte for byte");
    is_str(pax.storage_class, "DEEP_ARCHIVE", "storage class round trip");
    is_str(pax.key, "with/meta", "key still there");
    ok(strncmp(pax.checksum, "sha256:bbbb", 11) == 0, "checksum still found after them");
    tar_pax_clear(&pax);

    char one[64];
    is_int(tar_pax_escape(one, "a\\b\nc\x01"), 11, "escape length");
    is_str(one, "a\\\\b\\nc\\x01", "escape text");

    /* what a hostile or damaged volume may hold */
    static const struct {
        const char *key, *value;
    } bad[] = {
        {"STAGEIN.headers", "x-a: 1\\r\\nx-b: 2\\n"}, /* CR inside a value */
        {"STAGEIN.headers", "x-a: 1\\q\\n"},            /* unknown escape */
        {"STAGEIN.headers", "x-a: 1\\x00\\n"},          /* escaped NUL */
        {"STAGEIN.headers", "x-a: 1\tb"},                /* raw tab, no newline */
        {"STAGEIN.headers", "x-a: 1"},                   /* line without its newline */
        {"STAGEIN.headers", "x a: 1\\n"},                /* not a header name */
        {"STAGEIN.headers", "x-a:1\\n"},                 /* no ": " */
        {"STAGEIN.storage_class", "glacier"},
        {"STAGEIN.storage_class", "A\\nB"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char rec_bad[256];
        size_t body = strlen(bad[i].key) + strlen(bad[i].value) + 3;
        size_t rlen = body + (body + 2 >= 100 ? 3 : 2);
        snprintf(rec_bad, sizeof(rec_bad), "%zu %s=%s\n", rlen, bad[i].key, bad[i].value);
        ok(records_consistent(rec_bad, strlen(rec_bad)) &&
               tar_pax_parse(rec_bad, strlen(rec_bad), &pax, &err) < 0 &&
               strstr(err.text, "STAGEIN."),
           "bad record %zu refused: %s", i, err.text);
    }

    /* over the catalog's limit: refused on read */
    char *big = malloc(TAR_HEADERS_MAX + 64), *rec_big = malloc(TAR_HEADERS_MAX + 1024);
    memset(big, 0, TAR_HEADERS_MAX + 64);
    for (size_t n = 0; n < TAR_HEADERS_MAX; n += 11)
        memcpy(big + n, "x-a: 12345\n", 11);
    tar_pax_member_t bm = {"bkt", "big", 0, 0, big, NULL};
    size_t blen = tar_pax_records(rec_big, TAR_HEADERS_MAX + 1024, &bm, &checksum_at);
    ok(blen > 0 && tar_pax_parse(rec_big, blen, &pax, &err) < 0 && strstr(err.text, "limit"),
       "headers over %d bytes refused: %s", TAR_HEADERS_MAX, err.text);
    free(big);
    free(rec_big);
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
    tar_pax_member_t m = {"bkt", "k", 1, 0, NULL, NULL};
    is_int(tar_member_bytes(&m), TAR_BLOCK + tar_round_up(tar_pax_records_len(&m)) + TAR_BLOCK +
               TAR_BLOCK, "member size in blocks");
}

int main(void)
{
    test_records();
    test_meta_records();
    test_header();
    return done_testing();
}
