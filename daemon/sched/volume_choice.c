/* Which volume a free drive works on next. One function per mount rule; the
 * comment of each says which objective it serves. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "daemon/sched/internal.h"
#include "daemon/sched/sched.h"

/* What a volume's queue holds right now (live entries, each object once). */
typedef struct {
    size_t files;
    double bytes;
    uint64_t oldest_seq;
    double oldest_time;
    int priority;
    double deadline;  /* earliest deadline among its requests; INFINITY: none */
    double benefit;   /* job-aware: request completion gained by serving it */
} vq_stats_t;

/* Weight of a request for the job-aware rule: priority, deadline urgency
 * (full urgency one hour before the deadline and after it), and an age term
 * (+1 every AGE_S waited) so that big requests do not wait behind a stream of
 * cheaper ones: the tail (p95) of completion times, at little cost to the
 * mean (measured on W1-W9: 4 h left W7's p95 40 % above the best policy's,
 * 20 min 11 %, with no change in the mean). */
#define AGE_S 1200.0
static double request_weight(const req_t *q, double now)
{
    double w = 1.0 + (q->priority > 0 ? q->priority : 0);
    if (q->deadline > 0) {
        double slack = q->deadline - now;
        double urgency = slack <= 3600 ? 1.0 : slack >= 4 * 3600 ? 0.0
                                                                 : (4 * 3600 - slack) / (3 * 3600);
        w *= 1.0 + 4.0 * urgency;
    }
    return w * (1.0 + (now - q->arrival) / AGE_S);
}

static void volume_stats(sched_t *s, int v, double now, bool benefit, vq_stats_t *st)
{
    const vq_t *q = &s->vq[v];
    st->files = 0;
    st->bytes = 0;
    st->oldest_seq = UINT64_MAX;
    st->oldest_time = INFINITY;
    st->priority = INT32_MIN;
    st->deadline = INFINITY;
    st->benefit = 0;
    for (size_t k = 0; k < q->n; k++) {
        size_t idx = q->items[k];
        obj_t *o = &s->objs[idx];
        if (!sched_entry_live(s, idx, v) || o->mark)
            continue;
        o->mark = 1;
        st->files++;
        st->bytes += (double)o->copies[sched_copy_index(o, v)].size;
        if (o->seq < st->oldest_seq) {
            st->oldest_seq = o->seq;
            st->oldest_time = o->arrival;
        }
        if (o->priority > st->priority)
            st->priority = o->priority;
        for (long w = o->waiters; w >= 0; w = s->waiters[w].next) {
            const req_t *r = &s->reqs[s->waiters[w].req];
            if (r->deadline > 0 && r->deadline < st->deadline)
                st->deadline = r->deadline;
            /* The share of the request's outstanding files this read
             * settles: a request whose last files are all here counts 1. */
            if (benefit)
                st->benefit += request_weight(r, now) / (double)r->remaining;
        }
    }
    for (size_t k = 0; k < q->n; k++)
        s->objs[q->items[k]].mark = 0;
}

/* Drive time to switch from the drive's cartridge to volume v. */
static double switch_time(const sched_t *s, int v, int drive_volume, uint64_t head)
{
    const tape_profile_t *p = &s->opt.profile;
    if (v == drive_volume)
        return 0;
    return (drive_volume >= 0 ? tape_unmount_time(p, head) : 0) + tape_mount_time(p);
}

/* Drive time to serve the volume's queue from this drive: the switch and the
 * pass the volume would get once mounted, costed from the drive's actual
 * locate/stream decisions along the planned order (a contiguous run costs
 * its bytes / rate, not a locate per file). */
static double service_time(sched_t *s, int v, int drive_volume, uint64_t head,
                           const vq_stats_t *st)
{
    const tape_profile_t *p = &s->opt.profile;
    double pass = sched_volume_pass_time(s, v, v == drive_volume ? head : 0);
    if (pass < 0) /* out of memory: a locate per file */
        pass = st->bytes / p->rate + (double)st->files * (p->t_base + 0.5 * p->t_wrap);
    return switch_time(s, v, drive_volume, head) + pass;
}

/* The makespan guard's "nearly": a pass of at least this share of the
 * drives' fair share is critical (measured on the full W2 and W9, seed
 * 20260101: 1.0 left W9's makespan 5 % above linear's, 0.5 put W2's p95 20 %
 * above the best, 0.75 neither). */
#define CRITICAL_SHARE 0.75

/* ---- deadlines (job-aware) ------------------------------------------------ */

/* Open requests with a deadline and the volumes their queued files are on. */
typedef struct {
    size_t req;
    double deadline;
    int *vols;
    size_t nvols, cap_vols;
} dl_req_t;

typedef struct {
    dl_req_t *reqs;
    size_t n;
    double *work;         /* per volume: switch + pass, estimated; 0: no work */
    bool *busy;           /* per volume: served by another drive already */
    double *done_at;      /* per volume, scratch for one simulation */
    int ndrives, nvolumes;
    double *drive_free;   /* scratch */
} dl_t;

static void dl_free(dl_t *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->reqs[i].vols);
    free(d->reqs);
    free(d->work);
    free(d->busy);
    free(d->done_at);
    free(d->drive_free);
}

static int by_deadline(const void *a, const void *b)
{
    const dl_req_t *x = a, *y = b;
    if (x->deadline != y->deadline)
        return x->deadline < y->deadline ? -1 : 1;
    return x->req < y->req ? -1 : x->req > y->req;
}

/* Collects the open requests with deadlines and their volumes. Returns the
 * number of such requests, -1 when out of memory. */
static long dl_collect(sched_t *s, dl_t *d)
{
    memset(d, 0, sizeof(*d));
    size_t nreq = 0;
    for (size_t r = 0; r < s->nreqs; r++)
        if (s->reqs[r].deadline > 0 && s->reqs[r].remaining > 0)
            nreq++;
    if (nreq == 0)
        return 0;
    int nv = s->opt.nvolumes;
    d->nvolumes = nv;
    d->reqs = calloc(nreq, sizeof(dl_req_t));
    d->work = malloc((size_t)nv * sizeof(double));
    d->busy = calloc((size_t)nv, sizeof(bool));
    d->done_at = malloc((size_t)nv * sizeof(double));
    d->ndrives = s->opt.drives > 0 ? s->opt.drives : 1;
    d->drive_free = malloc((size_t)d->ndrives * sizeof(double));
    size_t *slot = malloc((s->nreqs + 1) * sizeof(size_t));
    /* per request, a bitmap row over volumes, while collecting */
    uint8_t *seen = calloc(nreq * (size_t)nv + 1, 1);
    if (!d->reqs || !d->work || !d->busy || !d->done_at || !d->drive_free || !slot || !seen) {
        free(slot);
        free(seen);
        dl_free(d);
        return -1;
    }
    for (size_t r = 0; r < s->nreqs; r++) {
        slot[r] = SIZE_MAX;
        if (s->reqs[r].deadline > 0 && s->reqs[r].remaining > 0) {
            d->reqs[d->n] = (dl_req_t){r, s->reqs[r].deadline, NULL, 0, 0};
            slot[r] = d->n++;
        }
    }
    for (int v = 0; v < nv; v++) {
        const vq_t *q = &s->vq[v];
        for (size_t k = 0; k < q->n; k++) {
            size_t idx = q->items[k];
            if (!sched_entry_live(s, idx, v))
                continue;
            for (long w = s->objs[idx].waiters; w >= 0; w = s->waiters[w].next) {
                size_t i = slot[s->waiters[w].req];
                if (i == SIZE_MAX || seen[i * (size_t)nv + (size_t)v])
                    continue;
                seen[i * (size_t)nv + (size_t)v] = 1;
                dl_req_t *dr = &d->reqs[i];
                if (si_array_grow((void **)&dr->vols, &dr->cap_vols, dr->nvols + 1,
                                  sizeof(*dr->vols)) < 0) {
                    free(slot);
                    free(seen);
                    dl_free(d);
                    return -1;
                }
                dr->vols[dr->nvols++] = v;
            }
        }
    }
    free(slot);
    free(seen);
    qsort(d->reqs, d->n, sizeof(dl_req_t), by_deadline);
    return (long)d->n;
}

/* Index of the drive free first. */
static int earliest_drive(const dl_t *d)
{
    int best = 0;
    for (int i = 1; i < d->ndrives; i++)
        if (d->drive_free[i] < d->drive_free[best])
            best = i;
    return best;
}

/* Simulates serving the deadline requests earliest deadline first on the
 * library's drives (a volume once, longest first within a request), after
 * this drive first serves volume first (-1: none). A request that would be
 * late is given up in the simulation (it does not delay the others: those it
 * can no longer meet are then served by completion time). Returns the number
 * of requests late; *lateness their total lateness; *edf_first the first
 * volume this drive would take for a request (-1 none). */
static size_t dl_simulate(dl_t *d, double now, int first, double first_work, double *lateness,
                          int *edf_first)
{
    for (int i = 0; i < d->ndrives; i++)
        d->drive_free[i] = now;
    for (int v = 0; v < d->nvolumes; v++)
        d->done_at[v] = -1;
    /* The other drives are busy with their volumes (those in drives or on
     * their way) until their passes end; a volume in a drive is done then. */
    int dr = 1;
    for (int v = 0; v < d->nvolumes; v++)
        if (d->busy[v]) {
            d->done_at[v] = now + d->work[v];
            if (dr < d->ndrives)
                d->drive_free[dr++] = now + d->work[v];
        }
    if (first >= 0) {
        d->drive_free[0] = now + first_work;
        d->done_at[first] = d->drive_free[0];
    }
    *edf_first = -1;
    *lateness = 0;
    size_t late = 0;
    for (size_t i = 0; i < d->n; i++) {
        dl_req_t *r = &d->reqs[i];
        double done = now;
        /* Tentative: longest unserved volume first on the earliest drive. */
        double saved[16];
        int nsaved = d->ndrives < 16 ? d->ndrives : 16;
        for (int x = 0; x < nsaved; x++)
            saved[x] = d->drive_free[x];
        int first_pick = -1;
        for (;;) {
            int pick = -1;
            for (size_t k = 0; k < r->nvols; k++) {
                int v = r->vols[k];
                if (d->done_at[v] < 0 && (pick < 0 || d->work[v] > d->work[pick]))
                    pick = v;
            }
            if (pick < 0)
                break;
            int drv = earliest_drive(d);
            d->drive_free[drv] += d->work[pick];
            d->done_at[pick] = d->drive_free[drv];
            if (first_pick < 0 && drv == 0)
                first_pick = pick;
        }
        for (size_t k = 0; k < r->nvols; k++)
            if (d->done_at[r->vols[k]] > done)
                done = d->done_at[r->vols[k]];
        if (done > r->deadline) {
            late++;
            *lateness += done - r->deadline;
            if (d->ndrives <= 16) {
                /* Given up: its volumes are not served ahead of the others. */
                for (int x = 0; x < nsaved; x++)
                    d->drive_free[x] = saved[x];
                for (size_t k = 0; k < r->nvols; k++)
                    if (!d->busy[r->vols[k]] && r->vols[k] != first)
                        d->done_at[r->vols[k]] = -1;
            }
            continue;
        }
        if (*edf_first < 0 && first_pick >= 0)
            *edf_first = first_pick;
    }
    return late;
}

/* ---- the rules -------------------------------------------------------------- */

/* EDF's order: earliest deadline, then highest priority, then oldest. */
static bool edf_before(const vq_stats_t *a, const vq_stats_t *b)
{
    if (a->deadline != b->deadline)
        return a->deadline < b->deadline;
    if (a->priority != b->priority)
        return a->priority > b->priority;
    return a->oldest_seq < b->oldest_seq;
}

/* Job-aware: the volume with the most request completion gained per second
 * of drive time (Smith's rule for weighted completion time), unless serving
 * it now would make a deadline be missed that earliest-deadline-first would
 * meet; then the volume EDF serves next (objective: feasible deadlines met,
 * then completion time). */
static int choose_job_aware(sched_t *s, double now, int drive_volume, uint64_t head,
                            const uint8_t *unavailable)
{
    int nv = s->opt.nvolumes;
    double *score = malloc((size_t)nv * sizeof(double));
    double *service = malloc((size_t)nv * sizeof(double));
    if (!score || !service) {
        free(score);
        free(service);
        return -1;
    }
    int best = -1;
    for (int v = 0; v < nv; v++) {
        score[v] = -INFINITY;
        service[v] = -1;
        if (unavailable[v] || s->vq[v].n == 0)
            continue;
        vq_stats_t st;
        volume_stats(s, v, now, true, &st);
        if (st.files == 0)
            continue;
        service[v] = service_time(s, v, drive_volume, head, &st);
        score[v] = st.benefit / service[v];
        if (best < 0 || score[v] > score[best])
            best = v;
    }
    /* Makespan guard: a volume whose pass alone is (nearly) the drives'
     * fair share of all the work left (its own, the others', and what the
     * other drives still have to read) is on the critical path: a drive
     * serving cheaper volumes first ends the whole recall later by what it
     * served. Longest first then (objective: makespan, at a cost to the mean
     * bounded by the short passes the other drives still serve: one drive
     * at least is always left to Smith's rule). */
    int ndrives = s->opt.drives > 0 ? s->opt.drives : 1;
    int critical = 0, guard_pick = -1;
    for (int v = 0; v < nv; v++)
        critical += unavailable[v] && s->vq[v].critical && sched_volume_has_work(s, v);
    if (best >= 0 && critical < ndrives - 1) {
        int longest = best;
        double total = 0;
        for (int v = 0; v < nv; v++) {
            if (service[v] > 0) {
                total += service[v];
                if (service[v] > service[longest])
                    longest = v;
            } else if (unavailable[v] && sched_volume_has_work(s, v)) {
                double left = sched_volume_pass_time(s, v, 0);
                if (left > 0)
                    total += left;
            }
        }
        if (service[longest] * ndrives >= CRITICAL_SHARE * total)
            best = guard_pick = longest;
    }
    dl_t d;
    if (best >= 0 && dl_collect(s, &d) > 0) {
        const tape_profile_t *p = &s->opt.profile;
        for (int v = 0; v < nv; v++) {
            d.work[v] = service[v] < 0 ? 0 : service[v];
            if (unavailable[v] && sched_volume_has_work(s, v)) {
                /* in another drive or on its way: what is left of its pass */
                d.busy[v] = true;
                d.work[v] = sched_volume_pass_time(s, v, 0);
                if (d.work[v] < 0) {
                    vq_stats_t st;
                    volume_stats(s, v, now, false, &st);
                    d.work[v] = st.bytes / p->rate;
                }
            }
        }
        double late_edf, late_smith;
        int edf_first, unused;
        size_t miss_edf = dl_simulate(&d, now, -1, 0, &late_edf, &edf_first);
        size_t miss_smith = dl_simulate(&d, now, best, service[best], &late_smith, &unused);
        if (edf_first >= 0 && edf_first != best &&
            (miss_smith > miss_edf || (miss_smith == miss_edf && late_smith > late_edf + 1)))
            best = edf_first;
        dl_free(&d);
    }
    if (best >= 0)
        s->vq[best].critical = best == guard_pick;
    free(score);
    free(service);
    return best;
}

int sched_choose_volume(sched_t *s, double now, int drive_volume, uint64_t head,
                        const uint8_t *unavailable, double *wake_at)
{
    *wake_at = INFINITY;
    if (s->nqueued == 0)
        return -1;
    /* Every rule: a mounted volume with queued reads keeps its drive (no
     * remount: throughput, and arrivals join the current pass). */
    if (drive_volume >= 0 && sched_volume_has_work(s, drive_volume))
        return drive_volume;
    const sched_mount_rule_t rule = s->policy->mount;
    if (rule == MOUNT_JOB_AWARE)
        return choose_job_aware(s, now, drive_volume, head, unavailable);
    int best = -1;
    vq_stats_t best_st = {0};
    double best_score = -INFINITY;
    double largest_bytes = -1;
    int largest = -1;
    for (int v = 0; v < s->opt.nvolumes; v++) {
        if (unavailable[v] || s->vq[v].n == 0)
            continue;
        vq_stats_t st;
        volume_stats(s, v, now, false, &st);
        if (st.files == 0)
            continue;
        double score;
        switch (rule) {
        case MOUNT_OLDEST:
            /* FIFO: the volume of the oldest request first (fairness only). */
            score = -(double)st.oldest_seq;
            break;
        case MOUNT_DCACHE:
            /* dCache-like: a queue past max-wait goes first, oldest first
             * (bounded wait); otherwise the largest queue (throughput). */
            if (st.bytes > largest_bytes) {
                largest_bytes = st.bytes;
                largest = v;
            }
            if (now - st.oldest_time < s->opt.dcache_max_wait_s)
                continue;
            score = -(double)st.oldest_seq;
            break;
        case MOUNT_CTA:
            /* CTA-like: a queue qualifies with enough bytes or files to make
             * the mount worth it (throughput) or when old enough (bounded
             * wait); among those, highest priority, then oldest. */
            if (st.bytes < s->opt.cta_min_bytes && (double)st.files < s->opt.cta_min_files &&
                now - st.oldest_time < s->opt.cta_min_age_s) {
                double qualifies_at = st.oldest_time + s->opt.cta_min_age_s;
                if (qualifies_at < *wake_at)
                    *wake_at = qualifies_at;
                continue;
            }
            score = (double)st.priority * 1e15 - (double)st.oldest_seq;
            break;
        case MOUNT_EDF:
        default:
            /* EDF: the volume holding the earliest deadline (deadlines met
             * whenever they can be on one drive), then priority, then age. */
            if (best < 0 || edf_before(&st, &best_st)) {
                best = v;
                best_st = st;
            }
            continue;
        }
        if (score > best_score) {
            best_score = score;
            best = v;
        }
    }
    if (rule == MOUNT_DCACHE && best < 0)
        best = largest;
    if (best >= 0)
        *wake_at = INFINITY;
    return best;
}
