/* The recall order of backends without drives; see order.h. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "daemon/archive/order.h"
#include "daemon/sched/read_order.h"
#include "daemon/tape/model.h"

struct archive_order_entry {
    void *value;
    struct order_batch *batch;
    char volume[ARCHIVE_LABEL_MAX + 1]; /* "" when the position is unknown */
    uint64_t position, size;
    bool queued;
};

/* One batch's entries, in the order they came (one block, freed with it). */
typedef struct order_batch {
    archive_batch_t b;
    uint64_t seq;
    archive_order_entry_t *entries;
    size_t n, head, live;       /* head: entries before it are all taken */
} order_batch_t;

struct archive_order {
    char pseudo[ARCHIVE_LABEL_MAX + 1];
    order_batch_t **batches;    /* most urgent first; none empty */
    size_t nbatches, cap;
    uint64_t next_seq;
    size_t count;
    tape_profile_t profile;
    tape_cost_model_t model;
    /* scratch of take */
    archive_order_entry_t **cand;
    order_item_t *items;
    size_t *perm;
    size_t cap_cand, cap_items, cap_perm;
};

archive_order_t *archive_order_new(const char *pseudo_volume, si_error_t *err)
{
    archive_order_t *o = calloc(1, sizeof(*o));
    if (!o)
        return si_errprintf(err, "out of memory"), NULL;
    snprintf(o->pseudo, sizeof(o->pseudo), "%s", pseudo_volume ? pseudo_volume : "");
    /* LINEAR order needs no costs; the profile only maps offsets */
    if (tape_profile_builtin("lto9", &o->profile, err) < 0) {
        free(o);
        return NULL;
    }
    o->model = tape_true_costs(&o->profile);
    return o;
}

void archive_order_free(archive_order_t *o)
{
    if (!o)
        return;
    for (size_t i = 0; i < o->nbatches; i++) {
        free(o->batches[i]->entries);
        free(o->batches[i]);
    }
    free(o->batches);
    free(o->cand);
    free(o->items);
    free(o->perm);
    free(o);
}

bool archive_order_position_known(const archive_order_t *o, const archive_item_t *item)
{
    return item->ncopies > 0 && item->copies[0].volume[0] &&
           strcmp(item->copies[0].volume, o->pseudo) != 0;
}

/* < 0 when a is more urgent than b. */
static int urgency_cmp(const order_batch_t *a, const order_batch_t *b)
{
    if (a->b.priority != b->b.priority)
        return a->b.priority > b->b.priority ? -1 : 1;
    bool da = a->b.deadline > 0, db = b->b.deadline > 0;
    if (da != db)
        return da ? -1 : 1;
    if (da && a->b.deadline != b->b.deadline)
        return a->b.deadline < b->b.deadline ? -1 : 1;
    return a->seq < b->seq ? -1 : 1;
}

int archive_order_add(archive_order_t *o, const archive_batch_t *batch,
                      const archive_item_t *items, void *const *values, size_t n,
                      archive_order_entry_t **entries, si_error_t *err)
{
    if (n == 0)
        return 0;
    order_batch_t *ob = calloc(1, sizeof(*ob));
    if (!ob || !(ob->entries = calloc(n, sizeof(*ob->entries))) ||
        si_array_grow((void **)&o->batches, &o->cap, o->nbatches + 1, sizeof(*o->batches)) < 0) {
        if (ob)
            free(ob->entries);
        free(ob);
        return si_errprintf(err, "out of memory");
    }
    ob->b = *batch;
    ob->seq = ++o->next_seq;
    ob->n = ob->live = n;
    for (size_t i = 0; i < n; i++) {
        archive_order_entry_t *e = &ob->entries[i];
        e->value = values[i];
        e->batch = ob;
        e->queued = true;
        e->size = items[i].size;
        if (archive_order_position_known(o, &items[i])) {
            memcpy(e->volume, items[i].copies[0].volume, sizeof(e->volume));
            e->position = items[i].copies[0].position;
        }
        if (entries)
            entries[i] = e;
    }
    size_t at = o->nbatches;
    while (at > 0 && urgency_cmp(ob, o->batches[at - 1]) < 0)
        at--;
    memmove(o->batches + at + 1, o->batches + at, (o->nbatches - at) * sizeof(*o->batches));
    o->batches[at] = ob;
    o->nbatches++;
    o->count += n;
    return 0;
}

static void drop_empty_batches(archive_order_t *o)
{
    size_t keep = 0;
    for (size_t i = 0; i < o->nbatches; i++) {
        order_batch_t *ob = o->batches[i];
        if (ob->live == 0) {
            free(ob->entries);
            free(ob);
        } else {
            o->batches[keep++] = ob;
        }
    }
    o->nbatches = keep;
}

static void take_entry(archive_order_t *o, archive_order_entry_t *e)
{
    e->queued = false;
    e->batch->live--;
    o->count--;
    while (e->batch->head < e->batch->n && !e->batch->entries[e->batch->head].queued)
        e->batch->head++;
}

static int grow_scratch(archive_order_t *o, size_t need)
{
    if (si_array_grow((void **)&o->cand, &o->cap_cand, need, sizeof(*o->cand)) < 0 ||
        si_array_grow((void **)&o->items, &o->cap_items, need, sizeof(*o->items)) < 0 ||
        si_array_grow((void **)&o->perm, &o->cap_perm, need, sizeof(*o->perm)) < 0)
        return -1;
    return 0;
}

/* Every queued entry on the volume, in LINEAR read order from BOT. Falls
 * back to the urgent batch's own order when memory is short. */
static size_t take_volume(archive_order_t *o, const char *volume, size_t max, void **out)
{
    size_t k = 0;
    for (size_t b = 0; b < o->nbatches; b++) {
        order_batch_t *ob = o->batches[b];
        for (size_t i = ob->head; i < ob->n; i++) {
            archive_order_entry_t *e = &ob->entries[i];
            if (!e->queued || strcmp(e->volume, volume) != 0)
                continue;
            if (grow_scratch(o, k + 1) < 0)
                goto order;
            o->cand[k] = e;
            o->items[k] = (order_item_t){e->position, e->size};
            k++;
        }
    }
order:
    if (k == 0)
        return 0;
    if (read_order(&o->profile, &o->model, ORDER_LINEAR, 0, o->items, k, NULL, o->perm,
                   NULL) < 0)
        for (size_t i = 0; i < k; i++)
            o->perm[i] = i;
    size_t took = 0;
    for (size_t i = 0; i < k && took < max; i++) {
        archive_order_entry_t *e = o->cand[o->perm[i]];
        out[took++] = e->value;
        take_entry(o, e);
    }
    return took;
}

size_t archive_order_take(archive_order_t *o, size_t max, void **out)
{
    if (o->count == 0 || max == 0)
        return 0;
    order_batch_t *first = o->batches[0];
    archive_order_entry_t *urgent = &first->entries[first->head];
    size_t took = 0;
    if (urgent->volume[0]) {
        char volume[sizeof(urgent->volume)];
        memcpy(volume, urgent->volume, sizeof(volume));
        took = take_volume(o, volume, max, out);
    } else {
        for (size_t b = 0; b < o->nbatches && took < max; b++) {
            order_batch_t *ob = o->batches[b];
            for (size_t i = ob->head; i < ob->n && took < max; i++) {
                archive_order_entry_t *e = &ob->entries[i];
                if (e->queued && !e->volume[0]) {
                    out[took++] = e->value;
                    take_entry(o, e);
                }
            }
        }
    }
    drop_empty_batches(o);
    return took;
}

bool archive_order_remove(archive_order_t *o, archive_order_entry_t *entry)
{
    if (!entry || !entry->queued)
        return false;
    take_entry(o, entry);
    drop_empty_batches(o);
    return true;
}

size_t archive_order_count(const archive_order_t *o)
{
    return o->count;
}
