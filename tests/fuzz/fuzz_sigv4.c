/* SigV4 verification (common/aws/sigv4.c) of a request as it arrives: the
 * Authorization header or the presigned query, the canonical request and
 * the string to sign, against the unit tests' access key and the session
 * credentials (common/aws/s3secrets.c: STAGEIN... keys that carry uid, gid and
 * expiry under a MAC) of a fixed master key.
 *
 * Input: "METHOD\nPATH\nQUERY\n" then one "Name: value" header per line.
 * The clock is the request's own x-amz-date (header or X-Amz-Date), so the
 * signature itself is reached rather than the skew check.
 * FUZZ_WRITE_SEEDS=DIR makes the target write requests signed by the
 * project's signer (header and presigned) into DIR and exit; FUZZ_VERBOSE=1
 * prints each input's verdict. */
#include "config.h"

#include <stdio.h>
#include <strings.h>

#include "common/aws/s3secrets.h"
#include "common/aws/sigv4.h"
#include "common/uri.h"
#include "tests/fuzz/fuzz.h"

#define HEADERS_MAX 64
#define S3_KEY "AKIAIOSFODNN7EXAMPLE"
#define S3_SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define S3_NOW 1369353600 /* 20130524T000000Z */

static si_session_keys_t *sessions;
static int64_t clock_now; /* the request's own time, for session expiry */

static int lookup(void *arg, const char *access_key, si_sigv4_credential_t *cred)
{
    (void)arg;
    if (strcmp(access_key, S3_KEY) != 0)
        return si_session_check(sessions, access_key, clock_now, cred);
    snprintf(cred->secret, sizeof(cred->secret), "%s", S3_SECRET);
    cred->uid = 2000;
    cred->gid = 200;
    return 0;
}

static void write_seed(const char *dir, int n, const si_sigv4_request_t *req, const char *query,
                       const si_sigv4_signed_t *sig)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/seed-%03d", dir, n);
    FILE *f = fopen(path, "w");
    if (!f)
        abort();
    fprintf(f, "%s\n%s\n%s\n", req->method, req->path, query ? query : "");
    for (size_t i = 0; i < req->nheaders; i++)
        fprintf(f, "%s: %s\n", req->headers[i].name, req->headers[i].value);
    if (sig) {
        fprintf(f, "x-amz-date: %s\n", sig->amz_date);
        if (sig->content_sha256[0])
            fprintf(f, "x-amz-content-sha256: %s\n", sig->content_sha256);
        fprintf(f, "Authorization: %s", sig->authorization);
    } else if (req->payload_hash) {
        /* a presigned URL signed over a payload hash: the client sends it */
        fprintf(f, "x-amz-content-sha256: %s\n", req->payload_hash);
    }
    if (fclose(f) != 0)
        abort();
}

static void write_seeds(const char *dir)
{
    si_error_t err;
    si_sigv4_signer_t *s = si_sigv4_signer_new(S3_KEY, S3_SECRET, "us-east-1", "s3", &err);
    if (!s)
        abort();
    static const si_http_header_t h1[] = {{"Host", "examplebucket.s3.amazonaws.com"},
                                          {"Range", "bytes=0-9"}};
    static const si_http_header_t h2[] = {{"Host", "127.0.0.1:9000"},
                                          {"Content-Encoding", "aws-chunked"},
                                          {"x-amz-decoded-content-length", "66560"},
                                          {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
    const si_sigv4_request_t reqs[] = {
        {"GET", "/test.txt", "", h1, 2, NULL},
        {"GET", "/examplebucket", "max-keys=2&prefix=J", h1, 1, NULL},
        {"PUT", "/examplebucket/chunkObject.txt", "", h2, 4, SI_SIGV4_STREAMING_SIGNED},
        {"PUT", "/b/key%20with%2Fslash", "partNumber=1&uploadId=abc", h1, 1,
         SI_SIGV4_EMPTY_SHA256},
        {"POST", "/b", "delete", h1, 1, SI_SIGV4_UNSIGNED_PAYLOAD},
    };
    int n = 0;
    si_session_credential_t session;
    if (si_session_mint(sessions, 1000, 100, S3_NOW + 3600, &session, &err) < 0)
        abort();
    si_sigv4_signer_t *ss = si_sigv4_signer_new(session.access_key, session.secret, "us-east-1",
                                                "s3", &err);
    si_sigv4_signed_t ssig;
    if (!ss || si_sigv4_sign(ss, &reqs[0], S3_NOW, &ssig, &err) < 0)
        abort();
    write_seed(dir, n++, &reqs[0], reqs[0].query, &ssig);
    si_sigv4_signer_free(ss);
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        si_sigv4_signed_t sig;
        if (si_sigv4_sign(s, &reqs[i], S3_NOW, &sig, &err) < 0)
            abort();
        write_seed(dir, n++, &reqs[i], reqs[i].query, &sig);
        char *q = si_sigv4_presign(s, &reqs[i], S3_NOW, 86400, &err);
        if (!q)
            abort();
        write_seed(dir, n++, &reqs[i], q, NULL);
        free(q);
    }
    si_sigv4_signer_free(s);
    printf("%d seeds written to %s\n", n, dir);
    exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* a fixed master key, so that the seeds' session keys stay valid */
    char master_path[64];
    uint8_t master[SI_SESSION_MASTER_LEN];
    si_error_t err;
    for (size_t i = 0; i < sizeof(master); i++)
        master[i] = (uint8_t)(i * 7 + 1);
    snprintf(master_path, sizeof(master_path), "/tmp/fuzz-sigv4-master.%ld", (long)getpid());
    fuzz_write_file(master_path, master, sizeof(master));
    sessions = si_session_keys_open(master_path, &err);
    unlink(master_path);
    if (!sessions) {
        fprintf(stderr, "session keys: %s\n", err.text);
        abort();
    }
    const char *dir = getenv("FUZZ_WRITE_SEEDS");
    if (dir)
        write_seeds(dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    char *method = fuzz_take_line(&p, end);
    char *path = fuzz_take_line(&p, end);
    char *query = fuzz_take_line(&p, end);
    si_http_header_t headers[HEADERS_MAX];
    char *lines[HEADERS_MAX];
    size_t n = 0;
    int64_t now = S3_NOW;
    while (p < end && n < HEADERS_MAX) {
        lines[n] = fuzz_take_line(&p, end);
        char *colon = strchr(lines[n], ':');
        if (colon)
            *colon = '\0';
        headers[n].name = lines[n];
        /* an HTTP server hands over values without their leading whitespace */
        headers[n].value = colon ? colon + 1 + strspn(colon + 1, " \t") : "";
        if (strcasecmp(headers[n].name, "x-amz-date") == 0) {
            const char *v = headers[n].value;
            (void)si_sigv4_parse_amz_date(v, &now);
        }
        n++;
    }
    si_strbuf_t date;
    si_error_t err;
    si_strbuf_init(&date, 64);
    if (si_uri_query_get(query, "X-Amz-Date", &date, &err) > 0)
        (void)si_sigv4_parse_amz_date(si_strbuf_str(&date), &now);
    si_strbuf_free(&date);

    clock_now = now;
    si_sigv4_request_t req = {method, path, query, headers, n, NULL};
    si_sigv4_verifier_conf_t conf = {.region = "us-east-1", .service = "s3", .lookup = lookup};
    si_sigv4_auth_t auth;
    si_sigv4_status_t st = SI_SIGV4_OK;
    int verified = si_sigv4_verify(&conf, &req, now, &auth, &st, &err);
    if (getenv("FUZZ_VERBOSE")) /* why a seed verifies or not */
        fprintf(stderr, "verify: %s %s\n", verified == 0 ? "OK" : si_sigv4_status_code(st),
                verified == 0 ? "" : err.text);
    if (verified == 0) {
        if (strcmp(auth.access_key, S3_KEY) == 0 ? auth.uid != 2000 : auth.uid != 1000)
            abort(); /* only a known key verifies, as its own user */
    } else {
        if (st == SI_SIGV4_OK)
            abort(); /* a refusal always says why */
        (void)si_sigv4_status_code(st);
        (void)si_sigv4_status_http(st);
    }

    char *signed_list = NULL;
    char *creq = si_sigv4_canonical_request(&req, NULL, SI_SIGV4_EMPTY_SHA256, &signed_list,
                                            &err);
    free(creq);
    if (signed_list) {
        creq = si_sigv4_canonical_request(&req, signed_list, SI_SIGV4_UNSIGNED_PAYLOAD, NULL, &err);
        free(creq);
        free(signed_list);
    }
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(method);
    free(path);
    free(query);
    return 0;
}
