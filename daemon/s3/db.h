/* The S3 server's catalog access: a pool of connections (one per worker at
 * a time; a catalog connection serves one thread at a time), each with its hot
 * statements prepared once. Reads only, except stage requests (restores,
 * transparent recalls) and archive bucket creation. */
#ifndef STAGEIN_S3_DB_H
#define STAGEIN_S3_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "catalog/catalog.h"
#include "common/checksum.h"
#include "common/error.h"
#include "common/text.h"
#include "daemon/cache/cache.h"
#include "daemon/s3/list.h"
#include "daemon/s3/proto.h"

typedef struct s3_db s3_db_t;
typedef struct s3_dbpool s3_dbpool_t;

s3_dbpool_t *s3_dbpool_open(const catalog_open_opts_t *catalog, size_t connections, si_error_t *err);
/* Waits for a free connection. */
s3_db_t *s3_dbpool_get(s3_dbpool_t *p);
void s3_dbpool_put(s3_dbpool_t *p, s3_db_t *db);
void s3_dbpool_close(s3_dbpool_t *p);
/* The catalog's change generation (db_generation): false when it keeps none. */
bool s3_dbpool_generation(s3_dbpool_t *p, uint64_t *out);

/* Who asks: the credential's uid/gid and the uid's supplementary groups
 * (NSS); all: root, or a public bucket. */
#define S3_WHO_GROUPS_MAX 64
typedef struct {
    uid_t uid;
    gid_t gid;
    bool all;
    size_t ngroups;
    gid_t groups[S3_WHO_GROUPS_MAX];
} s3_who_t;

/* What an object keeps beside its bytes (catalog table object_meta). */
#define S3_META_HEADERS_MAX 8192      /* bytes of headers text */
#define S3_STORAGE_CLASS_MAX 24

typedef struct {
    const char *headers;              /* "name: value\n" lines; NULL or "": none */
    const char *storage_class;        /* asked for at upload; NULL: none */
    const char *part_sizes;           /* multipart: "n1,n2,..."; NULL: one part */
} s3_meta_t;

typedef struct {
    int64_t id;
    uint64_t size;
    int64_t mtime;
    char etag[S3_ETAG_MAX];           /* quoted */
    char storage_class[16];
    bool readable;
    bool cached;                      /* it has a row in the cache table ... */
    cache_place_t cached_at;          /* ... saying where its bytes are */
    char asked_class[S3_STORAGE_CLASS_MAX]; /* s3_meta_t.storage_class, "" none */
    bool multipart;                   /* part sizes are recorded */
    bool pushed;                      /* written through push (S3 PUT) ... */
    uid_t writer;                     /* ... by this user */
    /* last: s3_objcache keeps the fields above and only the text of this */
    char headers[S3_META_HEADERS_MAX]; /* stored headers (s3_meta_t.headers), "" none */
} s3_object_t;

/* 1 and *out when the object exists (readable says whether who may read
 * it; cached whether the cache holds it, read in the same transaction), 0
 * when it does not (or its upload is still arriving), -1 on error. */
int s3_db_object(s3_db_t *db, const char *bucket, const char *key, const s3_who_t *who,
                 s3_object_t *out, si_error_t *err);
/* 1 when some object lives in bucket, 0 when none, -1 on error. */
int s3_db_bucket_has_objects(s3_db_t *db, const char *bucket, si_error_t *err);
/* Distinct buckets of the catalog's objects, ascending; fn returns non-zero
 * to stop. */
int s3_db_buckets(s3_db_t *db, int (*fn)(const char *bucket, void *arg), void *arg,
                  si_error_t *err);

/* A cursor over one bucket for s3_list_run: keys start with key_prefix in
 * the catalog (archive buckets: "<bucket>/"), which is taken off the keys
 * it returns; only objects who may read. */
typedef struct {
    s3_db_t *db;
    const char *bucket;
    const char *key_prefix;
    s3_who_t who;
    /* internal: the running statement (NULL: none) and where it stands */
    struct db_stmt *stmt;
    unsigned rows;                    /* rows the running statement returned */
    char last[SI_KEY_MAX + 1];
} s3_db_cursor_t;

int s3_db_list_next(void *cursor, const char *from, bool inclusive, s3_list_entry_t *out,
                    si_error_t *err);
/* Resets the cursor's statement (call after s3_list_run). */
void s3_db_cursor_end(s3_db_cursor_t *c);

/* The job of stage requests made through S3: a RestoreObject (its pin is
 * the "restored copy" HEAD reports) or a transparent recall. */
#define S3_JOB_RESTORE "s3:restore"
#define S3_JOB_RECALL "s3:recall"

typedef struct {
    bool ongoing;                     /* a stage request item is waiting or running */
    int64_t pinned_until;             /* latest expiry of a RestoreObject's pin; 0: none */
} s3_restore_state_t;

int s3_db_restore_state(s3_db_t *db, int64_t object_id, s3_restore_state_t *out,
                        si_error_t *err);

/* A stage request for one object ("bucket/key") under job (S3_JOB_*).
 * uuid receives the request's id (37 bytes). */
int s3_db_stage(s3_db_t *db, const s3_who_t *who, const char *bucket, const char *key,
                const char *job, int priority, int64_t pin_lifetime, char *uuid,
                si_error_t *err);

/* Archive buckets made by CreateBucket: datasets marked as such. */
#define S3_ARCHIVE_BUCKET_MARK "S3 archive bucket"
#define S3_SHARED_BUCKET_MARK "S3 shared archive bucket (s3.archive_buckets)"
int s3_db_archive_buckets(s3_db_t *db, int (*fn)(const char *name, uid_t owner, void *arg),
                          void *arg, si_error_t *err);
/* Creates the dataset of a new archive bucket owned by who (mode 0600).
 * EEXIST when a dataset of that name exists (its owner in *owner). */
int s3_db_create_archive_bucket(s3_db_t *db, const char *name, const s3_who_t *who,
                                uid_t *owner, si_error_t *err);
/* What an object written over S3 keeps: its ETag (hex MD5; NULL: kept as
 * it is) and meta (replaced whole), in one transaction. */
int s3_db_record_object(s3_db_t *db, int64_t object_id, const char *etag, const s3_meta_t *meta,
                        si_error_t *err);
/* A multipart object's part sizes ("n1,n2,...") into out: 1, 0 when it has
 * none recorded (one part), -1 on error. */
int s3_db_part_sizes(s3_db_t *db, int64_t object_id, si_strbuf_t *out, si_error_t *err);
/* Drops the dataset of an empty archive bucket. */
/* The dataset of a configured archive bucket, shared (doc/s3.md): owned
 * by root with group gid and mode; created, or an existing one made by
 * push (its first writer, before sharing existed) taken over; EEXIST for
 * any other dataset of that name. */
int s3_db_share_archive_bucket(s3_db_t *db, const char *name, unsigned mode, gid_t gid,
                               si_error_t *err);
int s3_db_delete_archive_bucket(s3_db_t *db, const char *name, si_error_t *err);

/* DeleteObject in two steps around cache_remove (the cache keeps its own
 * accounting): _begin finds bucket/key and, in one transaction, drops its
 * push item and the requests' pins and items, so nothing but the cache row
 * holds it; 1 and *object_id when found, 0 when there is no such object,
 * -1 with errno EBUSY while it is being written to tape (or arriving).
 * _finish deletes the object row (tape copies and dataset membership go
 * with it). Repeating a delete that stopped half way completes it. */
int s3_db_delete_object_begin(s3_db_t *db, const char *bucket, const char *key,
                              int64_t *object_id, si_error_t *err);
int s3_db_delete_object_finish(s3_db_t *db, int64_t object_id, si_error_t *err);

#endif
