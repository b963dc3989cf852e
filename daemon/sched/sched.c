/* The recall scheduler: policies, requests, object sharing, copy choice and
 * per-volume queues. Volume choice is in volume_choice.c, read order in
 * read_order.c. */
#include "config.h"
#include "daemon/sched/sched.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/sched/internal.h"
#include "common/array.h"

const sched_policy_t sched_policies[] = {
    {"fifo", "volumes in order of first request, files in request order",
     MOUNT_OLDEST, ORDER_ARRIVAL, false, COPY_FIRST},
    {"linear", "dCache-like mount choice, files sorted by tape offset",
     MOUNT_DCACHE, ORDER_LINEAR, false, COPY_FIRST},
    {"edf", "volume of the earliest deadline, then priority and age; files sorted by tape offset",
     MOUNT_EDF, ORDER_LINEAR, false, COPY_FIRST},
    {"cta-sltf", "CTA: queue qualification by bytes/files/age, greedy with CTA's cost heuristic",
     MOUNT_CTA, ORDER_GREEDY, true, COPY_FIRST},
    {"cta-mount", "CTA's mount criteria (bytes/files/age, priority, age), greedy with the "
     "tape model's true costs",
     MOUNT_CTA, ORDER_GREEDY, false, COPY_FIRST},
    {"sltf", "dCache-like mount choice, greedy with the tape model's true costs",
     MOUNT_DCACHE, ORDER_GREEDY, false, COPY_FIRST},
    {SCHED_DEFAULT_POLICY, "request-completion mount choice from planned pass times under "
     "deadline checks, greedy + local search order, late copy binding, priority classes",
     MOUNT_JOB_AWARE, ORDER_GREEDY_LS, false, COPY_LATE},
    {NULL, NULL, 0, 0, false, 0},
};

const sched_policy_t *sched_policy_find(const char *name, si_error_t *err)
{
    char known[256] = "";
    for (const sched_policy_t *p = sched_policies; p->name; p++) {
        if (strcmp(p->name, name) == 0)
            return p;
        snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
                 *known ? ", " : "", p->name);
    }
    si_errprintf(err, "unknown scheduling policy '%s' (known: %s)", name, known);
    return NULL;
}

void sched_options_default(sched_options_t *opt)
{
    memset(opt, 0, sizeof(*opt));
    tape_profile_builtin("lto9", &opt->profile, NULL);
    opt->cta_min_bytes = 500e9;
    opt->cta_min_files = 10000;
    opt->cta_min_age_s = 600;
    opt->dcache_max_wait_s = 3600;
}

/* ---- id maps -------------------------------------------------------------- */

static uint64_t hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static bool idmap_get(const idmap_t *m, uint64_t key, size_t *val)
{
    if (!m->cap)
        return false;
    for (size_t i = hash64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->vals[i] == SIZE_MAX)
            return false;
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return true;
        }
    }
}

static int idmap_put(idmap_t *m, uint64_t key, size_t val)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        idmap_t bigger = {malloc(cap * sizeof(uint64_t)), malloc(cap * sizeof(size_t)), cap, 0};
        if (!bigger.keys || !bigger.vals) {
            free(bigger.keys);
            free(bigger.vals);
            return -1;
        }
        for (size_t i = 0; i < cap; i++)
            bigger.vals[i] = SIZE_MAX;
        for (size_t i = 0; i < m->cap; i++)
            if (m->vals[i] != SIZE_MAX)
                idmap_put(&bigger, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = bigger;
    }
    size_t i = hash64(key) & (m->cap - 1);
    while (m->vals[i] != SIZE_MAX)
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return 0;
}

static void idmap_free(idmap_t *m)
{
    free(m->keys);
    free(m->vals);
}

/* ---- life cycle ------------------------------------------------------------ */

sched_t *sched_new(const sched_policy_t *policy, const sched_options_t *opt,
                   const sched_callbacks_t *cb, si_error_t *err)
{
    if (opt->nvolumes < 1)
        return si_errprintf(err, "scheduler: no volumes"), NULL;
    if (tape_profile_check(&opt->profile, err) < 0)
        return NULL;
    sched_t *s = calloc(1, sizeof(*s));
    if (!s)
        return si_errprintf(err, "scheduler: out of memory"), NULL;
    s->policy = policy;
    s->opt = *opt;
    if (cb)
        s->cb = *cb;
    s->costs = policy->cta_costs ? tape_cta_costs(&opt->profile) : tape_true_costs(&opt->profile);
    s->vq = calloc((size_t)opt->nvolumes, sizeof(vq_t));
    if (!s->vq) {
        free(s);
        return si_errprintf(err, "scheduler: out of memory"), NULL;
    }
    return s;
}

void sched_free(sched_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nobjs; i++)
        free(s->objs[i].why);
    for (int v = 0; v < s->opt.nvolumes; v++) {
        free(s->vq[v].items);
        free(s->vq[v].plan);
    }
    free(s->vq);
    free(s->objs);
    free(s->reqs);
    free(s->waiters);
    idmap_free(&s->obj_ids);
    idmap_free(&s->req_ids);
    free(s);
}

const sched_policy_t *sched_policy(const sched_t *s)
{
    return s->policy;
}

size_t sched_queued(const sched_t *s)
{
    return s->nqueued;
}

size_t sched_failed_objects(const sched_t *s)
{
    return s->failed_objects;
}

size_t sched_open_requests(const sched_t *s)
{
    return s->open_requests;
}

int sched_copy_index(const obj_t *o, int volume)
{
    for (int c = 0; c < o->ncopies; c++)
        if (o->copies[c].volume == volume)
            return c;
    return -1;
}

bool sched_entry_live(const sched_t *s, size_t obj, int volume)
{
    const obj_t *o = &s->objs[obj];
    if (o->state != OBJ_QUEUED)
        return false;
    int c = sched_copy_index(o, volume);
    return c >= 0 && (o->eligible & (1u << c));
}

size_t sched_volume_queued(const sched_t *s, int volume)
{
    const vq_t *q = &s->vq[volume];
    obj_t *objs = s->objs; /* scratch marks only; no state changes */
    size_t n = 0;
    /* An object may sit twice in one queue (re-queued): count it once. */
    for (size_t k = 0; k < q->n; k++) {
        obj_t *o = &objs[q->items[k]];
        if (sched_entry_live(s, q->items[k], volume) && !o->mark) {
            o->mark = 1;
            n++;
        }
    }
    for (size_t k = 0; k < q->n; k++)
        objs[q->items[k]].mark = 0;
    return n;
}

bool sched_volume_has_work(const sched_t *s, int volume)
{
    const vq_t *q = &s->vq[volume];
    for (size_t k = 0; k < q->n; k++)
        if (sched_entry_live(s, q->items[k], volume))
            return true;
    return false;
}

/* ---- queues ----------------------------------------------------------------- */

static int vq_push(vq_t *q, size_t obj)
{
    if (si_array_grow((void **)&q->items, &q->cap, q->n + 1, sizeof(size_t)) < 0)
        return -1;
    q->items[q->n++] = obj;
    q->version++;
    return 0;
}

/* Queues the object on the volumes its copy rule allows (objective: FIRST is
 * the baselines' behaviour; LATE lets whichever mounted pass reaches the
 * object first read it, which saves reads, locates and often whole mounts). */
static int enqueue(sched_t *s, size_t idx)
{
    obj_t *o = &s->objs[idx];
    o->eligible = 0;
    for (int c = 0; c < o->ncopies; c++) {
        if (o->tried & (1u << c))
            continue;
        if (vq_push(&s->vq[o->copies[c].volume], idx) < 0)
            return -1;
        o->eligible |= (uint8_t)(1u << c);
        if (s->policy->copies == COPY_FIRST)
            break;
    }
    return o->eligible ? 0 : -1;
}

static void request_finish_check(sched_t *s, size_t r, double now)
{
    req_t *q = &s->reqs[r];
    if (q->remaining == 0) {
        s->open_requests--;
        if (s->cb.request_done)
            s->cb.request_done(s->cb.arg, q->id, now, q->failed, q->failed ? q->why : NULL);
    }
}

static void object_settle(sched_t *s, size_t idx, double now)
{
    obj_t *o = &s->objs[idx];
    for (long w = o->waiters; w >= 0; w = s->waiters[w].next) {
        req_t *q = &s->reqs[s->waiters[w].req];
        if (o->state == OBJ_FAILED) {
            if (q->failed++ == 0)
                snprintf(q->why, sizeof(q->why), "%s", o->why ? o->why : "recall failed");
        }
        q->remaining--;
        request_finish_check(s, s->waiters[w].req, now);
    }
    o->waiters = -1;
}

static void object_fail(sched_t *s, size_t idx, double now, const char *why)
{
    obj_t *o = &s->objs[idx];
    if (o->state == OBJ_QUEUED)
        s->nqueued--;
    o->state = OBJ_FAILED;
    s->failed_objects++;
    free(o->why);
    o->why = strdup(why);
    object_settle(s, idx, now);
}

/* ---- submissions ------------------------------------------------------------ */

int sched_submit(sched_t *s, double now, const sched_request_t *req, const sched_file_t *files,
                 size_t n, si_error_t *err)
{
    size_t dummy;
    if (idmap_get(&s->req_ids, req->id, &dummy))
        return si_errprintf(err, "request %llu: already submitted", (unsigned long long)req->id);
    for (size_t i = 0; i < n; i++) {
        const sched_file_t *f = &files[i];
        if (f->ncopies < 1 || f->ncopies > SCHED_MAX_COPIES)
            return si_errprintf(err, "request %llu: object %llu has %d copies (1..%d)",
                                (unsigned long long)req->id, (unsigned long long)f->object,
                                f->ncopies, SCHED_MAX_COPIES);
        for (int c = 0; c < f->ncopies; c++)
            if (f->copies[c].volume < 0 || f->copies[c].volume >= s->opt.nvolumes)
                return si_errprintf(err, "request %llu: object %llu: copy %d on volume %d, "
                                    "outside 0..%d", (unsigned long long)req->id,
                                    (unsigned long long)f->object, c + 1,
                                    f->copies[c].volume, s->opt.nvolumes - 1);
    }
    /* Reserve everything first so that nothing can fail half-way. */
    size_t new_objs = 0;
    for (size_t i = 0; i < n; i++)
        if (!idmap_get(&s->obj_ids, files[i].object, &dummy))
            new_objs++;
    if (si_array_grow((void **)&s->reqs, &s->cap_reqs, s->nreqs + 1, sizeof(req_t)) < 0 ||
        si_array_grow((void **)&s->objs, &s->cap_objs, s->nobjs + new_objs, sizeof(obj_t)) < 0 ||
        si_array_grow((void **)&s->waiters, &s->cap_waiters, s->nwaiters + n, sizeof(waiter_t)) < 0 ||
        idmap_put(&s->req_ids, req->id, s->nreqs) < 0)
        return si_errprintf(err, "request %llu: out of memory", (unsigned long long)req->id);

    size_t r = s->nreqs++;
    req_t *q = &s->reqs[r];
    memset(q, 0, sizeof(*q));
    q->id = req->id;
    q->priority = req->priority;
    q->deadline = req->deadline;
    q->arrival = now;
    q->nfiles = n;
    q->remaining = n;
    s->open_requests++;

    for (size_t i = 0; i < n; i++) {
        const sched_file_t *f = &files[i];
        size_t idx;
        if (!idmap_get(&s->obj_ids, f->object, &idx)) {
            idx = s->nobjs++;
            obj_t *o = &s->objs[idx];
            memset(o, 0, sizeof(*o));
            o->id = f->object;
            o->ncopies = (uint8_t)f->ncopies;
            memcpy(o->copies, f->copies, sizeof(o->copies[0]) * (size_t)f->ncopies);
            o->state = OBJ_QUEUED;
            o->priority = req->priority;
            o->seq = s->seq++;
            o->arrival = now;
            o->waiters = -1;
            if (idmap_put(&s->obj_ids, f->object, idx) < 0 || enqueue(s, idx) < 0) {
                o->state = OBJ_FAILED;
                o->why = strdup("scheduler out of memory");
            } else {
                s->nqueued++;
            }
        }
        obj_t *o = &s->objs[idx];
        if (req->priority > o->priority)
            o->priority = req->priority;
        if (o->state == OBJ_DONE) {
            q->remaining--;            /* staged already: shared, not recalled again */
        } else if (o->state == OBJ_FAILED) {
            if (q->failed++ == 0)
                snprintf(q->why, sizeof(q->why), "%s", o->why ? o->why : "recall failed");
            q->remaining--;
        } else {
            waiter_t *w = &s->waiters[s->nwaiters];
            w->req = r;
            w->next = o->waiters;
            o->waiters = (long)s->nwaiters++;
        }
    }
    request_finish_check(s, r, now);
    return 0;
}

/* ---- reads on a mounted volume ---------------------------------------------- */

typedef struct {
    const sched_t *s;
    int volume;
} prio_ctx_t;

static int by_priority_seq(const void *a, const void *b, void *arg)
{
    const sched_t *s = ((const prio_ctx_t *)arg)->s;
    const obj_t *x = &s->objs[*(const size_t *)a], *y = &s->objs[*(const size_t *)b];
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int by_seq(const void *a, const void *b, void *arg)
{
    const sched_t *s = ((const prio_ctx_t *)arg)->s;
    const obj_t *x = &s->objs[*(const size_t *)a], *y = &s->objs[*(const size_t *)b];
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Orders objs[0..n) (live, on volume) from head into the plan. With priority
 * classes (job-aware policy), each class is a pass of its own, highest first
 * (objective: the jobs that matter most complete first); otherwise one pass
 * over all (objective: the shortest pass, which completes them all soonest). */
static int plan_build(sched_t *s, int volume, uint64_t head, size_t *objs, size_t n)
{
    vq_t *q = &s->vq[volume];
    prio_ctx_t ctx = {s, volume};
    bool classes = s->policy->mount == MOUNT_JOB_AWARE;
    if (s->policy->order == ORDER_ARRIVAL || classes)
        qsort_r(objs, n, sizeof(size_t), classes ? by_priority_seq : by_seq, &ctx);
    order_item_t *items = malloc((n + 1) * sizeof(order_item_t));
    size_t *perm = malloc((n + 1) * sizeof(size_t));
    size_t *plan = malloc((n + 1) * sizeof(size_t));
    if (!items || !perm || !plan)
        goto error;
    for (size_t k = 0; k < n; k++) {
        const obj_t *o = &s->objs[objs[k]];
        const sched_copy_t *c = &o->copies[sched_copy_index(o, volume)];
        items[k].offset = c->offset;
        items[k].size = c->size;
    }
    order_limits_t lim = {s->opt.order_max_evals};
    size_t start = 0;
    while (start < n) {
        size_t end = start + 1;
        if (classes)
            while (end < n && s->objs[objs[end]].priority == s->objs[objs[start]].priority)
                end++;
        else
            end = n;
        if (read_order(&s->opt.profile, &s->costs, s->policy->order, head, items + start,
                       end - start, &lim, perm, NULL) < 0)
            goto error;
        for (size_t k = 0; k < end - start; k++)
            plan[start + k] = objs[start + perm[k]];
        const order_item_t *last = &items[start + perm[end - start - 1]];
        head = last->offset + last->size;
        start = end;
    }
    free(q->plan);
    q->plan = plan;
    q->plan_n = n;
    q->plan_pos = 0;
    free(items);
    free(perm);
    return 0;
error:
    free(items);
    free(perm);
    free(plan);
    return -1;
}

/* Position of a live object on the volume, for cheapest insertion. */
static void obj_span(const sched_t *s, size_t obj, int volume, uint64_t *start, uint64_t *end)
{
    const obj_t *o = &s->objs[obj];
    const sched_copy_t *c = &o->copies[sched_copy_index(o, volume)];
    *start = c->offset;
    *end = c->offset + c->size;
}

static double edge_cost(const sched_t *s, uint64_t from, uint64_t to)
{
    const tape_profile_t *p = &s->opt.profile;
    return tape_cost(&s->costs, tape_position_estimate(p, from), from,
                     tape_position_estimate(p, to), to);
}

/* Items arriving for a mounted volume join its current pass: a few are
 * inserted where they cost least (objective: they ride along with the pass
 * instead of waiting for the next mount), many make the rest of the pass be
 * planned again from the head. */
static int plan_merge(sched_t *s, int volume, uint64_t head)
{
    vq_t *q = &s->vq[volume];
    size_t nfresh = 0;
    for (size_t k = q->merged; k < q->n; k++)
        if (sched_entry_live(s, q->items[k], volume))
            nfresh++;
    size_t remaining = 0;
    for (size_t k = q->plan_pos; k < q->plan_n; k++)
        if (sched_entry_live(s, q->plan[k], volume))
            q->plan[q->plan_pos + remaining++] = q->plan[k];
    q->plan_n = q->plan_pos + remaining;
    if (nfresh == 0) {
        q->merged = q->n;
        return 0;
    }
    if (s->policy->order == ORDER_GREEDY_LS && nfresh <= 16) {
        if (si_array_grow((void **)&q->plan, &(size_t){q->plan_n}, q->plan_n + nfresh + 1,
                 sizeof(size_t)) < 0)
            return -1;
        for (size_t k = q->merged; k < q->n; k++) {
            size_t o = q->items[k];
            if (!sched_entry_live(s, o, volume))
                continue;
            uint64_t os, oe;
            obj_span(s, o, volume, &os, &oe);
            /* Cheapest slot among [plan_pos .. plan_n]: before plan[i]. */
            double best = INFINITY;
            size_t at = q->plan_n;
            uint64_t prev_end = head;
            for (size_t i = q->plan_pos; i <= q->plan_n; i++) {
                uint64_t ns = 0, ne = 0;
                double add;
                if (i < q->plan_n) {
                    obj_span(s, q->plan[i], volume, &ns, &ne);
                    add = edge_cost(s, prev_end, os) + edge_cost(s, oe, ns) -
                          edge_cost(s, prev_end, ns);
                } else {
                    add = edge_cost(s, prev_end, os);
                }
                if (add < best) {
                    best = add;
                    at = i;
                }
                prev_end = ne;
            }
            memmove(&q->plan[at + 1], &q->plan[at], (q->plan_n - at) * sizeof(size_t));
            q->plan[at] = o;
            q->plan_n++;
        }
        q->merged = q->n;
        return 0;
    }
    if (s->policy->order == ORDER_ARRIVAL) {
        /* FIFO: request order, so new arrivals go last. */
        if (si_array_grow((void **)&q->plan, &(size_t){q->plan_n}, q->plan_n + nfresh + 1,
                 sizeof(size_t)) < 0)
            return -1;
        for (size_t k = q->merged; k < q->n; k++)
            if (sched_entry_live(s, q->items[k], volume))
                q->plan[q->plan_n++] = q->items[k];
        q->merged = q->n;
        return 0;
    }
    size_t *all = malloc((remaining + nfresh + 1) * sizeof(size_t));
    if (!all)
        return -1;
    memcpy(all, q->plan + q->plan_pos, remaining * sizeof(size_t));
    size_t m = remaining;
    for (size_t k = q->merged; k < q->n; k++)
        if (sched_entry_live(s, q->items[k], volume))
            all[m++] = q->items[k];
    int rc = plan_build(s, volume, head, all, m);
    free(all);
    if (rc == 0)
        q->merged = q->n;
    return rc;
}

/* Drops stale entries once they outnumber live ones. */
static void vq_compact(sched_t *s, int volume)
{
    vq_t *q = &s->vq[volume];
    size_t w = 0, wm = 0;
    for (size_t k = 0; k < q->n; k++) {
        if (!sched_entry_live(s, q->items[k], volume))
            continue;
        if (k < q->merged)
            wm++;
        q->items[w++] = q->items[k];
    }
    q->n = w;
    q->merged = wm;
}

/* Positioning plus reading along plan[0..n) from head (the pass time the
 * drive would take, from the scheduler's position estimates). */
static double plan_time(const sched_t *s, int volume, uint64_t head, const size_t *plan, size_t n)
{
    const tape_profile_t *p = &s->opt.profile;
    tape_cost_model_t drive = tape_true_costs(p);
    tape_pos_t hp = tape_position_estimate(p, head);
    double t = 0;
    for (size_t k = 0; k < n; k++) {
        uint64_t start, end;
        if (!sched_entry_live(s, plan[k], volume))
            continue; /* read elsewhere, or being read */
        obj_span(s, plan[k], volume, &start, &end);
        t += tape_cost(&drive, hp, head, tape_position_estimate(p, start), start) +
             tape_read_time(p, end - start);
        head = end;
        hp = tape_position_estimate(p, head);
    }
    return t;
}

/* Plans a pass over the volume's live queue from head, unless the prepared
 * plan still fits (same files, bytes and head). */
static int plan_prepare(sched_t *s, int volume, uint64_t head)
{
    vq_t *q = &s->vq[volume];
    vq_compact(s, volume);
    /* Dedupe (an object may have been queued twice on one volume). */
    size_t *objs = malloc((q->n + 1) * sizeof(size_t));
    if (!objs)
        return -1;
    size_t m = 0;
    uint64_t bytes = 0;
    for (size_t k = 0; k < q->n; k++) {
        obj_t *o = &s->objs[q->items[k]];
        if (sched_entry_live(s, q->items[k], volume) && !o->mark) {
            o->mark = 1;
            objs[m++] = q->items[k];
            bytes += o->copies[sched_copy_index(o, volume)].size;
        }
    }
    for (size_t k = 0; k < m; k++)
        s->objs[objs[k]].mark = 0;
    int rc = 0;
    bool same_start = q->prepared && q->prep_version == q->version && q->prep_head == head;
    if (same_start && (q->prep_files != m || q->prep_bytes != bytes)) {
        /* Only removals (copies read elsewhere, failures): the plan without
         * them is still the plan; its time is costed again, not planned. */
        size_t w = 0;
        for (size_t k = 0; k < q->plan_n; k++)
            if (sched_entry_live(s, q->plan[k], volume))
                q->plan[w++] = q->plan[k];
        q->plan_n = w;
        q->prep_files = m;
        q->prep_bytes = bytes;
        q->prep_pass_s = plan_time(s, volume, head, q->plan, q->plan_n);
    } else if (!same_start) {
        rc = plan_build(s, volume, head, objs, m);
        q->prepared = rc == 0;
        q->prep_version = q->version;
        q->prep_files = m;
        q->prep_bytes = bytes;
        q->prep_head = head;
        q->prep_pass_s = rc == 0 ? plan_time(s, volume, head, q->plan, q->plan_n) : 0;
    }
    free(objs);
    return rc;
}

double sched_volume_pass_time(sched_t *s, int volume, uint64_t head)
{
    vq_t *q = &s->vq[volume];
    if (q->planned) /* being read: what is left of the pass */
        return plan_time(s, volume, head, q->plan + q->plan_pos, q->plan_n - q->plan_pos);
    if (plan_prepare(s, volume, head) < 0)
        return -1;
    return q->prep_pass_s;
}

/* The mounted volume's pass, planned from head at its first read, with
 * the items that arrived since merged in. */
static int pass_update(sched_t *s, int volume, uint64_t head)
{
    vq_t *q = &s->vq[volume];
    if (!q->planned) {
        if (plan_prepare(s, volume, head) < 0)
            return -1;
        q->planned = true;
        q->prepared = false;
        q->merged = q->n;
    } else if (q->merged < q->n) {
        if (plan_merge(s, volume, head) < 0)
            return -1;
    }
    return 0;
}

size_t sched_volume_plan(sched_t *s, int volume, uint64_t head, sched_pending_t *out, size_t max)
{
    if (pass_update(s, volume, head) < 0)
        return 0;
    vq_t *q = &s->vq[volume];
    size_t n = 0;
    for (size_t k = q->plan_pos; k < q->plan_n && n < max; k++) {
        size_t idx = q->plan[k];
        if (!sched_entry_live(s, idx, volume))
            continue;
        const obj_t *o = &s->objs[idx];
        const sched_copy_t *c = &o->copies[sched_copy_index(o, volume)];
        out[n++] = (sched_pending_t){o->id, c->offset, c->size};
    }
    return n;
}

size_t sched_volume_reorder(sched_t *s, int volume, const uint64_t *ids, size_t n)
{
    vq_t *q = &s->vq[volume];
    size_t left = q->plan_n - q->plan_pos;
    size_t *order = malloc((left + 1) * sizeof(size_t));
    if (!order)
        return 0;
    /* mark 1: in the rest of the pass; 2: placed by ids */
    for (size_t k = q->plan_pos; k < q->plan_n; k++)
        s->objs[q->plan[k]].mark = 1;
    size_t m = 0, placed = 0;
    for (size_t i = 0; i < n; i++) {
        size_t idx;
        if (idmap_get(&s->obj_ids, ids[i], &idx) && s->objs[idx].mark == 1) {
            s->objs[idx].mark = 2;
            order[m++] = idx;
        }
    }
    placed = m;
    for (size_t k = q->plan_pos; k < q->plan_n; k++)
        if (s->objs[q->plan[k]].mark == 1) {
            s->objs[q->plan[k]].mark = 2;
            order[m++] = q->plan[k];
        }
    for (size_t k = 0; k < m; k++)
        s->objs[order[k]].mark = 0;
    memcpy(q->plan + q->plan_pos, order, m * sizeof(size_t));
    q->plan_n = q->plan_pos + m;
    free(order);
    return placed;
}

double sched_order_locate_time(const sched_t *s, uint64_t head, const sched_pending_t *reads,
                               size_t n)
{
    const tape_profile_t *p = &s->opt.profile;
    tape_cost_model_t drive = tape_true_costs(p);
    double t = 0;
    for (size_t k = 0; k < n; k++) {
        t += tape_cost(&drive, tape_position_estimate(p, head), head,
                       tape_position_estimate(p, reads[k].offset), reads[k].offset);
        head = reads[k].offset + reads[k].size;
    }
    return t;
}

int sched_next_read(sched_t *s, int volume, uint64_t head, double now, sched_read_t *out)
{
    (void)now;
    vq_t *q = &s->vq[volume];
    if (pass_update(s, volume, head) < 0)
        return 0;
    while (q->plan_pos < q->plan_n) {
        size_t idx = q->plan[q->plan_pos++];
        if (!sched_entry_live(s, idx, volume))
            continue;
        obj_t *o = &s->objs[idx];
        const sched_copy_t *c = &o->copies[sched_copy_index(o, volume)];
        o->state = OBJ_READING;
        s->nqueued--;
        out->object = idx;
        out->object_id = o->id;
        out->volume = volume;
        out->offset = c->offset;
        out->size = c->size;
        return 1;
    }
    /* Pass finished: the queue is empty (stale entries only). */
    q->n = 0;
    q->merged = 0;
    q->plan_n = q->plan_pos = 0;
    return 0;
}

void sched_volume_released(sched_t *s, int volume)
{
    vq_t *q = &s->vq[volume];
    q->planned = false;
    q->prepared = false;
    q->plan_n = q->plan_pos = 0;
    q->merged = 0;
}

void sched_read_done(sched_t *s, const sched_read_t *r, double now)
{
    obj_t *o = &s->objs[r->object];
    o->state = OBJ_DONE;
    object_settle(s, r->object, now);
}

int sched_read_failed(sched_t *s, const sched_read_t *r, double now, const char *why)
{
    obj_t *o = &s->objs[r->object];
    int c = sched_copy_index(o, r->volume);
    if (c >= 0)
        o->tried |= (uint8_t)(1u << c);
    o->state = OBJ_QUEUED;
    s->nqueued++;
    /* Another copy, on another volume (objective: the request still completes). */
    if (enqueue(s, r->object) == 0)
        return 1;
    object_fail(s, r->object, now, why);
    return 0;
}

void sched_read_retry(sched_t *s, const sched_read_t *r)
{
    obj_t *o = &s->objs[r->object];
    o->state = OBJ_QUEUED;
    s->nqueued++;
    if (vq_push(&s->vq[r->volume], r->object) < 0)
        object_fail(s, r->object, 0, "scheduler out of memory");
}

void sched_volume_lost(sched_t *s, int volume, double now, const char *why)
{
    vq_t *q = &s->vq[volume];
    size_t n = q->n;
    size_t *items = q->items;
    q->items = NULL;
    q->n = q->cap = 0;
    sched_volume_released(s, volume);
    for (size_t k = 0; k < n; k++) {
        size_t idx = items[k];
        if (!sched_entry_live(s, idx, volume))
            continue;
        obj_t *o = &s->objs[idx];
        o->tried |= (uint8_t)(1u << sched_copy_index(o, volume));
        o->eligible &= (uint8_t)~(1u << sched_copy_index(o, volume));
        if (o->eligible)
            continue; /* still queued on another copy's volume */
        if (enqueue(s, idx) < 0)
            object_fail(s, idx, now, why);
    }
    free(items);
}
