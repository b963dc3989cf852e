/* libstagein-catalog: the catalog (SQLite file or PostgreSQL database) of objects, datasets, tape volumes,
 * tape copies and positions, requests, cache residency and events. */
#ifndef STAGEIN_CATALOG_H
#define STAGEIN_CATALOG_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/table.h"

typedef struct catalog catalog_t;

/* Schema version kept in PRAGMA user_version: MAJOR * 1000 + MINOR.
 * A database of a newer MAJOR is refused; a newer MINOR only adds. */
#define CATALOG_SCHEMA_MAJOR(v) ((v) / 1000)

enum {
    CATALOG_CREATE = 1 << 0,   /* create the file if missing */
    CATALOG_READONLY = 1 << 1, /* SQLITE_OPEN_READONLY; nothing is migrated */
};

/* The schema version that records the catalog's site. */
#define CATALOG_SITE_VERSION 1007
/* The version that added instances and leases (catalog/instances.h). */
#define CATALOG_INSTANCES_VERSION 1008

typedef struct {
    const char *target;        /* a SQLite path or a postgresql:// URL (no password in it) */
    const char *password_file; /* PostgreSQL: the password, in a file of mode 0600;
                                * NULL: libpq's ~/.pgpass, PGPASSFILE or service file */
    const char *site;          /* the site this catalog belongs to: recorded by the first
                                * writer, refused when another; NULL: not checked */
    int flags;                 /* CATALOG_CREATE, CATALOG_READONLY */
    int target_version;        /* tests only: migrate no further (0: latest) */
    struct db_health *health;  /* shared by a process's connections: outages and
                                * reconnects recorded once (db.h); NULL: own */
} catalog_open_opts_t;

catalog_t *catalog_open_opts(const catalog_open_opts_t *opts, si_error_t *err);
/* True for a PostgreSQL URL (postgresql:// or postgres://), false for a path. */
bool catalog_target_is_url(const char *target);
/* catalog_open_opts with only a target (a path or a URL) and flags. */
catalog_t *catalog_open(const char *path, int flags, si_error_t *err);
/* Tests only: migrate a fresh database no further than target_version. */
catalog_t *catalog_open_at_version(const char *path, int target_version, si_error_t *err);
void catalog_close(catalog_t *cat);
int catalog_schema_version(catalog_t *cat);
int catalog_latest_version(void);
const char *catalog_path(const catalog_t *cat);
/* The SQLite connection, for the daemon's modules that still query SQLite
 * directly; NULL on PostgreSQL. */
sqlite3 *catalog_db(catalog_t *cat);
/* The driver connection (catalog/db.h), either engine. */
struct db;
struct db *catalog_driver(catalog_t *cat);
/* Maps the connection's last error into err with a context; returns -1. */
int catalog_sqlerr(catalog_t *cat, si_error_t *err, const char *context);

/* Explicit transactions for callers that batch several writes. */
int catalog_begin(catalog_t *cat, si_error_t *err);
/* One whose commit is not synced: rows a later commit answers for
 * (db_begin_unsynced). */
int catalog_begin_unsynced(catalog_t *cat, si_error_t *err);
int catalog_commit(catalog_t *cat, si_error_t *err);
void catalog_rollback(catalog_t *cat);

/* The dataset read-permission rule, one SQL boolean over a dataset row d for
 * the user bound as :uid, :gid and :groups (supplementary groups as
 * ",g1,g2,"): the user's class alone (owner, else group, else other) decides,
 * as for a file. Every query that checks read access uses it. */
#define CATALOG_DATASET_READABLE_SQL                                            \
    "(CASE WHEN d.owner_uid = :uid THEN (d.mode & 256) <> 0"                    \
    " WHEN d.owner_gid = :gid OR instr(:groups, ',' || d.owner_gid || ',') > 0" \
    "  THEN (d.mode & 32) <> 0"                                                 \
    " ELSE (d.mode & 4) <> 0 END)"

/* The cache's usage (schema 1.15): the totals row plus the changes not yet
 * folded into it (PostgreSQL's; SQLite has none): objects and bytes, the
 * pinned ones (schema 1.17), and d.changes, how many changes are waiting to
 * be folded. */
#define CATALOG_CACHE_USAGE_COLUMNS "u.objects + d.objects, u.bytes + d.bytes"
#define CATALOG_CACHE_PINNED_COLUMNS \
    "u.pinned_objects + d.pinned_objects, u.pinned_bytes + d.pinned_bytes"
#define CATALOG_CACHE_USAGE_FROM                                                   \
    " FROM cache_usage u, (SELECT coalesce(sum(objects), 0) AS objects,"           \
    "  coalesce(sum(bytes), 0) AS bytes, coalesce(sum(pinned_objects), 0) AS"     \
    "  pinned_objects, coalesce(sum(pinned_bytes), 0) AS pinned_bytes, count(*) AS" \
    "  changes FROM cache_usage_changes) d"

/* PostgreSQL: folds the changes of the kept totals (the cache's usage, the
 * waiting request items', the pushed files' by state) into their rows and vacuums them away, outside
 * any transaction (in one: does nothing); SQLite has no changes to fold. */
int catalog_fold_totals(catalog_t *cat, si_error_t *err);
/* A reader of kept totals (the metrics: the requests', the pushes') folds
 * them when it finds this many changes waiting (PostgreSQL; reading 4,096
 * of them is well under a millisecond). */
#define CATALOG_FOLD_AT 4096

/* ---- records ---------------------------------------------------------- */

typedef struct {
    const char *label;       /* e.g. "L90001", 1..32 chars [A-Z0-9_-] */
    const char *media;       /* "LTO-9" */
    const char *library;     /* "sim" */
    const char *state;       /* online | offline | full | disabled | failed */
    uint64_t capacity_bytes;
    uint64_t used_bytes;
} catalog_volume_t;

typedef struct {
    const char *bucket;
    const char *key;
    uint64_t size;
    const char *checksum;    /* "sha256:hex", "md5:hex" or NULL */
    int64_t mtime;           /* unix seconds, 0 if unknown */
    const char *etag;        /* NULL if unknown */
} catalog_object_t;

typedef struct {
    int64_t object_id;
    int copy;                /* 1..N */
    const char *volume;      /* label */
    int64_t file_seq;        /* archive file sequence number on the volume, -1 unknown */
    uint64_t position;       /* logical bytes from BOT of the object's data */
    uint64_t length;         /* bytes on tape */
} catalog_copy_t;

/* Creates the volume if missing (fields other than label only apply then;
 * returns 1 when created, 0 when it existed); *id (if not NULL) receives its
 * row id. */
int catalog_volume_ensure(catalog_t *cat, const catalog_volume_t *v, int64_t *id,
                          si_error_t *err);
/* Bytes written on the volume, as the volume itself reports them. */
int catalog_volume_set_used(catalog_t *cat, const char *label, uint64_t used_bytes,
                            si_error_t *err);
int catalog_volume_set_state(catalog_t *cat, const char *label, const char *state,
                             si_error_t *err);
/* Inserts (returns 1), or finds an identical existing object (same size and
 * checksum; returns 0); a different object under the same bucket/key is an
 * error (-1). */
int catalog_object_put(catalog_t *cat, const catalog_object_t *o, int64_t *id,
                       si_error_t *err);
/* The stored S3 headers (JSON) and storage class of an object, recorded
 * when it has none yet: what the catalog already holds (an upload, a newer
 * PUT) is kept. Both NULL: nothing to record. */
int catalog_object_meta_keep(catalog_t *cat, int64_t object_id, const char *headers,
                             const char *storage_class, si_error_t *err);
/* Inserts a copy (returns 1); an identical existing copy is accepted
 * (returns 0), a different one under the same (object, copy) is an error
 * (errno EEXIST). */
int catalog_copy_put(catalog_t *cat, const catalog_copy_t *c, si_error_t *err);
int catalog_object_lookup(catalog_t *cat, const char *bucket, const char *key,
                          int64_t *id, si_error_t *err);

/* Appends to the event log (never updated or deleted). */
int catalog_event(catalog_t *cat, const char *kind, const char *subject, const char *detail);
/* Several events of one kind at once, in one statement per few hundred:
 * subjects[k] and details[k] (either may be NULL), in their order. */
int catalog_events(catalog_t *cat, const char *kind, const char *const *subjects,
                   const char *const *details, size_t n);

/* ---- imports: each all-or-nothing, errors as "file:line: reason" ------ */

typedef struct {
    uint64_t lines;
    uint64_t objects;   /* new objects */
    uint64_t copies;    /* new tape copies */
    uint64_t volumes;   /* new volumes */
    uint64_t members;   /* dataset members */
} catalog_import_stats_t;

typedef enum {
    CATALOG_FORMAT_AUTO,  /* by file name (.csv, .jsonl/.json, .xml) or content */
    CATALOG_FORMAT_CSV,   /* bucket,key,size,volume,position,copy,checksum */
    CATALOG_FORMAT_JSONL, /* {"bucket","key","size","volume","position","copy","checksum"} */
    CATALOG_FORMAT_LTFS,  /* SNIA LTFS index XML */
} catalog_format_t;

typedef struct {
    catalog_format_t format;
    const char *volume;   /* LTFS: label to use instead of the index's volume uuid */
    const char *bucket;   /* LTFS: bucket for the index's root; NULL: first-level
                           * directories are buckets */
    uint64_t block_size;  /* LTFS: bytes per logical block (0: 524288) */
} catalog_positions_opts_t;

/* name: how the input is named in errors (its path, or "-"); stats may be
 * NULL. */
int catalog_import_positions(catalog_t *cat, const char *name, FILE *in,
                             const catalog_positions_opts_t *opts,
                             catalog_import_stats_t *stats, si_error_t *err);

/* One object of an archive's own listing (an S3 gateway's ListObjectsV2):
 * no tape position, the archive knows where it is. */
typedef struct {
    const char *bucket, *key;
    uint64_t size;
    const char *etag;          /* without quotes, or NULL */
    const char *storage_class; /* "GLACIER", "STANDARD", ...; NULL: GLACIER */
    int64_t mtime;             /* unix seconds, 0 if unknown */
    const char *checksum;      /* "md5:hex" (a single-part ETag) or NULL */
} catalog_listed_object_t;

/* Fills *out with the next object: 1, 0 at the end, -1 on error (err). */
typedef int (*catalog_listing_next_fn)(void *arg, catalog_listed_object_t *out,
                                       si_error_t *err);

/* Records every listed object (new ones, identical ones again; a different
 * object under a catalogued bucket/key is an error), with its storage
 * class, in one transaction: the first bad record or a failing next()
 * leaves the catalog as it was. Errors name the record "name:N: ...". */
int catalog_import_listing(catalog_t *cat, const char *name, catalog_listing_next_fn next,
                           void *arg, catalog_import_stats_t *stats, si_error_t *err);

typedef struct {
    const char *name;        /* dataset name: 1..128 of [A-Za-z0-9._-] */
    uid_t owner_uid;
    gid_t owner_gid;
    unsigned mode;           /* like a file: 0640 = owner rw, group r */
    const char *description; /* may be NULL */
    bool replace;            /* redefine an existing dataset's members */
} catalog_dataset_attrs_t;

/* Manifest: one "bucket/key" or "bucket/prefix/" per line, '#' comments,
 * blank lines. Every line must name catalogued objects. */
int catalog_import_manifest(catalog_t *cat, const catalog_dataset_attrs_t *attrs,
                            const char *name, FILE *in, catalog_import_stats_t *stats,
                            si_error_t *err);

/* Recomputes the kept totals (objects, bytes, volumes) of datasets whose
 * members or tape copies changed. Imports call it; so should any writer of
 * tape copies, before committing. */
int catalog_refresh_dataset_stats(catalog_t *cat, si_error_t *err);
/* The same for one dataset (a writer that knows which datasets it changed
 * and holds their rows: no scan, and no lock on any other dataset). */
int catalog_refresh_dataset_stats_of(catalog_t *cat, int64_t dataset_id, si_error_t *err);

/* ---- the recall plan: which copy of each object, grouped by volume and
 * ordered by position (the scheduler refines the order at run time) ----- */

typedef struct {
    int64_t object_id;
    int64_t volume_id;
    int copy;
    int64_t file_seq;
    uint64_t position;
    uint64_t length;
    uint64_t size;
} catalog_read_t;

typedef struct {
    size_t nreads;
    catalog_read_t *reads; /* grouped by volume, by position within each */
    size_t nvolumes;
    struct catalog_plan_volume {
        int64_t volume_id;
        char label[40];
        size_t first;      /* index of its first read */
        size_t count;
        uint64_t bytes;
    } *volumes;
    size_t missing;        /* members without a copy on an online volume */
} catalog_plan_t;

int catalog_plan_dataset(catalog_t *cat, const char *dataset, catalog_plan_t **plan,
                         si_error_t *err);
void catalog_plan_free(catalog_plan_t *plan);

/* ---- admin views, each a table printable as text or JSON -------------- */

si_table_t *catalog_view_datasets(catalog_t *cat, si_error_t *err);
si_table_t *catalog_view_dataset_volumes(catalog_t *cat, const char *dataset, si_error_t *err);
si_table_t *catalog_view_volume_datasets(catalog_t *cat, const char *label, si_error_t *err);
si_table_t *catalog_view_volumes(catalog_t *cat, si_error_t *err);
si_table_t *catalog_view_object(catalog_t *cat, const char *bucket_key, si_error_t *err);
typedef struct {
    const char *user;  /* uid or name, NULL for all */
    const char *job;   /* Slurm job id, NULL for all */
    const char *state; /* request state, NULL for all */
} catalog_request_filter_t;
si_table_t *catalog_view_requests(catalog_t *cat, const catalog_request_filter_t *f,
                                  si_error_t *err);
si_table_t *catalog_view_cache(catalog_t *cat, si_error_t *err);
/* Volumes holding files that active requests wait for (a file counted on
 * each volume holding a copy), most files first; the status page's. */
si_table_t *catalog_view_volume_queue(catalog_t *cat, si_error_t *err);
/* The 20 newest pushes (stage-out) with their files' progress; uid (decimal
 * text) only that user's, NULL everyone's. */
si_table_t *catalog_view_recent_pushes(catalog_t *cat, const char *uid, si_error_t *err);
/* For each active request, the names of the datasets its files belong to
 * (space separated, by name) and how many. */
si_table_t *catalog_view_queue_datasets(catalog_t *cat, si_error_t *err);
si_table_t *catalog_view_plan(catalog_t *cat, const char *dataset, bool summary_only,
                              si_error_t *err);
/* Read-only ad-hoc query; the catalog must be opened CATALOG_READONLY. */
si_table_t *catalog_view_sql(catalog_t *cat, const char *sql, si_error_t *err);

#endif
