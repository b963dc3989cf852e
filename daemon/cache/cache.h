/* stageind's cache: a directory of whole objects recalled from the archive or
 * uploaded, each stored once under its catalog object id, checksummed before
 * it becomes visible, pinned by the requests that need it, and evicted least
 * recently used when space is short. The catalog's `cache` table (plus
 * `cache_pins`) is the record; the directory follows it.
 *
 * Layout under the cache directory (never derived from a user-supplied key,
 * so no key can name a path outside it):
 *   objects/<b2>/<b1>/<id as 16 hex digits>   b2, b1: bits 16-23 and 8-15
 *   segments/<b2>/<b1>/<segment id, 16 hex>  small objects packed at 4 KiB-aligned
 *                                             offsets (catalog: cache_segments)
 *   tmp/<id>.<pid>.<n>                        objects being written
 *   tmp/<instance>/<id>.<pid>.<n>             ... by one of several instances
 *   lock                                      flock: one process per cache, or
 *                                             (shared) the instances of a site
 *   s3-multipart/, s3-session.key             (shared) the S3 endpoints' uploads in
 *                                             progress and session key (daemon/s3)
 *
 * Several instances (cache_conf_t.instance set) share one directory on a
 * file system they all see: pins, residency and eviction are the catalog's
 * rows (an object pinned through one instance is never evicted by another),
 * the usage is re-read from the catalog before space decisions, each writes
 * its temp files under its own tmp/<instance>/, and start-up recovery removes
 * only its own temp files and those of instances the catalog's registry
 * (catalog/instances.h) calls dead; an object file without its row is left
 * alone while it is young and another instance lives (it may be in the
 * window between its rename and its batch's commit).
 *
 * Errors return -1 with the reason in err and errno saying what kind:
 * EINVAL bad input, ENOENT not cached (or unknown request), EEXIST already
 * cached, EBUSY pinned or being written, EAGAIN no space now (backpressure),
 * EFBIG larger than the whole cache, EBADMSG the data did not match the
 * catalog's size or checksum, EIO (or the system's errno, e.g. ENOSPC) file
 * system or catalog failure.
 *
 * Threads: every call may run concurrently with any other, except
 * cache_open, cache_recover and cache_close, which run alone. A mutex in
 * the context guards the accounting and the catalog statements; it is never
 * held while object data is written, hashed or read (only across metadata
 * calls: open, rename, unlink, and short catalog transactions). One writer
 * is used by one thread at a time; different writers run in parallel. The
 * catalog connection is not thread safe (opened without a mutex), so give the
 * cache a catalog_t of its own (catalog_open on the same file; WAL lets the
 * connections share it) unless nothing else uses that connection. */
#ifndef STAGEIN_CACHE_H
#define STAGEIN_CACHE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/conf.h"
#include "common/error.h"

typedef struct catalog catalog_t;
typedef struct cache cache_t;
typedef struct cache_writer cache_writer_t;

/* ---- configuration: the "cache" group of stagein.conf ------------------- */

extern const si_conf_key_t cache_conf_keys[];

typedef enum {
    CACHE_VERIFY_NONE,       /* trust the files (sizes are still checked) */
    CACHE_VERIFY_UNVERIFIED, /* re-hash objects not yet verified */
    CACHE_VERIFY_ALL,        /* re-hash everything */
} cache_verify_t;

/* Seconds on the clock used for last_access (LRU order). */
typedef double (*cache_clock_fn)(void *arg);

typedef struct {
    char dir[PATH_MAX];
    uint64_t capacity;            /* bytes; 0: half the file system's size */
    double high_watermark;        /* start evicting above this fraction */
    double low_watermark;         /* ... and evict down to this one */
    cache_verify_t verify_on_start;
    size_t write_buffer;          /* bytes gathered per write(2) */
    double access_flush_interval; /* seconds between last_access flushes */
    /* group commit: a batch of finished objects is made durable together
     * (one syncfs, one catalog transaction), taking what is queued when the
     * committer is free, up to this many bytes or objects (the next batch
     * gathers while one is flushed); with commit_delay > 0 a batch waits up
     * to that long for more objects while other writers are open */
    uint64_t commit_bytes;
    unsigned commit_objects;
    double commit_delay;          /* seconds */
    /* segment files: objects smaller than segment_object_max (0: none) are
     * held in memory while they arrive, then written by their batch into the
     * committer's segment file with O_DIRECT, at 4 KiB-aligned offsets, so
     * that a small object costs no file of its own; a segment takes no more
     * once it holds segment_bytes. At most segment_memory bytes are held so
     * (beyond that, small objects get files of their own, as large ones do). */
    uint64_t segment_object_max;
    uint64_t segment_bytes;
    uint64_t segment_memory;
    cache_clock_fn clock;         /* NULL: wall clock (tests pass their own) */
    void *clock_arg;
    /* the instance's name when several share the directory ("": this
     * process alone), and the lease time after which the registry calls a
     * silent instance dead */
    char instance[65];
    double lease_s;
} cache_conf_t;

/* Defaults: dir <state_dir>/cache, capacity 0, watermarks 0.90/0.80,
 * verify unverified, 4 MiB buffer, 5 s flushes, batches of up to 256 MiB
 * or 4096 objects, no delay; objects below 4 MiB in segments of 256 MiB,
 * with at most 256 MiB of them in memory. */
void cache_conf_defaults(cache_conf_t *conf, const char *state_dir);
/* Defaults overridden by the "cache" group; checks low < high. */
int cache_conf_from(const si_conf_t *conf, const char *state_dir, cache_conf_t *out,
                    si_error_t *err);
const char *cache_verify_name(cache_verify_t v);

/* ---- life cycle ------------------------------------------------------------ */

/* Creates the directory (and objects/, tmp/) if missing, takes its lock,
 * prepares the statements on cat's connection and loads the usage. */
cache_t *cache_open(const cache_conf_t *conf, catalog_t *cat, si_error_t *err);
/* Flushes batched access times; open writers must be finished or aborted. */
void cache_close(cache_t *c);

typedef struct {
    uint64_t temp_files_removed, temp_bytes_removed;
    uint64_t rows_without_file;    /* catalog rows dropped: their file is gone */
    uint64_t files_without_row;    /* object files removed: no catalog row */
    uint64_t stray_entries_removed; /* names that are no object file (links, junk) */
    uint64_t size_mismatches;      /* file size differs from its row: both dropped */
    uint64_t verified;             /* re-hashed and matching */
    uint64_t verify_failed;        /* re-hashed and wrong: both dropped */
    uint64_t unverifiable;         /* no checksum in the catalog to compare */
    uint64_t segments_removed;     /* segment files (and rows) holding no object */
    uint64_t orphan_ranges;        /* ranges of segments without a row (a batch cut
                                    * short, evictions not yet punched): freed */
    uint64_t objects, bytes;       /* what the cache holds afterwards */
    int64_t *dropped;              /* object ids whose cached copy is gone */
    size_t ndropped, cap_dropped;
} cache_recovery_t;

/* At start-up, before other threads use the cache: removes leftover temp
 * files, reconciles the directory with the catalog and re-verifies checksums
 * as verify_on_start says. The daemon requeues the request items of the
 * dropped objects. Free the report with cache_recovery_free. */
int cache_recover(cache_t *c, cache_recovery_t *report, si_error_t *err);
void cache_recovery_free(cache_recovery_t *report);

/* ---- space: reservations, eviction, backpressure ---------------------------- */

typedef enum {
    CACHE_RESERVED = 0,    /* space is set aside for the object */
    CACHE_PRESENT = 1,     /* already cached: nothing to recall, just pin it */
    CACHE_WOULD_BLOCK = 2, /* no room now: see the reason, wait, try again */
    CACHE_NOT_TRIED = 3,   /* cache_reserve_many: ask cache_reserve */
} cache_space_t;

typedef struct {
    char reason[256];      /* why it would block, for the request's status */
    uint64_t generation;   /* pass to cache_wait */
} cache_block_t;

/* Sets size bytes aside for object_id before its recall starts, so that
 * concurrent recalls cannot overfill the cache. When usage plus reservations
 * would pass the high watermark, unpinned objects are evicted in LRU order
 * down to the low watermark. A second reservation of the same object is the
 * same reservation. block may be NULL. */
int cache_reserve(cache_t *c, int64_t object_id, uint64_t size, cache_block_t *block,
                  si_error_t *err);
/* Reserves for object_ids[0..n) in their order, as cache_reserve would one
 * by one, with one look-up of their cache rows per few hundred and, in a
 * shared cache, one insert of their reservations and one read of the
 * site's usage: what a recall's scan reserves. outcome[k] is
 * CACHE_RESERVED, CACHE_PRESENT, CACHE_WOULD_BLOCK (the first that would
 * block, its reason in block; those after it are not tried), -1 (an error
 * of that object's) or CACHE_NOT_TRIED, which includes an object reserved
 * already: ask cache_reserve for those. Returns 0, or -1 when a look-up
 * or insert failed (err; the objects it covered are -1 or not tried). */
int cache_reserve_many(cache_t *c, const int64_t *object_ids, const uint64_t *sizes, size_t n,
                       int *outcome, cache_block_t *block, si_error_t *err);
/* Gives a reservation back (recall cancelled); no-op when there is none. */
void cache_unreserve(cache_t *c, int64_t object_id);
/* Waits until space may have been freed (unpin, eviction, removal, a
 * reservation given back) since generation, or timeout_ms passed.
 * Returns true when something changed. */
bool cache_wait(cache_t *c, uint64_t generation, int timeout_ms);
/* Evicts down to the low watermark if usage is above the high one. */
int cache_trim(cache_t *c, uint64_t *evicted_objects, uint64_t *evicted_bytes,
               si_error_t *err);

typedef struct {
    uint64_t capacity, high_bytes, low_bytes;
    uint64_t used_bytes, objects;
    uint64_t reserved_bytes, reservations, writers;
    uint64_t pinned_bytes, pinned_objects, pinning_requests;
    uint64_t evicted_objects, evicted_bytes;  /* since open */
    uint64_t written_objects, written_bytes;  /* since open */
    uint64_t checksum_failures, size_failures; /* since open */
    uint64_t blocked;                         /* reservations refused since open */
    uint64_t commit_batches, commit_failures; /* batches since open; failed ones */
} cache_usage_t;

int cache_usage(cache_t *c, cache_usage_t *out, si_error_t *err);

/* ---- writing an object ----------------------------------------------------------- */

/* Starts writing object_id into a temp file. size and checksum ("sha256:hex"
 * or "md5:hex"; NULL when the catalog has none: stored unverified) come from
 * the catalog. Uses the object's reservation, or reserves now (EAGAIN with
 * the reason in err when that would block). EEXIST when cached, EBUSY when
 * another writer has it. */
int cache_writer_open(cache_t *c, int64_t object_id, uint64_t size, const char *checksum,
                      cache_writer_t **out, si_error_t *err);
/* As cache_writer_open, for an object whose catalog row does not exist
 * yet: the owner's record callback (cache_writer_on_record, required)
 * inserts it in the batch's transaction and gives the cache its id. Until
 * then the writer goes by a provisional id (negative). Only an object held
 * in memory can wait for its id (its place in a segment does not depend on
 * it), and only in a cache of its own (a shared cache publishes its
 * reservations by object id): ENOTSUP otherwise, and the caller records
 * the row first. */
int cache_writer_open_unrecorded(cache_t *c, uint64_t size, const char *checksum,
                                 cache_writer_t **out, si_error_t *err);
/* Whether an object of size may be opened unrecorded here (the memory
 * budget aside, which only the open can tell). */
bool cache_takes_unrecorded(cache_t *c, uint64_t size);
/* Appends bytes (a tape read, an HTTP upload, ...). More bytes than the
 * expected size is an error at once; the writer must then be aborted. */
int cache_writer_write(cache_writer_t *w, const void *data, size_t len, si_error_t *err);
/* Where the next bytes of a writer that holds its object in memory (a
 * small one) are kept, and how many more may come (*len): a reader lands
 * them there itself (pread into it), then calls cache_writer_landed, so that
 * they are not copied again. NULL (and *len 0) for a writer to a file, or a
 * failed one: feed it cache_writer_write. */
void *cache_writer_room(cache_writer_t *w, size_t *len);
/* The len bytes put at cache_writer_room's address: hashed and counted as
 * cache_writer_write's would be (more than the room: refused, EBADMSG). */
int cache_writer_landed(cache_writer_t *w, size_t len, si_error_t *err);
/* Before the first write: the writer's whole blocks go to the disk with
 * O_DIRECT from its aligned buffer, the tail through the page cache (the
 * commit's flush makes both durable). For bytes nobody reads soon (a
 * pushed file, archived later): no copy into the page cache, which cost
 * more CPU than the rest of an upload. Where the file system refuses
 * O_DIRECT the writer stays buffered. */
void cache_writer_direct(cache_writer_t *w);
/* Below this size a direct write costs more than the copy it saves: one
 * I/O submitted per file, where the batch's flush merges buffered ones. */
#define CACHE_DIRECT_MIN_SIZE (UINT64_C(1) << 20)
/* Appends len bytes of the file open at fd, from offset off: copied by the
 * kernel (copy_file_range) where the file systems allow it, else read and
 * written; then the bytes that landed in the temp file are read back and
 * hashed, so finish verifies what the cache holds. A file that ends early
 * fails with EBADMSG (a re-read may help). */
int cache_writer_copy_fd(cache_writer_t *w, int fd, uint64_t off, uint64_t len, si_error_t *err);
/* Compares size and checksum, then commits the object with the next batch
 * (cache_writer_submit) and waits for that batch: renamed into place, the
 * file system flushed, and the row (verified) recorded in the catalog,
 * pinned by pin_request when it is not 0, all before the object is visible
 * to readers. Concurrent finishes share one batch. On a mismatch or any
 * failure nothing is kept: the temp file is removed, the reservation given
 * back, and err names the object, what was expected and what arrived. The
 * writer is freed either way. */
int cache_writer_finish(cache_writer_t *w, int64_t pin_request, si_error_t *err);

/* How a submitted object's commit ended: rc 0 (durable and recorded), or
 * -1 with errnum and why (nothing of it kept). Runs on the cache's
 * committer thread, without the cache's lock: it must not block for long,
 * and may call the cache. */
typedef void (*cache_committed_fn)(void *arg, int64_t object_id, int rc, int errnum,
                                   const char *why);
/* Seals the writer (as cache_writer_seal: EBADMSG on a mismatch, the
 * writer is then the caller's to abort) and queues it for the next batch
 * commit; done is called once that batch is durable, or failed. From a
 * successful submit on, the writer belongs to the cache. */
int cache_writer_submit(cache_writer_t *w, int64_t pin_request, cache_committed_fn done,
                        void *done_arg, si_error_t *err);
/* Rows the writer's owner records with the object, in its batch's own
 * catalog transaction (on cat, the cache's connection; the cache's lock is
 * held: fn must not call the cache): what it writes is durable exactly
 * when the object is. After the object's cache row, or, for a writer
 * opened unrecorded, before it: fn then inserts the object's row and sets
 * *object_id to it, or refuses the object (CACHE_RECORD_REFUSED, errno and
 * err set, nothing written), which then fails alone. 0: recorded; -1 (err
 * set) fails the whole batch. Before finish/submit. */
typedef int (*cache_record_fn)(void *arg, catalog_t *cat, int64_t *object_id,
                               si_error_t *err);
#define CACHE_RECORD_REFUSED 1
void cache_writer_on_record(cache_writer_t *w, cache_record_fn fn, void *arg);
/* Waits until a batch commit ended after generation (from
 * cache_commit_generation), or timeout_ms passed; true when one did. For
 * readers waiting for an object to arrive. */
uint64_t cache_commit_generation(cache_t *c);
/* Waits until every submitted object's commit ended and its callback
 * returned (a submitter about to go away calls it after its last submit). */
void cache_commit_drain(cache_t *c);
bool cache_wait_commit(cache_t *c, uint64_t generation, int timeout_ms);
/* The checks of cache_writer_finish alone (EBADMSG on a size or checksum
 * mismatch), so that a reader learns at once whether to read again while
 * the slower commit (cache_writer_finish, which then checks nothing twice)
 * runs elsewhere. After a failure only cache_writer_abort is left. */
int cache_writer_seal(cache_writer_t *w, si_error_t *err);
/* The checksum the bytes must match, learnt after they arrived (an HTTP
 * trailer), before seal/submit: as cache_writer_open's, of the algorithm
 * the writer hashes with. EINVAL when it is not one. */
int cache_writer_expect(cache_writer_t *w, const char *checksum, si_error_t *err);
/* After a successful seal: the checksum of the bytes received ("sha256:<hex>",
 * or md5 when the catalog's checksum is one), so that a caller with no
 * expected checksum need not hash them again. */
const char *cache_writer_checksum(const cache_writer_t *w);
/* Removes the temp file, gives the reservation back, frees the writer. */
void cache_writer_abort(cache_writer_t *w);
uint64_t cache_writer_received(const cache_writer_t *w);

/* ---- pins --------------------------------------------------------------------------- */

/* request_id: the catalog's requests.id. Pinned objects are never evicted.
 * Returns 1 when pinned now, 0 when that request already pinned it; ENOENT
 * when the object is not cached or the request unknown. */
int cache_pin(cache_t *c, int64_t object_id, int64_t request_id, si_error_t *err);
/* Returns 1 when a pin was given back, 0 when there was none. */
int cache_unpin(cache_t *c, int64_t object_id, int64_t request_id, si_error_t *err);
/* Every pin of a request (release); *count (may be NULL) gets how many. */
int cache_unpin_request(cache_t *c, int64_t request_id, uint64_t *count, si_error_t *err);

/* ---- readers ------------------------------------------------------------------------ */

typedef struct {
    int64_t object_id;
    uint64_t size;
    uint64_t pins;
    double last_access;
    bool verified;
} cache_entry_t;

/* Where a cached object's bytes are: size bytes at offset of a file that is
 * the object's own (segment 0, offset 0) or a segment shared with other
 * small objects (catalog: cache.segment, cache.file_offset). */
typedef struct {
    uint64_t size;
    uint64_t offset;
    int64_t segment;
} cache_place_t;

/* Opens a cached object read-only: *fd (the caller closes it) and where in
 * that file its bytes are (read them from place->offset: the file may hold
 * other objects too). The access time is updated in memory and written to
 * the catalog in batches. ENOENT when it is not cached. The bytes stay
 * readable for at least a minute after an eviction (a segment's freed
 * blocks are released that much later; a file of its own while it is open). */
int cache_open_object(cache_t *c, int64_t object_id, int *fd, cache_place_t *place,
                      si_error_t *err);
/* cache_open_object for a reader that has just seen the object's row in the
 * catalog's cache table itself (in the query that found the object) and
 * passes its place: no catalog lookup here, so no statement and only a short
 * hold of the lock. ENOENT when the file is gone (evicted since). */
int cache_open_cached(cache_t *c, int64_t object_id, const cache_place_t *place, int *fd,
                      si_error_t *err);
/* 1 and *out when cached, 0 when not, -1 on error. */
int cache_stat(cache_t *c, int64_t object_id, cache_entry_t *out, si_error_t *err);
/* cache_stat's answer for each of ids into cached[i] (1 cached, 0 not), a
 * few hundred per statement and hold of the lock; -1 on error
 * (then cached[] from the failed one on is not set). */
int cache_stat_many(cache_t *c, const int64_t *ids, size_t n, signed char *cached,
                    si_error_t *err);
/* Every cached object in id order; fn returns non-zero to stop. fn runs
 * under the cache's lock, so it must not call the cache. */
typedef int (*cache_list_fn)(const cache_entry_t *entry, void *arg);
int cache_list(cache_t *c, cache_list_fn fn, void *arg, si_error_t *err);
/* Drops an unpinned object (EBUSY when pinned, ENOENT when absent). */
int cache_remove(cache_t *c, int64_t object_id, si_error_t *err);
/* Writes batched access times now (cache_close and eviction do it too). */
int cache_flush_access(cache_t *c, si_error_t *err);

/* Several instances: whether object_id is being written now, by this
 * instance (a writer open) or by a live other one (a temp file under its
 * tmp/<instance>/), or was placed under objects/ less than grace seconds
 * ago without its row yet (its batch may be committing). 1 yes, 0 no (its
 * writer is gone: a dead instance's, or none), -1 error. Alone: this
 * process's writers only. */
int cache_write_in_progress(cache_t *c, int64_t object_id, double grace, si_error_t *err);

/* The object's path relative to the cache directory, from its id alone
 * ("objects/00/00/000000000000002a"), for an object in a file of its own;
 * EINVAL for ids < 1. */
int cache_object_path(int64_t object_id, char *buf, size_t size, si_error_t *err);
/* The file of a place, relative to the cache directory: the object's own
 * (cache_object_path) or its segment's ("segments/00/00/0000000000000007"). */
int cache_place_path(int64_t object_id, const cache_place_t *place, char *buf, size_t size,
                     si_error_t *err);

#endif
