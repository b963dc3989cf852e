/* The recall service of stageind: takes the SUBMITTED items of stage
 * requests from the catalog (also those requeued at start-up), recalls each
 * object once however many requests want it, reserves cache space first
 * (when the cache is full of pinned data it waits, and the request's error
 * says why), hands the objects to the archive backend in batches per request
 * (priority, deadline), streams their bytes into the cache writer (checksum
 * verified per object, then committed by the cache in batches: one flush and
 * one catalog transaction per batch) and completes every waiting item, in
 * one transaction per batch of finished objects, only once the object is
 * durable and recorded, pinned by each request. Cancelled requests
 * stop their queued work; released requests give their pins back.
 *
 * One thread of its own; its catalog connection is its own. */
#ifndef STAGEIN_RECALL_RECALL_H
#define STAGEIN_RECALL_RECALL_H

#include <stdint.h>
#include <stdio.h>

#include "catalog/catalog.h"
#include "catalog/instances.h"
#include "common/conf.h"
#include "common/error.h"
#include "common/log.h"
#include "daemon/archive/backend.h"
#include "daemon/cache/cache.h"

typedef struct recall_service recall_service_t;

/* This instance among those sharing the catalog (stageind.instance, ...;
 * catalog/instances.h), registered by the caller before the start. */
typedef struct {
    char name[65];
    char host[256];
    double lease_s;               /* a lease's life without a heartbeat */
    double heartbeat_s;
    int volumes_per_drive;        /* volumes with work queued at most, per drive; 0: any */
} recall_instance_t;

typedef struct {
    const si_conf_t *conf;        /* archive.*, library.*, tape.* */
    const recall_instance_t *instance;
    const char *state_dir;
    const catalog_open_opts_t *catalog; /* the service opens its own connection */
    cache_t *cache;               /* opened by the caller, not yet recovered */
    si_log_t *log;
} recall_opts_t;

typedef struct {
    uint64_t objects_recalled;    /* objects brought into the cache */
    uint64_t objects_failed;
    uint64_t items_completed;     /* request items completed (shared ones count each) */
    uint64_t items_from_cache;    /* completed from an object already cached */
    uint64_t items_shared;        /* joined a recall already in flight */
    uint64_t items_failed;
    uint64_t in_flight;           /* objects handed to the backend, not done */
    uint64_t waiting_for_space;   /* 1 while the cache refuses reservations */
    uint64_t cache_dropped;       /* cached copies dropped by start-up recovery */
    uint64_t requeued_at_start;   /* completed items requeued: their object was gone */
    uint64_t left_to_others;      /* objects another instance recalls (its lease) */
    uint64_t volumes_held;        /* volume leases held now */
} recall_stats_t;

/* Recovers the cache (its report's dropped objects: their completed items
 * queued again), opens the backend and starts the service thread. */
recall_service_t *recall_service_start(const recall_opts_t *opts, si_error_t *err);
/* Stops the thread and the backend; work in flight stays STARTED in the
 * catalog (requeued at the next start). */
void recall_service_stop(recall_service_t *rs);

/* New work in the catalog (a stage request made): the service scans for
 * it now instead of at its next poll. arg: the service. Any thread. */
void recall_service_kick(void *rs);

/* The backend, for the push service's archive writes. */
archive_backend_t *recall_service_backend(recall_service_t *rs);
/* The instance's volume leases (catalog/instances.h), which the push
 * service's archive writes hold too: NULL for a backend without volumes. */
volume_holds_t *recall_service_volume_holds(recall_service_t *rs);

void recall_service_stats(recall_service_t *rs, recall_stats_t *out);
/* Prometheus text: the service's counters and the backend's; usable as the
 * control API's metrics hook (control_set_metrics_hook). */
void recall_service_metrics(FILE *out, void *rs);

#endif
