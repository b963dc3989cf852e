/* The order in which a backend that owns no drives (s3, hsm) hands recalls
 * to the archive behind it: the most urgent batch first (priority, then
 * deadline, then arrival, as the sim backend's scheduler weighs requests),
 * and, where the catalog knows tape positions, volume by volume: the whole
 * queue's items on the urgent item's volume, in the scheduler's LINEAR read
 * order (read_order.h), so that the archive reads each volume in one pass.
 * Items without a known position go out in urgency order, in bounded takes,
 * so that the archive can order them itself.
 *
 * Not thread-safe: the backend calls it under its own lock. */
#ifndef STAGEIN_ARCHIVE_ORDER_H
#define STAGEIN_ARCHIVE_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "daemon/archive/backend.h"

typedef struct archive_order archive_order_t;
/* One queued entry, returned by add so that it can be withdrawn. */
typedef struct archive_order_entry archive_order_entry_t;

/* pseudo_volume: the label of the volume the backend itself records for
 * what it writes (archive.s3.volume, archive.hsm.volume): copies on it say
 * where the object is, not where on tape, so they count as unknown. */
archive_order_t *archive_order_new(const char *pseudo_volume, si_error_t *err);
void archive_order_free(archive_order_t *o);

/* Queues the caller's pointers values[0..n) for the items of one batch
 * (items[i] describes values[i]: its first copy is the position used).
 * entries (optional) receives each one's handle. All or nothing. */
int archive_order_add(archive_order_t *o, const archive_batch_t *batch,
                      const archive_item_t *items, void *const *values, size_t n,
                      archive_order_entry_t **entries, si_error_t *err);

/* Takes up to max values in the order described above into out; returns
 * how many (0 when the queue is empty). */
size_t archive_order_take(archive_order_t *o, size_t max, void **out);

/* Withdraws a queued entry (cancel); false when it was already taken. */
bool archive_order_remove(archive_order_t *o, archive_order_entry_t *entry);

size_t archive_order_count(const archive_order_t *o);

/* Whether the item's position on tape is known (a copy on a real volume). */
bool archive_order_position_known(const archive_order_t *o, const archive_item_t *item);

#endif
