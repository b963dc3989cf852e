/* The admin views: each is one SQL query rendered as a table. */
#include "config.h"
#include "catalog/internal.h"

#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

si_table_t *catalog_table_from_stmt(catalog_t *cat, db_stmt_t *stmt,
                                    const si_column_t *columns, size_t ncolumns,
                                    si_error_t *err)
{
    si_column_t *generic = NULL;
    if (!columns) { /* ad-hoc SQL: columns as the query names them */
        ncolumns = (size_t)db_column_count(stmt);
        generic = calloc(ncolumns ? ncolumns : 1, sizeof(*generic));
        if (!generic) {
            si_errprintf(err, "out of memory");
            return NULL;
        }
        for (size_t k = 0; k < ncolumns; k++) {
            generic[k].name = db_column_name(stmt, (int)k);
            generic[k].kind = SI_COL_STR;
        }
        columns = generic;
    }
    si_table_t *t = si_table_new(columns, ncolumns);
    free(generic);
    if (!t) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    int rc;
    while ((rc = db_step(stmt)) == DB_ROW) {
        if (si_table_row(t) < 0)
            goto nomem;
        for (size_t k = 0; k < ncolumns; k++) {
            int r;
            switch (db_column_type(stmt, (int)k)) {
            case DB_INTEGER:
                r = si_table_int(t, db_column_int64(stmt, (int)k));
                break;
            case DB_FLOAT:
                r = si_table_real(t, db_column_double(stmt, (int)k));
                break;
            case DB_NULL:
                r = si_table_null(t);
                break;
            default:
                r = si_table_str(t, db_column_text(stmt, (int)k));
                break;
            }
            if (r < 0)
                goto nomem;
        }
    }
    if (rc != DB_DONE) {
        catalog_sqlerr(cat, err, "catalog query");
        si_table_free(t);
        return NULL;
    }
    return t;
nomem:
    si_errprintf(err, "out of memory");
    si_table_free(t);
    return NULL;
}

/* Runs sql with up to two text parameters (NULL: unbound) into a table. */
static si_table_t *view(catalog_t *cat, const char *sql, const si_column_t *cols, size_t n,
                        const char *p1, const char *p2, si_error_t *err)
{
    db_stmt_t *s = catalog_prepare(cat, sql, err);
    if (!s)
        return NULL;
    if (p1)
        db_bind_text(s, 1, p1, -1);
    if (p2)
        db_bind_text(s, 2, p2, -1);
    si_table_t *t = catalog_table_from_stmt(cat, s, cols, n, err);
    db_finalize(s);
    return t;
}

#define NCOLS(a) (sizeof(a) / sizeof((a)[0]))

/* A dataset's totals, each a subquery over its members. */
#define DS_OBJECTS "(SELECT COUNT(*) FROM dataset_members m WHERE m.dataset_id = datasets.id)"
#define DS_BYTES                                                                        \
    "(SELECT COALESCE(SUM(o.size), 0) FROM dataset_members m"                           \
    " JOIN objects o ON o.id = m.object_id WHERE m.dataset_id = datasets.id)"
#define DS_VOLUMES                                                                      \
    "(SELECT COUNT(DISTINCT c.volume_id) FROM dataset_members m"                        \
    " JOIN tape_copies c ON c.object_id = m.object_id WHERE m.dataset_id = datasets.id)"

/* The kept totals, or computed ones where stale (NULL). */
#define DATASET_STATS_SQL                                                              \
    "CASE WHEN stat_objects IS NULL THEN " DS_OBJECTS " ELSE stat_objects END AS objects," \
    " CASE WHEN stat_bytes IS NULL THEN " DS_BYTES " ELSE stat_bytes END AS bytes,"        \
    " CASE WHEN stat_volumes IS NULL THEN " DS_VOLUMES " ELSE stat_volumes END AS volumes"

int catalog_refresh_dataset_stats(catalog_t *cat, si_error_t *err)
{
    static const char sql[] =
        "UPDATE datasets SET stat_objects = " DS_OBJECTS ", stat_bytes = " DS_BYTES
        ", stat_volumes = " DS_VOLUMES
        " WHERE stat_objects IS NULL OR stat_bytes IS NULL OR stat_volumes IS NULL";
    return catalog_exec(cat, sql, err);
}

int catalog_refresh_dataset_stats_of(catalog_t *cat, int64_t dataset_id, si_error_t *err)
{
    static const char sql[] = "UPDATE datasets SET stat_objects = " DS_OBJECTS
                              ", stat_bytes = " DS_BYTES ", stat_volumes = " DS_VOLUMES
                              " WHERE id = ?1";
    db_stmt_t *s = db_cached(cat->db, sql, err);
    if (!s)
        return -1;
    db_bind_int64(s, 1, dataset_id);
    int rc = db_step(s);
    db_reset(s);
    return rc == DB_DONE ? 0 : db_error(cat->db, err, "catalog: a dataset's totals");
}

static int dataset_exists(catalog_t *cat, const char *name, si_error_t *err)
{
    db_stmt_t *s = catalog_prepare(cat, "SELECT 1 FROM datasets WHERE name = ?1", err);
    if (!s)
        return -1;
    db_bind_text(s, 1, name, -1);
    int rc = db_step(s);
    db_finalize(s);
    if (rc == DB_ROW)
        return 0;
    return si_errprintf(err, "no dataset '%s' in the catalog", name);
}

si_table_t *catalog_view_datasets(catalog_t *cat, si_error_t *err)
{
    static const si_column_t cols[] = {
        {"dataset", SI_COL_STR}, {"owner_uid", SI_COL_INT}, {"owner_gid", SI_COL_INT},
        {"mode", SI_COL_STR}, {"objects", SI_COL_INT}, {"bytes", SI_COL_BYTES},
        {"volumes", SI_COL_INT}, {"cached_pct", SI_COL_PERCENT}, {"description", SI_COL_STR},
    };
    /* Totals kept with the dataset (computed here only when stale); cached
     * bytes come from the cache table, scanned first (CROSS JOIN fixes the
     * order) because it is small next to a dataset's members. */
    static const char sql[] =
        "SELECT d.name, d.owner_uid, d.owner_gid, printf('%04o', d.mode), t.objects, t.bytes,"
        "  t.volumes,"
        "  CASE WHEN t.bytes = 0 THEN (CASE WHEN t.objects = 0 THEN 0.0 ELSE 100.0 END)"
        "   ELSE 100.0 * (SELECT COALESCE(SUM(ca.size), 0) FROM cache ca"
        "    CROSS JOIN dataset_members m ON m.dataset_id = d.id AND m.object_id = ca.object_id)"
        "    / t.bytes END,"
        "  d.description"
        " FROM datasets d JOIN (SELECT id, " DATASET_STATS_SQL " FROM datasets) t ON t.id = d.id"
        " ORDER BY d.name";
    return view(cat, sql, cols, NCOLS(cols), NULL, NULL, err);
}

si_table_t *catalog_view_dataset_volumes(catalog_t *cat, const char *dataset, si_error_t *err)
{
    static const si_column_t cols[] = {
        {"volume", SI_COL_STR}, {"state", SI_COL_STR}, {"copy", SI_COL_INT},
        {"objects", SI_COL_INT}, {"bytes", SI_COL_BYTES}, {"first_position", SI_COL_INT},
        {"last_position", SI_COL_INT},
    };
    static const char sql[] =
        "SELECT v.label, v.state, c.copy, COUNT(*), SUM(c.length), MIN(c.position),"
        " MAX(c.position)"
        " FROM datasets d JOIN dataset_members m ON m.dataset_id = d.id"
        " JOIN tape_copies c ON c.object_id = m.object_id JOIN volumes v ON v.id = c.volume_id"
        " WHERE d.name = ?1 GROUP BY v.id, c.copy ORDER BY c.copy, v.label";
    if (dataset_exists(cat, dataset, err) < 0)
        return NULL;
    return view(cat, sql, cols, NCOLS(cols), dataset, NULL, err);
}

si_table_t *catalog_view_volume_datasets(catalog_t *cat, const char *label, si_error_t *err)
{
    static const si_column_t cols[] = {
        {"dataset", SI_COL_STR}, {"objects", SI_COL_INT}, {"bytes", SI_COL_BYTES},
        {"first_position", SI_COL_INT}, {"last_position", SI_COL_INT},
    };
    static const char sql[] =
        "SELECT d.name, COUNT(*), SUM(c.length), MIN(c.position), MAX(c.position)"
        " FROM volumes v JOIN tape_copies c ON c.volume_id = v.id"
        " JOIN dataset_members m ON m.object_id = c.object_id"
        " JOIN datasets d ON d.id = m.dataset_id"
        " WHERE v.label = ?1 GROUP BY d.id ORDER BY d.name";
    db_stmt_t *s = catalog_prepare(cat, "SELECT 1 FROM volumes WHERE label = ?1", err);
    if (!s)
        return NULL;
    db_bind_text(s, 1, label, -1);
    int rc = db_step(s);
    db_finalize(s);
    if (rc != DB_ROW) {
        si_errprintf(err, "no volume '%s' in the catalog", label);
        return NULL;
    }
    return view(cat, sql, cols, NCOLS(cols), label, NULL, err);
}

si_table_t *catalog_view_volumes(catalog_t *cat, si_error_t *err)
{
    static const si_column_t cols[] = {
        {"volume", SI_COL_STR}, {"media", SI_COL_STR}, {"library", SI_COL_STR},
        {"state", SI_COL_STR}, {"capacity", SI_COL_BYTES}, {"used", SI_COL_BYTES},
        {"copies", SI_COL_INT}, {"catalogued_bytes", SI_COL_BYTES},
    };
    static const char sql[] =
        "SELECT v.label, v.media, v.library, v.state, v.capacity_bytes, v.used_bytes,"
        " (SELECT COUNT(*) FROM tape_copies c WHERE c.volume_id = v.id),"
        " (SELECT COALESCE(SUM(c.length), 0) FROM tape_copies c WHERE c.volume_id = v.id)"
        " FROM volumes v ORDER BY v.label";
    return view(cat, sql, cols, NCOLS(cols), NULL, NULL, err);
}

si_table_t *catalog_view_object(catalog_t *cat, const char *bucket_key, si_error_t *err)
{
    static const si_column_t cols[] = {
        {"bucket", SI_COL_STR}, {"key", SI_COL_STR}, {"size", SI_COL_BYTES},
        {"checksum", SI_COL_STR}, {"copy", SI_COL_INT}, {"volume", SI_COL_STR},
        {"file_seq", SI_COL_INT}, {"position", SI_COL_INT}, {"cached", SI_COL_STR},
        {"pins", SI_COL_INT},
    };
    static const char sql[] =
        "SELECT o.bucket, o.key, o.size, o.checksum, c.copy, v.label, c.file_seq, c.position,"
        " CASE WHEN ca.object_id IS NULL THEN 'no' WHEN ca.verified <> 0 THEN 'verified'"
        "  ELSE 'yes' END, ca.pins"
        " FROM objects o LEFT JOIN tape_copies c ON c.object_id = o.id"
        " LEFT JOIN volumes v ON v.id = c.volume_id LEFT JOIN cache ca ON ca.object_id = o.id"
        " WHERE o.bucket = ?1 AND o.key = ?2 ORDER BY c.copy";
    const char *slash = strchr(bucket_key, '/');
    if (!slash || slash == bucket_key || !slash[1]) {
        si_errprintf(err, "'%s' is not bucket/key", bucket_key);
        return NULL;
    }
    char *bucket = strndup(bucket_key, (size_t)(slash - bucket_key));
    if (!bucket) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    si_table_t *t = view(cat, sql, cols, NCOLS(cols), bucket, slash + 1, err);
    free(bucket);
    if (t && si_table_rows(t) == 0) {
        si_errprintf(err, "no object %s in the catalog", bucket_key);
        si_table_free(t);
        return NULL;
    }
    return t;
}

si_table_t *catalog_view_requests(catalog_t *cat, const catalog_request_filter_t *f,
                                  si_error_t *err)
{
    static const si_column_t cols[] = {
        {"request", SI_COL_STR}, {"uid", SI_COL_INT}, {"job", SI_COL_STR},
        {"state", SI_COL_STR}, {"priority", SI_COL_INT}, {"files", SI_COL_INT},
        {"completed", SI_COL_INT}, {"failed", SI_COL_INT}, {"bytes", SI_COL_BYTES},
        {"bytes_done", SI_COL_BYTES}, {"created", SI_COL_STR}, {"reason", SI_COL_STR},
    };
    /* state EXPIRED: released because its pins outlived their lifetime */
    static const char sql[] =
        "SELECT r.uuid, r.uid, r.job_id, CASE WHEN r.expired <> 0 THEN 'EXPIRED' ELSE r.state END,"
        " r.priority, COUNT(i.object_id),"
        " SUM(i.state = 'COMPLETED'), SUM(i.state = 'FAILED'), COALESCE(SUM(o.size), 0),"
        " COALESCE(SUM(i.bytes_done), 0), datetime(r.created, 'unixepoch'),"
        " COALESCE(r.end_reason, r.error)"
        " FROM requests r LEFT JOIN request_items i ON i.request_id = r.id"
        " LEFT JOIN objects o ON o.id = i.object_id"
        " WHERE (?1 IS NULL OR r.uid = ?1) AND (?2 IS NULL OR r.job_id = ?2)"
        " AND (?3 IS NULL OR (CASE WHEN r.expired <> 0 THEN 'EXPIRED' ELSE r.state END) = ?3)"
        " GROUP BY r.id ORDER BY r.created, r.id";
    db_stmt_t *s = catalog_prepare(cat, sql, err);
    if (!s)
        return NULL;
    if (f && f->user) {
        int64_t uid;
        if (si_parse_i64(f->user, &uid) < 0) {
            struct passwd *pw = getpwnam(f->user);
            if (!pw) {
                db_finalize(s);
                si_errprintf(err, "no user '%s'", f->user);
                return NULL;
            }
            uid = pw->pw_uid;
        }
        db_bind_int64(s, 1, uid);
    }
    if (f && f->job)
        db_bind_text(s, 2, f->job, -1);
    if (f && f->state)
        db_bind_text(s, 3, f->state, -1);
    si_table_t *t = catalog_table_from_stmt(cat, s, cols, NCOLS(cols), err);
    db_finalize(s);
    return t;
}

si_table_t *catalog_view_cache(catalog_t *cat, si_error_t *err)
{
    static const si_column_t cols[] = {
        {"objects", SI_COL_INT}, {"bytes", SI_COL_BYTES}, {"pinned_objects", SI_COL_INT},
        {"pinned_bytes", SI_COL_BYTES}, {"verified_objects", SI_COL_INT},
        {"oldest_access", SI_COL_STR}, {"segment_objects", SI_COL_INT},
        {"segments", SI_COL_INT},
    };
    static const char sql[] =
        "SELECT COUNT(*), COALESCE(SUM(size), 0), COALESCE(SUM(pins > 0), 0),"
        " COALESCE(SUM(CASE WHEN pins > 0 THEN size ELSE 0 END), 0),"
        " COALESCE(SUM(CASE WHEN verified <> 0 THEN 1 ELSE 0 END), 0), datetime(MIN(last_access), 'unixepoch'),"
        " COALESCE(SUM(CASE WHEN segment IS NOT NULL THEN 1 ELSE 0 END), 0),"
        " (SELECT COUNT(*) FROM cache_segments)"
        " FROM cache";
    return view(cat, sql, cols, NCOLS(cols), NULL, NULL, err);
}

si_table_t *catalog_view_sql(catalog_t *cat, const char *sql, si_error_t *err)
{
    if (!cat->readonly) {
        si_errprintf(err, "ad-hoc SQL needs a catalog opened read-only");
        return NULL;
    }
    db_stmt_t *s = db_prepare_readonly(cat->db, sql, err);
    if (!s)
        return NULL;
    si_table_t *t = catalog_table_from_stmt(cat, s, NULL, 0, err);
    db_finalize(s);
    return t;
}

si_table_t *catalog_view_volume_queue(catalog_t *cat, si_error_t *err)
{
    static const si_column_t cols[] = {
        {"volume", SI_COL_STR}, {"state", SI_COL_STR},  {"requests", SI_COL_INT},
        {"files", SI_COL_INT},  {"bytes", SI_COL_BYTES}, {"recalling", SI_COL_INT},
    };
    /* a waiting file counts on each volume holding a copy of it */
    static const char sql[] =
        "SELECT v.label, v.state, COUNT(DISTINCT i.request_id), COUNT(*),"
        " COALESCE(SUM(o.size), 0), COALESCE(SUM(i.state = 'STARTED'), 0)"
        " FROM requests r JOIN request_items i ON i.request_id = r.id"
        " JOIN objects o ON o.id = i.object_id"
        " JOIN tape_copies c ON c.object_id = i.object_id"
        " JOIN volumes v ON v.id = c.volume_id"
        " WHERE r.state IN ('SUBMITTED', 'STARTED') AND i.state IN ('SUBMITTED', 'STARTED')"
        " GROUP BY v.id ORDER BY COUNT(*) DESC, v.label LIMIT 100";
    return view(cat, sql, cols, NCOLS(cols), NULL, NULL, err);
}

si_table_t *catalog_view_recent_pushes(catalog_t *cat, const char *uid, si_error_t *err)
{
    static const si_column_t cols[] = {
        {"push", SI_COL_STR},    {"uid", SI_COL_INT},     {"dataset", SI_COL_STR},
        {"files", SI_COL_INT},   {"durable", SI_COL_INT}, {"failed", SI_COL_INT},
        {"bytes", SI_COL_BYTES}, {"created", SI_COL_REAL}, {"updated", SI_COL_REAL},
    };
    /* the 20 latest first (pushes_by_created, schema 1.16), then their
     * items only: every push's items were summed before the limit */
    static const char sql[] =
        "SELECT p.uuid, p.uid, d.name, COUNT(pi.object_id),"
        " COALESCE(SUM(CASE WHEN pi.state = 'DURABLE' THEN 1 ELSE 0 END), 0),"
        " COALESCE(SUM(CASE WHEN pi.state = 'FAILED' THEN 1 ELSE 0 END), 0),"
        " COALESCE(SUM(o.size), 0), p.created, p.updated"
        " FROM (SELECT id, uuid, uid, dataset_id, created, updated FROM pushes"
        "  WHERE ?1 IS NULL OR uid = CAST(?1 AS INTEGER)"
        "  ORDER BY created DESC, id DESC LIMIT 20) p"
        " JOIN datasets d ON d.id = p.dataset_id"
        " LEFT JOIN push_items pi ON pi.push_id = p.id LEFT JOIN objects o ON o.id = pi.object_id"
        " GROUP BY p.id, p.uuid, p.uid, d.name, p.created, p.updated"
        " ORDER BY p.created DESC, p.id DESC";
    return view(cat, sql, cols, NCOLS(cols), uid, NULL, err);
}

si_table_t *catalog_view_queue_datasets(catalog_t *cat, si_error_t *err)
{
    static const si_column_t cols[] = {
        {"request", SI_COL_STR}, {"datasets", SI_COL_STR}, {"count", SI_COL_INT},
    };
    /* the datasets (by name) holding the files of each active request;
     * the list is group_concat on SQLite, string_agg on PostgreSQL */
#define QUEUE_DATASETS_SQL(list)                                                   \
    "SELECT u.uuid, " list ", COUNT(*) FROM"                                       \
    " (SELECT DISTINCT r.id, r.uuid, d.name FROM requests r"                       \
    "  JOIN request_items i ON i.request_id = r.id"                                \
    "  JOIN dataset_members m ON m.object_id = i.object_id"                        \
    "  JOIN datasets d ON d.id = m.dataset_id"                                     \
    "  WHERE r.state IN ('SUBMITTED', 'STARTED') ORDER BY r.id, d.name) u"         \
    " GROUP BY u.id, u.uuid"
    const char *sql = db_sql(catalog_driver(cat), QUEUE_DATASETS_SQL("group_concat(u.name, ' ')"),
                             QUEUE_DATASETS_SQL("string_agg(u.name, ' ' ORDER BY u.name)"));
#undef QUEUE_DATASETS_SQL
    return view(cat, sql, cols, NCOLS(cols), NULL, NULL, err);
}
