#include "config.h"
#include "catalog/requests.h"
#include "catalog/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>


#include "common/array.h"
#include "common/clock.h"
#include "common/groups.h"
#include "common/text.h"
#include "common/uuid.h"

const char *const requests_state_names[REQUESTS_NSTATES] = {
    "SUBMITTED", "STARTED", "COMPLETED", "FAILED", "CANCELLED", "RELEASED",
};

/* Read permission of a dataset d: root reads everything, others as the
 * catalog's one rule says. */
#define READABLE_SQL "(:uid = 0 OR " CATALOG_DATASET_READABLE_SQL ")"

#define REQUEST_FINAL_SQL "('COMPLETED', 'FAILED', 'CANCELLED', 'RELEASED')"

typedef enum {
    SQL_DATASET_FIND,
    SQL_DATASET_ITEMS,
    SQL_OBJECT_FIND,
    SQL_PREFIX_OBJECTS,
    SQL_OBJECT_ACCESS,
    SQL_REQUEST_INSERT,
    SQL_ITEM_INSERT,
    SQL_REQUEST_TOTALS,
    SQL_REQUEST_FIND,
    SQL_REQUEST_ITEMS,
    SQL_QUEUE_AHEAD,
    SQL_REQUEST_SET_STATE,
    SQL_ITEMS_CANCEL,
    SQL_ITEM_CANCEL,
    SQL_REQUEST_HELD,
    SQL_UNPIN_REQUEST,
    SQL_BIND_JOB,
    SQL_ITEM_START,
    SQL_ITEM_PROGRESS,
    SQL_ITEM_FINISH,
    SQL_ITEM_STATE,
    SQL_ITEM_REQUEUE,
    SQL_PIN,
    SQL_UNPIN,
    SQL_ITEM_COUNTS,
    SQL_REQUEST_STATE_BY_ID,
    SQL_PENDING,
    SQL_LOCALITY,
    SQL_HOLDER_ADD,
    SQL_HOLDER_DEL,
    SQL_HOLDER_DROP_SUBMISSIONS,
    SQL_HOLDERS_DROP_JOBS,
    SQL_HOLDER_COUNTS,
    SQL_HOLDER_RESOLVE,
    SQL_HOLDERS_ALL,
    SQL_EXPIRED,
    SQL_RECENT_JOBS,
    SQL_USER_STAGED,
    SQL_COUNT
} sql_id_t;

static const char *const sql_text[SQL_COUNT] = {
    /* the bytes a user holds in the cache or waits for: each object once,
     * pinned by one of the user's requests or in one still to be staged */
    [SQL_USER_STAGED] =
        "SELECT coalesce(sum(o.size), 0) FROM objects o WHERE o.id IN"
        " (SELECT p.object_id FROM cache_pins p JOIN requests q ON q.id = p.request_id"
        "  WHERE q.uid = :uid"
        "  UNION SELECT i.object_id FROM request_items i JOIN requests q ON q.id = i.request_id"
        "  WHERE q.uid = :uid AND q.state IN ('SUBMITTED', 'STARTED')"
        "  AND i.state IN ('SUBMITTED', 'STARTED'))",
    [SQL_DATASET_FIND] =
        "SELECT d.id, d.owner_uid, d.owner_gid, d.mode, " READABLE_SQL
        " FROM datasets d WHERE d.name = :name",
    [SQL_DATASET_ITEMS] =
        "INSERT OR IGNORE INTO request_items(request_id, object_id, state)"
        " SELECT :request, object_id, 'SUBMITTED' FROM dataset_members WHERE dataset_id = :dataset",
    [SQL_OBJECT_FIND] = "SELECT id FROM objects WHERE bucket = :bucket AND key = :key",
    [SQL_PREFIX_OBJECTS] =
        "SELECT id, key FROM objects WHERE bucket = :bucket"
        " AND substr(key, 1, length(:prefix)) = :prefix ORDER BY key",
    /* how many datasets hold the object, how many of them are readable,
     * whether it is a pushed file not yet archived (it joins its dataset, and
     * so gets its owner's permissions, only when durable), and whether the
     * caller pushed it (its writer reads it whatever the dataset's mode: a
     * shared S3 archive bucket) */
    [SQL_OBJECT_ACCESS] =
        "SELECT count(*), coalesce(sum(" READABLE_SQL "), 0),"
        " (SELECT count(*) FROM push_items p WHERE p.object_id = :object"
        "  AND p.state <> 'DURABLE'),"
        " EXISTS (SELECT 1 FROM push_items pi JOIN pushes p ON p.id = pi.push_id"
        "  WHERE pi.object_id = :object AND p.uid = :uid)"
        " FROM dataset_members m JOIN datasets d ON d.id = m.dataset_id"
        " WHERE m.object_id = :object",
    [SQL_REQUEST_INSERT] =
        "INSERT INTO requests(uuid, uid, gid, job_id, priority, deadline, pin_lifetime,"
        " state, created, updated) VALUES (:uuid, :uid, :gid, :job, :priority, :deadline,"
        " :pin, 'SUBMITTED', :now, :now)",
    [SQL_ITEM_INSERT] =
        "INSERT OR IGNORE INTO request_items(request_id, object_id, state)"
        " VALUES (:request, :object, 'SUBMITTED')",
    [SQL_REQUEST_TOTALS] =
        "SELECT count(*), coalesce(sum(o.size), 0) FROM request_items i"
        " JOIN objects o ON o.id = i.object_id WHERE i.request_id = :request",
    [SQL_REQUEST_FIND] =
        "SELECT id, uuid, uid, gid, job_id, priority, deadline, pin_lifetime, state, error,"
        " created, updated, coalesce(finished, 0), expired, end_reason"
        " FROM requests WHERE uuid = :uuid",
    [SQL_REQUEST_ITEMS] =
        "SELECT i.object_id, o.bucket, o.key, o.size, i.bytes_done, i.state, i.error,"
        " coalesce(i.started, 0), coalesce(i.finished, 0),"
        " EXISTS (SELECT 1 FROM cache_pins p WHERE p.request_id = i.request_id"
        " AND p.object_id = i.object_id)"
        " FROM request_items i JOIN objects o ON o.id = i.object_id"
        " WHERE i.request_id = :request ORDER BY o.bucket, o.key",
    [SQL_QUEUE_AHEAD] =
        "SELECT count(*) FROM requests WHERE state IN ('SUBMITTED', 'STARTED')"
        " AND (priority > :priority OR (priority = :priority AND"
        " (created < :created OR (created = :created AND id < :id))))",
    [SQL_REQUEST_SET_STATE] =
        "UPDATE requests SET state = :state, error = :error, updated = :now,"
        " finished = CASE WHEN :state IN " REQUEST_FINAL_SQL " THEN coalesce(finished, :now)"
        " END, end_reason = coalesce(:reason, end_reason), expired = max(expired, :expired)"
        " WHERE id = :request",
    [SQL_ITEMS_CANCEL] =
        "UPDATE request_items SET state = 'CANCELLED', finished = :now"
        " WHERE request_id = :request AND state IN ('SUBMITTED', 'STARTED')",
    [SQL_ITEM_CANCEL] =
        "UPDATE request_items SET state = 'CANCELLED', finished = :now"
        " WHERE request_id = :request AND object_id = :object"
        " AND state IN ('SUBMITTED', 'STARTED')",
    /* what the request still holds or waits for */
    [SQL_REQUEST_HELD] =
        "SELECT (SELECT count(*) FROM cache_pins WHERE request_id = :request) +"
        " (SELECT count(*) FROM request_items WHERE request_id = :request"
        " AND state IN ('SUBMITTED', 'STARTED'))",
    /* Pins are rows of cache_pins (schema 1.3); its triggers keep cache.pins. */
    [SQL_UNPIN_REQUEST] = "DELETE FROM cache_pins WHERE request_id = :request",
    [SQL_BIND_JOB] = "UPDATE requests SET job_id = :job, updated = :now WHERE id = :request",
    [SQL_ITEM_START] =
        "UPDATE request_items SET state = 'STARTED', started = :now, bytes_done = 0"
        " WHERE request_id = :request AND object_id = :object AND state = 'SUBMITTED'",
    [SQL_ITEM_PROGRESS] =
        "UPDATE request_items SET bytes_done = :bytes"
        " WHERE request_id = :request AND object_id = :object AND state = 'STARTED'",
    [SQL_ITEM_FINISH] =
        "UPDATE request_items SET state = :state, error = :error, finished = :now,"
        " bytes_done = CASE WHEN :state = 'COMPLETED'"
        " THEN (SELECT size FROM objects WHERE id = object_id) ELSE bytes_done END"
        " WHERE request_id = :request AND object_id = :object"
        " AND state IN ('SUBMITTED', 'STARTED')",
    [SQL_ITEM_STATE] =
        "SELECT state FROM request_items WHERE request_id = :request AND object_id = :object",
    [SQL_ITEM_REQUEUE] =
        "UPDATE request_items SET state = 'SUBMITTED', bytes_done = 0, error = NULL,"
        " started = NULL, finished = NULL WHERE request_id = :request AND object_id = :object",
    [SQL_PIN] =
        "INSERT OR IGNORE INTO cache_pins(object_id, request_id, since)"
        " SELECT :object, :request, :now WHERE EXISTS"
        " (SELECT 1 FROM cache WHERE object_id = :object)",
    [SQL_UNPIN] = "DELETE FROM cache_pins WHERE object_id = :object AND request_id = :request",
    [SQL_ITEM_COUNTS] =
        "SELECT coalesce(sum(state IN ('SUBMITTED', 'STARTED')), 0),"
        " coalesce(sum(state IN ('STARTED', 'COMPLETED', 'FAILED')), 0),"
        " coalesce(sum(state = 'FAILED'), 0)"
        " FROM request_items WHERE request_id = :request",
    [SQL_REQUEST_STATE_BY_ID] = "SELECT state FROM requests WHERE id = :request",
    [SQL_PENDING] =
        "SELECT i.request_id, i.object_id, r.priority, coalesce(r.deadline, 0)"
        " FROM request_items i JOIN requests r ON r.id = i.request_id"
        " WHERE i.state = 'SUBMITTED' AND r.state IN ('SUBMITTED', 'STARTED')"
        " ORDER BY r.priority DESC, r.created, r.id, i.object_id",
    [SQL_LOCALITY] =
        "SELECT o.size, EXISTS (SELECT 1 FROM cache c WHERE c.object_id = o.id),"
        " EXISTS (SELECT 1 FROM tape_copies t JOIN volumes v ON v.id = t.volume_id"
        "  WHERE t.object_id = o.id AND v.state NOT IN ('failed', 'disabled')),"
        " EXISTS (SELECT 1 FROM tape_copies t JOIN volumes v ON v.id = t.volume_id"
        "  WHERE t.object_id = o.id AND v.state = 'disabled'),"
        " EXISTS (SELECT 1 FROM tape_copies t JOIN volumes v ON v.id = t.volume_id"
        "  WHERE t.object_id = o.id AND v.state = 'failed')"
        " FROM objects o WHERE o.bucket = :bucket AND o.key = :key",
    [SQL_HOLDER_ADD] =
        "INSERT INTO request_holders(request_id, kind, holder, running, since)"
        " VALUES (:request, :kind, :holder, :running, :now)"
        " ON CONFLICT (request_id, kind, holder) DO UPDATE SET running = max(request_holders.running, :running)",
    [SQL_HOLDER_DEL] =
        "DELETE FROM request_holders WHERE request_id = :request AND kind = :kind"
        " AND holder = :holder",
    [SQL_HOLDER_DROP_SUBMISSIONS] =
        "DELETE FROM request_holders WHERE request_id = :request AND kind = 'submission'",
    [SQL_HOLDERS_DROP_JOBS] =
        "DELETE FROM request_holders WHERE request_id = :request AND kind IN ('job', 'array')",
    /* all holders, array holders, job holders of other jobs than :holder,
     * running ones */
    [SQL_HOLDER_COUNTS] =
        "SELECT count(*), coalesce(sum(kind = 'array'), 0),"
        " coalesce(sum(kind = 'array' AND holder = :array), 0),"
        " coalesce(sum(kind = 'job' AND holder <> :holder), 0), coalesce(sum(running), 0)"
        " FROM request_holders WHERE request_id = :request",
    [SQL_HOLDER_RESOLVE] =
        "UPDATE request_holders SET kind = :kind, holder = :holder"
        " WHERE request_id = :request AND kind = 'submission' AND holder = :submission",
    [SQL_HOLDERS_ALL] =
        "SELECT r.id, r.uuid, r.uid, r.created, h.kind, h.holder, h.running, h.since"
        " FROM request_holders h JOIN requests r ON r.id = h.request_id"
        " WHERE r.state <> 'RELEASED' ORDER BY r.id, h.kind, h.holder",
    [SQL_EXPIRED] =
        "SELECT uuid, pin_lifetime FROM requests r"
        " WHERE state IN ('COMPLETED', 'FAILED', 'CANCELLED')"
        " AND finished + pin_lifetime <= :now"
        " AND NOT EXISTS (SELECT 1 FROM request_holders h"
        "  WHERE h.request_id = r.id AND h.running <> 0)"
        " ORDER BY finished",
    [SQL_RECENT_JOBS] =
        "SELECT DISTINCT job_id FROM requests WHERE job_id IS NOT NULL AND created >= :since",
};

struct requests {
    catalog_t *cat;
    db_t *db;
    db_stmt_t *stmt[SQL_COUNT];
    char *groups;                  /* ",g1,g2," of the request being created */
};

/* ---- helpers ---------------------------------------------------------------- */

static int db_fail(requests_t *r, si_error_t *err, const char *what)
{
    return si_errnoprintf(err, EIO, "catalog %s: %s: %s", catalog_path(r->cat), what,
                          db_errmsg(r->db));
}

static db_stmt_t *stmt(requests_t *r, sql_id_t id)
{
    db_stmt_t *s = r->stmt[id];
    db_reset(s);
    db_clear_bindings(s);
    return s;
}

static void bind_text(db_stmt_t *s, const char *name, const char *v)
{
    int i = db_bind_index(s, name);
    if (i > 0)
        v ? db_bind_text_copy(s, i, v) : db_bind_null(s, i);
}

static void bind_int(db_stmt_t *s, const char *name, int64_t v)
{
    int i = db_bind_index(s, name);
    if (i > 0)
        db_bind_int64(s, i, v);
}

static void bind_real(db_stmt_t *s, const char *name, double v)
{
    int i = db_bind_index(s, name);
    if (i > 0)
        db_bind_double(s, i, v);
}

static char *dup_column(db_stmt_t *s, int col)
{
    const char *t = db_column_text(s, col);
    return t ? strdup(t) : NULL;
}

static void reset_all(requests_t *r)
{
    for (int i = 0; i < SQL_COUNT; i++)
        db_reset(r->stmt[i]);
}

static int begin(requests_t *r, si_error_t *err)
{
    if (catalog_begin(r->cat, err) < 0) {
        errno = EIO;
        return -1;
    }
    return 0;
}

static void rollback(requests_t *r)
{
    reset_all(r);
    catalog_rollback(r->cat);
}

/* The common failure exit: undoes the transaction, keeps the errno that
 * describes the failure, returns -1. */
static int rollback_fail(requests_t *r)
{
    int saved = errno;
    rollback(r);
    errno = saved;
    return -1;
}

static int commit(requests_t *r, si_error_t *err)
{
    reset_all(r);
    if (catalog_commit(r->cat, err) < 0) {
        errno = EIO;
        return -1;
    }
    return 0;
}

/* ---- open / close ------------------------------------------------------------- */

requests_t *requests_open(catalog_t *cat, si_error_t *err)
{
    requests_t *r = calloc(1, sizeof(*r));
    if (!r) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    r->cat = cat;
    r->db = catalog_driver(cat);
    for (int i = 0; i < SQL_COUNT; i++) {
        if (!(r->stmt[i] = db_prepare(r->db, sql_text[i], NULL))) {
            si_errprintf(err, "catalog %s: preparing request statements: %s", catalog_path(cat),
                         db_errmsg(r->db));
            requests_close(r);
            return NULL;
        }
    }
    return r;
}

void requests_close(requests_t *r)
{
    if (!r)
        return;
    for (int i = 0; i < SQL_COUNT; i++)
        db_finalize(r->stmt[i]);
    free(r);
}

/* ---- create ------------------------------------------------------------------- */

/* "bucket/key" -> bucket, key (validated); a trailing '/' marks a prefix. */
static int split_file(const char *file, char *bucket, size_t bsize, const char **key,
                      si_error_t *err)
{
    const char *slash = strchr(file, '/');
    if (!slash || slash == file || !slash[1])
        return si_errnoprintf(err, EINVAL, "'%.200s' is not of the form bucket/key", file);
    size_t blen = (size_t)(slash - file);
    if (blen >= bsize || si_bucket_check(file, blen, NULL) < 0)
        return si_errnoprintf(err, EINVAL, "'%.200s': '%.*s' is not a valid bucket name", file,
                    (int)(blen > 64 ? 64 : blen), file);
    memcpy(bucket, file, blen);
    bucket[blen] = '\0';
    *key = slash + 1;
    size_t klen = strlen(*key);
    bool prefix = (*key)[klen - 1] == '/';
    si_error_t kerr;
    if (si_key_check(*key, prefix ? klen - 1 : klen, &kerr) < 0)
        return si_errnoprintf(err, EINVAL, "'%.200s': %s", file, kerr.text);
    return 0;
}

/* ",g1,g2," for READABLE_SQL; NULL when the user has no other groups. */
static char *groups_text(const gid_t *groups, size_t n)
{
    if (n == 0)
        return NULL;
    size_t size = n * 11 + 2;
    char *t = malloc(size);
    if (t)
        si_groups_format(groups, n, t, size);
    return t;
}

static int check_object_access(requests_t *r, const requests_spec_t *spec, int64_t object,
                               const char *name, si_error_t *err)
{
    if (spec->uid == 0)
        return 0;
    db_stmt_t *s = stmt(r, SQL_OBJECT_ACCESS);
    bind_int(s, ":object", object);
    bind_int(s, ":uid", spec->uid);
    bind_int(s, ":gid", spec->gid);
    bind_text(s, ":groups", r->groups);
    if (db_step(s) != DB_ROW)
        return db_fail(r, err, "checking object permissions");
    int64_t holders = db_column_int64(s, 0), readable = db_column_int64(s, 1);
    int64_t pushing = db_column_int64(s, 2);
    bool wrote = db_column_int(s, 3) != 0;
    db_reset(s);
    if (pushing > 0)
        return si_errnoprintf(err, EACCES, "%s is a pushed file not yet archived", name);
    if (holders > 0 && readable == 0 && !wrote)
        return si_errnoprintf(err, EACCES,
                    "%s belongs only to datasets that uid %u (gid %u) may not read",
                    name, (unsigned)spec->uid, (unsigned)spec->gid);
    return 0;
}

static int insert_item(requests_t *r, int64_t request, int64_t object, si_error_t *err)
{
    db_stmt_t *s = stmt(r, SQL_ITEM_INSERT);
    bind_int(s, ":request", request);
    bind_int(s, ":object", object);
    if (db_step(s) != DB_DONE)
        return db_fail(r, err, "adding a request item");
    return 0;
}

static int add_dataset(requests_t *r, const requests_spec_t *spec, int64_t request,
                       const char *name, si_error_t *err)
{
    si_error_t nerr;
    if (si_dataset_check(name, &nerr) < 0)
        return si_errnoprintf(err, EINVAL, "%s", nerr.text);
    db_stmt_t *s = stmt(r, SQL_DATASET_FIND);
    bind_text(s, ":name", name);
    bind_int(s, ":uid", spec->uid);
    bind_int(s, ":gid", spec->gid);
    bind_text(s, ":groups", r->groups);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return si_errnoprintf(err, ENOENT, "unknown dataset '%s'", name);
    if (rc != DB_ROW)
        return db_fail(r, err, "looking up a dataset");
    int64_t id = db_column_int64(s, 0);
    unsigned owner = (unsigned)db_column_int64(s, 1);
    unsigned group = (unsigned)db_column_int64(s, 2);
    unsigned mode = (unsigned)db_column_int64(s, 3);
    bool readable = db_column_int(s, 4) != 0;
    db_reset(s);
    if (!readable) {
        bool member = group == spec->gid;
        for (size_t i = 0; i < spec->ngroups; i++)
            member = member || spec->groups[i] == group;
        const char *cls = owner == spec->uid ? "its owner" : member ? "its group" : "other users";
        return si_errnoprintf(err, EACCES,
                    "dataset '%s' (owner uid %u, gid %u, mode %04o) is not readable by %s,"
                    " and uid %u (gid %u) is in that class",
                    name, owner, group, mode, cls, (unsigned)spec->uid, (unsigned)spec->gid);
    }
    s = stmt(r, SQL_DATASET_ITEMS);
    bind_int(s, ":request", request);
    bind_int(s, ":dataset", id);
    if (db_step(s) != DB_DONE)
        return db_fail(r, err, "adding a dataset's objects");
    return 0;
}

static int add_file(requests_t *r, const requests_spec_t *spec, int64_t request,
                    const char *file, si_error_t *err)
{
    char bucket[SI_BUCKET_MAX + 1];
    const char *key;
    if (split_file(file, bucket, sizeof(bucket), &key, err) < 0)
        return -1;
    if (key[strlen(key) - 1] != '/') {
        db_stmt_t *s = stmt(r, SQL_OBJECT_FIND);
        bind_text(s, ":bucket", bucket);
        bind_text(s, ":key", key);
        int rc = db_step(s);
        if (rc == DB_DONE)
            return si_errnoprintf(err, ENOENT, "no object %.300s in the catalog", file);
        if (rc != DB_ROW)
            return db_fail(r, err, "looking up an object");
        int64_t object = db_column_int64(s, 0);
        db_reset(s);
        if (check_object_access(r, spec, object, file, err) < 0)
            return -1;
        return insert_item(r, request, object, err);
    }
    /* A prefix: collect first, then check and insert (one statement at a time). */
    db_stmt_t *s = stmt(r, SQL_PREFIX_OBJECTS);
    bind_text(s, ":bucket", bucket);
    bind_text(s, ":prefix", key);
    int64_t *ids = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            int64_t *grown = realloc(ids, cap * sizeof(*ids));
            if (!grown) {
                free(ids);
                return si_errnoprintf(err, ENOMEM, "out of memory");
            }
            ids = grown;
        }
        ids[n++] = db_column_int64(s, 0);
    }
    db_reset(s);
    if (rc != DB_DONE) {
        free(ids);
        return db_fail(r, err, "listing a prefix");
    }
    if (n == 0) {
        free(ids);
        return si_errnoprintf(err, ENOENT, "no object under %.300s in the catalog", file);
    }
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "an object under %.40s", file);
        if (check_object_access(r, spec, ids[i], name, err) < 0 ||
            insert_item(r, request, ids[i], err) < 0) {
            free(ids);
            return -1;
        }
    }
    free(ids);
    return 0;
}

static int check_job_id(const char *job, si_error_t *err)
{
    if (!job || !*job || strlen(job) > 64 || !si_utf8_valid(job, strlen(job)))
        return si_errnoprintf(err, EINVAL, "job id must be 1 to 64 characters of text");
    return 0;
}

static int check_spec(const requests_spec_t *spec, si_error_t *err)
{
    if (spec->ndatasets + spec->nfiles == 0)
        return si_errnoprintf(err, EINVAL, "a request needs at least one dataset or file");
    if (spec->pin_lifetime <= 0)
        return si_errnoprintf(err, EINVAL, "pin lifetime must be positive, not %lld",
                    (long long)spec->pin_lifetime);
    if (spec->deadline < 0)
        return si_errnoprintf(err, EINVAL, "deadline must be unix seconds, not %lld",
                    (long long)spec->deadline);
    if (spec->job_id && check_job_id(spec->job_id, err) < 0)
        return -1;
    return 0;
}

static int add_holder(requests_t *r, int64_t request, requests_holder_kind_t kind,
                      const char *holder, bool running, si_error_t *err)
{
    db_stmt_t *s = stmt(r, SQL_HOLDER_ADD);
    bind_int(s, ":request", request);
    bind_text(s, ":kind", requests_holder_kind_name(kind));
    bind_text(s, ":holder", holder);
    bind_int(s, ":running", running);
    bind_real(s, ":now", si_wall_now());
    if (db_step(s) != DB_DONE)
        return db_fail(r, err, "recording who holds a request");
    return 0;
}

static int create_in_transaction(requests_t *r, const requests_spec_t *spec,
                                 requests_created_t *out, si_error_t *err);

int requests_create(requests_t *r, const requests_spec_t *spec, requests_created_t *out,
                    si_error_t *err)
{
    if (check_spec(spec, err) < 0)
        return -1;
    if (spec->ngroups && !(r->groups = groups_text(spec->groups, spec->ngroups)))
        return si_errnoprintf(err, ENOMEM, "out of memory");
    int rc = create_in_transaction(r, spec, out, err);
    int saved = errno;
    free(r->groups);
    r->groups = NULL;
    errno = saved;
    return rc;
}

static int create_in_transaction(requests_t *r, const requests_spec_t *spec,
                                 requests_created_t *out, si_error_t *err)
{
    requests_created_t made = {0};
    if (begin(r, err) < 0)
        return -1;
    si_uuid4(made.uuid);
    double now = si_wall_now();
    db_stmt_t *s = stmt(r, SQL_REQUEST_INSERT);
    bind_text(s, ":uuid", made.uuid);
    bind_int(s, ":uid", spec->uid);
    bind_int(s, ":gid", spec->gid);
    bind_text(s, ":job", spec->job_id);
    bind_int(s, ":priority", spec->priority);
    if (spec->deadline)
        bind_int(s, ":deadline", spec->deadline);
    bind_int(s, ":pin", spec->pin_lifetime);
    bind_real(s, ":now", now);
    if (db_step(s) != DB_DONE) {
        db_fail(r, err, "recording a request");
        goto error;
    }
    made.id = db_last_insert_id(r->db);
    for (size_t i = 0; i < spec->ndatasets; i++)
        if (add_dataset(r, spec, made.id, spec->datasets[i], err) < 0)
            goto error;
    for (size_t i = 0; i < spec->nfiles; i++)
        if (add_file(r, spec, made.id, spec->files[i], err) < 0)
            goto error;
    s = stmt(r, SQL_REQUEST_TOTALS);
    bind_int(s, ":request", made.id);
    if (db_step(s) != DB_ROW) {
        db_fail(r, err, "counting a request's items");
        goto error;
    }
    made.files = (uint64_t)db_column_int64(s, 0);
    made.bytes = (uint64_t)db_column_int64(s, 1);
    db_reset(s);
    if (made.files == 0) {
        si_errnoprintf(err, EINVAL, "the request names no objects (its datasets are empty)");
        goto error;
    }
    if (spec->max_bytes && made.bytes > spec->max_bytes) {
        si_errnoprintf(err, EFBIG, "the request needs %llu bytes (%llu files) in the cache at "
                       "once, more than the cache's %llu bytes: stage fewer datasets per job, "
                       "or ask the admins for a larger cache",
                       (unsigned long long)made.bytes, (unsigned long long)made.files,
                       (unsigned long long)spec->max_bytes);
        goto error;
    }
    if (spec->max_user_bytes && spec->uid != 0) {
        s = stmt(r, SQL_USER_STAGED);
        bind_int(s, ":uid", spec->uid);
        if (db_step(s) != DB_ROW) {
            db_fail(r, err, "counting a user's staged bytes");
            goto error;
        }
        uint64_t staged = (uint64_t)db_column_int64(s, 0);
        db_reset(s);
        if (staged > spec->max_user_bytes) {
            si_errnoprintf(err, EDQUOT, "uid %u would have %llu bytes staged or waiting in the"
                           " cache with this request (%llu bytes), more than the %llu one user"
                           " may hold (stageind.max_user_pinned_bytes): release finished"
                           " requests first", (unsigned)spec->uid, (unsigned long long)staged,
                           (unsigned long long)made.bytes,
                           (unsigned long long)spec->max_user_bytes);
            goto error;
        }
    }
    if ((spec->job_id && add_holder(r, made.id, REQUESTS_HOLDER_JOB, spec->job_id, false,
                                    err) < 0) ||
        (spec->submission && add_holder(r, made.id, REQUESTS_HOLDER_SUBMISSION,
                                        spec->submission, false, err) < 0))
        goto error;
    char detail[160];
    snprintf(detail, sizeof(detail), "uid %u job %s: %llu files, %llu bytes",
             (unsigned)spec->uid, spec->job_id ? spec->job_id : "-",
             (unsigned long long)made.files, (unsigned long long)made.bytes);
    if (catalog_event(r->cat, "request.submitted", made.uuid, detail) < 0) {
        db_fail(r, err, "logging the request");
        goto error;
    }
    if (commit(r, err) < 0)
        return -1;
    if (out)
        *out = made;
    return 0;
error:
    return rollback_fail(r);
}

int requests_manifest_lines(const char *text, size_t len, char ***lines, size_t *nlines,
                            char **storage, si_error_t *err)
{
    if (memchr(text, '\0', len))
        return si_errnoprintf(err, EINVAL, "manifest contains a NUL byte");
    char *copy = malloc(len + 1);
    if (!copy)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    memcpy(copy, text, len);
    copy[len] = '\0';
    char **out = NULL;
    size_t n = 0, cap = 0, lineno = 0;
    for (char *line = copy, *next; line && *line; line = next) {
        lineno++;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        size_t l = strlen(line);
        while (l && (line[l - 1] == '\r' || line[l - 1] == ' ' || line[l - 1] == '\t'))
            line[--l] = '\0';
        while (*line == ' ' || *line == '\t')
            line++;
        if (!*line || *line == '#')
            continue;
        char bucket[SI_BUCKET_MAX + 1];
        const char *key;
        si_error_t lerr;
        if (split_file(line, bucket, sizeof(bucket), &key, &lerr) < 0) {
            free(out);
            free(copy);
            return si_errnoprintf(err, EINVAL, "manifest line %zu: %s", lineno, lerr.text);
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **grown = realloc(out, cap * sizeof(*grown));
            if (!grown) {
                free(out);
                free(copy);
                return si_errnoprintf(err, ENOMEM, "out of memory");
            }
            out = grown;
        }
        out[n++] = line;
    }
    if (n == 0) {
        free(out);
        free(copy);
        return si_errnoprintf(err, EINVAL, "manifest names no files");
    }
    *lines = out;
    *nlines = n;
    *storage = copy;
    return 0;
}

/* ---- status ------------------------------------------------------------------- */

void requests_status_free(requests_status_t *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->nitems; i++) {
        free(st->items[i].bucket);
        free(st->items[i].key);
        free(st->items[i].error);
    }
    free(st->items);
    free(st->job_id);
    free(st->error);
    free(st->end_reason);
    free(st);
}

/* Finds a request; EACCES unless the caller owns it or is root. */
static int find_request(requests_t *r, const char *uuid, uid_t caller, requests_status_t *st,
                        si_error_t *err)
{
    if (!uuid || strlen(uuid) != REQUESTS_UUID_LEN)
        return si_errnoprintf(err, ENOENT, "no request '%.64s' (a request id is a 36-character uuid)",
                    uuid ? uuid : "");
    db_stmt_t *s = stmt(r, SQL_REQUEST_FIND);
    bind_text(s, ":uuid", uuid);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return si_errnoprintf(err, ENOENT, "no request %s", uuid);
    if (rc != DB_ROW)
        return db_fail(r, err, "looking up a request");
    st->id = db_column_int64(s, 0);
    snprintf(st->uuid, sizeof(st->uuid), "%s", db_column_text(s, 1));
    st->uid = (uid_t)db_column_int64(s, 2);
    st->gid = (gid_t)db_column_int64(s, 3);
    st->job_id = dup_column(s, 4);
    st->priority = db_column_int(s, 5);
    st->deadline = db_column_int64(s, 6);
    st->pin_lifetime = db_column_int64(s, 7);
    snprintf(st->state, sizeof(st->state), "%s", db_column_text(s, 8));
    st->error = dup_column(s, 9);
    st->created = db_column_double(s, 10);
    st->updated = db_column_double(s, 11);
    st->finished = db_column_double(s, 12);
    st->expired = db_column_int(s, 13) != 0;
    st->end_reason = dup_column(s, 14);
    db_reset(s);
    if (caller != (uid_t)-1 && caller != 0 && caller != st->uid) {
        free(st->job_id);
        free(st->error);
        free(st->end_reason);
        st->job_id = st->error = st->end_reason = NULL;
        return si_errnoprintf(err, EACCES, "request %s belongs to uid %u, not to uid %u", uuid,
                    (unsigned)st->uid, (unsigned)caller);
    }
    return 0;
}

static bool is_active(const char *state)
{
    return strcmp(state, "SUBMITTED") == 0 || strcmp(state, "STARTED") == 0;
}

int requests_get(requests_t *r, const char *uuid, uid_t caller_uid, requests_status_t **out,
                 si_error_t *err)
{
    requests_status_t *st = calloc(1, sizeof(*st));
    if (!st)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    if (find_request(r, uuid, caller_uid, st, err) < 0) {
        int saved = errno;
        free(st);
        errno = saved;
        return -1;
    }
    db_stmt_t *s;
    if (is_active(st->state)) {
        s = stmt(r, SQL_QUEUE_AHEAD);
        bind_int(s, ":priority", st->priority);
        bind_real(s, ":created", st->created);
        bind_int(s, ":id", st->id);
        if (db_step(s) != DB_ROW) {
            db_fail(r, err, "computing the queue position");
            goto error;
        }
        st->queue_position = (size_t)db_column_int64(s, 0) + 1;
        db_reset(s);
    }
    s = stmt(r, SQL_REQUEST_ITEMS);
    bind_int(s, ":request", st->id);
    size_t cap = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (st->nitems == cap) {
            cap = cap ? 2 * cap : 16;
            requests_item_t *grown = realloc(st->items, cap * sizeof(*grown));
            if (!grown) {
                si_errnoprintf(err, ENOMEM, "out of memory");
                goto error;
            }
            st->items = grown;
        }
        requests_item_t *it = &st->items[st->nitems++];
        memset(it, 0, sizeof(*it));
        it->object_id = db_column_int64(s, 0);
        it->bucket = dup_column(s, 1);
        it->key = dup_column(s, 2);
        it->size = (uint64_t)db_column_int64(s, 3);
        it->bytes_done = (uint64_t)db_column_int64(s, 4);
        snprintf(it->state, sizeof(it->state), "%s", db_column_text(s, 5));
        it->error = dup_column(s, 6);
        it->started = db_column_double(s, 7);
        it->finished = db_column_double(s, 8);
        it->pinned = db_column_int(s, 9) != 0;
        if (!it->bucket || !it->key) {
            si_errnoprintf(err, ENOMEM, "out of memory");
            goto error;
        }
        st->files_total++;
        st->bytes_total += it->size;
        st->bytes_done += it->bytes_done;
        if (strcmp(it->state, "COMPLETED") == 0)
            st->files_completed++;
        else if (strcmp(it->state, "FAILED") == 0)
            st->files_failed++;
        else if (strcmp(it->state, "CANCELLED") == 0)
            st->files_cancelled++;
    }
    db_reset(s);
    if (rc != DB_DONE) {
        db_fail(r, err, "listing a request's items");
        goto error;
    }
    *out = st;
    return 0;
error:;
    int saved = errno;
    reset_all(r);
    requests_status_free(st);
    errno = saved;
    return -1;
}

/* ---- cancel / release ----------------------------------------------------------- */

/* reason (NULL: keep) says why it ended; expired marks a release by expiry. */
static int set_request_state(requests_t *r, int64_t id, const char *state, const char *error,
                             const char *reason, bool expired, si_error_t *err)
{
    db_stmt_t *s = stmt(r, SQL_REQUEST_SET_STATE);
    bind_text(s, ":state", state);
    bind_text(s, ":error", error);
    bind_text(s, ":reason", reason);
    bind_int(s, ":expired", expired);
    bind_real(s, ":now", si_wall_now());
    bind_int(s, ":request", id);
    if (db_step(s) != DB_DONE)
        return db_fail(r, err, "updating a request");
    return 0;
}

static void status_clear(requests_status_t *st)
{
    free(st->job_id);
    free(st->error);
    free(st->end_reason);
    st->job_id = st->error = st->end_reason = NULL;
}

int requests_id_of(requests_t *r, const char *uuid, int64_t *id, si_error_t *err)
{
    requests_status_t st = {0};
    if (find_request(r, uuid, (uid_t)-1, &st, err) < 0)
        return -1;
    *id = st.id;
    status_clear(&st);
    return 0;
}

/* The failure exit of a change to one request: rolled back, errno kept. */
static int abandon(requests_t *r, requests_status_t *st)
{
    int saved = errno;
    rollback(r);
    status_clear(st);
    errno = saved;
    return -1;
}

/* Ends st's request inside the caller's transaction: cancels the items not
 * yet finished; a release also gives back its pins. */
static int end_found(requests_t *r, requests_status_t *st, bool release, const char *why,
                     bool expired, si_error_t *err)
{
    db_stmt_t *s = stmt(r, SQL_ITEMS_CANCEL);
    bind_real(s, ":now", si_wall_now());
    bind_int(s, ":request", st->id);
    if (db_step(s) != DB_DONE)
        return db_fail(r, err, "cancelling items");
    if (release) {
        s = stmt(r, SQL_UNPIN_REQUEST);
        bind_int(s, ":request", st->id);
        if (db_step(s) != DB_DONE)
            return db_fail(r, err, "unpinning");
    }
    const char *state = release ? "RELEASED" : "CANCELLED";
    char detail[300];
    snprintf(detail, sizeof(detail), "%s (was %s)", why, st->state);
    if (set_request_state(r, st->id, state, st->error, why, expired, err) < 0)
        return -1;
    if (catalog_event(r->cat, expired ? "request.expired" : release ? "request.released"
                                                                    : "request.cancelled",
                      st->uuid, detail) < 0)
        return db_fail(r, err, "recording the change");
    return 0;
}

/* The request a cancel or release (of it or of some of its files) acts on,
 * inside the caller's transaction: EBUSY once it can no longer be. */
static int find_to_end(requests_t *r, const char *uuid, uid_t caller, bool release,
                       requests_status_t *st, si_error_t *err)
{
    if (find_request(r, uuid, caller, st, err) < 0)
        return -1;
    if (release ? strcmp(st->state, "RELEASED") == 0 : !is_active(st->state))
        return si_errnoprintf(err, EBUSY, "request %s is already %s%s%s", uuid,
                              st->expired ? "EXPIRED" : st->state, st->end_reason ? ": " : "",
                              st->end_reason ? st->end_reason : "");
    return 0;
}

static int end_request(requests_t *r, const char *uuid, uid_t caller, bool release,
                       const char *why, si_error_t *err)
{
    requests_status_t st = {0};
    char by[64];
    snprintf(by, sizeof(by), "%s by uid %u", release ? "released" : "cancelled",
             (unsigned)caller);
    if (begin(r, err) < 0)
        return -1;
    if (find_to_end(r, uuid, caller, release, &st, err) < 0)
        goto error;
    if (end_found(r, &st, release, why ? why : by, false, err) < 0)
        goto error;
    status_clear(&st);
    return commit(r, err);
error:
    return abandon(r, &st);
}

static int update_request_from_items(requests_t *r, int64_t request, si_error_t *err);

int requests_end_items(requests_t *r, const char *uuid, uid_t caller, bool release,
                       const int64_t *objects, size_t n, si_error_t *err)
{
    requests_status_t st = {0};
    if (begin(r, err) < 0)
        return -1;
    if (find_to_end(r, uuid, caller, release, &st, err) < 0)
        goto error;
    double now = si_wall_now();
    for (size_t i = 0; i < n; i++) {
        db_stmt_t *s = stmt(r, SQL_ITEM_CANCEL);
        bind_int(s, ":request", st.id);
        bind_int(s, ":object", objects[i]);
        bind_real(s, ":now", now);
        if (db_step(s) != DB_DONE) {
            db_fail(r, err, "cancelling an item");
            goto error;
        }
        if (!release)
            continue;
        s = stmt(r, SQL_UNPIN);
        bind_int(s, ":object", objects[i]);
        bind_int(s, ":request", st.id);
        if (db_step(s) != DB_DONE) {
            db_fail(r, err, "unpinning an item");
            goto error;
        }
    }
    db_stmt_t *s = stmt(r, SQL_REQUEST_HELD);
    bind_int(s, ":request", st.id);
    if (db_step(s) != DB_ROW) {
        db_fail(r, err, "counting what the request holds");
        goto error;
    }
    int64_t held = db_column_int64(s, 0);
    db_reset(s);
    char why[64];
    snprintf(why, sizeof(why), "%s file by file by uid %u", release ? "released" : "cancelled",
             (unsigned)caller);
    /* nothing left pinned or waiting: a release ends the request as a whole
     * release does; otherwise it follows its items (a cancel of its last
     * waiting files completes it) */
    if (release && held == 0) {
        if (end_found(r, &st, true, why, false, err) < 0)
            goto error;
    } else if (update_request_from_items(r, st.id, err) < 0) {
        goto error;
    }
    if (catalog_event(r->cat, release ? "request.items_released" : "request.items_cancelled",
                      st.uuid, why) < 0) {
        db_fail(r, err, "recording the change");
        goto error;
    }
    status_clear(&st);
    return commit(r, err);
error:
    return abandon(r, &st);
}

const char *requests_holder_kind_name(requests_holder_kind_t k)
{
    switch (k) {
    case REQUESTS_HOLDER_SUBMISSION: return "submission";
    case REQUESTS_HOLDER_JOB: return "job";
    case REQUESTS_HOLDER_ARRAY: return "array";
    }
    return "?";
}

static requests_holder_kind_t holder_kind_of(const char *name)
{
    return strcmp(name, "array") == 0 ? REQUESTS_HOLDER_ARRAY
           : strcmp(name, "job") == 0 ? REQUESTS_HOLDER_JOB
                                      : REQUESTS_HOLDER_SUBMISSION;
}

typedef struct {
    int64_t all, arrays, this_array, other_jobs, running;
} holder_counts_t;

static int holder_counts(requests_t *r, int64_t request, const char *job, const char *array,
                         holder_counts_t *out, si_error_t *err)
{
    db_stmt_t *s = stmt(r, SQL_HOLDER_COUNTS);
    bind_int(s, ":request", request);
    bind_text(s, ":holder", job ? job : "");
    bind_text(s, ":array", array ? array : "");
    if (db_step(s) != DB_ROW)
        return db_fail(r, err, "counting a request's holders");
    out->all = db_column_int64(s, 0);
    out->arrays = db_column_int64(s, 1);
    out->this_array = db_column_int64(s, 2);
    out->other_jobs = db_column_int64(s, 3);
    out->running = db_column_int64(s, 4);
    db_reset(s);
    return 0;
}

static int drop_submission_holders(requests_t *r, int64_t request, si_error_t *err)
{
    db_stmt_t *s = stmt(r, SQL_HOLDER_DROP_SUBMISSIONS);
    bind_int(s, ":request", request);
    if (db_step(s) != DB_DONE)
        return db_fail(r, err, "resolving the submission holder");
    return 0;
}

int requests_bind_job(requests_t *r, const char *uuid, uid_t caller_uid, const char *job,
                      const char *array, bool running, si_error_t *err)
{
    requests_status_t st = {0};
    holder_counts_t n;
    if (check_job_id(job, err) < 0 || (array && check_job_id(array, err) < 0))
        return -1;
    if (begin(r, err) < 0)
        return -1;
    if (find_request(r, uuid, caller_uid, &st, err) < 0 ||
        holder_counts(r, st.id, job, array, &n, err) < 0)
        goto error;
    if (strcmp(st.state, "RELEASED") == 0) {
        si_errnoprintf(err, EBUSY, "request %s is already %s: %s", uuid,
                       st.expired ? "EXPIRED" : "RELEASED",
                       st.end_reason ? st.end_reason : "released");
        goto error;
    }
    /* Another job's request: only a task of the same array may share it.
     * Except when the submitting process names its job (running false)
     * and no job has started with the request yet: the job stageind's
     * reconciliation guessed from the session gives way to it. */
    bool same_job = st.job_id && strcmp(st.job_id, job) == 0;
    bool same_array = array && ((st.job_id && strcmp(st.job_id, array) == 0) || n.this_array);
    if (st.job_id && !same_job && !same_array && !running && n.running == 0) {
        db_stmt_t *s = stmt(r, SQL_HOLDERS_DROP_JOBS);
        bind_int(s, ":request", st.id);
        if (db_step(s) != DB_DONE) {
            db_fail(r, err, "naming the request's job");
            goto error;
        }
        free(st.job_id);
        st.job_id = NULL;
    }
    if (st.job_id && !same_job && !same_array) {
        si_errnoprintf(err, EBUSY, "request %s is job %s's, not job %s's", uuid, st.job_id, job);
        goto error;
    }
    if (!st.job_id) {
        db_stmt_t *s = stmt(r, SQL_BIND_JOB);
        bind_text(s, ":job", array ? array : job);
        bind_real(s, ":now", si_wall_now());
        bind_int(s, ":request", st.id);
        if (db_step(s) != DB_DONE) {
            db_fail(r, err, "binding the request to its job");
            goto error;
        }
    }
    char detail[160];
    snprintf(detail, sizeof(detail), "job %s%s%s, by uid %u", job, array ? " of array " : "",
             array ? array : "", (unsigned)caller_uid);
    if (drop_submission_holders(r, st.id, err) < 0 ||
        add_holder(r, st.id, REQUESTS_HOLDER_JOB, job, running, err) < 0 ||
        (array && add_holder(r, st.id, REQUESTS_HOLDER_ARRAY, array, false, err) < 0))
        goto error;
    if (catalog_event(r->cat, "request.bound", uuid, detail) < 0) {
        db_fail(r, err, "recording the binding");
        goto error;
    }
    status_clear(&st);
    return commit(r, err);
error:
    return abandon(r, &st);
}

int requests_unhold(requests_t *r, const char *uuid, uid_t caller_uid,
                    requests_holder_kind_t kind, const char *holder, const char *why,
                    bool *released, bool *array_left, si_error_t *err)
{
    requests_status_t st = {0};
    holder_counts_t n;
    if (begin(r, err) < 0)
        return -1;
    if (find_request(r, uuid, caller_uid, &st, err) < 0)
        goto error;
    db_stmt_t *s = stmt(r, SQL_HOLDER_DEL);
    bind_int(s, ":request", st.id);
    bind_text(s, ":kind", requests_holder_kind_name(kind));
    bind_text(s, ":holder", holder);
    if (db_step(s) != DB_DONE) {
        db_fail(r, err, "removing a holder");
        goto error;
    }
    if (db_changes(r->db) == 0) {
        si_errnoprintf(err, ENOENT, "request %s is not held by %s %s", uuid,
                       requests_holder_kind_name(kind), holder);
        goto error;
    }
    if (holder_counts(r, st.id, NULL, NULL, &n, err) < 0)
        goto error;
    bool release = n.all == 0 && strcmp(st.state, "RELEASED") != 0;
    if (release && end_found(r, &st, true, why, false, err) < 0)
        goto error;
    if (released)
        *released = release;
    if (array_left)
        *array_left = n.arrays > 0;
    status_clear(&st);
    return commit(r, err);
error:
    return abandon(r, &st);
}

int requests_resolve_submission(requests_t *r, int64_t request_id, const char *submission,
                                requests_holder_kind_t kind, const char *holder,
                                si_error_t *err)
{
    if (begin(r, err) < 0)
        return -1;
    db_stmt_t *s = stmt(r, SQL_HOLDER_RESOLVE);
    bind_int(s, ":request", request_id);
    bind_text(s, ":submission", submission);
    bind_text(s, ":kind", requests_holder_kind_name(kind));
    bind_text(s, ":holder", holder);
    if (db_step(s) != DB_DONE) {
        db_fail(r, err, "naming a submission's job");
        return rollback_fail(r);
    }
    if (db_changes(r->db) == 1) {
        s = stmt(r, SQL_BIND_JOB);
        bind_text(s, ":job", holder);
        bind_real(s, ":now", si_wall_now());
        bind_int(s, ":request", request_id);
        char id[32], detail[160];
        snprintf(id, sizeof(id), "%lld", (long long)request_id);
        snprintf(detail, sizeof(detail), "submission %s is %s %s", submission,
                 requests_holder_kind_name(kind), holder);
        if (db_step(s) != DB_DONE ||
            catalog_event(r->cat, "request.bound", id, detail) < 0) {
            db_fail(r, err, "naming a submission's job");
            return rollback_fail(r);
        }
    }
    return commit(r, err);
}

int requests_holders(requests_t *r, requests_holder_t **out, size_t *count, si_error_t *err)
{
    db_stmt_t *s = stmt(r, SQL_HOLDERS_ALL);
    requests_holder_t *list = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&list, &cap, n + 1, sizeof(*list)) < 0) {
            free(list);
            db_reset(s);
            return si_errnoprintf(err, ENOMEM, "out of memory");
        }
        requests_holder_t *h = &list[n++];
        memset(h, 0, sizeof(*h));
        h->request_id = db_column_int64(s, 0);
        snprintf(h->uuid, sizeof(h->uuid), "%s", db_column_text(s, 1));
        h->uid = (uid_t)db_column_int64(s, 2);
        h->created = db_column_double(s, 3);
        h->kind = holder_kind_of(db_column_text(s, 4));
        snprintf(h->holder, sizeof(h->holder), "%s", db_column_text(s, 5));
        h->running = db_column_int(s, 6) != 0;
        h->since = db_column_double(s, 7);
    }
    db_reset(s);
    if (rc != DB_DONE) {
        free(list);
        return db_fail(r, err, "listing holders");
    }
    *out = list;
    *count = n;
    return 0;
}

int requests_recent_jobs(requests_t *r, double since, requests_job_id_t **out, size_t *count,
                         si_error_t *err)
{
    db_stmt_t *s = stmt(r, SQL_RECENT_JOBS);
    bind_real(s, ":since", since);
    requests_job_id_t *list = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&list, &cap, n + 1, sizeof(*list)) < 0) {
            free(list);
            db_reset(s);
            return si_errnoprintf(err, ENOMEM, "out of memory");
        }
        snprintf(list[n++], sizeof(list[0]), "%s", db_column_text(s, 0));
    }
    db_reset(s);
    if (rc != DB_DONE) {
        free(list);
        return db_fail(r, err, "listing recent jobs");
    }
    *out = list;
    *count = n;
    return 0;
}

int requests_expire(requests_t *r, double now, requests_expired_fn fn, void *arg,
                    size_t *count, si_error_t *err)
{
    /* Collected first: each release is a transaction of its own. */
    typedef struct {
        char uuid[REQUESTS_UUID_LEN + 1];
        int64_t lifetime;
    } due_t;
    due_t *due = NULL;
    size_t n = 0, cap = 0;
    db_stmt_t *s = stmt(r, SQL_EXPIRED);
    bind_real(s, ":now", now);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&due, &cap, n + 1, sizeof(*due)) < 0) {
            free(due);
            db_reset(s);
            return si_errnoprintf(err, ENOMEM, "out of memory");
        }
        snprintf(due[n].uuid, sizeof(due[n].uuid), "%s", db_column_text(s, 0));
        due[n].lifetime = db_column_int64(s, 1);
        n++;
    }
    db_reset(s);
    if (rc != DB_DONE) {
        free(due);
        return db_fail(r, err, "finding expired pins");
    }
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        requests_status_t st = {0};
        char why[96];
        snprintf(why, sizeof(why), "its pin lifetime of %lld s passed",
                 (long long)due[i].lifetime);
        if (begin(r, err) < 0)
            break;
        if (find_request(r, due[i].uuid, (uid_t)-1, &st, err) < 0 ||
            end_found(r, &st, true, why, true, err) < 0) {
            abandon(r, &st);
            break;
        }
        status_clear(&st);
        if (commit(r, err) < 0)
            break;
        done++;
        if (fn)
            fn(due[i].uuid, due[i].lifetime, arg);
    }
    free(due);
    if (count)
        *count = done;
    return done == n ? 0 : -1;
}

int requests_cancel(requests_t *r, const char *uuid, uid_t caller_uid, si_error_t *err)
{
    return end_request(r, uuid, caller_uid, false, NULL, err);
}

int requests_release(requests_t *r, const char *uuid, uid_t caller_uid, si_error_t *err)
{
    return end_request(r, uuid, caller_uid, true, NULL, err);
}

int requests_release_why(requests_t *r, const char *uuid, uid_t caller_uid, const char *why,
                         si_error_t *err)
{
    return end_request(r, uuid, caller_uid, true, why, err);
}

si_table_t *requests_list(requests_t *r, uid_t owner, bool active_only, size_t limit,
                          si_error_t *err)
{
    static const si_column_t columns[] = {
        {"request", SI_COL_STR},      {"uid", SI_COL_INT},          {"job", SI_COL_STR},
        {"state", SI_COL_STR},        {"files", SI_COL_INT},        {"files_done", SI_COL_INT},
        {"files_failed", SI_COL_INT}, {"bytes", SI_COL_BYTES},      {"bytes_done", SI_COL_BYTES},
        {"created", SI_COL_REAL},     {"finished", SI_COL_REAL},    {"reason", SI_COL_STR},
    };
    static const char sql[] =
        "SELECT r.uuid, r.uid, r.job_id,"
        " CASE WHEN r.expired <> 0 THEN 'EXPIRED' ELSE r.state END, count(i.object_id),"
        " coalesce(sum(i.state = 'COMPLETED'), 0), coalesce(sum(i.state = 'FAILED'), 0),"
        " coalesce(sum(o.size), 0), coalesce(sum(i.bytes_done), 0), r.created, r.finished,"
        " coalesce(r.end_reason, r.error)"
        " FROM requests r LEFT JOIN request_items i ON i.request_id = r.id"
        " LEFT JOIN objects o ON o.id = i.object_id"
        " WHERE (?1 < 0 OR r.uid = ?1) AND (?2 = 0 OR r.state IN ('SUBMITTED', 'STARTED'))"
        " GROUP BY r.id ORDER BY r.created DESC, r.id DESC LIMIT ?3";
    db_stmt_t *s = catalog_prepare(r->cat, sql, err);
    if (!s)
        return NULL;
    db_bind_int64(s, 1, owner == (uid_t)-1 ? -1 : (int64_t)owner);
    db_bind_int(s, 2, active_only);
    db_bind_int64(s, 3, limit ? (int64_t)limit : INT64_MAX); /* no limit */
    si_table_t *t = catalog_table_from_stmt(r->cat, s, columns,
                                            sizeof(columns) / sizeof(columns[0]), err);
    db_finalize(s);
    return t;
}

/* ---- queue ------------------------------------------------------------------------ */

si_table_t *requests_queue(requests_t *r, si_error_t *err)
{
    static const si_column_t columns[] = {
        {"position", SI_COL_INT}, {"request", SI_COL_STR},   {"uid", SI_COL_INT},
        {"job", SI_COL_STR},      {"priority", SI_COL_INT},  {"deadline", SI_COL_INT},
        {"state", SI_COL_STR},    {"files", SI_COL_INT},     {"files_done", SI_COL_INT},
        {"bytes", SI_COL_BYTES},  {"bytes_done", SI_COL_BYTES}, {"created", SI_COL_REAL},
    };
    static const char sql[] =
        "SELECT r.uuid, r.uid, r.job_id, r.priority, r.deadline, r.state, count(i.object_id),"
        " coalesce(sum(i.state = 'COMPLETED'), 0), coalesce(sum(o.size), 0),"
        " coalesce(sum(i.bytes_done), 0), r.created"
        " FROM requests r LEFT JOIN request_items i ON i.request_id = r.id"
        " LEFT JOIN objects o ON o.id = i.object_id"
        " WHERE r.state IN ('SUBMITTED', 'STARTED') GROUP BY r.id"
        " ORDER BY r.priority DESC, r.created, r.id";
    db_stmt_t *s = NULL;
    si_table_t *t = si_table_new(columns, sizeof(columns) / sizeof(columns[0]));
    if (!t) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    if (!(s = db_prepare(r->db, sql, NULL))) {
        db_fail(r, err, "listing the queue");
        si_table_free(t);
        return NULL;
    }
    int rc;
    int64_t position = 0;
    while ((rc = db_step(s)) == DB_ROW) {
        si_table_row(t);
        si_table_int(t, ++position);
        si_table_str(t, db_column_text(s, 0));
        si_table_int(t, db_column_int64(s, 1));
        si_table_str(t, db_column_text(s, 2));
        si_table_int(t, db_column_int64(s, 3));
        if (db_column_type(s, 4) == DB_NULL)
            si_table_null(t);
        else
            si_table_int(t, db_column_int64(s, 4));
        si_table_str(t, db_column_text(s, 5));
        for (int c = 6; c <= 9; c++)
            si_table_int(t, db_column_int64(s, c));
        si_table_real(t, db_column_double(s, 10));
    }
    if (rc != DB_DONE) {
        db_fail(r, err, "listing the queue");
        si_table_free(t);
        t = NULL;
    }
    db_finalize(s);
    return t;
}

int requests_pending(requests_t *r, requests_pending_fn fn, void *arg, si_error_t *err)
{
    db_stmt_t *s = stmt(r, SQL_PENDING);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (fn(db_column_int64(s, 0), db_column_int64(s, 1), db_column_int(s, 2),
               db_column_int64(s, 3), arg) != 0) {
            rc = DB_DONE;
            break;
        }
    }
    db_reset(s);
    if (rc != DB_DONE)
        return db_fail(r, err, "listing pending items");
    return 0;
}

/* ---- item transitions ------------------------------------------------------------- */

/* After an item changed: the request follows its items while it is active. */
static int update_request_from_items(requests_t *r, int64_t request, si_error_t *err)
{
    db_stmt_t *s = stmt(r, SQL_REQUEST_STATE_BY_ID);
    bind_int(s, ":request", request);
    if (db_step(s) != DB_ROW)
        return si_errnoprintf(err, ENOENT, "no request with id %lld", (long long)request);
    char state[12];
    snprintf(state, sizeof(state), "%s", db_column_text(s, 0));
    db_reset(s);
    if (!is_active(state))
        return 0;
    s = stmt(r, SQL_ITEM_COUNTS);
    bind_int(s, ":request", request);
    if (db_step(s) != DB_ROW)
        return db_fail(r, err, "counting items");
    int64_t pending = db_column_int64(s, 0), touched = db_column_int64(s, 1),
            failed = db_column_int64(s, 2);
    db_reset(s);
    const char *next = pending == 0 ? (failed ? "FAILED" : "COMPLETED")
                                    : touched ? "STARTED" : "SUBMITTED";
    if (strcmp(next, state) == 0)
        return 0;
    char error[64] = "";
    if (failed)
        snprintf(error, sizeof(error), "%lld files failed", (long long)failed);
    if (set_request_state(r, request, next, failed ? error : NULL, NULL, false, err) < 0)
        return -1;
    if (pending == 0) {
        char id[32];
        snprintf(id, sizeof(id), "%lld", (long long)request);
        if (catalog_event(r->cat, failed ? "request.failed" : "request.completed", id,
                          failed ? error : NULL) < 0)
            return db_fail(r, err, "logging the request's end");
    }
    return 0;
}

static int item_state(requests_t *r, int64_t request, int64_t object, char *state, size_t size,
                      si_error_t *err)
{
    db_stmt_t *s = stmt(r, SQL_ITEM_STATE);
    bind_int(s, ":request", request);
    bind_int(s, ":object", object);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return si_errnoprintf(err, ENOENT, "request %lld has no item for object %lld", (long long)request,
                    (long long)object);
    if (rc != DB_ROW)
        return db_fail(r, err, "reading an item");
    snprintf(state, size, "%s", db_column_text(s, 0));
    db_reset(s);
    return 0;
}

/* Runs one item UPDATE inside a transaction; EBUSY when it changed nothing. */
static int item_transition(requests_t *r, sql_id_t id, int64_t request, int64_t object,
                           const char *state, const char *error, uint64_t bytes,
                           const char *what, si_error_t *err)
{
    char was[12] = "";
    if (begin(r, err) < 0)
        return -1;
    if (item_state(r, request, object, was, sizeof(was), err) < 0)
        goto error;
    bool was_completed = strcmp(was, "COMPLETED") == 0;
    db_stmt_t *s = stmt(r, id);
    bind_int(s, ":request", request);
    bind_int(s, ":object", object);
    bind_real(s, ":now", si_wall_now());
    bind_text(s, ":state", state);
    bind_text(s, ":error", error);
    bind_int(s, ":bytes", (int64_t)bytes);
    if (db_step(s) != DB_DONE) {
        db_fail(r, err, what);
        goto error;
    }
    if (db_changes(r->db) == 0) {
        si_errnoprintf(err, EBUSY, "request %lld, object %lld: cannot %s an item that is %s",
             (long long)request, (long long)object, what, was);
        goto error;
    }
    /* pins follow COMPLETED: taken on completion, given back on requeue */
    sql_id_t pin = id == SQL_ITEM_FINISH && strcmp(state, "COMPLETED") == 0 ? SQL_PIN
                   : id == SQL_ITEM_REQUEUE && was_completed               ? SQL_UNPIN
                                                                           : SQL_COUNT;
    if (pin != SQL_COUNT) {
        s = stmt(r, pin);
        bind_int(s, ":object", object);
        bind_int(s, ":request", request);
        bind_real(s, ":now", si_wall_now());
        if (db_step(s) != DB_DONE) {
            db_fail(r, err, "updating the cache pin");
            goto error;
        }
    }
    if (update_request_from_items(r, request, err) < 0)
        goto error;
    return commit(r, err);
error:
    return rollback_fail(r);
}

int requests_item_started(requests_t *r, int64_t request_id, int64_t object_id, si_error_t *err)
{
    return item_transition(r, SQL_ITEM_START, request_id, object_id, NULL, NULL, 0, "start", err);
}

int requests_item_progress(requests_t *r, int64_t request_id, int64_t object_id,
                           uint64_t bytes_done, si_error_t *err)
{
    return item_transition(r, SQL_ITEM_PROGRESS, request_id, object_id, NULL, NULL, bytes_done,
                           "record progress of", err);
}

int requests_item_completed(requests_t *r, int64_t request_id, int64_t object_id,
                            si_error_t *err)
{
    return item_transition(r, SQL_ITEM_FINISH, request_id, object_id, "COMPLETED", NULL, 0,
                           "complete", err);
}

int requests_item_failed(requests_t *r, int64_t request_id, int64_t object_id,
                         const char *reason, si_error_t *err)
{
    return item_transition(r, SQL_ITEM_FINISH, request_id, object_id, "FAILED",
                           reason ? reason : "failed", 0, "fail", err);
}

int requests_item_requeue(requests_t *r, int64_t request_id, int64_t object_id,
                          si_error_t *err)
{
    return item_transition(r, SQL_ITEM_REQUEUE, request_id, object_id, NULL, NULL, 0, "requeue",
                           err);
}

/* ---- restart -------------------------------------------------------------------------- */

int requests_recover(requests_t *r, requests_recovery_t *out, si_error_t *err)
{
    requests_recovery_t rec = {0};
    if (begin(r, err) < 0)
        return -1;
    if (db_exec(r->db, "UPDATE request_items SET state = 'SUBMITTED', bytes_done = 0, started = NULL"
                     " WHERE state = 'STARTED' AND request_id IN"
                     " (SELECT id FROM requests WHERE state IN ('SUBMITTED', 'STARTED'))", NULL) < 0) {
        db_fail(r, err, "re-queueing interrupted items");
        goto error;
    }
    rec.requeued_items = (uint64_t)db_changes(r->db);
    db_stmt_t *s = NULL;
    if (!(s = db_prepare(r->db, "SELECT count(*) FROM requests WHERE state IN ('SUBMITTED', 'STARTED')", NULL)) || db_step(s) != DB_ROW) {
        db_finalize(s);
        db_fail(r, err, "counting active requests");
        goto error;
    }
    rec.active_requests = (uint64_t)db_column_int64(s, 0);
    db_finalize(s);
    char detail[96];
    snprintf(detail, sizeof(detail), "%llu items queued again, %llu active requests",
             (unsigned long long)rec.requeued_items, (unsigned long long)rec.active_requests);
    if (catalog_event(r->cat, "requests.recovered", NULL, detail) < 0) {
        db_fail(r, err, "logging the recovery");
        goto error;
    }
    if (commit(r, err) < 0)
        return -1;
    if (out)
        *out = rec;
    return 0;
error:
    return rollback_fail(r);
}

int requests_completed_items(requests_t *r, requests_item_ref_t **refs, size_t *count,
                             si_error_t *err)
{
    db_stmt_t *s = NULL;
    if (!(s = db_prepare(r->db, "SELECT i.request_id, i.object_id FROM request_items i"
                           " JOIN requests q ON q.id = i.request_id"
                           " WHERE i.state = 'COMPLETED' AND q.state != 'RELEASED'"
                           " ORDER BY i.object_id, i.request_id", NULL)))
        return db_fail(r, err, "listing completed items");
    requests_item_ref_t *out = NULL;
    size_t n = 0, cap = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            requests_item_ref_t *grown = realloc(out, cap * sizeof(*grown));
            if (!grown) {
                free(out);
                db_finalize(s);
                return si_errnoprintf(err, ENOMEM, "out of memory");
            }
            out = grown;
        }
        out[n].request_id = db_column_int64(s, 0);
        out[n].object_id = db_column_int64(s, 1);
        n++;
    }
    if (rc != DB_DONE) {
        db_fail(r, err, "listing completed items");
        db_finalize(s);
        free(out);
        return -1;
    }
    db_finalize(s);
    *refs = out;
    *count = n;
    return 0;
}

/* ---- views ------------------------------------------------------------------------------ */

const char *requests_locality_name(requests_locality_t l)
{
    switch (l) {
    case REQUESTS_LOCALITY_DISK: return "DISK";
    case REQUESTS_LOCALITY_TAPE: return "TAPE";
    case REQUESTS_LOCALITY_DISK_AND_TAPE: return "DISK_AND_TAPE";
    case REQUESTS_LOCALITY_UNAVAILABLE: return "UNAVAILABLE";
    case REQUESTS_LOCALITY_LOST: return "LOST";
    default: return "NONE";
    }
}

int requests_locality(requests_t *r, const requests_caller_t *caller, const char *bucket,
                      const char *key, requests_locality_t *out, uint64_t *size,
                      si_error_t *err)
{
    int64_t object;
    db_stmt_t *s = stmt(r, SQL_OBJECT_FIND);
    bind_text(s, ":bucket", bucket);
    bind_text(s, ":key", key);
    int found = db_step(s);
    object = found == DB_ROW ? db_column_int64(s, 0) : 0;
    db_reset(s);
    if (found == DB_DONE)
        return si_errnoprintf(err, ENOENT, "no object %.64s/%.300s in the catalog", bucket, key);
    if (found != DB_ROW)
        return db_fail(r, err, "looking up an object");
    requests_spec_t who = {.uid = caller->uid, .gid = caller->gid};
    char name[400];
    snprintf(name, sizeof(name), "%.64s/%.300s", bucket, key);
    if (caller->ngroups && !(r->groups = groups_text(caller->groups, caller->ngroups)))
        return si_errnoprintf(err, ENOMEM, "out of memory");
    int allowed = check_object_access(r, &who, object, name, err);
    free(r->groups);
    r->groups = NULL;
    if (allowed < 0)
        return -1;
    s = stmt(r, SQL_LOCALITY);
    bind_text(s, ":bucket", bucket);
    bind_text(s, ":key", key);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return si_errnoprintf(err, ENOENT, "no object %.64s/%.300s in the catalog", bucket, key);
    if (rc != DB_ROW)
        return db_fail(r, err, "looking up an object's locality");
    if (size)
        *size = (uint64_t)db_column_int64(s, 0);
    bool disk = db_column_int(s, 1), tape = db_column_int(s, 2);
    bool disabled = db_column_int(s, 3), failed = db_column_int(s, 4);
    db_reset(s);
    *out = disk && tape ? REQUESTS_LOCALITY_DISK_AND_TAPE
           : disk       ? REQUESTS_LOCALITY_DISK
           : tape       ? REQUESTS_LOCALITY_TAPE
           : disabled   ? REQUESTS_LOCALITY_UNAVAILABLE
           : failed     ? REQUESTS_LOCALITY_LOST
                        : REQUESTS_LOCALITY_NONE;
    return 0;
}

int requests_metrics(requests_t *r, requests_metrics_t *out, si_error_t *err)
{
    static const char sql[] =
        "SELECT 'state', state, count(*), 0 FROM requests GROUP BY state"
        " UNION ALL SELECT 'queued', i.state, count(*), coalesce(sum(o.size), 0)"
        "  FROM request_items i JOIN requests q ON q.id = i.request_id"
        "  JOIN objects o ON o.id = i.object_id"
        "  WHERE i.state IN ('SUBMITTED', 'STARTED') AND q.state IN ('SUBMITTED', 'STARTED')"
        "  GROUP BY i.state"
        " UNION ALL SELECT 'failed', '', count(*), 0 FROM request_items WHERE state = 'FAILED'"
        " UNION ALL SELECT 'cache', '', count(*), coalesce(sum(size), 0) FROM cache"
        " UNION ALL SELECT 'pinned', '', count(*), coalesce(sum(size), 0) FROM cache"
        "  WHERE pins > 0";
    requests_metrics_t m = {0};
    db_stmt_t *s = NULL;
    if (!(s = db_prepare(r->db, sql, NULL)))
        return db_fail(r, err, "reading metrics");
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        const char *kind = db_column_text(s, 0);
        const char *state = db_column_text(s, 1);
        uint64_t count = (uint64_t)db_column_int64(s, 2);
        uint64_t bytes = (uint64_t)db_column_int64(s, 3);
        if (strcmp(kind, "state") == 0) {
            for (int i = 0; i < REQUESTS_NSTATES; i++)
                if (strcmp(state, requests_state_names[i]) == 0)
                    m.by_state[i] = count;
        } else if (strcmp(kind, "queued") == 0) {
            m.queued_files += count;
            m.queued_bytes += bytes;
            if (strcmp(state, "STARTED") == 0)
                m.started_files = count;
        } else if (strcmp(kind, "failed") == 0) {
            m.failed_files = count;
        } else if (strcmp(kind, "cache") == 0) {
            m.cache_objects = count;
            m.cache_bytes = bytes;
        } else {
            m.cache_pinned_objects = count;
            m.cache_pinned_bytes = bytes;
        }
    }
    db_finalize(s);
    if (rc != DB_DONE)
        return db_fail(r, err, "reading metrics");
    *out = m;
    return 0;
}

/* ---- batched item transitions (the recall service's group commit) ---------------- */

/* The item UPDATE of item_transition for many items, inside the caller's
 * transaction; each request touched is moved along once, at the end. */
static int items_transition_in(requests_t *r, sql_id_t id, requests_item_outcome_t *items,
                               size_t n, si_error_t *err)
{
    db_stmt_t *cached = NULL;
    if (id == SQL_ITEM_FINISH &&
        !(cached = db_prepare(r->db, "SELECT 1 FROM cache WHERE object_id = ?1", NULL)))
        return db_fail(r, err, "preparing a batch of items");
    double now = si_wall_now();
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        requests_item_outcome_t *it = &items[i];
        if (cached) {
            /* completed only while its object is cached: the pin follows */
            db_bind_int64(cached, 1, it->object_id);
            int step = db_step(cached);
            db_reset(cached);
            if (step != DB_ROW && step != DB_DONE) {
                rc = db_fail(r, err, "checking a cached object");
                break;
            }
            if (step == DB_DONE) {
                it->outcome = REQUESTS_ITEM_NOT_CACHED;
                continue;
            }
        }
        db_stmt_t *s = stmt(r, id);
        bind_int(s, ":request", it->request_id);
        bind_int(s, ":object", it->object_id);
        bind_real(s, ":now", now);
        bind_text(s, ":state", id == SQL_ITEM_FINISH ? "COMPLETED" : NULL);
        bind_text(s, ":error", NULL);
        bind_int(s, ":bytes", 0);
        if (db_step(s) != DB_DONE) {
            rc = db_fail(r, err, "updating a batch of items");
            break;
        }
        it->outcome = db_changes(r->db) ? REQUESTS_ITEM_DONE : REQUESTS_ITEM_BUSY;
        db_reset(s);
        if (it->outcome != REQUESTS_ITEM_DONE || id != SQL_ITEM_FINISH)
            continue;
        s = stmt(r, SQL_PIN);
        bind_int(s, ":object", it->object_id);
        bind_int(s, ":request", it->request_id);
        bind_real(s, ":now", now);
        if (db_step(s) != DB_DONE)
            rc = db_fail(r, err, "updating the cache pin");
        db_reset(s);
    }
    db_finalize(cached);
    /* each request once (items come grouped by request, mostly) */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (items[i].outcome != REQUESTS_ITEM_DONE)
            continue;
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = items[k].outcome == REQUESTS_ITEM_DONE &&
                   items[k].request_id == items[i].request_id;
        if (!seen)
            rc = update_request_from_items(r, items[i].request_id, err);
    }
    reset_all(r);
    return rc;
}

int requests_items_started_in(requests_t *r, requests_item_outcome_t *items, size_t n,
                              si_error_t *err)
{
    return items_transition_in(r, SQL_ITEM_START, items, n, err);
}

int requests_items_completed_in(requests_t *r, requests_item_outcome_t *items, size_t n,
                                si_error_t *err)
{
    return items_transition_in(r, SQL_ITEM_FINISH, items, n, err);
}
