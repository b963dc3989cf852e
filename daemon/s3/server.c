/* The S3 server over libmicrohttpd: the raw URI (SigV4 needs it as sent)
 * comes from the URI log callback, every header from the connection; each
 * request is authenticated, mapped to an operation and answered, bodies
 * handed to the operation piece by piece. */
#include "config.h"
#include "daemon/s3/internal.h"

/* how long a uid's groups are taken as NSS said */
#define S3_GROUPS_TTL_S 60.0

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/clock.h"
#include "common/fileio.h"
#include "common/uri.h"
#include "daemon/cache/cache.h"
#include "daemon/control/control.h"

/* request line, headers and the upload read buffer share the connection's pool */
#define CONNECTION_POOL_EXTRA (16u << 10)

static int add_loaded_bucket(const char *name, uid_t owner, void *arg)
{
    s3_add_created_bucket(arg, name, owner);
    return 0;
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

/* Every operation: method, target and sub-resource (NULL: none), and
 * whether it runs on the event thread (a GET or HEAD of an object: one
 * catalog statement and an open; what of it may wait, a transparent recall
 * or an RDMA transfer, offloads itself); every other goes to a worker. */
#define ON_EVENT_THREAD true
#define TO_WORKER false
static const struct {
    const char *method;
    s3_target_t at;
    const char *sub;
    void (*run)(s3_req_t *r);
    bool on_event_thread;
} operations[] = {
    {"GET", AT_SERVICE, NULL, s3_list_buckets, TO_WORKER},
    {"GET", AT_BUCKET, NULL, get_objects, TO_WORKER},
    {"GET", AT_BUCKET, "location", s3_get_bucket_location, TO_WORKER},
    {"GET", AT_BUCKET, "uploads", s3_list_multipart_uploads, TO_WORKER},
    {"GET", AT_BUCKET, "versioning", s3_get_bucket_versioning, TO_WORKER},
    {"HEAD", AT_BUCKET, NULL, s3_head_bucket, TO_WORKER},
    {"PUT", AT_BUCKET, NULL, s3_create_bucket, TO_WORKER},
    {"DELETE", AT_BUCKET, NULL, s3_delete_bucket, TO_WORKER},
    {"POST", AT_BUCKET, "delete", s3_delete_objects, TO_WORKER},
    {"POST", AT_BUCKET, NULL, post_bucket, TO_WORKER},
    {"GET", AT_OBJECT, NULL, get_object, ON_EVENT_THREAD},
    {"GET", AT_OBJECT, "uploadId", s3_list_parts, TO_WORKER},
    {"GET", AT_OBJECT, "tagging", s3_get_object_tagging, TO_WORKER},
    {"HEAD", AT_OBJECT, NULL, head_object, ON_EVENT_THREAD},
    {"PUT", AT_OBJECT, NULL, put_object_or_copy, TO_WORKER},
    {"PUT", AT_OBJECT, "uploadId", put_part_or_copy, TO_WORKER},
    {"POST", AT_OBJECT, "restore", s3_restore_object, TO_WORKER},
    {"POST", AT_OBJECT, "uploads", s3_create_multipart, TO_WORKER},
    {"POST", AT_OBJECT, "uploadId", s3_complete_multipart, TO_WORKER},
    {"DELETE", AT_OBJECT, NULL, s3_delete_object, TO_WORKER},
    {"DELETE", AT_OBJECT, "uploadId", s3_abort_multipart, TO_WORKER},
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
            if (operations[i].on_event_thread)
                operations[i].run(r);
            else
                s3_offload(r, operations[i].run);
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

typedef struct {
    size_t count, bytes;
} header_size_t;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    header_size_t *size = cls;
    size->count++;
    size->bytes += strlen(key) + (value ? strlen(value) : 0) + 4;
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
    /* the usual name, with nothing to decode: checked where it is */
    if (len <= SI_BUCKET_MAX && !memchr(text, '%', len) &&
        si_bucket_check(text, len, &err) == 0) {
        memcpy(r->bucket, text, len);
        r->bucket[len] = '\0';
        return 0;
    }
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
    s3_respond_error_in(r, si_sigv4_status_code(st), err.text,
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

/* "key=<access key> uid=<uid>" into r->note, without printf: this runs for
 * every signed request. */
static void note_credential(s3_req_t *r)
{
    _Static_assert(sizeof(r->note) >= 4 + SI_SIGV4_ACCESS_KEY_MAX + 5 + 10 + 1,
                   "the note holds every access key and uid");
    char *p = r->note;
    size_t klen = strlen(r->auth.access_key);
    memcpy(p, "key=", 4);
    memcpy(p + 4, r->auth.access_key, klen);
    p += 4 + klen;
    memcpy(p, " uid=", 5);
    unsigned uid = (unsigned)r->auth.uid;
    *s3_put_digits(p + 5, uid, (int)si_digits(uid, 10)) = '\0';
}

static void dispatch(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    /* the header section, within the configured bound */
    header_size_t size = {.bytes = strlen(r->uri)};
    MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_header, &size);
    if (size.bytes > s->conf.max_header_size) {
        s3_respond_error(r, "RequestHeaderSectionTooLarge", "the request line and headers are"
                         " %zu bytes, more than the %zu allowed", size.bytes,
                         s->conf.max_header_size);
        return;
    }
    r->headers = size.count <= S3_HEADERS_INLINE
                     ? r->header_room : calloc(size.count, sizeof(*r->headers));
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
        note_credential(r);
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

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    s3_server_t *s = cls;
    s3_req_t *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->srv = s;
    r->conn = conn;
    r->t0 = si_mono_now();
    /* the id in hex, 16 digits: on every answer, so no printf */
    uint64_t id = atomic_fetch_add(&s->next_id, 1);
    for (int i = 15; i >= 0; i--, id >>= 4)
        r->id[i] = "0123456789ABCDEF"[id & 15];
    r->id[16] = '\0';
    /* the URI as sent, then its path: one allocation */
    size_t len = strlen(uri), plen = strcspn(uri, "?");
    if (!(r->uri = malloc(len + plen + 2))) {
        s3_req_free(r);
        return NULL;
    }
    memcpy(r->uri, uri, len + 1);
    r->path_buf = r->uri + len + 1;
    memcpy(r->path_buf, uri, plen);
    r->path_buf[plen] = '\0';
    r->path = r->path_buf;
    r->query = r->uri + plen + (uri[plen] == '?');
    /* the query is decoded here (s3_req_parse_query), from this copy: libmicrohttpd
     * is left none to split into its own records, whose pool a thousand
     * parameters overflow (it then closes the connection unanswered) */
    if (uri[plen] == '?')
        ((char *)uri)[plen + 1] = '\0';
    if (s3_req_parse_query(r) < 0) {
        s3_req_free(r);
        return NULL;
    }
    return r;
}

/* A request with a body, dispatched (before its body): the body goes to the
 * operation, or the answer (an early refusal) is already given. */
static void body_follows(s3_req_t *r)
{
    if (!r->responded && !r->body)
        s3_respond_error(r, "InternalError", "the operation gave no answer");
    if (!r->responded && r->body) {
        char what[128];
        snprintf(what, sizeof(what), "%s %.80s uid=%u", r->method, r->path,
                 (unsigned)r->who.uid);
        http_listener_body_begins(r->srv->http, r->conn, what);
    }
}

/* A callback that may suspend its connection runs between these: libmicrohttpd
 * must not stop with a connection suspended, so once the server is stopping
 * none starts (false: answer without suspending). */
static bool enter_call(s3_server_t *s)
{
    pthread_mutex_lock(&s->suspend_mu);
    bool ok = !s->stopping;
    if (ok)
        s->in_calls++;
    pthread_mutex_unlock(&s->suspend_mu);
    return ok;
}

static void leave_call(s3_server_t *s)
{
    pthread_mutex_lock(&s->suspend_mu);
    s->in_calls--;
    pthread_cond_broadcast(&s->suspend_cv);
    pthread_mutex_unlock(&s->suspend_mu);
}

static void serve(s3_req_t *r, struct MHD_Connection *conn, const char *method,
                  const char *upload_data, size_t *upload_data_size);

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)cls, (void)url, (void)version;
    s3_req_t *r = *con_cls;
    if (!r)
        return MHD_NO;
    if (r->answer) {
        /* resumed: what the worker answered */
        struct MHD_Response *resp = r->answer;
        r->answer = NULL;
        r->headers_phase = false;
        MHD_queue_response(conn, r->answer_status, resp);
        MHD_destroy_response(resp);
        return MHD_YES;
    }
    if (*upload_data_size && r->dispatched) {
        /* a piece of the body: nothing here suspends */
        if (!r->responded && r->body && r->body->data)
            r->body->data(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (!enter_call(r->srv)) {
        r->headers_phase = false;
        if (!r->responded)
            s3_respond_error(r, "ServiceUnavailable", "the server is shutting down");
        return MHD_YES;
    }
    serve(r, conn, method, upload_data, upload_data_size);
    leave_call(r->srv);
    return MHD_YES;
}

static void serve(s3_req_t *r, struct MHD_Connection *conn, const char *method,
                  const char *upload_data, size_t *upload_data_size)
{
    if (r->headers_phase) {
        /* resumed before the body: the worker dispatched it */
        r->headers_phase = false;
        body_follows(r);
        return;
    }
    r->offloaded_in_call = false;
    if (!r->started) {
        r->started = true;
        snprintf(r->method, sizeof(r->method), "%s", method);
        /* libmicrohttpd closes the connection after an answer queued in this
         * first call (it would have to skip the body): a request without a
         * body is answered in the next call, which comes at once, so that its
         * connection stays open for the next request. One with a body is
         * dispatched now, to refuse it before the body is read. */
        if (!has_body(conn))
            return;
        r->dispatched = true;
        r->headers_phase = true;
        dispatch(r);
        if (r->offloaded_in_call)
            return; /* called again once resumed */
        r->headers_phase = false;
        body_follows(r);
        return;
    }
    if (!r->dispatched) {
        r->dispatched = true;
        dispatch(r);
        if (r->offloaded_in_call)
            return;
    }
    if (*upload_data_size) {
        if (!r->responded && r->body && r->body->data)
            r->body->data(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return;
    }
    if (!r->responded && r->body && r->body->end && !r->ended) {
        /* the operation's end may wait (a commit, an fsync): on a worker */
        r->ended = true;
        s3_offload(r, r->body->end);
        return;
    }
    if (!r->responded)
        s3_respond_error(r, "InternalError", "the operation gave no answer");
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    s3_server_t *s = cls;
    s3_req_t *r = *con_cls;
    if (!r)
        return;
    double ms = (si_mono_now() - r->t0) * 1e3;
    si_log(s->log, SI_LOG_INFO, "s3: %s %.200s %u %.1fms %s%s", r->method, r->uri, r->status, ms,
           r->note, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)");
    if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
        s3_req_uncork(r); /* its last segment goes out now (otherwise the socket closes) */
    if (r->body && r->body->cleanup)
        r->body->cleanup(r, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    if (r->answer_counted) {
        pthread_mutex_lock(&s->suspend_mu);
        s->answering--;
        pthread_cond_broadcast(&s->suspend_cv);
        pthread_mutex_unlock(&s->suspend_mu);
    }
    s3_req_free(r);
    *con_cls = NULL;
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
    pthread_mutex_init(&s->suspend_mu, NULL);
    pthread_cond_init(&s->suspend_cv, NULL);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->io_threads = s->conf.io_threads ? s->conf.io_threads
                                       : cpus < 1 ? 1 : cpus > 64 ? 64 : (unsigned)cpus;
    snprintf(s->push_bucket, sizeof(s->push_bucket), "%s",
             opts->push_bucket ? opts->push_bucket : "");
    if (opts->state_dir) {
        snprintf(s->port_file, sizeof(s->port_file), "%s/s3.port", opts->state_dir);
        snprintf(s->multipart_dir, sizeof(s->multipart_dir), "%s/s3-multipart",
                 opts->shared_dir ? opts->shared_dir : opts->state_dir);
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
    /* a connection for each thread that may ask, so none waits for another */
    if (!(s->pool = s3_dbpool_open(opts->catalog, s->conf.threads + s->io_threads + 1, err)))
        goto error;
    if (!(s->objects = s3_objcache_new())) {
        si_errprintf(err, "out of memory");
        goto error;
    }
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

    /* A few event threads (libmicrohttpd's pool, epoll) serve every
     * connection: a cached GET is answered on them without a thread
     * hand-off or a wake-up per request. What may wait (an fsync, a catalog
     * write, a transparent recall, an upload's batch commit) runs on the
     * workers, its connection suspended meanwhile (s3_offload). */
    if (!(s->workers = http_workers_new("s3", s->conf.threads, err)))
        goto error;
    if (s->conf.tls_cert_file[0] && load_tls(s, err) < 0)
        goto error;
    uint16_t port;
    int fd = http_listen_tcp("s3", s->conf.bind, (uint16_t)s->conf.port, &port, err);
    if (fd < 0)
        goto error;
    http_listener_opts_t lo = {
        .name = "s3", .log = s->log, .listen_fd = fd,
        .threads = s->io_threads, .allow_suspend = true, .timeout_s = s->conf.timeout,
        .max_connections = s->conf.max_connections,
        .memory_limit = s->conf.max_header_size * 2 + CONNECTION_POOL_EXTRA,
        .min_body_rate = s->conf.min_upload_rate, .min_body_rate_key = "s3.min_upload_rate",
        .tls_cert = s->tls_cert, .tls_key = s->tls_key,
        .on_request = on_request, .request_arg = s, .on_completed = on_completed,
        .completed_arg = s, .on_uri = on_uri, .uri_arg = s};
    if (!(s->http = http_listener_start(&lo, err)))
        goto error;
    s->port = port;
    if (s->port_file[0] && write_port_file(s, err) < 0)
        goto error;
    si_log(s->log, SI_LOG_NOTICE, "s3: listening on %s port %u%s (region %s, %zu credentials,"
           " %u event threads, %u workers%s%s)", s->conf.bind,
           (unsigned)s->port, s->tls_cert ? " with TLS" : "", s->conf.region,
           si_secrets_count(s->secrets), s->io_threads, s->conf.threads,
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
    /* a suspended request's answer is due (its worker or its commit
     * resumes it): libmicrohttpd must not stop with one, nor before a
     * resumed one's answer went out */
    pthread_mutex_lock(&s->suspend_mu);
    s->stopping = true;
    while (s->suspended || s->in_calls || s->answering)
        pthread_cond_wait(&s->suspend_cv, &s->suspend_mu);
    pthread_mutex_unlock(&s->suspend_mu);
    http_listener_stop(s->http);
    http_workers_free(s->workers);
    if (s->port_file[0] && s->port)
        unlink(s->port_file);
    s3_rdma_close(s);
    s3_dbpool_close(s->pool);
    s3_objcache_free(s->objects);
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
    pthread_cond_destroy(&s->suspend_cv);
    pthread_mutex_destroy(&s->suspend_mu);
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
