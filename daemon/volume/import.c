/* Catalog entries of what a volume holds: after a write, or rebuilt from the
 * volume alone (import). One transaction either way. */
#include "config.h"
#include "daemon/volume/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"

static int compare_entries(const void *a, const void *b)
{
    const tapevol_entry_t *x = *(const tapevol_entry_t *const *)a;
    const tapevol_entry_t *y = *(const tapevol_entry_t *const *)b;
    int c = strcmp(x->bucket, y->bucket);
    if (!c)
        c = strcmp(x->key, y->key);
    if (!c)
        c = (x->position > y->position) - (x->position < y->position);
    return c;
}

/* Entries to record: an object written again later on the same volume is
 * superseded by its last copy there, as a tar reader extracting the whole
 * volume would also keep the last. Returns an array of n pointers, or NULL. */
static const tapevol_entry_t **latest_entries(const tapevol_listing_t *l, size_t *n)
{
    const tapevol_entry_t **sorted = malloc((l->nentries ? l->nentries : 1) * sizeof(*sorted));
    size_t out = 0;
    if (!sorted)
        return NULL;
    for (size_t i = 0; i < l->nentries; i++)
        sorted[i] = &l->entries[i];
    qsort(sorted, l->nentries, sizeof(*sorted), compare_entries);
    for (size_t i = 0; i < l->nentries; i++) {
        if (i + 1 < l->nentries && strcmp(sorted[i]->bucket, sorted[i + 1]->bucket) == 0 &&
            strcmp(sorted[i]->key, sorted[i + 1]->key) == 0)
            continue;
        sorted[out++] = sorted[i];
    }
    *n = out;
    return sorted;
}

int tapevol_catalog_record(catalog_t *cat, const tapevol_info_t *info,
                           const tapevol_listing_t *listing, int copy,
                           tapevol_import_stats_t *stats, si_error_t *err)
{
    tapevol_import_stats_t counts = {.files = (int64_t)listing->nfiles,
                                     .members = listing->nentries};
    const tapevol_entry_t **entries = NULL;
    size_t n = 0;
    int64_t volume_id;
    char detail[160];

    if (copy < 1)
        return si_errprintf(err, "copy number %d must be 1 or more", copy);
    entries = latest_entries(listing, &n);
    if (!entries)
        return si_errprintf(err, "out of memory");
    if (catalog_begin(cat, err) < 0) {
        free(entries);
        return -1;
    }
    catalog_volume_t v = {
        .label = info->label,
        .media = info->media,
        .library = "sim",
        .state = "online",
        .capacity_bytes = info->capacity,
        .used_bytes = info->used,
    };
    if (catalog_volume_ensure(cat, &v, &volume_id, err) < 0 ||
        catalog_volume_set_used(cat, info->label, info->used, err) < 0)
        goto error;
    for (size_t i = 0; i < n; i++) {
        const tapevol_entry_t *e = entries[i];
        int64_t object_id;
        catalog_object_t o = {
            .bucket = e->bucket,
            .key = e->key,
            .size = e->size,
            .checksum = e->checksum[0] ? e->checksum : NULL,
            .mtime = e->mtime,
            .etag = NULL,
        };
        catalog_copy_t c = {
            .copy = copy,
            .volume = info->label,
            .file_seq = e->file_seq,
            .position = e->position,
            .length = e->size,
        };
        int added = catalog_object_put(cat, &o, &object_id, err);
        if (added < 0)
            goto entry_error;
        counts.new_objects += (uint64_t)added;
        c.object_id = object_id;
        errno = 0;
        added = catalog_copy_put(cat, &c, err);
        /* The same object (size and checksum, as catalog_object_put found)
         * already under this copy number on another volume: an archive
         * file written again elsewhere after its writer died before
         * recording it (push takes over a dead instance's archive write).
         * Both hold the bytes; this one becomes the next copy. */
        for (int next = copy + 1; added < 0 && errno == EEXIST && next <= TAPEVOL_IMPORT_COPIES;
             next++) {
            c.copy = next;
            errno = 0;
            if ((added = catalog_copy_put(cat, &c, err)) > 0)
                counts.renumbered++;
        }
        c.copy = copy;
        if (added < 0)
            goto entry_error;
        counts.new_copies += (uint64_t)added;
        /* the headers and storage class the member carries, unless the
         * catalog holds its own (an upload, or a newer PUT than this copy) */
        if (catalog_object_meta_keep(cat, object_id, e->headers, e->storage_class, err) < 0)
            goto entry_error;
        continue;
entry_error:
        si_errprefix(err, "volume %s: %s/%s (archive file %" PRId64 ", offset %" PRIu64 ")",
                     info->label, e->bucket, e->key, e->file_seq, e->position);
        goto error;
    }
    snprintf(detail, sizeof(detail), "%zu archive files, %zu objects, copy %d",
             listing->nfiles, n, copy);
    if (catalog_event(cat, "tape.record", info->label, detail) < 0) {
        si_errprintf(err, "volume %s: cannot append to the event log", info->label);
        goto error;
    }
    if (catalog_refresh_dataset_stats(cat, err) < 0 || catalog_commit(cat, err) < 0)
        goto error;
    counts.recorded = n;
    if (stats)
        *stats = counts;
    free(entries);
    return 0;
error:
    catalog_rollback(cat);
    free(entries);
    return -1;
}

int tapevol_import(tapevol_t *vol, catalog_t *cat, int copy, int walk_flags,
                   tapevol_import_stats_t *stats, si_error_t *err)
{
    tapevol_info_t info;
    tapevol_listing_t *listing = NULL;
    /* the whole volume is parsed before the catalog is touched */
    if (tapevol_walk(vol, walk_flags, &listing, err) < 0)
        return -1;
    if (tapevol_info(vol, &info, err) < 0 ||
        tapevol_catalog_record(cat, &info, listing, copy, stats, err) < 0) {
        tapevol_listing_free(listing);
        return -1;
    }
    tapevol_listing_free(listing);
    return 0;
}
