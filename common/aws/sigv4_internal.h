/* SigV4 helpers shared by the signing side (sigv4.c) and the verifying side
 * (sigv4_verify.c) only; sigv4_verify.c calls down into sigv4.c, never back. */
#ifndef STAGEIN_AWS_SIGV4_INTERNAL_H
#define STAGEIN_AWS_SIGV4_INTERNAL_H

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/aws/sigv4.h"
#include "common/error.h"
#include "common/strbuf.h"

#define CANONICAL_MAX (1024 * 1024) /* bytes of a canonical request */
#define SCOPE_TERMINATOR "aws4_request"

typedef struct {
    const char *name; /* lower-case, not NUL-terminated */
    size_t len;
} name_slice_t;

/* True when s is exactly len lower-case hex digits. */
bool sigv4_lower_hex(const char *s, size_t len);
/* Access keys go into "Credential=KEY/date/...": printable, no '/', ',' or space. */
bool sigv4_access_key_valid(const char *s);
/* The n decimal digits at s as a number; -1 when one is not a digit. */
int sigv4_digits(const char *s, int n);

/* md: a SHA-256 fetched once (EVP_MD_fetch); NULL: EVP_sha256(). */
char *sigv4_string_to_sign_md(const EVP_MD *md, const char *amz_date,
                              const si_sigv4_key_t *key, const char *canonical_request);
void sigv4_signature_md(const EVP_MD *md, const si_sigv4_key_t *key,
                        const char *string_to_sign, char out[SI_SIGV4_HEX_LEN + 1]);

/* Splits a SignedHeaders value; names must be lower-case tokens in strictly
 * ascending order (which also rules out duplicates). */
int sigv4_parse_signed_headers(const char *list, name_slice_t *names, size_t *count,
                               si_error_t *err);
/* header (NUL-terminated) equals name[0..len) ignoring case. */
bool sigv4_name_is(const char *header, const char *name, size_t len);
/* Builds the canonical request into b. On a signed header that the request
 * lacks, *missing (when given) receives its index. */
int sigv4_build_canonical(si_strbuf_t *b, const si_sigv4_request_t *req,
                          const name_slice_t *names, size_t count, const char *payload_hash,
                          const char *skip_query_key, int *missing, si_error_t *err);
/* The first header called name (case-insensitive); *count: how many there are. */
const si_http_header_t *sigv4_find_header(const si_sigv4_request_t *req, const char *name,
                                          int *count);

#endif
