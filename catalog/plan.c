/* The recall plan of a dataset: for each member, the lowest-numbered copy on
 * a readable volume; reads grouped by volume and ordered by tape position.
 * The scheduler refines the order on each mounted volume at run time. */
#include "config.h"
#include "catalog/internal.h"

#include <stdlib.h>
#include <string.h>

#include "common/array.h"

/* The copy choice, shared by the plan and its view: a copy on a readable
 * volume with no lower-numbered one on a readable volume (NOT EXISTS, which
 * PostgreSQL plans as one anti-join and SQLite as an index probe; a
 * correlated MIN() made PostgreSQL rescan the volumes per member). */
#define PLAN_FROM                                                                         \
    " FROM datasets d JOIN dataset_members m ON m.dataset_id = d.id"                      \
    " JOIN objects o ON o.id = m.object_id"                                               \
    " JOIN tape_copies c ON c.object_id = m.object_id"                                    \
    " JOIN volumes v ON v.id = c.volume_id AND v.state IN ('online', 'full')"             \
    " WHERE d.name = ?1 AND NOT EXISTS (SELECT 1 FROM tape_copies c2"                     \
    "   JOIN volumes v2 ON v2.id = c2.volume_id WHERE c2.object_id = c.object_id"         \
    "   AND c2.copy < c.copy AND v2.state IN ('online', 'full'))"

static const char plan_sql[] =
    "SELECT m.object_id, c.volume_id, v.label, c.copy, c.file_seq, c.position, c.length, o.size"
    PLAN_FROM " ORDER BY v.label, c.position";

static int count_members(catalog_t *cat, const char *dataset, size_t *n, si_error_t *err)
{
    db_stmt_t *s = catalog_prepare(cat, "SELECT d.id, (SELECT COUNT(*) FROM dataset_members m"
                                           " WHERE m.dataset_id = d.id) FROM datasets d"
                                           " WHERE d.name = ?1", err);
    if (!s)
        return -1;
    db_bind_text(s, 1, dataset, -1);
    int rc = db_step(s);
    if (rc == DB_ROW)
        *n = (size_t)db_column_int64(s, 1);
    db_finalize(s);
    if (rc != DB_ROW)
        return si_errprintf(err, "no dataset '%s' in the catalog", dataset);
    return 0;
}

void catalog_plan_free(catalog_plan_t *plan)
{
    if (!plan)
        return;
    free(plan->reads);
    free(plan->volumes);
    free(plan);
}

int catalog_plan_dataset(catalog_t *cat, const char *dataset, catalog_plan_t **out,
                         si_error_t *err)
{
    size_t members;
    if (count_members(cat, dataset, &members, err) < 0)
        return -1;
    catalog_plan_t *plan = calloc(1, sizeof(*plan));
    if (!plan || !(plan->reads = calloc(members ? members : 1, sizeof(*plan->reads)))) {
        free(plan);
        return si_errprintf(err, "out of memory");
    }
    size_t cap_volumes = 0;
    db_stmt_t *s = catalog_prepare(cat, plan_sql, err);
    if (!s)
        goto error;
    db_bind_text(s, 1, dataset, -1);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (plan->nreads == members) {
            si_errprintf(err, "dataset '%s' changed while planning", dataset);
            goto error;
        }
        catalog_read_t *r = &plan->reads[plan->nreads];
        r->object_id = db_column_int64(s, 0);
        r->volume_id = db_column_int64(s, 1);
        r->copy = db_column_int(s, 3);
        r->file_seq = db_column_type(s, 4) == DB_NULL ? -1 : db_column_int64(s, 4);
        r->position = (uint64_t)db_column_int64(s, 5);
        r->length = (uint64_t)db_column_int64(s, 6);
        r->size = (uint64_t)db_column_int64(s, 7);
        struct catalog_plan_volume *v =
            plan->nvolumes ? &plan->volumes[plan->nvolumes - 1] : NULL;
        if (!v || v->volume_id != r->volume_id) {
            if (si_array_grow((void **)&plan->volumes, &cap_volumes, plan->nvolumes + 1,
                              sizeof(*plan->volumes)) < 0) {
                si_errprintf(err, "out of memory");
                goto error;
            }
            v = &plan->volumes[plan->nvolumes++];
            memset(v, 0, sizeof(*v));
            v->volume_id = r->volume_id;
            snprintf(v->label, sizeof(v->label), "%s", db_column_text(s, 2));
            v->first = plan->nreads;
        }
        v->count++;
        v->bytes += r->length;
        plan->nreads++;
    }
    if (rc != DB_DONE) {
        catalog_sqlerr(cat, err, "planning recall");
        goto error;
    }
    db_finalize(s);
    plan->missing = members - plan->nreads;
    *out = plan;
    return 0;
error:
    db_finalize(s);
    catalog_plan_free(plan);
    return -1;
}

si_table_t *catalog_view_plan(catalog_t *cat, const char *dataset, bool summary_only,
                              si_error_t *err)
{
    static const si_column_t summary_cols[] = {
        {"volume", SI_COL_STR}, {"reads", SI_COL_INT}, {"bytes", SI_COL_BYTES},
        {"first_position", SI_COL_INT}, {"last_position", SI_COL_INT},
    };
    static const si_column_t read_cols[] = {
        {"volume", SI_COL_STR}, {"order", SI_COL_INT}, {"position", SI_COL_INT},
        {"length", SI_COL_BYTES}, {"copy", SI_COL_INT}, {"file_seq", SI_COL_INT},
        {"bucket", SI_COL_STR}, {"key", SI_COL_STR},
    };
    static const char summary_sql[] =
        "SELECT v.label, COUNT(*), SUM(c.length), MIN(c.position), MAX(c.position)" PLAN_FROM
        " GROUP BY v.id ORDER BY v.label";
    static const char read_sql[] =
        "SELECT v.label, ROW_NUMBER() OVER (PARTITION BY v.id ORDER BY c.position),"
        " c.position, c.length, c.copy, c.file_seq, o.bucket, o.key" PLAN_FROM
        " ORDER BY v.label, c.position";
    size_t members;
    if (count_members(cat, dataset, &members, err) < 0)
        return NULL;
    db_stmt_t *s = catalog_prepare(cat, summary_only ? summary_sql : read_sql, err);
    if (!s)
        return NULL;
    db_bind_text(s, 1, dataset, -1);
    si_table_t *t = summary_only
        ? catalog_table_from_stmt(cat, s, summary_cols, 5, err)
        : catalog_table_from_stmt(cat, s, read_cols, 8, err);
    db_finalize(s);
    return t;
}
