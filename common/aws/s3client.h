/* A small S3 client over libcurl, signed with the project's own SigV4
 * (common/aws/sigv4.h; never CURLOPT_AWS_SIGV4, which Debian's libcurl 7.88
 * gets wrong for ?restore, unsorted queries and encoded keys). Path-style
 * requests to one endpoint; one transfer handle per thread (its libcurl
 * handle keeps connections alive), usable alone or in a curl multi handle.
 * Used by the s3 archive backend (daemon/archive/glacier.c), `stagein catalog
 * import --from-s3` and libstagein (stagein/lib/objects.c). */
#ifndef SI_S3CLIENT_H
#define SI_S3CLIENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/strbuf.h"
#include "common/aws/sigv4.h"

#define SI_S3_BODY_MAX (8u << 20)   /* bytes of a response body kept in memory */
#define SI_S3_RECEIVE_BUFFER (512u << 10) /* curl's receive buffer for a streamed GET */
#define SI_S3_ETAG_MAX 128

typedef struct {
    const char *endpoint;          /* "http://HOST:PORT" or "https://HOST[:PORT]" */
    const char *region;            /* e.g. "us-east-1" */
    const char *access_key, *secret;
    long connect_timeout_s;        /* 0: 10 s */
    long stall_timeout_s;          /* a transfer that moves no byte this long ends; 0: 60 s */
    long request_timeout_s;        /* a whole request at most; 0: no limit */
    const char *ca_file;           /* CAs for https; NULL: the system's */
} si_s3_conf_t;

typedef struct si_s3 si_s3_t;

/* Shared by every thread (read-only after creation). */
si_s3_t *si_s3_new(const si_s3_conf_t *conf, si_error_t *err);
void si_s3_free(si_s3_t *s);
const char *si_s3_endpoint(const si_s3_t *s);

typedef struct {
    const char *method;            /* GET, HEAD, PUT, POST, DELETE */
    const char *bucket;
    const char *key;               /* NULL: a bucket request */
    const char *query;             /* encoded, as on the wire ("restore", "uploadId=..."); NULL */
    const si_http_header_t *headers; /* more headers, all signed (Range, Content-Type, x-amz-*) */
    size_t nheaders;
    /* The body: body_len bytes from memory (body), or from the file body_fd
     * at body_off when body_from_fd. */
    const void *body;
    size_t body_len;
    bool body_from_fd;
    int body_fd;
    uint64_t body_off;
    /* Hex SHA-256 of the body, signed (the server verifies the body against
     * it). NULL: computed for memory bodies, UNSIGNED-PAYLOAD for files. */
    const char *payload_sha256;
    /* Where a 2xx body goes; NULL keeps it (up to SI_S3_BODY_MAX) in the
     * response. Returning -1 ends the transfer (response.sink_failed). */
    int (*on_data)(void *arg, const void *data, size_t len);
    void *arg;
    /* NULL, or called with each header line of the answer (status lines
     * too, "\r\n" cut): for headers of an extension (x-amz-rdma-*). */
    void (*on_header)(void *arg, const char *line);
} si_s3_request_t;

typedef struct {
    long status;                   /* HTTP status of the final answer; 0: none came */
    int curl_code;                 /* CURLcode; 0 = CURLE_OK */
    char curl_error[256];
    char code[64];                 /* S3 error <Code> (or "" when the answer had no body) */
    char message[300];             /* S3 error <Message> */
    char etag[SI_S3_ETAG_MAX];     /* without quotes */
    bool has_length;
    uint64_t content_length;
    uint64_t range_total;          /* the object's size in Content-Range; 0: none or '*' */
    char storage_class[32];        /* x-amz-storage-class ("" = STANDARD) */
    char restore[200];             /* x-amz-restore */
    uint64_t received;             /* body bytes delivered or kept */
    bool sink_failed;              /* on_data refused the bytes */
    char *body;                    /* kept body, NUL-terminated, or NULL */
    size_t body_len;
} si_s3_response_t;

void si_s3_response_free(si_s3_response_t *r);
/* true for what may succeed when tried again: connection refused, reset or
 * timed out, a body cut short, HTTP 5xx and 429, SlowDown, RequestTimeout,
 * InternalError, ServiceUnavailable; false for 4xx answers and for a sink
 * that refused the bytes. */
bool si_s3_retryable(const si_s3_response_t *r);
/* "HTTP 503 SlowDown: Please reduce your request rate.", "no answer: Recv
 * failure: Connection reset by peer", ... */
void si_s3_describe(const si_s3_response_t *r, char *out, size_t size);

/* Seconds to wait before attempt (1, 2, ...): base * 2^(attempt-1) capped
 * at max, of which a random half (equal jitter from *rng, any seed). */
double si_s3_backoff(int attempt, double base, double max, uint64_t *rng);

/* ---- transfers ------------------------------------------------------------ */

typedef struct si_s3_xfer si_s3_xfer_t;

si_s3_xfer_t *si_s3_xfer_new(si_s3_t *s, si_error_t *err);
void si_s3_xfer_free(si_s3_xfer_t *x);
/* Transfers of x end (not retryable) once *stop is true: a daemon that
 * stops does not wait out a stalled transfer. */
void si_s3_xfer_stop_on(si_s3_xfer_t *x, const atomic_bool *stop);
/* Signs rq and sets the libcurl handle up; the answer goes into out (zeroed
 * here). rq's body, headers and callback must outlive the transfer. */
int si_s3_xfer_prepare(si_s3_xfer_t *x, const si_s3_request_t *rq, si_s3_response_t *out,
                       si_error_t *err);
/* The CURL * handle, to add to a curl multi handle after prepare. */
void *si_s3_xfer_curl(si_s3_xfer_t *x);
/* After the transfer ended with curl code cc: completes the response
 * (status, the error body's Code and Message). */
void si_s3_xfer_done(si_s3_xfer_t *x, int cc);
/* prepare, curl_easy_perform, done. Returns 0 when an answer came (any
 * status: see out), -1 when the request could not be made (err). */
int si_s3_xfer_perform(si_s3_xfer_t *x, const si_s3_request_t *rq, si_s3_response_t *out,
                       si_error_t *err);

/* The CompleteMultipartUpload body for parts 1..n with these ETags
 * (without quotes), appended to xml (check xml->failed). */
void si_s3_complete_xml(si_strbuf_t *xml, const char *const *etags, size_t n);

/* ---- bodies ------------------------------------------------------------------ */

/* The text of the first element at path ("InitiateMultipartUploadResult/
 * UploadId") of an XML body whose root is the path's first component. */
int si_s3_xml_text(const char *body, size_t len, const char *path, char *out, size_t size,
                   si_error_t *err);

typedef struct {
    char *key;
    uint64_t size;
    char etag[SI_S3_ETAG_MAX];     /* without quotes */
    char storage_class[32];        /* "STANDARD" when the listing says nothing */
    int64_t mtime;                 /* unix seconds of LastModified, 0 unknown */
} si_s3_object_t;

typedef struct {
    si_s3_object_t *objects;
    size_t n;
    bool truncated;
    char *next_token;              /* NextContinuationToken, or NULL */
} si_s3_list_t;

/* A ListObjectsV2 result body into out. */
int si_s3_parse_list(const char *body, size_t len, si_s3_list_t *out, si_error_t *err);
void si_s3_list_free(si_s3_list_t *l);

/* One ListObjectsV2 page of bucket under prefix (NULL: all) after token
 * (NULL: the first), at most 1000 keys. 0 with out filled; -1 with err
 * (the upstream's answer described) otherwise. */
int si_s3_list_page(si_s3_xfer_t *x, const char *bucket, const char *prefix, const char *token,
                    si_s3_list_t *out, si_s3_response_t *rs, si_error_t *err);

#endif
