/* Items to recall, for the archive backends' unit tests (header only, so
 * that tests without the memory sink use it too). */
#ifndef STAGEIN_ARCHIVE_TEST_ITEM_H
#define STAGEIN_ARCHIVE_TEST_ITEM_H

#include <stdio.h>
#include <string.h>

#include "daemon/archive/backend.h"

/* Object id of size bytes; with a volume, its one copy there at position,
 * else no copy (a position the backend does not know). */
static inline archive_item_t test_item(int64_t id, uint64_t size, const char *volume,
                                       uint64_t position)
{
    archive_item_t it;
    memset(&it, 0, sizeof(it));
    it.object_id = id;
    it.size = size;
    if (volume) {
        it.ncopies = 1;
        it.copies[0].copy = 1;
        snprintf(it.copies[0].volume, sizeof(it.copies[0].volume), "%s", volume);
        it.copies[0].position = position;
    }
    return it;
}

#endif
