/* Inside the S3 server: the server context, one request, and the helpers
 * the operation handlers (read.c, write.c) answer with. */
#ifndef STAGEIN_S3_INTERNAL_H
#define STAGEIN_S3_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <microhttpd.h>

#include "common/s3secrets.h"
#include "common/sigv4.h"
#include "common/strbuf.h"
#include "daemon/s3/db.h"
#include "daemon/s3/s3.h"

typedef struct s3_req s3_req_t;

struct s3_server {
    s3_conf_t conf;
    si_secrets_t *secrets;
    si_sigv4_verifier_conf_t verifier;
    s3_dbpool_t *pool;
    cache_t *cache;
    push_t *push;
    char push_bucket[SI_BUCKET_MAX + 1];
    char port_file[PATH_MAX];
    si_log_t *log;
    struct MHD_Daemon *mhd;
    uint16_t port;
    int64_t started;
    atomic_uint_fast64_t next_id;
    pthread_mutex_t buckets_mu;      /* guards created */
    char (*created)[SI_BUCKET_MAX + 1]; /* archive buckets made by CreateBucket */
    size_t ncreated;
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
    bool is_public;
    bool transparent;
} s3_bucket_map_t;

struct s3_req {
    s3_server_t *srv;
    struct MHD_Connection *conn;
    char *uri;                       /* raw, as received */
    const char *path;                /* raw path (into path_buf) */
    const char *query;               /* raw query, "" when none */
    char *path_buf;
    char method[16];
    bool started;
    bool responded;
    unsigned status;
    struct timespec t0;
    char id[20];

    si_http_header_t *headers;
    size_t nheaders;

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
    char note[160];
};

/* ---- answering (server.c) ------------------------------------------------ */

const char *s3_req_header(const s3_req_t *r, const char *name);
/* Decoded query parameter: 1 and value (may be NULL) when present, 0 when not. */
int s3_req_query(const s3_req_t *r, const char *name, si_strbuf_t *value);
bool s3_req_has_query(const s3_req_t *r, const char *name);
/* The catalog key of r->key in r->map (malloc'd), or NULL with an answer given. */
char *s3_req_catalog_key(s3_req_t *r);

/* S3 XML error; message NULL: the code's standard message. */
void s3_respond_error(s3_req_t *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Takes the response (headers added by the caller before). */
void s3_respond(s3_req_t *r, unsigned status, struct MHD_Response *resp);
void s3_respond_xml(s3_req_t *r, unsigned status, si_strbuf_t *xml);
void s3_respond_empty(s3_req_t *r, unsigned status);
void s3_add_common_headers(s3_req_t *r, struct MHD_Response *resp);

/* A body gathered whole for XML requests, at most S3_XML_BODY_MAX bytes. */
void s3_expect_xml_body(s3_req_t *r, void (*end)(s3_req_t *r));

bool s3_is_archive_bucket(s3_server_t *s, const char *bucket);
void s3_add_created_bucket(s3_server_t *s, const char *bucket);
void s3_remove_created_bucket(s3_server_t *s, const char *bucket);

/* ---- operations ------------------------------------------------------------ */

void s3_list_buckets(s3_req_t *r);
void s3_head_bucket(s3_req_t *r);
void s3_get_bucket_location(s3_req_t *r);
void s3_list_objects(s3_req_t *r, bool v2);
void s3_get_object(s3_req_t *r, bool head);
void s3_restore_object(s3_req_t *r);

/* write.c */
void s3_put_object(s3_req_t *r);
void s3_create_bucket(s3_req_t *r);
void s3_delete_bucket(s3_req_t *r);

#endif
