/* The S3 protocol pieces that need no socket and no catalog, so they are
 * unit-tested alone: the error table (code -> HTTP status), XML text
 * escaping and error bodies, Range and conditional-request evaluation,
 * HTTP and ISO 8601 dates, ETags, and the XML request bodies S3 clients
 * send (RestoreRequest, Delete, CompleteMultipartUpload), parsed with
 * expat under a size bound. */
#ifndef STAGEIN_S3_PROTO_H
#define STAGEIN_S3_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/strbuf.h"

#define S3_XML_BODY_MAX (1u << 20)   /* bytes of an XML request body */
#define S3_QUERY_PARAMS_MAX 100      /* query parameters of a request (S3's have a dozen) */
#define S3_DELETE_MAX 1000           /* keys in one DeleteObjects (S3's limit) */
#define S3_PARTS_MAX 10000           /* parts of one multipart upload (S3's limit) */
#define S3_ETAG_MAX 80               /* "\"<32 hex>-10000\"" and room */

/* ---- errors ------------------------------------------------------------- */

/* The HTTP status S3 answers with the error code; 500 for codes not in the
 * table (a programming error, logged by the caller). */
int s3_error_status(const char *code);
/* The standard message of a code, used when the caller has none. */
const char *s3_error_message(const char *code);
/* <Error><Code/><Message/><Resource/><RequestId/></Error> with the XML
 * declaration, and <Region> when region is not NULL (a request signed for
 * another region). false when out of memory. */
bool s3_error_xml(si_strbuf_t *out, const char *code, const char *message,
                  const char *resource, const char *request_id, const char *region);

/* Appends s with & < > " ' escaped; control characters other than tab, CR
 * and LF are written as numeric references (XML 1.0 allows none of them,
 * but keys may hold them: clients decode &#x1; fine). */
bool s3_xml_escape(si_strbuf_t *out, const char *s, size_t len);
/* <name>text, escaped</name> */
void s3_put_xml_text(si_strbuf_t *x, const char *name, const char *text);

/* ---- dates -------------------------------------------------------------- */

/* "Wed, 21 Oct 2015 07:28:00 GMT" */
void s3_http_date(int64_t t, char out[32]);
/* v's last width decimal digits at p (zero-padded), by hand: on every
 * request's path. Returns p + width. */
char *s3_put_digits(char *p, unsigned v, int width);
/* RFC 7231 IMF-fixdate, also the obsolete RFC 850 and asctime forms. -1 if
 * none of them. */
int s3_parse_http_date(const char *s, int64_t *out);
/* "2009-10-12T17:50:30.000Z" */
void s3_iso8601(int64_t t, char out[32]);

/* ---- Range (single range, RFC 7233 as S3 applies it) -------------------- */

typedef enum {
    S3_RANGE_NONE,          /* no usable Range header: serve the whole object */
    S3_RANGE_OK,            /* serve [start, start + length) with 206 */
    S3_RANGE_UNSATISFIABLE, /* 416 InvalidRange */
} s3_range_result_t;

/* header may be NULL. A syntactically invalid header or several ranges are
 * ignored (the whole object is served), as S3 does. */
s3_range_result_t s3_range_parse(const char *header, uint64_t size, uint64_t *start,
                                 uint64_t *length);

/* ---- conditional requests ----------------------------------------------- */

typedef struct {
    const char *if_match;
    const char *if_none_match;
    const char *if_modified_since;
    const char *if_unmodified_since;
} s3_conditions_t;

typedef enum {
    S3_COND_PROCEED = 0,
    S3_COND_NOT_MODIFIED = 304,
    S3_COND_FAILED = 412,   /* PreconditionFailed */
} s3_cond_result_t;

/* etag: the object's ETag with its quotes; mtime: Unix seconds. S3's order:
 * If-Match (then If-Unmodified-Since is ignored), If-Unmodified-Since,
 * If-None-Match (then If-Modified-Since is ignored), If-Modified-Since. */
s3_cond_result_t s3_conditions_eval(const s3_conditions_t *c, const char *etag, int64_t mtime);
/* Whether an If-Match / If-None-Match list ("\"a\", W/\"b\"", "*") names
 * etag (quoted or not). */
bool s3_etag_list_matches(const char *list, const char *etag);

/* ---- ETags -------------------------------------------------------------- */

/* The quoted ETag of a catalog object: its stored etag, else the MD5 of an
 * "md5:" checksum, else a value derived from its sha256 that no client
 * mistakes for an MD5 ("\"<32 hex>-1\""), else from the id and size. */
void s3_etag_of(const char *stored_etag, const char *checksum, int64_t id, uint64_t size,
                char out[S3_ETAG_MAX]);
/* Multipart: "\"<md5 of the concatenated binary part MD5s>-N\"" from the
 * parts' hex MD5s. -1 when one is not 32 hex digits. */
int s3_multipart_etag(const char *const *part_md5_hex, size_t nparts, char out[S3_ETAG_MAX]);

/* ---- storage classes, parts ------------------------------------------- */

#define S3_USER_META_MAX 2048        /* bytes of x-amz-meta-* names and values (S3's limit) */

/* Whether cls is one of S3's storage class names. */
bool s3_storage_class_known(const char *cls);
/* Whether it is an archive class (read only after a restore). */
bool s3_storage_class_archived(const char *cls);

/* Part number (1-based) of a multipart object whose part sizes are
 * part_sizes ("n1,n2,..."): its bytes [*start, *start + *length) and the
 * number of parts in *count. 1, 0 when number is past the last part (416
 * InvalidPartNumber), -1 when part_sizes is not a list of sizes. */
int s3_part_range(const char *part_sizes, long number, uint64_t *start, uint64_t *length,
                  long *count);

/* ---- XML request bodies --------------------------------------------------- */

typedef enum {
    S3_TIER_STANDARD,
    S3_TIER_EXPEDITED,
    S3_TIER_BULK,
} s3_tier_t;

typedef struct {
    int64_t days;           /* 0 when absent */
    s3_tier_t tier;         /* Standard when absent */
} s3_restore_request_t;

/* <RestoreRequest><Days>N</Days><GlacierJobParameters><Tier>T</Tier>...
 * (Tier may also sit directly under RestoreRequest). An empty body is a
 * restore with the defaults. Errors are MalformedXML (bad XML, wrong root,
 * Days not a positive integer, unknown Tier) with err saying what. */
int s3_parse_restore(const char *body, size_t len, s3_restore_request_t *out, si_error_t *err);
/* <CreateBucketConfiguration><LocationConstraint>R</LocationConstraint>:
 * R into location ("" when absent or the body is empty). MalformedXML
 * errors. */
#define S3_LOCATION_MAX 63
int s3_parse_create_bucket(const char *body, size_t len, char location[S3_LOCATION_MAX + 1],
                           si_error_t *err);
/* The scheduler priority of a tier (higher first). */
int s3_tier_priority(s3_tier_t tier);
const char *s3_tier_name(s3_tier_t tier);

typedef struct {
    size_t nkeys, keys_cap;
    char **keys;            /* decoded text of each <Object><Key> */
    bool quiet;
} s3_delete_request_t;

/* <Delete><Quiet>true</Quiet><Object><Key>k</Key></Object>...</Delete>;
 * at most S3_DELETE_MAX keys. */
int s3_parse_delete(const char *body, size_t len, s3_delete_request_t *out, si_error_t *err);
void s3_delete_request_free(s3_delete_request_t *d);

typedef struct {
    int number;
    char etag[S3_ETAG_MAX]; /* without quotes */
} s3_part_ref_t;

typedef struct {
    size_t nparts, parts_cap;
    s3_part_ref_t *parts;
} s3_complete_request_t;

/* <CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>..</ETag>
 * </Part>...; *code gets "MalformedXML" or "InvalidPartOrder" (part numbers
 * not strictly ascending) on failure. */
int s3_parse_complete(const char *body, size_t len, s3_complete_request_t *out,
                      const char **code, si_error_t *err);
void s3_complete_request_free(s3_complete_request_t *c);

#endif
