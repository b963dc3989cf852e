#include "config.h"
#include "daemon/jobs/reconcile.h"

#include "common/array.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

/* Slurm's submit time has whole seconds; allow one of clock difference */
#define SUBMISSION_EARLY_S 1.0
/* sbatch names its job itself as it exits; only a submission older than
 * this is matched from the session (a job submitted just before by the same
 * shell is hard to tell from it) */
#define SUBMISSION_SETTLE_S 10.0

typedef struct {
    reconcile_action_t *list;
    size_t n, cap;
    bool failed;
} plan_t;

static reconcile_action_t *add(plan_t *p, const requests_holder_t *h, reconcile_verb_t verb)
{
    if (si_array_grow((void **)&p->list, &p->cap, p->n + 1, sizeof(*p->list)) < 0) {
        p->failed = true;
        return NULL;
    }
    reconcile_action_t *a = &p->list[p->n++];
    memset(a, 0, sizeof(*a));
    a->verb = verb;
    a->request_id = h->request_id;
    memcpy(a->uuid, h->uuid, sizeof(a->uuid));
    a->kind = h->kind;
    snprintf(a->holder, sizeof(a->holder), "%s", h->holder);
    return a;
}

static const slurm_job_t *find_job(const slurm_job_t *jobs, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(jobs[i].id, id) == 0)
            return &jobs[i];
    return NULL;
}

/* An array lives while any of its records is not final; *seen tells whether
 * Slurm still knows it, *last_state one final state of it. */
static bool array_alive(const slurm_job_t *jobs, size_t n, const char *array, bool *seen)
{
    *seen = false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(jobs[i].array_id, array) != 0)
            continue;
        *seen = true;
        if (!slurm_state_final(jobs[i].state))
            return true;
    }
    return false;
}

/* The key a job is claimed by: its array's id, or its own. */
static const char *claim_key(const slurm_job_t *j)
{
    return j->array_id[0] ? j->array_id : j->id;
}

typedef struct {
    const requests_holder_t *holders;
    size_t nholders;
    const requests_job_id_t *known;
    size_t nknown;
    char (*taken)[24];
    size_t ntaken;
} claims_t;

static bool claimed(const claims_t *c, const char *key)
{
    for (size_t i = 0; i < c->nholders; i++)
        if (c->holders[i].kind != REQUESTS_HOLDER_SUBMISSION &&
            strcmp(c->holders[i].holder, key) == 0)
            return true;
    for (size_t i = 0; i < c->nknown; i++)
        if (strcmp(c->known[i], key) == 0)
            return true;
    for (size_t i = 0; i < c->ntaken; i++)
        if (strcmp(c->taken[i], key) == 0)
            return true;
    return false;
}

static int job_order(const slurm_job_t *a, const slurm_job_t *b)
{
    if (a->submitted != b->submitted)
        return a->submitted < b->submitted ? -1 : 1;
    size_t la = strlen(claim_key(a)), lb = strlen(claim_key(b));
    if (la != lb)
        return la < lb ? -1 : 1;
    return strcmp(claim_key(a), claim_key(b));
}

static void check_job(plan_t *p, const requests_holder_t *h, const slurm_job_t *jobs, size_t nj)
{
    const slurm_job_t *j = find_job(jobs, nj, h->holder);
    reconcile_action_t *a;
    if (j && !slurm_state_final(j->state))
        return;
    if (!(a = add(p, h, RECONCILE_UNHOLD)))
        return;
    if (j)
        snprintf(a->why, sizeof(a->why), "job %s ended (%s)", h->holder, j->state);
    else
        snprintf(a->why, sizeof(a->why), "job %s ended (Slurm no longer knows it)", h->holder);
}

static void check_array(plan_t *p, const requests_holder_t *h, const slurm_job_t *jobs,
                        size_t nj)
{
    bool seen;
    if (array_alive(jobs, nj, h->holder, &seen))
        return;
    reconcile_action_t *a = add(p, h, RECONCILE_UNHOLD);
    if (a)
        snprintf(a->why, sizeof(a->why), "job array %s ended (%s)", h->holder,
                 seen ? "every task finished" : "Slurm no longer knows it");
}

static void check_submission(plan_t *p, claims_t *claims, const requests_holder_t *h,
                             const slurm_job_t *jobs, size_t nj, double now, double grace_s)
{
    const char *colon = strrchr(h->holder, ':');
    char *end;
    long sid = colon ? strtol(colon + 1, &end, 10) : -1;
    const slurm_job_t *best = NULL;
    if (now - h->created < SUBMISSION_SETTLE_S)
        return;
    for (size_t i = 0; sid > 0 && i < nj; i++) {
        const slurm_job_t *j = &jobs[i];
        double t = (double)j->submitted;
        if (j->uid != h->uid || j->sid != sid || t < floor(h->created) - SUBMISSION_EARLY_S ||
            t > h->created + grace_s || claimed(claims, claim_key(j)))
            continue;
        if (!best || job_order(j, best) < 0)
            best = j;
    }
    reconcile_action_t *a;
    if (best) {
        if (!(a = add(p, h, RECONCILE_RESOLVE)))
            return;
        a->to_kind = best->array_id[0] ? REQUESTS_HOLDER_ARRAY : REQUESTS_HOLDER_JOB;
        snprintf(a->to, sizeof(a->to), "%s", claim_key(best));
        snprintf(claims->taken[claims->ntaken++], 24, "%s", claim_key(best));
        /* already over (cancelled while pending): the new holder goes too */
        requests_holder_t named = *h;
        named.kind = a->to_kind;
        snprintf(named.holder, sizeof(named.holder), "%s", a->to);
        if (named.kind == REQUESTS_HOLDER_ARRAY)
            check_array(p, &named, jobs, nj);
        else
            check_job(p, &named, jobs, nj);
        return;
    }
    if (now - h->created <= grace_s)
        return;
    if ((a = add(p, h, RECONCILE_UNHOLD)))
        snprintf(a->why, sizeof(a->why), "no Slurm job claimed it within %.0f s of its "
                 "submission (the submission failed, or the job ended before stageind saw it)",
                 grace_s);
}

int reconcile_plan(const requests_holder_t *holders, size_t nholders,
                   const requests_job_id_t *known, size_t nknown, const slurm_job_t *jobs,
                   size_t njobs, double now, double grace_s, reconcile_action_t **plan,
                   size_t *nplan, si_error_t *err)
{
    plan_t p = {0};
    claims_t claims = {.holders = holders, .nholders = nholders, .known = known,
                       .nknown = nknown, .taken = calloc(nholders + 1, 24)};
    if (!claims.taken)
        return si_errprintf(err, "out of memory");
    for (size_t i = 0; i < nholders && !p.failed; i++) {
        const requests_holder_t *h = &holders[i];
        switch (h->kind) {
        case REQUESTS_HOLDER_JOB: check_job(&p, h, jobs, njobs); break;
        case REQUESTS_HOLDER_ARRAY: check_array(&p, h, jobs, njobs); break;
        case REQUESTS_HOLDER_SUBMISSION:
            check_submission(&p, &claims, h, jobs, njobs, now, grace_s);
            break;
        }
    }
    free(claims.taken);
    if (p.failed) {
        free(p.list);
        return si_errprintf(err, "out of memory");
    }
    *plan = p.list;
    *nplan = p.n;
    return 0;
}
