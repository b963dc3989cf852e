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
    [STMT_MEMBER_OF_ANY] = "SELECT 1 FROM dataset_members WHERE object_id = ?1 LIMIT 1",
    [STMT_DATASETS_STALE] =
        "UPDATE datasets SET stat_volumes = NULL WHERE id IN"
        " (SELECT dataset_id FROM dataset_members WHERE object_id = ?1)",
    [STMT_OBJECT_META_KEEP] =
        "INSERT OR IGNORE INTO object_meta(object_id, headers, storage_class) VALUES (?1, ?2, ?3)",
};


int catalog_sqlerr(catalog_t *cat, si_error_t *err, const char *context)
{
    return si_errprintf(err, "%s: %s", context, sqlite3_errmsg(cat->db));
}

int catalog_exec(catalog_t *cat, const char *sql, si_error_t *err)
{
    char *msg = NULL;
    if (sqlite3_exec(cat->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        si_errprintf(err, "catalog %s: %s", cat->path, msg ? msg : sqlite3_errmsg(cat->db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

sqlite3_stmt *catalog_prepare(catalog_t *cat, const char *sql, si_error_t *err)
{
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(cat->db, sql, -1, &stmt, NULL) != SQLITE_OK) {
        catalog_sqlerr(cat, err, "catalog query");
        return NULL;
    }
    return stmt;
}

sqlite3_stmt *catalog_stmt(catalog_t *cat, catalog_stmt_id_t id, si_error_t *err)
{
    if (!cat->stmt[id]) {
        cat->stmt[id] = catalog_prepare(cat, stmt_sql[id], err);
        return cat->stmt[id];
    }
    sqlite3_reset(cat->stmt[id]);
    sqlite3_clear_bindings(cat->stmt[id]);
    return cat->stmt[id];
}

int catalog_begin(catalog_t *cat, si_error_t *err)
{
    /* IMMEDIATE: take the write lock now, so busy_timeout applies here and
     * not halfway through a batch. */
    if (catalog_exec(cat, "BEGIN IMMEDIATE", err) < 0)
        return -1;
    cat->in_transaction = 1;
    return 0;
}

int catalog_commit(catalog_t *cat, si_error_t *err)
{
    if (catalog_exec(cat, "COMMIT", err) < 0) {
        catalog_rollback(cat);
        return -1;
    }
    cat->in_transaction = 0;
    return 0;
}

void catalog_rollback(catalog_t *cat)
{
    for (int i = 0; i < STMT_COUNT; i++)
        if (cat->stmt[i])
            sqlite3_reset(cat->stmt[i]);
    if (!sqlite3_get_autocommit(cat->db))
        sqlite3_exec(cat->db, "ROLLBACK", NULL, NULL, NULL);
    cat->in_transaction = 0;
}

int catalog_latest_version(void)
{
    size_t n;
    const catalog_schema_step_t *steps = catalog_schema_steps(&n);
    return steps[n - 1].version;
}

int catalog_schema_version(catalog_t *cat)
{
    sqlite3_stmt *stmt;
    int v = -1;
    if (sqlite3_prepare_v2(cat->db, "PRAGMA user_version", -1, &stmt, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(stmt) == SQLITE_ROW)
        v = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    return v;
}

static int migrate(catalog_t *cat, int target, si_error_t *err)
{
    size_t n;
    const catalog_schema_step_t *steps = catalog_schema_steps(&n);
    int have = catalog_schema_version(cat);
    if (have < 0)
        return catalog_sqlerr(cat, err, cat->path);
    if (CATALOG_SCHEMA_MAJOR(have) > CATALOG_SCHEMA_MAJOR(catalog_latest_version()))
        return si_errprintf(err,
                            "catalog %s has schema version %d.%d, newer than this stagein "
                            "supports (%d.x): refusing to open it; upgrade stagein",
                            cat->path, have / 1000, have % 1000,
                            CATALOG_SCHEMA_MAJOR(catalog_latest_version()));
    for (size_t i = 0; i < n && steps[i].version <= target; i++) {
        if (steps[i].version <= have)
            continue;
        char bump[64];
        snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", steps[i].version);
        if (catalog_begin(cat, err) < 0)
            return -1;
        if (catalog_exec(cat, steps[i].sql, err) < 0 || catalog_exec(cat, bump, err) < 0) {
            catalog_rollback(cat);
            return si_errprefix(err, "upgrading the catalog to schema %d.%d",
                                steps[i].version / 1000, steps[i].version % 1000);
        }
        if (catalog_commit(cat, err) < 0)
            return -1;
    }
    return 0;
}

static catalog_t *open_db(const char *path, int flags, int target_version, si_error_t *err)
{
    catalog_t *cat = calloc(1, sizeof(*cat));
    if (!cat || !(cat->path = strdup(path))) {
        free(cat);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    cat->readonly = flags & CATALOG_READONLY;
    int oflags = cat->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
    if ((flags & CATALOG_CREATE) && !cat->readonly)
        oflags |= SQLITE_OPEN_CREATE;
    struct stat st;
    if (!(oflags & SQLITE_OPEN_CREATE) && stat(path, &st) != 0) {
        si_errprintf(err, "catalog %s: %s", path, strerror(errno));
        goto error;
    }
    if (sqlite3_open_v2(path, &cat->db, oflags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        si_errprintf(err, "catalog %s: %s", path,
                     cat->db ? sqlite3_errmsg(cat->db) : "cannot open");
        goto error;
    }
    sqlite3_extended_result_codes(cat->db, 1);
    sqlite3_busy_timeout(cat->db, 10000);
    if (catalog_exec(cat, "PRAGMA foreign_keys = ON", err) < 0)
        goto error;
    if (!cat->readonly) {
        /* WAL: readers (admins, the CLI) never block the daemon's writer.
         * synchronous=NORMAL is durable across process crashes in WAL mode;
         * callers that acknowledge work commit before answering. */
        if (catalog_exec(cat, "PRAGMA journal_mode = WAL", err) < 0 ||
            catalog_exec(cat, "PRAGMA synchronous = NORMAL", err) < 0 ||
            catalog_exec(cat, "PRAGMA cache_size = -131072", err) < 0 || /* 128 MiB */
            /* statement journals (triggers) in memory, not in temp files */
            catalog_exec(cat, "PRAGMA temp_store = MEMORY", err) < 0)
            goto error;
        if (migrate(cat, target_version, err) < 0)
            goto error;
    } else {
        int have = catalog_schema_version(cat);
        if (have < 0) {
            catalog_sqlerr(cat, err, path);
            goto error;
        }
        if (have == 0) {
            si_errprintf(err, "catalog %s is empty (no schema); create it first", path);
            goto error;
        }
        if (CATALOG_SCHEMA_MAJOR(have) > CATALOG_SCHEMA_MAJOR(catalog_latest_version())) {
            si_errprintf(err, "catalog %s has schema version %d.%d, newer than this stagein "
                         "supports (%d.x): refusing to open it; upgrade stagein",
                         path, have / 1000, have % 1000,
                         CATALOG_SCHEMA_MAJOR(catalog_latest_version()));
            goto error;
        }
    }
    return cat;
error:
    catalog_close(cat);
    return NULL;
}

catalog_t *catalog_open(const char *path, int flags, si_error_t *err)
{
    return open_db(path, flags, catalog_latest_version(), err);
}

catalog_t *catalog_open_at_version(const char *path, int target_version, si_error_t *err)
{
    return open_db(path, CATALOG_CREATE, target_version, err);
}

void catalog_close(catalog_t *cat)
{
    if (!cat)
        return;
    for (int i = 0; i < STMT_COUNT; i++)
        sqlite3_finalize(cat->stmt[i]);
    if (cat->db)
        sqlite3_close(cat->db);
    free(cat->path);
    free(cat);
}

const char *catalog_path(const catalog_t *cat)
{
    return cat->path;
}

sqlite3 *catalog_db(catalog_t *cat)
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
    sqlite3_stmt *s = catalog_stmt(cat, STMT_VOLUME_FIND, err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, v->label, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
        return 0;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return catalog_sqlerr(cat, err, "looking up volume");
    if (v->state && strcmp(v->state, "online") && strcmp(v->state, "offline") &&
        strcmp(v->state, "full") && strcmp(v->state, "disabled") && strcmp(v->state, "failed"))
        return si_errprintf(err, "volume state '%s' is not one of online, offline, full, "
                            "disabled, failed", v->state);
    s = catalog_stmt(cat, STMT_VOLUME_INSERT, err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, v->label, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, v->media ? v->media : "LTO-9", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, v->library ? v->library : "sim", -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, v->state ? v->state : "online", -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, v->capacity_bytes ? (sqlite3_int64)v->capacity_bytes
                                               : (sqlite3_int64)18000000000000LL);
    sqlite3_bind_int64(s, 6, (sqlite3_int64)v->used_bytes);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return catalog_sqlerr(cat, err, "adding volume");
    *id = sqlite3_last_insert_rowid(cat->db);
    return 1;
}

int catalog_volume_set_state(catalog_t *cat, const char *label, const char *state,
                             si_error_t *err)
{
    sqlite3_stmt *s = catalog_prepare(cat, "UPDATE volumes SET state = ?2 WHERE label = ?1", err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, label, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, state, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    int changed = sqlite3_changes(cat->db);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return catalog_sqlerr(cat, err, "setting volume state");
    if (changed == 0)
        return si_errprintf(err, "no volume '%s' in the catalog", label);
    return 0;
}

int catalog_volume_set_used(catalog_t *cat, const char *label, uint64_t used_bytes,
                            si_error_t *err)
{
    sqlite3_stmt *s = catalog_prepare(cat, "UPDATE volumes SET used_bytes = ?2 WHERE label = ?1",
                                      err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, label, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)used_bytes);
    int rc = sqlite3_step(s);
    int changed = sqlite3_changes(cat->db);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE)
        return catalog_sqlerr(cat, err, "setting volume usage");
    if (changed == 0)
        return si_errprintf(err, "no volume '%s' in the catalog", label);
    return 0;
}

int catalog_object_put(catalog_t *cat, const catalog_object_t *o, int64_t *id, si_error_t *err)
{
    if (si_bucket_check(o->bucket, strlen(o->bucket), err) < 0 ||
        si_key_check(o->key, strlen(o->key), err) < 0)
        return -1;
    if (o->checksum && !si_checksum_text_valid(o->checksum))
        return si_errprintf(err, "checksum '%.80s' is not 'sha256:<64 hex>' or 'md5:<32 hex>'",
                            o->checksum);
    if (o->size > (uint64_t)INT64_MAX)
        return si_errprintf(err, "size %llu is too large", (unsigned long long)o->size);
    sqlite3_stmt *s = catalog_stmt(cat, STMT_OBJECT_INSERT, err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, o->bucket, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, o->key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)o->size);
    if (o->checksum)
        sqlite3_bind_text(s, 4, o->checksum, -1, SQLITE_STATIC);
    if (o->mtime)
        sqlite3_bind_int64(s, 5, o->mtime);
    if (o->etag)
        sqlite3_bind_text(s, 6, o->etag, -1, SQLITE_STATIC);
    /* A plain insert: the unique index answers "already there" for free;
     * an upsert clause costs more on the common path of a bulk import. */
    int rc = sqlite3_step(s);
    int ext = sqlite3_extended_errcode(cat->db);
    sqlite3_reset(s);
    if (rc == SQLITE_DONE) {
        *id = sqlite3_last_insert_rowid(cat->db);
        return 1;
    }
    if (ext != SQLITE_CONSTRAINT_UNIQUE)
        return catalog_sqlerr(cat, err, "adding object");
    /* Already catalogued: the same object is fine, a different one is not. */
    s = catalog_stmt(cat, STMT_OBJECT_FIND, err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, o->bucket, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, o->key, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_reset(s);
        return catalog_sqlerr(cat, err, "looking up object");
    }
    *id = sqlite3_column_int64(s, 0);
    uint64_t size = (uint64_t)sqlite3_column_int64(s, 1);
    const char *sum = (const char *)sqlite3_column_text(s, 2);
    int same = size == o->size && (!o->checksum || !sum || strcmp(sum, o->checksum) == 0);
    char have[SI_CHECKSUM_TEXT_MAX];
    snprintf(have, sizeof(have), "%s", sum ? sum : "-");
    sqlite3_reset(s);
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
    sqlite3_stmt *s = catalog_stmt(cat, STMT_OBJECT_META_KEEP, err);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, object_id);
    sqlite3_bind_text(s, 2, headers, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, storage_class, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : catalog_sqlerr(cat, err, "recording an object's headers");
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
    sqlite3_stmt *s = catalog_stmt(cat, STMT_MEMBER_OF_ANY, err);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, object_id);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_DONE)
        return 0;
    if (rc != SQLITE_ROW)
        return catalog_sqlerr(cat, err, "looking up datasets");
    s = catalog_stmt(cat, STMT_DATASETS_STALE, err);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, object_id);
    rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : catalog_sqlerr(cat, err, "marking datasets");
}

int catalog_copy_put_on(catalog_t *cat, const catalog_copy_t *c, int64_t volume_id,
                        bool maybe_member, si_error_t *err)
{
    if (c->copy < 1)
        return si_errprintf(err, "copy number %d must be 1 or more", c->copy);
    if (c->position > (uint64_t)INT64_MAX || c->length > (uint64_t)INT64_MAX)
        return si_errprintf(err, "position or length too large");
    sqlite3_stmt *s = catalog_stmt(cat, STMT_COPY_INSERT, err);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, c->object_id);
    sqlite3_bind_int(s, 2, c->copy);
    sqlite3_bind_int64(s, 3, volume_id);
    if (c->file_seq >= 0)
        sqlite3_bind_int64(s, 4, c->file_seq);
    sqlite3_bind_int64(s, 5, (sqlite3_int64)c->position);
    sqlite3_bind_int64(s, 6, (sqlite3_int64)c->length);
    int rc = sqlite3_step(s);
    int ext = sqlite3_extended_errcode(cat->db);
    sqlite3_reset(s);
    if (rc == SQLITE_DONE) {
        if (maybe_member && mark_datasets_stale(cat, c->object_id, err) < 0)
            return -1;
        return 1;
    }
    if (ext != SQLITE_CONSTRAINT_PRIMARYKEY)
        return catalog_sqlerr(cat, err, "adding tape copy");
    s = catalog_stmt(cat, STMT_COPY_FIND, err);
    if (!s)
        return -1;
    sqlite3_bind_int64(s, 1, c->object_id);
    sqlite3_bind_int(s, 2, c->copy);
    if (sqlite3_step(s) != SQLITE_ROW) {
        sqlite3_reset(s);
        return catalog_sqlerr(cat, err, "looking up tape copy");
    }
    int same = sqlite3_column_int64(s, 0) == volume_id &&
               (uint64_t)sqlite3_column_int64(s, 1) == c->position &&
               (uint64_t)sqlite3_column_int64(s, 2) == c->length;
    sqlite3_reset(s);
    if (!same)
        return si_errprintf(err, "copy %d is already catalogued at another volume or position",
                            c->copy);
    return 0;
}

int catalog_object_lookup(catalog_t *cat, const char *bucket, const char *key, int64_t *id,
                          si_error_t *err)
{
    sqlite3_stmt *s = catalog_stmt(cat, STMT_OBJECT_FIND, err);
    if (!s)
        return -1;
    sqlite3_bind_text(s, 1, bucket, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, key, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW)
        *id = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (rc == SQLITE_ROW)
        return 0;
    if (rc == SQLITE_DONE)
        return si_errprintf(err, "no object %s/%s in the catalog", bucket, key);
    return catalog_sqlerr(cat, err, "looking up object");
}

int catalog_event(catalog_t *cat, const char *kind, const char *subject, const char *detail)
{
    sqlite3_stmt *s = catalog_stmt(cat, STMT_EVENT_INSERT, NULL);
    if (!s)
        return -1;
    sqlite3_bind_double(s, 1, si_wall_now());
    sqlite3_bind_text(s, 2, kind, -1, SQLITE_STATIC);
    if (subject)
        sqlite3_bind_text(s, 3, subject, -1, SQLITE_STATIC);
    if (detail)
        sqlite3_bind_text(s, 4, detail, -1, SQLITE_STATIC);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : -1;
}
