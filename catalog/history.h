/* The catalog's history kept for a time: requests that ended and pushes
 * whose files are all archived, removed once older than the site keeps
 * them (catalog.history_days), so that a site's tables grow with its
 * activity of the last months, not with all it ever did. */
#ifndef STAGEIN_CATALOG_HISTORY_H
#define STAGEIN_CATALOG_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/error.h"

typedef struct {
    uint64_t requests, request_items; /* ended requests and their items */
    uint64_t pushes, push_files;      /* archived pushes and their files */
} catalog_history_purged_t;

/* Removes what finished before `before` (wall-clock seconds): requests that
 * ended (RELEASED, FAILED, CANCELLED) and have not changed since, with their
 * items, holders and pins, and pushes not changed since whose every file is
 * DURABLE or DISCARDED, with their files' push rows (the objects, their tape
 * copies and their datasets stay). In transactions of at most `batch`
 * requests or pushes, so that other writers wait for one batch at most.
 * dry_run: counts what would go, changes nothing. */
int catalog_history_purge(catalog_t *cat, double before, size_t batch, bool dry_run,
                          catalog_history_purged_t *out, si_error_t *err);

#endif
