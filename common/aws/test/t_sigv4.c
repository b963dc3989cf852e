/* SigV4 against AWS's published values: the aws-sig-v4-test-suite cases
 * (AKIDEXAMPLE, 20150830T123600Z, us-east-1, service "service") and the S3
 * documentation examples (AKIAIOSFODNN7EXAMPLE, 20130524T000000Z, s3); then
 * round trips and hostile input. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/aws/sigv4.h"
#include "common/tap.h"
#include "common/text.h"

#define SUITE_KEY "AKIDEXAMPLE"
#define SUITE_SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define SUITE_NOW 1440938160 /* 20150830T123600Z */
#define S3_KEY "AKIAIOSFODNN7EXAMPLE"
#define S3_SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define S3_NOW 1369353600 /* 20130524T000000Z */
#define EMPTY SI_SIGV4_EMPTY_SHA256
#define MAXH 8

typedef struct {
    const char *name;
    const char *method, *path, *query;
    si_http_header_t headers[MAXH]; /* without X-Amz-Date: the signer adds it */
    const char *payload_hash;
    const char *signed_headers;    /* as published in .authz */
    const char *signature;
} suite_case_t;

/* sha256("Param1=value1"), the body of the x-www-form-urlencoded cases */
#define FORM_HASH "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"
#define STS_TOKEN                                                                          \
    "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRX" \
    "mxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburE" \
    "Dy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL" \
    "64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="
#define HOST {"Host", "example.amazonaws.com"}
#define UNRESERVED "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

static const suite_case_t suite[] = {
    {"get-vanilla", "GET", "/", "", {HOST}, EMPTY, "host;x-amz-date",
     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
    {"get-vanilla-empty-query-key", "GET", "/", "Param1=value1", {HOST}, EMPTY,
     "host;x-amz-date", "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb"},
    {"get-vanilla-query-order-key", "GET", "/", "Param1=value2&Param1=Value1", {HOST}, EMPTY,
     "host;x-amz-date", "eedbc4e291e521cf13422ffca22be7d2eb8146eecf653089df300a15b2382bd1"},
    {"get-vanilla-query-order-key-case", "GET", "/", "Param2=value2&Param1=value1", {HOST},
     EMPTY, "host;x-amz-date",
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
    {"get-vanilla-query-order-value", "GET", "/", "Param1=value2&Param1=value1", {HOST}, EMPTY,
     "host;x-amz-date", "5772eed61e12b33fae39ee5e7012498b51d56abc0abb7c60486157bd471c4694"},
    {"get-vanilla-query-unreserved", "GET", "/", UNRESERVED "=" UNRESERVED, {HOST}, EMPTY,
     "host;x-amz-date", "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"},
    {"get-vanilla-utf8-query", "GET", "/", "\xe1\x88\xb4=bar", {HOST}, EMPTY, "host;x-amz-date",
     "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04"},
    {"get-unreserved", "GET", "/" UNRESERVED, "", {HOST}, EMPTY, "host;x-amz-date",
     "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"},
    {"get-utf8", "GET", "/\xe1\x88\xb4", "", {HOST}, EMPTY, "host;x-amz-date",
     "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85"},
    {"get-space", "GET", "/example space/", "", {HOST}, EMPTY, "host;x-amz-date",
     "652487583200325589f1fba4c7e578f72c47cb61beeca81406b39ddec1366741"},
    {"get-header-key-duplicate", "GET", "/", "",
     {HOST, {"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}},
     EMPTY, "host;my-header1;x-amz-date",
     "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"},
    {"get-header-value-order", "GET", "/", "",
     {HOST, {"My-Header1", "value4"}, {"My-Header1", "value1"}, {"My-Header1", "value3"},
      {"My-Header1", "value2"}},
     EMPTY, "host;my-header1;x-amz-date",
     "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"},
    {"get-header-value-trim", "GET", "/", "",
     {HOST, {"My-Header1", " value1"}, {"My-Header2", " \"a   b   c\""}}, EMPTY,
     "host;my-header1;my-header2;x-amz-date",
     "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"},
    {"post-vanilla", "POST", "/", "", {HOST}, EMPTY, "host;x-amz-date",
     "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
    {"post-vanilla-query", "POST", "/", "Param1=value1", {HOST}, EMPTY, "host;x-amz-date",
     "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"},
    {"post-header-key-case", "POST", "/", "", {HOST}, EMPTY, "host;x-amz-date",
     "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
    {"post-header-key-sort", "POST", "/", "", {HOST, {"My-Header1", "value1"}}, EMPTY,
     "host;my-header1;x-amz-date",
     "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"},
    {"post-header-value-case", "POST", "/", "", {HOST, {"My-Header1", "VALUE1"}}, EMPTY,
     "host;my-header1;x-amz-date",
     "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"},
    {"post-sts-header-before", "POST", "/", "", {HOST, {"X-Amz-Security-Token", STS_TOKEN}},
     EMPTY, "host;x-amz-date;x-amz-security-token",
     "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"},
    /* The suite's later .req/.creq files add Content-Length, but its
     * published .authz and signature are over content-type;host;x-amz-date. */
    {"post-x-www-form-urlencoded", "POST", "/", "",
     {{"Content-Type", "application/x-www-form-urlencoded"}, HOST},
     FORM_HASH, "content-type;host;x-amz-date",
     "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a"},
    {"post-x-www-form-urlencoded-parameters", "POST", "/", "",
     /* AWS's suite has "charset=utf8"; its published string to sign
      * (hash 2e1cf7ed...) confirms it */
     {{"Content-Type", "application/x-www-form-urlencoded; charset=utf8"}, HOST},
     FORM_HASH, "content-type;host;x-amz-date",
     "1a72ec8f64bd914b0e42e42607c7fbce7fb2c7465f63e3092b3b0d39fa77a6fe"},
};

static size_t count_headers(const si_http_header_t *h)
{
    size_t n = 0;
    while (n < MAXH && h[n].name)
        n++;
    return n;
}

/* The access keys a verifier knows. */
typedef struct {
    const char *key, *secret;
    uint32_t uid, gid;
} known_key_t;

static const known_key_t known[] = {
    {SUITE_KEY, SUITE_SECRET, 1000, 100},
    {S3_KEY, S3_SECRET, 2000, 200},
};

static int lookup(void *arg, const char *access_key, si_sigv4_credential_t *cred)
{
    (void)arg;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(known[i].key, access_key) == 0) {
            snprintf(cred->secret, sizeof(cred->secret), "%s", known[i].secret);
            cred->uid = known[i].uid;
            cred->gid = known[i].gid;
            return 0;
        }
    return -1;
}

/* RFC 4231 test cases 1, 2 and 6 (a key longer than the block is hashed
 * first), and a key of exactly one block. */
static void test_hmac(void)
{
    unsigned char k20[20], k131[131], k64[64], mac[32];
    char hex[65];
    memset(k20, 0x0b, sizeof(k20));
    memset(k131, 0xaa, sizeof(k131));
    memset(k64, 0xaa, sizeof(k64));
    struct {
        const unsigned char *key;
        size_t keylen;
        const char *msg, *want;
    } cases[] = {
        {k20, sizeof(k20), "Hi There",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {(const unsigned char *)"Jefe", 4, "what do ya want for nothing?",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {k131, sizeof(k131), "Test Using Larger Than Block-Size Key - Hash Key First",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {k64, sizeof(k64), "exactly one block of key",
         "6b86dff4b91fe689c94291f9648c1f7cea871c24c0aaee8b7b0f295528e85fe3"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        si_hmac_sha256(cases[i].key, cases[i].keylen, cases[i].msg, strlen(cases[i].msg), mac);
        si_hex(mac, 32, hex);
        is_str(hex, cases[i].want, "HMAC-SHA256 with a %zu-byte key", cases[i].keylen);
    }
}

static void test_dates(void)
{
    char buf[SI_SIGV4_AMZ_DATE_LEN + 1];
    int64_t t = 0;
    ok(si_sigv4_parse_amz_date("20150830T123600Z", &t) == 0 && t == SUITE_NOW,
       "20150830T123600Z is %d", SUITE_NOW);
    si_sigv4_format_amz_date(S3_NOW, buf);
    is_str(buf, "20130524T000000Z", "formats the S3 examples' time");
    si_sigv4_format_amz_date(951782400, buf); /* 2000-02-29 */
    is_str(buf, "20000229T000000Z", "formats a leap day");
    ok(si_sigv4_parse_amz_date("20150230T000000Z", &t) < 0, "February 30th refused");
    ok(si_sigv4_parse_amz_date("20150229T000000Z", &t) < 0, "Feb 29th of a common year refused");
    ok(si_sigv4_parse_amz_date("20150830T123600", &t) < 0, "missing Z refused");
    ok(si_sigv4_parse_amz_date("2015083OT123600Z", &t) < 0, "letter in digits refused");
    ok(si_sigv4_parse_amz_date("20150830T246000Z", &t) < 0, "hour 24 refused");
    ok(si_sigv4_parse_amz_date("Mon, 09 Sep 2011 23:36:00 GMT", &t) < 0, "RFC 1123 refused");
}

static void test_suite_signing(void)
{
    si_error_t err;
    si_sigv4_signer_t *s = si_sigv4_signer_new(SUITE_KEY, SUITE_SECRET, "us-east-1", "service",
                                               &err);
    ok(s != NULL, "signer for the test-suite credentials");
    si_sigv4_verifier_conf_t conf = {.region = "us-east-1", .service = "service",
                                     .lookup = lookup};
    for (size_t i = 0; i < sizeof(suite) / sizeof(suite[0]); i++) {
        const suite_case_t *c = &suite[i];
        si_sigv4_request_t req = {c->method, c->path, c->query, c->headers,
                                  count_headers(c->headers), c->payload_hash};
        si_sigv4_signed_t out;
        int rc = si_sigv4_sign(s, &req, SUITE_NOW, &out, &err);
        ok(rc == 0, "%s: signs (%s)", c->name, rc ? err.text : "ok");
        is_str(out.signature, c->signature, "%s: AWS's published signature", c->name);
        is_str(out.content_sha256, "", "%s: no x-amz-content-sha256 outside s3", c->name);
        char want[1024];
        snprintf(want, sizeof(want),
                 "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
                 "aws4_request, SignedHeaders=%s, Signature=%s",
                 c->signed_headers, c->signature);
        is_str(out.authorization, want, "%s: Authorization", c->name);

        /* the verifier accepts exactly that request */
        si_http_header_t h[MAXH + 2];
        size_t n = count_headers(c->headers);
        memcpy(h, c->headers, n * sizeof(h[0]));
        h[n++] = (si_http_header_t){"X-Amz-Date", "20150830T123600Z"};
        h[n++] = (si_http_header_t){"Authorization", want};
        si_sigv4_request_t vreq = {c->method, c->path, c->query, h, n, c->payload_hash};
        si_sigv4_auth_t auth;
        si_sigv4_status_t st;
        rc = si_sigv4_verify(&conf, &vreq, SUITE_NOW + 60, &auth, &st, &err);
        ok(rc == 0 && st == SI_SIGV4_OK && auth.uid == 1000 && auth.gid == 100,
           "%s: verifies (%s)", c->name, rc ? err.text : "ok");
    }
    si_sigv4_signer_free(s);
}

static void test_suite_steps(void)
{
    si_error_t err;
    si_http_header_t h[] = {{"Host", "example.amazonaws.com"},
                            {"My-Header1", " value1"},
                            {"My-Header2", " \"a   b   c\""},
                            {"X-Amz-Date", "20150830T123600Z"}};
    si_sigv4_request_t req = {"GET", "/", "", h, 4, NULL};
    char *sh = NULL;
    char *creq = si_sigv4_canonical_request(&req, NULL, EMPTY, &sh, &err);
    is_str(creq,
           "GET\n/\n\nhost:example.amazonaws.com\nmy-header1:value1\nmy-header2:\"a b c\"\n"
           "x-amz-date:20150830T123600Z\n\nhost;my-header1;my-header2;x-amz-date\n" EMPTY,
           "get-header-value-trim: canonical request as published");
    is_str(sh, "host;my-header1;my-header2;x-amz-date", "signed headers derived");
    free(creq);
    free(sh);

    req.nheaders = 1;
    h[1] = h[3];
    req.nheaders = 2;
    creq = si_sigv4_canonical_request(&req, "host;x-amz-date", EMPTY, NULL, &err);
    is_str(creq,
           "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\n"
           "host;x-amz-date\n" EMPTY,
           "get-vanilla: canonical request as published");
    si_sigv4_key_t key;
    ok(si_sigv4_derive_key(SUITE_SECRET, "20150830", "us-east-1", "service", &key, &err) == 0,
       "derives the suite's signing key");
    ok(si_sigv4_key_matches(&key, "20150830", "us-east-1", "service") &&
       !si_sigv4_key_matches(&key, "20150831", "us-east-1", "service"),
       "a key is valid for its own date only");
    char *sts = si_sigv4_string_to_sign("20150830T123600Z", &key, creq);
    is_str(sts,
           "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n"
           "bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63",
           "get-vanilla: string to sign as published");
    char sig[SI_SIGV4_HEX_LEN + 1];
    si_sigv4_signature(&key, sts, sig);
    is_str(sig, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
           "get-vanilla: signature from the steps");
    free(creq);
    free(sts);

    req.query = "\xe1\x88\xb4=bar";
    creq = si_sigv4_canonical_request(&req, "host;x-amz-date", EMPTY, NULL, &err);
    ok(creq && strstr(creq, "\n%E1%88%B4=bar\n"), "get-vanilla-utf8-query: query encoded");
    free(creq);
    req.query = "";
    req.path = "/example space/";
    creq = si_sigv4_canonical_request(&req, "host;x-amz-date", EMPTY, NULL, &err);
    ok(creq && strncmp(creq, "GET\n/example%20space/\n", 22) == 0,
       "get-space: path encoded once");
    free(creq);
}

/* --- S3 documentation examples -------------------------------------------- */

static void test_s3_examples(void)
{
    si_error_t err;
    si_sigv4_signed_t out;
    si_sigv4_signer_t *s = si_sigv4_signer_new(S3_KEY, S3_SECRET, "us-east-1", "s3", &err);
    si_sigv4_verifier_conf_t conf = {.region = "us-east-1", .service = "s3", .lookup = lookup};
    si_sigv4_auth_t auth;
    si_sigv4_status_t st;

    /* GET Object with Range */
    si_http_header_t get_h[] = {{"Host", "examplebucket.s3.amazonaws.com"},
                                {"Range", "bytes=0-9"}};
    si_sigv4_request_t get = {"GET", "/test.txt", NULL, get_h, 2, EMPTY};
    ok(si_sigv4_sign(s, &get, S3_NOW, &out, &err) == 0, "S3 GET Object signs");
    is_str(out.authorization,
           "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
           "aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
           "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
           "S3 GET Object: published signature");
    is_str(out.content_sha256, EMPTY, "S3 GET Object: x-amz-content-sha256 to send");
    is_str(out.amz_date, "20130524T000000Z", "S3 GET Object: x-amz-date to send");

    /* the published request, as a server receives it (no space after commas) */
    si_http_header_t get_rx[] = {
        {"Host", "examplebucket.s3.amazonaws.com"},
        {"Range", "bytes=0-9"},
        {"x-amz-content-sha256", EMPTY},
        {"x-amz-date", "20130524T000000Z"},
        {"Authorization",
         "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
         "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
         "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"}};
    si_sigv4_request_t rx = {"GET", "/test.txt", "", get_rx, 5, NULL};
    int rc = si_sigv4_verify(&conf, &rx, S3_NOW + 30, &auth, &st, &err);
    ok(rc == 0 && st == SI_SIGV4_OK, "S3 GET Object: published request verifies (%s)",
       rc ? err.text : "ok");
    is_str(auth.access_key, S3_KEY, "verified access key");
    ok(auth.uid == 2000 && auth.gid == 200 && !auth.presigned, "mapped uid/gid");
    ok(auth.payload == SI_SIGV4_PAYLOAD_SHA256 && strcmp(auth.payload_sha256, EMPTY) == 0,
       "payload hash to check the body against");

    /* PUT Object */
    si_http_header_t put_h[] = {{"Host", "examplebucket.s3.amazonaws.com"},
                                {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                                {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
    si_sigv4_request_t put = {"PUT", "/test%24file.text", NULL, put_h, 3,
                              "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"};
    ok(si_sigv4_sign(s, &put, S3_NOW, &out, &err) == 0, "S3 PUT Object signs");
    is_str(out.signature, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd",
           "S3 PUT Object: published signature ('$' encoded once)");
    ok(strstr(out.authorization,
              "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class"),
       "S3 PUT Object: published signed headers");

    /* GET Bucket Lifecycle: a valueless query key */
    si_sigv4_request_t lc = {"GET", "/", "lifecycle", get_h, 1, EMPTY};
    ok(si_sigv4_sign(s, &lc, S3_NOW, &out, &err) == 0, "S3 GET ?lifecycle signs");
    is_str(out.signature, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543",
           "S3 GET ?lifecycle: published signature (valueless key as 'lifecycle=')");

    /* GET Bucket (list objects): an unsorted query */
    si_sigv4_request_t list = {"GET", "/", "max-keys=2&prefix=J", get_h, 1, EMPTY};
    ok(si_sigv4_sign(s, &list, S3_NOW, &out, &err) == 0, "S3 list objects signs");
    is_str(out.signature, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
           "S3 list objects: published signature");

    /* presigned URL */
    si_sigv4_request_t pre = {"GET", "/test.txt", NULL, get_h, 1, NULL};
    char *q = si_sigv4_presign(s, &pre, S3_NOW, 86400, &err);
    is_str(q,
           "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2F"
           "us-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&"
           "X-Amz-SignedHeaders=host&X-Amz-Signature="
           "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404",
           "S3 presigned URL: the published query string");
    si_sigv4_request_t prx = {"GET", "/test.txt", q, get_h, 1, NULL};
    rc = si_sigv4_verify(&conf, &prx, S3_NOW + 86400, &auth, &st, &err);
    ok(rc == 0 && auth.presigned && auth.payload == SI_SIGV4_PAYLOAD_UNSIGNED,
       "presigned URL verifies on its last second (%s)", rc ? err.text : "ok");
    rc = si_sigv4_verify(&conf, &prx, S3_NOW + 86401, &auth, &st, &err);
    ok(rc < 0 && st == SI_SIGV4_EXPIRED && strstr(err.text, "expired"),
       "presigned URL expires: %s", err.text);
    is_str(si_sigv4_status_code(st), "AccessDenied", "expired maps to AccessDenied");
    rc = si_sigv4_verify(&conf, &prx, S3_NOW - 3600, &auth, &st, &err);
    ok(rc < 0 && st == SI_SIGV4_ACCESS_DENIED && strstr(err.text, "not valid yet"),
       "presigned URL from the future: %s", err.text);
    free(q);

    /* seed signature of the aws-chunked example */
    si_http_header_t chunk_h[] = {{"Host", "s3.amazonaws.com"},
                                  {"Content-Encoding", "aws-chunked"},
                                  {"Content-Length", "66824"},
                                  {"x-amz-decoded-content-length", "66560"},
                                  {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
    si_sigv4_request_t seed = {"PUT", "/examplebucket/chunkObject.txt", NULL, chunk_h, 5,
                               SI_SIGV4_STREAMING_SIGNED};
    ok(si_sigv4_sign(s, &seed, S3_NOW, &out, &err) == 0, "aws-chunked seed signs");
    is_str(out.signature, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
           "aws-chunked example: published seed signature");
    is_str(out.content_sha256, SI_SIGV4_STREAMING_SIGNED, "streaming marker to send");
    si_sigv4_signer_free(s);
}

static void sha_a(size_t n, unsigned char out[32])
{
    char *buf = malloc(n ? n : 1);
    memset(buf, 'a', n);
    EVP_Digest(buf, n, out, NULL, EVP_sha256(), NULL);
    free(buf);
}

static void test_chunk_chain(void)
{
    si_error_t err;
    si_sigv4_key_t key;
    unsigned char h[32];
    char sig[SI_SIGV4_HEX_LEN + 1], prev[SI_SIGV4_HEX_LEN + 1];
    si_sigv4_derive_key(S3_SECRET, "20130524", "us-east-1", "s3", &key, &err);
    const char *seed = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
    sha_a(65536, h);
    si_sigv4_chunk_signature(&key, "20130524T000000Z", seed, h, sig);
    is_str(sig, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
           "chunk 1 (64 KiB): published signature");
    strcpy(prev, sig);
    sha_a(1024, h);
    si_sigv4_chunk_signature(&key, "20130524T000000Z", prev, h, sig);
    is_str(sig, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
           "chunk 2 (1 KiB): published signature");
    strcpy(prev, sig);
    sha_a(0, h);
    si_sigv4_chunk_signature(&key, "20130524T000000Z", prev, h, sig);
    is_str(sig, "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
           "final empty chunk: published signature");

    /* the trailer example: same data, a signed CRC32C trailer */
    sha_a(65536, h);
    si_sigv4_chunk_signature(&key, "20130524T000000Z",
                             "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e",
                             h, sig);
    is_str(sig, "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2",
           "trailer example chunk 1: published signature");
    strcpy(prev, sig);
    sha_a(1024, h);
    si_sigv4_chunk_signature(&key, "20130524T000000Z", prev, h, sig);
    strcpy(prev, sig);
    sha_a(0, h);
    si_sigv4_chunk_signature(&key, "20130524T000000Z", prev, h, sig);
    is_str(sig, "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992",
           "trailer example final chunk: published signature");
    const char *trailer = "x-amz-checksum-crc32c:sOO8/Q==\n";
    EVP_Digest(trailer, strlen(trailer), h, NULL, EVP_sha256(), NULL);
    strcpy(prev, sig);
    si_sigv4_trailer_signature(&key, "20130524T000000Z", prev, h, sig);
    is_str(sig, "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435",
           "trailer signature: published value");
}

/* --- round trips of what libcurl 7.88 gets wrong -------------------------- */

static int sign_then_verify(const si_sigv4_request_t *req, si_error_t *err)
{
    si_sigv4_signer_t *s = si_sigv4_signer_new(S3_KEY, S3_SECRET, "us-east-1", "s3", err);
    si_sigv4_signed_t out;
    if (!s || si_sigv4_sign(s, req, S3_NOW, &out, err) < 0) {
        si_sigv4_signer_free(s);
        return -1;
    }
    si_sigv4_signer_free(s);
    si_http_header_t h[MAXH + 3];
    memcpy(h, req->headers, req->nheaders * sizeof(h[0]));
    size_t n = req->nheaders;
    h[n++] = (si_http_header_t){"X-Amz-Date", out.amz_date};
    h[n++] = (si_http_header_t){"X-Amz-Content-Sha256", out.content_sha256};
    h[n++] = (si_http_header_t){"Authorization", out.authorization};
    si_sigv4_request_t rx = *req;
    rx.headers = h;
    rx.nheaders = n;
    rx.payload_hash = NULL;
    si_sigv4_verifier_conf_t conf = {.region = "us-east-1", .service = "s3", .lookup = lookup};
    si_sigv4_auth_t auth;
    si_sigv4_status_t st;
    return si_sigv4_verify(&conf, &rx, S3_NOW, &auth, &st, err);
}

/* --- the verifier's key cache ------------------------------------------------- */

/* One access key whose secret the test changes, as a reloaded secrets file would. */
static int lookup_mutable(void *arg, const char *access_key, si_sigv4_credential_t *cred)
{
    const char *secret = arg;
    if (strncmp(access_key, "CACHEKEY", 8) != 0)
        return -1;
    snprintf(cred->secret, sizeof(cred->secret), "%s", secret);
    cred->uid = 7;
    return 0;
}

/* Signs GET / as access_key with secret at now, verifies it with conf. */
static int cached_verify(const si_sigv4_verifier_conf_t *conf, const char *access_key,
                         const char *secret, int64_t now, si_sigv4_status_t *st,
                         si_error_t *err)
{
    si_http_header_t h[4] = {{"Host", "h"}};
    si_sigv4_request_t req = {"GET", "/", NULL, h, 1, EMPTY};
    si_sigv4_signer_t *s = si_sigv4_signer_new(access_key, secret, "us-east-1", "s3", err);
    si_sigv4_signed_t out;
    if (!s || si_sigv4_sign(s, &req, now, &out, err) < 0) {
        si_sigv4_signer_free(s);
        return -1;
    }
    si_sigv4_signer_free(s);
    h[1] = (si_http_header_t){"X-Amz-Date", out.amz_date};
    h[2] = (si_http_header_t){"X-Amz-Content-Sha256", out.content_sha256};
    h[3] = (si_http_header_t){"Authorization", out.authorization};
    req.nheaders = 4;
    req.payload_hash = NULL;
    si_sigv4_auth_t auth;
    return si_sigv4_verify(conf, &req, now, &auth, st, err);
}

static void test_key_cache(void)
{
    si_error_t err;
    si_sigv4_status_t st;
    char secret[64] = "first-secret";
    si_sigv4_key_cache_t *cache = si_sigv4_key_cache_new(&err);
    ok(cache != NULL, "key cache created");
    si_sigv4_verifier_conf_t conf = {.region = "us-east-1", .service = "s3",
                                     .lookup = lookup_mutable, .lookup_arg = secret,
                                     .key_cache = cache};
    ok(cached_verify(&conf, "CACHEKEY0", "first-secret", S3_NOW, &st, &err) == 0,
       "cache: first request verified");
    ok(cached_verify(&conf, "CACHEKEY0", "first-secret", S3_NOW + 60, &st, &err) == 0,
       "cache: second request verified with the cached key");
    ok(cached_verify(&conf, "CACHEKEY0", "wrong-secret", S3_NOW + 60, &st, &err) < 0 &&
       st == SI_SIGV4_SIGNATURE_MISMATCH, "cache: a request signed with another secret fails");
    snprintf(secret, sizeof(secret), "second-secret");
    ok(cached_verify(&conf, "CACHEKEY0", "first-secret", S3_NOW + 120, &st, &err) < 0 &&
       st == SI_SIGV4_SIGNATURE_MISMATCH,
       "cache: once the secret changed, the old one no longer verifies");
    ok(cached_verify(&conf, "CACHEKEY0", "second-secret", S3_NOW + 120, &st, &err) == 0,
       "cache: ... and the new one does");
    ok(cached_verify(&conf, "CACHEKEY0", "second-secret", S3_NOW + 86400, &st, &err) == 0,
       "cache: the next day's key is derived");
    int verified = 0;
    for (int i = 0; i < 200; i++) {
        char key[32];
        snprintf(key, sizeof(key), "CACHEKEY%d", i % 100);
        verified += cached_verify(&conf, key, "second-secret", S3_NOW + 86400 + i, &st,
                                  &err) == 0;
    }
    is_int(verified, 200, "cache: 100 access keys sharing 64 slots, each twice: all verified");
    si_sigv4_key_cache_free(cache);
}

static void test_round_trips(void)
{
    si_error_t err;
    si_http_header_t h[] = {{"Host", "127.0.0.1:9000"},
                            {"x-amz-meta-a", "1"},
                            {"x-amz-meta-ab", "2"},
                            {"x-amz-meta-empty", ""},
                            {"Content-Type", "application/xml"}};
    struct {
        const char *what, *method, *path, *query;
    } cases[] = {
        {"valueless ?restore", "POST", "/bucket/key", "restore"},
        {"valueless ?uploads", "POST", "/bucket/key", "uploads"},
        {"unsorted query", "GET", "/bucket", "prefix=a&list-type=2&delimiter=%2F"},
        {"encoded '/' in a query value", "GET", "/bucket", "prefix=dir%2Fsub%2F"},
        {"'+' and '=' in the key path", "PUT", "/bucket/a%2Bb%3Dc", ""},
        {"space, '$' and UTF-8 in the key", "PUT", "/bucket/a%20b%24%C3%A9", ""},
        {"encoded '/' inside a key segment", "GET", "/bucket/a%2Fb", ""},
        {"empty query value", "GET", "/bucket", "marker="},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        si_sigv4_request_t req = {cases[i].method, cases[i].path, cases[i].query, h, 5, EMPTY};
        int rc = sign_then_verify(&req, &err);
        ok(rc == 0, "round trip: %s (%s)", cases[i].what, rc ? err.text : "ok");
    }

    /* '+' in a query is a space, as S3 reads it */
    si_http_header_t hh[] = {{"Host", "h"}, {"X-Amz-Date", "20130524T000000Z"}};
    si_sigv4_request_t r1 = {"GET", "/", "prefix=a+b", hh, 2, NULL};
    si_sigv4_request_t r2 = {"GET", "/", "prefix=a%20b", hh, 2, NULL};
    char *c1 = si_sigv4_canonical_request(&r1, "host;x-amz-date", EMPTY, NULL, &err);
    char *c2 = si_sigv4_canonical_request(&r2, "host;x-amz-date", EMPTY, NULL, &err);
    ok(c1 && c2 && strcmp(c1, c2) == 0, "'+' in a query value canonicalises as %%20");
    free(c1);
    free(c2);
    si_sigv4_request_t r3 = {"GET", "/a+b", "", hh, 2, NULL};
    c1 = si_sigv4_canonical_request(&r3, "host;x-amz-date", EMPTY, NULL, &err);
    ok(c1 && strncmp(c1, "GET\n/a%2Bb\n", 11) == 0, "'+' in a path stays a plus");
    free(c1);

    /* the signer refuses what it sets itself */
    si_sigv4_signer_t *s = si_sigv4_signer_new(S3_KEY, S3_SECRET, "us-east-1", "s3", &err);
    si_sigv4_signed_t out;
    si_sigv4_request_t dup = {"GET", "/", NULL, hh, 2, EMPTY};
    ok(si_sigv4_sign(s, &dup, S3_NOW, &out, &err) < 0 && strstr(err.text, "x-amz-date"),
       "caller-supplied x-amz-date refused: %s", err.text);
    si_sigv4_request_t nohost = {"GET", "/", NULL, hh + 1, 0, EMPTY};
    ok(si_sigv4_sign(s, &nohost, S3_NOW, &out, &err) < 0 && strstr(err.text, "Host"),
       "request without Host refused: %s", err.text);
    si_sigv4_request_t badhash = {"GET", "/", NULL, hh, 1, "ABC"};
    ok(si_sigv4_sign(s, &badhash, S3_NOW, &out, &err) < 0, "bad payload hash refused: %s",
       err.text);
    ok(si_sigv4_presign(s, &r3, S3_NOW, 604801, &err) == NULL && strstr(err.text, "604800"),
       "presign beyond 7 days refused: %s", err.text);
    si_sigv4_signer_free(s);
    ok(si_sigv4_signer_new("AK/IA", S3_SECRET, "us-east-1", "s3", &err) == NULL,
       "access key with '/' refused: %s", err.text);
    ok(si_sigv4_signer_new(S3_KEY, S3_SECRET, "US East", "s3", &err) == NULL,
       "bad region refused: %s", err.text);
}

/* --- hostile and wrong requests -------------------------------------------- */

#define GOOD_AUTH                                                                         \
    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request," \
    "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"                           \
    "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"

typedef struct {
    const char *what;
    const char *authorization; /* NULL: none */
    const char *date;          /* NULL: none */
    const char *extra_name, *extra_value;
    const char *query;
    int64_t now_offset;
    const char *region;
    si_sigv4_status_t want;
    const char *want_text;
} bad_case_t;

static const bad_case_t bad[] = {
    {"good request", GOOD_AUTH, "20130524T000000Z", NULL, NULL, "", 0, "us-east-1",
     SI_SIGV4_OK, NULL},
    {"no authentication", NULL, "20130524T000000Z", NULL, NULL, "", 0, "us-east-1",
     SI_SIGV4_NO_CREDENTIALS, "anonymous"},
    {"wrong signature",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
     "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb42",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_SIGNATURE_MISMATCH,
     "does not match"},
    {"tampered query", GOOD_AUTH, "20130524T000000Z", NULL, NULL, "versionId=1", 0,
     "us-east-1", SI_SIGV4_SIGNATURE_MISMATCH, "does not match"},
    {"wrong region (server in eu-west-1)", GOOD_AUTH, "20130524T000000Z", NULL, NULL, "", 0,
     "eu-west-1", SI_SIGV4_HEADER_MALFORMED, "expecting 'eu-west-1'"},
    {"missing x-amz-date", GOOD_AUTH, NULL, NULL, NULL, "", 0, "us-east-1",
     SI_SIGV4_ACCESS_DENIED, "x-amz-date"},
    {"x-amz-date twice", GOOD_AUTH, "20130524T000000Z", "X-Amz-Date", "20130524T000000Z", "", 0,
     "us-east-1", SI_SIGV4_INVALID_ARGUMENT, "2 x-amz-date"},
    {"malformed x-amz-date", GOOD_AUTH, "2013-05-24T00:00:00Z", NULL, NULL, "", 0, "us-east-1",
     SI_SIGV4_ACCESS_DENIED, "YYYYMMDDTHHMMSSZ"},
    {"clock 16 minutes ahead", GOOD_AUTH, "20130524T000000Z", NULL, NULL, "", 901, "us-east-1",
     SI_SIGV4_TIME_SKEWED, "900"},
    {"clock 14 minutes behind", GOOD_AUTH, "20130524T000000Z", NULL, NULL, "", -899,
     "us-east-1", SI_SIGV4_OK, NULL},
    {"unknown access key",
     "AWS4-HMAC-SHA256 Credential=AKIANOTKNOWN/20130524/us-east-1/s3/aws4_request,"
     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
     "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_UNKNOWN_ACCESS_KEY,
     "AKIANOTKNOWN"},
    {"wrong service",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/ec2/aws4_request,"
     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED, "'s3'"},
    {"credential date is not the request date",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130525/us-east-1/s3/aws4_request,"
     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED,
     "20130525"},
    {"bad terminator",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws5_request,"
     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED,
     "aws4_request"},
    {"credential with 4 parts",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/aws4_request,"
     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED,
     "Credential must be"},
    {"credential with 6 parts",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request/x,"
     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED,
     "Credential"},
    {"duplicate Credential",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED,
     "repeats Credential"},
    {"truncated header",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "SignedHeaders=host;ra",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED, "lacks"},
    {"algorithm only", "AWS4-HMAC-SHA256", "20130524T000000Z", NULL, NULL, "", 0, "us-east-1",
     SI_SIGV4_UNSUPPORTED, "not supported"},
    {"unknown component",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "Foo=bar,SignedHeaders=host,Signature="
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED, "Foo"},
    {"upper-case hex signature",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
     "Signature=F0E8BDB87C964420E857BD35B5D6ED310BD44F0170ABA48DD91039C6036BDB41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED, "hex"},
    {"non-hex signature",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
     "Signature=g0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED, "hex"},
    {"short signature",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED, "64"},
    {"Signature Version 2", "AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_UNSUPPORTED, "Version 2"},
    {"unsorted SignedHeaders",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "SignedHeaders=range;host;x-amz-content-sha256;x-amz-date,Signature="
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED, "sorted"},
    {"host not signed",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "SignedHeaders=range;x-amz-content-sha256;x-amz-date,Signature="
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED, "host"},
    {"signed header missing from the request",
     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
     "SignedHeaders=host;if-match;range;x-amz-content-sha256;x-amz-date,Signature="
     "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
     "20130524T000000Z", NULL, NULL, "", 0, "us-east-1", SI_SIGV4_HEADER_MALFORMED,
     "if-match"},
    {"unsigned x-amz-* header", GOOD_AUTH, "20130524T000000Z", "x-amz-copy-source", "/b/k", "",
     0, "us-east-1", SI_SIGV4_ACCESS_DENIED, "x-amz-copy-source"},
    {"both mechanisms", GOOD_AUTH, "20130524T000000Z", NULL, NULL,
     "X-Amz-Algorithm=AWS4-HMAC-SHA256", 0, "us-east-1", SI_SIGV4_INVALID_ARGUMENT,
     "Only one auth mechanism"},
    {"malformed query escape", GOOD_AUTH, "20130524T000000Z", NULL, NULL, "a=%zz", 0,
     "us-east-1", SI_SIGV4_INVALID_ARGUMENT, "percent"},
};

static void test_bad_requests(void)
{
    char overlong[SI_SIGV4_AUTHORIZATION_MAX + 100];
    snprintf(overlong, sizeof(overlong), "%s", GOOD_AUTH ",");
    size_t len = strlen(overlong);
    memset(overlong + len, ' ', sizeof(overlong) - len - 1);
    overlong[sizeof(overlong) - 1] = '\0';

    for (size_t i = 0; i <= sizeof(bad) / sizeof(bad[0]); i++) {
        bad_case_t c;
        if (i < sizeof(bad) / sizeof(bad[0]))
            c = bad[i];
        else
            c = (bad_case_t){"overlong header", overlong, "20130524T000000Z", NULL, NULL, "",
                             0, "us-east-1", SI_SIGV4_HEADER_MALFORMED, "longer than"};
        si_http_header_t h[8] = {{"Host", "examplebucket.s3.amazonaws.com"},
                                 {"Range", "bytes=0-9"},
                                 {"x-amz-content-sha256", EMPTY}};
        size_t n = 3;
        if (c.date)
            h[n++] = (si_http_header_t){"x-amz-date", c.date};
        if (c.authorization)
            h[n++] = (si_http_header_t){"Authorization", c.authorization};
        if (c.extra_name)
            h[n++] = (si_http_header_t){c.extra_name, c.extra_value};
        si_sigv4_request_t req = {"GET", "/test.txt", c.query, h, n, NULL};
        si_sigv4_verifier_conf_t conf = {.region = c.region, .service = "s3", .lookup = lookup};
        si_sigv4_auth_t auth;
        si_sigv4_status_t st = SI_SIGV4_INTERNAL;
        si_error_t err = {""};
        int rc = si_sigv4_verify(&conf, &req, S3_NOW + c.now_offset, &auth, &st, &err);
        if (c.want == SI_SIGV4_OK) {
            ok(rc == 0 && st == SI_SIGV4_OK, "%s: accepted (%s)", c.what, rc ? err.text : "ok");
        } else {
            ok(rc < 0 && st == c.want && strstr(err.text, c.want_text), "%s: %s %d: %s", c.what,
               si_sigv4_status_code(st), si_sigv4_status_http(st), err.text);
        }
    }
}

static void test_presigned_bad(void)
{
    si_http_header_t h[] = {{"Host", "examplebucket.s3.amazonaws.com"}};
    si_sigv4_verifier_conf_t conf = {.region = "us-east-1", .service = "s3", .lookup = lookup};
#define PQ(...)                                                                              \
    "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2F" \
    "us-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&" __VA_ARGS__
#define SIGQ "X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
    struct {
        const char *what, *query;
        si_sigv4_status_t want;
        const char *text;
    } cases[] = {
        {"published presigned URL", PQ("X-Amz-Expires=86400&X-Amz-SignedHeaders=host&" SIGQ),
         SI_SIGV4_OK, NULL},
        {"parameters in another order",
         "X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404&"
         "X-Amz-SignedHeaders=host&X-Amz-Expires=86400&X-Amz-Date=20130524T000000Z&"
         "X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&"
         "X-Amz-Algorithm=AWS4-HMAC-SHA256",
         SI_SIGV4_OK, NULL},
        {"missing X-Amz-Signature", PQ("X-Amz-Expires=86400&X-Amz-SignedHeaders=host"),
         SI_SIGV4_QUERY_MALFORMED, "X-Amz-Signature"},
        {"X-Amz-Expires over a week", PQ("X-Amz-Expires=604801&X-Amz-SignedHeaders=host&" SIGQ),
         SI_SIGV4_QUERY_MALFORMED, "X-Amz-Expires"},
        {"X-Amz-Expires not a number", PQ("X-Amz-Expires=-5&X-Amz-SignedHeaders=host&" SIGQ),
         SI_SIGV4_QUERY_MALFORMED, "X-Amz-Expires"},
        {"repeated X-Amz-Date",
         PQ("X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&" SIGQ),
         SI_SIGV4_QUERY_MALFORMED, "repeats X-Amz-Date"},
        {"X-Amz-Expires not valid percent-encoding",
         PQ("X-Amz-Expires=86%4&X-Amz-SignedHeaders=host&" SIGQ),
         SI_SIGV4_QUERY_MALFORMED, "query parameter X-Amz-Expires: malformed"},
        {"X-Amz-Signature too long",
         PQ("X-Amz-Expires=86400&X-Amz-SignedHeaders=host&" SIGQ
            "00000000000000000000000000000000000000000000000000"),
         SI_SIGV4_QUERY_MALFORMED, "query parameter X-Amz-Signature: decoded text is too long"},
        {"a value that only looks like a parameter",
         PQ("X-Amz-Expires=86400&X-Amz-SignedHeaders=host&x=X-Amz-Signature%3D1&" SIGQ),
         SI_SIGV4_SIGNATURE_MISMATCH, "does not match"},
        {"extra parameter not signed",
         PQ("X-Amz-Expires=86400&X-Amz-SignedHeaders=host&response-content-type=x&" SIGQ),
         SI_SIGV4_SIGNATURE_MISMATCH, "does not match"},
        {"longer lifetime than signed", PQ("X-Amz-Expires=86401&X-Amz-SignedHeaders=host&" SIGQ),
         SI_SIGV4_SIGNATURE_MISMATCH, "does not match"},
        {"other algorithm",
         "X-Amz-Algorithm=AWS4-HMAC-SHA1&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2F"
         "us-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&"
         "X-Amz-SignedHeaders=host&" SIGQ,
         SI_SIGV4_QUERY_MALFORMED, "X-Amz-Algorithm"},
        {"bad X-Amz-Date",
         "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2F"
         "us-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524&X-Amz-Expires=86400&"
         "X-Amz-SignedHeaders=host&" SIGQ,
         SI_SIGV4_QUERY_MALFORMED, "ISO8601"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        si_sigv4_request_t req = {"GET", "/test.txt", cases[i].query, h, 1, NULL};
        si_sigv4_auth_t auth;
        si_sigv4_status_t st = SI_SIGV4_INTERNAL;
        si_error_t err = {""};
        int rc = si_sigv4_verify(&conf, &req, S3_NOW + 10, &auth, &st, &err);
        if (cases[i].want == SI_SIGV4_OK)
            ok(rc == 0, "presigned, %s: accepted (%s)", cases[i].what, rc ? err.text : "ok");
        else
            ok(rc < 0 && st == cases[i].want && strstr(err.text, cases[i].text),
               "presigned, %s: %s: %s", cases[i].what, si_sigv4_status_code(st), err.text);
    }
}

static void test_payload(void)
{
    si_error_t err;
    si_sigv4_status_t st;
    si_sigv4_payload_t p;
    ok(si_sigv4_payload_parse("UNSIGNED-PAYLOAD", &p) == 0 && p == SI_SIGV4_PAYLOAD_UNSIGNED,
       "UNSIGNED-PAYLOAD");
    ok(si_sigv4_payload_parse(SI_SIGV4_STREAMING_UNSIGNED_TRAILER, &p) == 0 &&
       p == SI_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER, "STREAMING-UNSIGNED-PAYLOAD-TRAILER");
    ok(si_sigv4_payload_parse("STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD", &p) < 0,
       "SigV4a streaming is not accepted");
    ok(si_sigv4_payload_parse(EMPTY "0", &p) < 0, "65 hex digits refused");

    const char *body = "Welcome to Amazon S3.";
    si_sigv4_body_check_t *c =
        si_sigv4_body_check_new("44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
                                &err);
    si_sigv4_body_check_update(c, body, 10);
    si_sigv4_body_check_update(c, body + 10, strlen(body) - 10);
    ok(si_sigv4_body_check_finish(c, &st, &err) == 0 && st == SI_SIGV4_OK,
       "body fed in pieces matches its signed hash");
    si_sigv4_body_check_free(c);
    c = si_sigv4_body_check_new(EMPTY, &err);
    si_sigv4_body_check_update(c, "x", 1);
    ok(si_sigv4_body_check_finish(c, &st, &err) < 0 && st == SI_SIGV4_CONTENT_SHA256_MISMATCH,
       "different body: %s %s", si_sigv4_status_code(st), err.text);
    is_int(si_sigv4_status_http(st), 400, "XAmzContentSHA256Mismatch is a 400");
    si_sigv4_body_check_free(c);
    ok(si_sigv4_body_check_new("UNSIGNED-PAYLOAD", &err) == NULL, "no check without a hash");

    /* header auth requires x-amz-content-sha256 for s3 */
    si_http_header_t h[] = {{"Host", "examplebucket.s3.amazonaws.com"},
                            {"Range", "bytes=0-9"},
                            {"x-amz-date", "20130524T000000Z"},
                            {"Authorization", GOOD_AUTH},
                            {"x-amz-content-sha256", "not-a-hash"}};
    si_sigv4_verifier_conf_t conf = {.region = "us-east-1", .service = "s3", .lookup = lookup,
                                     .allow_unsigned_amz_headers = true};
    si_sigv4_auth_t auth;
    si_sigv4_request_t req = {"GET", "/test.txt", "", h, 4, NULL};
    ok(si_sigv4_verify(&conf, &req, S3_NOW, &auth, &st, &err) < 0 &&
       st == SI_SIGV4_MISSING_CONTENT_SHA256, "missing x-amz-content-sha256: %s", err.text);
    req.nheaders = 5;
    ok(si_sigv4_verify(&conf, &req, S3_NOW, &auth, &st, &err) < 0 &&
       st == SI_SIGV4_INVALID_ARGUMENT && strstr(err.text, "x-amz-content-sha256"),
       "invalid x-amz-content-sha256: %s", err.text);
}

int main(void)
{
    test_hmac();
    test_dates();
    test_suite_signing();
    test_suite_steps();
    test_s3_examples();
    test_chunk_chain();
    test_round_trips();
    test_key_cache();
    test_bad_requests();
    test_presigned_bad();
    test_payload();
    return done_testing();
}
