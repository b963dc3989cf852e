/* Stage requests in the catalog: created from dataset names and/or object
 * lists in one transaction (so a request is durable before it is
 * acknowledged), queried, cancelled, released, advanced item by item by the
 * recall engine, and recovered after a restart.
 *
 * Errors return -1 with errno set to say what kind they are, and the reason
 * in err: EINVAL bad input, ENOENT unknown dataset/object/request, EACCES
 * not permitted, EBUSY the request's state forbids it, EIO catalog failure.
 * Nothing is changed on failure. Not thread safe: one caller at a time. */
#ifndef STAGEIN_CATALOG_REQUESTS_H
#define STAGEIN_CATALOG_REQUESTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "catalog/catalog.h"
#include "common/error.h"
#include "common/table.h"

#define REQUESTS_UUID_LEN 36

typedef struct requests requests_t;

/* Prepares the hot statements on the catalog's connection. */
requests_t *requests_open(catalog_t *cat, si_error_t *err);
void requests_close(requests_t *r);

typedef struct {
    uid_t uid;                     /* the request's owner; permissions are */
    gid_t gid;                     /* checked as this user (uid 0: all allowed) */
    const char *job_id;            /* Slurm job id or NULL */
    int priority;                  /* higher first */
    int64_t deadline;              /* unix seconds; 0: none */
    int64_t pin_lifetime;          /* seconds, > 0 */
    const char *const *datasets;   /* dataset names */
    size_t ndatasets;
    /* "bucket/key", or "bucket/prefix/" for every object under the prefix */
    const char *const *files;
    size_t nfiles;
    /* the SPANK allocator's "node:sid" while Slurm has not named the job
     * (a holder the job reconciliation resolves), or NULL */
    const char *submission;
    /* the user's supplementary groups (getgrouplist), also granting a
     * dataset's group class; NULL/0: only gid */
    const gid_t *groups;
    size_t ngroups;
    /* refuse (EFBIG) a request of more bytes than this: the cache could
     * never hold it at once; 0: no limit */
    uint64_t max_bytes;
    /* refuse (EDQUOT) a request that takes the bytes the user has staged or
     * asked to stage (objects pinned by, or waiting in, the user's
     * requests; root is not bound) past this; 0: no limit */
    uint64_t max_user_bytes;
} requests_spec_t;

typedef struct {
    char uuid[REQUESTS_UUID_LEN + 1];
    int64_t id;
    uint64_t files;                /* distinct objects */
    uint64_t bytes;
} requests_created_t;

/* A user may stage a dataset whose mode grants read to the user's class
 * (owner, group, other, like a file); an object named directly when some
 * dataset holding it is readable, or when no dataset holds it. */
int requests_create(requests_t *r, const requests_spec_t *spec, requests_created_t *out,
                    si_error_t *err);

/* Splits manifest text (one "bucket/key" or "bucket/prefix/" per line, '#'
 * comments, blank lines) into lines for spec->files; *lines points into a
 * copy owned by *storage (free both with free()). Errors name the line. */
int requests_manifest_lines(const char *text, size_t len, char ***lines, size_t *nlines,
                            char **storage, si_error_t *err);

typedef struct {
    int64_t object_id;
    char *bucket;
    char *key;
    uint64_t size;
    uint64_t bytes_done;
    char state[12];
    char *error;                   /* NULL unless FAILED */
    double started, finished;      /* unix seconds; 0: not (yet) */
    bool pinned;                   /* in the cache, pinned for this request */
} requests_item_t;

typedef struct {
    int64_t id;
    char uuid[REQUESTS_UUID_LEN + 1];
    uid_t uid;
    gid_t gid;
    char *job_id;
    int priority;
    int64_t deadline;
    int64_t pin_lifetime;
    char state[12];
    char *error;
    double created, updated;
    double finished;               /* 0 while active */
    bool expired;                  /* released because its pin lifetime passed */
    char *end_reason;              /* why it ended (released by whom, expired...) */
    size_t queue_position;         /* 1 = next; 0 when not queued */
    uint64_t bytes_total, bytes_done;
    size_t files_total, files_completed, files_failed, files_cancelled;
    size_t nitems;
    requests_item_t *items;        /* by bucket, key */
} requests_status_t;

/* Owner or root only (EACCES otherwise). caller_uid (uid_t)-1: no check. */
int requests_get(requests_t *r, const char *uuid, uid_t caller_uid, requests_status_t **out,
                 si_error_t *err);
void requests_status_free(requests_status_t *st);
/* The catalog's id of a request (what the ETA forecast goes by), without
 * loading its files; ENOENT for an unknown uuid. */
int requests_id_of(requests_t *r, const char *uuid, int64_t *id, si_error_t *err);

/* Cancels the items not yet finished; the request becomes CANCELLED.
 * Owner or root; EBUSY when it already finished. */
int requests_cancel(requests_t *r, const char *uuid, uid_t caller_uid, si_error_t *err);
/* Binds a request made before its job existed (at submission) to the job
 * that Slurm created (sbatch names it once submitted: running false) or that
 * started on a node (the prolog knows it: running, so its pins do not
 * expire while it runs); array (NULL unless the job is an array task) the array's
 * job id, held until the array's last task ends. The submission holder is
 * resolved. Owner or root; EBUSY when the request is released, or belongs
 * to another job that is not of the same array. */
int requests_bind_job(requests_t *r, const char *uuid, uid_t caller_uid, const char *job,
                      const char *array, bool running, si_error_t *err);
/* The request is no longer needed by anyone: unpins its completed items,
 * cancels the rest, and the request becomes RELEASED, with why (NULL: "by
 * uid N"). Owner or root; EBUSY if released. */
int requests_release(requests_t *r, const char *uuid, uid_t caller_uid, si_error_t *err);
int requests_release_why(requests_t *r, const char *uuid, uid_t caller_uid, const char *why,
                         si_error_t *err);

/* Part of a request (the Tape REST API's cancel or release with "paths"):
 * the items of objects not yet finished are cancelled; a release also
 * gives back their pins. The request then follows its items (COMPLETED or
 * FAILED once nothing waits), and becomes RELEASED once a release leaves
 * it nothing pinned or waiting. Owner or root; EBUSY as for the whole. */
int requests_end_items(requests_t *r, const char *uuid, uid_t caller_uid, bool release,
                       const int64_t *objects, size_t n, si_error_t *err);

/* ---- holders: a request lives while something holds it -------------------- */

typedef enum {
    REQUESTS_HOLDER_SUBMISSION,    /* "node:sid" of the submitting process */
    REQUESTS_HOLDER_JOB,           /* a job id (or an array task's own id) */
    REQUESTS_HOLDER_ARRAY,         /* an array's job id: any of its tasks */
} requests_holder_kind_t;

const char *requests_holder_kind_name(requests_holder_kind_t k);

typedef struct {
    int64_t request_id;
    char uuid[REQUESTS_UUID_LEN + 1];
    uid_t uid;
    double created;                /* the request's */
    requests_holder_kind_t kind;
    char holder[96];
    bool running;
    double since;
} requests_holder_t;

/* Every holder of a request that is not released; *out malloc'd. */
int requests_holders(requests_t *r, requests_holder_t **out, size_t *count, si_error_t *err);

/* The job ids of requests created since (unix seconds), released ones too:
 * a job that had a request never takes another one's submission. */
typedef char requests_job_id_t[65];
int requests_recent_jobs(requests_t *r, double since, requests_job_id_t **out, size_t *count,
                         si_error_t *err);

/* The job ended: its holder goes (kind JOB or ARRAY, or a SUBMISSION that
 * no job claimed); a request left with no holder is released with why.
 * caller_uid as for release ((uid_t)-1: the daemon itself). *released
 * (may be NULL) tells whether the request was released; *array_left
 * (may be NULL) whether an array holder still keeps it. ENOENT when the
 * request has no such holder. */
int requests_unhold(requests_t *r, const char *uuid, uid_t caller_uid,
                    requests_holder_kind_t kind, const char *holder, const char *why,
                    bool *released, bool *array_left, si_error_t *err);

/* Slurm named the job of a submission: the SUBMISSION holder becomes the
 * job's (JOB, or ARRAY for an array's pending record). */
int requests_resolve_submission(requests_t *r, int64_t request_id, const char *submission,
                                requests_holder_kind_t kind, const char *holder,
                                si_error_t *err);

/* Releases every finished request whose pins outlived its lifetime at now
 * (unix seconds) and that no running job holds; each is logged as
 * request.expired. fn (may be NULL) hears each uuid. *count how many. */
typedef void (*requests_expired_fn)(const char *uuid, int64_t pin_lifetime, void *arg);
int requests_expire(requests_t *r, double now, requests_expired_fn fn, void *arg,
                    size_t *count, si_error_t *err);

/* Every request, newest first (at most limit rows; 0: all): request, uid,
 * job, state (EXPIRED for a request released by expiry), files, files_done,
 * files_failed, bytes, bytes_done, created, finished, reason. owner
 * (uid_t)-1: everybody's. active_only: SUBMITTED and STARTED only. */
si_table_t *requests_list(requests_t *r, uid_t owner, bool active_only, size_t limit,
                          si_error_t *err);

/* The active (SUBMITTED, STARTED) requests in queue order: position,
 * request, uid, job, priority, deadline, state, files, files_done, bytes,
 * bytes_done, created. */
si_table_t *requests_queue(requests_t *r, si_error_t *err);

/* ---- for the recall engine ------------------------------------------------ */

/* Items waiting to be recalled, in queue order (priority, then age). The
 * callback returns non-zero to stop early. */
typedef int (*requests_pending_fn)(int64_t request_id, int64_t object_id, int priority,
                                   int64_t deadline, void *arg);
int requests_pending(requests_t *r, requests_pending_fn fn, void *arg, si_error_t *err);

/* Item transitions; each also moves the request along (SUBMITTED -> STARTED
 * -> COMPLETED, or FAILED when every item finished and one failed). A
 * completed item takes a pin on the object's cache row (if present) that
 * release gives back. EBUSY when the item is not in a state that allows it. */
int requests_item_started(requests_t *r, int64_t request_id, int64_t object_id, si_error_t *err);
int requests_item_progress(requests_t *r, int64_t request_id, int64_t object_id,
                           uint64_t bytes_done, si_error_t *err);
int requests_item_completed(requests_t *r, int64_t request_id, int64_t object_id,
                            si_error_t *err);
int requests_item_failed(requests_t *r, int64_t request_id, int64_t object_id,
                         const char *reason, si_error_t *err);
/* Back to SUBMITTED (a completed item whose cache file failed verification
 * gives its pin back). */
int requests_item_requeue(requests_t *r, int64_t request_id, int64_t object_id,
                          si_error_t *err);

/* Batched transitions for the recall service's group commit: many items in
 * the caller's transaction (catalog_begin / catalog_commit on the same
 * connection, so that its own rows, e.g. events, commit with them); each
 * request touched follows its items once. Every item's outcome says what
 * happened to it. -1 on a catalog failure: roll the transaction back. */
typedef enum {
    REQUESTS_ITEM_DONE = 1,        /* moved on */
    REQUESTS_ITEM_BUSY = 2,        /* not in a state that allows it (cancelled) */
    REQUESTS_ITEM_NOT_CACHED = 3,  /* completion only: the object is not cached */
} requests_outcome_t;

typedef struct {
    int64_t request_id;
    int64_t object_id;
    requests_outcome_t outcome;    /* set by the call */
    /* completion: the request's pin of the object is committed already (the
     * cache's commit of the recalled bytes made it), which also proves the
     * object cached: neither is looked up nor written again */
    bool pinned;
} requests_item_outcome_t;

/* SUBMITTED -> STARTED. */
int requests_items_started_in(requests_t *r, requests_item_outcome_t *items, size_t n,
                              si_error_t *err);
/* SUBMITTED/STARTED -> COMPLETED with the item's pin, when the object has a
 * cache row (REQUESTS_ITEM_NOT_CACHED otherwise: queue it again). */
int requests_items_completed_in(requests_t *r, requests_item_outcome_t *items, size_t n,
                                si_error_t *err);

typedef struct {
    uint64_t requeued_items;       /* STARTED -> SUBMITTED */
    uint64_t active_requests;
} requests_recovery_t;

/* At start-up: items that were being recalled when the daemon stopped are
 * queued again (bytes_done reset), in one transaction. */
int requests_recover(requests_t *r, requests_recovery_t *out, si_error_t *err);

typedef struct {
    int64_t request_id;
    int64_t object_id;
} requests_item_ref_t;

/* Completed items of requests not yet released: their cache files are to be
 * verified after a restart. *refs is malloc'd. */
int requests_completed_items(requests_t *r, requests_item_ref_t **refs, size_t *count,
                             si_error_t *err);

/* ---- views for the control API ---------------------------------------------- */

typedef enum {
    REQUESTS_LOCALITY_NONE,
    REQUESTS_LOCALITY_DISK,
    REQUESTS_LOCALITY_TAPE,
    REQUESTS_LOCALITY_DISK_AND_TAPE,
    REQUESTS_LOCALITY_UNAVAILABLE,  /* not in the cache; copies only on disabled volumes */
    REQUESTS_LOCALITY_LOST,         /* not in the cache; copies only on failed volumes */
} requests_locality_t;

const char *requests_locality_name(requests_locality_t l);

/* Who asks: permissions are checked as this user (uid 0: all allowed). */
typedef struct {
    uid_t uid;
    gid_t gid;
    const gid_t *groups;           /* supplementary groups; NULL/0: only gid */
    size_t ngroups;
} requests_caller_t;

/* From the cache and tape_copies tables; ENOENT for an unknown object,
 * EACCES when the caller may not stage it (the same rule as
 * requests_create: some dataset holding it is readable, or none holds it). */
int requests_locality(requests_t *r, const requests_caller_t *caller, const char *bucket,
                      const char *key, requests_locality_t *out, uint64_t *size,
                      si_error_t *err);

#define REQUESTS_NSTATES 6
extern const char *const requests_state_names[REQUESTS_NSTATES];

typedef struct {
    uint64_t by_state[REQUESTS_NSTATES];  /* indexed like requests_state_names */
    uint64_t queued_files, queued_bytes;  /* items SUBMITTED or STARTED */
    uint64_t started_files;
    uint64_t failed_files;
    uint64_t cache_objects, cache_bytes;
    uint64_t cache_pinned_objects, cache_pinned_bytes;
} requests_metrics_t;

int requests_metrics(requests_t *r, requests_metrics_t *out, si_error_t *err);
/* The requests' periodic upkeep where no metrics are read: folds the
 * waiting items' kept totals (catalog_fold_totals); errors are left to the
 * next fold. */
void requests_fold_totals(requests_t *r);

#endif
