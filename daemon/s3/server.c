/* The S3 server over libmicrohttpd: the raw URI (SigV4 needs it as sent)
 * comes from the URI log callback, every header from the connection; each
 * request is authenticated, mapped to an operation and answered, bodies
 * handed to the operation piece by piece. */
#include "config.h"
#include "daemon/s3/internal.h"

/* how long a uid's groups are taken as NSS said */
#define S3_GROUPS_TTL_S 60.0

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/fileio.h"
#include "common/uri.h"
#include "daemon/cache/cache.h"
#include "daemon/control/control.h"

#define XML_CONTENT_TYPE "application/xml"
/* request line, headers and the upload read buffer share the connection's pool */
#define CONNECTION_POOL_EXTRA (16u << 10)

/* ---- archive buckets --------------------------------------------------------- */

/* The created bucket named bucket; buckets_mu held. */
static s3_created_bucket_t *created_bucket(s3_server_t *s, const char *bucket)
{
    for (size_t i = 0; i < s->ncreated; i++)
        if (strcmp(s->created[i].name, bucket) == 0)
            return &s->created[i];
    return NULL;
}

bool s3_created_bucket_owner(s3_server_t *s, const char *bucket, uid_t *owner)
{
    pthread_mutex_lock(&s->buckets_mu);
    const s3_created_bucket_t *b = created_bucket(s, bucket);
    if (b)
        *owner = b->owner;
    pthread_mutex_unlock(&s->buckets_mu);
    return b != NULL;
}

bool s3_is_archive_bucket(s3_server_t *s, const char *bucket)
{
    if (!s->push)
        return false;
    if (s3_bucket_list_has(&s->conf.archive_buckets, bucket))
        return true;
    uid_t owner;
    return s3_created_bucket_owner(s, bucket, &owner);
}

bool s3_writable_bucket(s3_req_t *r)
{
    uid_t owner;
    if (r->map.archive) {
        /* configured archive buckets are shared (doc/s3.md); a created one
         * takes writes from its owner alone */
        if (r->who.all || r->map.shared ||
            !s3_created_bucket_owner(r->srv, r->bucket, &owner) || owner == r->who.uid)
            return true;
        s3_respond_error(r, "AccessDenied", "bucket '%s' belongs to uid %u: only its owner"
                         " may write to it (caller uid %u)", r->bucket, (unsigned)owner,
                         (unsigned)r->who.uid);
        return false;
    }
    si_error_t err;
    s3_db_t *db = s3_dbpool_get(r->srv->pool);
    int has = s3_db_bucket_has_objects(db, r->bucket, &err);
    s3_dbpool_put(r->srv->pool, db);
    if (has < 0)
        s3_respond_error(r, "InternalError", "%s", err.text);
    else if (has == 0)
        s3_respond_error(r, "NoSuchBucket", "The specified bucket does not exist");
    else
        s3_respond_error(r, "AccessDenied", "bucket '%s' is read-only: only archive buckets"
                         " (s3.archive_buckets, or made by CreateBucket) take writes", r->bucket);
    return false;
}

void s3_add_created_bucket(s3_server_t *s, const char *bucket, uid_t owner)
{
    pthread_mutex_lock(&s->buckets_mu);
    s3_created_bucket_t *grown = realloc(s->created, (s->ncreated + 1) * sizeof(*grown));
    if (grown) {
        s->created = grown;
        s3_created_bucket_t *b = &s->created[s->ncreated++];
        snprintf(b->name, sizeof(b->name), "%s", bucket);
        b->owner = owner;
    }
    pthread_mutex_unlock(&s->buckets_mu);
}

void s3_remove_created_bucket(s3_server_t *s, const char *bucket)
{
    pthread_mutex_lock(&s->buckets_mu);
    s3_created_bucket_t *b = created_bucket(s, bucket);
    if (b)
        *b = s->created[--s->ncreated];
    pthread_mutex_unlock(&s->buckets_mu);
}

static int add_loaded_bucket(const char *name, uid_t owner, void *arg)
{
    s3_add_created_bucket(arg, name, owner);
    return 0;
}

/* ---- request helpers ---------------------------------------------------------- */

const char *s3_req_header(const s3_req_t *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++)
        if (strcasecmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

/* Decodes the query into r->params once ('+' is a space, as in
 * si_uri_query_get): every request looks up several parameters. -1 when out
 * of memory; a name that is not valid percent-encoding leaves no parameters. */
static int parse_query(s3_req_t *r)
{
    const char *p = r->query;
    size_t max = 1;
    for (const char *c = p; *c; c++)
        max += *c == '&';
    r->params = calloc(max, sizeof(*r->params));
    si_strbuf_init(&r->query_text, 2 * strlen(p) + 2 * max);
    if (!r->params)
        return -1;
    si_strbuf_t *t = &r->query_text;
    si_uri_param_t u;
    while (si_uri_query_next(&p, &u)) {
        s3_query_param_t *q = &r->params[r->nparams];
        q->name = t->len;
        if (si_uri_decode(t, u.name, u.name_len, true, NULL) < 0) {
            r->nparams = 0;
            return t->failed ? -1 : 0;
        }
        si_strbuf_putc(t, '\0');
        q->value = t->len;
        q->value_ok = !u.value || si_uri_decode(t, u.value, u.value_len, true, NULL) == 0;
        if (!q->value_ok)
            t->len = q->value; /* what was decoded of it is dropped */
        q->value_len = t->len - q->value;
        si_strbuf_putc(t, '\0');
        if (t->failed)
            return -1;
        r->nparams++;
    }
    return 0;
}

int s3_req_query(const s3_req_t *r, const char *name, si_strbuf_t *value)
{
    const char *text = si_strbuf_str(&r->query_text);
    for (size_t i = 0; i < r->nparams; i++) {
        const s3_query_param_t *q = &r->params[i];
        if (strcmp(text + q->name, name) != 0)
            continue;
        /* the first one counts; a bad value or one too long for value: absent */
        if (!q->value_ok || (value && !si_strbuf_append(value, text + q->value, q->value_len)))
            return 0;
        return 1;
    }
    return 0;
}

bool s3_req_has_query(const s3_req_t *r, const char *name)
{
    return s3_req_query(r, name, NULL) == 1;
}

void s3_add_common_headers(s3_req_t *r, struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "x-amz-request-id", r->id);
    MHD_add_response_header(resp, "Server", "stageind");
}

void s3_respond(s3_req_t *r, unsigned status, struct MHD_Response *resp)
{
    if (r->responded) {
        MHD_destroy_response(resp);
        return;
    }
    s3_add_common_headers(r, resp);
    s3_rdma_declined(r, resp);
    r->responded = true;
    r->status = status;
    MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
}

void s3_respond_empty(s3_req_t *r, unsigned status)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    if (resp)
        s3_respond(r, status, resp);
}

/* region: also x-amz-bucket-region (an error to a request signed for
 * another region). */
static void respond_xml(s3_req_t *r, unsigned status, si_strbuf_t *xml, const char *region)
{
    if (xml->failed) {
        si_strbuf_free(xml);
        s3_respond_error(r, "InternalError", "out of memory building the response");
        return;
    }
    size_t len = xml->len;
    char *body = si_strbuf_take(xml);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body ? body : (void *)"",
                                        body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return;
    }
    MHD_add_response_header(resp, "Content-Type", XML_CONTENT_TYPE);
    if (region)
        MHD_add_response_header(resp, "x-amz-bucket-region", region);
    s3_respond(r, status, resp);
}

void s3_respond_xml(s3_req_t *r, unsigned status, si_strbuf_t *xml)
{
    respond_xml(r, status, xml, NULL);
}

/* The error answer; region: a request signed for another region, whose
 * answer names this server's (in <Region> and x-amz-bucket-region). */
static void respond_error_in(s3_req_t *r, const char *code, const char *message,
                             const char *region)
{
    unsigned status = (unsigned)s3_error_status(code);
    snprintf(r->note, sizeof(r->note), "%s: %.120s", code, message);
    bool head = strcmp(r->method, "HEAD") == 0;
    if (status == 304 || (head && !region)) {
        s3_respond_empty(r, status);
        return;
    }
    si_strbuf_t xml;
    si_strbuf_init(&xml, 16384);
    char *resource = NULL;
    size_t plen = strcspn(r->uri ? r->uri : "", "?");
    if (r->uri)
        resource = strndup(r->uri, plen);
    s3_error_xml(&xml, code, message[0] ? message : NULL, resource, r->id, region);
    free(resource);
    if (head)
        xml.len = 0; /* a HEAD answer has no body */
    respond_xml(r, status, &xml, region);
}

void s3_respond_error(s3_req_t *r, const char *code, const char *fmt, ...)
{
    char message[600] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(message, sizeof(message), fmt, ap);
        va_end(ap);
    }
    respond_error_in(r, code, message, NULL);
}

int s3_req_part_number(s3_req_t *r)
{
    si_strbuf_t v;
    si_strbuf_init(&v, 32);
    long number = 0;
    if (s3_req_query(r, "partNumber", &v) == 1 && !v.failed) {
        char *end;
        number = strtol(si_strbuf_str(&v), &end, 10);
        if (*end || v.len == 0)
            number = 0;
    }
    si_strbuf_free(&v);
    if (number < 1 || number > S3_PARTS_MAX) {
        s3_respond_error(r, "InvalidArgument", "Part number must be an integer between 1 and"
                         " %d, inclusive", S3_PARTS_MAX);
        return 0;
    }
    return (int)number;
}

void s3_respond_internal(s3_req_t *r, const char *what, const char *detail)
{
    si_log(r->srv->log, SI_LOG_ERROR, "s3: request %s: %s %s/%s: %s: %s", r->id, r->method,
           r->bucket, r->key ? r->key : "", what, detail);
    s3_respond_error(r, "InternalError", "%s failed (request %s; the server's log says why)",
                     what, r->id);
}

char *s3_req_catalog_key(s3_req_t *r)
{
    size_t plen = strlen(r->map.prefix), klen = strlen(r->key);
    if (plen + klen > SI_KEY_MAX) {
        s3_respond_error(r, "KeyTooLongError", "the key is %zu bytes; at most %d are allowed%s",
                         klen, SI_KEY_MAX - (int)plen, plen ? " in this archive bucket" : "");
        return NULL;
    }
    char *k = malloc(plen + klen + 1);
    if (!k) {
        s3_respond_error(r, "InternalError", "out of memory");
        return NULL;
    }
    memcpy(k, r->map.prefix, plen);
    memcpy(k + plen, r->key, klen + 1);
    return k;
}

/* ---- bodies ------------------------------------------------------------------ */

/* An XML body over S3_XML_BODY_MAX is read to its end and dropped, then
 * refused: a client still sending when the answer and the close come would
 * see a reset, not the answer. A body declared (or grown) past
 * XML_DROP_MAX is refused at once. */
#define XML_DROP_MAX (16ull << 20)

static void respond_too_big(s3_req_t *r, uint64_t bytes)
{
    s3_respond_error(r, "MaxMessageLengthExceeded", "the XML body is %s%" PRIu64 " bytes,"
                     " more than the %u allowed", bytes > XML_DROP_MAX ? "over " : "", bytes,
                     S3_XML_BODY_MAX);
}

static int xml_data(s3_req_t *r, const char *data, size_t len)
{
    if (r->xml_dropped || !si_strbuf_append(&r->xml, data, len)) {
        r->xml_dropped += len;
        if (r->xml.len + r->xml_dropped > XML_DROP_MAX) {
            respond_too_big(r, r->xml.len + r->xml_dropped);
            return -1;
        }
    }
    return 0;
}

static void xml_end(s3_req_t *r)
{
    if (r->xml_dropped)
        respond_too_big(r, r->xml.len + r->xml_dropped);
    else
        r->xml_end(r);
}

static const s3_body_ops_t xml_ops = {.data = xml_data, .end = xml_end, .cleanup = NULL};

void s3_expect_xml_body(s3_req_t *r, void (*end)(s3_req_t *r))
{
    const char *cl = s3_req_header(r, "Content-Length");
    uint64_t declared = cl ? strtoull(cl, NULL, 10) : 0;
    if (declared > XML_DROP_MAX) {
        respond_too_big(r, declared);
        return;
    }
    si_strbuf_init(&r->xml, S3_XML_BODY_MAX);
    r->body = &xml_ops;
    r->xml_end = end;
}

/* ---- dispatch --------------------------------------------------------------- */

/* The query parameters a request may carry, as an allow-list: anything
 * else names something this server does not implement (a sub-resource such
 * as ?acl, ?versions, ?policy) and is refused with 501 before any
 * operation runs, so that no unknown sub-resource falls through to another
 * operation. Sub-resources select the operation (the table below); the
 * other parameters qualify it. */
static const char *const known_parameters[] = {
    "AWSAccessKeyId", "Expires", "Signature",
    "continuation-token", "delete", "delimiter", "encoding-type", "fetch-owner",
    "key-marker", "list-type", "location", "marker", "max-keys", "max-parts", "max-uploads",
    "partNumber", "part-number-marker", "prefix", "response-cache-control",
    "response-content-disposition", "response-content-encoding", "response-content-language",
    "response-content-type", "response-expires", "restore", "start-after", "tagging",
    "upload-id-marker", "uploadId", "uploads", "versioning", "x-id",
};
#define N_KNOWN (sizeof(known_parameters) / sizeof(known_parameters[0]))

/* The first parameter of the query this server does not know, or NULL.
 * Presigned requests' X-Amz-* parameters are known in any case. */
static const char *unknown_parameter(const s3_req_t *r)
{
    const char *text = si_strbuf_str(&r->query_text);
    for (size_t i = 0; i < r->nparams; i++) {
        const char *name = text + r->params[i].name;
        if (strncasecmp(name, "X-Amz-", 6) == 0)
            continue;
        size_t k = 0;
        while (k < N_KNOWN && strcmp(known_parameters[k], name) != 0)
            k++;
        if (k == N_KNOWN)
            return name;
    }
    return NULL;
}

typedef enum { AT_SERVICE, AT_BUCKET, AT_OBJECT } s3_target_t;

/* The sub-resources that select an operation, in the order they are looked
 * for (uploadId before uploads: CompleteMultipartUpload names neither). */
static const char *const subresources[] = {"uploadId", "uploads", "location", "versioning",
                                           "tagging", "restore", "delete"};

static const char *subresource_of(const s3_req_t *r)
{
    for (size_t i = 0; i < sizeof(subresources) / sizeof(subresources[0]); i++)
        if (s3_req_has_query(r, subresources[i]))
            return subresources[i];
    return NULL;
}

static void get_objects(s3_req_t *r)
{
    si_strbuf_t v;
    si_strbuf_init(&v, 16);
    bool v2 = s3_req_query(r, "list-type", &v) == 1 && strcmp(si_strbuf_str(&v), "2") == 0;
    si_strbuf_free(&v);
    s3_list_objects(r, v2);
}

static void get_object(s3_req_t *r) { s3_get_object(r, false); }
static void head_object(s3_req_t *r) { s3_get_object(r, true); }

static void put_object_or_copy(s3_req_t *r)
{
    if (s3_req_header(r, "x-amz-copy-source"))
        s3_copy_object(r);
    else
        s3_put_object(r);
}

static void put_part_or_copy(s3_req_t *r)
{
    if (s3_req_header(r, "x-amz-copy-source"))
        s3_upload_part_copy(r);
    else
        s3_upload_part(r);
}

/* Browser form uploads (POST Object) carry their signature in the form. */
static void post_bucket(s3_req_t *r)
{
    s3_respond_error(r, "NotImplemented", "POST Object (browser form uploads, presigned POST)"
                     " is not implemented; upload with PUT (a presigned PUT URL works)");
}

/* Every operation: method, target and sub-resource (NULL: none). */
static const struct {
    const char *method;
    s3_target_t at;
    const char *sub;
    void (*run)(s3_req_t *r);
} operations[] = {
    {"GET", AT_SERVICE, NULL, s3_list_buckets},
    {"GET", AT_BUCKET, NULL, get_objects},
    {"GET", AT_BUCKET, "location", s3_get_bucket_location},
    {"GET", AT_BUCKET, "uploads", s3_list_multipart_uploads},
    {"GET", AT_BUCKET, "versioning", s3_get_bucket_versioning},
    {"HEAD", AT_BUCKET, NULL, s3_head_bucket},
    {"PUT", AT_BUCKET, NULL, s3_create_bucket},
    {"DELETE", AT_BUCKET, NULL, s3_delete_bucket},
    {"POST", AT_BUCKET, "delete", s3_delete_objects},
    {"POST", AT_BUCKET, NULL, post_bucket},
    {"GET", AT_OBJECT, NULL, get_object},
    {"GET", AT_OBJECT, "uploadId", s3_list_parts},
    {"GET", AT_OBJECT, "tagging", s3_get_object_tagging},
    {"HEAD", AT_OBJECT, NULL, head_object},
    {"PUT", AT_OBJECT, NULL, put_object_or_copy},
    {"PUT", AT_OBJECT, "uploadId", put_part_or_copy},
    {"POST", AT_OBJECT, "restore", s3_restore_object},
    {"POST", AT_OBJECT, "uploads", s3_create_multipart},
    {"POST", AT_OBJECT, "uploadId", s3_complete_multipart},
    {"DELETE", AT_OBJECT, NULL, s3_delete_object},
    {"DELETE", AT_OBJECT, "uploadId", s3_abort_multipart},
};

static const char *const target_names[] = {"the service", "a bucket", "an object"};

static void run_operation(s3_req_t *r, s3_target_t at)
{
    const char *sub = at == AT_SERVICE ? NULL : subresource_of(r);
    bool method_known = false;
    for (size_t i = 0; i < sizeof(operations) / sizeof(operations[0]); i++) {
        if (strcmp(operations[i].method, r->method) != 0 || operations[i].at != at)
            continue;
        method_known = true;
        if (sub ? operations[i].sub && strcmp(operations[i].sub, sub) == 0 : !operations[i].sub) {
            operations[i].run(r);
            return;
        }
    }
    if (sub)
        s3_respond_error(r, "NotImplemented", "%s ?%s on %s is not implemented", r->method, sub,
                         target_names[at]);
    else if (method_known)
        s3_respond_error(r, "MethodNotAllowed", "%s on %s needs a sub-resource", r->method,
                         target_names[at]);
    else
        s3_respond_error(r, "MethodNotAllowed", "%s is not allowed on %s", r->method,
                         target_names[at]);
}

static bool is_read(const s3_req_t *r)
{
    return strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;
}

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                          const char *value)
{
    (void)kind;
    s3_req_t *r = cls;
    r->headers[r->nheaders].name = key;
    r->headers[r->nheaders].value = value ? value : "";
    r->nheaders++;
    return MHD_YES;
}

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    size_t *bytes = cls;
    *bytes += strlen(key) + (value ? strlen(value) : 0) + 4;
    return MHD_YES;
}

/* Virtual-host style: the bucket named by "bucket.DOMAIN[:port]" in Host,
 * s3.virtual_host_domain being DOMAIN; 0 when the request is path style
 * (no domain configured, or Host is the domain itself or another name). */
static size_t vhost_bucket(const s3_req_t *r, const char **bucket)
{
    const char *domain = r->srv->conf.vhost_domain;
    const char *host = s3_req_header(r, "host");
    if (!*domain || !host)
        return 0;
    size_t dlen = strlen(domain);
    size_t hlen = strcspn(host, ":");
    if (hlen <= dlen + 1 || host[hlen - dlen - 1] != '.' ||
        strncasecmp(host + hlen - dlen, domain, dlen) != 0)
        return 0;
    *bucket = host;
    return hlen - dlen - 1;
}

/* The bucket's text (percent-encoded or, from Host, plain) into r->bucket. */
static int set_bucket(s3_req_t *r, const char *text, size_t len, bool encoded, bool last)
{
    si_error_t err;
    si_strbuf_t b;
    si_strbuf_init(&b, SI_BUCKET_MAX);
    bool good = encoded ? si_uri_decode(&b, text, len, false, &err) == 0
                        : si_strbuf_append(&b, text, len);
    if (!good || b.failed || si_bucket_check(si_strbuf_str(&b), b.len, &err) < 0) {
        si_strbuf_free(&b);
        if (strcmp(r->method, "PUT") == 0 && last)
            s3_respond_error(r, "InvalidBucketName", "%s", err.text);
        else
            s3_respond_error(r, "NoSuchBucket", "The specified bucket does not exist");
        return -1;
    }
    snprintf(r->bucket, sizeof(r->bucket), "%s", si_strbuf_str(&b));
    si_strbuf_free(&b);
    return 0;
}

static int split_path(s3_req_t *r)
{
    si_error_t err;
    const char *p = r->path;
    if (*p != '/') {
        s3_respond_error(r, "InvalidRequest", "the request target must be an absolute path");
        return -1;
    }
    const char *slash, *vb;
    size_t vblen = vhost_bucket(r, &vb);
    if (vblen) {
        /* the whole path is the key */
        if (set_bucket(r, vb, vblen, false, p[1] == '\0') < 0)
            return -1;
        slash = p;
    } else {
        p++;
        slash = strchr(p, '/');
        size_t blen = slash ? (size_t)(slash - p) : strlen(p);
        if (blen == 0)
            return 0; /* the service */
        if (set_bucket(r, p, blen, true, !slash) < 0)
            return -1;
    }
    if (!slash || slash[1] == '\0')
        return 0; /* the bucket */
    si_strbuf_t k;
    si_strbuf_init(&k, SI_KEY_MAX * 4);
    if (si_uri_decode(&k, slash + 1, strlen(slash + 1), false, &err) < 0 || k.failed) {
        si_strbuf_free(&k);
        s3_respond_error(r, "InvalidArgument", "the key is not valid percent-encoding: %s",
                         err.text);
        return -1;
    }
    if (memchr(si_strbuf_str(&k), '\0', k.len)) {
        si_strbuf_free(&k);
        s3_respond_error(r, "InvalidArgument", "the key holds a NUL byte");
        return -1;
    }
    if (k.len > SI_KEY_MAX) {
        s3_respond_error(r, "KeyTooLongError", "the key is %zu bytes; at most %d are allowed",
                         k.len, SI_KEY_MAX);
        si_strbuf_free(&k);
        return -1;
    }
    if (si_key_check(si_strbuf_str(&k), k.len, &err) < 0) {
        si_strbuf_free(&k);
        s3_respond_error(r, "InvalidArgument", "%s", err.text);
        return -1;
    }
    r->key = si_strbuf_take(&k);
    return 0;
}

static void map_bucket(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    s3_bucket_map_t *m = &r->map;
    m->archive = s3_is_archive_bucket(s, r->bucket);
    m->cat_bucket = m->archive ? s->push_bucket : r->bucket;
    if (m->archive)
        snprintf(m->prefix, sizeof(m->prefix), "%s/", r->bucket);
    m->shared = m->archive && s3_bucket_list_has(&s->conf.archive_buckets, r->bucket);
    m->is_public = s3_bucket_list_has(&s->conf.public_buckets, r->bucket);
    m->transparent = s3_bucket_list_has(&s->conf.transparent_recall_buckets, r->bucket);
}

static int authenticate(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    si_sigv4_request_t sr = {.method = r->method, .path = r->path, .query = r->query,
                             .headers = r->headers, .nheaders = r->nheaders};
    si_sigv4_status_t st;
    si_error_t err = {{0}};
    bool wrong_region = false;
    if (si_sigv4_verify_region(&s->verifier, &sr, (int64_t)time(NULL), &r->auth, &st,
                               &wrong_region, &err) == 0) {
        r->who = (s3_who_t){.uid = r->auth.uid, .gid = r->auth.gid, .all = r->auth.uid == 0};
        gid_t groups[SI_GROUPS_MAX];
        size_t n = 0;
        si_groups_of(s->groups, r->who.uid, r->who.gid, groups, &n);
        r->who.ngroups = n < S3_WHO_GROUPS_MAX ? n : S3_WHO_GROUPS_MAX;
        memcpy(r->who.groups, groups, r->who.ngroups * sizeof(gid_t));
        return 0;
    }
    if (st == SI_SIGV4_NO_CREDENTIALS && s3_req_has_query(r, "AWSAccessKeyId") &&
        s3_req_has_query(r, "Signature")) {
        s3_respond_error(r, "InvalidRequest", "presigned URLs of Signature Version 2 are not"
                         " supported; sign with AWS4-HMAC-SHA256 (boto3:"
                         " Config(signature_version='s3v4'))");
        return -1;
    }
    if (st == SI_SIGV4_NO_CREDENTIALS) {
        r->anonymous = true;
        r->who = (s3_who_t){.uid = (uid_t)-2, .gid = (gid_t)-2, .all = false};
        return 0;
    }
    /* S3 names its region to a request signed for another, so SDKs re-sign */
    respond_error_in(r, si_sigv4_status_code(st), err.text,
                     wrong_region ? s->conf.region : NULL);
    return -1;
}

/* "Authorization: Bearer": a WLCG token reading what its storage.read scope
 * covers (daemon/control/token.h); the catalog's permissions then apply to
 * the uid it maps to, as for a signed request. */
static int authenticate_bearer(s3_req_t *r, const char *jwt)
{
    char path[SI_BUCKET_MAX + SI_KEY_MAX + 4];
    snprintf(path, sizeof(path), "/%s%s%s", r->bucket, r->key ? "/" : "", r->key ? r->key : "");
    token_claims_t claims;
    si_error_t err = {{0}};
    if (!r->srv->tokens) {
        s3_respond_error(r, "AccessDenied", "this endpoint accepts no bearer tokens"
                         " (stageind.token_issuers)");
        return -1;
    }
    if (token_gate_read(r->srv->tokens, jwt, r->method, path, time(NULL), &claims, &err) < 0) {
        s3_respond_error(r, "AccessDenied", "%s", err.text);
        return -1;
    }
    r->who = (s3_who_t){.uid = claims.uid, .gid = claims.gid, .all = claims.uid == 0};
    gid_t groups[SI_GROUPS_MAX];
    size_t n = 0;
    si_groups_of(r->srv->groups, r->who.uid, r->who.gid, groups, &n);
    r->who.ngroups = n < S3_WHO_GROUPS_MAX ? n : S3_WHO_GROUPS_MAX;
    memcpy(r->who.groups, groups, r->who.ngroups * sizeof(gid_t));
    snprintf(r->note, sizeof(r->note), "bearer sub=%.64s uid=%u", claims.subject,
             (unsigned)claims.uid);
    return 0;
}

/* What libmicrohttpd lets through and RFC 9112 6.3 does not: Content-Length
 * headers that disagree (a request smuggler's framing; libmicrohttpd reads
 * the body by the first); and more query parameters than any S3 request has. */
static int check_framing(s3_req_t *r)
{
    const char *length = NULL;
    for (size_t i = 0; i < r->nheaders; i++) {
        if (strcasecmp(r->headers[i].name, "Content-Length") != 0)
            continue;
        if (length && strcmp(length, r->headers[i].value) != 0) {
            s3_respond_error(r, "InvalidRequest", "two different Content-Length headers"
                             " (%.20s and %.20s): the body's length is ambiguous", length,
                             r->headers[i].value);
            return -1;
        }
        length = r->headers[i].value;
    }
    if (r->nparams > S3_QUERY_PARAMS_MAX) {
        s3_respond_error(r, "InvalidArgument", "the query has %zu parameters; at most %d are"
                         " allowed", r->nparams, S3_QUERY_PARAMS_MAX);
        return -1;
    }
    return 0;
}

/* A Tape REST API client (gfal2, FTS) looks for the discovery document on
 * the host and port of its file URLs, this endpoint's: it names the
 * control API, on the same host as the client reached. */
static bool tape_rest_discovery(s3_req_t *r)
{
    size_t plen = strlen(CONTROL_DISCOVERY_PATH);
    if (!r->srv->control_port || strcmp(r->method, "GET") != 0 || !r->uri ||
        strncmp(r->uri, CONTROL_DISCOVERY_PATH, plen) != 0 ||
        (r->uri[plen] && r->uri[plen] != '?'))
        return false;
    const char *host = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Host");
    char authority[300];
    size_t hlen = host ? strlen(host) : 0;
    const char *colon = host ? strrchr(host, ':') : NULL;
    if (colon && (host[0] != '[' || colon > strchr(host, ']')))
        hlen = (size_t)(colon - host); /* the host without this port */
    bool usable = hlen > 0 && hlen <= 255;
    snprintf(authority, sizeof(authority), "%.*s:%d", usable ? (int)hlen : 0, usable ? host : "",
             r->srv->control_port);
    json_t *doc = control_discovery(r->srv->sitename, usable ? authority : NULL);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    struct MHD_Response *resp =
        text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!resp) {
        free(text);
        s3_respond_error(r, "InternalError", "out of memory");
        return true;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    s3_respond(r, 200, resp);
    return true;
}

static void dispatch(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    /* the header section, within the configured bound */
    size_t bytes = strlen(r->uri);
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_header, &bytes);
    if (bytes > s->conf.max_header_size) {
        s3_respond_error(r, "RequestHeaderSectionTooLarge", "the request line and headers are"
                         " %zu bytes, more than the %zu allowed", bytes,
                         s->conf.max_header_size);
        return;
    }
    int n = MHD_get_connection_values(r->conn, MHD_HEADER_KIND, NULL, NULL);
    r->headers = calloc((size_t)(n > 0 ? n : 1), sizeof(*r->headers));
    if (!r->headers) {
        s3_respond_error(r, "InternalError", "out of memory");
        return;
    }
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, collect_header, r);
    if (check_framing(r) < 0 || tape_rest_discovery(r))
        return;

    const char *bearer =
        token_bearer_of(MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization"));
    if (bearer ? split_path(r) < 0 || authenticate_bearer(r, bearer) < 0
               : authenticate(r) < 0 || split_path(r) < 0)
        return;
    if (!r->anonymous && !bearer)
        snprintf(r->note, sizeof(r->note), "key=%s uid=%u", r->auth.access_key,
                 (unsigned)r->auth.uid);
    const char *unknown = unknown_parameter(r);
    if (unknown) {
        s3_respond_error(r, "NotImplemented", "the '%.64s' query parameter (sub-resource) is not"
                         " implemented", unknown);
        return;
    }
    if (r->bucket[0])
        map_bucket(r);
    /* a form upload is anonymous to HTTP (its signature is in the form) */
    if (r->bucket[0] && !r->key && strcmp(r->method, "POST") == 0 && !subresource_of(r)) {
        post_bucket(r);
        return;
    }
    if (r->anonymous && !(r->bucket[0] && r->map.is_public && is_read(r))) {
        s3_respond_error(r, "AccessDenied", "anonymous requests may only read public buckets;"
                         " sign the request (AWS Signature Version 4)");
        return;
    }
    if (r->bucket[0] && r->map.is_public && is_read(r))
        r->who.all = true;
    run_operation(r, !r->bucket[0] ? AT_SERVICE : !r->key ? AT_BUCKET : AT_OBJECT);
}

/* ---- the header watchdog ------------------------------------------------------ */

#define WATCHDOG_PERIOD_MS 250

typedef struct s3_conn {
    int fd;
    struct timespec since;           /* connected, or its last request answered */
    bool in_request;                 /* headers in, not yet completed */
    bool cut;
    /* a body arriving: at least s3.min_upload_rate over each window of
     * s3.timeout seconds, or the connection is cut and what the upload
     * holds (its cache reservation, its quota) given back */
    bool receiving;
    atomic_uint_fast64_t body_bytes;
    uint64_t window_bytes;           /* body_bytes when the window began */
    struct timespec window_since;
    char what[128];                  /* "PUT /bucket/key uid=N", for the log */
    struct s3_conn *prev, *next;
} s3_conn_t;

static double seconds_since(const struct timespec *t, const struct timespec *now)
{
    return (double)(now->tv_sec - t->tv_sec) + (double)(now->tv_nsec - t->tv_nsec) / 1e9;
}

/* One window of a body's arrival over: cut when it brought less than
 * s3.min_upload_rate; conns_mu held. */
static void check_body_rate(s3_server_t *s, s3_conn_t *c, const struct timespec *now)
{
    double window = seconds_since(&c->window_since, now);
    if (window < (double)s->conf.timeout)
        return;
    uint64_t bytes = atomic_load(&c->body_bytes);
    double rate = (double)(bytes - c->window_bytes) / window;
    if (rate >= (double)s->conf.min_upload_rate) {
        c->window_bytes = bytes;
        c->window_since = *now;
        return;
    }
    si_log(s->log, SI_LOG_WARNING, "s3: %s: connection cut after %" PRIu64 " body bytes: %.0f"
           " bytes/s over the last %.0f s, under s3.min_upload_rate (%" PRIu64 ")", c->what,
           bytes, rate, window, s->conf.min_upload_rate);
    shutdown(c->fd, SHUT_RDWR);
    c->cut = true;
}

static void *watchdog_main(void *arg)
{
    s3_server_t *s = arg;
    pthread_mutex_lock(&s->conns_mu);
    while (!s->stopping) {
        struct timespec now, until;
        clock_gettime(CLOCK_MONOTONIC, &now);
        for (s3_conn_t *c = s->conns; c; c = c->next) {
            if (!c->in_request && !c->cut && seconds_since(&c->since, &now) > s->conf.timeout) {
                /* libmicrohttpd sees the end of the stream and closes it; the
                 * fd stays open until its CLOSED notice, which waits for this lock */
                shutdown(c->fd, SHUT_RDWR);
                c->cut = true;
            }
            if (c->receiving && !c->cut && s->conf.min_upload_rate)
                check_body_rate(s, c, &now);
        }
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += WATCHDOG_PERIOD_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&s->conns_cv, &s->conns_mu, &until);
    }
    pthread_mutex_unlock(&s->conns_mu);
    return NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    s3_server_t *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        s3_conn_t *c = info ? calloc(1, sizeof(*c)) : NULL;
        if (!c)
            return;
        c->fd = info->connect_fd;
        clock_gettime(CLOCK_MONOTONIC, &c->since);
        pthread_mutex_lock(&s->conns_mu);
        c->next = s->conns;
        if (s->conns)
            s->conns->prev = c;
        s->conns = c;
        pthread_mutex_unlock(&s->conns_mu);
        *socket_context = c;
        return;
    }
    s3_conn_t *c = *socket_context;
    if (!c)
        return;
    pthread_mutex_lock(&s->conns_mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    pthread_mutex_unlock(&s->conns_mu);
    free(c);
    *socket_context = NULL;
}

static s3_conn_t *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

/* r's body starts (receiving) or is all in: the watchdog's rate check. */
static void mark_receiving(s3_req_t *r, bool receiving)
{
    s3_conn_t *c = conn_of(r->conn);
    if (!c)
        return;
    pthread_mutex_lock(&r->srv->conns_mu);
    if (receiving && !c->receiving) {
        atomic_store(&c->body_bytes, 0);
        c->window_bytes = 0;
        clock_gettime(CLOCK_MONOTONIC, &c->window_since);
        snprintf(c->what, sizeof(c->what), "%s %.80s uid=%u", r->method, r->path,
                 (unsigned)r->who.uid);
    }
    c->receiving = receiving;
    pthread_mutex_unlock(&r->srv->conns_mu);
}

static void mark_in_request(s3_server_t *s, struct MHD_Connection *conn, bool in_request)
{
    s3_conn_t *c = conn_of(conn);
    if (!c)
        return;
    pthread_mutex_lock(&s->conns_mu);
    c->in_request = in_request;
    if (!in_request)
        c->receiving = false;
    clock_gettime(CLOCK_MONOTONIC, &c->since);
    pthread_mutex_unlock(&s->conns_mu);
}

/* ---- libmicrohttpd callbacks ------------------------------------------------- */

/* RFC 9112 6.3: a request has a body when it has Transfer-Encoding or a
 * Content-Length other than 0. */
static bool has_body(struct MHD_Connection *conn)
{
    if (MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
        return true;
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    return cl && strcmp(cl, "0") != 0;
}

static void free_request(s3_req_t *r)
{
    si_strbuf_free(&r->xml);
    si_strbuf_free(&r->query_text);
    free(r->params);
    free(r->headers);
    free(r->key);
    free(r->uri);
    free(r->path_buf);
    free(r);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    s3_server_t *s = cls;
    s3_req_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->srv = s;
    r->conn = conn;
    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    snprintf(r->id, sizeof(r->id), "%016llX",
             (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    size_t plen = strcspn(uri, "?");
    r->uri = strdup(uri);
    r->path_buf = strndup(uri, plen);
    if (!r->uri || !r->path_buf) {
        free_request(r);
        return NULL;
    }
    r->path = r->path_buf;
    r->query = r->uri + plen + (uri[plen] == '?');
    /* the query is decoded here (parse_query), from this copy: libmicrohttpd
     * is left none to split into its own records, whose pool a thousand
     * parameters overflow (it then closes the connection unanswered) */
    if (uri[plen] == '?')
        ((char *)uri)[plen + 1] = '\0';
    if (parse_query(r) < 0) {
        free_request(r);
        return NULL;
    }
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)cls, (void)url, (void)version;
    s3_req_t *r = *con_cls;
    if (!r)
        return MHD_NO;
    if (!r->started) {
        r->started = true;
        mark_in_request(r->srv, conn, true);
        snprintf(r->method, sizeof(r->method), "%s", method);
        /* libmicrohttpd closes the connection after an answer queued in this
         * first call (it would have to skip the body): a request without a
         * body is answered in the next call, which comes at once, so that its
         * connection stays open for the next request. One with a body is
         * dispatched now, to refuse it before the body is read. */
        if (!has_body(conn))
            return MHD_YES;
        r->dispatched = true;
        dispatch(r);
        if (!r->responded && !r->body)
            s3_respond_error(r, "InternalError", "the operation gave no answer");
        if (!r->responded && r->body)
            mark_receiving(r, true);
        return MHD_YES;
    }
    if (!r->dispatched) {
        r->dispatched = true;
        dispatch(r);
    }
    if (*upload_data_size) {
        if (!r->responded && r->body && r->body->data)
            r->body->data(r, upload_data, *upload_data_size);
        s3_conn_t *c = conn_of(conn);
        if (c)
            atomic_fetch_add(&c->body_bytes, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    mark_receiving(r, false);
    if (!r->responded && r->body && r->body->end)
        r->body->end(r);
    if (!r->responded)
        s3_respond_error(r, "InternalError", "the operation gave no answer");
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    s3_server_t *s = cls;
    s3_req_t *r = *con_cls;
    mark_in_request(s, conn, false);
    if (!r)
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - r->t0.tv_sec) * 1e3 +
                (double)(now.tv_nsec - r->t0.tv_nsec) / 1e6;
    si_log(s->log, SI_LOG_INFO, "s3: %s %.200s %u %.1fms %s%s", r->method, r->uri, r->status, ms,
           r->note, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
    if (r->body && r->body->cleanup)
        r->body->cleanup(r, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    free_request(r);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    s3_server_t *s = cls;
    char text[512];
    vsnprintf(text, sizeof(text), fmt, ap);
    size_t n = strlen(text);
    while (n && text[n - 1] == '\n')
        text[--n] = '\0';
    si_log(s->log, SI_LOG_WARNING, "s3: libmicrohttpd: %s", text);
}

/* ---- life cycle ------------------------------------------------------------- */

static int write_port_file(s3_server_t *s, si_error_t *err)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", s->port_file);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return si_errprintf(err, "s3: %s: %s", tmp, strerror(errno));
    fprintf(f, "%u\n", (unsigned)s->port);
    if (fclose(f) != 0 || rename(tmp, s->port_file) < 0) {
        unlink(tmp);
        return si_errprintf(err, "s3: %s: %s", s->port_file, strerror(errno));
    }
    return 0;
}

/* The certificate (chain) and the private key, PEM, kept for libmicrohttpd;
 * the key file must be private like the secrets file. */
#define TLS_FILE_MAX (1u << 20)
static int load_tls(s3_server_t *s, si_error_t *err)
{
    size_t len;
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return si_errprintf(err, "s3.tls_cert_file: this libmicrohttpd is built without TLS");
    if (!(s->tls_cert = si_read_file(s->conf.tls_cert_file, TLS_FILE_MAX, false, &len, err)))
        return si_errprefix(err, "s3.tls_cert_file");
    if (!(s->tls_key = si_read_file(s->conf.tls_key_file, TLS_FILE_MAX, true, &s->tls_key_len,
                                    err)))
        return si_errprefix(err, "s3.tls_key_file");
    if (!strstr(s->tls_cert, "-----BEGIN CERTIFICATE-----"))
        return si_errprintf(err, "s3.tls_cert_file: %s holds no PEM certificate",
                            s->conf.tls_cert_file);
    if (!strstr(s->tls_key, "PRIVATE KEY-----"))
        return si_errprintf(err, "s3.tls_key_file: %s holds no PEM private key",
                            s->conf.tls_key_file);
    return 0;
}

/* The secrets file's keys first, then session credentials (minted by the
 * control API for users it authenticated). */
static int lookup_credential(void *arg, const char *access_key, si_sigv4_credential_t *cred)
{
    s3_server_t *s = arg;
    if (si_secrets_lookup(s->secrets, access_key, cred) == 0)
        return 0;
    return s->sessions ? si_session_lookup(s->sessions, access_key, cred) : -1;
}

s3_server_t *s3_server_start(const s3_opts_t *opts, si_error_t *err)
{
    s3_server_t *s = calloc(1, sizeof(*s));
    if (!s) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    s->conf = opts->conf;
    s->pin_lifetime_max = opts->pin_lifetime_max;
    snprintf(s->sitename, sizeof(s->sitename), "%s", opts->sitename ? opts->sitename : "");
    s->control_port = opts->sitename ? opts->control_port : 0;
    s->tokens = opts->tokens;
    s->cache = opts->cache;
    s->staged = opts->staged;
    s->staged_arg = opts->staged_arg;
    s->push = opts->push;
    s->log = opts->log;
    s->started = (int64_t)time(NULL);
    pthread_mutex_init(&s->buckets_mu, NULL);
    pthread_mutex_init(&s->conns_mu, NULL);
    pthread_cond_init(&s->conns_cv, NULL);
    snprintf(s->push_bucket, sizeof(s->push_bucket), "%s",
             opts->push_bucket ? opts->push_bucket : "");
    if (opts->state_dir) {
        snprintf(s->port_file, sizeof(s->port_file), "%s/s3.port", opts->state_dir);
        snprintf(s->multipart_dir, sizeof(s->multipart_dir), "%s/s3-multipart",
                 opts->state_dir);
    }

    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } addr;
    memset(&addr, 0, sizeof(addr));
    bool v6 = false;
    if (inet_pton(AF_INET, s->conf.bind, &addr.in4.sin_addr) == 1) {
        addr.in4.sin_family = AF_INET;
        addr.in4.sin_port = htons((uint16_t)s->conf.port);
    } else if (inet_pton(AF_INET6, s->conf.bind, &addr.in6.sin6_addr) == 1) {
        addr.in6.sin6_family = AF_INET6;
        addr.in6.sin6_port = htons((uint16_t)s->conf.port);
        v6 = true;
    } else {
        si_errprintf(err, "s3.bind: '%s' is not a numeric IPv4 or IPv6 address", s->conf.bind);
        goto error;
    }

    if (!(s->groups = si_groups_new(S3_GROUPS_TTL_S))) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    uint64_t user_bytes = s->conf.max_user_upload_bytes;
    if (user_bytes == S3_HALF_CACHE) {
        cache_usage_t u = {0};
        user_bytes = s->cache && cache_usage(s->cache, &u, err) == 0 ? u.capacity / 2 : 0;
    }
    if (!(s->quota = s3_quota_new(s->conf.max_user_uploads, user_bytes))) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    if (!(s->secrets = si_secrets_load(s->conf.secrets_file, err))) {
        si_errprefix(err, "s3.secrets_file");
        goto error;
    }
    s->sessions = opts->sessions;
    if (!(s->keys = si_sigv4_key_cache_new(err)))
        goto error;
    s->verifier = (si_sigv4_verifier_conf_t){
        .region = s->conf.region, .service = "s3", .max_skew_s = s->conf.clock_skew,
        .lookup = lookup_credential, .lookup_arg = s, .key_cache = s->keys};
    if (!(s->pool = s3_dbpool_open(opts->catalog_path, s->conf.threads + 2, err)))
        goto error;
    if (s3_rdma_open(s, &opts->rdma, err) < 0)
        goto error;
    s3_db_t *db = s3_dbpool_get(s->pool);
    int rc = s3_db_archive_buckets(db, add_loaded_bucket, s, err);
    for (size_t i = 0; s->push && rc == 0 && i < s->conf.archive_buckets.count; i++)
        rc = s3_db_share_archive_bucket(db, s->conf.archive_buckets.name[i],
                                        s->conf.archive_bucket_mode,
                                        s->conf.archive_bucket_group, err);
    s3_dbpool_put(s->pool, db);
    if (rc < 0)
        goto error;

    /* A thread per connection: a handler that blocks (an fsync, a catalog
     * write, a transparent recall's wait) holds up its own connection only,
     * and libmicrohttpd sends file bodies in sendfile(2) calls of 2 MiB
     * instead of the 128 KiB it uses between the connections of a pool
     * thread (1 GiB GETs: 0.06 instead of 0.22-0.30 CPU seconds per GiB). */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_ERROR_LOG | MHD_USE_AUTO;
    if (v6)
        flags |= MHD_USE_IPv6;
    struct MHD_OptionItem o[16];
    size_t n = 0;
    if (s->conf.tls_cert_file[0]) {
        if (load_tls(s, err) < 0)
            goto error;
        flags |= MHD_USE_TLS;
        o[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key};
        o[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert};
    }
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, s};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &addr.sa};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_uri, s};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, s->conf.timeout, NULL};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                     (intptr_t)(s->conf.max_header_size * 2 +
                                                CONNECTION_POOL_EXTRA), NULL};
    if (s->conf.max_connections)
        o[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, s->conf.max_connections,
                                         NULL};
    o[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    s->mhd = MHD_start_daemon(flags, (uint16_t)s->conf.port, NULL, NULL, on_request, s,
                              MHD_OPTION_ARRAY, o, MHD_OPTION_END);
    if (!s->mhd) {
        si_errprintf(err, "s3: cannot listen on %s port %d (in use, or not an address here?)",
                     s->conf.bind, s->conf.port);
        goto error;
    }
    if (pthread_create(&s->watchdog, NULL, watchdog_main, s) != 0) {
        si_errprintf(err, "s3: cannot start the connection watchdog thread");
        goto error;
    }
    s->watchdog_started = true;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : (uint16_t)s->conf.port;
    if (s->port_file[0] && write_port_file(s, err) < 0)
        goto error;
    si_log(s->log, SI_LOG_NOTICE, "s3: listening on %s port %u%s (region %s, %zu credentials,"
           " a thread per connection, %u in the catalog at once%s%s)", s->conf.bind,
           (unsigned)s->port, s->tls_cert ? " with TLS" : "", s->conf.region,
           si_secrets_count(s->secrets), s->conf.threads,
           s->conf.vhost_domain[0] ? ", virtual hosts under " : "", s->conf.vhost_domain);
    return s;
error:
    s3_server_stop(s);
    return NULL;
}

uint16_t s3_server_port(const s3_server_t *s)
{
    return s ? s->port : 0;
}

void s3_server_stop(s3_server_t *s)
{
    if (!s)
        return;
    if (s->watchdog_started) {
        pthread_mutex_lock(&s->conns_mu);
        s->stopping = true;
        pthread_cond_signal(&s->conns_cv);
        pthread_mutex_unlock(&s->conns_mu);
        pthread_join(s->watchdog, NULL);
    }
    if (s->mhd)
        MHD_stop_daemon(s->mhd);
    if (s->port_file[0] && s->port)
        unlink(s->port_file);
    s3_rdma_close(s);
    s3_dbpool_close(s->pool);
    si_secrets_free(s->secrets);
    si_groups_free(s->groups);
    s3_quota_free(s->quota);
    si_sigv4_key_cache_free(s->keys);
    if (s->tls_key) {
        OPENSSL_cleanse(s->tls_key, s->tls_key_len);
        free(s->tls_key);
    }
    free(s->tls_cert);
    pthread_mutex_destroy(&s->buckets_mu);
    pthread_mutex_destroy(&s->conns_mu);
    pthread_cond_destroy(&s->conns_cv);
    free(s->created);
    free(s);
}

void s3_server_url(const s3_server_t *s, char *buf, size_t size)
{
    const char *host = s->conf.bind;
    char name[256];
    if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) {
        if (gethostname(name, sizeof(name)) == 0) {
            name[sizeof(name) - 1] = '\0';
            host = name;
        }
    }
    bool v6 = strchr(host, ':') != NULL;
    snprintf(buf, size, "%s://%s%s%s:%u", s->tls_cert ? "https" : "http", v6 ? "[" : "",
             host, v6 ? "]" : "", (unsigned)s->port);
}

const char *s3_server_region(const s3_server_t *s)
{
    return s->conf.region;
}

s3_server_t *s3_service_start(const si_conf_t *conf, const s3_opts_t *opts, si_error_t *err)
{
    s3_opts_t o = *opts;
    err->text[0] = '\0';
    if (s3_conf_from(conf, &o.conf, err) < 0)
        return NULL;
    if (rdma_config_load(conf, &o.rdma, err) < 0)
        return NULL;
    if (!o.conf.enabled)
        return NULL;
    return s3_server_start(&o, err);
}
