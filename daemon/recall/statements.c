/* The recall service's statements, prepared once on its own connection
 * (the layer items.c and site.c both use; see internal.h). */
#include "config.h"

#include "daemon/recall/internal.h"

static const char *const sql_text[SQL_COUNT] = {
    [SQL_OBJECT] = "SELECT size, coalesce(checksum, ''), bucket, key FROM objects WHERE id = ?1",
    [SQL_COPIES] = "SELECT t.copy, v.label, coalesce(t.file_seq, -1), t.position, t.length"
                   " FROM tape_copies t JOIN volumes v ON v.id = t.volume_id"
                   " WHERE t.object_id = ?1 AND v.state NOT IN ('failed', 'disabled')"
                   " ORDER BY t.copy",
    [SQL_OBJECTS] = "SELECT id, size, coalesce(checksum, ''), bucket, key FROM objects"
                    " WHERE id IN (SELECT value FROM json_each(?1))",
    [SQL_OBJECTS_COPIES] =
        "SELECT t.object_id, t.copy, v.label, coalesce(t.file_seq, -1), t.position, t.length"
        " FROM tape_copies t JOIN volumes v ON v.id = t.volume_id"
        " WHERE t.object_id IN (SELECT value FROM json_each(?1))"
        " AND v.state NOT IN ('failed', 'disabled') ORDER BY t.object_id, t.copy",
    [SQL_REQUEST_STATE] = "SELECT state FROM requests WHERE id = ?1",
    /* pins the cache still holds for requests already released */
    [SQL_RELEASED_PINS] = "SELECT DISTINCT p.request_id FROM cache_pins p"
                          " JOIN requests r ON r.id = p.request_id WHERE r.state = 'RELEASED'",
    /* why an active request is not progressing (shown by its status) */
    [SQL_NOTE_SET] = "UPDATE requests SET error = ?2 WHERE id = ?1"
                     " AND state IN ('SUBMITTED', 'STARTED') AND error IS NOT ?2",
    [SQL_NOTE_CLEAR] = "UPDATE requests SET error = NULL WHERE id = ?1"
                       " AND state IN ('SUBMITTED', 'STARTED') AND error LIKE 'waiting%'",
};

int recall_statements_prepare(recall_service_t *rs, si_error_t *err)
{
    for (int i = 0; i < SQL_COUNT; i++)
        if (!(rs->stmt[i] = db_prepare(catalog_driver(rs->cat), sql_text[i], NULL)))
            return catalog_sqlerr(rs->cat, err, "recall: preparing statements");
    return 0;
}

void recall_statements_finalize(recall_service_t *rs)
{
    for (int i = 0; i < SQL_COUNT; i++)
        db_finalize(rs->stmt[i]);
}

db_stmt_t *recall_stmt(recall_service_t *rs, int id)
{
    db_reset(rs->stmt[id]);
    db_clear_bindings(rs->stmt[id]);
    return rs->stmt[id];
}
