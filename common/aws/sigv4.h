/* AWS Signature Version 4: the project's one implementation, used to verify
 * requests (stageind's S3 server) and to sign them (the s3 archive backend).
 *
 * Requests are described transport-neutrally (method, raw path and query as
 * they are on the wire, header list, payload hash), so a libmicrohttpd
 * handler and a libcurl client fill the same struct. Times are Unix seconds
 * supplied by the caller; nothing here reads the clock. See doc/sigv4.md. */
#ifndef SI_SIGV4_H
#define SI_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SI_SIGV4_ALGORITHM "AWS4-HMAC-SHA256"
#define SI_SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
#define SI_SIGV4_STREAMING_SIGNED "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
#define SI_SIGV4_STREAMING_SIGNED_TRAILER "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
#define SI_SIGV4_STREAMING_UNSIGNED_TRAILER "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
#define SI_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

#define SI_SIGV4_ACCESS_KEY_MAX 128
#define SI_SIGV4_SECRET_MAX 128
#define SI_SIGV4_REGION_MAX 63
#define SI_SIGV4_SERVICE_MAX 31
#define SI_SIGV4_SIGNED_HEADERS_MAX 64    /* names in one SignedHeaders list */
#define SI_SIGV4_AUTHORIZATION_MAX 4096   /* bytes of an Authorization value */
#define SI_SIGV4_HEX_LEN 64               /* a signature or sha256 in hex */
#define SI_SIGV4_AMZ_DATE_LEN 16          /* "20150830T123600Z" */
#define SI_SIGV4_DEFAULT_SKEW_S 900       /* S3's limit: 15 minutes */
#define SI_SIGV4_PRESIGN_MAX_S 604800     /* S3's limit: 7 days */

typedef struct {
    const char *name;  /* any case, as received or to be sent */
    const char *value; /* untrimmed */
} si_http_header_t;

typedef struct {
    const char *method;  /* "GET" */
    const char *path;    /* as on the wire, percent-encoded, without the query */
    const char *query;   /* as on the wire, without '?'; NULL or "" for none */
    const si_http_header_t *headers;
    size_t nheaders;
    /* Hex sha256 of the body or one of the UNSIGNED/STREAMING markers. NULL:
     * verify takes x-amz-content-sha256 (UNSIGNED-PAYLOAD for a presigned
     * request without it); sign uses UNSIGNED-PAYLOAD. */
    const char *payload_hash;
} si_sigv4_request_t;

/* HMAC-SHA256 (the primitive of SigV4, also used for session credentials). */
void si_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t len,
                    unsigned char out[32]);

/* A derived signing key, which is valid for one date, region and service
 * and may be cached for that triple. */
typedef struct {
    unsigned char bytes[32];
    char date[9]; /* YYYYMMDD */
    char region[SI_SIGV4_REGION_MAX + 1];
    char service[SI_SIGV4_SERVICE_MAX + 1];
} si_sigv4_key_t;

int si_sigv4_derive_key(const char *secret, const char *date, const char *region,
                        const char *service, si_sigv4_key_t *key, si_error_t *err);
bool si_sigv4_key_matches(const si_sigv4_key_t *key, const char *date, const char *region,
                          const char *service);

/* "20150830T123600Z" <-> Unix seconds (UTC, strict). */
int si_sigv4_parse_amz_date(const char *text, int64_t *out);
void si_sigv4_format_amz_date(int64_t t, char out[SI_SIGV4_AMZ_DATE_LEN + 1]);

/* --- the steps, exposed for tests, diagnostics and S3 error bodies ------- */

/* Canonical request over the headers named in signed_headers (lower-case,
 * ';'-separated, sorted), or over every header of req when it is NULL (then
 * *signed_out, if given, receives the list used; free() both). */
char *si_sigv4_canonical_request(const si_sigv4_request_t *req, const char *signed_headers,
                                 const char *payload_hash, char **signed_out,
                                 si_error_t *err);
char *si_sigv4_string_to_sign(const char *amz_date, const si_sigv4_key_t *key,
                              const char *canonical_request);
void si_sigv4_signature(const si_sigv4_key_t *key, const char *string_to_sign,
                        char out[SI_SIGV4_HEX_LEN + 1]);

/* aws-chunked chains: the signature of one chunk (given the sha256 of its
 * data) or of the trailer block (given the sha256 of "name:value\n" lines),
 * chained from the previous signature. */
void si_sigv4_chunk_signature(const si_sigv4_key_t *key, const char *amz_date,
                              const char *previous, const unsigned char data_sha256[32],
                              char out[SI_SIGV4_HEX_LEN + 1]);
void si_sigv4_trailer_signature(const si_sigv4_key_t *key, const char *amz_date,
                                const char *previous, const unsigned char trailer_sha256[32],
                                char out[SI_SIGV4_HEX_LEN + 1]);

/* --- signing (clients) -------------------------------------------------- */

typedef struct si_sigv4_signer si_sigv4_signer_t;

/* Thread-safe; caches the signing key for the current date. */
si_sigv4_signer_t *si_sigv4_signer_new(const char *access_key, const char *secret,
                                       const char *region, const char *service,
                                       si_error_t *err);
void si_sigv4_signer_free(si_sigv4_signer_t *s);

/* What the client must add to its request, besides its own headers. */
typedef struct {
    char amz_date[SI_SIGV4_AMZ_DATE_LEN + 1]; /* send as x-amz-date */
    char content_sha256[80];                  /* send as x-amz-content-sha256 ("" unless s3) */
    char signature[SI_SIGV4_HEX_LEN + 1];     /* the seed signature for aws-chunked */
    char authorization[SI_SIGV4_AUTHORIZATION_MAX]; /* send as Authorization */
} si_sigv4_signed_t;

/* Signs every header in req (which must include Host, and must not include
 * x-amz-date, x-amz-content-sha256 or Authorization: the signer sets those)
 * plus x-amz-date and, for service "s3", x-amz-content-sha256. */
int si_sigv4_sign(si_sigv4_signer_t *s, const si_sigv4_request_t *req, int64_t now,
                  si_sigv4_signed_t *out, si_error_t *err);

/* Presigned URL: returns the full query string to append after '?' (req's
 * own parameters plus the X-Amz-* ones, ending in X-Amz-Signature); free().
 * Signs every header of req (at least Host); the payload is UNSIGNED-PAYLOAD
 * unless req->payload_hash says otherwise. */
char *si_sigv4_presign(si_sigv4_signer_t *s, const si_sigv4_request_t *req, int64_t now,
                       int64_t expires_s, si_error_t *err);

/* --- verification (servers) --------------------------------------------- */

/* Outcomes, each mapped to the S3 error code and HTTP status S3 answers. */
typedef enum {
    SI_SIGV4_OK = 0,
    SI_SIGV4_NO_CREDENTIALS,          /* AccessDenied 403 (anonymous) */
    SI_SIGV4_SIGNATURE_MISMATCH,      /* SignatureDoesNotMatch 403 */
    SI_SIGV4_ACCESS_DENIED,           /* AccessDenied 403 */
    SI_SIGV4_HEADER_MALFORMED,        /* AuthorizationHeaderMalformed 400 */
    SI_SIGV4_QUERY_MALFORMED,         /* AuthorizationQueryParametersError 400 */
    SI_SIGV4_TIME_SKEWED,             /* RequestTimeTooSkewed 403 */
    SI_SIGV4_EXPIRED,                 /* AccessDenied 403 "Request has expired" */
    SI_SIGV4_UNKNOWN_ACCESS_KEY,      /* InvalidAccessKeyId 403 */
    SI_SIGV4_UNSUPPORTED,             /* InvalidRequest 400 (SigV2, other algorithms) */
    SI_SIGV4_INVALID_ARGUMENT,        /* InvalidArgument 400 */
    SI_SIGV4_MISSING_CONTENT_SHA256,  /* InvalidRequest 400 */
    SI_SIGV4_CONTENT_SHA256_MISMATCH, /* XAmzContentSHA256Mismatch 400 */
    SI_SIGV4_BAD_DIGEST,              /* BadDigest 400 (x-amz-checksum-* mismatch) */
    SI_SIGV4_INCOMPLETE_BODY,         /* IncompleteBody 400 */
    SI_SIGV4_MALFORMED_BODY,          /* InvalidRequest 400 (bad aws-chunked framing) */
    SI_SIGV4_INTERNAL,                /* InternalError 500 (out of memory) */
} si_sigv4_status_t;

const char *si_sigv4_status_code(si_sigv4_status_t status);
int si_sigv4_status_http(si_sigv4_status_t status);

/* How the body is protected, from x-amz-content-sha256. */
typedef enum {
    SI_SIGV4_PAYLOAD_SHA256,            /* verify the body against payload_sha256 */
    SI_SIGV4_PAYLOAD_UNSIGNED,
    SI_SIGV4_PAYLOAD_STREAMING_SIGNED,
    SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER,
    SI_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER,
} si_sigv4_payload_t;

/* Parses an x-amz-content-sha256 value; -1 for anything else. */
int si_sigv4_payload_parse(const char *value, si_sigv4_payload_t *out);

typedef struct {
    char secret[SI_SIGV4_SECRET_MAX + 1];
    uint32_t uid;
    uint32_t gid;
} si_sigv4_credential_t;

/* Fills cred and returns 0 when access_key is known, -1 when not. Called
 * concurrently from every thread that verifies. */
typedef int (*si_sigv4_lookup_fn)(void *arg, const char *access_key,
                                  si_sigv4_credential_t *cred);

/* Signing keys derived by a verifier, kept so that each access key's key is
 * derived once a day (4 HMACs) rather than on every request. Thread-safe;
 * an entry is used only while the secret it was derived from is unchanged. */
typedef struct si_sigv4_key_cache si_sigv4_key_cache_t;

si_sigv4_key_cache_t *si_sigv4_key_cache_new(si_error_t *err);
void si_sigv4_key_cache_free(si_sigv4_key_cache_t *cache);

typedef struct {
    const char *region;        /* the one region accepted, e.g. "us-east-1" */
    const char *service;       /* "s3" */
    int64_t max_skew_s;        /* 0: SI_SIGV4_DEFAULT_SKEW_S */
    si_sigv4_lookup_fn lookup;
    void *lookup_arg;
    /* S3 requires every x-amz-* header of a header-signed request to be
     * signed; true turns that check off. */
    bool allow_unsigned_amz_headers;
    si_sigv4_key_cache_t *key_cache; /* NULL: keys derived for each request */
} si_sigv4_verifier_conf_t;

/* Who signed, and what the body must still prove. */
typedef struct {
    char access_key[SI_SIGV4_ACCESS_KEY_MAX + 1];
    uint32_t uid;
    uint32_t gid;
    bool presigned;
    si_sigv4_payload_t payload;
    char payload_sha256[SI_SIGV4_HEX_LEN + 1]; /* when payload is SHA256 */
    char amz_date[SI_SIGV4_AMZ_DATE_LEN + 1];
    char signature[SI_SIGV4_HEX_LEN + 1];      /* the seed of an aws-chunked chain */
    si_sigv4_key_t key;                        /* for chunk signatures */
} si_sigv4_auth_t;

/* Verifies the Authorization header or the presigned query of req at time
 * now. Returns 0 with auth filled, or -1 with *status and err saying why;
 * *wrong_region (may be NULL) is set when the credential's scope named
 * another region than conf->region (S3 then names its region, so clients
 * re-sign). */
int si_sigv4_verify(const si_sigv4_verifier_conf_t *conf, const si_sigv4_request_t *req,
                    int64_t now, si_sigv4_auth_t *auth, si_sigv4_status_t *status,
                    si_error_t *err);
int si_sigv4_verify_region(const si_sigv4_verifier_conf_t *conf, const si_sigv4_request_t *req,
                           int64_t now, si_sigv4_auth_t *auth, si_sigv4_status_t *status,
                           bool *wrong_region, si_error_t *err);

/* --- body hash check (x-amz-content-sha256 with a hex value) ------------ */

typedef struct si_sigv4_body_check si_sigv4_body_check_t;

/* expected_hex: the 64-hex value the request was signed with. */
si_sigv4_body_check_t *si_sigv4_body_check_new(const char *expected_hex, si_error_t *err);
void si_sigv4_body_check_update(si_sigv4_body_check_t *c, const void *data, size_t len);
/* After the last byte: 0 when the body matches, else -1 with
 * SI_SIGV4_CONTENT_SHA256_MISMATCH. */
int si_sigv4_body_check_finish(si_sigv4_body_check_t *c, si_sigv4_status_t *status,
                               si_error_t *err);
void si_sigv4_body_check_free(si_sigv4_body_check_t *c);

#endif
