/* Shared between the archive files, the recall service and the benchmark. */
#ifndef STAGEIN_ARCHIVE_INTERNAL_H
#define STAGEIN_ARCHIVE_INTERNAL_H

#include <stddef.h>

#include "common/conf.h"
#include "common/error.h"
#include "daemon/archive/backend.h"
#include "daemon/simlib/engine.h"

/* The sim backend's library from the configuration, with the daemon's
 * defaults (4 drives, time_scale 0.001) where it says nothing, and its
 * volume directory (library.volume_dir, else <state_dir>/volumes). A
 * virtual clock (time_scale 0) is refused: the daemon runs in real time. */
int archive_sim_config(const si_conf_t *conf, const char *state_dir, simlib_config_t *cfg,
                       char *dir, size_t dirsize, si_error_t *err);

/* ---- shared by every backend (helpers.c) ---- */

/* A backend of ops with its implementation struct (impl_size bytes) zeroed
 * in b->impl; NULL with "out of memory". Freed by the backend: free(b->impl),
 * free(b). */
archive_backend_t *archive_backend_alloc(const archive_backend_ops_t *ops, size_t impl_size,
                                         si_error_t *err);
/* Frees recs[0..n) (NULL entries are skipped: handed over) and the array;
 * recs may be NULL. */
void archive_records_free(void **recs, size_t n);

/* ---- shared by the backends that forecast by replaying their queue (forecast.c) ---- */

/* A backend's queue replayed on a virtual clock by the engine (lib), for
 * its forecast: the batch of each request submitted and when it was done. */
typedef struct {
    simlib_t *lib;
    double *done_at;               /* per submitted request (1-based ids), virtual s */
    uint64_t *batch;               /* the batch of each submitted request */
    size_t n;                      /* requests submitted */
} archive_replay_t;

/* Room for most requests, and the engine on cfg reporting to rp. -1 with
 * err ("out of memory" where the engine said nothing); archive_replay_free
 * cleans up either way. */
int archive_replay_start(archive_replay_t *rp, size_t most, const simlib_config_t *cfg,
                         const sched_policy_t *policy, const sched_options_t *so,
                         si_error_t *err);
/* Submits a request of batch at virtual time 0; deadline in virtual s from
 * then (0: none). */
int archive_replay_submit(archive_replay_t *rp, uint64_t batch, int priority, double deadline,
                          const sched_file_t *files, size_t n, si_error_t *err);
void archive_replay_free(archive_replay_t *rp);

/* ---- shared by the backends in front of an archive of their own (external.c) ---- */

/* The pseudo-volume label at conf path (default def): a valid volume label. */
int archive_pseudo_volume(const si_conf_t *conf, const char *path, const char *def,
                          char out[ARCHIVE_LABEL_MAX + 1], si_error_t *err);

/* The archive behind such a backend keeps its own copies: push.copies > 1
 * is refused at start (the setting's file:line), and so is a write that
 * asks for more than one copy. */
int archive_single_copy_conf(const si_conf_t *conf, const char *backend, si_error_t *err);
int archive_single_copy_check(const char *backend, int ncopies, si_error_t *err);

/* The placement of a member written to such an archive: copy 1 on the
 * pseudo-volume at position 0 (the archive knows where; the catalog does not). */
void archive_pseudo_placement(const char *volume, uint64_t size, uint64_t volume_used,
                              archive_placement_t *out);

/* An item copied for a backend's queue, its names owned (bucket and key
 * point into the same allocation); NULL with err when it has no name. */
archive_item_t *archive_item_copy(const archive_item_t *item, si_error_t *err);

/* Such a backend's queue: its records (the backend's own structs) in the
 * order queue until taken, and in the live table until reported (cancel,
 * status). Not thread-safe: under the backend's lock. */
typedef struct archive_order archive_order_t;
typedef struct archive_order_entry archive_order_entry_t;
typedef struct {
    archive_order_t *order;
    void **live;
    size_t nlive, cap;
    uint64_t live_bytes;
} archive_queue_t;

int archive_queue_init(archive_queue_t *q, const char *pseudo_volume, si_error_t *err);
/* Frees the table and the order queue (the records are the caller's). */
void archive_queue_free(archive_queue_t *q);
/* Queues recs[0..n) for the batch's items (items[i] describes recs[i]),
 * all or nothing; entries[i] receives each one's handle in the order queue. */
int archive_queue_add(archive_queue_t *q, const archive_batch_t *batch,
                      const archive_item_t *items, void **recs, size_t n,
                      archive_order_entry_t **entries, si_error_t *err);
/* Takes a reported record out of the live table. */
void archive_queue_forget(archive_queue_t *q, const void *rec, uint64_t size);

/* Such a backend's counters (under its lock): what its status reports. */
typedef struct {
    uint64_t reads, read_failures, bytes_read, bytes_written, files_written;
} archive_counts_t;

/* The status of such a backend (named backend): its counters and its
 * queue; under the backend's lock. */
void archive_external_status(const char *backend, const archive_counts_t *c,
                             const archive_queue_t *q, archive_status_t *out);

#endif
