/* When each stage request is expected to be staged: the backend's forecast
 * (the simulated library replays its queue from the drives' state on a
 * virtual clock with the same scheduler), kept for a moment so that many
 * status polls cost one forecast, and redone as the queue changes. */
#ifndef STAGEIN_RECALL_ETA_H
#define STAGEIN_RECALL_ETA_H

#include <stdint.h>

#include "daemon/archive/backend.h"

typedef struct eta eta_t;

/* max_age_s: a forecast older than this is made again when asked. */
eta_t *eta_new(archive_backend_t *backend, double max_age_s);
void eta_free(eta_t *e);

/* Seconds from now until request_id's last queued item is expected in: 1
 * with *eta_s, 0 when the forecast does not know it (nothing of it queued
 * in the library, or a backend without forecasts). Thread safe. */
int eta_of(eta_t *e, uint64_t request_id, double *eta_s);

#endif
