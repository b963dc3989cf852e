/* Stage requests: creation, status, cancel and release, lists and views.
 * Holders live in requests_holders.c, item transitions in requests_items.c,
 * what they share in requests_core.c. */
#include "config.h"
#include "catalog/requests.h"
#include "catalog/internal.h"
#include "catalog/requests_internal.h"

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
    db_stmt_t *s = requests_stmt(r, SQL_OBJECT_ACCESS);
    requests_param_int(s, ":object", object);
    requests_param_int(s, ":uid", spec->uid);
    requests_param_int(s, ":gid", spec->gid);
    requests_param_text(s, ":groups", r->groups);
    if (db_step(s) != DB_ROW)
        return requests_db_fail(r, err, "checking object permissions");
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
    db_stmt_t *s = requests_stmt(r, SQL_ITEM_INSERT);
    requests_param_int(s, ":request", request);
    requests_param_int(s, ":object", object);
    if (db_step(s) != DB_DONE)
        return requests_db_fail(r, err, "adding a request item");
    return 0;
}

static int add_dataset(requests_t *r, const requests_spec_t *spec, int64_t request,
                       const char *name, si_error_t *err)
{
    si_error_t nerr;
    if (si_dataset_check(name, &nerr) < 0)
        return si_errnoprintf(err, EINVAL, "%s", nerr.text);
    db_stmt_t *s = requests_stmt(r, SQL_DATASET_FIND);
    requests_param_text(s, ":name", name);
    requests_param_int(s, ":uid", spec->uid);
    requests_param_int(s, ":gid", spec->gid);
    requests_param_text(s, ":groups", r->groups);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return si_errnoprintf(err, ENOENT, "unknown dataset '%s'", name);
    if (rc != DB_ROW)
        return requests_db_fail(r, err, "looking up a dataset");
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
    s = requests_stmt(r, SQL_DATASET_ITEMS);
    requests_param_int(s, ":request", request);
    requests_param_int(s, ":dataset", id);
    if (db_step(s) != DB_DONE)
        return requests_db_fail(r, err, "adding a dataset's objects");
    return 0;
}

static void id_row(db_stmt_t *s, void *rec)
{
    *(int64_t *)rec = db_column_int64(s, 0);
}

static int add_file(requests_t *r, const requests_spec_t *spec, int64_t request,
                    const char *file, si_error_t *err)
{
    char bucket[SI_BUCKET_MAX + 1];
    const char *key;
    if (split_file(file, bucket, sizeof(bucket), &key, err) < 0)
        return -1;
    if (key[strlen(key) - 1] != '/') {
        db_stmt_t *s = requests_stmt(r, SQL_OBJECT_FIND);
        requests_param_text(s, ":bucket", bucket);
        requests_param_text(s, ":key", key);
        int rc = db_step(s);
        if (rc == DB_DONE)
            return si_errnoprintf(err, ENOENT, "no object %.300s in the catalog", file);
        if (rc != DB_ROW)
            return requests_db_fail(r, err, "looking up an object");
        int64_t object = db_column_int64(s, 0);
        db_reset(s);
        if (check_object_access(r, spec, object, file, err) < 0)
            return -1;
        return insert_item(r, request, object, err);
    }
    /* A prefix: collect first, then check and insert (one statement at a time). */
    db_stmt_t *s = requests_stmt(r, SQL_PREFIX_OBJECTS);
    requests_param_text(s, ":bucket", bucket);
    requests_param_text(s, ":prefix", key);
    int64_t *ids = NULL;
    size_t n = 0;
    if (requests_rows(r, s, sizeof(*ids), id_row, (void **)&ids, &n, "listing a prefix", err) < 0)
        return -1;
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
    if (spec->job_id && requests_check_job_id(spec->job_id, err) < 0)
        return -1;
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
    if (requests_begin(r, err) < 0)
        return -1;
    si_uuid4(made.uuid);
    double now = si_wall_now();
    db_stmt_t *s = requests_stmt(r, SQL_REQUEST_INSERT);
    requests_param_text(s, ":uuid", made.uuid);
    requests_param_int(s, ":uid", spec->uid);
    requests_param_int(s, ":gid", spec->gid);
    requests_param_text(s, ":job", spec->job_id);
    requests_param_int(s, ":priority", spec->priority);
    if (spec->deadline)
        requests_param_int(s, ":deadline", spec->deadline);
    requests_param_int(s, ":pin", spec->pin_lifetime);
    requests_param_real(s, ":now", now);
    if (db_step(s) != DB_DONE) {
        requests_db_fail(r, err, "recording a request");
        goto error;
    }
    made.id = db_last_insert_id(r->db);
    for (size_t i = 0; i < spec->ndatasets; i++)
        if (add_dataset(r, spec, made.id, spec->datasets[i], err) < 0)
            goto error;
    for (size_t i = 0; i < spec->nfiles; i++)
        if (add_file(r, spec, made.id, spec->files[i], err) < 0)
            goto error;
    s = requests_stmt(r, SQL_REQUEST_TOTALS);
    requests_param_int(s, ":request", made.id);
    if (db_step(s) != DB_ROW) {
        requests_db_fail(r, err, "counting a request's items");
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
        s = requests_stmt(r, SQL_USER_STAGED);
        requests_param_int(s, ":uid", spec->uid);
        if (db_step(s) != DB_ROW) {
            requests_db_fail(r, err, "counting a user's staged bytes");
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
    if ((spec->job_id && requests_add_holder(r, made.id, REQUESTS_HOLDER_JOB, spec->job_id, false,
                                             err) < 0) ||
        (spec->submission && requests_add_holder(r, made.id, REQUESTS_HOLDER_SUBMISSION,
                                                 spec->submission, false, err) < 0))
        goto error;
    char detail[160];
    snprintf(detail, sizeof(detail), "uid %u job %s: %llu files, %llu bytes",
             (unsigned)spec->uid, spec->job_id ? spec->job_id : "-",
             (unsigned long long)made.files, (unsigned long long)made.bytes);
    if (requests_log_commit(r, "request.submitted", made.uuid, detail,
                            "logging the request", err) < 0)
        return -1;
    if (out)
        *out = made;
    return 0;
error:
    return requests_rollback_fail(r);
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
        if (si_array_grow((void **)&out, &cap, n + 1, sizeof(*out)) < 0) {
            free(out);
            free(copy);
            return si_errnoprintf(err, ENOMEM, "out of memory");
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

int requests_get(requests_t *r, const char *uuid, uid_t caller_uid, requests_status_t **out,
                 si_error_t *err)
{
    requests_status_t *st = calloc(1, sizeof(*st));
    if (!st)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    if (requests_find(r, uuid, caller_uid, st, err) < 0) {
        int saved = errno;
        free(st);
        errno = saved;
        return -1;
    }
    db_stmt_t *s;
    if (requests_is_active_state(st->state)) {
        s = requests_stmt(r, SQL_QUEUE_AHEAD);
        requests_param_int(s, ":priority", st->priority);
        requests_param_real(s, ":created", st->created);
        requests_param_int(s, ":id", st->id);
        if (db_step(s) != DB_ROW) {
            requests_db_fail(r, err, "computing the queue position");
            goto error;
        }
        st->queue_position = (size_t)db_column_int64(s, 0) + 1;
        db_reset(s);
    }
    s = requests_stmt(r, SQL_REQUEST_ITEMS);
    requests_param_int(s, ":request", st->id);
    size_t cap = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&st->items, &cap, st->nitems + 1, sizeof(*st->items)) < 0) {
            si_errnoprintf(err, ENOMEM, "out of memory");
            goto error;
        }
        requests_item_t *it = &st->items[st->nitems++];
        memset(it, 0, sizeof(*it));
        it->object_id = db_column_int64(s, 0);
        it->bucket = requests_dup_column(s, 1);
        it->key = requests_dup_column(s, 2);
        it->size = (uint64_t)db_column_int64(s, 3);
        it->bytes_done = (uint64_t)db_column_int64(s, 4);
        snprintf(it->state, sizeof(it->state), "%s", db_column_text(s, 5));
        it->error = requests_dup_column(s, 6);
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
        requests_db_fail(r, err, "listing a request's items");
        goto error;
    }
    *out = st;
    return 0;
error:;
    int saved = errno;
    requests_reset_all(r);
    requests_status_free(st);
    errno = saved;
    return -1;
}

/* ---- cancel / release ----------------------------------------------------------- */

int requests_id_of(requests_t *r, const char *uuid, int64_t *id, si_error_t *err)
{
    requests_status_t st = {0};
    if (requests_find(r, uuid, (uid_t)-1, &st, err) < 0)
        return -1;
    *id = st.id;
    requests_status_clear(&st);
    return 0;
}

/* The request a cancel or release (of it or of some of its files) acts on,
 * inside the caller's transaction: EBUSY once it can no longer be. */
static int find_to_end(requests_t *r, const char *uuid, uid_t caller, bool release,
                       requests_status_t *st, si_error_t *err)
{
    if (requests_find(r, uuid, caller, st, err) < 0)
        return -1;
    if (release ? strcmp(st->state, "RELEASED") == 0 : !requests_is_active_state(st->state))
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
    if (requests_begin(r, err) < 0)
        return -1;
    if (find_to_end(r, uuid, caller, release, &st, err) < 0)
        goto error;
    if (requests_end_found(r, &st, release, why ? why : by, false, err) < 0)
        goto error;
    requests_status_clear(&st);
    return requests_commit(r, err);
error:
    return requests_abandon(r, &st);
}

int requests_end_items(requests_t *r, const char *uuid, uid_t caller, bool release,
                       const int64_t *objects, size_t n, si_error_t *err)
{
    requests_status_t st = {0};
    if (requests_begin(r, err) < 0)
        return -1;
    if (find_to_end(r, uuid, caller, release, &st, err) < 0)
        goto error;
    double now = si_wall_now();
    for (size_t i = 0; i < n; i++) {
        db_stmt_t *s = requests_stmt(r, SQL_ITEM_CANCEL);
        requests_param_int(s, ":request", st.id);
        requests_param_int(s, ":object", objects[i]);
        requests_param_real(s, ":now", now);
        if (db_step(s) != DB_DONE) {
            requests_db_fail(r, err, "cancelling an item");
            goto error;
        }
        if (!release)
            continue;
        s = requests_stmt(r, SQL_UNPIN);
        requests_param_int(s, ":object", objects[i]);
        requests_param_int(s, ":request", st.id);
        if (db_step(s) != DB_DONE) {
            requests_db_fail(r, err, "unpinning an item");
            goto error;
        }
    }
    db_stmt_t *s = requests_stmt(r, SQL_REQUEST_HELD);
    requests_param_int(s, ":request", st.id);
    if (db_step(s) != DB_ROW) {
        requests_db_fail(r, err, "counting what the request holds");
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
        if (requests_end_found(r, &st, true, why, false, err) < 0)
            goto error;
    } else if (requests_follow_items(r, st.id, err) < 0) {
        goto error;
    }
    if (catalog_event(r->cat, release ? "request.items_released" : "request.items_cancelled",
                      st.uuid, why) < 0) {
        requests_db_fail(r, err, "recording the change");
        goto error;
    }
    requests_status_clear(&st);
    return requests_commit(r, err);
error:
    return requests_abandon(r, &st);
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

/* The latest requests first (requests_by_created, schema 1.16), then the
 * items of those only: the items of every request ever made were summed
 * before the limit took the latest (1,000,000 items kept: 522 ms a call on
 * SQLite, 2.35 s on PostgreSQL, for each refresh of the status page;
 * BENCHMARKS.md). */
const char requests_list_sql[] =
    "SELECT r.uuid, r.uid, r.job_id,"
    " CASE WHEN r.expired <> 0 THEN 'EXPIRED' ELSE r.state END, count(i.object_id),"
    " coalesce(sum(i.state = 'COMPLETED'), 0), coalesce(sum(i.state = 'FAILED'), 0),"
    " coalesce(sum(o.size), 0), coalesce(sum(i.bytes_done), 0), r.created, r.finished,"
    " coalesce(r.end_reason, r.error)"
    " FROM (SELECT id, uuid, uid, job_id, expired, state, created, finished, end_reason, error"
    "  FROM requests"
    "  WHERE (?1 < 0 OR uid = ?1) AND (?2 = 0 OR state IN ('SUBMITTED', 'STARTED'))"
    "  ORDER BY created DESC, id DESC LIMIT ?3) r"
    " LEFT JOIN request_items i ON i.request_id = r.id"
    " LEFT JOIN objects o ON o.id = i.object_id"
    " GROUP BY r.id, r.uuid, r.uid, r.job_id, r.expired, r.state, r.created, r.finished,"
    "  r.end_reason, r.error"
    " ORDER BY r.created DESC, r.id DESC";

si_table_t *requests_list(requests_t *r, uid_t owner, bool active_only, size_t limit,
                          si_error_t *err)
{
    static const si_column_t columns[] = {
        {"request", SI_COL_STR},      {"uid", SI_COL_INT},          {"job", SI_COL_STR},
        {"state", SI_COL_STR},        {"files", SI_COL_INT},        {"files_done", SI_COL_INT},
        {"files_failed", SI_COL_INT}, {"bytes", SI_COL_BYTES},      {"bytes_done", SI_COL_BYTES},
        {"created", SI_COL_REAL},     {"finished", SI_COL_REAL},    {"reason", SI_COL_STR},
    };
    db_stmt_t *s = catalog_prepare(r->cat, requests_list_sql, err);
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
        requests_db_fail(r, err, "listing the queue");
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
        requests_db_fail(r, err, "listing the queue");
        si_table_free(t);
        t = NULL;
    }
    db_finalize(s);
    return t;
}

int requests_pending(requests_t *r, requests_pending_fn fn, void *arg, si_error_t *err)
{
    db_stmt_t *s = requests_stmt(r, SQL_PENDING);
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
        return requests_db_fail(r, err, "listing pending items");
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
    db_stmt_t *s = requests_stmt(r, SQL_OBJECT_FIND);
    requests_param_text(s, ":bucket", bucket);
    requests_param_text(s, ":key", key);
    int found = db_step(s);
    object = found == DB_ROW ? db_column_int64(s, 0) : 0;
    db_reset(s);
    if (found == DB_DONE)
        return si_errnoprintf(err, ENOENT, "no object %.64s/%.300s in the catalog", bucket, key);
    if (found != DB_ROW)
        return requests_db_fail(r, err, "looking up an object");
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
    s = requests_stmt(r, SQL_LOCALITY);
    requests_param_text(s, ":bucket", bucket);
    requests_param_text(s, ":key", key);
    int rc = db_step(s);
    if (rc == DB_DONE)
        return si_errnoprintf(err, ENOENT, "no object %.64s/%.300s in the catalog", bucket, key);
    if (rc != DB_ROW)
        return requests_db_fail(r, err, "looking up an object's locality");
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

/* Each part reads a kept row or an index: the requests' states, the
 * waiting items' totals (schema 1.17), the failed items' index (1.16), the
 * cache's usage and its pinned part (1.15, 1.17). */
const char requests_metrics_sql[] =
    "SELECT 'state', state, count(*), 0 FROM requests GROUP BY state"
    /* the totals and the changes not yet folded into them */
    " UNION ALL SELECT 'queued', '', t.waiting_files + d.files, t.waiting_bytes + d.bytes"
    "  FROM request_item_totals t, (SELECT coalesce(sum(waiting_files), 0) AS files,"
    "   coalesce(sum(waiting_bytes), 0) AS bytes FROM request_item_total_changes) d"
    " UNION ALL SELECT 'started', '', t.started_files + d.started, 0"
    "  FROM request_item_totals t, (SELECT coalesce(sum(started_files), 0) AS started"
    "   FROM request_item_total_changes) d"
    " UNION ALL SELECT 'unfolded', '', count(*), 0 FROM request_item_total_changes"
    " UNION ALL SELECT 'failed', '', count(*), 0 FROM request_items WHERE state = 'FAILED'"
    " UNION ALL SELECT 'cache', '', " CATALOG_CACHE_USAGE_COLUMNS CATALOG_CACHE_USAGE_FROM
    " UNION ALL SELECT 'pinned', '', " CATALOG_CACHE_PINNED_COLUMNS CATALOG_CACHE_USAGE_FROM;

int requests_metrics(requests_t *r, requests_metrics_t *out, si_error_t *err)
{
    requests_metrics_t m = {0};
    uint64_t unfolded = 0;
    db_stmt_t *s = NULL;
    if (!(s = db_prepare(r->db, requests_metrics_sql, NULL)))
        return requests_db_fail(r, err, "reading metrics");
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
            m.queued_files = count;
            m.queued_bytes = bytes;
        } else if (strcmp(kind, "started") == 0) {
            m.started_files = count;
        } else if (strcmp(kind, "unfolded") == 0) {
            unfolded = count;
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
        return requests_db_fail(r, err, "reading metrics");
    *out = m;
    if (unfolded >= CATALOG_FOLD_AT)
        requests_fold_totals(r);
    return 0;
}

void requests_fold_totals(requests_t *r)
{
    si_error_t ignored;
    (void)catalog_fold_totals(r->cat, &ignored); /* the changes stay counted until folded */
}
