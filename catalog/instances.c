/* The instance registry and leases; see instances.h. */
#include "config.h"
#include "catalog/instances.h"
#include "catalog/internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"

static const char SQL_INSTANCE_INSERT[] =
    "INSERT INTO instances(name, host, pid, started, heartbeat) VALUES (?1, ?2, ?3, ?4, ?4)"
    " ON CONFLICT(name) DO NOTHING";
static const char SQL_INSTANCE_FIND_SQLITE[] =
    "SELECT host, pid, heartbeat FROM instances WHERE name = ?1";
static const char SQL_INSTANCE_FIND_PG[] =
    "SELECT host, pid, heartbeat FROM instances WHERE name = ?1 FOR UPDATE";
static const char SQL_INSTANCE_TAKE[] =
    "UPDATE instances SET host = ?2, pid = ?3, started = ?4, heartbeat = ?4 WHERE name = ?1";
static const char SQL_INSTANCE_BEAT[] =
    "UPDATE instances SET heartbeat = ?4 WHERE name = ?1 AND host = ?2 AND pid = ?3";
static const char SQL_INSTANCE_DELETE[] = "DELETE FROM instances WHERE name = ?1";
static const char SQL_INSTANCE_LIST[] =
    "SELECT name, host, pid, started, heartbeat FROM instances"
    " WHERE ?1 = 0 OR heartbeat < ?2 ORDER BY name";

/* One statement: a new lease, or the take-over of an expired one, or the
 * extension of the instance's own; a lease another instance holds is left
 * (no row changed). */
static const char SQL_LEASE_CLAIM[] =
    "INSERT INTO leases(kind, name, instance, expires) VALUES (?1, ?2, ?3, ?4)"
    " ON CONFLICT(kind, name) DO UPDATE SET instance = excluded.instance,"
    " expires = excluded.expires"
    " WHERE leases.instance = excluded.instance OR leases.expires < ?5";
static const char SQL_LEASE_HOLDER[] =
    "SELECT instance FROM leases WHERE kind = ?1 AND name = ?2 AND expires >= ?3";
static const char SQL_LEASE_RELEASE[] =
    "DELETE FROM leases WHERE kind = ?1 AND name = ?2 AND instance = ?3";
/* SQL_LEASE_CLAIM for a list of objects (each once: PostgreSQL refuses to
 * change a row twice in one statement); the rows changed are the claims. */
static const char SQL_LEASE_CLAIM_OBJECTS[] =
    "INSERT INTO leases(kind, name, instance, expires)"
    " SELECT DISTINCT 'object', CAST(value AS TEXT), ?2, ?3 FROM json_each(?1) WHERE true"
    " ON CONFLICT(kind, name) DO UPDATE SET instance = excluded.instance,"
    " expires = excluded.expires"
    " WHERE leases.instance = excluded.instance OR leases.expires < ?4"
    " RETURNING name";
static const char SQL_LEASE_RELEASE_OBJECTS[] =
    "DELETE FROM leases WHERE kind = 'object' AND instance = ?2"
    " AND name IN (SELECT CAST(value AS TEXT) FROM json_each(?1))";
/* Only leases not yet expired: one that lapsed may have been taken. */
static const char SQL_LEASE_RENEW_ALL[] =
    "UPDATE leases SET expires = ?3 WHERE instance = ?1 AND expires >= ?2";
static const char SQL_LEASE_RELEASE_ALL[] = "DELETE FROM leases WHERE instance = ?1";
static const char SQL_LEASE_EACH[] =
    "SELECT name, instance FROM leases WHERE kind = ?1 AND expires >= ?2 AND instance <> ?3";

static const char SQL_REQUEUE_ORPHANS[] =
    "UPDATE request_items SET state = 'SUBMITTED', bytes_done = 0, started = NULL"
    " WHERE state = 'STARTED' AND request_id IN"
    "  (SELECT id FROM requests WHERE state IN ('SUBMITTED', 'STARTED'))"
    " AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.kind = 'object'"
    "  AND l.name = CAST(request_items.object_id AS TEXT) AND l.expires >= ?1)";

static db_stmt_t *stmt(catalog_t *cat, const char *sql, si_error_t *err)
{
    db_stmt_t *s = db_cached(catalog_driver(cat), sql, err);
    if (!s)
        si_errprefix(err, "catalog");
    return s;
}

static int fail(catalog_t *cat, si_error_t *err, const char *what)
{
    return db_error(catalog_driver(cat), err, what);
}

/* One instance row written by sql (?1 name, ?2 host, ?3 pid, ?4 now). */
static int write_instance_row(catalog_t *cat, const char *sql, const char *name, const char *host,
                              long pid, double now, const char *what, si_error_t *err)
{
    db_stmt_t *s = stmt(cat, sql, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, name, -1);
    db_bind_text(s, 2, host, -1);
    db_bind_int64(s, 3, pid);
    db_bind_double(s, 4, now);
    if (db_step(s) != DB_DONE)
        return fail(cat, err, what);
    return 0;
}

/* The caller reads errno (EEXIST, ESTALE) after a failure. */
static void rollback_keep_errno(db_t *db)
{
    int saved = errno;
    db_rollback(db);
    errno = saved;
}

/* A process that was killed but not yet reaped (a zombie: its parent, or an
 * init that reaps late, has not waited for it) answers kill(0) but holds
 * nothing any more: it counts as gone. */
static bool pid_gone(long pid)
{
    if (pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno == ESRCH))
        return true;
    char path[64], stat[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    size_t n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    /* "pid (comm) S ...": the state follows the last ')' (comm may hold one) */
    const char *close = strrchr(stat, ')');
    return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

int instance_register(catalog_t *cat, const char *name, const char *host, long pid, double now,
                      double lease_s, si_error_t *err)
{
    db_t *db = catalog_driver(cat);
    if (!name || !*name || strlen(name) > INSTANCE_NAME_MAX)
        return si_errnoprintf(err, EINVAL, "instance name '%s': 1 to %d characters",
                              name ? name : "", INSTANCE_NAME_MAX);
    if (db_begin(db, err) < 0)
        return -1;
    if (write_instance_row(cat, SQL_INSTANCE_INSERT, name, host, pid, now,
                           "registering the instance", err) < 0)
        goto error;
    if (db_changes(db) == 0) {
        /* the name is known: take it over unless another live process has it */
        db_stmt_t *s = stmt(cat, db_sql(db, SQL_INSTANCE_FIND_SQLITE, SQL_INSTANCE_FIND_PG), err);
        if (!s)
            goto error;
        db_bind_text(s, 1, name, -1);
        if (db_step(s) != DB_ROW) {
            fail(cat, err, "reading the instance");
            goto error;
        }
        char other_host[256];
        snprintf(other_host, sizeof(other_host), "%s", db_column_text(s, 0) ? db_column_text(s, 0) : "");
        long other_pid = (long)db_column_int64(s, 1);
        double beat = db_column_double(s, 2);
        db_reset(s);
        bool same_host = strcmp(other_host, host) == 0;
        bool live = beat >= now - lease_s && !(same_host && (other_pid == pid || pid_gone(other_pid)));
        if (live) {
            si_errnoprintf(err, EEXIST, "stageind.instance '%s' is in use by pid %ld on %s "
                           "(heartbeat %.1f s ago): give each instance its own name, or wait "
                           "%.0f s (the lease time) after it stopped", name, other_pid, other_host,
                           now - beat, lease_s);
            goto error;
        }
        if (write_instance_row(cat, SQL_INSTANCE_TAKE, name, host, pid, now,
                               "taking the instance's name", err) < 0)
            goto error;
    }
    if (lease_release_all(cat, name, err) < 0)
        goto error;
    char detail[400];
    snprintf(detail, sizeof(detail), "pid %ld on %s", pid, host);
    if (catalog_event(cat, "instance.started", name, detail) < 0) {
        fail(cat, err, "logging the instance's start");
        goto error;
    }
    return db_commit(db, err);
error:
    rollback_keep_errno(db);
    return -1;
}

int instance_heartbeat(catalog_t *cat, const char *name, const char *host, long pid, double now,
                       double lease_s, si_error_t *err)
{
    db_t *db = catalog_driver(cat);
    if (db_begin(db, err) < 0)
        return -1;
    if (write_instance_row(cat, SQL_INSTANCE_BEAT, name, host, pid, now,
                           "the instance's heartbeat", err) < 0)
        goto error;
    if (db_changes(db) != 1) {
        si_errnoprintf(err, ESTALE, "stageind.instance '%s' is no longer this process's "
                       "(another took the name, or its row was removed)", name);
        goto error;
    }
    if (lease_renew_all(cat, name, now, lease_s, err) < 0)
        goto error;
    return db_commit(db, err);
error:
    rollback_keep_errno(db);
    return -1;
}

int instance_unregister(catalog_t *cat, const char *name, si_error_t *err)
{
    db_t *db = catalog_driver(cat);
    if (db_begin(db, err) < 0)
        return -1;
    db_stmt_t *s = stmt(cat, SQL_INSTANCE_DELETE, err);
    if (!s)
        goto error;
    db_bind_text(s, 1, name, -1);
    if (db_step(s) != DB_DONE) {
        fail(cat, err, "removing the instance");
        goto error;
    }
    if (lease_release_all(cat, name, err) < 0 ||
        catalog_event(cat, "instance.stopped", name, NULL) < 0)
        goto error;
    return db_commit(db, err);
error:
    rollback_keep_errno(db);
    return -1;
}

int instance_list(catalog_t *cat, double now, double lease_s, bool dead_only,
                  instance_info_t **out, size_t *count, si_error_t *err)
{
    *out = NULL;
    *count = 0;
    db_stmt_t *s = stmt(cat, SQL_INSTANCE_LIST, err);
    if (!s)
        return -1;
    db_bind_int(s, 1, dead_only);
    db_bind_double(s, 2, now - lease_s);
    size_t cap = 0;
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)out, &cap, *count + 1, sizeof(**out)) < 0) {
            db_reset(s);
            free(*out);
            *out = NULL;
            return si_errprintf(err, "out of memory");
        }
        instance_info_t *i = &(*out)[(*count)++];
        memset(i, 0, sizeof(*i));
        snprintf(i->name, sizeof(i->name), "%s", db_column_text(s, 0));
        snprintf(i->host, sizeof(i->host), "%s", db_column_text(s, 1) ? db_column_text(s, 1) : "");
        i->pid = (long)db_column_int64(s, 2);
        i->started = db_column_double(s, 3);
        i->heartbeat = db_column_double(s, 4);
    }
    db_reset(s);
    if (rc != DB_DONE) {
        free(*out);
        *out = NULL;
        *count = 0;
        return fail(cat, err, "listing the instances");
    }
    return 0;
}

static int lease_check(const char *kind, const char *name, si_error_t *err)
{
    if (!kind || !*kind || strlen(kind) > LEASE_KIND_MAX || !name || !*name ||
        strlen(name) > LEASE_NAME_MAX)
        return si_errnoprintf(err, EINVAL, "lease '%s' '%s': kind 1 to %d, name 1 to %d "
                              "characters", kind ? kind : "", name ? name : "", LEASE_KIND_MAX,
                              LEASE_NAME_MAX);
    return 0;
}

int lease_claim(catalog_t *cat, const char *kind, const char *name, const char *instance,
                double now, double lease_s, si_error_t *err)
{
    if (lease_check(kind, name, err) < 0)
        return -1;
    db_stmt_t *s = stmt(cat, SQL_LEASE_CLAIM, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, kind, -1);
    db_bind_text(s, 2, name, -1);
    db_bind_text(s, 3, instance, -1);
    db_bind_double(s, 4, now + lease_s);
    db_bind_double(s, 5, now);
    if (db_step(s) != DB_DONE)
        return fail(cat, err, "claiming a lease");
    return db_changes(catalog_driver(cat)) > 0 ? 1 : 0;
}

int lease_holder(catalog_t *cat, const char *kind, const char *name, double now, char *holder,
                 size_t size, si_error_t *err)
{
    db_stmt_t *s = stmt(cat, SQL_LEASE_HOLDER, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, kind, -1);
    db_bind_text(s, 2, name, -1);
    db_bind_double(s, 3, now);
    int rc = db_step(s);
    if (rc == DB_ROW && holder)
        snprintf(holder, size, "%s", db_column_text(s, 0));
    db_reset(s);
    if (rc == DB_ERROR)
        return fail(cat, err, "reading a lease");
    return rc == DB_ROW;
}

int lease_release(catalog_t *cat, const char *kind, const char *name, const char *instance,
                  si_error_t *err)
{
    db_stmt_t *s = stmt(cat, SQL_LEASE_RELEASE, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, kind, -1);
    db_bind_text(s, 2, name, -1);
    db_bind_text(s, 3, instance, -1);
    if (db_step(s) != DB_DONE)
        return fail(cat, err, "releasing a lease");
    return db_changes(catalog_driver(cat)) > 0;
}

/* The rows of a batch statement go in chunks: bounded text, bounded time
 * holding the write lock. */
#define LEASE_CHUNK 1024

int lease_claim_objects(catalog_t *cat, const int64_t *objects, size_t n, const char *instance,
                        double now, double lease_s, bool *claimed, si_error_t *err)
{
    memset(claimed, 0, n * sizeof(*claimed));
    int64_t *won = malloc((n < LEASE_CHUNK ? n : LEASE_CHUNK) * sizeof(*won) + 1);
    if (!won)
        return si_errnoprintf(err, ENOMEM, "out of memory");
    for (size_t at = 0; at < n; at += LEASE_CHUNK) {
        size_t m = n - at < LEASE_CHUNK ? n - at : LEASE_CHUNK, nwon;
        db_stmt_t *s = stmt(cat, SQL_LEASE_CLAIM_OBJECTS, err);
        if (!s)
            goto error;
        if (db_bind_int64_list(s, 1, objects + at, m) < 0) {
            si_errnoprintf(err, ENOMEM, "out of memory");
            goto error;
        }
        db_bind_text(s, 2, instance, -1);
        db_bind_double(s, 3, now + lease_s);
        db_bind_double(s, 4, now);
        if (db_step_ids(s, won, m, &nwon) != DB_DONE) { /* names: object ids */
            fail(cat, err, "claiming object leases");
            db_reset(s);
            goto error;
        }
        db_reset(s);
        for (size_t k = 0; k < m; k++)
            claimed[at + k] = db_ids_find(won, nwon, objects[at + k]) != NULL;
    }
    free(won);
    return 0;
error:
    memset(claimed, 0, n * sizeof(*claimed));
    free(won);
    return -1;
}

int64_t lease_release_objects(catalog_t *cat, const int64_t *objects, size_t n,
                              const char *instance, si_error_t *err)
{
    int64_t released = 0;
    for (size_t at = 0; at < n; at += LEASE_CHUNK) {
        size_t m = n - at < LEASE_CHUNK ? n - at : LEASE_CHUNK;
        db_stmt_t *s = stmt(cat, SQL_LEASE_RELEASE_OBJECTS, err);
        if (!s)
            return -1;
        if (db_bind_int64_list(s, 1, objects + at, m) < 0)
            return si_errnoprintf(err, ENOMEM, "out of memory");
        db_bind_text(s, 2, instance, -1);
        if (db_step(s) != DB_DONE) {
            fail(cat, err, "releasing object leases");
            db_reset(s);
            return -1;
        }
        released += db_changes(catalog_driver(cat));
        db_reset(s);
    }
    return released;
}

int64_t lease_renew_all(catalog_t *cat, const char *instance, double now, double lease_s,
                        si_error_t *err)
{
    db_stmt_t *s = stmt(cat, SQL_LEASE_RENEW_ALL, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, instance, -1);
    db_bind_double(s, 2, now);
    db_bind_double(s, 3, now + lease_s);
    if (db_step(s) != DB_DONE)
        return fail(cat, err, "renewing the instance's leases");
    return db_changes(catalog_driver(cat));
}

int64_t lease_release_all(catalog_t *cat, const char *instance, si_error_t *err)
{
    db_stmt_t *s = stmt(cat, SQL_LEASE_RELEASE_ALL, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, instance, -1);
    if (db_step(s) != DB_DONE)
        return fail(cat, err, "dropping the instance's leases");
    return db_changes(catalog_driver(cat));
}

int lease_each_held(catalog_t *cat, const char *kind, const char *instance, double now,
                    int (*fn)(const char *name, const char *holder, void *arg), void *arg,
                    si_error_t *err)
{
    db_stmt_t *s = stmt(cat, SQL_LEASE_EACH, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, kind, -1);
    db_bind_double(s, 2, now);
    db_bind_text(s, 3, instance ? instance : "", -1);
    int rc;
    while ((rc = db_step(s)) == DB_ROW)
        if (fn(db_column_text(s, 0), db_column_text(s, 1), arg) != 0)
            break;
    db_reset(s);
    if (rc == DB_ERROR)
        return fail(cat, err, "listing leases");
    return 0;
}

int64_t instance_requeue_orphans(catalog_t *cat, double now, si_error_t *err)
{
    db_stmt_t *s = stmt(cat, SQL_REQUEUE_ORPHANS, err);
    if (!s)
        return -1;
    db_bind_double(s, 1, now);
    if (db_step(s) != DB_DONE)
        return fail(cat, err, "re-queueing items no live instance recalls");
    int64_t n = db_changes(catalog_driver(cat));
    if (n > 0) {
        char detail[64];
        snprintf(detail, sizeof(detail), "%lld items queued again", (long long)n);
        catalog_event(cat, "requests.orphans_requeued", NULL, detail);
    }
    return n;
}

/* ---- the instance's volume leases, shared by its threads ---------------------------- */

typedef struct {
    char label[LEASE_NAME_MAX + 1];
    size_t users;
    double idle_since;         /* monotonic seconds since users went to 0 */
} volume_hold_t;

struct volume_holds {
    pthread_mutex_t mu;        /* the table, and each claim and release with it */
    char instance[INSTANCE_NAME_MAX + 1];
    double lease_s;
    volume_hold_t *held;
    size_t n, cap;
};

volume_holds_t *volume_holds_new(const char *instance, double lease_s)
{
    volume_holds_t *vh = calloc(1, sizeof(*vh));
    if (!vh)
        return NULL;
    pthread_mutex_init(&vh->mu, NULL);
    snprintf(vh->instance, sizeof(vh->instance), "%s", instance);
    vh->lease_s = lease_s;
    return vh;
}

void volume_holds_free(volume_holds_t *vh)
{
    if (!vh)
        return;
    pthread_mutex_destroy(&vh->mu);
    free(vh->held);
    free(vh);
}

static volume_hold_t *hold_find(volume_holds_t *vh, const char *label)
{
    for (size_t i = 0; i < vh->n; i++)
        if (strcmp(vh->held[i].label, label) == 0)
            return &vh->held[i];
    return NULL;
}

int volume_hold(volume_holds_t *vh, catalog_t *cat, const char *label, double now,
                si_error_t *err)
{
    int rc = 1;
    pthread_mutex_lock(&vh->mu);
    volume_hold_t *h = hold_find(vh, label);
    if (!h && si_array_grow((void **)&vh->held, &vh->cap, vh->n + 1, sizeof(*vh->held)) < 0) {
        rc = si_errnoprintf(err, ENOMEM, "out of memory");
        goto out;
    }
    /* a new volume, or an idle one whose lease may have lapsed meanwhile (a
     * heartbeat that failed) and been taken; claimed under the lock, so
     * that no release by another thread of this instance slips between the
     * claim and the table */
    if (!h || h->users == 0) {
        rc = lease_claim(cat, LEASE_VOLUME, label, vh->instance, now, vh->lease_s, err);
        if (rc != 1) {
            if (rc == 0 && h)
                *h = vh->held[--vh->n];
            goto out;
        }
    }
    if (!h) {
        h = &vh->held[vh->n++];
        memset(h, 0, sizeof(*h));
        snprintf(h->label, sizeof(h->label), "%s", label);
    }
    h->users++;
out:
    pthread_mutex_unlock(&vh->mu);
    return rc;
}

bool volume_unhold(volume_holds_t *vh, const char *label, double mono_now)
{
    pthread_mutex_lock(&vh->mu);
    volume_hold_t *h = hold_find(vh, label);
    bool idle = h && h->users > 0 && --h->users == 0;
    if (idle)
        h->idle_since = mono_now;
    pthread_mutex_unlock(&vh->mu);
    return idle;
}

bool volume_holds_has(volume_holds_t *vh, const char *label)
{
    pthread_mutex_lock(&vh->mu);
    bool has = hold_find(vh, label) != NULL;
    pthread_mutex_unlock(&vh->mu);
    return has;
}

size_t volume_holds_busy(volume_holds_t *vh)
{
    size_t busy = 0;
    pthread_mutex_lock(&vh->mu);
    for (size_t i = 0; i < vh->n; i++)
        busy += vh->held[i].users > 0;
    pthread_mutex_unlock(&vh->mu);
    return busy;
}

size_t volume_holds_count(volume_holds_t *vh)
{
    pthread_mutex_lock(&vh->mu);
    size_t n = vh->n;
    pthread_mutex_unlock(&vh->mu);
    return n;
}

int volume_holds_release_idle(volume_holds_t *vh, catalog_t *cat, double mono_now, double grace,
                              int (*loaded)(void *arg, const char *label), void *arg,
                              si_error_t *err)
{
    int released = 0;
    /* the candidates first, then the backend asked without the lock: its
     * own write path claims volumes (volume_hold) while holding its locks */
    pthread_mutex_lock(&vh->mu);
    size_t n = 0;
    char (*idle)[LEASE_NAME_MAX + 1] = vh->n ? malloc(vh->n * sizeof(*idle)) : NULL;
    for (size_t i = 0; idle && i < vh->n; i++)
        if (vh->held[i].users == 0 && mono_now - vh->held[i].idle_since >= grace)
            memcpy(idle[n++], vh->held[i].label, sizeof(idle[0]));
    pthread_mutex_unlock(&vh->mu);
    for (size_t i = 0; i < n; i++) {
        if (loaded && loaded(arg, idle[i]) == 1)
            continue;
        pthread_mutex_lock(&vh->mu);
        volume_hold_t *h = hold_find(vh, idle[i]);
        int rc = 0;
        if (h && h->users == 0) { /* nobody took it meanwhile */
            rc = lease_release(cat, LEASE_VOLUME, h->label, vh->instance, err);
            if (rc >= 0) {
                *h = vh->held[--vh->n];
                released++;
            }
        }
        pthread_mutex_unlock(&vh->mu);
        if (rc < 0) {
            released = -1;
            break;
        }
    }
    free(idle);
    return released;
}
