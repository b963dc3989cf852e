/* The recall order of backends without drives: urgency across batches,
 * volume by volume in position order where positions are known (taking
 * lower-priority items on the same volume along), bounded takes of items
 * without positions, copies on the backend's pseudo-volume counted as
 * unknown, withdrawal. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/archive/order.h"
#include "daemon/archive/test/item.h"

static archive_item_t item(int64_t id, const char *volume, uint64_t position)
{
    return test_item(id, 1000, volume, position);
}

/* Takes everything, max at a time, as "id id id|id id|..." */
static void take_all(archive_order_t *o, size_t max, char *out, size_t size)
{
    void *got[64];
    size_t n, len = 0;
    out[0] = '\0';
    while ((n = archive_order_take(o, max, got)) > 0) {
        for (size_t i = 0; i < n; i++)
            len += (size_t)snprintf(out + len, size - len, "%s%ld", i ? " " : "",
                                    (long)(intptr_t)got[i]);
        len += (size_t)snprintf(out + len, size - len, "|");
    }
}

static int add(archive_order_t *o, archive_batch_t b, const archive_item_t *items, size_t n,
               archive_order_entry_t **entries)
{
    void *values[16];
    for (size_t i = 0; i < n; i++)
        values[i] = (void *)(intptr_t)items[i].object_id;
    return archive_order_add(o, &b, items, values, n, entries, NULL);
}

int main(void)
{
    char got[512];
    archive_order_t *o = archive_order_new("S3", NULL);
    ok(o != NULL, "a queue");

    /* one batch over two volumes, given out of order */
    archive_item_t a[] = {item(1, "V2", 500), item(2, "V1", 900), item(3, "V1", 100),
                          item(4, "V2", 50), item(5, "V1", 400)};
    add(o, (archive_batch_t){1, 0, 0}, a, 5, NULL);
    is_int(archive_order_count(o), 5, "five queued");
    take_all(o, 10, got, sizeof(got));
    is_str(got, "4 1|3 5 2|", "the urgent item's volume first, each volume in position order");
    is_int(archive_order_count(o), 0, "empty after");

    /* takes are bounded; the rest of the volume follows */
    add(o, (archive_batch_t){2, 0, 0}, a, 5, NULL);
    take_all(o, 2, got, sizeof(got));
    is_str(got, "4 1|3 5|2|", "max 2 per take: a volume's items stay in position order");

    /* a more urgent batch goes first; a lower one's items on the same volume
     * ride along, so the volume is read once */
    archive_item_t low[] = {item(10, "V1", 300), item(11, "V3", 10)};
    archive_item_t high[] = {item(20, "V1", 700)};
    add(o, (archive_batch_t){3, 0, 0}, low, 2, NULL);
    add(o, (archive_batch_t){4, 5, 0}, high, 1, NULL);
    take_all(o, 10, got, sizeof(got));
    is_str(got, "10 20|11|", "priority 5 first, with priority 0's item on V1 in position order");

    /* deadlines: an earlier deadline first, any deadline before none */
    archive_item_t d1[] = {item(30, NULL, 0)}, d2[] = {item(31, NULL, 0)},
                   d3[] = {item(32, NULL, 0)};
    add(o, (archive_batch_t){5, 0, 0}, d1, 1, NULL);
    add(o, (archive_batch_t){6, 0, 2000}, d2, 1, NULL);
    add(o, (archive_batch_t){7, 0, 1000}, d3, 1, NULL);
    take_all(o, 1, got, sizeof(got));
    is_str(got, "32|31|30|", "deadline 1000, then 2000, then none");

    /* unknown positions: urgency order, bounded; the pseudo-volume is unknown */
    archive_item_t u[] = {item(40, NULL, 0), item(41, "S3", 0), item(42, NULL, 0),
                          item(43, "S3", 0), item(44, NULL, 0)};
    ok(!archive_order_position_known(o, &u[1]), "a copy on the pseudo-volume: position unknown");
    ok(archive_order_position_known(o, &a[0]), "a copy on a tape volume: known");
    add(o, (archive_batch_t){8, 0, 0}, u, 5, NULL);
    take_all(o, 2, got, sizeof(got));
    is_str(got, "40 41|42 43|44|", "unknown positions: arrival order, 2 at a time");

    /* a batch mixing unknown and known items: the urgent item decides */
    archive_item_t mix[] = {item(50, NULL, 0), item(51, "V9", 20), item(52, "V9", 10),
                            item(53, NULL, 0)};
    add(o, (archive_batch_t){9, 0, 0}, mix, 4, NULL);
    take_all(o, 10, got, sizeof(got));
    is_str(got, "50 53|52 51|", "the unknown ones first (the first item has none), then V9");

    /* withdrawal */
    archive_order_entry_t *e[5];
    add(o, (archive_batch_t){10, 0, 0}, a, 5, e);
    ok(archive_order_remove(o, e[2]), "a queued entry withdrawn");
    ok(!archive_order_remove(o, e[2]), "not twice");
    is_int(archive_order_count(o), 4, "four left");
    take_all(o, 10, got, sizeof(got));
    is_str(got, "4 1|5 2|", "the withdrawn one is not given out");
    archive_order_free(o);
    return done_testing();
}
