/* The push service's catalog statements, prepared once when it opens its
 * connection (the lock that guards the connection guards them too), and
 * its catalog error helpers. */
#include "config.h"
#include "daemon/push/internal.h"

#include <errno.h>

static const char *const sql_text[PUSH_SQL_COUNT] = {
    /* receiving an upload (receive.c) */
    [PUSH_SQL_DATASET_BY_NAME] = "SELECT id, owner_uid FROM datasets WHERE name = ?1",
    [PUSH_SQL_DATASET_INSERT] =
        "INSERT INTO datasets(name, owner_uid, owner_gid, mode, description,"
        " created) VALUES (?1, ?2, ?3, ?4, 'created by push ' || ?5, ?6)",
    [PUSH_SQL_PUSH_FOR_UPLOAD] = "SELECT p.id, p.uid, p.dataset_id, d.name FROM pushes p"
                                 " JOIN datasets d ON d.id = p.dataset_id WHERE p.uuid = ?1",
    [PUSH_SQL_PUSH_INSERT] = "INSERT INTO pushes(uuid, uid, gid, dataset_id, created, updated)"
                             " VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
    [PUSH_SQL_OBJECT_INSERT] = "INSERT INTO objects(bucket, key, size, checksum, mtime)"
                               " VALUES (?1, ?2, ?3, ?4, ?5)",
    [PUSH_SQL_ITEM_INSERT] = "INSERT INTO push_items(object_id, push_id, state, received, instance)"
                             " VALUES (?1, ?2, 'RECEIVING', ?3, ?4)",
    [PUSH_SQL_RECEIVED_CHECKSUM] = "UPDATE objects SET checksum = ?2 WHERE id = ?1",
    [PUSH_SQL_MARK_RECEIVED] =
        "UPDATE push_items SET state = 'RECEIVED', received = ?2 WHERE object_id = ?1",
    [PUSH_SQL_RECEIVED_TOUCH] = "UPDATE pushes SET updated = ?2 WHERE id = ?1",
    /* an upload whose rows its cache batch records (receive.c) */
    [PUSH_SQL_OBJECT_EXISTS] = "SELECT 1 FROM objects WHERE bucket = ?1 AND key = ?2",
    [PUSH_SQL_OBJECT_INSERT_NEW] = "INSERT INTO objects(bucket, key, size, checksum, mtime)"
                                   " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING RETURNING id",
    [PUSH_SQL_ITEM_INSERT_RECEIVED] = "INSERT INTO push_items(object_id, push_id, state, received,"
                                      " instance) VALUES (?1, ?2, 'RECEIVED', ?3, ?4)",
    /* an upload never acknowledged, and recovery (push.c) */
    [PUSH_SQL_DISCARD_MARK] = "UPDATE push_items SET state = 'DISCARDED'"
                              " WHERE object_id = ?1",
    [PUSH_SQL_DISCARD_FIND_PUSH] = "SELECT p.id, p.dataset_id, p.uuid FROM push_items i"
                                   " JOIN pushes p ON p.id = i.push_id WHERE i.object_id = ?1",
    [PUSH_SQL_DISCARD_ITEM] = "DELETE FROM push_items WHERE object_id = ?1",
    [PUSH_SQL_DISCARD_OBJECT] = "DELETE FROM objects WHERE id = ?1",
    [PUSH_SQL_DISCARD_PUSH] = "DELETE FROM pushes WHERE id = ?2"
                              " AND NOT EXISTS (SELECT 1 FROM push_items WHERE push_id = ?2)",
    [PUSH_SQL_DISCARD_DATASET] =
        "DELETE FROM datasets WHERE id = ?3 AND description = 'created by push ' || ?4"
        " AND NOT EXISTS (SELECT 1 FROM dataset_members WHERE dataset_id = ?3)"
        " AND NOT EXISTS (SELECT 1 FROM pushes WHERE dataset_id = ?3)",
    [PUSH_SQL_IDS_UNACKNOWLEDGED] =
        "SELECT object_id FROM push_items WHERE state IN ('RECEIVING', 'DISCARDED')"
        " ORDER BY object_id",
    [PUSH_SQL_IDS_RECEIVED] =
        "SELECT object_id FROM push_items WHERE state = 'RECEIVED' ORDER BY object_id",
    [PUSH_SQL_ITEM_FAILED] = "UPDATE push_items SET state = 'FAILED', error = ?2,"
                             " finished = ?3 WHERE object_id = ?1",
    [PUSH_SQL_OBJECT] = "SELECT bucket, key, size, checksum FROM objects"
                        " WHERE id = ?1",
    /* a push's status and the metrics (push.c) */
    [PUSH_SQL_PUSH_BY_UUID] = "SELECT p.id, p.uid, p.gid, d.name, p.created, p.updated"
                              " FROM pushes p JOIN datasets d ON d.id = p.dataset_id"
                              " WHERE p.uuid = ?1",
    [PUSH_SQL_PUSH_ITEMS] = "SELECT i.object_id, o.bucket, o.key, o.size, o.checksum, i.state,"
                            " i.error FROM push_items i JOIN objects o ON o.id = i.object_id"
                            " WHERE i.push_id = ?1 AND i.state NOT IN ('RECEIVING', 'DISCARDED')"
                            " ORDER BY o.key",
    [PUSH_SQL_COPIES] = "SELECT t.copy, v.label, coalesce(t.file_seq, -1),"
                        " t.position FROM tape_copies t"
                        " JOIN volumes v ON v.id = t.volume_id"
                        " WHERE t.object_id = ?1 ORDER BY t.copy",
    /* kept by triggers (schema 1.18), with the changes not yet folded
     * (PostgreSQL): counting every file ever pushed cost each call time in
     * proportion to the history (/metrics, the status page) */
    [PUSH_SQL_COUNT_BY_STATE] = "SELECT t.received_files + d.rf, t.received_bytes + d.rb,"
                                " t.archiving_files + d.af, t.durable_files + d.df,"
                                " t.failed_files + d.ff, d.n FROM push_item_totals t,"
                                " (SELECT coalesce(sum(received_files), 0) AS rf,"
                                "  coalesce(sum(received_bytes), 0) AS rb,"
                                "  coalesce(sum(archiving_files), 0) AS af,"
                                "  coalesce(sum(durable_files), 0) AS df,"
                                "  coalesce(sum(failed_files), 0) AS ff, count(*) AS n"
                                "  FROM push_item_total_changes) d",
    /* aggregates written to the archive (archive.c) */
    [PUSH_SQL_RECEIVED_OLDEST_FIRST] = "SELECT i.object_id, pu.dataset_id, o.bucket, o.key,"
                                       " o.size, o.checksum, coalesce(o.mtime, 0), i.received,"
                                       " i.attempts, m.headers, m.storage_class, pu.uuid,"
                                       " i.push_id, c.segment, coalesce(c.file_offset, 0)"
                                       " FROM push_items i"
                                       " JOIN objects o ON o.id = i.object_id"
                                       " LEFT JOIN object_meta m ON m.object_id = i.object_id"
                                       " JOIN pushes pu ON pu.id = i.push_id"
                                       " LEFT JOIN cache c ON c.object_id = i.object_id"
        " WHERE i.state = 'RECEIVED' ORDER BY i.received, i.object_id",
    [PUSH_SQL_MARK_ARCHIVING] = "UPDATE push_items SET state = 'ARCHIVING'"
                                " WHERE object_id = ?1 AND state = 'RECEIVED'",
    [PUSH_SQL_DATASET_STALE] = "UPDATE datasets SET stat_objects = NULL,"
                               " stat_bytes = NULL, stat_volumes = NULL WHERE id = ?1",
    [PUSH_SQL_DATASET_MEMBER] = "INSERT OR IGNORE INTO dataset_members(dataset_id, object_id)"
                                " VALUES (?1, ?2)",
    [PUSH_SQL_MARK_DURABLE] = "UPDATE push_items SET state = 'DURABLE', error = NULL,"
                              " finished = ?2 WHERE object_id = ?1 AND state = 'ARCHIVING'",
    [PUSH_SQL_PUSH_TOUCH] = "UPDATE pushes SET updated = ?2 WHERE id = ?1",
    [PUSH_SQL_PUT_BACK] = "UPDATE push_items SET attempts = attempts + 1,"
                          " state = CASE WHEN ?2 <> 0 THEN 'FAILED' ELSE 'RECEIVED' END,"
                          " error = ?3, finished = CASE WHEN ?2 <> 0 THEN ?4 END"
                          " WHERE object_id = ?1 AND state = 'ARCHIVING'",
    /* pushes claimed by one of several instances (claims.c) */
    [PUSH_SQL_REQUEUE_PUSH] = "UPDATE push_items SET state = 'RECEIVED'"
                              " WHERE push_id = ?1 AND state = 'ARCHIVING'",
    [PUSH_SQL_PUSH_PENDING] = "SELECT count(*) FROM push_items WHERE push_id = ?1"
                              " AND state IN ('RECEIVED', 'ARCHIVING')",
    [PUSH_SQL_ARCHIVING_PUSHES] = "SELECT DISTINCT p.id, p.uuid FROM push_items i"
                                  " JOIN pushes p ON p.id = i.push_id"
                                  " WHERE i.state = 'ARCHIVING' ORDER BY p.id",
    [PUSH_SQL_UNACKNOWLEDGED_BEFORE] =
        "SELECT object_id FROM push_items i WHERE state IN ('RECEIVING', 'DISCARDED')"
        " AND received < ?1 AND NOT EXISTS (SELECT 1 FROM instances n"
        "  WHERE n.name = i.instance AND n.name <> ?2 AND n.heartbeat >= ?3)"
        " ORDER BY object_id",
};

const char *push_sql(int which)
{
    return sql_text[which];
}

int push_db_open(push_t *p, si_error_t *err)
{
    p->db = catalog_driver(p->cat);
    for (int i = 0; i < PUSH_SQL_COUNT; i++)
        if (!(p->stmt[i] = db_cached(p->db, sql_text[i], err)))
            return -1;
    return 0;
}

void push_db_close(push_t *p)
{
    /* the statements are the connection's (db_cached): closing it ends them */
    for (int i = 0; i < PUSH_SQL_COUNT; i++)
        p->stmt[i] = NULL;
}

db_stmt_t *push_stmt(push_t *p, int which)
{
    db_stmt_t *s = p->stmt[which];
    db_reset(s);
    db_clear_bindings(s);
    return s;
}

int push_db_errno(push_t *p)
{
    return db_errclass(p->db) == DB_ERR_UNAVAILABLE ? EAGAIN : EIO;
}

int push_db_error(push_t *p, si_error_t *err, const char *what)
{
    return si_errnoprintf(err, push_db_errno(p), "catalog: %s: %s", what, db_errmsg(p->db));
}

int push_exec(push_t *p, const char *sql, si_error_t *err)
{
    if (db_exec(p->db, sql, err) < 0) {
        si_errprefix(err, "catalog");
        errno = push_db_errno(p);
        return -1;
    }
    return 0;
}

int push_requeue_archiving(push_t *p, uint64_t *n, si_error_t *err)
{
    if (push_exec(p, "UPDATE push_items SET state = 'RECEIVED' WHERE state = 'ARCHIVING'",
                  err) < 0)
        return -1;
    *n = (uint64_t)db_changes(p->db);
    return 0;
}
