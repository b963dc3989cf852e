/* Which volume a free drive works on next. One function per mount rule; the
 * comment of each says which objective it serves. */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "daemon/sched/internal.h"
#include "daemon/sched/sched.h"

/* What a volume's queue holds right now (live entries, each object once). */
typedef struct {
    size_t files;
    double bytes;
    uint64_t oldest_seq;
    double oldest_time;
    int priority;
    double benefit;   /* job-aware: request completion gained by serving it */
} vq_stats_t;

/* Weight of a request for the job-aware rule: priority, deadline urgency
 * (full urgency one hour before the deadline and after it), and a slow age
 * term so that no request waits for ever behind newer ones. */
static double request_weight(const req_t *q, double now)
{
    double w = 1.0 + (q->priority > 0 ? q->priority : 0);
    if (q->deadline > 0) {
        double slack = q->deadline - now;
        double urgency = slack <= 3600 ? 1.0 : slack >= 4 * 3600 ? 0.0
                                                                 : (4 * 3600 - slack) / (3 * 3600);
        w *= 1.0 + 4.0 * urgency;
    }
    return w * (1.0 + (now - q->arrival) / (4 * 3600.0));
}

static void volume_stats(sched_t *s, int v, double now, bool benefit, vq_stats_t *st)
{
    const vq_t *q = &s->vq[v];
    st->files = 0;
    st->bytes = 0;
    st->oldest_seq = UINT64_MAX;
    st->oldest_time = INFINITY;
    st->priority = INT32_MIN;
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
        if (benefit)
            for (long w = o->waiters; w >= 0; w = s->waiters[w].next) {
                const req_t *r = &s->reqs[s->waiters[w].req];
                /* The share of the request's outstanding files this read
                 * settles: a request whose last files are all here counts 1. */
                st->benefit += request_weight(r, now) / (double)r->remaining;
            }
    }
    for (size_t k = 0; k < q->n; k++)
        s->objs[q->items[k]].mark = 0;
}

/* Estimated drive time to serve the volume's queue from this drive: the
 * switch (unmount of the drive's cartridge + mount), the reads, and a
 * positioning estimate (a locate base per file, a wrap change every few). */
static double service_time(const sched_t *s, int v, int drive_volume, uint64_t head,
                           const vq_stats_t *st)
{
    const tape_profile_t *p = &s->opt.profile;
    double t = 0;
    if (v != drive_volume) {
        if (drive_volume >= 0)
            t += tape_unmount_time(p, head);
        t += tape_mount_time(p);
    }
    t += st->bytes / p->rate;
    t += (double)st->files * (p->t_base + 0.5 * p->t_wrap);
    return t;
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
    int best = -1;
    double best_score = -INFINITY;
    double largest_bytes = -1;
    int largest = -1;
    for (int v = 0; v < s->opt.nvolumes; v++) {
        if (unavailable[v] || s->vq[v].n == 0)
            continue;
        vq_stats_t st;
        volume_stats(s, v, now, rule == MOUNT_JOB_AWARE, &st);
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
        case MOUNT_JOB_AWARE:
        default:
            /* Request completion gained per second of drive time (Smith's
             * rule for weighted completion time): volumes that finish many
             * requests, or urgent ones, cheaply go first. */
            score = st.benefit / service_time(s, v, drive_volume, head, &st);
            break;
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
