/* Stage requests' holders: the jobs, arrays and submissions that keep a
 * request, binding and unholding them, expiry, recent jobs. */
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

/* ---- holders -------------------------------------------------------------------- */

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
    db_stmt_t *s = requests_stmt(r, SQL_HOLDER_COUNTS);
    requests_param_int(s, ":request", request);
    requests_param_text(s, ":holder", job ? job : "");
    requests_param_text(s, ":array", array ? array : "");
    if (db_step(s) != DB_ROW)
        return requests_db_fail(r, err, "counting a request's holders");
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
    db_stmt_t *s = requests_stmt(r, SQL_HOLDER_DROP_SUBMISSIONS);
    requests_param_int(s, ":request", request);
    if (db_step(s) != DB_DONE)
        return requests_db_fail(r, err, "resolving the submission holder");
    return 0;
}

int requests_bind_job(requests_t *r, const char *uuid, uid_t caller_uid, const char *job,
                      const char *array, bool running, si_error_t *err)
{
    requests_status_t st = {0};
    holder_counts_t n;
    if (requests_check_job_id(job, err) < 0 || (array && requests_check_job_id(array, err) < 0))
        return -1;
    if (requests_begin(r, err) < 0)
        return -1;
    if (requests_find(r, uuid, caller_uid, &st, err) < 0 ||
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
        db_stmt_t *s = requests_stmt(r, SQL_HOLDERS_DROP_JOBS);
        requests_param_int(s, ":request", st.id);
        if (db_step(s) != DB_DONE) {
            requests_db_fail(r, err, "naming the request's job");
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
        db_stmt_t *s = requests_stmt(r, SQL_BIND_JOB);
        requests_param_text(s, ":job", array ? array : job);
        requests_param_real(s, ":now", si_wall_now());
        requests_param_int(s, ":request", st.id);
        if (db_step(s) != DB_DONE) {
            requests_db_fail(r, err, "binding the request to its job");
            goto error;
        }
    }
    char detail[160];
    snprintf(detail, sizeof(detail), "job %s%s%s, by uid %u", job, array ? " of array " : "",
             array ? array : "", (unsigned)caller_uid);
    if (drop_submission_holders(r, st.id, err) < 0 ||
        requests_add_holder(r, st.id, REQUESTS_HOLDER_JOB, job, running, err) < 0 ||
        (array && requests_add_holder(r, st.id, REQUESTS_HOLDER_ARRAY, array, false, err) < 0))
        goto error;
    if (catalog_event(r->cat, "request.bound", uuid, detail) < 0) {
        requests_db_fail(r, err, "recording the binding");
        goto error;
    }
    requests_status_clear(&st);
    return requests_commit(r, err);
error:
    return requests_abandon(r, &st);
}

int requests_unhold(requests_t *r, const char *uuid, uid_t caller_uid,
                    requests_holder_kind_t kind, const char *holder, const char *why,
                    bool *released, bool *array_left, si_error_t *err)
{
    requests_status_t st = {0};
    holder_counts_t n;
    if (requests_begin(r, err) < 0)
        return -1;
    if (requests_find(r, uuid, caller_uid, &st, err) < 0)
        goto error;
    db_stmt_t *s = requests_stmt(r, SQL_HOLDER_DEL);
    requests_param_int(s, ":request", st.id);
    requests_param_text(s, ":kind", requests_holder_kind_name(kind));
    requests_param_text(s, ":holder", holder);
    if (db_step(s) != DB_DONE) {
        requests_db_fail(r, err, "removing a holder");
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
    if (release && requests_end_found(r, &st, true, why, false, err) < 0)
        goto error;
    if (released)
        *released = release;
    if (array_left)
        *array_left = n.arrays > 0;
    requests_status_clear(&st);
    return requests_commit(r, err);
error:
    return requests_abandon(r, &st);
}

int requests_resolve_submission(requests_t *r, int64_t request_id, const char *submission,
                                requests_holder_kind_t kind, const char *holder,
                                si_error_t *err)
{
    if (requests_begin(r, err) < 0)
        return -1;
    db_stmt_t *s = requests_stmt(r, SQL_HOLDER_RESOLVE);
    requests_param_int(s, ":request", request_id);
    requests_param_text(s, ":submission", submission);
    requests_param_text(s, ":kind", requests_holder_kind_name(kind));
    requests_param_text(s, ":holder", holder);
    if (db_step(s) != DB_DONE) {
        requests_db_fail(r, err, "naming a submission's job");
        return requests_rollback_fail(r);
    }
    if (db_changes(r->db) == 1) {
        s = requests_stmt(r, SQL_BIND_JOB);
        requests_param_text(s, ":job", holder);
        requests_param_real(s, ":now", si_wall_now());
        requests_param_int(s, ":request", request_id);
        char id[32], detail[160];
        snprintf(id, sizeof(id), "%lld", (long long)request_id);
        snprintf(detail, sizeof(detail), "submission %s is %s %s", submission,
                 requests_holder_kind_name(kind), holder);
        if (db_step(s) != DB_DONE ||
            catalog_event(r->cat, "request.bound", id, detail) < 0) {
            requests_db_fail(r, err, "naming a submission's job");
            return requests_rollback_fail(r);
        }
    }
    return requests_commit(r, err);
}

static void holder_row(db_stmt_t *s, void *rec)
{
    requests_holder_t *h = rec;
    h->request_id = db_column_int64(s, 0);
    snprintf(h->uuid, sizeof(h->uuid), "%s", db_column_text(s, 1));
    h->uid = (uid_t)db_column_int64(s, 2);
    h->created = db_column_double(s, 3);
    h->kind = holder_kind_of(db_column_text(s, 4));
    snprintf(h->holder, sizeof(h->holder), "%s", db_column_text(s, 5));
    h->running = db_column_int(s, 6) != 0;
    h->since = db_column_double(s, 7);
}

int requests_holders(requests_t *r, requests_holder_t **out, size_t *count, si_error_t *err)
{
    return requests_rows(r, requests_stmt(r, SQL_HOLDERS_ALL), sizeof(**out), holder_row,
                         (void **)out, count, "listing holders", err);
}

static void job_id_row(db_stmt_t *s, void *rec)
{
    requests_job_id_t *id = rec;
    snprintf(*id, sizeof(*id), "%s", db_column_text(s, 0));
}

int requests_recent_jobs(requests_t *r, double since, requests_job_id_t **out, size_t *count,
                         si_error_t *err)
{
    db_stmt_t *s = requests_stmt(r, SQL_RECENT_JOBS);
    requests_param_real(s, ":since", since);
    return requests_rows(r, s, sizeof(**out), job_id_row, (void **)out, count,
                         "listing recent jobs", err);
}

/* An expired pin, collected first: each release is a transaction of its own. */
typedef struct {
    char uuid[REQUESTS_UUID_LEN + 1];
    int64_t lifetime;
} due_t;

static void due_row(db_stmt_t *s, void *rec)
{
    due_t *d = rec;
    snprintf(d->uuid, sizeof(d->uuid), "%s", db_column_text(s, 0));
    d->lifetime = db_column_int64(s, 1);
}

int requests_expire(requests_t *r, double now, requests_expired_fn fn, void *arg,
                    size_t *count, si_error_t *err)
{
    due_t *due = NULL;
    size_t n = 0;
    db_stmt_t *s = requests_stmt(r, SQL_EXPIRED);
    requests_param_real(s, ":now", now);
    if (requests_rows(r, s, sizeof(*due), due_row, (void **)&due, &n, "finding expired pins",
                      err) < 0)
        return -1;
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        requests_status_t st = {0};
        char why[96];
        snprintf(why, sizeof(why), "its pin lifetime of %lld s passed",
                 (long long)due[i].lifetime);
        if (requests_begin(r, err) < 0)
            break;
        if (requests_find(r, due[i].uuid, (uid_t)-1, &st, err) < 0 ||
            requests_end_found(r, &st, true, why, true, err) < 0) {
            requests_abandon(r, &st);
            break;
        }
        requests_status_clear(&st);
        if (requests_commit(r, err) < 0)
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
