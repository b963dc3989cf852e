/* Shared by the recall service's files: the service's state (service.c: its
 * thread's steps and life cycle), the flight table and the backend's sink
 * into the cache (flight.c), and its catalog work (items.c).
 *
 * Locks: mu guards the flight table, the done queue and the counters. The
 * backend's callbacks take mu (with the backend's locks held), so the
 * service thread never holds mu while it calls the backend. */
#ifndef STAGEIN_RECALL_INTERNAL_H
#define STAGEIN_RECALL_INTERNAL_H

#include <pthread.h>
#include <time.h>
#include <stdbool.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "catalog/db.h"
#include "catalog/instances.h"
#include "catalog/requests.h"
#include "common/text.h"
#include "daemon/archive/backend.h"
#include "daemon/cache/cache.h"
#include "daemon/recall/recall.h"

/* The flight table's first size; it doubles once it holds twice as many
 * flights as buckets (a recall puts a volume's objects in flight). */
#define FLIGHT_BUCKETS_MIN 4096
/* Seconds before a batch the backend refused (no such volume yet, ...) is tried again. */
#define BACKEND_RETRY_S 2.0
/* Seconds finished objects gather before their items are completed in one
 * transaction: each transaction also re-counts its requests' items, so one
 * per object (a drive streams thousands per second) would cost O(items)
 * each. */
#define COMPLETE_EVERY_S 0.02
/* ... and a recount costs O(items of the request) (a million-file request:
 * a scan of a million rows), so the next completion waits at least this
 * many times as long as the last one took (at most COMPLETE_MAX_S): the
 * completions take a bounded share of the service thread whatever the
 * request's size, and less while the CPUs are busy. */
#define COMPLETE_SPACING 8.0
#define COMPLETE_MAX_S 0.5
/* Seconds between scans for cancelled and released requests. */
#define HOUSEKEEPING_S 0.2

enum {
    SQL_OBJECT,
    SQL_COPIES,
    SQL_OBJECTS,           /* SQL_OBJECT and SQL_COPIES for a list of objects */
    SQL_OBJECTS_COPIES,
    SQL_REQUEST_STATE,
    SQL_RELEASED_PINS,
    SQL_NOTE_SET,
    SQL_NOTE_CLEAR,
    SQL_COUNT
};

/* An object handed to the backend, and the requests waiting for it. */
typedef struct flight {
    struct flight *next;
    int64_t object_id;
    uint64_t size;
    uint64_t bytes, bytes_saved;
    int64_t *waiters;
    size_t nwaiters, cap;
    bool cancelled;
    /* the bytes are checked and their commit to the cache is queued: the
     * backend's done waits here until the commit has happened */
    bool committing;
    bool committed;            /* its bytes are in the cache, verified */
    int64_t pinned;            /* once committed: the request it was pinned for (0: none) */
    struct done *deferred;     /* a done that arrived while committing */
    char *commit_error;        /* a failed commit: the done reports it */
    /* the volumes of its copies handed to the backend (their leases held) */
    char vols[ARCHIVE_MAX_COPIES][ARCHIVE_LABEL_MAX + 1];
    int nvols;
} flight_t;

typedef struct recall_site recall_site_t;

typedef struct done {
    struct done *next;
    int64_t object_id;
    bool ok;
    char why[];
} done_t;

typedef struct {
    int64_t request;
    char text[300];
} note_t;

typedef struct {
    int64_t request_id, object_id;
    int priority;
    int64_t deadline;
} pending_t;

typedef struct session {
    cache_writer_t *w;
    int64_t object_id;
    bool present;              /* already cached: the bytes are not needed */
} session_t;

struct recall_service {
    si_log_t *log;
    cache_t *cache;
    catalog_t *cat;
    requests_t *rq;
    db_stmt_t *stmt[SQL_COUNT];
    archive_backend_t *backend;
    double progress_interval, poll_interval;

    recall_instance_t inst;
    recall_site_t *site;       /* the heartbeat */
    bool volume_leases;        /* a backend with volumes: one drive of the site per volume */
    /* the instance's volume leases, shared with the push's archive writes
     * (catalog/instances.h); a flight is one user of each of its volumes */
    volume_holds_t *holds;

    pthread_t thread;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    flight_t **flights;        /* chained by object id, nbuckets (a power of two) */
    size_t nbuckets;
    done_t *done_head, **done_tail;
    size_t ndone;              /* queued dones */
    double done_since;         /* monotonic seconds of the oldest queued done */
    double complete_gap;       /* seconds the dones gather (COMPLETE_SPACING) */
    recall_stats_t st;

    /* Checked objects are committed by the cache in batches (group
     * commit, cache_writer_submit), off the backend's reading threads: a
     * drive goes on to its next read while earlier objects are made
     * durable. */
    pthread_cond_t commit_cv;  /* a commit ended */
    bool kicked;               /* new work in the catalog: scan now */

    /* service thread only */
    note_t *notes;
    size_t nnotes, cap_notes;
    double retry_after, last_housekeeping, last_progress, last_scan;
};

typedef struct {
    requests_item_outcome_t *v;
    size_t n, cap;
} item_list_t;

/* ---- the flight table (flight.c; mu held) ---- */
/* Puts f in the table (the in-flight count goes up); -1 when out of memory. */
int recall_flight_insert(recall_service_t *rs, flight_t *f);
flight_t *recall_flight_get(recall_service_t *rs, int64_t object_id);
/* Takes it out of the table (the in-flight count goes down). */
flight_t *recall_flight_remove(recall_service_t *rs, int64_t object_id);
/* mu held: every object in flight has its done queued. Their drain is due
 * now: with nothing more coming, spacing the drains saves nothing and
 * only delays the requests' completion (up to COMPLETE_MAX_S). */
static inline bool recall_all_done(const recall_service_t *rs)
{
    return rs->ndone >= rs->st.in_flight;
}
/* 1: added, 0: already waiting, -1: out of memory. */
int recall_flight_add_waiter(flight_t *f, int64_t request);
void recall_flight_free(flight_t *f);
/* The backend's callbacks: its bytes into the cache writer, its word on
 * each object into the done queue. */
archive_recall_cb_t recall_backend_callbacks(recall_service_t *rs);

/* ---- the catalog (items.c; service thread) ---- */
int recall_statements_prepare(recall_service_t *rs, si_error_t *err);
void recall_statements_finalize(recall_service_t *rs);
/* A prepared statement, reset and unbound. */
db_stmt_t *recall_stmt(recall_service_t *rs, int id);
/* Size, checksum, names and readable copies of an object (0 copies is
 * possible); the names are one allocation ("bucket\0key" at item->bucket),
 * freed by whoever ends up holding the item (submit_batch for the backend). */
int recall_load_item(recall_service_t *rs, int64_t object_id, archive_item_t *item,
                     si_error_t *err);
/* recall_load_item for each of ids (which may repeat), two statements per
 * few hundred objects; an item that could not be loaded has no names (bucket NULL: the
 * caller asks recall_load_item again for the reason). */
void recall_load_items(recall_service_t *rs, const int64_t *ids, size_t n, archive_item_t *items);
bool recall_request_active(recall_service_t *rs, int64_t request);
/* Says in the request's status why it waits; "" clears that note. */
void recall_note(recall_service_t *rs, int64_t request, const char *text);
int recall_item_list_add(item_list_t *l, int64_t request, int64_t object);
/* The items STARTED, or COMPLETED (pinned; "object.recalled" events for
 * the recalled flights in the same transaction), in one transaction. On a
 * catalog failure every outcome is left 0 and -1 returned. */
int recall_items_commit(recall_service_t *rs, item_list_t *l, bool complete,
                        flight_t **recalled, size_t nrecalled);
/* Completions in one batch; an item whose object is no longer cached is
 * queued again (and a scan is due). Returns how many completed. */
size_t recall_complete_items(recall_service_t *rs, item_list_t *l, flight_t **recalled,
                             size_t nrecalled);


/* ---- the site: instances sharing the catalog (site.c) ---- */
recall_site_t *recall_site_start(const recall_instance_t *inst, const catalog_open_opts_t *copts,
                                 si_log_t *log, void (*kick)(void *), void *kick_arg,
                                 si_error_t *err);
void recall_site_stop(recall_site_t *site);
/* false while the heartbeat fails: no new work is taken */
bool recall_site_healthy(recall_site_t *site);
void recall_site_metrics(recall_site_t *site, FILE *out);
/* Object leases for the objects, in one transaction: claimed[i] true when
 * this instance recalls objects[i]; -1 (none claimed) on a catalog error. */
int recall_claim_objects(recall_service_t *rs, const int64_t *objects, size_t n, bool *claimed);
/* Gives them back (inside the caller's transaction when one is open). */
int recall_release_objects(recall_service_t *rs, const int64_t *objects, size_t n);
/* Keeps the item's copies on volumes this instance holds or could claim
 * (within stageind.volumes_per_drive busy volumes per drive), recorded in f; 1 when one
 * is left, 0 when the object is another instance's to recall. */
int recall_claim_volumes(recall_service_t *rs, archive_item_t *item, flight_t *f);
/* The volumes out of reach for one scan: those other live instances hold,
 * and whether this instance has room for another volume. */
typedef struct {
    char (*others)[ARCHIVE_LABEL_MAX + 1];
    size_t nothers, cap;
    char (*planned)[ARCHIVE_LABEL_MAX + 1]; /* volumes this scan means to claim */
    size_t nplanned, cap_planned;
    size_t room;               /* more volumes this instance may take (SIZE_MAX: any) */
} recall_volume_view_t;
void recall_volume_view(recall_service_t *rs, recall_volume_view_t *view);
void recall_volume_view_free(recall_volume_view_t *view);
/* true when one of the item's copies is on a volume this instance holds
 * or could claim (always, for a backend without volumes or an item
 * without copies) */
bool recall_volumes_in_reach(recall_service_t *rs, recall_volume_view_t *view,
                             const archive_item_t *item);
/* The flight left the backend: its volumes are one object less busy. */
void recall_flight_volumes_done(recall_service_t *rs, flight_t *f);
/* Volume leases with nothing queued and not loaded in a drive go back. */
void recall_release_idle_volumes(recall_service_t *rs);

#endif
