/* Read operations: ListBuckets, HeadBucket, GetBucketLocation,
 * ListObjects(V2), GetObject/HeadObject (Range, conditions, sendfile from
 * the cache file, Glacier semantics, transparent recall) and RestoreObject. */
#include "config.h"
#include "daemon/s3/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "catalog/requests.h"
#include "common/array.h"
#include "common/clock.h"
#include "common/uri.h"
#include "daemon/cache/cache.h"

/* Longest sleep between looks while a GET waits for its recall (seconds). */
#define RECALL_WAIT_MAX_S 1
#define RECALL_RETRY_AFTER_S "30"
#define RECALL_PIN_MIN_S 3600

static void put_text(si_strbuf_t *x, const char *name, const char *text)
{
    si_strbuf_printf(x, "<%s>", name);
    s3_xml_escape(x, text, strlen(text));
    si_strbuf_printf(x, "</%s>", name);
}

/* A key or prefix in a listing: URL-encoded when the client asked for it. */
static void put_key(si_strbuf_t *x, const char *name, const char *text, bool url)
{
    if (!url)
        return put_text(x, name, text);
    si_strbuf_t enc;
    si_strbuf_init(&enc, SI_KEY_MAX * 3 + 1);
    si_uri_encode(&enc, text, strlen(text), true);
    put_text(x, name, si_strbuf_str(&enc));
    si_strbuf_free(&enc);
}

/* 1 when the bucket exists, 0 (answered NoSuchBucket) when not, -1 answered. */
static int bucket_exists(s3_req_t *r, s3_db_t *db)
{
    if (r->map.archive)
        return 1;
    si_error_t err;
    int rc = s3_db_bucket_has_objects(db, r->map.cat_bucket, &err);
    if (rc < 0) {
        s3_respond_error(r, "InternalError", "%s", err.text);
        return -1;
    }
    if (rc == 0)
        s3_respond_error(r, "NoSuchBucket", "The specified bucket does not exist");
    return rc;
}

/* ---- ListBuckets ----------------------------------------------------------- */

typedef struct {
    char **names;
    size_t n, cap;
    bool failed;
} names_t;

static int add_name(const char *name, void *arg)
{
    names_t *ns = arg;
    if (si_array_grow((void **)&ns->names, &ns->cap, ns->n + 1, sizeof(*ns->names)) < 0 ||
        !(ns->names[ns->n] = strdup(name))) {
        ns->failed = true;
        return 1;
    }
    ns->n++;
    return 0;
}

static int add_archive_name(const char *name, uid_t owner, void *arg)
{
    (void)owner;
    return add_name(name, arg);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void s3_list_buckets(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    names_t ns = {0};
    si_error_t err;
    s3_db_t *db = s3_dbpool_get(s->pool);
    int rc = s3_db_buckets(db, add_name, &ns, &err);
    if (rc == 0 && s->push)
        rc = s3_db_archive_buckets(db, add_archive_name, &ns, &err);
    s3_dbpool_put(s->pool, db);
    for (size_t i = 0; rc == 0 && s->push && i < s->conf.archive_buckets.count; i++)
        add_name(s->conf.archive_buckets.name[i], &ns);
    if (rc < 0 || ns.failed) {
        s3_respond_error(r, "InternalError", "%s", rc < 0 ? err.text : "out of memory");
        goto out;
    }
    qsort(ns.names, ns.n, sizeof(*ns.names), cmp_names);
    char date[32];
    s3_iso8601(s->started, date);
    si_strbuf_t x;
    si_strbuf_init(&x, RESPONSE_XML_MAX);
    si_strbuf_puts(&x, XML_DECL "<ListAllMyBucketsResult xmlns=\"" S3_XMLNS "\"><Owner>");
    si_strbuf_printf(&x, "<ID>%u</ID>", (unsigned)r->who.uid);
    put_text(&x, "DisplayName", r->auth.access_key);
    si_strbuf_puts(&x, "</Owner><Buckets>");
    for (size_t i = 0; i < ns.n; i++) {
        if (i > 0 && strcmp(ns.names[i], ns.names[i - 1]) == 0)
            continue;
        si_strbuf_puts(&x, "<Bucket>");
        put_text(&x, "Name", ns.names[i]);
        si_strbuf_printf(&x, "<CreationDate>%s</CreationDate></Bucket>", date);
    }
    si_strbuf_puts(&x, "</Buckets></ListAllMyBucketsResult>");
    s3_respond_xml(r, 200, &x);
out:
    for (size_t i = 0; i < ns.n; i++)
        free(ns.names[i]);
    free(ns.names);
}

/* ---- HeadBucket, GetBucketLocation -------------------------------------------- */

/* bucket_exists with a connection of its own. */
static bool bucket_found(s3_req_t *r)
{
    s3_db_t *db = s3_dbpool_get(r->srv->pool);
    int rc = bucket_exists(r, db);
    s3_dbpool_put(r->srv->pool, db);
    return rc == 1;
}

void s3_head_bucket(s3_req_t *r)
{
    if (bucket_found(r)) {
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                    MHD_RESPMEM_PERSISTENT);
        if (resp) {
            MHD_add_response_header(resp, "x-amz-bucket-region", r->srv->conf.region);
            s3_rdma_head(r, resp);
            s3_respond(r, 200, resp);
        }
    }
}

/* The answer to a bucket's ?location or ?versioning begun in x (the XML
 * declaration); false, the request answered, where the bucket is not found. */
static bool bucket_xml_begin(s3_req_t *r, si_strbuf_t *x)
{
    if (!bucket_found(r))
        return false;
    si_strbuf_init(x, 4096);
    si_strbuf_puts(x, XML_DECL);
    return true;
}

void s3_get_bucket_location(s3_req_t *r)
{
    si_strbuf_t x;
    if (!bucket_xml_begin(r, &x))
        return;
    si_strbuf_puts(&x, "<LocationConstraint xmlns=\"" S3_XMLNS "\">");
    /* S3 answers an empty constraint for us-east-1 */
    if (strcmp(r->srv->conf.region, "us-east-1") != 0)
        s3_xml_escape(&x, r->srv->conf.region, strlen(r->srv->conf.region));
    si_strbuf_puts(&x, "</LocationConstraint>");
    s3_respond_xml(r, 200, &x);
}

/* An unversioned bucket's answer: no Status. */
void s3_get_bucket_versioning(s3_req_t *r)
{
    si_strbuf_t x;
    if (!bucket_xml_begin(r, &x))
        return;
    si_strbuf_puts(&x, "<VersioningConfiguration xmlns=\"" S3_XMLNS "\"/>");
    s3_respond_xml(r, 200, &x);
}

/* ---- ListObjects, ListObjectsV2 ------------------------------------------------ */

typedef struct {
    si_strbuf_t prefix, delimiter, marker, token, start_after, max_keys, encoding;
} list_args_t;

static void list_args_free(list_args_t *a)
{
    si_strbuf_free(&a->prefix);
    si_strbuf_free(&a->delimiter);
    si_strbuf_free(&a->marker);
    si_strbuf_free(&a->token);
    si_strbuf_free(&a->start_after);
    si_strbuf_free(&a->max_keys);
    si_strbuf_free(&a->encoding);
}

void s3_list_objects(s3_req_t *r, bool v2)
{
    s3_server_t *s = r->srv;
    list_args_t a;
    si_strbuf_t *all[] = {&a.prefix, &a.delimiter, &a.marker, &a.token, &a.start_after,
                          &a.max_keys, &a.encoding};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        si_strbuf_init(all[i], SI_KEY_MAX * 2 + 2);
    bool has_token = false;
    s3_list_result_t res = {0};
    s3_db_t *db = NULL;
    si_error_t err;

    s3_req_query(r, "prefix", &a.prefix);
    s3_req_query(r, "delimiter", &a.delimiter);
    s3_req_query(r, "encoding-type", &a.encoding);
    int max_keys = S3_LIST_MAX_KEYS;
    if (s3_req_query(r, "max-keys", &a.max_keys) == 1) {
        int64_t v;
        if (si_parse_i64(si_strbuf_str(&a.max_keys), &v) < 0 || v < 0) {
            s3_respond_error(r, "InvalidArgument", "max-keys must be a whole number of 0 or"
                             " more, not '%.40s'", si_strbuf_str(&a.max_keys));
            goto out;
        }
        max_keys = v > S3_LIST_MAX_KEYS ? S3_LIST_MAX_KEYS : (int)v;
    }
    bool url = strcmp(si_strbuf_str(&a.encoding), "url") == 0;
    if (a.encoding.len && !url) {
        s3_respond_error(r, "InvalidArgument", "Invalid Encoding Method specified in Request");
        goto out;
    }
    if (a.prefix.len > SI_KEY_MAX || a.delimiter.len > SI_KEY_MAX) {
        s3_respond_error(r, "KeyTooLongError", "prefix or delimiter longer than %d bytes",
                         SI_KEY_MAX);
        goto out;
    }
    char after[SI_KEY_MAX + 1] = "";
    if (v2) {
        has_token = s3_req_query(r, "continuation-token", &a.token) == 1;
        s3_req_query(r, "start-after", &a.start_after);
        if (has_token) {
            if (s3_list_token_decode(si_strbuf_str(&a.token), after, sizeof(after), &err) < 0) {
                s3_respond_error(r, "InvalidArgument", "%s", err.text);
                goto out;
            }
        } else {
            snprintf(after, sizeof(after), "%s", si_strbuf_str(&a.start_after));
        }
    } else {
        s3_req_query(r, "marker", &a.marker);
        snprintf(after, sizeof(after), "%s", si_strbuf_str(&a.marker));
    }

    db = s3_dbpool_get(s->pool);
    if (bucket_exists(r, db) != 1)
        goto out;
    s3_db_cursor_t cur = {.db = db, .bucket = r->map.cat_bucket, .key_prefix = r->map.prefix,
                          .who = r->who};
    s3_list_query_t q = {.prefix = si_strbuf_str(&a.prefix),
                         .delimiter = si_strbuf_str(&a.delimiter), .after = after,
                         .max_keys = max_keys};
    int rc = s3_list_run(&q, s3_db_list_next, &cur, &res, &err);
    s3_db_cursor_end(&cur);
    s3_dbpool_put(s->pool, db);
    db = NULL;
    if (rc < 0) {
        s3_respond_error(r, "InternalError", "%s", err.text);
        goto out;
    }

    si_strbuf_t x;
    si_strbuf_init(&x, RESPONSE_XML_MAX);
    si_strbuf_puts(&x, XML_DECL "<ListBucketResult xmlns=\"" S3_XMLNS "\">");
    put_text(&x, "Name", r->bucket);
    put_key(&x, "Prefix", si_strbuf_str(&a.prefix), url);
    if (v2) {
        if (has_token)
            put_text(&x, "ContinuationToken", si_strbuf_str(&a.token));
        if (a.start_after.len)
            put_key(&x, "StartAfter", si_strbuf_str(&a.start_after), url);
        si_strbuf_printf(&x, "<KeyCount>%zu</KeyCount>", res.nentries + res.nprefixes);
    } else {
        put_key(&x, "Marker", si_strbuf_str(&a.marker), url);
    }
    si_strbuf_printf(&x, "<MaxKeys>%d</MaxKeys>", max_keys);
    if (a.delimiter.len)
        put_key(&x, "Delimiter", si_strbuf_str(&a.delimiter), url);
    if (url)
        si_strbuf_puts(&x, "<EncodingType>url</EncodingType>");
    si_strbuf_printf(&x, "<IsTruncated>%s</IsTruncated>", res.truncated ? "true" : "false");
    if (res.truncated && res.next) {
        if (v2) {
            char *t = s3_list_token_encode(res.next);
            if (t)
                put_text(&x, "NextContinuationToken", t);
            free(t);
        } else {
            put_key(&x, "NextMarker", res.next, url);
        }
    }
    for (size_t i = 0; i < res.nentries; i++) {
        const s3_list_entry_t *e = &res.entries[i];
        char date[32];
        s3_iso8601(e->mtime, date);
        si_strbuf_puts(&x, "<Contents>");
        put_key(&x, "Key", e->key, url);
        si_strbuf_printf(&x, "<LastModified>%s</LastModified>", date);
        put_text(&x, "ETag", e->etag);
        si_strbuf_printf(&x, "<Size>%" PRIu64 "</Size>", e->size);
        /* transparent recall: every object reads as STANDARD (add_class_headers) */
        put_text(&x, "StorageClass", e->storage_class[0] && !r->map.transparent
                                         ? e->storage_class : "STANDARD");
        si_strbuf_puts(&x, "</Contents>");
    }
    for (size_t i = 0; i < res.nprefixes; i++) {
        si_strbuf_puts(&x, "<CommonPrefixes>");
        put_key(&x, "Prefix", res.prefixes[i], url);
        si_strbuf_puts(&x, "</CommonPrefixes>");
    }
    si_strbuf_puts(&x, "</ListBucketResult>");
    s3_respond_xml(r, 200, &x);
out:
    if (db)
        s3_dbpool_put(s->pool, db);
    s3_list_result_free(&res);
    list_args_free(&a);
}

/* ---- GetObject, HeadObject --------------------------------------------------------- */

/* response-* query overrides (presigned downloads use them) */
static const struct {
    const char *query, *header;
} overrides[] = {
    {"response-content-type", "Content-Type"},
    {"response-content-disposition", "Content-Disposition"},
    {"response-content-encoding", "Content-Encoding"},
    {"response-content-language", "Content-Language"},
    {"response-cache-control", "Cache-Control"},
    {"response-expires", "Expires"},
};
#define N_OVERRIDES (sizeof(overrides) / sizeof(overrides[0]))

static bool is_overridden(const char *name, void *arg)
{
    const bool *given = arg;
    for (size_t i = 0; i < N_OVERRIDES; i++)
        if (given[i] && strcasecmp(name, overrides[i].header) == 0)
            return true;
    return false;
}

static void add_object_headers(s3_req_t *r, struct MHD_Response *resp, const s3_object_t *o)
{
    char date[32];
    s3_http_date(o->mtime, date);
    MHD_add_response_header(resp, "ETag", o->etag);
    MHD_add_response_header(resp, "Last-Modified", date);
    MHD_add_response_header(resp, "Accept-Ranges", "bytes");
    bool given[N_OVERRIDES] = {false};
    if (r->query[0]) {
        si_strbuf_t v;
        si_strbuf_init(&v, 1024);
        for (size_t i = 0; i < N_OVERRIDES; i++) {
            si_strbuf_reset(&v);
            if (s3_req_query(r, overrides[i].query, &v) == 1 && !v.failed &&
                !strpbrk(si_strbuf_str(&v), "\r\n")) {
                MHD_add_response_header(resp, overrides[i].header, si_strbuf_str(&v));
                given[i] = true;
            }
        }
        si_strbuf_free(&v);
    }
    /* what the object was stored with (its PUT's headers, x-amz-meta-*) */
    s3_meta_add_headers(resp, o->headers, is_overridden, given);
    if (!given[0] && !s3_meta_has(o->headers, "content-type"))
        MHD_add_response_header(resp, "Content-Type", "binary/octet-stream");
}

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls, (void)pos, (void)buf, (void)max;
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* Storage class and x-amz-restore of HEAD: an object in the cache reads
 * like a STANDARD object, unless a RestoreObject pinned it there (then
 * GLACIER, ongoing-request="false" and the pin's expiry, as S3 shows a
 * restored copy) or it was uploaded as GLACIER (then that, and
 * ongoing-request="false": readable now); one not cached shows its class,
 * and ongoing-request="true" while a stage request for it waits or runs.
 * Objects of transparent-recall buckets read as STANDARD: a GET recalls
 * them, and clients skip the GET of a GLACIER object that is not restored. */
static void add_class_headers(s3_req_t *r, struct MHD_Response *resp, const s3_object_t *o,
                              bool cached)
{
    const char *cls = o->asked_class[0] ? o->asked_class : o->storage_class;
    bool archived = cls[0] && strcmp(cls, "STANDARD") != 0;
    if (!archived || r->map.transparent)
        return;
    s3_restore_state_t st = {0};
    si_error_t err;
    s3_db_t *db = s3_dbpool_get(r->srv->pool);
    int rc = s3_db_restore_state(db, o->id, &st, &err);
    s3_dbpool_put(r->srv->pool, db);
    if (rc < 0)
        si_log(r->srv->log, SI_LOG_WARNING, "s3: HEAD %s/%s: %s", r->bucket, r->key, err.text);
    if (cached && st.pinned_until == 0 && !o->asked_class[0])
        return;
    MHD_add_response_header(resp, "x-amz-storage-class", cls);
    if (!cached && st.ongoing) {
        MHD_add_response_header(resp, "x-amz-restore", "ongoing-request=\"true\"");
    } else if (cached && st.pinned_until) {
        char date[32], value[96];
        s3_http_date(st.pinned_until, date);
        snprintf(value, sizeof(value), "ongoing-request=\"false\", expiry-date=\"%s\"", date);
        MHD_add_response_header(resp, "x-amz-restore", value);
    } else if (cached) {
        MHD_add_response_header(resp, "x-amz-restore", "ongoing-request=\"false\"");
    }
}

static s3_conditions_t conditions_of(const s3_req_t *r)
{
    return (s3_conditions_t){.if_match = s3_req_header(r, "If-Match"),
                             .if_none_match = s3_req_header(r, "If-None-Match"),
                             .if_modified_since = s3_req_header(r, "If-Modified-Since"),
                             .if_unmodified_since = s3_req_header(r, "If-Unmodified-Since")};
}

/* Transparent recall: queue a stage request (unless one runs) and wait,
 * bounded, for the object to reach the cache. 0 with *fd open, 1 when the
 * wait ran out (answered), -1 answered. */
static int recall_and_wait(s3_req_t *r, const s3_object_t *o, const char *cat_key, int *fd,
                           cache_place_t *place)
{
    s3_server_t *s = r->srv;
    si_error_t err;
    s3_restore_state_t st = {0};
    s3_db_t *db = s3_dbpool_get(s->pool);
    int rc = s3_db_restore_state(db, o->id, &st, &err);
    char uuid[REQUESTS_UUID_LEN + 1] = "";
    int64_t pin = s->conf.transparent_recall_max_wait > RECALL_PIN_MIN_S
                      ? s->conf.transparent_recall_max_wait : RECALL_PIN_MIN_S;
    if (rc == 0 && !st.ongoing)
        rc = s3_db_stage(db, &r->who, r->map.cat_bucket, cat_key, S3_JOB_RECALL, 0, pin, uuid,
                         &err);
    s3_dbpool_put(s->pool, db);
    if (rc < 0)
        si_log(s->log, SI_LOG_WARNING, "s3: transparent recall of %s/%s: %s", r->bucket,
               r->key, err.text);
    else if (s->staged && uuid[0])
        s->staged(s->staged_arg);
    double t0 = si_mono_now();
    for (;;) {
        /* the generation before the look: a commit after it ends the wait */
        uint64_t generation = cache_commit_generation(s->cache);
        if (cache_open_object(s->cache, o->id, fd, place, &err) == 0)
            return 0;
        if (errno != ENOENT) {
            s3_respond_error(r, "InternalError", "%s", err.text);
            return -1;
        }
        double left = s->conf.transparent_recall_max_wait - (si_mono_now() - t0);
        if (left <= 0)
            break;
        /* woken by each batch commit; bounded, in case the object comes
         * another way (a commit of another process) */
        cache_wait_commit(s->cache, generation, left < RECALL_WAIT_MAX_S ? (int)(left * 1000) + 1
                                                                         : RECALL_WAIT_MAX_S * 1000);
    }
    struct MHD_Response *resp = NULL;
    si_strbuf_t x;
    si_strbuf_init(&x, 4096);
    s3_error_xml(&x, "SlowDown", "the object is being recalled from tape; retry later", NULL,
                 r->id, NULL);
    size_t len = x.len;
    char *body = si_strbuf_take(&x);
    if (body && (resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE))) {
        MHD_add_response_header(resp, "Retry-After", RECALL_RETRY_AFTER_S);
        MHD_add_response_header(resp, "Content-Type", "application/xml");
        snprintf(r->note, sizeof(r->note), "SlowDown: recall still running after %d s",
                 s->conf.transparent_recall_max_wait);
        s3_respond(r, 503, resp);
    } else {
        free(body);
    }
    return 1;
}

/* The object r names, readable by r's credential: 0 with *o and *cat_key
 * (the caller frees it), or -1 answered (NoSuchBucket, NoSuchKey,
 * AccessDenied, InternalError). */
static int readable_object(s3_req_t *r, s3_object_t *o, char **cat_key_out)
{
    s3_server_t *s = r->srv;
    si_error_t err;
    char *cat_key = s3_req_catalog_key(r);
    if (!cat_key)
        return -1;
    /* the generation before the query: a commit during it makes the entry stale */
    uint64_t generation;
    bool exact = s3_dbpool_generation(s->pool, &generation);
    int rc = 1;
    if (!exact || !s3_objcache_get(s->objects, generation, r->map.cat_bucket, cat_key, &r->who,
                                   o)) {
        s3_db_t *db = s3_dbpool_get(s->pool);
        rc = s3_db_object(db, r->map.cat_bucket, cat_key, &r->who, o, &err);
        if (rc == 0 && !r->map.archive && bucket_exists(r, db) != 1)
            rc = -2; /* answered NoSuchBucket */
        s3_dbpool_put(s->pool, db);
        if (rc == 1 && exact)
            s3_objcache_put(s->objects, generation, r->map.cat_bucket, cat_key, &r->who, o);
    }
    if (rc == 1 && !o->readable) {
        s3_respond_error(r, "AccessDenied", "uid %u may not read %s/%s: no dataset holding it"
                         " is readable by it", (unsigned)r->who.uid, r->bucket, r->key);
        rc = -2;
    } else if (rc == 0) {
        s3_respond_error(r, "NoSuchKey", "The specified key does not exist.");
    } else if (rc == -1) {
        s3_respond_error(r, "InternalError", "%s", err.text);
    }
    if (rc != 1) {
        free(cat_key);
        return -1;
    }
    *cat_key_out = cat_key;
    return 0;
}

/* The bytes of o a GET or HEAD serves: a Range, or a part of a multipart
 * object (?partNumber, with the object's part count in *parts; a single
 * part object has part 1 only, the whole of it), or the whole object. 0, or
 * -1 answered (InvalidRange, InvalidPartNumber, InvalidRequest). */
static int bytes_to_serve(s3_req_t *r, const s3_object_t *o, uint64_t *start, uint64_t *length,
                          bool *partial, long *parts)
{
    *start = 0;
    *length = o->size;
    *parts = 0;
    const char *range_header = s3_req_header(r, "Range");
    if (!s3_req_has_query(r, "partNumber")) {
        s3_range_result_t range = s3_range_parse(range_header, o->size, start, length);
        if (range == S3_RANGE_UNSATISFIABLE) {
            s3_respond_error(r, "InvalidRange", "The requested range is not satisfiable (object"
                             " size %" PRIu64 ")", o->size);
            return -1;
        }
        *partial = range == S3_RANGE_OK;
        return 0;
    }
    if (range_header) {
        s3_respond_error(r, "InvalidRequest", "Cannot specify both Range header and partNumber"
                         " query parameter");
        return -1;
    }
    int number = s3_req_part_number(r);
    if (!number)
        return -1;
    *partial = true;
    int found = number == 1 ? 1 : 0;
    if (o->multipart) {
        si_error_t err;
        si_strbuf_t sizes;
        si_strbuf_init(&sizes, (size_t)S3_PARTS_MAX * 12);
        s3_db_t *db = s3_dbpool_get(r->srv->pool);
        int rc = s3_db_part_sizes(db, o->id, &sizes, &err);
        s3_dbpool_put(r->srv->pool, db);
        found = rc == 1 ? s3_part_range(si_strbuf_str(&sizes), number, start, length, parts) : -1;
        si_strbuf_free(&sizes);
        if (found < 0) {
            s3_respond_error(r, "InternalError", "%s", rc < 0 ? err.text : "bad part sizes");
            return -1;
        }
    }
    if (!found) {
        s3_respond_error(r, "InvalidPartNumber", "The requested partnumber is not satisfiable:"
                         " the object has %ld part%s", *parts ? *parts : 1, *parts > 1 ? "s" : "");
        return -1;
    }
    if (*length == 0)
        *partial = false; /* no byte range to name */
    return 0;
}

void s3_get_object_tagging(s3_req_t *r)
{
    s3_object_t o;
    char *cat_key;
    if (readable_object(r, &o, &cat_key) < 0)
        return;
    free(cat_key);
    si_strbuf_t x;
    si_strbuf_init(&x, 4096);
    si_strbuf_puts(&x, XML_DECL "<Tagging xmlns=\"" S3_XMLNS "\"><TagSet></TagSet></Tagging>");
    s3_respond_xml(r, 200, &x);
}

static void get_on_worker(s3_req_t *r) { s3_get_object(r, false); }

void s3_get_object(s3_req_t *r, bool head)
{
    s3_server_t *s = r->srv;
    if (!head && !r->on_worker && s3_req_header(r, S3_RDMA_TOKEN_HEADER)) {
        s3_offload(r, get_on_worker); /* the transfer waits for the fabric */
        return;
    }
    si_error_t err;
    s3_object_t o;
    int fd = -1;
    cache_place_t place = {0};
    char *cat_key;
    if (readable_object(r, &o, &cat_key) < 0)
        return;
    s3_conditions_t c = conditions_of(r);
    s3_cond_result_t cond = s3_conditions_eval(&c, o.etag, o.mtime);
    if (cond == S3_COND_FAILED) {
        s3_respond_error(r, "PreconditionFailed", "At least one of the pre-conditions you"
                         " specified did not hold");
        goto out;
    }
    if (cond == S3_COND_NOT_MODIFIED) {
        struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                    MHD_RESPMEM_PERSISTENT);
        if (resp) {
            char date[32];
            s3_http_date(o.mtime, date);
            MHD_add_response_header(resp, "ETag", o.etag);
            MHD_add_response_header(resp, "Last-Modified", date);
            s3_respond(r, 304, resp);
        }
        goto out;
    }
    uint64_t start, length;
    long parts;
    bool partial;
    if (bytes_to_serve(r, &o, &start, &length, &partial, &parts) < 0)
        goto out;

    struct MHD_Response *resp = NULL;
    if (head) {
        if (!(resp = MHD_create_response_from_callback(length, 4096, no_body, NULL, NULL)))
            goto out;
        add_class_headers(r, resp, &o, o.cached);
        s3_rdma_head(r, resp);
    } else {
        /* the catalog query said whether it is cached, and where: no second lookup */
        place = o.cached_at;
        if (!o.cached || cache_open_cached(s->cache, o.id, &o.cached_at, &fd, &err) < 0) {
            if (o.cached && errno != ENOENT) {
                s3_respond_error(r, "InternalError", "%s", err.text);
                goto out;
            }
            if (!r->map.transparent) {
                s3_respond_error(r, "InvalidObjectState", "The operation is not valid for the"
                                 " object's storage class: %s/%s is on tape and not in the"
                                 " cache; restore it first (RestoreObject)", r->bucket, r->key);
                goto out;
            }
            if (!r->on_worker) {
                /* the wait for the recall, on a worker; the GET runs again there */
                s3_offload(r, get_on_worker);
                goto out;
            }
            if (recall_and_wait(r, &o, cat_key, &fd, &place) != 0)
                goto out;
        }
        if (place.size != o.size) {
            s3_respond_error(r, "InternalError", "the cached copy of %s/%s is %" PRIu64
                             " bytes, the catalog says %" PRIu64, r->bucket, r->key,
                             place.size, o.size);
            goto out;
        }
        if (!(resp = s3_rdma_get(r, fd, &place, start, length))) {
            resp = MHD_create_response_from_fd_at_offset64(length, fd, place.offset + start);
            if (!resp) {
                s3_respond_error(r, "InternalError", "cannot create the response");
                goto out;
            }
            fd = -1; /* the response closes it */
            s3_req_cork(r);
        }
    }
    if (partial) {
        char cr[96];
        snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, start,
                 start + length - 1, o.size);
        MHD_add_response_header(resp, "Content-Range", cr);
    }
    if (parts) {
        char n[24];
        snprintf(n, sizeof(n), "%ld", parts);
        MHD_add_response_header(resp, "x-amz-mp-parts-count", n);
    }
    add_object_headers(r, resp, &o);
    s3_respond(r, partial ? 206 : 200, resp);
out:
    if (fd >= 0)
        close(fd);
    free(cat_key);
}

/* ---- RestoreObject ---------------------------------------------------------------- */

static void restore_end(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    si_error_t err;
    s3_restore_request_t rr;
    s3_object_t o;
    if (s3_parse_restore(si_strbuf_str(&r->xml), r->xml.len, &rr, &err) < 0) {
        s3_respond_error(r, "MalformedXML", "RestoreRequest: %s", err.text);
        return;
    }
    int64_t days = rr.days > 0 ? rr.days : 1;
    int64_t lifetime = days * 86400;
    /* a day is the least S3 can ask for: under a shorter bound it gets the bound */
    if (s->pin_lifetime_max > 0 && lifetime > s->pin_lifetime_max && days == 1)
        lifetime = s->pin_lifetime_max;
    if (s->pin_lifetime_max > 0 && lifetime > s->pin_lifetime_max) {
        s3_respond_error(r, "InvalidArgument", "Days %" PRId64 " is more than this server keeps"
                         " a restored copy: at most %" PRId64 " days"
                         " (stageind.pin_lifetime_max = %" PRId64 " s)", days,
                         s->pin_lifetime_max / 86400, s->pin_lifetime_max);
        return;
    }
    char *cat_key = s3_req_catalog_key(r);
    if (!cat_key)
        return;
    s3_db_t *db = s3_dbpool_get(s->pool);
    int rc = s3_db_object(db, r->map.cat_bucket, cat_key, &r->who, &o, &err);
    if (rc == 0 && !r->map.archive && bucket_exists(r, db) != 1) {
        s3_dbpool_put(s->pool, db);
        free(cat_key);
        return; /* answered NoSuchBucket */
    }
    const char *code = NULL;
    char message[600] = "";
    unsigned status = 0;
    s3_restore_state_t st = {0};
    if (rc < 0) {
        code = "InternalError";
    } else if (rc == 0) {
        code = "NoSuchKey";
    } else if (!o.readable) {
        code = "AccessDenied";
        snprintf(message, sizeof(message), "uid %u may not read %s/%s", (unsigned)r->who.uid,
                 r->bucket, r->key);
    } else if (strcmp(o.storage_class, "GLACIER") != 0 &&
               strcmp(o.storage_class, "DEEP_ARCHIVE") != 0) {
        code = "InvalidObjectState";
        snprintf(message, sizeof(message), "Restore is not allowed for the object's current"
                 " storage class (%s)", o.storage_class);
    } else if (s3_db_restore_state(db, o.id, &st, &err) < 0) {
        code = "InternalError";
    } else {
        cache_entry_t entry;
        int cached = cache_stat(s->cache, o.id, &entry, &err);
        if (cached < 0) {
            code = "InternalError";
        } else if (!cached && st.ongoing) {
            code = "RestoreAlreadyInProgress";
        } else {
            /* cached: the request pins it for Days (200); otherwise it recalls it (202) */
            char uuid[REQUESTS_UUID_LEN + 1];
            if (s3_db_stage(db, &r->who, r->map.cat_bucket, cat_key, S3_JOB_RESTORE,
                            s3_tier_priority(rr.tier), lifetime, uuid, &err) < 0) {
                code = errno == EACCES ? "AccessDenied" : "InternalError";
            } else {
                status = cached ? 200 : 202;
                if (s->staged)
                    s->staged(s->staged_arg);
                snprintf(r->note + strlen(r->note), sizeof(r->note) - strlen(r->note),
                         " request=%s tier=%s days=%" PRId64, uuid, s3_tier_name(rr.tier), days);
            }
        }
    }
    if (code && !message[0] && rc != 0)
        snprintf(message, sizeof(message), "%s", err.text);
    s3_dbpool_put(s->pool, db);
    free(cat_key);
    if (code)
        s3_respond_error(r, code, "%s", message[0] ? message : s3_error_message(code));
    else
        s3_respond_empty(r, status);
}

void s3_restore_object(s3_req_t *r)
{
    s3_expect_xml_body(r, restore_end);
}
