/* S3 protocol helpers: errors, XML, dates, Range, conditions, ETags, and the
 * XML request bodies. */
#include "config.h"
#include "daemon/s3/proto.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>


#include "common/array.h"
#include "common/checksum.h"
#include "common/text.h"
#include "common/xml.h"

/* ---- errors ------------------------------------------------------------- */

static const struct {
    const char *code;
    int status;
    const char *message;
} errors[] = {
    {"AccessDenied", 403, "Access Denied"},
    {"AuthorizationHeaderMalformed", 400, "The authorization header is malformed."},
    {"AuthorizationQueryParametersError", 400, "The presigned query parameters are malformed."},
    {"BadDigest", 400, "The Content-MD5 or checksum you specified did not match what we received."},
    {"BucketAlreadyExists", 409, "The requested bucket name is not available."},
    {"BucketAlreadyOwnedByYou", 409, "Your previous request to create the named bucket succeeded and you already own it."},
    {"BucketNotEmpty", 409, "The bucket you tried to delete is not empty."},
    {"EntityTooLarge", 400, "Your proposed upload exceeds the maximum allowed object size."},
    {"EntityTooSmall", 400, "Your proposed upload is smaller than the minimum allowed object size."},
    {"IllegalLocationConstraintException", 400, "The location constraint is incompatible with the region of this endpoint."},
    {"IncompleteBody", 400, "You did not provide the number of bytes specified by the Content-Length HTTP header."},
    {"InternalError", 500, "We encountered an internal error. Please try again."},
    {"InvalidAccessKeyId", 403, "The AWS access key ID you provided does not exist in our records."},
    {"InvalidArgument", 400, "Invalid Argument"},
    {"InvalidBucketName", 400, "The specified bucket is not valid."},
    {"InvalidDigest", 400, "The Content-MD5 you specified is not valid."},
    {"InvalidObjectState", 403, "The operation is not valid for the object's storage class."},
    {"InvalidPart", 400, "One or more of the specified parts could not be found."},
    {"MaxMessageLengthExceeded", 400, "Your request was too big."},
    {"InvalidPartNumber", 416, "The requested partnumber is not satisfiable"},
    {"InvalidPartOrder", 400, "The list of parts was not in ascending order."},
    {"InvalidRange", 416, "The requested range is not satisfiable"},
    {"InvalidRequest", 400, "Invalid Request"},
    {"InvalidStorageClass", 400, "The storage class you specified is not valid."},
    {"KeyTooLongError", 400, "Your key is too long."},
    {"MalformedXML", 400, "The XML you provided was not well-formed or did not validate against our published schema."},
    {"MetadataTooLarge", 400, "Your metadata headers exceed the maximum allowed metadata size."},
    {"MethodNotAllowed", 405, "The specified method is not allowed against this resource."},
    {"MissingContentLength", 411, "You must provide the Content-Length HTTP header."},
    {"NoSuchBucket", 404, "The specified bucket does not exist"},
    {"NoSuchKey", 404, "The specified key does not exist."},
    {"NoSuchUpload", 404, "The specified upload does not exist."},
    {"NotImplemented", 501, "A header or query you provided implies functionality that is not implemented."},
    {"NotModified", 304, "Not Modified"},
    {"OperationAborted", 409, "A conflicting conditional operation is currently in progress against this resource."},
    {"PreconditionFailed", 412, "At least one of the preconditions you specified did not hold."},
    {"RequestHeaderSectionTooLarge", 400, "Your request header section exceeds the maximum allowed size."},
    {"RequestTimeTooSkewed", 403, "The difference between the request time and the server's time is too large."},
    {"RequestTimeout", 400, "Your socket connection to the server was not read from or written to within the timeout period."},
    {"RestoreAlreadyInProgress", 409, "Object restore is already in progress"},
    {"ServiceUnavailable", 503, "Reduce your request rate."},
    {"SignatureDoesNotMatch", 403, "The request signature we calculated does not match the signature you provided."},
    {"SlowDown", 503, "Please reduce your request rate."},
    {"XAmzContentSHA256Mismatch", 400, "The provided 'x-amz-content-sha256' header does not match what was computed."},
};

static int error_index(const char *code)
{
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (strcmp(errors[i].code, code) == 0)
            return (int)i;
    return -1;
}

int s3_error_status(const char *code)
{
    int i = error_index(code);
    return i < 0 ? 500 : errors[i].status;
}

const char *s3_error_message(const char *code)
{
    int i = error_index(code);
    return i < 0 ? "We encountered an internal error. Please try again." : errors[i].message;
}

bool s3_xml_escape(si_strbuf_t *out, const char *s, size_t len)
{
    size_t run = 0; /* bytes of s[i - run, i) not yet appended */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *rep = NULL;
        char num[8];
        switch (c) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        default:
            if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
                snprintf(num, sizeof(num), "&#x%X;", c);
                rep = num;
            }
        }
        if (!rep) {
            run++;
            continue;
        }
        si_strbuf_append(out, s + i - run, run);
        si_strbuf_puts(out, rep);
        run = 0;
    }
    si_strbuf_append(out, s + len - run, run);
    return !out->failed;
}

void s3_put_xml_text(si_strbuf_t *x, const char *name, const char *text)
{
    si_strbuf_printf(x, "<%s>", name);
    s3_xml_escape(x, text, strlen(text));
    si_strbuf_printf(x, "</%s>", name);
}

static void put_element(si_strbuf_t *out, const char *name, const char *text)
{
    si_strbuf_printf(out, "<%s>", name);
    s3_xml_escape(out, text, strlen(text));
    si_strbuf_printf(out, "</%s>", name);
}

bool s3_error_xml(si_strbuf_t *out, const char *code, const char *message,
                  const char *resource, const char *request_id, const char *region)
{
    si_strbuf_puts(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>");
    put_element(out, "Code", code);
    put_element(out, "Message", message && *message ? message : s3_error_message(code));
    if (resource)
        put_element(out, "Resource", resource);
    if (request_id)
        put_element(out, "RequestId", request_id);
    if (region)
        put_element(out, "Region", region);
    si_strbuf_puts(out, "</Error>");
    return !out->failed;
}

/* ---- dates -------------------------------------------------------------- */

static const char *const wkday[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const month[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

char *s3_put_digits(char *p, unsigned v, int width)
{
    for (int i = width - 1; i >= 0; i--, v /= 10)
        p[i] = (char)('0' + v % 10);
    return p + width;
}

/* On every GET and HEAD (Last-Modified): by hand, not printf. */
void s3_http_date(int64_t t, char out[32])
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    int year = tm.tm_year + 1900;
    if (year < 0 || year > 9999) {
        snprintf(out, 32, "%s, %02d %s %04d %02d:%02d:%02d GMT", wkday[tm.tm_wday], tm.tm_mday,
                 month[tm.tm_mon], year, tm.tm_hour, tm.tm_min, tm.tm_sec);
        return;
    }
    char *p = out;
    memcpy(p, wkday[tm.tm_wday], 3);
    p = s3_put_digits(p + 3 + 2, (unsigned)tm.tm_mday, 2);
    out[3] = ',', out[4] = ' ', *p++ = ' ';
    memcpy(p, month[tm.tm_mon], 3);
    p[3] = ' ';
    p = s3_put_digits(p + 4, (unsigned)year, 4);
    *p++ = ' ';
    p = s3_put_digits(p, (unsigned)tm.tm_hour, 2);
    *p++ = ':';
    p = s3_put_digits(p, (unsigned)tm.tm_min, 2);
    *p++ = ':';
    p = s3_put_digits(p, (unsigned)tm.tm_sec, 2);
    memcpy(p, " GMT", 5);
}

void s3_iso8601(int64_t t, char out[32])
{
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    snprintf(out, 32, "%04d-%02d-%02dT%02d:%02d:%02d.000Z", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static int month_index(const char *m)
{
    for (int i = 0; i < 12; i++)
        if (strncmp(m, month[i], 3) == 0)
            return i;
    return -1;
}

int s3_parse_http_date(const char *s, int64_t *out)
{
    if (!s)
        return -1;
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    char wd[16], mon[4], tail[8];
    int day, year, h, mi, sec, n = 0;
    /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
    if (sscanf(s, "%3[A-Za-z], %2d %3s %4d %2d:%2d:%2d %3s%n", wd, &day, mon, &year, &h, &mi,
               &sec, tail, &n) == 8 && strcmp(tail, "GMT") == 0 && s[n] == '\0') {
        /* fall through to the common checks */
    } else if (sscanf(s, "%15[A-Za-z], %2d-%3s-%2d %2d:%2d:%2d %3s%n", wd, &day, mon, &year, &h,
                      &mi, &sec, tail, &n) == 8 && strcmp(tail, "GMT") == 0 && s[n] == '\0') {
        /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
        year += year < 70 ? 2000 : 1900;
    } else if (sscanf(s, "%3[A-Za-z] %3s %2d %2d:%2d:%2d %4d%n", wd, mon, &day, &h, &mi, &sec,
                      &year, &n) == 7 && s[n] == '\0') {
        /* asctime: Sun Nov  6 08:49:37 1994 */
    } else {
        return -1;
    }
    int m = month_index(mon);
    if (m < 0 || day < 1 || day > 31 || h > 23 || mi > 59 || sec > 60 || year < 1970)
        return -1;
    tm.tm_year = year - 1900;
    tm.tm_mon = m;
    tm.tm_mday = day;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    *out = (int64_t)timegm(&tm);
    return 0;
}

/* ---- Range -------------------------------------------------------------- */

static bool parse_digits(const char **p, uint64_t *out)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s))
        return false;
    uint64_t v = 0;
    while (isdigit((unsigned char)*s)) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        s++;
    }
    *p = s;
    *out = v;
    return true;
}

s3_range_result_t s3_range_parse(const char *header, uint64_t size, uint64_t *start,
                                 uint64_t *length)
{
    if (!header)
        return S3_RANGE_NONE;
    const char *p = header;
    while (*p == ' ')
        p++;
    if (strncasecmp(p, "bytes=", 6) != 0)
        return S3_RANGE_NONE;
    p += 6;
    while (*p == ' ')
        p++;
    if (strchr(p, ','))
        return S3_RANGE_NONE;
    uint64_t first = 0, last = 0;
    bool have_first = parse_digits(&p, &first);
    if (*p != '-')
        return S3_RANGE_NONE;
    p++;
    bool have_last = parse_digits(&p, &last);
    while (*p == ' ')
        p++;
    if (*p || (!have_first && !have_last))
        return S3_RANGE_NONE;
    if (!have_first) { /* suffix: the last N bytes */
        if (last == 0 || size == 0)
            return S3_RANGE_UNSATISFIABLE;
        *length = last < size ? last : size;
        *start = size - *length;
        return S3_RANGE_OK;
    }
    if (have_last && last < first)
        return S3_RANGE_NONE; /* invalid: ignored (RFC 7233 2.1) */
    if (first >= size)
        return S3_RANGE_UNSATISFIABLE;
    if (!have_last || last >= size)
        last = size - 1;
    *start = first;
    *length = last - first + 1;
    return S3_RANGE_OK;
}

/* ---- conditions ----------------------------------------------------------- */

/* The opaque part of an ETag: without W/ and quotes. */
static void etag_core(const char *s, size_t len, const char **core, size_t *core_len)
{
    while (len && (*s == ' ' || *s == '\t'))
        s++, len--;
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (len >= 2 && s[0] == 'W' && s[1] == '/')
        s += 2, len -= 2;
    if (len >= 2 && s[0] == '"' && s[len - 1] == '"')
        s++, len -= 2;
    *core = s;
    *core_len = len;
}

bool s3_etag_list_matches(const char *list, const char *etag)
{
    const char *want;
    size_t want_len;
    etag_core(etag, strlen(etag), &want, &want_len);
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *core;
        size_t core_len;
        etag_core(p, len, &core, &core_len);
        if ((core_len == 1 && core[0] == '*') ||
            (core_len == want_len && memcmp(core, want, want_len) == 0))
            return true;
        p = comma ? comma + 1 : NULL;
    }
    return false;
}

s3_cond_result_t s3_conditions_eval(const s3_conditions_t *c, const char *etag, int64_t mtime)
{
    int64_t t;
    if (c->if_match) {
        if (!s3_etag_list_matches(c->if_match, etag))
            return S3_COND_FAILED;
    } else if (c->if_unmodified_since && s3_parse_http_date(c->if_unmodified_since, &t) == 0 &&
               mtime > t) {
        return S3_COND_FAILED;
    }
    if (c->if_none_match) {
        if (s3_etag_list_matches(c->if_none_match, etag))
            return S3_COND_NOT_MODIFIED;
    } else if (c->if_modified_since && s3_parse_http_date(c->if_modified_since, &t) == 0 &&
               mtime <= t) {
        return S3_COND_NOT_MODIFIED;
    }
    return S3_COND_PROCEED;
}

/* ---- ETags ---------------------------------------------------------------- */

static bool is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return false;
    return s[n] == '\0';
}

/* "\"<text>\"" (on every GET and HEAD: not printf); len < S3_ETAG_MAX - 2 */
static void quote(char out[S3_ETAG_MAX], const char *text, size_t len)
{
    out[0] = '"';
    memcpy(out + 1, text, len);
    out[len + 1] = '"';
    out[len + 2] = '\0';
}

void s3_etag_of(const char *stored_etag, const char *checksum, int64_t id, uint64_t size,
                char out[S3_ETAG_MAX])
{
    if (stored_etag && *stored_etag) {
        const char *core;
        size_t len;
        etag_core(stored_etag, strlen(stored_etag), &core, &len);
        if (len > 0 && len < S3_ETAG_MAX - 3) {
            quote(out, core, len);
            return;
        }
    }
    if (checksum && strncmp(checksum, "md5:", 4) == 0 && is_hex(checksum + 4, 32)) {
        quote(out, checksum + 4, 32);
        return;
    }
    if (checksum && strncmp(checksum, "sha256:", 7) == 0 && strlen(checksum) >= 7 + 32) {
        /* not an MD5: the "-1" suffix keeps clients from comparing it to one */
        snprintf(out, S3_ETAG_MAX, "\"%.32s-1\"", checksum + 7);
        return;
    }
    snprintf(out, S3_ETAG_MAX, "\"%016" PRIx64 "%016" PRIx64 "-1\"", (uint64_t)id, size);
}

int s3_multipart_etag(const char *const *part_md5_hex, size_t nparts, char out[S3_ETAG_MAX])
{
    si_checksum_t *md5 = si_checksum_new("md5", NULL);
    if (!md5)
        return -1;
    for (size_t i = 0; i < nparts; i++) {
        const char *h = part_md5_hex[i];
        if (!h || strlen(h) != 32 || !is_hex(h, 32)) {
            si_checksum_free(md5);
            return -1;
        }
        unsigned char bin[16];
        for (int j = 0; j < 16; j++) {
            unsigned v;
            sscanf(h + 2 * j, "%2x", &v);
            bin[j] = (unsigned char)v;
        }
        si_checksum_update(md5, bin, sizeof(bin));
    }
    char text[SI_CHECKSUM_TEXT_MAX];
    si_checksum_final(md5, text);
    si_checksum_free(md5);
    snprintf(out, S3_ETAG_MAX, "\"%s-%zu\"", text + 4, nparts); /* past "md5:" */
    return 0;
}

/* ---- XML request bodies --------------------------------------------------- */

/* Parses body, whose root must be root, calling on_end per element. */
static int xml_parse(const char *body, size_t len, const char *root, si_xml_element_fn on_end,
                     void *arg, const char **code, si_error_t *err)
{
    return si_xml_parse(body, len, S3_XML_BODY_MAX, root, on_end, arg, code, err);
}

static bool parse_small_int(const char *text, int64_t max, int64_t *out)
{
    while (isspace((unsigned char)*text))
        text++;
    char buf[24];
    size_t n = strcspn(text, " \t\r\n");
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, text, n);
    buf[n] = '\0';
    for (const char *p = text + n; *p; p++)
        if (!isspace((unsigned char)*p))
            return false;
    int64_t v;
    if (si_parse_i64(buf, &v) < 0 || v < 1 || v > max)
        return false;
    *out = v;
    return true;
}

static void trim(const char **text, size_t *len)
{
    while (*len && isspace((unsigned char)**text))
        (*text)++, (*len)--;
    while (*len && isspace((unsigned char)(*text)[*len - 1]))
        (*len)--;
}

static int restore_element(si_xml_ctx_t *x, const char *path, const char *text, size_t len)
{
    s3_restore_request_t *r = x->arg;
    if (strcmp(path, "RestoreRequest/Days") == 0) {
        if (!parse_small_int(text, 36500, &r->days))
            return si_errprintf(x->err, "<Days> must be a whole number of days from 1 to 36500,"
                                " not '%.40s'", text);
    } else if (strcmp(path, "RestoreRequest/GlacierJobParameters/Tier") == 0 ||
               strcmp(path, "RestoreRequest/Tier") == 0) {
        trim(&text, &len);
        if (len == 8 && memcmp(text, "Standard", 8) == 0)
            r->tier = S3_TIER_STANDARD;
        else if (len == 9 && memcmp(text, "Expedited", 9) == 0)
            r->tier = S3_TIER_EXPEDITED;
        else if (len == 4 && memcmp(text, "Bulk", 4) == 0)
            r->tier = S3_TIER_BULK;
        else
            return si_errprintf(x->err, "<Tier> must be Expedited, Standard or Bulk, not '%.40s'",
                                text);
    }
    return 0;
}

int s3_parse_restore(const char *body, size_t len, s3_restore_request_t *out, si_error_t *err)
{
    s3_restore_request_t r = {.days = 0, .tier = S3_TIER_STANDARD};
    size_t i = 0;
    while (i < len && isspace((unsigned char)body[i]))
        i++;
    if (i < len) {
        const char *code;
        if (xml_parse(body, len, "RestoreRequest", restore_element, &r, &code, err) < 0)
            return -1;
    }
    *out = r;
    return 0;
}

static int location_element(si_xml_ctx_t *x, const char *path, const char *text, size_t len)
{
    char *out = x->arg;
    if (strcmp(path, "CreateBucketConfiguration/LocationConstraint") != 0)
        return 0;
    trim(&text, &len);
    if (len > S3_LOCATION_MAX)
        return si_errprintf(x->err, "<LocationConstraint> is longer than %d bytes",
                            S3_LOCATION_MAX);
    memcpy(out, text, len);
    out[len] = '\0';
    return 0;
}

int s3_parse_create_bucket(const char *body, size_t len, char location[S3_LOCATION_MAX + 1],
                           si_error_t *err)
{
    location[0] = '\0';
    size_t i = 0;
    while (i < len && isspace((unsigned char)body[i]))
        i++;
    if (i == len)
        return 0;
    const char *code;
    return xml_parse(body, len, "CreateBucketConfiguration", location_element, location, &code,
                     err);
}

int s3_tier_priority(s3_tier_t tier)
{
    switch (tier) {
    case S3_TIER_EXPEDITED: return 100;
    case S3_TIER_BULK: return -100;
    case S3_TIER_STANDARD: break;
    }
    return 0;
}

const char *s3_tier_name(s3_tier_t tier)
{
    switch (tier) {
    case S3_TIER_EXPEDITED: return "Expedited";
    case S3_TIER_BULK: return "Bulk";
    case S3_TIER_STANDARD: break;
    }
    return "Standard";
}

static int delete_element(si_xml_ctx_t *x, const char *path, const char *text, size_t len)
{
    s3_delete_request_t *d = x->arg;
    if (strcmp(path, "Delete/Quiet") == 0) {
        trim(&text, &len);
        d->quiet = len == 4 && strncasecmp(text, "true", 4) == 0;
    } else if (strcmp(path, "Delete/Object/Key") == 0) {
        if (d->nkeys >= S3_DELETE_MAX)
            return si_errprintf(x->err, "more than %d keys in one Delete", S3_DELETE_MAX);
        char *k = malloc(len + 1);
        if (!k || si_array_grow((void **)&d->keys, &d->keys_cap, d->nkeys + 1,
                                sizeof(*d->keys)) < 0) {
            free(k);
            x->code = "InternalError";
            return si_errprintf(x->err, "out of memory");
        }
        memcpy(k, text, len);
        k[len] = '\0';
        d->keys[d->nkeys++] = k;
    }
    return 0;
}

int s3_parse_delete(const char *body, size_t len, s3_delete_request_t *out, si_error_t *err)
{
    s3_delete_request_t d = {0};
    const char *code;
    if (xml_parse(body, len, "Delete", delete_element, &d, &code, err) < 0) {
        s3_delete_request_free(&d);
        return -1;
    }
    if (d.nkeys == 0) {
        s3_delete_request_free(&d);
        return si_errprintf(err, "the Delete names no <Object><Key>");
    }
    *out = d;
    return 0;
}

void s3_delete_request_free(s3_delete_request_t *d)
{
    for (size_t i = 0; i < d->nkeys; i++)
        free(d->keys[i]);
    free(d->keys);
    memset(d, 0, sizeof(*d));
}

typedef struct {
    s3_complete_request_t *c;
    int64_t number;
    char etag[S3_ETAG_MAX];
    bool have_number, have_etag;
} complete_state_t;

static int complete_element(si_xml_ctx_t *x, const char *path, const char *text, size_t len)
{
    complete_state_t *st = x->arg;
    if (strcmp(path, "CompleteMultipartUpload/Part/PartNumber") == 0) {
        if (!parse_small_int(text, S3_PARTS_MAX, &st->number))
            return si_errprintf(x->err, "<PartNumber> must be 1 to %d, not '%.40s'",
                                S3_PARTS_MAX, text);
        st->have_number = true;
    } else if (strcmp(path, "CompleteMultipartUpload/Part/ETag") == 0) {
        const char *core;
        size_t core_len;
        etag_core(text, len, &core, &core_len);
        if (core_len == 0 || core_len >= S3_ETAG_MAX)
            return si_errprintf(x->err, "<ETag> of part %" PRId64 " is empty or too long",
                                st->number);
        memcpy(st->etag, core, core_len);
        st->etag[core_len] = '\0';
        st->have_etag = true;
    } else if (strcmp(path, "CompleteMultipartUpload/Part") == 0) {
        s3_complete_request_t *c = st->c;
        if (!st->have_number || !st->have_etag)
            return si_errprintf(x->err, "a <Part> lacks its <PartNumber> or <ETag>");
        if (c->nparts > 0 && c->parts[c->nparts - 1].number >= st->number) {
            x->code = "InvalidPartOrder";
            return si_errprintf(x->err, "part %" PRId64 " follows part %d: parts must be listed"
                                " in ascending order", st->number,
                                c->parts[c->nparts - 1].number);
        }
        if (c->nparts >= S3_PARTS_MAX)
            return si_errprintf(x->err, "more than %d parts", S3_PARTS_MAX);
        if (si_array_grow((void **)&c->parts, &c->parts_cap, c->nparts + 1,
                          sizeof(*c->parts)) < 0) {
            x->code = "InternalError";
            return si_errprintf(x->err, "out of memory");
        }
        c->parts[c->nparts].number = (int)st->number;
        snprintf(c->parts[c->nparts].etag, S3_ETAG_MAX, "%s", st->etag);
        c->nparts++;
        st->have_number = st->have_etag = false;
    }
    return 0;
}

int s3_parse_complete(const char *body, size_t len, s3_complete_request_t *out,
                      const char **code, si_error_t *err)
{
    s3_complete_request_t c = {0};
    complete_state_t st = {.c = &c};
    if (xml_parse(body, len, "CompleteMultipartUpload", complete_element, &st, code, err) < 0) {
        s3_complete_request_free(&c);
        return -1;
    }
    if (c.nparts == 0) {
        *code = "MalformedXML";
        s3_complete_request_free(&c);
        return si_errprintf(err, "the CompleteMultipartUpload names no <Part>");
    }
    *out = c;
    return 0;
}

void s3_complete_request_free(s3_complete_request_t *c)
{
    free(c->parts);
    memset(c, 0, sizeof(*c));
}

/* ---- storage classes, parts ------------------------------------------- */

static const char *const storage_classes[] = {
    "STANDARD", "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING",
    "GLACIER", "DEEP_ARCHIVE", "OUTPOSTS", "GLACIER_IR", "SNOW", "EXPRESS_ONEZONE",
};

bool s3_storage_class_known(const char *cls)
{
    for (size_t i = 0; i < sizeof(storage_classes) / sizeof(storage_classes[0]); i++)
        if (strcmp(cls, storage_classes[i]) == 0)
            return true;
    return false;
}

bool s3_storage_class_archived(const char *cls)
{
    return strcmp(cls, "GLACIER") == 0 || strcmp(cls, "DEEP_ARCHIVE") == 0;
}

int s3_part_range(const char *part_sizes, long number, uint64_t *start, uint64_t *length,
                  long *count)
{
    uint64_t offset = 0;
    long n = 0;
    bool found = false;
    for (const char *p = part_sizes; *p;) {
        char *end;
        if (!isdigit((unsigned char)*p))
            return -1;
        unsigned long long size = strtoull(p, &end, 10);
        if (*end != ',' && *end != '\0')
            return -1;
        n++;
        if (n == number) {
            *start = offset;
            *length = size;
            found = true;
        }
        offset += size;
        p = end + (*end == ',');
    }
    if (n == 0)
        return -1;
    *count = n;
    return found ? 1 : 0;
}
