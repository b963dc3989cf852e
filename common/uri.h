/* S3's flavour of URI encoding (RFC 3986 unreserved characters kept, every
 * other byte %XX in upper-case hex) and query-string parsing, shared by
 * SigV4 signing and verification and by anything that builds S3 URLs. */
#ifndef SI_URI_H
#define SI_URI_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "common/strbuf.h"

#define SI_URI_QUERY_PARAMS_MAX 256

/* Appends len bytes of s encoded; '/' is kept as is when keep_slash. */
bool si_uri_encode(si_strbuf_t *out, const char *s, size_t len, bool keep_slash);

/* Appends the percent-decoded form of len bytes of s; with plus_is_space a
 * '+' decodes to ' ' (query strings, as S3 reads them). A '%' not followed by
 * two hex digits is an error naming its offset. */
int si_uri_decode(si_strbuf_t *out, const char *s, size_t len, bool plus_is_space,
                  si_error_t *err);

/* SigV4 canonical URI for S3 from the path as it arrived on the wire: each
 * '/'-separated segment is decoded and encoded once, so "%2F" inside a key
 * stays "%2F"; no "." / ".." or "//" normalisation (S3 does none). An empty
 * path is "/". */
int si_uri_canonical_path(si_strbuf_t *out, const char *raw_path, si_error_t *err);

/* SigV4 canonical query string from a raw query (without '?'): every
 * parameter decoded and re-encoded, a valueless key written "key=", sorted by
 * encoded name then value. A parameter named skip_key (may be NULL) is left
 * out: presigned URLs drop X-Amz-Signature. */
int si_uri_canonical_query(si_strbuf_t *out, const char *raw_query, const char *skip_key,
                           si_error_t *err);

/* One parameter of a raw query, as it is on the wire. */
typedef struct {
    const char *name;
    size_t name_len;
    const char *value;  /* after the '='; NULL when there is none */
    size_t value_len;
} si_uri_param_t;

/* The next non-empty '&'-separated parameter at *cursor (a raw query, or
 * where the previous call left it): true with *param filled and *cursor
 * moved past it, false at the end. */
bool si_uri_query_next(const char **cursor, si_uri_param_t *param);

/* Whether the raw component decodes to itself ('+' as a space or not): no
 * '%' escape and no '+', so a caller may use it as it is, undecoded. */
bool si_uri_plain(const char *s, size_t len);

/* Decoded value of the parameter named key (case-sensitive, as S3 is) into
 * value. Returns how many times the key occurs (value holds the first), or -1
 * on a malformed query. */
int si_uri_query_get(const char *raw_query, const char *key, si_strbuf_t *value,
                     si_error_t *err);

#endif
