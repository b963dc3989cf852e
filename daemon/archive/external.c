/* Helpers of the backends in front of an archive that places and copies
 * files itself (s3, hsm); see internal.h. */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "daemon/archive/internal.h"
#include "daemon/archive/order.h"
#include "daemon/volume/volume.h"

int archive_pseudo_volume(const si_conf_t *conf, const char *path, const char *def,
                          char out[ARCHIVE_LABEL_MAX + 1], si_error_t *err)
{
    const char *label = si_conf_string(conf, path, def);
    si_error_t why;
    if (tapevol_label_check(label, &why) < 0)
        return si_conf_fail(conf, path, err, "is not a volume label: %s", why.text);
    snprintf(out, ARCHIVE_LABEL_MAX + 1, "%s", label);
    return 0;
}

int archive_single_copy_conf(const si_conf_t *conf, const char *backend, si_error_t *err)
{
    int64_t copies = si_conf_int(conf, "push.copies", 1);
    if (copies > 1)
        return si_conf_fail(conf, "push.copies", err, "= %lld: the %s backend writes one copy; "
                            "the archive behind it keeps its own copies (set push.copies = 1)",
                            (long long)copies, backend);
    return 0;
}

int archive_single_copy_check(const char *backend, int ncopies, si_error_t *err)
{
    if (ncopies != 1)
        return si_errprintf(err, "the %s backend writes one copy (asked for %d); the archive "
                            "behind it keeps its own copies", backend, ncopies);
    return 0;
}

void archive_pseudo_placement(const char *volume, uint64_t size, uint64_t volume_used,
                              archive_placement_t *out)
{
    memset(out, 0, sizeof(*out));
    out->copy = 1;
    snprintf(out->volume, sizeof(out->volume), "%s", volume);
    out->file_seq = -1;
    out->position = 0;
    out->length = size;
    out->volume_used = volume_used;
}

archive_item_t *archive_item_copy(const archive_item_t *item, si_error_t *err)
{
    if (!item->bucket || !item->key || !*item->bucket || !*item->key)
        return si_errprintf(err, "object %" PRId64 " has no bucket/key", item->object_id), NULL;
    size_t blen = strlen(item->bucket), klen = strlen(item->key);
    archive_item_t *c = malloc(sizeof(*c) + blen + klen + 2);
    if (!c)
        return si_errprintf(err, "out of memory"), NULL;
    *c = *item;
    char *names = (char *)(c + 1);
    memcpy(names, item->bucket, blen + 1);
    memcpy(names + blen + 1, item->key, klen + 1);
    c->bucket = names;
    c->key = names + blen + 1;
    return c;
}

int archive_queue_init(archive_queue_t *q, const char *pseudo_volume, si_error_t *err)
{
    memset(q, 0, sizeof(*q));
    q->order = archive_order_new(pseudo_volume, err);
    return q->order ? 0 : -1;
}

void archive_queue_free(archive_queue_t *q)
{
    archive_order_free(q->order);
    free(q->live);
    memset(q, 0, sizeof(*q));
}

int archive_queue_add(archive_queue_t *q, const archive_batch_t *batch,
                      const archive_item_t *items, void **recs, size_t n,
                      archive_order_entry_t **entries, si_error_t *err)
{
    if (si_array_grow((void **)&q->live, &q->cap, q->nlive + n, sizeof(*q->live)) < 0)
        return si_errprintf(err, "out of memory");
    if (archive_order_add(q->order, batch, items, (void *const *)recs, n, entries, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        q->live[q->nlive++] = recs[i];
        q->live_bytes += items[i].size;
    }
    return 0;
}

void archive_external_status(const char *backend, const archive_counts_t *c,
                             const archive_queue_t *q, archive_status_t *out)
{
    memset(out, 0, sizeof(*out));
    out->backend = backend;
    out->reads = c->reads;
    out->read_failures = c->read_failures;
    out->bytes_read = c->bytes_read;
    out->bytes_written = c->bytes_written;
    out->archive_files_written = c->files_written;
    out->queued_items = q->nlive;
    out->queued_bytes = q->live_bytes;
}

void archive_queue_forget(archive_queue_t *q, const void *rec, uint64_t size)
{
    for (size_t i = 0; i < q->nlive; i++)
        if (q->live[i] == rec) {
            q->live[i] = q->live[--q->nlive];
            q->live_bytes -= size;
            return;
        }
}
