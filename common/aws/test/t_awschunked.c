/* aws-chunked decoding and encoding against the S3 documentation's examples
 * (65 KiB of 'a' in 64 KiB chunks, signed; and the same with a signed CRC32C
 * trailer), round trips of every mode, and broken bodies. Also the
 * x-amz-checksum-* algorithms. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/amzchecksum.h"
#include "common/aws/awschunked.h"
#include "common/strbuf.h"
#include "common/tap.h"

#define S3_SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define DATE "20130524T000000Z"
#define SEED "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
#define TRAILER_SEED "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e"
#define PAYLOAD_LEN 66560

static si_sigv4_key_t key;

/* The documented body: 64 KiB, 1 KiB, final chunk; tail follows the final
 * chunk header (CRLF, or trailers). */
static void example_body(si_strbuf_t *b, const char *s1, const char *s2, const char *s3,
                         const char *tail)
{
    char *a = malloc(65536);
    memset(a, 'a', 65536);
    si_strbuf_printf(b, "10000;chunk-signature=%s\r\n", s1);
    si_strbuf_append(b, a, 65536);
    si_strbuf_printf(b, "\r\n400;chunk-signature=%s\r\n", s2);
    si_strbuf_append(b, a, 1024);
    si_strbuf_printf(b, "\r\n0;chunk-signature=%s\r\n%s", s3, tail);
    free(a);
}

static void signed_example(si_strbuf_t *b)
{
    example_body(b, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
                 "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
                 "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9", "\r\n");
}

typedef struct {
    size_t len;
    size_t not_a; /* bytes that are not 'a' */
    si_strbuf_t copy;
    bool keep;
} sink_t;

static int sink(void *arg, const void *data, size_t len)
{
    sink_t *s = arg;
    const char *p = data;
    for (size_t i = 0; i < len; i++)
        s->not_a += p[i] != 'a';
    s->len += len;
    if (s->keep)
        si_strbuf_append(&s->copy, data, len);
    return 0;
}

/* Decodes body in slices of `slice` bytes; returns the final status. */
static si_sigv4_status_t decode(const si_awschunked_conf_t *conf, const char *body, size_t len,
                                size_t slice, sink_t *out, si_error_t *err)
{
    si_sigv4_status_t st = SI_SIGV4_INTERNAL;
    si_awschunked_t *d = si_awschunked_new(conf, err);
    if (!d)
        return SI_SIGV4_INTERNAL;
    for (size_t off = 0; off < len; off += slice) {
        size_t n = len - off < slice ? len - off : slice;
        if (si_awschunked_feed(d, body + off, n, sink, out, &st, err) < 0) {
            si_awschunked_free(d);
            return st;
        }
    }
    si_awschunked_finish(d, &st, err);
    si_awschunked_free(d);
    return st;
}

static si_awschunked_conf_t signed_conf(void)
{
    return (si_awschunked_conf_t){SI_SIGV4_PAYLOAD_STREAMING_SIGNED, &key, DATE, SEED, NULL,
                                  PAYLOAD_LEN, 0};
}

static void test_checksums(void)
{
    si_error_t err;
    char out[SI_AMZ_CHECKSUM_B64_MAX];
    is_int(si_crc32_update(0, "123456789", 9), 0xcbf43926, "CRC-32 check value");
    is_int(si_crc32c_update(0, "123456789", 9), 0xe3069283, "CRC-32C check value");
    uint32_t c = si_crc32c_update(0, "1234", 4);
    is_int(si_crc32c_update(c, "56789", 5), 0xe3069283, "CRC-32C fed in pieces");
    c = si_crc32_update(0, "12345678", 8);
    is_int(si_crc32_update(c, "9", 1), 0xcbf43926, "CRC-32 fed in pieces");

    char *a = malloc(PAYLOAD_LEN);
    memset(a, 'a', PAYLOAD_LEN);
    si_amz_checksum_alg_t alg;
    ok(si_amz_checksum_alg_parse("x-amz-checksum-crc32c", &alg) == 0 && alg == SI_AMZ_CRC32C,
       "trailer name parses");
    ok(si_amz_checksum_alg_parse("crc64nvme", &alg) < 0, "crc64nvme is not implemented");
    si_amz_checksum_t *k = si_amz_checksum_new(SI_AMZ_CRC32C, &err);
    si_amz_checksum_update(k, a, 1000);
    si_amz_checksum_update(k, a + 1000, PAYLOAD_LEN - 1000);
    si_amz_checksum_final(k, out);
    si_amz_checksum_free(k);
    is_str(out, "sOO8/Q==", "CRC-32C of the documented 65 KiB of 'a' is AWS's trailer value");
    k = si_amz_checksum_new(SI_AMZ_SHA256, &err);
    si_amz_checksum_update(k, "abc", 3);
    si_amz_checksum_final(k, out);
    si_amz_checksum_free(k);
    is_str(out, "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=", "sha256(abc) in base64");
    k = si_amz_checksum_new(SI_AMZ_CRC32, &err);
    si_amz_checksum_update(k, "123456789", 9);
    si_amz_checksum_final(k, out);
    si_amz_checksum_free(k);
    is_str(out, "y/Q5Jg==", "CRC-32 check value in base64 (big-endian)");
    free(a);
}

static void test_signed_example(void)
{
    si_error_t err;
    si_strbuf_t body;
    si_strbuf_init(&body, 1 << 20);
    signed_example(&body);
    is_int(body.len, 66824, "documented body is the documented Content-Length");
    si_awschunked_conf_t conf = signed_conf();
    static const size_t slices[] = {66824, 1, 7, 100, 4096, 65536, 70000};
    for (size_t i = 0; i < sizeof(slices) / sizeof(slices[0]); i++) {
        sink_t s = {0};
        si_sigv4_status_t st = decode(&conf, body.data, body.len, slices[i], &s, &err);
        ok(st == SI_SIGV4_OK && s.len == PAYLOAD_LEN && s.not_a == 0,
           "documented signed body decodes in %zu-byte slices (%s)", slices[i],
           st ? err.text : "ok");
    }

    /* a flipped data byte breaks its chunk's signature */
    si_strbuf_t bad;
    si_strbuf_init(&bad, 1 << 20);
    si_strbuf_append(&bad, body.data, body.len);
    bad.data[70000 - 66824 + 1000] = 'b';
    sink_t s = {0};
    si_sigv4_status_t st = decode(&conf, bad.data, bad.len, 4096, &s, &err);
    ok(st == SI_SIGV4_SIGNATURE_MISMATCH && strstr(err.text, "chunk 1"),
       "tampered data: %s: %s", si_sigv4_status_code(st), err.text);

    /* another seed (another request) breaks the first chunk */
    conf.seed_signature = TRAILER_SEED;
    memset(&s, 0, sizeof(s));
    st = decode(&conf, body.data, body.len, 65536, &s, &err);
    ok(st == SI_SIGV4_SIGNATURE_MISMATCH, "chunks replayed under another seed: %s", err.text);
    conf.seed_signature = SEED;

    /* the final chunk's signature is checked too */
    si_strbuf_reset(&bad);
    example_body(&bad, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
                 "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
                 "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df0", "\r\n");
    st = decode(&conf, bad.data, bad.len, 9999, &s, &err);
    ok(st == SI_SIGV4_SIGNATURE_MISMATCH && strstr(err.text, "final"),
       "wrong final-chunk signature: %s", err.text);

    /* truncations */
    size_t cuts[] = {0, 40, 5000, 66560, body.len - 3, body.len - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        memset(&s, 0, sizeof(s));
        st = decode(&conf, body.data, cuts[i], 4096, &s, &err);
        ok(st == SI_SIGV4_INCOMPLETE_BODY, "body cut at %zu bytes: %s: %s", cuts[i],
           si_sigv4_status_code(st), err.text);
    }
    /* extra bytes after the end */
    si_strbuf_reset(&bad);
    si_strbuf_append(&bad, body.data, body.len);
    si_strbuf_puts(&bad, "x");
    st = decode(&conf, bad.data, bad.len, 65536, &s, &err);
    ok(st == SI_SIGV4_MALFORMED_BODY && strstr(err.text, "after the end"),
       "data after the end: %s", err.text);
    /* declared length disagrees */
    conf.decoded_length = PAYLOAD_LEN + 1;
    st = decode(&conf, body.data, body.len, 65536, &s, &err);
    ok(st == SI_SIGV4_INCOMPLETE_BODY && strstr(err.text, "66561"),
       "fewer bytes than x-amz-decoded-content-length: %s", err.text);
    conf.decoded_length = 1000;
    st = decode(&conf, body.data, body.len, 65536, &s, &err);
    ok(st == SI_SIGV4_MALFORMED_BODY && strstr(err.text, "1000"),
       "more bytes than x-amz-decoded-content-length: %s", err.text);
    si_strbuf_free(&bad);
    si_strbuf_free(&body);
}

static void test_signed_trailer_example(void)
{
    si_error_t err;
    si_awschunked_conf_t conf = {SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER, &key, DATE,
                                 TRAILER_SEED, "x-amz-checksum-crc32c", PAYLOAD_LEN, 0};
    const char *s1 = "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2";
    const char *s2 = "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7";
    const char *s3 = "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992";
    const char *trailers = "x-amz-checksum-crc32c:sOO8/Q==\r\n"
                           "x-amz-trailer-signature:"
                           "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n";
    char tail[512];
    struct {
        const char *what;
        const char *fmt;
        si_sigv4_status_t want;
    } forms[] = {
        {"trailers then a blank line", "%s\r\n", SI_SIGV4_OK},
        {"blank line before the trailers", "\r\n%s\r\n", SI_SIGV4_OK},
        {"no closing blank line", "%s", SI_SIGV4_OK},
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        si_strbuf_t body;
        si_strbuf_init(&body, 1 << 20);
        snprintf(tail, sizeof(tail), forms[i].fmt, trailers);
        example_body(&body, s1, s2, s3, tail);
        sink_t s = {0};
        si_sigv4_status_t st = decode(&conf, body.data, body.len, 333, &s, &err);
        ok(st == forms[i].want && s.len == PAYLOAD_LEN,
           "documented signed-trailer body, %s (%s)", forms[i].what, st ? err.text : "ok");
        si_strbuf_free(&body);
    }
    /* the trailer signature covers the checksum value */
    si_strbuf_t body;
    si_strbuf_init(&body, 1 << 20);
    example_body(&body, s1, s2, s3,
                 "x-amz-checksum-crc32c:sOO8/A==\r\nx-amz-trailer-signature:"
                 "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n\r\n");
    sink_t s = {0};
    si_sigv4_status_t st = decode(&conf, body.data, body.len, 65536, &s, &err);
    ok(st == SI_SIGV4_SIGNATURE_MISMATCH && strstr(err.text, "trailer signature"),
       "changed checksum under the trailer signature: %s", err.text);
    si_strbuf_reset(&body);
    example_body(&body, s1, s2, s3, "x-amz-checksum-crc32c:sOO8/Q==\r\n\r\n");
    st = decode(&conf, body.data, body.len, 65536, &s, &err);
    ok(st == SI_SIGV4_MALFORMED_BODY && strstr(err.text, "x-amz-trailer-signature"),
       "signed trailer without its signature: %s", err.text);
    si_strbuf_free(&body);
}

/* Encodes PAYLOAD_LEN bytes of 'a' in chunk_size pieces. */
static char *encode(const si_awschunked_conf_t *conf, size_t chunk_size, size_t *len,
                    si_error_t *err)
{
    si_awschunked_enc_t *e = si_awschunked_enc_new(conf, err);
    if (!e)
        return NULL;
    char *a = malloc(PAYLOAD_LEN);
    memset(a, 'a', PAYLOAD_LEN);
    si_strbuf_t out;
    si_strbuf_init(&out, 4 << 20);
    for (size_t off = 0; off < PAYLOAD_LEN; off += chunk_size)
        si_awschunked_enc_chunk(e, a + off, PAYLOAD_LEN - off < chunk_size ? PAYLOAD_LEN - off
                                                                            : chunk_size,
                                &out, err);
    si_awschunked_enc_finish(e, &out, err);
    si_awschunked_enc_free(e);
    free(a);
    *len = out.len;
    return si_strbuf_take(&out);
}

static void test_encoder(void)
{
    si_error_t err;
    size_t len;
    si_awschunked_conf_t conf = signed_conf();
    char *enc = encode(&conf, 65536, &len, &err);
    si_strbuf_t want;
    si_strbuf_init(&want, 1 << 20);
    signed_example(&want);
    ok(enc && len == want.len && memcmp(enc, want.data, len) == 0,
       "encoder reproduces the documented signed body byte for byte");
    is_int(si_awschunked_encoded_length(conf.payload, NULL, PAYLOAD_LEN, 65536), 66824,
           "encoded length is the documented Content-Length");
    free(enc);
    si_strbuf_free(&want);

    si_awschunked_conf_t tconf = {SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER, &key, DATE,
                                  TRAILER_SEED, "x-amz-checksum-crc32c", PAYLOAD_LEN, 0};
    enc = encode(&tconf, 65536, &len, &err);
    ok(enc && strstr(enc + 66000, "x-amz-checksum-crc32c:sOO8/Q==\r\n") &&
       strstr(enc + 66000, "x-amz-trailer-signature:"
              "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n\r\n"),
       "encoder reproduces the documented trailer and its signature");
    free(enc);

    /* round trips of every mode and trailer, in odd chunk sizes */
    static const char *trailers[] = {NULL, "x-amz-checksum-crc32", "x-amz-checksum-crc32c",
                                     "x-amz-checksum-sha1", "x-amz-checksum-sha256"};
    static const si_sigv4_payload_t modes[] = {SI_SIGV4_PAYLOAD_STREAMING_SIGNED,
                                               SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER,
                                               SI_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER};
    for (size_t m = 0; m < 3; m++)
        for (size_t t = 0; t < 5; t++) {
            if ((modes[m] == SI_SIGV4_PAYLOAD_STREAMING_SIGNED) != !trailers[t])
                continue;
            si_awschunked_conf_t c = {modes[m], &key, DATE, SEED, trailers[t], PAYLOAD_LEN, 0};
            enc = encode(&c, 8191, &len, &err);
            sink_t s = {0};
            si_sigv4_status_t st = enc ? decode(&c, enc, len, 1000, &s, &err) : SI_SIGV4_INTERNAL;
            ok(st == SI_SIGV4_OK && s.len == PAYLOAD_LEN && s.not_a == 0 &&
               len == si_awschunked_encoded_length(modes[m], trailers[t], PAYLOAD_LEN, 8191),
               "round trip: %s with %s (%s)",
               modes[m] == SI_SIGV4_PAYLOAD_STREAMING_SIGNED ? "signed"
               : modes[m] == SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER ? "signed+trailer"
                                                                       : "unsigned+trailer",
               trailers[t] ? trailers[t] : "no trailer", st ? err.text : "ok");
            free(enc);
        }
}

static void test_unsigned_trailer(void)
{
    si_error_t err;
    si_awschunked_conf_t conf = {SI_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER, NULL, NULL, NULL,
                                 "x-amz-checksum-crc32", 11, 0};
    struct {
        const char *what, *body;
        si_sigv4_status_t want;
        const char *text;
    } cases[] = {
        /* crc32("hello world") = 0x0d4a1185 */
        {"botocore's framing", "b\r\nhello world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n",
         SI_SIGV4_OK, NULL},
        {"two chunks", "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n",
         SI_SIGV4_OK, NULL},
        {"wrong checksum", "b\r\nhello world\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n",
         SI_SIGV4_BAD_DIGEST, "does not match"},
        {"checksum not sent", "b\r\nhello world\r\n0\r\n\r\n", SI_SIGV4_INCOMPLETE_BODY, NULL},
        {"other checksum than announced",
         "b\r\nhello world\r\n0\r\nx-amz-checksum-sha256:DUoRhQ==\r\n\r\n",
         SI_SIGV4_MALFORMED_BODY, "not announced"},
        {"signature where none is expected",
         "b;chunk-signature=00\r\nhello world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n",
         SI_SIGV4_MALFORMED_BODY, "after its size"},
        {"no hex size", "zz\r\nhello world\r\n", SI_SIGV4_MALFORMED_BODY, "hex size"},
        {"17 hex digits", "00000000000000001\r\n", SI_SIGV4_MALFORMED_BODY, "16 hex"},
        {"LF without CR", "b\nhello world\r\n", SI_SIGV4_MALFORMED_BODY, "without CR"},
        {"chunk longer than declared", "a\r\nhello world\r\n", SI_SIGV4_MALFORMED_BODY,
         "longer than its declared size"},
        {"NUL in a header line", "b\0\r\n", SI_SIGV4_MALFORMED_BODY, "NUL"},
        {"trailer line without colon", "b\r\nhello world\r\n0\r\nbogus\r\n\r\n",
         SI_SIGV4_MALFORMED_BODY, "NAME:VALUE"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sink_t s = {0};
        size_t len = strlen(cases[i].body);
        if (strstr(cases[i].what, "NUL"))
            len = 4;
        si_sigv4_status_t st = decode(&conf, cases[i].body, len, 3, &s, &err);
        if (cases[i].want == SI_SIGV4_OK)
            ok(st == SI_SIGV4_OK && s.len == 11, "unsigned trailer, %s (%s)", cases[i].what,
               st ? err.text : "ok");
        else
            ok(st == cases[i].want && (!cases[i].text || strstr(err.text, cases[i].text)),
               "unsigned trailer, %s: %s: %s", cases[i].what, si_sigv4_status_code(st),
               err.text);
    }

    /* an overlong header line */
    char line[600];
    memset(line, '0', sizeof(line));
    sink_t s = {0};
    si_sigv4_status_t st = decode(&conf, line, sizeof(line), 600, &s, &err);
    ok(st == SI_SIGV4_MALFORMED_BODY && strstr(err.text, "longer than"),
       "overlong chunk header: %s", err.text);
    /* a chunk bigger than the limit */
    conf.decoded_length = -1;
    conf.max_chunk = 1024;
    st = decode(&conf, "401\r\n", 5, 5, &s, &err);
    ok(st == SI_SIGV4_MALFORMED_BODY && strstr(err.text, "limit"), "oversized chunk: %s",
       err.text);

    /* configurations */
    si_awschunked_conf_t bad = {SI_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER, NULL, NULL, NULL,
                                "x-amz-checksum-crc64nvme", -1, 0};
    ok(si_awschunked_new(&bad, &err) == NULL && strstr(err.text, "crc64nvme"),
       "unsupported trailer refused: %s", err.text);
    bad.trailer = NULL;
    ok(si_awschunked_new(&bad, &err) == NULL && strstr(err.text, "x-amz-trailer"),
       "trailer mode without x-amz-trailer refused: %s", err.text);
    bad.payload = SI_SIGV4_PAYLOAD_STREAMING_SIGNED;
    bad.trailer = NULL;
    ok(si_awschunked_new(&bad, &err) == NULL && strstr(err.text, "seed"),
       "signed mode without key refused: %s", err.text);
    bad.payload = SI_SIGV4_PAYLOAD_UNSIGNED;
    ok(si_awschunked_new(&bad, &err) == NULL, "non-streaming payload refused: %s", err.text);
}

int main(void)
{
    si_error_t err;
    if (si_sigv4_derive_key(S3_SECRET, "20130524", "us-east-1", "s3", &key, &err) < 0)
        return 1;
    test_checksums();
    test_signed_example();
    test_signed_trailer_example();
    test_encoder();
    test_unsigned_trailer();
    return done_testing();
}
