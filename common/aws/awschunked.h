/* aws-chunked bodies (Content-Encoding: aws-chunked): the decoder a server
 * feeds arbitrary slices of the request body, which checks every chunk
 * signature (chained from the request's seed signature) or the trailing
 * x-amz-checksum-*, and the encoder a client (or a test) frames a body with.
 *
 *   STREAMING-AWS4-HMAC-SHA256-PAYLOAD          hex;chunk-signature=SIG CRLF data CRLF
 *   STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER  the same + checksum + x-amz-trailer-signature
 *   STREAMING-UNSIGNED-PAYLOAD-TRAILER          hex CRLF data CRLF ... + checksum trailer
 *
 * Memory is bounded (one line buffer, hash states) whatever the body size. */
#ifndef SI_AWSCHUNKED_H
#define SI_AWSCHUNKED_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/aws/sigv4.h"
#include "common/strbuf.h"

#define SI_AWSCHUNKED_LINE_MAX 256                      /* a chunk header or trailer line */
#define SI_AWSCHUNKED_DEFAULT_MAX_CHUNK (64ull << 20)   /* bytes of data in one chunk */

typedef struct {
    si_sigv4_payload_t payload;  /* one of the three STREAMING modes */
    const si_sigv4_key_t *key;   /* signed modes: the request's signing key */
    const char *amz_date;        /* signed modes: the request's x-amz-date */
    const char *seed_signature;  /* signed modes: the request's signature */
    const char *trailer;         /* x-amz-trailer ("x-amz-checksum-crc32c"), NULL if none */
    int64_t decoded_length;      /* x-amz-decoded-content-length, -1 if not sent */
    uint64_t max_chunk;          /* 0: SI_AWSCHUNKED_DEFAULT_MAX_CHUNK */
} si_awschunked_conf_t;

/* --- decoding ----------------------------------------------------------- */

typedef struct si_awschunked si_awschunked_t;

/* Receives payload bytes as they are decoded. Bytes reach it before the
 * signature of their chunk (or the trailing checksum) is checked: the caller
 * commits nothing until si_awschunked_finish() succeeds. Returns 0, or -1 to
 * stop decoding (feed then fails with SI_SIGV4_INTERNAL). */
typedef int (*si_awschunked_sink_fn)(void *arg, const void *data, size_t len);

si_awschunked_t *si_awschunked_new(const si_awschunked_conf_t *conf, si_error_t *err);
/* Feeds the next len bytes of the body. On -1, *status names the S3 error
 * (SignatureDoesNotMatch, BadDigest, InvalidRequest for bad framing, ...)
 * and the decoder refuses further input. */
int si_awschunked_feed(si_awschunked_t *d, const void *data, size_t len,
                       si_awschunked_sink_fn sink, void *arg, si_sigv4_status_t *status,
                       si_error_t *err);
/* At the end of the body: 0 when it was complete and every check passed. */
int si_awschunked_finish(si_awschunked_t *d, si_sigv4_status_t *status, si_error_t *err);
/* Payload bytes decoded so far. */
uint64_t si_awschunked_decoded(const si_awschunked_t *d);
void si_awschunked_free(si_awschunked_t *d);

/* --- encoding ----------------------------------------------------------- */

typedef struct si_awschunked_enc si_awschunked_enc_t;

si_awschunked_enc_t *si_awschunked_enc_new(const si_awschunked_conf_t *conf, si_error_t *err);
/* The line that precedes len > 0 bytes of data ("400;chunk-signature=...\r\n");
 * the caller sends it, the data, then "\r\n". Returns the line's length. */
size_t si_awschunked_enc_header(si_awschunked_enc_t *e, const void *data, size_t len,
                                char line[SI_AWSCHUNKED_LINE_MAX]);
/* Appends header, data and CRLF to out. */
int si_awschunked_enc_chunk(si_awschunked_enc_t *e, const void *data, size_t len,
                            si_strbuf_t *out, si_error_t *err);
/* Appends the final empty chunk and the trailers. */
int si_awschunked_enc_finish(si_awschunked_enc_t *e, si_strbuf_t *out, si_error_t *err);
void si_awschunked_enc_free(si_awschunked_enc_t *e);

/* The Content-Length of a payload_len body framed in chunk_size chunks by
 * the encoder, for clients that send Content-Length rather than chunked
 * transfer encoding. */
uint64_t si_awschunked_encoded_length(si_sigv4_payload_t payload, const char *trailer,
                                      uint64_t payload_len, uint64_t chunk_size);

#endif
