/* The cache context, shared by the cache's own files only. */
#ifndef STAGEIN_CACHE_INTERNAL_H
#define STAGEIN_CACHE_INTERNAL_H

#include <pthread.h>
#include <sys/stat.h>
#include "catalog/db.h"

#include "common/bufpool.h"
#include "common/checksum.h"
#include "daemon/cache/cache.h"

#define CACHE_OBJECT_PATH_MAX 40 /* "objects/ab/cd/" + 16 hex + NUL */
#define CACHE_NAME_HEX 16
#define CACHE_ROWS_CHUNK 64 /* cache rows per INSERT of a batch */
#define ROW_INSERT "INSERT INTO cache(object_id, path, size, pins, last_access, verified," \
                   " segment, file_offset)"

typedef enum {
    SQL_ROW_GET,
    SQL_ROW_INSERT,
    SQL_ROWS_PRESENT,
    SQL_ROW_DELETE,
    SQL_ROW_DELETE_UNPINNED,
    SQL_TOUCH,
    SQL_LRU,
    SQL_TOTALS,
    SQL_PINNED,
    SQL_PIN_REQUESTS,
    SQL_PIN,
    SQL_PINS_IF_REQUEST,   /* a batch's objects for one request (an id list) */
    SQL_UNPIN,
    SQL_UNPIN_REQUEST,
    SQL_LIST,
    SQL_CHECKSUM,
    SQL_SET_VERIFIED,
    SQL_SHARED_TOTALS,     /* shared: usage and the live others' reservations */
    SQL_RES_INSERT,
    SQL_RES_DELETE,
    SQL_RES_DROP_STALE,    /* this instance's earlier life's and dead ones' */
    SQL_SEG_NEW,           /* a segment's row, before its file */
    SQL_SEG_SEAL,          /* its writer appends no more */
    SQL_SEG_DROP_EMPTY,    /* a sealed segment without objects */
    SQL_SEG_LIST,          /* recovery: every segment */
    SQL_SEG_DELETE,        /* recovery: a segment found empty or without its file */
    SQL_COUNT
} cache_sql_t;

/* Space set aside for an object before (and while) it is written. */
typedef struct {
    int64_t object_id;
    uint64_t size;
    bool writing;                 /* a writer owns it */
} cache_reservation_t;

typedef struct {
    int64_t object_id;
    double when;
} cache_access_t;

/* The segment file the committer appends the memory writers' objects to. */
typedef struct {
    int64_t id;            /* 0: none open (under the lock: evictions read it) */
    int fd;
    uint64_t end;          /* where the next object goes (a multiple of 4 KiB) */
    bool fresh;            /* created since its last flush: its directory needs one too */
    bool failed;           /* a write or flush failed: sealed after this batch */
} cache_segment_t;

/* A range of a segment whose object lost its row: its blocks are given back
 * to the file system once no reader can still be in them. */
typedef struct {
    int64_t segment;
    uint64_t offset, length;
    double due;            /* on the cache's clock (cache_now) */
} cache_punch_t;

/* Segment objects start at multiples of this (direct I/O's alignment), from
 * the second block: the first is the segment's header, starting so. */
#define CACHE_BLOCK 4096u
#define CACHE_SEGMENT_MAGIC "stagein cache segment 1"
/* An evicted segment object's blocks are freed this long after its row went:
 * a reader that found the row before may still be sending its bytes. */
#define CACHE_PUNCH_DELAY_S 60.0

/* One object being written (writer.c), then waiting for its batch commit
 * (commit.c). */
struct cache_writer {
    cache_t *c;
    int64_t object_id;
    int64_t reserved_as;   /* its reservation's id: object_id, or the provisional
                            * one of a writer opened unrecorded */
    bool unrecorded;       /* its row comes from the record callback */
    uint64_t expected_size;
    char expected_sum[SI_CHECKSUM_TEXT_MAX]; /* "" when the catalog has none */
    char actual_sum[SI_CHECKSUM_TEXT_MAX];   /* the bytes', once sealed */
    si_checksum_t *sum;
    int fd;
    char temp_name[64];
    uint64_t received;     /* bytes accepted from the caller */
    uint64_t written;      /* bytes in the temp file */
    uint64_t writeback_from;
    unsigned char *buf;
    size_t buffered, buf_size;
    struct cache_write_behind *behind; /* a direct writer's second buffer and its thread */
    bool failed;
    bool sealed;           /* size and checksum checked: only the commit is left */
    bool direct;           /* whole aligned blocks written with O_DIRECT (cache_writer_direct) */
    bool memory;           /* the bytes are held in buf (buf_size: the object's size in
                            * whole blocks) until the batch writes them into a segment */
    cache_place_t place;   /* where the batch put them (memory writers) */

    /* submitted: in the commit queue, then in a batch */
    struct cache_writer *next;
    int64_t pin_request;
    cache_committed_fn done;
    void *done_arg;
    cache_record_fn record; /* rows of the owner's, in the batch's transaction */
    void *record_arg;
    bool submitted;
    bool placed;           /* renamed (or linked) into objects/ */
    bool unnamed;          /* an O_TMPFILE: linked into objects/ when submitted */
    int rc, errnum;        /* the commit's outcome */
    char why[512];
};

/* A segment file kept open for readers (cache_segment_open_read). */
typedef struct {
    int64_t segment;              /* 0: a free slot */
    int fd;
    double used;                  /* cache_now() of its last reader */
} cache_kept_segment_t;
#define CACHE_KEPT_SEGMENTS 16
/* a kept descriptor unused this long is closed: one of a segment another
 * instance removed holds the file's space until then */
#define CACHE_KEPT_IDLE_S 10.0

/* Two locks. lock guards the catalog connection and the accounting (usage,
 * eviction, pins, access times, segments); its holder may run catalog
 * statements, so it can be held for a transaction's time. wlock, a leaf
 * taken after lock when both are needed and never held across a statement
 * or I/O, guards what a writer touches on its way (reservations, writer
 * counts, the commit queue): a drive's thread opening and submitting an
 * object every 164 us never waits for a batch's transaction (it did: 0.4 ms
 * a batch, up to 11 ms with a WAL checkpoint, a fifth of the drive's time
 * lost; BENCHMARKS.md "Segment files"). */
struct cache {
    pthread_mutex_t lock;
    pthread_mutex_t wlock;
    pthread_cond_t changed;       /* broadcast when space may have been freed */
    uint64_t generation;

    cache_conf_t conf;
    catalog_t *cat;
    db_t *db;
    db_stmt_t *stmt[SQL_COUNT];
    /* a batch's rows, CACHE_ROWS_CHUNK at most per statement: [k] inserts
     * k rows (commit.c), prepared at first use */
    db_stmt_t *rows_stmt[CACHE_ROWS_CHUNK + 1];

    int dir_fd, objects_fd, tmp_fd, lock_fd;
    int segments_fd;              /* segments/ */
    int tmp_root_fd;              /* tmp/ (tmp_fd is tmp/<instance>/ when shared) */
    bool unnamed_temps;           /* temp files are O_TMPFILEs (cache_unnamed_temps_work) */
    double totals_loaded;         /* monotonic seconds of the last cache_load_totals */
    uint64_t capacity, high_bytes, low_bytes;

    /* accounting, under lock */
    uint64_t used, objects;
    uint64_t others_reserved;     /* shared: live other instances' (catalog) */
    uint64_t usage_unfolded;      /* rows changed here since the last fold */

    /* writers, under wlock */
    uint64_t reserved;
    cache_reservation_t *res;     /* by object_id, res_cap slots (space.c) */
    size_t nres, res_cap;
    size_t writers;
    uint64_t temp_seq;
    int64_t provisional_seq;      /* wlock: unrecorded writers' ids, -1, -2, ... */
    size_t unsubmitted;           /* writers open and not yet submitted */

    /* group commit (commit.c); the queue and generation under wlock */
    pthread_t committer;
    bool committer_running, committer_stop;
    unsigned in_batch;            /* batches taken off the queue and not yet ended
                                   * (callbacks included) */
    pthread_cond_t commit_cv;     /* signalled when objects are queued (wlock) */
    /* the recorder: a flushed batch's transaction and callbacks while the
     * committer writes and flushes the next (commit.c) */
    pthread_t recorder;
    bool recorder_running, recorder_stop;
    struct cache_batch *recording; /* wlock: the batch handed over, NULL when done */
    pthread_cond_t record_cv;     /* wlock: a batch handed over, or one done */
    pthread_cond_t committed_cv;  /* broadcast when a batch ended (wlock) */
    uint64_t commit_generation;
    cache_writer_t *queue_head, **queue_tail;
    size_t queued;
    uint64_t queued_bytes;
    double queued_since;          /* monotonic seconds of the oldest queued */
    int fault_errno;              /* STAGEIN_TEST_CACHE_FLUSH_FAULT: flushes fail */
    unsigned fault_count;
    unsigned pause_ms;            /* STAGEIN_TEST_CACHE_COMMIT_PAUSE_MS: between a
                                   * batch's flush and its transaction (kill tests) */

    /* segment files (segment.c) */
    cache_segment_t seg;          /* the committer's; seg.id read under lock elsewhere */
    uint64_t memory_held;         /* memory writers' buffers, open or queued (wlock) */
    cache_punch_t *punches;       /* ranges to free, oldest first (lock) */
    size_t npunches, punch_cap;

    /* writers' buffers kept for the next ones: at most half of
     * cache.segment_memory (the memory an admin gives the cache's writers;
     * 32 uploads of 16 MiB at once hold 128 MiB of 4 MiB write buffers) */
    si_bufpool_t buffers;

    /* segment files kept open for readers: a GET takes a duplicate of a
     * descriptor, not a path walk and a file's last close (kept_lock is a
     * third lock, a leaf: taken under lock, never the other way) */
    pthread_mutex_t kept_lock;
    cache_kept_segment_t kept[CACHE_KEPT_SEGMENTS];

    cache_access_t *access;       /* batched last_access updates */
    size_t naccess, access_cap;
    double access_oldest;

    cache_usage_t counters;       /* the "since open" counters */
};

/* Statement id reset and ready to bind; the lock is held. */
db_stmt_t *cache_stmt(cache_t *c, cache_sql_t id);
/* Maps the connection's error into err (errno EIO); returns -1. */
int cache_db_error(cache_t *c, si_error_t *err, const char *what);
int cache_begin(cache_t *c, si_error_t *err);
int cache_commit(cache_t *c, si_error_t *err);
void cache_rollback(cache_t *c);
double cache_now(const cache_t *c);


/* Whether temp files can be unnamed (O_TMPFILE in tmp/, linked into place
 * through /proc/self/fd): tried once when the cache opens. Not for a shared
 * cache: other instances look for a write in progress by its temp name. */
bool cache_unnamed_temps_work(const cache_t *c);
/* Links a sealed unnamed temp file into objects/ (writer.c); sets placed. */
int cache_writer_link(cache_writer_t *w, si_error_t *err);

/* The two directory levels and file name of an object. */
void cache_object_parts(int64_t object_id, char dir0[3], char dir1[3],
                        char name[CACHE_NAME_HEX + 1]);
/* A segment's file, relative to segments/ ("00/00/0000000000000007"). */
void cache_segment_name(int64_t segment, char *buf, size_t size);
/* Opens a segment's file read-only (fd) or -1 with errno. */
int cache_segment_open(cache_t *c, int64_t segment);
/* A read-only descriptor of a segment's file for a reader (who closes it),
 * with its stat, or -1 with errno: a duplicate of the one kept open. A kept
 * one whose file was removed meanwhile (here or by another instance) is
 * closed and the path tried again. */
int cache_segment_open_read(cache_t *c, int64_t segment, struct stat *st);
/* The segment's kept descriptor closed: its file is being removed. */
void cache_segment_forget(cache_t *c, int64_t segment);
/* Kept descriptors unused for CACHE_KEPT_IDLE_S closed (all: every one). */
void cache_kept_sweep(cache_t *c, bool all);
/* Unlinks an object's file (missing is fine); the lock is held. */
int cache_unlink_object(cache_t *c, int64_t object_id);

/* Reservations (wlock held). */
cache_reservation_t *cache_reservation_find(cache_t *c, int64_t object_id);
/* The in-memory part alone: a committed object's row went in its batch. */
void cache_reservation_forget(cache_t *c, int64_t object_id);
/* Gives a reservation back: shared, its catalog row too (autocommit); lock
 * held, not wlock (taken inside). */
void cache_reservation_drop(cache_t *c, int64_t object_id);
/* Shared: the catalog rows of this instance's reservations of n objects
 * deleted in one statement (in the caller's transaction, if any); -1 with
 * err on failure. */
int cache_reservations_unpublish(cache_t *c, const int64_t *object_ids, size_t n,
                                 si_error_t *err);
/* Shared: deletes the rows of the instances whose lease expired, and with
 * own_too this instance's (its earlier life's, at open). */
int cache_reservations_drop_stale(cache_t *c, bool own_too, si_error_t *err);
/* Reserves under the lock (see cache_reserve). */
int cache_reserve_locked(cache_t *c, int64_t object_id, uint64_t size, cache_block_t *block,
                         si_error_t *err);
void cache_changed_locked(cache_t *c);
/* Re-reads objects and used bytes from the catalog (shared: and the live
 * other instances' reservations, in the same statement); lock held. */
int cache_load_totals(cache_t *c, si_error_t *err);

/* Counts rows this cache added or removed (lock held) and, on PostgreSQL,
 * folds the usage's changes into its row once enough have piled up, so
 * that reading the usage stays short (schema 1.15). A failed fold is left
 * for the next: the usage reads the same either way. */
void cache_usage_changed(cache_t *c, size_t rows);
/* Several instances share the directory (conf.instance set). */
bool cache_shared(const cache_t *c);
/* Shared: re-reads the totals when the last read is older than max_age
 * seconds (other instances' writes and evictions); lock held. */
int cache_refresh_totals(cache_t *c, double max_age, si_error_t *err);
/* Shared: the names of the live instances other than this one, from the
 * catalog's registry (*names malloc'd, one block; free(*names)). */
int cache_live_others(cache_t *c, char (**names)[65], size_t *n, si_error_t *err);
int cache_flush_access_locked(cache_t *c, si_error_t *err);
/* Objects looked up per statement and hold of the lock: one statement
 * per object would take and drop SQLite's WAL read lock (two fcntl calls)
 * and make a round trip to PostgreSQL each; a few hundred keep the
 * committer waiting well under a millisecond. */
#define CACHE_LOOKUP_CHUNK 256
/* Which of ids[0..n) have a cache row, lock held: their ids, sorted, into
 * present (room for n). One statement. 0, or -1 with err. */
int cache_rows_present_locked(cache_t *c, const int64_t *ids, size_t n, int64_t *present,
                              size_t *npresent, si_error_t *err);

/* ---- segment files (segment.c) ---- */

/* The memory writers of a batch (committer thread) written into the open
 * segment (one made when there is none or it is full), each at an aligned
 * offset set in its place; a failure fails those writers. Then
 * cache_segment_flush makes them durable (fdatasync, and the directory of
 * a new segment). */
void cache_segment_append(cache_t *c, cache_writer_t **ws, size_t n);
int cache_segment_flush(cache_t *c, si_error_t *err);
/* After a batch's flush (committer): the open segment, when it has reached
 * segment_bytes or its write or flush failed, is taken out of use into
 * *out (out->id 0 when it stays open); the next batch opens another. */
void cache_segment_detach(cache_t *c, cache_segment_t *out);
/* After that batch's transaction (lock held): a detached segment sealed
 * and closed, and removed if it holds no object; *seg cleared. */
void cache_segment_seal_locked(cache_t *c, cache_segment_t *seg);
/* Seals and closes the open segment (cache_close). */
void cache_segment_close(cache_t *c);
/* An object of segment lost its row (evicted, removed, dropped; lock held,
 * after the commit): the segment goes when it is sealed and holds no other
 * object, else the object's blocks are freed CACHE_PUNCH_DELAY_S later. */
void cache_segment_released_locked(cache_t *c, const cache_place_t *place);
/* Frees the ranges whose delay is over (all: every one); lock held. */
void cache_punch_due_locked(cache_t *c, bool all);

/* Opens objects/<d0>/<d1>, made (and its parent fsync'd) when new. */
int cache_object_dir(cache_t *c, int parent, const char *name, si_error_t *err);
/* The committer thread (a batch's writes and flush) and the recorder
 * thread (its transaction and answers): started by cache_open, stopped
 * (after committing what is queued) by cache_close. */
int cache_committer_start(cache_t *c, si_error_t *err);
void cache_committer_stop(cache_t *c);
/* A writer's end, whatever happened (lock NOT held): its reservation given
 * back unless it was committed, buffers and descriptor freed. */
void cache_writer_release(cache_writer_t *w);
void cache_writer_free(cache_writer_t *w);

#endif
