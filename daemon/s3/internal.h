/* Inside the S3 server: the server context, one request, the helpers the
 * operations answer with and the operations. The files form layers: the
 * dispatcher (server.c) calls the operations (read.c, write.c, copy.c,
 * multipart.c), which call the helpers (object.c, upload.c, rdma.c, meta.c,
 * bucket.c, request.c, offload.c, and db.c, list.c, proto.c, quota.c,
 * conf.c); a helper calls only the helpers below it, never an operation. */
#ifndef STAGEIN_S3_INTERNAL_H
#define STAGEIN_S3_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <microhttpd.h>

#include "common/aws/s3secrets.h"
#include "common/aws/sigv4.h"
#include "common/strbuf.h"
#include "daemon/http/listener.h"
#include "daemon/http/workers.h"
#include "daemon/push/push.h"
#include "common/groups.h"
#include "daemon/s3/db.h"
#include "daemon/s3/objcache.h"
#include "daemon/s3/quota.h"
#include "daemon/s3/s3.h"

typedef struct s3_req s3_req_t;

/* An archive bucket made by CreateBucket, and who made it (its owner). */
typedef struct {
    char name[SI_BUCKET_MAX + 1];
    uid_t owner;
} s3_created_bucket_t;

#define S3_XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"
#define XML_DECL "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
#define RESPONSE_XML_MAX (64u << 20)

struct s3_server {
    s3_conf_t conf;
    si_groups_t *groups;             /* the credentials' uids' groups (NSS), cached */
    s3_quota_t *quota;               /* per-user bounds on arriving uploads */
    int64_t pin_lifetime_max;        /* seconds; 0: no bound */
    char sitename[65];               /* Tape REST API discovery; control_port 0: none */
    int control_port;
    struct token_gate *tokens;       /* bearer-token reads; NULL: none */
    si_secrets_t *secrets;
    si_session_keys_t *sessions;     /* borrowed; NULL: no session credentials */
    si_sigv4_verifier_conf_t verifier;
    si_sigv4_key_cache_t *keys;      /* the verifier's derived keys */
    char *tls_cert, *tls_key;        /* PEM text while TLS is served; NULL: plain HTTP */
    size_t tls_key_len;
    s3_dbpool_t *pool;
    s3_objcache_t *objects;          /* GET/HEAD lookups at a catalog generation */
    cache_t *cache;
    void (*staged)(void *arg);   /* a stage request was made: wakes the recall service */
    void *staged_arg;
    push_t *push;
    char push_bucket[SI_BUCKET_MAX + 1];
    char port_file[PATH_MAX];
    char multipart_dir[PATH_MAX];    /* <state_dir or shared_dir>/s3-multipart; "": none */
    si_log_t *log;
    /* the listener: a few event threads serving every connection, the
     * slow-header and slow-body guards (daemon/http/listener.h) */
    http_listener_t *http;
    unsigned io_threads;             /* the listener's event threads */
    /* what may wait runs here, its connection suspended (s3_offload) */
    http_workers_t *workers;
    pthread_mutex_t suspend_mu;      /* guards suspended, in_calls, stopping */
    pthread_cond_t suspend_cv;
    unsigned suspended;              /* connections suspended: the listener stops after them */
    unsigned in_calls;               /* callbacks that may suspend, running */
    unsigned answering;              /* answers of resumed requests not yet sent */
    bool stopping;                   /* no callback may suspend from now on */
    uint16_t port;
    int64_t started;
    atomic_uint_fast64_t next_id;
    pthread_mutex_t buckets_mu;      /* guards created */
    s3_created_bucket_t *created;    /* archive buckets made by CreateBucket */
    size_t ncreated, created_cap;
    rdma_server_t *rdma;             /* the RDMA data path (rdma.c); NULL: off */
};

/* What a request body is for: handlers that take a body set these. */
typedef struct {
    /* each piece of the body as it arrives; returns -1 after answering is
     * decided (the rest of the body is then dropped) */
    int (*data)(s3_req_t *r, const char *data, size_t len);
    /* after the last byte: answers */
    void (*end)(s3_req_t *r);
    /* always, last; completed false when the client went away */
    void (*cleanup)(s3_req_t *r, bool completed);
} s3_body_ops_t;

typedef struct {
    const char *cat_bucket;          /* catalog bucket holding its objects */
    char prefix[SI_BUCKET_MAX + 2];  /* catalog key prefix ("<bucket>/" for archive buckets) */
    bool archive;
    bool shared;                     /* a configured archive bucket: every user writes */
    bool is_public;
    bool transparent;
} s3_bucket_map_t;

/* One parameter of the query, decoded. */
typedef struct {
    size_t name, value;              /* offsets into s3_req_t.query_text */
    size_t value_len;
    bool value_ok;                   /* its value is valid percent-encoding */
} s3_query_param_t;

/* headers a request usually has at most (more: one allocation) */
#define S3_HEADERS_INLINE 24

struct s3_req {
    s3_server_t *srv;
    struct MHD_Connection *conn;
    char *uri;                       /* raw, as received */
    const char *path;                /* raw path (into path_buf) */
    const char *query;               /* raw query, "" when none */
    /* the query decoded once, for s3_req_query; none when a name in it is
     * not valid percent-encoding */
    s3_query_param_t *params;
    size_t nparams;
    si_strbuf_t query_text;          /* the names and values, each NUL-terminated */
    char *path_buf;
    char method[16];
    bool started;
    bool dispatched;                 /* dispatch ran (at once, or after an empty body) */
    bool responded;
    unsigned status;
    double t0;                       /* si_mono_now when the request began */
    char id[20];

    si_http_header_t *headers;       /* header_room, or malloc'd for many */
    size_t nheaders;
    si_http_header_t header_room[S3_HEADERS_INLINE];

    bool anonymous;
    si_sigv4_auth_t auth;
    s3_who_t who;

    char bucket[SI_BUCKET_MAX + 1];  /* "" for the service */
    char *key;                       /* decoded; NULL for bucket/service requests */
    s3_bucket_map_t map;

    const s3_body_ops_t *body;
    void *body_state;
    si_strbuf_t xml;                 /* small bodies (XML), bounded */
    void (*xml_end)(s3_req_t *r);    /* answers once the XML body is in */
    uint64_t xml_dropped;            /* bytes past S3_XML_BODY_MAX, read and dropped */
    char note[160];
    char rdma_declined[160];         /* why an x-amz-rdma-token was answered 501 */
    bool rdma_replied;               /* x-amz-rdma-reply: 200 is on the answer */
    int corked_fd;                   /* s3_req_cork's socket, uncorked at the end; 0: none */

    /* off the event threads (s3_offload): while suspended, an answer is
     * kept in answer and queued by the event thread once resumed */
    http_work_t work;                /* its job on a worker */
    void (*deferred)(s3_req_t *r);   /* what the worker runs */
    bool suspended;                  /* its connection waits on a worker */
    bool on_worker;                  /* deferred is running on a worker */
    bool *held;                      /* the worker's: deferred handed r on (s3_hold) */
    bool offloaded_in_call;          /* the event thread's: this call suspended r */
    bool headers_phase;              /* dispatched before the body: resumed there */
    bool ended;                      /* the body's end was handed to a worker */
    struct MHD_Response *answer;
    unsigned answer_status;
    bool answer_counted;             /* in srv->answering until it completes */
};

/* Holds back the connection's partial segments until the request ends
 * (on_completed uncorks): a file response's headers leave in the body's
 * first segment, one wake-up of the client instead of two (nginx's
 * tcp_nopush). */
void s3_req_cork(s3_req_t *r);
void s3_req_uncork(s3_req_t *r);

/* ---- off the event threads (offload.c) -------------------------------------- */

/* Runs fn(r) on a worker thread, r's connection suspended meanwhile (an
 * event thread serves other connections); the connection resumes when fn
 * returns, unless fn called s3_hold. On a worker already: fn(r) at once.
 * Called from a libmicrohttpd callback of r (or a worker). */
void s3_offload(s3_req_t *r, void (*fn)(s3_req_t *r));
/* Inside an offloaded fn: the answer comes later, from s3_continue; once
 * r is handed on (to whatever calls s3_continue), fn must not touch it.
 * s3_release undoes it while r is still fn's (the hand-off failed). */
void s3_hold(s3_req_t *r);
void s3_release(s3_req_t *r);
/* From any thread, for a held r: runs fn(r) on a worker, then resumes. */
void s3_continue(s3_req_t *r, void (*fn)(s3_req_t *r));

/* ---- the request and its answers (request.c) ------------------------------ */

/* Decodes the query into r->params: 0, or -1 out of memory. */
int s3_req_parse_query(s3_req_t *r);
void s3_req_free(s3_req_t *r);
const char *s3_req_header(const s3_req_t *r, const char *name);
/* Decoded query parameter: 1 and value (may be NULL) when present, 0 when not. */
int s3_req_query(const s3_req_t *r, const char *name, si_strbuf_t *value);
bool s3_req_has_query(const s3_req_t *r, const char *name);
/* partNumber of the query, 1..S3_PARTS_MAX: the number, or 0 answered
 * (InvalidArgument). */
int s3_req_part_number(s3_req_t *r);
/* The catalog key of r->key in r->map (malloc'd), or NULL with an answer given. */
char *s3_req_catalog_key(s3_req_t *r);

/* S3 XML error; message NULL: the code's standard message. */
void s3_respond_error(s3_req_t *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same with the message as text; region: a request signed for another
 * region, whose answer names this server's (<Region>, x-amz-bucket-region). */
void s3_respond_error_in(s3_req_t *r, const char *code, const char *message,
                         const char *region);
/* Takes the response (headers added by the caller before); adds the
 * headers every answer carries, x-amz-rdma-reply: 501 included where the
 * request asked for RDMA and no 200 went on the answer. */
void s3_respond(s3_req_t *r, unsigned status, struct MHD_Response *resp);
void s3_respond_xml(s3_req_t *r, unsigned status, si_strbuf_t *xml);
void s3_respond_empty(s3_req_t *r, unsigned status);
/* 500 InternalError saying what failed; the detail (which may name server
 * paths) goes to the log only. */
void s3_respond_internal(s3_req_t *r, const char *what, const char *detail);
void s3_add_common_headers(s3_req_t *r, struct MHD_Response *resp);

/* A body gathered whole for XML requests, at most S3_XML_BODY_MAX bytes. */
void s3_expect_xml_body(s3_req_t *r, void (*end)(s3_req_t *r));

/* ---- archive buckets (bucket.c) --------------------------------------------- */

bool s3_is_archive_bucket(s3_server_t *s, const char *bucket);
/* The owner of an archive bucket made by CreateBucket: true and *owner set;
 * false for a configured (shared) one or no archive bucket. */
bool s3_created_bucket_owner(s3_server_t *s, const char *bucket, uid_t *owner);
/* Whether r may write to its bucket (an archive bucket, configured or its
 * own; root writes to every one); false answered: NoSuchBucket for a bucket
 * that does not exist, AccessDenied for a read-only one or another user's. */
bool s3_writable_bucket(s3_req_t *r);
void s3_add_created_bucket(s3_server_t *s, const char *bucket, uid_t owner);
void s3_remove_created_bucket(s3_server_t *s, const char *bucket);

/* ---- metadata (meta.c) ------------------------------------------------------ */

/* The headers r asks to store ("name: value" lines into headers) and the
 * archive storage class it asks for ("" none): 0, or -1 answered
 * (MetadataTooLarge, InvalidStorageClass). */
int s3_meta_from_request(s3_req_t *r, si_strbuf_t *headers,
                         char storage_class[S3_STORAGE_CLASS_MAX]);
/* Adds the stored headers to resp, but those overridden(name) says not to. */
void s3_meta_add_headers(struct MHD_Response *resp, const char *headers,
                         bool (*overridden)(const char *name, void *arg), void *arg);
/* Whether headers holds one of that name. */
bool s3_meta_has(const char *headers, const char *name);

/* ---- the RDMA data path of GET, PUT and UploadPart (rdma.c, doc/rdma.md) ----- */

#define S3_RDMA_TOKEN_HEADER "x-amz-rdma-token"

int s3_rdma_open(s3_server_t *s, const rdma_config_t *cfg, si_error_t *err);
void s3_rdma_close(s3_server_t *s);
/* HEAD: x-amz-rdma-provider names the server's provider when RDMA is on. */
void s3_rdma_head(s3_req_t *r, struct MHD_Response *resp);
/* GET of bytes [start, start+length) of the object at place in fd's file:
 * when the request carries an x-amz-rdma-token and the bytes reached the
 * client's memory, an empty
 * response saying so (fd stays the caller's); else NULL (the reason kept
 * in r->rdma_declined for s3_respond), and the caller sends the body. */
struct MHD_Response *s3_rdma_get(s3_req_t *r, int fd, const cache_place_t *place,
                                 uint64_t start, uint64_t length);
/* PUT and UploadPart: a token and no body (body_length 0) mean the body is
 * the token's len bytes in the client's memory. 1: *token to read with
 * s3_rdma_put_receive; 0: an ordinary body (a token beside a body is
 * declined, the body used); -1: answered 501 NotImplemented, nothing done,
 * the client sends the body over HTTP. */
int s3_rdma_put_accept(s3_req_t *r, uint64_t body_length, si_rdma_token_t *token);
/* Reads the token's bytes into sink, in order. */
int s3_rdma_put_receive(s3_req_t *r, const si_rdma_token_t *token, rdma_sink_fn sink,
                        void *arg, si_error_t *err);
/* x-amz-rdma-reply: 200 and the bytes moved, on an answer. */
void s3_rdma_replied(s3_req_t *r, struct MHD_Response *resp, uint64_t moved);
/* Answers 501 NotImplemented for an RDMA body that did not come. */
void s3_rdma_put_failed(s3_req_t *r, const char *why);

/* ---- multipart uploads on disk (upload.c) ---------------------------------- */

/* One directory per upload under <state_dir>/s3-multipart/<upload id>/:
 * S3_MP_META_FILE (owner, time, bucket and key), S3_MP_HEADERS_FILE and the
 * parts "<5-digit number>-<hex md5>", each renamed into place whole, so a
 * restart keeps them. */
#define S3_UPLOAD_ID_LEN 32
#define S3_PART_MIN_SIZE (5u << 20)
#define S3_PART_MAX_SIZE (5ull << 30)
#define S3_MP_META_FILE "upload"
/* what the object will keep: "<storage class>\n<headers>" (s3_meta_t) */
#define S3_MP_HEADERS_FILE "headers"

typedef struct {
    char id[S3_UPLOAD_ID_LEN + 1];
    char dir[PATH_MAX];
    char bucket[SI_BUCKET_MAX + 1];
    char *key;
    uid_t uid;
    gid_t gid;
    int64_t initiated;
} s3_mp_upload_t;

typedef struct {
    int number;
    char md5[33];
    uint64_t size;
    int64_t mtime;
} s3_mp_part_t;

/* Whether id is an upload id (32 lowercase hex digits). */
bool s3_mp_valid_id(const char *id);
/* Reads the upload id of multipart_dir into u (s3_mp_upload_free): 0 or -1. */
int s3_mp_read(const char *multipart_dir, const char *id, s3_mp_upload_t *u);
/* The upload named by ?uploadId for r's bucket and key, owned by r's
 * credential (or root); -1 answered (NoSuchUpload) when not. */
int s3_mp_find(s3_req_t *r, s3_mp_upload_t *out);
/* The upload and part number an UploadPart(Copy) names, in a writable
 * bucket: the number (u to free), or 0 answered. */
int s3_mp_part_target(s3_req_t *r, s3_mp_upload_t *u);
void s3_mp_upload_free(s3_mp_upload_t *u);
/* Whether the upload still exists (not aborted or completed). */
bool s3_mp_exists(const s3_mp_upload_t *u);
/* The path of a part's file once complete (md5: 32 hex digits). */
void s3_mp_part_path(const s3_mp_upload_t *u, int number, const char *md5, char *out,
                     size_t size);
/* Removes the other files of part number (a part uploaded again). */
void s3_mp_drop_other_parts(const s3_mp_upload_t *u, int number, const char *keep);
/* Creates the temporary file (its path into tmp) of a part of size bytes
 * arriving for u: the fd, or -1 answered (EntityTooLarge over
 * S3_PART_MAX_SIZE, NoSuchUpload when the upload is gone). */
int s3_mp_part_create(s3_req_t *r, const s3_mp_upload_t *u, uint64_t size, char *tmp,
                      size_t tmp_size);
/* Makes the part file tmp (open as fd, closed here) part number of the
 * upload in dir, under its MD5: 0, or -1 answered (404 NoSuchUpload when
 * the upload was aborted or completed meanwhile). */
int s3_mp_store_part(s3_req_t *r, const char *dir, const char *tmp, int fd, int number,
                     const char *md5_hex);
/* The parts of u by number (one per number: the newest), malloc'd. */
int s3_mp_list_parts(const s3_mp_upload_t *u, s3_mp_part_t **out, size_t *count);
/* The upload's headers file into out (missing: none): 0 or -1. */
int s3_mp_read_headers(const s3_mp_upload_t *u, si_strbuf_t *out);
/* Removes the upload: its upload file first (a part arriving meanwhile sees
 * it gone), then its parts and directory. */
void s3_mp_remove(const s3_mp_upload_t *u);

/* ---- objects of archive buckets written and removed (object.c) ------------- */

/* The S3 error code for an errno of push_upload_begin. */
const char *s3_push_error_code(int e);
/* push_upload_begin; an existing object of the key is replaced, as S3
 * does: deleted first (a reader in between sees no object), unless
 * no_replace (If-None-Match: *), when EEXIST is the answer. */
int s3_begin_replacing(s3_req_t *r, const char *cat_key, const push_file_t *f,
                       bool no_replace, push_upload_t **out, si_error_t *err);
/* The preconditions of a write of cat_key (PutObject, CompleteMultipartUpload):
 * If-Match (the object exists with that ETag: else 404 NoSuchKey or 412) and
 * If-None-Match: * (*no_replace: the write must not replace an object).
 * 0, or -1 answered. */
int s3_put_conditions(s3_req_t *r, const char *cat_key, bool *no_replace);
/* Streams the files fds[i] (sizes[i] bytes each from offsets[i], or from
 * their start when offsets is NULL, in order) into a new
 * object r->bucket/r->key of an archive bucket through the push path and
 * records etag_hex as its ETag (NULL: the MD5 of the bytes) and meta (may
 * be NULL) with it; no_replace: an existing object is not replaced (412).
 * The ETag recorded goes to etag_out (33 + 6 bytes). 0, or -1 answered. */
int s3_push_from_files(s3_req_t *r, const int *fds, const uint64_t *offsets,
                       const uint64_t *sizes, size_t n, const char *etag_hex,
                       const s3_meta_t *meta, bool no_replace, char *etag_out, size_t etag_size);
/* Deletes cat_key of an archive bucket: 0 (also when there was none), or -1
 * with *code (and err) saying why. Waits while the object is being written
 * to tape (its aggregate then commits first). */
int s3_delete_one(s3_req_t *r, const char *cat_key, const char **code, si_error_t *err);

/* ---- operations (called by the dispatcher, server.c) ----------------------- */

/* read.c */
void s3_list_buckets(s3_req_t *r);
void s3_head_bucket(s3_req_t *r);
void s3_get_bucket_location(s3_req_t *r);
/* GetBucketVersioning: buckets here are unversioned (an empty configuration). */
void s3_get_bucket_versioning(s3_req_t *r);
/* GetObjectTagging: objects here carry no tags (an empty TagSet). */
void s3_get_object_tagging(s3_req_t *r);
void s3_list_objects(s3_req_t *r, bool v2);
void s3_get_object(s3_req_t *r, bool head);
void s3_restore_object(s3_req_t *r);

/* write.c */
void s3_put_object(s3_req_t *r);
void s3_upload_part(s3_req_t *r);
void s3_create_bucket(s3_req_t *r);
void s3_delete_bucket(s3_req_t *r);
void s3_delete_object(s3_req_t *r);
void s3_delete_objects(s3_req_t *r);

/* copy.c */
void s3_copy_object(s3_req_t *r);
void s3_upload_part_copy(s3_req_t *r);

/* multipart.c */
void s3_create_multipart(s3_req_t *r);
void s3_complete_multipart(s3_req_t *r);
void s3_abort_multipart(s3_req_t *r);
void s3_list_parts(s3_req_t *r);
void s3_list_multipart_uploads(s3_req_t *r);

#endif
