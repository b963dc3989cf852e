/* Several instances sharing one catalog and one cache directory: a push's
 * files are aggregated and written to the archive by the instance holding
 * the push's lease (catalog/instances.h: kind "push", name its uuid),
 * which the instance's heartbeat renews. Any instance receives files for any
 * push; the first aggregator that finds a push's files due claims it. When
 * an instance dies its leases expire, another claims the push, queues the
 * files of the interrupted write again (ARCHIVING -> RECEIVED) and archives
 * them. The dead (or only stalled) instance cannot commit afterwards: an
 * aggregate is committed in a transaction that first re-claims every push
 * in it, and a push taken over meanwhile aborts it. What a dropped write
 * left on a volume is referenced by nothing, as after a crash alone. */
#include "config.h"
#include "daemon/push/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/instances.h"
#include "daemon/archive/backend.h"
#include "common/array.h"
#include "common/clock.h"

bool push_shared(const push_t *p)
{
    return p->instance[0] != '\0';
}

static push_claim_t *claim_find(push_t *p, int64_t push_id)
{
    for (size_t i = 0; i < p->nclaims; i++)
        if (p->claims[i].push_id == push_id)
            return &p->claims[i];
    return NULL;
}

static void claim_forget(push_t *p, int64_t push_id)
{
    push_claim_t *c = claim_find(p, push_id);
    if (c)
        *c = p->claims[--p->nclaims];
}

static int claim_note(push_t *p, int64_t push_id, bool mine, double until, si_error_t *err)
{
    push_claim_t *c = claim_find(p, push_id);
    if (!c) {
        if (si_array_grow((void **)&p->claims, &p->claims_cap, p->nclaims + 1,
                          sizeof(*p->claims)) < 0)
            return si_errnoprintf(err, ENOMEM, "out of memory");
        c = &p->claims[p->nclaims++];
    }
    *c = (push_claim_t){push_id, mine, until};
    return 0;
}

void push_claims_free(push_t *p)
{
    free(p->claims);
    p->claims = NULL;
    p->nclaims = p->claims_cap = 0;
}

/* The push's files of a write nobody will commit go back to the queue. */
static int requeue_push(push_t *p, int64_t push_id, const char *uuid, si_error_t *err)
{
    db_stmt_t *s = push_stmt(p, PUSH_SQL_REQUEUE_PUSH);
    db_bind_int64(s, 1, push_id);
    int rc = db_step(s);
    db_reset(s);
    if (rc != DB_DONE)
        return push_db_error(p, err, "queueing a taken-over push again");
    int64_t n = db_changes(p->db);
    if (n > 0) {
        char detail[160];
        snprintf(detail, sizeof(detail), "%" PRId64 " files of an interrupted archive write"
                                         " queued again by instance %s", n, p->instance);
        catalog_event(p->cat, "push.taken_over", uuid, detail);
        si_log(p->log, SI_LOG_NOTICE, "push %s: %s", uuid, detail);
        p->pushes_taken_over++;
    }
    return 0;
}

int push_claim(push_t *p, int64_t push_id, const char *uuid, si_error_t *err)
{
    if (!push_shared(p))
        return 1;
    double now = si_wall_now();
    push_claim_t *known = claim_find(p, push_id);
    if (known && (known->mine || known->until > now))
        return known->mine;
    int rc = lease_claim(p->cat, PUSH_LEASE, uuid, p->instance, now, p->lease_s, err);
    if (rc < 0)
        return -1;
    /* newly ours: any of its files still ARCHIVING are a write no live
     * instance will commit (this aggregator is between aggregates) */
    if (rc == 1 && requeue_push(p, push_id, uuid, err) < 0)
        return -1;
    if (claim_note(p, push_id, rc == 1, now + p->lease_s / 4, err) < 0)
        return -1;
    return rc;
}

int push_fence(push_t *p, int64_t push_id, const char *uuid, si_error_t *err)
{
    if (!push_shared(p))
        return 1;
    int rc = lease_claim(p->cat, PUSH_LEASE, uuid, p->instance, si_wall_now(), p->lease_s, err);
    if (rc == 0)
        claim_forget(p, push_id);
    return rc;
}

void push_release_if_done(push_t *p, int64_t push_id, const char *uuid)
{
    if (!push_shared(p))
        return;
    db_stmt_t *s = push_stmt(p, PUSH_SQL_PUSH_PENDING);
    db_bind_int64(s, 1, push_id);
    bool done = db_step(s) == DB_ROW && db_column_int64(s, 0) == 0;
    db_reset(s);
    if (!done)
        return;
    si_error_t err;
    if (lease_release(p->cat, PUSH_LEASE, uuid, p->instance, &err) < 0)
        si_log(p->log, SI_LOG_WARNING, "push %s: giving its lease back: %s", uuid, err.text);
    claim_forget(p, push_id);
}

typedef struct {
    int64_t id;
    char uuid[PUSH_UUID_LEN + 1];
} push_ref_t;

/* Alone: the files of a write put back in vain, queued again now that the
 * catalog answers (the flag stays until it did). */
static int requeue_orphaned(push_t *p, si_error_t *err)
{
    uint64_t n;
    if (push_requeue_archiving(p, &n, err) < 0)
        return -1;
    p->archiving_orphaned = false;
    if (n > 0)
        si_log(p->log, SI_LOG_NOTICE, "push: %" PRIu64 " files of an archive write whose"
                                      " outcome the catalog did not record queued again", n);
    return 0;
}

int push_sweep(push_t *p, bool now, si_error_t *err)
{
    if (!push_shared(p))
        return p->archiving_orphaned ? requeue_orphaned(p, err) : 0;
    if (!now && si_mono_now() < p->next_sweep)
        return 0;
    double every = p->lease_s / 2;
    p->next_sweep = si_mono_now() + (every < 1 ? 1 : every);
    push_ref_t *refs = NULL;
    size_t n = 0, cap = 0;
    db_stmt_t *s = push_stmt(p, PUSH_SQL_ARCHIVING_PUSHES);
    int rc;
    while ((rc = db_step(s)) == DB_ROW) {
        if (si_array_grow((void **)&refs, &cap, n + 1, sizeof(*refs)) < 0) {
            db_reset(s);
            free(refs);
            return si_errnoprintf(err, ENOMEM, "out of memory");
        }
        refs[n].id = db_column_int64(s, 0);
        snprintf(refs[n].uuid, sizeof(refs[n].uuid), "%s", db_column_text(s, 1));
        n++;
    }
    db_reset(s);
    if (rc != DB_DONE) {
        free(refs);
        return push_db_error(p, err, "listing pushes being archived");
    }
    for (size_t i = 0; i < n; i++) {
        push_claim_t *known = claim_find(p, refs[i].id);
        if (known && known->mine) {
            /* ours, yet ARCHIVING between aggregates: a write that was put
             * back in vain (catalog error) */
            if (requeue_push(p, refs[i].id, refs[i].uuid, err) < 0)
                goto error;
            continue;
        }
        if (known)
            claim_forget(p, refs[i].id); /* ask the catalog afresh */
        if (push_claim(p, refs[i].id, refs[i].uuid, err) < 0)
            goto error;
    }
    free(refs);
    return 0;
error:
    free(refs);
    return -1;
}

/* ---- volume leases of archive writes ----------------------------------------------------- */

/* The backend's claim hook (aggregator thread, inside archive_write). */
static int volume_claim(void *arg, const char *label, si_error_t *err)
{
    push_t *p = arg;
    if (p->nwrite_vols == (int)(sizeof(p->write_vols) / sizeof(p->write_vols[0])))
        return si_errnoprintf(err, EINVAL, "archive write: more volumes claimed than copies");
    pthread_mutex_lock(&p->lock);
    int rc = volume_hold(p->holds, p->cat, label, si_wall_now(), err);
    pthread_mutex_unlock(&p->lock);
    if (rc == 1)
        snprintf(p->write_vols[p->nwrite_vols++], sizeof(p->write_vols[0]), "%s", label);
    return rc;
}

static void volume_unclaim(void *arg, const char *label)
{
    push_t *p = arg;
    for (int i = 0; i < p->nwrite_vols; i++)
        if (strcmp(p->write_vols[i], label) == 0) {
            volume_unhold(p->holds, label, si_mono_now());
            memcpy(p->write_vols[i], p->write_vols[--p->nwrite_vols], sizeof(p->write_vols[0]));
            return;
        }
}

static int backend_loaded(void *arg, const char *label)
{
    return archive_volume_loaded(arg, label);
}

int push_volume_claims_start(push_t *p, volume_holds_t *shared, si_error_t *err)
{
    /* alone, or an archive without volumes (s3, hsm): nothing to claim */
    if (!push_shared(p) || !p->backend || p->backend->ops->copies_optional)
        return 0;
    if (!(p->holds = shared)) {
        if (!(p->holds = volume_holds_new(p->instance, p->lease_s)))
            return si_errnoprintf(err, ENOMEM, "out of memory");
        p->owns_holds = true;
    }
    p->backend->write_claims.claim = volume_claim;
    p->backend->write_claims.unclaim = volume_unclaim;
    p->backend->write_claims.arg = p;
    return 0;
}

void push_volume_claims_done(push_t *p)
{
    if (!p->holds)
        return;
    double now = si_mono_now();
    for (int i = 0; i < p->nwrite_vols; i++)
        volume_unhold(p->holds, p->write_vols[i], now);
    p->nwrite_vols = 0;
    if (!p->owns_holds)
        return; /* the recall service gives them back once idle and unloaded */
    si_error_t err;
    pthread_mutex_lock(&p->lock);
    int rc = volume_holds_release_idle(p->holds, p->cat, now, 0, backend_loaded, p->backend,
                                       &err);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0)
        si_log(p->log, SI_LOG_WARNING, "push: giving volume leases back: %s", err.text);
}

void push_volume_claims_stop(push_t *p)
{
    if (!p->holds)
        return;
    if (p->backend && p->backend->write_claims.arg == p)
        memset(&p->backend->write_claims, 0, sizeof(p->backend->write_claims));
    if (p->owns_holds)
        volume_holds_free(p->holds);
    p->holds = NULL;
}
