/* Opening the catalog, schema migrations, transactions and record writes. */
#include "config.h"
#include "catalog/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "catalog/schema.h"
#include "common/checksum.h"
#include "common/clock.h"
#include "common/text.h"

static const char *const stmt_sql[STMT_COUNT] = {
    [STMT_OBJECT_INSERT] =
        "INSERT INTO objects(bucket, key, size, checksum, mtime, etag) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [STMT_OBJECT_FIND] = "SELECT id, size, checksum FROM objects WHERE bucket = ?1 AND key = ?2",
    [STMT_COPY_INSERT] =
        "INSERT INTO tape_copies(object_id, copy, volume_id, file_seq, position, length)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [STMT_COPY_FIND] =
        "SELECT volume_id, position, length FROM tape_copies WHERE object_id = ?1 AND copy = ?2",
    [STMT_VOLUME_FIND] = "SELECT id FROM volumes WHERE label = ?1",
    [STMT_VOLUME_INSERT] =
        "INSERT INTO volumes(label, media, library, state, capacity_bytes, used_bytes)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [STMT_EVENT_INSERT] = "INSERT INTO events(time, kind, subject, detail) VALUES (?1, ?2, ?3, ?4)",
    /* ?3 the subjects, ?4 the details (db_bind_text_list), paired by
     * position: a join of the two json_each would compare every pair */
    [STMT_EVENTS_INSERT] = "INSERT INTO events(time, kind, subject, detail)"
                           " SELECT ?1, ?2, s.value, json_extract(?4, '$[' || s.key || ']')"
                           " FROM json_each(?3) AS s ORDER BY s.key",
    [STMT_MEMBER_OF_ANY] = "SELECT 1 FROM dataset_members WHERE object_id = ?1 LIMIT 1",
    [STMT_DATASETS_STALE] =
        "UPDATE datasets SET stat_volumes = NULL WHERE id IN"
        " (SELECT dataset_id FROM dataset_members WHERE object_id = ?1)",
    [STMT_OBJECT_META_KEEP] =
        "INSERT OR IGNORE INTO object_meta(object_id, headers, storage_class) VALUES (?1, ?2, ?3)",
};

/* PostgreSQL's own spelling where it differs: a failed statement aborts a
 * PostgreSQL transaction, so "insert, and on a duplicate look it up" is an
 * insert that does nothing on a conflict; ids come back with the row. */
static const char *const stmt_sql_pg[STMT_COUNT] = {
    [STMT_EVENTS_INSERT] = "INSERT INTO events(time, kind, subject, detail) SELECT ?1, ?2, s, d"
                           " FROM unnest(CAST(?3 AS text[]), CAST(?4 AS text[]))"
                           " WITH ORDINALITY AS u(s, d, n) ORDER BY n",
    [STMT_OBJECT_INSERT] =
        "INSERT INTO objects(bucket, key, size, checksum, mtime, etag) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        " ON CONFLICT DO NOTHING RETURNING id",
    [STMT_COPY_INSERT] =
        "INSERT INTO tape_copies(object_id, copy, volume_id, file_seq, position, length)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
    [STMT_VOLUME_INSERT] =
        "INSERT INTO volumes(label, media, library, state, capacity_bytes, used_bytes)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
};


int catalog_sqlerr(catalog_t *cat, si_error_t *err, const char *context)
{
    return db_error(cat->db, err, context);
}

int catalog_exec(catalog_t *cat, const char *sql, si_error_t *err)
{
    return db_exec(cat->db, sql, err);
}

db_stmt_t *catalog_prepare(catalog_t *cat, const char *sql, si_error_t *err)
{
    return db_prepare(cat->db, sql, err);
}

db_stmt_t *catalog_stmt(catalog_t *cat, catalog_stmt_id_t id, si_error_t *err)
{
    const char *pg = stmt_sql_pg[id];
    return db_cached(cat->db, db_sql(cat->db, stmt_sql[id], pg ? pg : stmt_sql[id]), err);
}

int catalog_fold_totals(catalog_t *cat, si_error_t *err)
{
    if (db_engine(cat->db) != DB_POSTGRES || db_in_transaction(cat->db))
        return 0;
    /* one statement each: a reader sees each change in the row or in the
     * changes, never both or neither */
    static const char fold_usage[] =
        "WITH moved AS (DELETE FROM cache_usage_changes RETURNING *)"
        " UPDATE cache_usage u SET objects = u.objects + m.objects, bytes = u.bytes + m.bytes,"
        "  pinned_objects = u.pinned_objects + m.pinned_objects,"
        "  pinned_bytes = u.pinned_bytes + m.pinned_bytes"
        " FROM (SELECT coalesce(sum(objects), 0) AS objects, coalesce(sum(bytes), 0) AS bytes,"
        "  coalesce(sum(pinned_objects), 0) AS pinned_objects,"
        "  coalesce(sum(pinned_bytes), 0) AS pinned_bytes, count(*) AS n FROM moved) m"
        " WHERE m.n > 0";
    static const char fold_items[] =
        "WITH moved AS (DELETE FROM request_item_total_changes RETURNING *)"
        " UPDATE request_item_totals t SET waiting_files = t.waiting_files + m.files,"
        "  waiting_bytes = t.waiting_bytes + m.bytes, started_files = t.started_files + m.started"
        " FROM (SELECT coalesce(sum(waiting_files), 0) AS files,"
        "  coalesce(sum(waiting_bytes), 0) AS bytes,"
        "  coalesce(sum(started_files), 0) AS started, count(*) AS n FROM moved) m"
        " WHERE m.n > 0";
    static const char fold_pushes[] =
        "WITH moved AS (DELETE FROM push_item_total_changes RETURNING *)"
        " UPDATE push_item_totals t SET received_files = t.received_files + m.rf,"
        "  received_bytes = t.received_bytes + m.rb, archiving_files = t.archiving_files + m.af,"
        "  durable_files = t.durable_files + m.df, failed_files = t.failed_files + m.ff"
        " FROM (SELECT coalesce(sum(received_files), 0) AS rf,"
        "  coalesce(sum(received_bytes), 0) AS rb, coalesce(sum(archiving_files), 0) AS af,"
        "  coalesce(sum(durable_files), 0) AS df, coalesce(sum(failed_files), 0) AS ff,"
        "  count(*) AS n FROM moved) m"
        " WHERE m.n > 0";
    /* a fold with nothing to move writes nothing (the requests' upkeep
     * calls this every few seconds); the folded changes stay dead rows that
     * every read of the totals scans until vacuumed, and autovacuum wakes
     * once a minute: 1,000,000 of them made a read of the cache usage 23 ms
     * instead of 0.2 (BENCHMARKS.md) */
    int64_t folded = 0;
    if (db_exec(cat->db, fold_usage, err) < 0)
        return si_errprefix(err, "folding the cache usage's changes");
    folded += db_changes(cat->db);
    if (db_exec(cat->db, fold_items, err) < 0)
        return si_errprefix(err, "folding the waiting items' changes");
    folded += db_changes(cat->db);
    if (db_exec(cat->db, fold_pushes, err) < 0)
        return si_errprefix(err, "folding the pushed files' changes");
    folded += db_changes(cat->db);
    if (folded &&
        db_exec(cat->db, "VACUUM (SKIP_LOCKED) cache_usage_changes, request_item_total_changes,"
                         " push_item_total_changes", err) < 0)
        return si_errprefix(err, "vacuuming the kept totals' changes");
    return 0;
}

int catalog_begin(catalog_t *cat, si_error_t *err)
{
    return db_begin(cat->db, err);
}

int catalog_begin_unsynced(catalog_t *cat, si_error_t *err)
{
    return db_begin_unsynced(cat->db, err);
}

int catalog_commit(catalog_t *cat, si_error_t *err)
{
    return db_commit(cat->db, err);
}

void catalog_rollback(catalog_t *cat)
{
    db_rollback(cat->db);
}

int catalog_latest_version(void)
{
    size_t n;
    const catalog_schema_step_t *steps = catalog_schema_steps(&n);
    return steps[n - 1].version;
}

/* The schema version: SQLite keeps it in PRAGMA user_version, PostgreSQL in
 * the one-row table stagein_schema (none yet: 0). */
int catalog_schema_version(catalog_t *cat)
{
    return db_schema_version(cat->db);
}

static int refuse_newer(const catalog_t *cat, int have, si_error_t *err)
{
    if (CATALOG_SCHEMA_MAJOR(have) <= CATALOG_SCHEMA_MAJOR(catalog_latest_version()))
        return 0;
    return si_errprintf(err,
                        "catalog %s has schema version %d.%d, newer than this stagein "
                        "supports (%d.x): refusing to open it; upgrade stagein",
                        cat->path, have / 1000, have % 1000,
                        CATALOG_SCHEMA_MAJOR(catalog_latest_version()));
}

/* One step in one transaction. On PostgreSQL several instances may start at
 * once: an advisory lock orders them and the version is read again under it. */
static int apply_step(catalog_t *cat, const catalog_schema_step_t *step, si_error_t *err)
{
    db_t *db = cat->db;
    char *ddl = NULL;
    if (catalog_begin(cat, err) < 0)
        return -1;
    if (db_lock_schema(db, err) < 0)
        goto error;
    int have = db_schema_version(db);
    if (have < 0) {
        catalog_sqlerr(cat, err, cat->path);
        goto error;
    }
    if (refuse_newer(cat, have, err) < 0)
        goto error;
    if (have >= step->version) {
        catalog_rollback(cat);
        return 0;
    }
    if (step->sql && !(ddl = db_ddl(db, step->sql))) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    const char *own = db_sql(db, step->sqlite, step->postgres);
    if ((ddl && db_exec(db, ddl, err) < 0) || (own && db_exec(db, own, err) < 0) ||
        db_set_schema_version(db, step->version, err) < 0) {
        si_errprefix(err, "upgrading the catalog to schema %d.%d", step->version / 1000,
                     step->version % 1000);
        goto error;
    }
    free(ddl);
    return catalog_commit(cat, err);
error:
    free(ddl);
    catalog_rollback(cat);
    return -1;
}

static int migrate(catalog_t *cat, int target, si_error_t *err)
{
    size_t n;
    const catalog_schema_step_t *steps = catalog_schema_steps(&n);
    int have = catalog_schema_version(cat);
    if (have < 0)
        return catalog_sqlerr(cat, err, cat->path);
    if (refuse_newer(cat, have, err) < 0)
        return -1;
    for (size_t i = 0; i < n && steps[i].version <= target; i++)
        if (steps[i].version > have && apply_step(cat, &steps[i], err) < 0)
            return -1;
    return 0;
}

/* The site a catalog belongs to is written by its first writer; another
 * site's stagein refuses it (two sites sharing one database by a mistaken
 * URL would recall and evict each other's data). */
static int check_site(catalog_t *cat, const char *site, si_error_t *err)
{
    if (!site || catalog_schema_version(cat) < CATALOG_SITE_VERSION)
        return 0;
    db_stmt_t *s = catalog_prepare(cat, "SELECT name FROM site", err);
    if (!s)
        return -1;
    int rc = db_step(s);
    char have[256] = "";
    if (rc == DB_ROW)
        snprintf(have, sizeof(have), "%s", db_column_text(s, 0) ? db_column_text(s, 0) : "");
    db_finalize(s);
    if (rc == DB_ERROR)
        return catalog_sqlerr(cat, err, "reading the catalog's site");
    if (rc == DB_ROW)
        return strcmp(have, site) == 0
                   ? 0
                   : si_errprintf(err, "catalog %s belongs to site '%s', not '%s' (catalog.site): "
                                  "refusing another site's catalog", cat->path, have, site);
    if (cat->readonly)
        return 0;
    if (!(s = catalog_prepare(cat, "INSERT INTO site(name) VALUES (?1)", err)))
        return -1;
    db_bind_text(s, 1, site, -1);
    rc = db_step(s);
    db_finalize(s);
    return rc == DB_DONE ? 0 : catalog_sqlerr(cat, err, "recording the catalog's site");
}

static catalog_t *open_db(const catalog_open_opts_t *o, si_error_t *err)
{
    catalog_t *cat = calloc(1, sizeof(*cat));
    if (!cat || !(cat->path = strdup(o->target))) {
        free(cat);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    cat->readonly = o->flags & CATALOG_READONLY;
    int dflags = (cat->readonly ? DB_OPEN_READONLY : 0) |
                 ((o->flags & CATALOG_CREATE) ? DB_OPEN_CREATE : 0);
    if (!(cat->db = db_open(o->target, dflags, o->password_file, err)))
        goto error;
    db_set_health(cat->db, o->health);
    int target = o->target_version ? o->target_version : catalog_latest_version();
    if (!cat->readonly) {
        if (migrate(cat, target, err) < 0)
            goto error;
    } else {
        int have = catalog_schema_version(cat);
        if (have < 0) {
            catalog_sqlerr(cat, err, o->target);
            goto error;
        }
        if (have == 0) {
            si_errprintf(err, "catalog %s is empty (no schema); create it first", o->target);
            goto error;
        }
        if (refuse_newer(cat, have, err) < 0)
            goto error;
    }
    if (check_site(cat, o->site, err) < 0)
        goto error;
    return cat;
error:
    catalog_close(cat);
    return NULL;
}

catalog_t *catalog_open_opts(const catalog_open_opts_t *opts, si_error_t *err)
{
    return open_db(opts, err);
}

bool catalog_target_is_url(const char *target)
{
    return db_target_is_url(target);
}

catalog_t *catalog_open(const char *path, int flags, si_error_t *err)
{
    catalog_open_opts_t o = {.target = path, .flags = flags};
    return open_db(&o, err);
}

catalog_t *catalog_open_at_version(const char *path, int target_version, si_error_t *err)
{
    catalog_open_opts_t o = {.target = path, .flags = CATALOG_CREATE,
                             .target_version = target_version};
    return open_db(&o, err);
}

void catalog_close(catalog_t *cat)
{
    if (!cat)
        return;
    db_close(cat->db);
    free(cat->path);
    free(cat);
}

const char *catalog_path(const catalog_t *cat)
{
    return cat->path;
}

sqlite3 *catalog_db(catalog_t *cat)
{
    return db_sqlite(cat->db);
}

db_t *catalog_driver(catalog_t *cat)
{
    return cat->db;
}

/* ---- records ---------------------------------------------------------- */

static int volume_label_check(const char *label, si_error_t *err)
{
    size_t n = strlen(label);
    if (n == 0 || n > 32)
        return si_errprintf(err, "volume label '%.40s' must be 1 to 32 characters", label);
    for (size_t i = 0; i < n; i++) {
        char c = label[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return si_errprintf(err, "volume label '%s' has invalid character '%c' "
                                "(allowed: A-Z 0-9 _ -)", label, c);
    }
    return 0;
}

int catalog_volume_ensure(catalog_t *cat, const catalog_volume_t *v, int64_t *id_out,
                          si_error_t *err)
{
    int64_t scratch;
    int64_t *id = id_out ? id_out : &scratch;
    if (volume_label_check(v->label, err) < 0)
        return -1;
    db_stmt_t *s = catalog_stmt(cat, STMT_VOLUME_FIND, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, v->label, -1);
    int rc = db_step(s);
    if (rc == DB_ROW) {
        *id = db_column_int64(s, 0);
        db_reset(s);
        return 0;
    }
    db_reset(s);
    if (rc != DB_DONE)
        return catalog_sqlerr(cat, err, "looking up volume");
    if (v->state && strcmp(v->state, "online") && strcmp(v->state, "offline") &&
        strcmp(v->state, "full") && strcmp(v->state, "disabled") && strcmp(v->state, "failed"))
        return si_errprintf(err, "volume state '%s' is not one of online, offline, full, "
                            "disabled, failed", v->state);
    s = catalog_stmt(cat, STMT_VOLUME_INSERT, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, v->label, -1);
    db_bind_text(s, 2, v->media ? v->media : "LTO-9", -1);
    db_bind_text(s, 3, v->library ? v->library : "sim", -1);
    db_bind_text(s, 4, v->state ? v->state : "online", -1);
    db_bind_int64(s, 5, v->capacity_bytes ? v->capacity_bytes
                                               : 18000000000000LL);
    db_bind_int64(s, 6, v->used_bytes);
    rc = db_step(s);
    if (rc == DB_ROW) /* an engine whose spelling returns the id */
        *id = db_column_int64(s, 0);
    else if (rc == DB_DONE)
        *id = db_last_insert_id(cat->db);
    db_reset(s);
    if (rc == DB_ERROR)
        return catalog_sqlerr(cat, err, "adding volume");
    return 1;
}

int catalog_volume_set_state(catalog_t *cat, const char *label, const char *state,
                             si_error_t *err)
{
    db_stmt_t *s = catalog_prepare(cat, "UPDATE volumes SET state = ?2 WHERE label = ?1", err);
    if (!s)
        return -1;
    db_bind_text(s, 1, label, -1);
    db_bind_text(s, 2, state, -1);
    int rc = db_step(s);
    int changed = db_changes(cat->db);
    db_finalize(s);
    if (rc != DB_DONE)
        return catalog_sqlerr(cat, err, "setting volume state");
    if (changed == 0)
        return si_errprintf(err, "no volume '%s' in the catalog", label);
    return 0;
}

int catalog_volume_set_used(catalog_t *cat, const char *label, uint64_t used_bytes,
                            si_error_t *err)
{
    db_stmt_t *s = catalog_prepare(cat, "UPDATE volumes SET used_bytes = ?2 WHERE label = ?1",
                                      err);
    if (!s)
        return -1;
    db_bind_text(s, 1, label, -1);
    db_bind_int64(s, 2, used_bytes);
    int rc = db_step(s);
    int changed = db_changes(cat->db);
    db_finalize(s);
    if (rc != DB_DONE)
        return catalog_sqlerr(cat, err, "setting volume usage");
    if (changed == 0)
        return si_errprintf(err, "no volume '%s' in the catalog", label);
    return 0;
}

int catalog_object_check(const catalog_object_t *o, si_error_t *err)
{
    if (si_bucket_check(o->bucket, strlen(o->bucket), err) < 0 ||
        si_key_check(o->key, strlen(o->key), err) < 0)
        return -1;
    if (o->checksum && !si_checksum_text_valid(o->checksum))
        return si_errprintf(err, "checksum '%.80s' is not 'sha256:<64 hex>' or 'md5:<32 hex>'",
                            o->checksum);
    if (o->size > (uint64_t)INT64_MAX)
        return si_errprintf(err, "size %llu is too large", (unsigned long long)o->size);
    return 0;
}

int catalog_copy_check(const catalog_copy_t *c, si_error_t *err)
{
    if (c->copy < 1)
        return si_errprintf(err, "copy number %d must be 1 or more", c->copy);
    if (c->position > (uint64_t)INT64_MAX || c->length > (uint64_t)INT64_MAX)
        return si_errprintf(err, "position or length too large");
    return 0;
}

int catalog_object_put(catalog_t *cat, const catalog_object_t *o, int64_t *id, si_error_t *err)
{
    if (catalog_object_check(o, err) < 0)
        return -1;
    db_stmt_t *s = catalog_stmt(cat, STMT_OBJECT_INSERT, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, o->bucket, -1);
    db_bind_text(s, 2, o->key, -1);
    db_bind_int64(s, 3, o->size);
    if (o->checksum)
        db_bind_text(s, 4, o->checksum, -1);
    if (o->mtime)
        db_bind_int64(s, 5, o->mtime);
    if (o->etag)
        db_bind_text(s, 6, o->etag, -1);
    /* A plain insert: the unique index answers "already there" for free;
     * an upsert clause costs more on the common path of a bulk import. */
    int rc = db_step(s);
    if (rc == DB_ROW) { /* inserted, RETURNING id */
        *id = db_column_int64(s, 0);
        db_reset(s);
        return 1;
    }
    db_errclass_t why = db_errclass(cat->db);
    /* A duplicate is a unique-constraint error, or (ON CONFLICT DO NOTHING)
     * no row inserted. */
    bool inserted = rc == DB_DONE && db_changes(cat->db) > 0;
    db_reset(s);
    if (inserted) {
        *id = db_last_insert_id(cat->db);
        return 1;
    }
    if (rc == DB_ERROR && why != DB_ERR_UNIQUE)
        return catalog_sqlerr(cat, err, "adding object");
    /* Already catalogued: the same object is fine, a different one is not. */
    s = catalog_stmt(cat, STMT_OBJECT_FIND, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, o->bucket, -1);
    db_bind_text(s, 2, o->key, -1);
    if (db_step(s) != DB_ROW) {
        db_reset(s);
        return catalog_sqlerr(cat, err, "looking up object");
    }
    *id = db_column_int64(s, 0);
    uint64_t size = (uint64_t)db_column_int64(s, 1);
    const char *sum = db_column_text(s, 2);
    int same = size == o->size && (!o->checksum || !sum || strcmp(sum, o->checksum) == 0);
    char have[SI_CHECKSUM_TEXT_MAX];
    snprintf(have, sizeof(have), "%s", sum ? sum : "-");
    db_reset(s);
    if (!same)
        return si_errprintf(err, "%s/%s is already catalogued with size %llu checksum %s, "
                            "which differs", o->bucket, o->key, (unsigned long long)size, have);
    return 0;
}

int catalog_object_meta_keep(catalog_t *cat, int64_t object_id, const char *headers,
                             const char *storage_class, si_error_t *err)
{
    if (!headers && !storage_class)
        return 0;
    db_stmt_t *s = catalog_stmt(cat, STMT_OBJECT_META_KEEP, err);
    if (!s)
        return -1;
    db_bind_int64(s, 1, object_id);
    db_bind_text(s, 2, headers, -1);
    db_bind_text(s, 3, storage_class, -1);
    int rc = db_step(s);
    db_reset(s);
    return rc == DB_DONE ? 0 : catalog_sqlerr(cat, err, "recording an object's headers");
}

int catalog_copy_put(catalog_t *cat, const catalog_copy_t *c, si_error_t *err)
{
    int64_t volume_id;
    catalog_volume_t v = {.label = c->volume};
    if (catalog_volume_ensure(cat, &v, &volume_id, err) < 0)
        return -1;
    return catalog_copy_put_on(cat, c, volume_id, true, err);
}

/* A new copy may add a volume to the datasets holding the object. The
 * membership probe is a read, so bulk imports of new objects pay little. */
static int mark_datasets_stale(catalog_t *cat, int64_t object_id, si_error_t *err)
{
    db_stmt_t *s = catalog_stmt(cat, STMT_MEMBER_OF_ANY, err);
    if (!s)
        return -1;
    db_bind_int64(s, 1, object_id);
    int rc = db_step(s);
    db_reset(s);
    if (rc == DB_DONE)
        return 0;
    if (rc != DB_ROW)
        return catalog_sqlerr(cat, err, "looking up datasets");
    s = catalog_stmt(cat, STMT_DATASETS_STALE, err);
    if (!s)
        return -1;
    db_bind_int64(s, 1, object_id);
    rc = db_step(s);
    db_reset(s);
    return rc == DB_DONE ? 0 : catalog_sqlerr(cat, err, "marking datasets");
}

int catalog_copy_put_on(catalog_t *cat, const catalog_copy_t *c, int64_t volume_id,
                        bool maybe_member, si_error_t *err)
{
    if (catalog_copy_check(c, err) < 0)
        return -1;
    db_stmt_t *s = catalog_stmt(cat, STMT_COPY_INSERT, err);
    if (!s)
        return -1;
    db_bind_int64(s, 1, c->object_id);
    db_bind_int(s, 2, c->copy);
    db_bind_int64(s, 3, volume_id);
    if (c->file_seq >= 0)
        db_bind_int64(s, 4, c->file_seq);
    db_bind_int64(s, 5, c->position);
    db_bind_int64(s, 6, c->length);
    int rc = db_step(s);
    db_errclass_t why = db_errclass(cat->db);
    /* ON CONFLICT DO NOTHING: an existing copy changes no row. */
    bool inserted = rc == DB_DONE && db_changes(cat->db) > 0;
    db_reset(s);
    if (inserted) {
        if (maybe_member && mark_datasets_stale(cat, c->object_id, err) < 0)
            return -1;
        return 1;
    }
    if (rc == DB_ERROR && why != DB_ERR_UNIQUE)
        return catalog_sqlerr(cat, err, "adding tape copy");
    s = catalog_stmt(cat, STMT_COPY_FIND, err);
    if (!s)
        return -1;
    db_bind_int64(s, 1, c->object_id);
    db_bind_int(s, 2, c->copy);
    if (db_step(s) != DB_ROW) {
        db_reset(s);
        return catalog_sqlerr(cat, err, "looking up tape copy");
    }
    int same = db_column_int64(s, 0) == volume_id &&
               (uint64_t)db_column_int64(s, 1) == c->position &&
               (uint64_t)db_column_int64(s, 2) == c->length;
    db_reset(s);
    if (!same)
        return si_errnoprintf(err, EEXIST,
                              "copy %d is already catalogued at another volume or position",
                              c->copy);
    return 0;
}

int catalog_object_lookup(catalog_t *cat, const char *bucket, const char *key, int64_t *id,
                          si_error_t *err)
{
    db_stmt_t *s = catalog_stmt(cat, STMT_OBJECT_FIND, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, bucket, -1);
    db_bind_text(s, 2, key, -1);
    int rc = db_step(s);
    if (rc == DB_ROW)
        *id = db_column_int64(s, 0);
    db_reset(s);
    if (rc == DB_ROW)
        return 0;
    if (rc == DB_DONE)
        return si_errprintf(err, "no object %s/%s in the catalog", bucket, key);
    return catalog_sqlerr(cat, err, "looking up object");
}

int catalog_event(catalog_t *cat, const char *kind, const char *subject, const char *detail)
{
    db_stmt_t *s = catalog_stmt(cat, STMT_EVENT_INSERT, NULL);
    if (!s)
        return -1;
    db_bind_double(s, 1, si_wall_now());
    db_bind_text(s, 2, kind, -1);
    if (subject)
        db_bind_text(s, 3, subject, -1);
    if (detail)
        db_bind_text(s, 4, detail, -1);
    int rc = db_step(s);
    db_reset(s);
    return rc == DB_DONE ? 0 : -1;
}

int catalog_events(catalog_t *cat, const char *kind, const char *const *subjects,
                   const char *const *details, size_t n)
{
    enum { CHUNK = 256 }; /* events per statement */
    double now = si_wall_now();
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        db_stmt_t *s = catalog_stmt(cat, STMT_EVENTS_INSERT, NULL);
        if (!s)
            return -1;
        db_bind_double(s, 1, now);
        db_bind_text(s, 2, kind, -1);
        int rc = db_bind_text_list(s, 3, subjects + i, k) < 0 ||
                         db_bind_text_list(s, 4, details + i, k) < 0
                     ? DB_ERROR
                     : db_step(s);
        db_reset(s);
        if (rc != DB_DONE)
            return -1;
    }
    return 0;
}
