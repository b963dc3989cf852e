/* stageind's archive backends: where recalled bytes come from and where
 * pushed files go. A backend is a vtable so that other archives (an S3
 * Glacier-style gateway, an HSM file system: issue 8) plug in beside the
 * embedded `sim` backend (the simulated tape library of daemon/simlib with
 * the recall scheduler of daemon/sched and the volume images of
 * daemon/volume).
 *
 * Recall: the caller (the recall service, recall/recall.h) hands the
 * backend items, each one object with its tape copies, grouped into batches
 * that share a priority and a deadline (one batch per stage request, which is
 * what the scheduler optimises: the time each batch completes). The backend
 * decides mount choice and read order, streams each object's bytes into the
 * caller's sink (begin / write / commit, or abort), reports progress, and
 * finally reports every item exactly once through `done`: ok, or failed with
 * a reason naming volume and position. The backend never touches the
 * catalog; the caller records what happened.
 *
 * An object must not be recalled twice at the same time (the caller dedups);
 * once `done` reported it, it may be recalled again (after an eviction, or to
 * retry).
 *
 * Archive write: one aggregate (members already in the cache, as files) ->
 * one archive file on each of ncopies distinct volumes; blocks until every
 * copy is durable (fsync'd) and returns each member's placement per copy.
 * A backend in front of an archive that places files itself (s3, hsm)
 * reports its own pseudo-volume (archive.s3.volume, archive.hsm.volume) at
 * position 0: the catalog then knows which archive holds the object, and
 * the object's tape position stays unknown.
 *
 * Threads: recall, cancel, archive, status and metrics may be called from any
 * thread. Sink and event callbacks run on a backend thread with the backend's
 * locks held: they must not call back into the backend, and a caller must not
 * hold a lock that its callbacks take while it calls the backend. */
#ifndef STAGEIN_ARCHIVE_BACKEND_H
#define STAGEIN_ARCHIVE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/checksum.h"
#include "common/conf.h"
#include "common/error.h"
#include "common/log.h"

#define ARCHIVE_MAX_COPIES 4
#define ARCHIVE_LABEL_MAX 32

/* ---- configuration: the "archive" group of stagein.conf ------------------- */

/* archive.backend ("sim", "s3", "hsm"), archive.checksum_retries,
 * archive.progress_interval, archive.poll_interval */
extern const si_conf_key_t archive_conf_keys[];
/* archive.s3.* (s3.c) and archive.hsm.* (hsm.c) */
extern const si_conf_key_t archive_s3_conf_keys[];
extern const si_conf_key_t archive_hsm_conf_keys[];
extern const si_conf_key_t archive_tape_conf_keys[];

/* ---- recall ------------------------------------------------------------------ */

/* One tape copy of an object (a row of the catalog's tape_copies). */
typedef struct {
    int copy;                          /* 1..N, the catalog's copy number */
    char volume[ARCHIVE_LABEL_MAX + 1];
    int64_t file_seq;                  /* archive file on the volume, -1 unknown */
    uint64_t position;                 /* data offset from BOT */
    uint64_t length;                   /* bytes on tape */
} archive_copy_t;

typedef struct {
    int64_t object_id;                 /* catalog object id */
    /* The object's name in the catalog; valid during recall() only (a
     * backend that needs it later copies it; sim does not use it). */
    const char *bucket;
    const char *key;
    uint64_t size;                     /* expected bytes */
    char checksum[SI_CHECKSUM_TEXT_MAX]; /* expected "sha256:hex", "" when unknown */
    int ncopies;                       /* 0..ARCHIVE_MAX_COPIES (0: see copies_optional) */
    archive_copy_t copies[ARCHIVE_MAX_COPIES];
} archive_item_t;

/* A batch of items that complete together for somebody (a stage request). */
typedef struct {
    uint64_t id;                       /* caller's id (the catalog request id) */
    int priority;                      /* higher first */
    double deadline;                   /* unix seconds the data is wanted by; 0: none */
} archive_batch_t;

/* Where one attempt at an item's bytes goes (the cache writer). begin is
 * called before the first byte of each attempt (an attempt that fails is
 * aborted and may be followed by another one: a re-read after a checksum
 * mismatch, another copy); commit verifies size and checksum and makes the
 * object durable. Any of them returning -1 fails that attempt with err's
 * text. commit ends the session whatever it returns (no abort after it);
 * errno EBADMSG from commit says "the bytes did not match" (a re-read may help). */
typedef struct {
    int (*begin)(void *arg, const archive_item_t *item, void **session, si_error_t *err);
    int (*write)(void *arg, void *session, const void *buf, size_t len, si_error_t *err);
    int (*commit)(void *arg, void *session, si_error_t *err);
    void (*abort)(void *arg, void *session);
    /* Bytes of the item delivered so far in the current attempt (optional). */
    void (*progress)(void *arg, int64_t object_id, uint64_t bytes);
    /* Final outcome of an item: ok (committed), or failed with why (every
     * copy tried, or cancelled: why then says so). Exactly once per item. */
    void (*done)(void *arg, int64_t object_id, bool ok, const char *why);
    void *arg;
    /* Optional, like write: the next len bytes of the attempt taken from
     * the file open at fd from offset off, copied by the kernel where it can
     * (copy_file_range) and verified as written bytes are. NULL: the backend
     * reads the file and calls write. */
    int (*write_fd)(void *arg, void *session, int fd, uint64_t off, uint64_t len,
                    si_error_t *err);
    /* Optional, like write: where the attempt's next bytes are kept (a
     * small object's buffer in the cache) and how many may come (*len), so
     * that a backend reading into memory of its own choice reads them there
     * and calls landed instead of write: the bytes are not copied again.
     * NULL from room (or no room): write as usual. */
    void *(*room)(void *arg, void *session, size_t *len);
    int (*landed)(void *arg, void *session, size_t len, si_error_t *err);
} archive_recall_cb_t;

/* ---- archive write ---------------------------------------------------------- */

typedef struct {
    const char *bucket;
    const char *key;
    const char *path;                  /* the member's bytes (a cache file) */
    uint64_t size;
    int64_t mtime;                     /* unix seconds */
    const char *checksum;              /* expected "sha256:hex", or NULL */
    /* What the S3 client stored with it (catalog object_meta), NULL: none;
     * sim keeps them on the volume (pax header) for `stagein tape import`,
     * s3 and hsm do not need them (the catalog holds them). */
    const char *headers;               /* "name: value\n" lines */
    const char *storage_class;
    uint64_t offset;                   /* where in path's file the bytes start: > 0, a
                                        * range of a cache segment (si_open_range) */
} archive_member_t;

/* Where one member landed in one copy. */
typedef struct {
    int copy;                          /* 1..ncopies */
    char volume[ARCHIVE_LABEL_MAX + 1];
    int64_t file_seq;                  /* the archive file's sequence number */
    uint64_t position;                 /* member data offset from BOT */
    uint64_t length;                   /* bytes on tape (= size) */
    uint64_t volume_used;              /* the volume's end of data after the write */
} archive_placement_t;

/* ---- status ------------------------------------------------------------------- */

typedef struct {
    const char *backend;               /* "sim", "s3", "hsm" */
    int drives, drives_busy, drives_failed;
    int volumes;
    uint64_t mounts;
    uint64_t reads, read_failures;     /* completed reads, failed copies */
    uint64_t bytes_read, bytes_written;
    uint64_t archive_files_written;
    uint64_t queued_items, queued_bytes; /* handed over, not yet done */
    double clock_s;                    /* the backend's own clock (sim: simulated s) */
} archive_status_t;

/* ---- forecast -------------------------------------------------------------------- */

typedef struct {
    uint64_t batch;                    /* the batch id (the catalog request id) */
    double eta_s;                      /* seconds from now until its last item is in */
    size_t items;                      /* items of it still queued */
} archive_forecast_t;

/* ---- the vtable ----------------------------------------------------------------- */

typedef struct archive_backend archive_backend_t;

typedef struct {
    const char *name;
    /* Queues items (copied) of one batch. All or nothing: on failure no
     * item is queued and no callback will run for them. */
    int (*recall)(archive_backend_t *b, const archive_batch_t *batch,
                  const archive_item_t *items, size_t n, si_error_t *err);
    /* Nobody wants the object any more: its bytes are not delivered (done
     * reports it failed with "cancelled"). Returns 1 when it was queued, 0
     * when unknown or already done. */
    int (*cancel)(archive_backend_t *b, int64_t object_id);
    /* One aggregate of n members to ncopies distinct volumes; placements has
     * n * ncopies entries, placements[i * ncopies + c] for member i, copy
     * c + 1. On failure nothing is returned; a copy already appended stays
     * on its volume as an archive file nothing refers to (tape is append
     * only), like a real library's interrupted write. */
    int (*archive)(archive_backend_t *b, const archive_member_t *members, size_t n,
                   int ncopies, archive_placement_t *placements, si_error_t *err);
    int (*status)(archive_backend_t *b, archive_status_t *out, si_error_t *err);
    /* Appends Prometheus text (per-drive states, mounts, bytes) to out. */
    void (*metrics)(archive_backend_t *b, FILE *out);
    /* Stops threads; queued items are not reported. Frees everything. */
    void (*free)(archive_backend_t *b);
    /* true: items without tape copies are recalled too (the archive behind
     * the backend knows where its objects are: s3, hsm); false (sim): such
     * an item fails before it reaches the backend. */
    bool copies_optional;
    /* Optional: when each batch still queued is expected to be done, from
     * the library's state now (*out malloc'd, one entry per batch id). */
    int (*forecast)(archive_backend_t *b, archive_forecast_t **out, size_t *n, si_error_t *err);
} archive_backend_ops_t;

/* How an archive write asks for the volumes it would write (see
 * archive_backend.write_claims). */
typedef struct {
    /* a write finding every volume with room claimed by other instances asks
     * again every ARCHIVE_CLAIM_POLL_S, for ARCHIVE_CLAIM_WAIT_S at most */
#define ARCHIVE_CLAIM_WAIT_S 600.0
#define ARCHIVE_CLAIM_POLL_S 0.1
    int (*claim)(void *arg, const char *label, si_error_t *err);
    void (*unclaim)(void *arg, const char *label);
    void *arg;
} archive_write_claims_t;

struct archive_backend {
    const archive_backend_ops_t *ops;
    void *impl;
    /* Optional (set by the backend after allocating; NULL: it does not
     * say): 1 while the volume is in one of its drives or on its way there,
     * 0 when not. The recall service keeps its volume lease while it is 1,
     * so that no other instance of the site mounts the volume meanwhile. */
    int (*volume_loaded)(archive_backend_t *b, const char *label);
    /* Optional (set by the writer, the push service of an instance that
     * shares its site; NULL: every volume may be written): an archive write
     * asks claim for each volume it would choose, in its order of
     * preference, before the volume is chosen and mounted: 1 the volume is
     * the writer's for this write, 0 another instance holds it (the next is
     * tried; when no volume with room is free the write waits for one),
     * -1 error. unclaim gives back one the write will not use. Called one
     * at a time, never under the backend's engine or drive-state lock. */
    archive_write_claims_t write_claims;
};

typedef struct {
    const si_conf_t *conf;             /* the whole stagein.conf (library.*, tape.*) */
    const char *state_dir;             /* volumes default to <state_dir>/volumes */
    archive_recall_cb_t cb;
    si_log_t *log;                     /* borrowed, for what start-up repaired; may be NULL */
} archive_backend_opts_t;

/* The backend archive.backend names (default "sim"), started. */
archive_backend_t *archive_backend_new(const archive_backend_opts_t *opts, si_error_t *err);

/* Convenience wrappers over the vtable. */
int archive_recall(archive_backend_t *b, const archive_batch_t *batch,
                   const archive_item_t *items, size_t n, si_error_t *err);
int archive_cancel(archive_backend_t *b, int64_t object_id);
/* -1 with errno ENOTSUP when the backend cannot say. */
int archive_forecast(archive_backend_t *b, archive_forecast_t **out, size_t *n,
                     si_error_t *err);
/* For backends that forecast by replaying requests: the entry of batch in
 * list[0..*n) (appended when new; list has room), its ETA the latest of
 * its requests' (a batch ends with the last of them). */
archive_forecast_t *archive_forecast_add(archive_forecast_t *list, size_t *n, uint64_t batch,
                                         double eta_s);
int archive_write(archive_backend_t *b, const archive_member_t *members, size_t n, int ncopies,
                  archive_placement_t *placements, si_error_t *err);
int archive_status(archive_backend_t *b, archive_status_t *out, si_error_t *err);
void archive_metrics(archive_backend_t *b, FILE *out);
/* 1 loaded, 0 not, -1 the backend cannot say (ops->volume_loaded NULL). */
int archive_volume_loaded(archive_backend_t *b, const char *label);
/* The Prometheus counters of a backend with drives (sim, tape) from its status. */
void archive_metrics_library(FILE *out, const archive_status_t *st);
/* The drive-state gauge of such a backend: its help and type, naming the
 * library ("the library", "the simulated library"), then one line a drive. */
void archive_metrics_drive_states(FILE *out, const char *library);
void archive_metrics_drive_state(FILE *out, int drive, const char *state, const char *volume);
void archive_backend_free(archive_backend_t *b);

/* The `sim` backend (sim.c). */
archive_backend_t *archive_sim_new(const archive_backend_opts_t *opts, si_error_t *err);
/* The `s3` backend (s3.c): an S3 Glacier-style tape gateway, over libcurl. */
archive_backend_t *archive_s3_new(const archive_backend_opts_t *opts, si_error_t *err);
/* The `hsm` backend (hsm.c): an archive file system (ScoutFS, Lustre HSM, ...). */
archive_backend_t *archive_hsm_new(const archive_backend_opts_t *opts, si_error_t *err);
/* The `tape` backend (tape.c): a real library over SCSI (daemon/scsi). */
archive_backend_t *archive_tape_new(const archive_backend_opts_t *opts, si_error_t *err);

#endif
