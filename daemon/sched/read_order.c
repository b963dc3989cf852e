/* In-volume read order. Objective served: the time to finish a pass over the
 * queued items of one mounted volume, i.e. the sum of positioning costs
 * (reads take size/R whatever the order). A request whose files are on this
 * volume cannot complete before its last file is read, so a shorter pass
 * completes every request waiting on the volume earlier.
 *
 * The greedy and the local search never compare all pairs: items are kept in
 * arrays sorted by (wrap, lpos), (band x direction, lpos) and offset, with
 * union-find "next alive" links for deletions, so each greedy step looks at a
 * few nearest candidates per group (O(n log n) overall). */
#include "config.h"
#include "daemon/sched/read_order.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NONE ((size_t)-1)

/* ---- a sorted index of items, split in segments, with deletions -------- */

typedef struct {
    size_t m;
    size_t *ids;      /* item ids sorted by (segment, key, id) */
    double *key;      /* key of ids[k] */
    size_t *segbeg;   /* segment s is [segbeg[s], segbeg[s + 1]) */
    size_t nseg;
    size_t *right;    /* union-find: next alive position >= k; right[m] = m */
    size_t *left;     /* union-find, shifted by one: left[k + 1] -> alive <= k */
    size_t *where;    /* position of item id in ids */
} sidx_t;

typedef struct {
    const int *seg;
    const double *key;
} sort_ctx_t;

static int by_seg_key(const void *a, const void *b, void *arg)
{
    const sort_ctx_t *c = arg;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (c->seg[x] != c->seg[y])
        return c->seg[x] < c->seg[y] ? -1 : 1;
    if (c->key[x] != c->key[y])
        return c->key[x] < c->key[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void sidx_free(sidx_t *s)
{
    free(s->ids);
    free(s->key);
    free(s->segbeg);
    free(s->right);
    free(s->left);
    free(s->where);
    memset(s, 0, sizeof(*s));
}

/* seg[i] in [0, nseg), key[i]: the sort keys of item i. */
static int sidx_build(sidx_t *s, size_t n, const int *seg, const double *key, size_t nseg,
                      bool deletable)
{
    memset(s, 0, sizeof(*s));
    s->m = n;
    s->nseg = nseg;
    s->ids = malloc((n + 1) * sizeof(size_t));
    s->key = malloc((n + 1) * sizeof(double));
    s->segbeg = calloc(nseg + 1, sizeof(size_t));
    if (!s->ids || !s->key || !s->segbeg)
        goto error;
    for (size_t i = 0; i < n; i++)
        s->ids[i] = i;
    sort_ctx_t ctx = {seg, key};
    qsort_r(s->ids, n, sizeof(size_t), by_seg_key, &ctx);
    for (size_t k = 0; k < n; k++) {
        s->key[k] = key[s->ids[k]];
        s->segbeg[seg[s->ids[k]] + 1]++;
    }
    for (size_t g = 0; g < nseg; g++)
        s->segbeg[g + 1] += s->segbeg[g];
    if (deletable) {
        s->right = malloc((n + 1) * sizeof(size_t));
        s->left = malloc((n + 1) * sizeof(size_t));
        s->where = malloc((n + 1) * sizeof(size_t));
        if (!s->right || !s->left || !s->where)
            goto error;
        for (size_t k = 0; k <= n; k++) {
            s->right[k] = k;
            s->left[k] = k;
        }
        for (size_t k = 0; k < n; k++)
            s->where[s->ids[k]] = k;
    }
    return 0;
error:
    sidx_free(s);
    return -1;
}

static size_t find_right(sidx_t *s, size_t k)
{
    while (s->right[k] != k) {
        s->right[k] = s->right[s->right[k]];
        k = s->right[k];
    }
    return k;
}

/* Alive position <= k, or NONE. */
static size_t find_left(sidx_t *s, size_t k)
{
    size_t i = k + 1;
    while (s->left[i] != i) {
        s->left[i] = s->left[s->left[i]];
        i = s->left[i];
    }
    return i == 0 ? NONE : i - 1;
}

static void sidx_delete(sidx_t *s, size_t id)
{
    size_t k = s->where[id];
    s->right[k] = k + 1;
    s->left[k + 1] = k;
}

/* First position in [b, e) whose key >= x. */
static size_t lower_bound(const sidx_t *s, size_t b, size_t e, double x)
{
    while (b < e) {
        size_t mid = b + (e - b) / 2;
        if (s->key[mid] < x)
            b = mid + 1;
        else
            e = mid;
    }
    return b;
}

/* ---- geometry and costs -------------------------------------------------- */

typedef struct {
    const tape_profile_t *p;
    const tape_cost_model_t *m;
    size_t n;
    tape_pos_t *s, *e;      /* start and end positions (estimates) */
    uint64_t *soff, *eoff;
    tape_pos_t head_pos;
    uint64_t head_off;
    int ngroups;            /* bands x 2 directions */
} geo_t;

static int group_of(tape_pos_t pos)
{
    return pos.band * 2 + (pos.wrap & 1);
}

/* pos[0..n) indexed by wrap and by band x direction group, each by
 * longitudinal position; seg and key: scratch of n entries. */
static int index_wraps_and_groups(const geo_t *g, const tape_pos_t *pos, size_t n, int *seg,
                                  double *key, bool deletable, sidx_t *by_wrap,
                                  sidx_t *by_group)
{
    for (size_t i = 0; i < n; i++) {
        seg[i] = pos[i].wrap;
        key[i] = pos[i].lpos;
    }
    if (sidx_build(by_wrap, n, seg, key, (size_t)g->p->wraps, deletable) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        seg[i] = group_of(pos[i]);
    return sidx_build(by_group, n, seg, key, (size_t)g->ngroups, deletable);
}

static void geo_free(geo_t *g)
{
    free(g->s);
    free(g->e);
    free(g->soff);
    free(g->eoff);
}

static int geo_build(geo_t *g, const tape_profile_t *p, const tape_cost_model_t *m,
                     uint64_t head, const order_item_t *items, size_t n)
{
    memset(g, 0, sizeof(*g));
    g->p = p;
    g->m = m;
    g->n = n;
    g->ngroups = p->bands * 2;
    g->s = malloc((n + 1) * sizeof(tape_pos_t));
    g->e = malloc((n + 1) * sizeof(tape_pos_t));
    g->soff = malloc((n + 1) * sizeof(uint64_t));
    g->eoff = malloc((n + 1) * sizeof(uint64_t));
    if (!g->s || !g->e || !g->soff || !g->eoff) {
        geo_free(g);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        g->soff[i] = items[i].offset;
        g->eoff[i] = items[i].offset + items[i].size;
        g->s[i] = tape_position_estimate(p, g->soff[i]);
        g->e[i] = tape_position_estimate(p, g->eoff[i]);
    }
    /* Index n stands for the head: its "end" is where the head is. */
    g->head_off = head;
    g->head_pos = tape_position_estimate(p, head);
    g->e[n] = g->head_pos;
    g->eoff[n] = head;
    return 0;
}

/* Cost of reading b right after a (a == n: the head); b == NONE costs 0. */
static double trans(const geo_t *g, size_t a, size_t b)
{
    if (b == NONE)
        return 0;
    return tape_cost(g->m, g->e[a], g->eoff[a], g->s[b], g->soff[b]);
}

/* ---- greedy ------------------------------------------------------------- */

typedef struct {
    geo_t *g;
    sidx_t by_wrap, by_group, by_offset;
} greedy_t;

typedef struct {
    tape_pos_t hp;
    uint64_t hoff;
    double best;
    size_t bi;
} pick_t;

static void consider(const greedy_t *gr, pick_t *pk, size_t i)
{
    const geo_t *g = gr->g;
    double c = tape_cost(g->m, pk->hp, pk->hoff, g->s[i], g->soff[i]);
    if (c < pk->best || (c == pk->best && i < pk->bi)) {
        pk->best = c;
        pk->bi = i;
    }
}

/* Nearest alive items of a segment on each side of x (and across the
 * landing-zone boundary when the model has one). skip_wrap: items on that
 * wrap are passed over (they are costed by the own-wrap query); lb_const is a
 * lower bound of the cost of any item of the segment beyond distance. */
static void scan_segment(greedy_t *gr, sidx_t *s, size_t seg, double x, pick_t *pk,
                         int skip_wrap, double lb_const)
{
    const geo_t *g = gr->g;
    size_t b = s->segbeg[seg], e = s->segbeg[seg + 1];
    if (b == e)
        return;
    double half = g->m->length_m / 2;
    double from[3] = {x, x, NAN};
    int dirs[3] = {+1, -1, 0};
    int nq = 2;
    if (g->m->landing != 0) {
        from[2] = half;
        dirs[2] = x < half ? +1 : -1;
        nq = 3;
    }
    for (int q = 0; q < nq; q++) {
        size_t k;
        if (dirs[q] > 0) {
            k = find_right(s, lower_bound(s, b, e, from[q]));
            if (k >= e)
                continue;
        } else {
            size_t lb = lower_bound(s, b, e, from[q]);
            if (lb == b)
                continue;
            k = find_left(s, lb - 1);
            if (k == NONE || k < b)
                continue;
        }
        for (;;) {
            size_t i = s->ids[k];
            if (g->s[i].wrap != skip_wrap) {
                consider(gr, pk, i);
                break;
            }
            if (lb_const + fabs(s->key[k] - x) * g->m->per_m >= pk->best)
                break;
            if (dirs[q] > 0) {
                k = find_right(s, k + 1);
                if (k >= e)
                    break;
            } else {
                if (k == b)
                    break;
                k = find_left(s, k - 1);
                if (k == NONE || k < b)
                    break;
            }
        }
    }
}

static size_t greedy_pick(greedy_t *gr, tape_pos_t hp, uint64_t hoff)
{
    const geo_t *g = gr->g;
    const tape_cost_model_t *m = g->m;
    pick_t pk = {hp, hoff, INFINITY, NONE};
    double lz_min = m->landing < 0 ? m->landing : 0;

    /* Contiguous or read-through: the next item by offset. */
    if (m->zero_if_contiguous || m->read_rate > 0) {
        sidx_t *o = &gr->by_offset;
        size_t k = find_right(o, lower_bound(o, 0, o->m, (double)hoff));
        if (k < o->m)
            consider(gr, &pk, o->ids[k]);
    }
    /* The head's own wrap, both sides. */
    scan_segment(gr, &gr->by_wrap, (size_t)hp.wrap, hp.lpos, &pk, -1, 0);
    /* Every band x direction group, other wraps only. */
    for (int grp = 0; grp < g->ngroups; grp++) {
        int band = grp / 2, parity = grp % 2;
        double cg = m->base + m->wrap + (band != hp.band ? m->band : 0) +
                    (parity != (hp.wrap & 1) ? m->dir : 0) + lz_min;
        if (cg >= pk.best)
            continue;
        scan_segment(gr, &gr->by_group, (size_t)grp, hp.lpos, &pk, hp.wrap, cg);
    }
    return pk.bi;
}

static int order_greedy(geo_t *g, size_t *perm)
{
    size_t n = g->n;
    greedy_t gr = {.g = g};
    int *seg = calloc(n + 1, sizeof(int));
    double *key = calloc(n + 1, sizeof(double));
    int rc = -1;
    if (!seg || !key)
        goto out;
    if (index_wraps_and_groups(g, g->s, n, seg, key, true, &gr.by_wrap, &gr.by_group) < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        seg[i] = 0;
        key[i] = (double)g->soff[i];
    }
    if (sidx_build(&gr.by_offset, n, seg, key, 1, true) < 0)
        goto out;

    tape_pos_t hp = g->head_pos;
    uint64_t hoff = g->head_off;
    for (size_t step = 0; step < n; step++) {
        size_t i = greedy_pick(&gr, hp, hoff);
        if (i == NONE)
            goto out; /* cannot happen while items remain */
        perm[step] = i;
        sidx_delete(&gr.by_wrap, i);
        sidx_delete(&gr.by_group, i);
        sidx_delete(&gr.by_offset, i);
        hp = g->e[i];
        hoff = g->eoff[i];
    }
    rc = 0;
out:
    sidx_free(&gr.by_wrap);
    sidx_free(&gr.by_group);
    sidx_free(&gr.by_offset);
    free(seg);
    free(key);
    return rc;
}

/* ---- local search (or-opt) ---------------------------------------------- */

#define LS_NEIGHBOURS 4   /* per side, per searched segment */
#define LS_MAX_SEGMENT 3  /* moves segments of 1..3 consecutive reads */
#define LS_DEFAULT_EVALS 3000000ULL

typedef struct {
    geo_t *g;
    size_t *next, *prev;  /* tour as a linked list; node n is the head */
    sidx_t end_wrap, end_group, start_wrap, start_group;
    uint64_t evals;
} ls_t;

static double ls_cost(ls_t *ls, size_t a, size_t b)
{
    ls->evals++;
    return trans(ls->g, a, b);
}

/* Up to LS_NEIGHBOURS items each side of x in segment seg of s. */
static size_t near_items(const sidx_t *s, size_t seg, double x, size_t *out, size_t nout)
{
    if (seg >= s->nseg)
        return nout;
    size_t b = s->segbeg[seg], e = s->segbeg[seg + 1];
    size_t k = lower_bound(s, b, e, x);
    for (size_t d = 0; d < LS_NEIGHBOURS && k + d < e; d++)
        out[nout++] = s->ids[k + d];
    for (size_t d = 1; d <= LS_NEIGHBOURS && k >= b + d; d++)
        out[nout++] = s->ids[k - d];
    return nout;
}

static bool in_segment(const ls_t *ls, size_t a, size_t len, size_t x)
{
    for (size_t i = 0, y = a; i < len && y != NONE; i++, y = ls->next[y])
        if (y == x)
            return true;
    return false;
}

/* Tries to move the segment of len reads starting at a elsewhere; applies
 * the first improving move. */
static bool ls_try(ls_t *ls, size_t a, size_t len)
{
    geo_t *g = ls->g;
    size_t b = a;
    for (size_t i = 1; i < len; i++) {
        b = ls->next[b];
        if (b == NONE)
            return false;
    }
    size_t p = ls->prev[a], nx = ls->next[b];
    double gain = ls_cost(ls, p, a) + ls_cost(ls, b, nx) - ls_cost(ls, p, nx);
    if (gain <= 1e-9)
        return false;

    size_t cand[4 * 3 * 2 * LS_NEIGHBOURS + 1];
    size_t nc = 0;
    int opp = group_of(g->s[a]) ^ 1;
    /* Predecessors: reads ending near a's start. */
    nc = near_items(&ls->end_wrap, (size_t)g->s[a].wrap, g->s[a].lpos, cand, nc);
    nc = near_items(&ls->end_group, (size_t)group_of(g->s[a]), g->s[a].lpos, cand, nc);
    nc = near_items(&ls->end_group, (size_t)opp, g->s[a].lpos, cand, nc);
    size_t npred = nc;
    /* Successors: reads starting near b's end (inserted before them). */
    int oppb = group_of(g->e[b]) ^ 1;
    nc = near_items(&ls->start_wrap, (size_t)g->e[b].wrap, g->e[b].lpos, cand, nc);
    nc = near_items(&ls->start_group, (size_t)group_of(g->e[b]), g->e[b].lpos, cand, nc);
    nc = near_items(&ls->start_group, (size_t)oppb, g->e[b].lpos, cand, nc);
    cand[nc++] = g->n; /* first, right after the head */

    for (size_t c = 0; c < nc; c++) {
        size_t j = cand[c];
        if (c >= npred && c + 1 < nc) {
            j = ls->prev[j]; /* insert before the successor candidate */
            if (j == NONE)
                continue;
        }
        if (j == p || in_segment(ls, a, len, j))
            continue;
        size_t jn = ls->next[j];
        double add = ls_cost(ls, j, a) + ls_cost(ls, b, jn) - ls_cost(ls, j, jn);
        if (add < gain - 1e-9) {
            /* Unlink a..b, relink after j. */
            ls->next[p] = nx;
            if (nx != NONE)
                ls->prev[nx] = p;
            ls->next[j] = a;
            ls->prev[a] = j;
            ls->next[b] = jn;
            if (jn != NONE)
                ls->prev[jn] = b;
            return true;
        }
    }
    return false;
}

static int order_local_search(geo_t *g, size_t *perm, uint64_t max_evals)
{
    size_t n = g->n;
    ls_t ls = {.g = g};
    int *seg = calloc(n + 1, sizeof(int));
    double *key = calloc(n + 1, sizeof(double));
    ls.next = malloc((n + 1) * sizeof(size_t));
    ls.prev = malloc((n + 1) * sizeof(size_t));
    int rc = -1;
    if (!seg || !key || !ls.next || !ls.prev)
        goto out;
    if (index_wraps_and_groups(g, g->e, n, seg, key, false, &ls.end_wrap, &ls.end_group) < 0 ||
        index_wraps_and_groups(g, g->s, n, seg, key, false, &ls.start_wrap, &ls.start_group) < 0)
        goto out;

    /* Tour: head, perm[0], perm[1], ... */
    size_t last = n;
    ls.prev[n] = NONE;
    for (size_t k = 0; k < n; k++) {
        ls.next[last] = perm[k];
        ls.prev[perm[k]] = last;
        last = perm[k];
    }
    ls.next[last] = NONE;

    bool improved = true;
    while (improved && ls.evals < max_evals) {
        improved = false;
        for (size_t a = 0; a < n && ls.evals < max_evals; a++)
            for (size_t len = 1; len <= LS_MAX_SEGMENT; len++)
                if (ls_try(&ls, a, len)) {
                    improved = true;
                    break;
                }
    }
    size_t k = 0;
    for (size_t x = ls.next[n]; x != NONE; x = ls.next[x])
        perm[k++] = x;
    rc = k == n ? 0 : -1;
out:
    sidx_free(&ls.end_wrap);
    sidx_free(&ls.end_group);
    sidx_free(&ls.start_wrap);
    sidx_free(&ls.start_group);
    free(ls.next);
    free(ls.prev);
    free(seg);
    free(key);
    return rc;
}

/* ---- entry points ---------------------------------------------------------- */

typedef struct {
    const order_item_t *items;
    uint64_t head;
} linear_ctx_t;

static int by_linear(const void *a, const void *b, void *arg)
{
    const linear_ctx_t *c = arg;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    uint64_t ox = c->items[x].offset, oy = c->items[y].offset;
    /* Behind the head: after everything ahead (the next pass). */
    bool bx = ox < c->head, by = oy < c->head;
    if (bx != by)
        return bx ? 1 : -1;
    if (ox != oy)
        return ox < oy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Greedy + local search. Greedy is myopic (on dense volumes it picks off the
 * ends of other wraps and leaves step-backs behind), so the local search
 * starts from several orders: greedy under the model, greedy under CTA's
 * heuristic (different myopia) and linear; the best result wins. Large sets
 * get one start, the cheapest, to stay within the time bound. */
#define LS_MULTISTART_MAX 20000

static int order_improve(geo_t *g, const order_item_t *items, const order_limits_t *limits,
                         size_t *perm)
{
    size_t n = g->n;
    uint64_t budget = limits && limits->max_evals ? limits->max_evals : LS_DEFAULT_EVALS;
    size_t *starts[3] = {perm, malloc(n * sizeof(size_t)), malloc(n * sizeof(size_t))};
    int rc = -1;
    if (!starts[1] || !starts[2])
        goto out;
    for (size_t i = 0; i < n; i++)
        starts[1][i] = i;
    linear_ctx_t ctx = {items, g->head_off};
    qsort_r(starts[1], n, sizeof(size_t), by_linear, &ctx);
    const tape_cost_model_t *model = g->m;
    tape_cost_model_t cta = tape_cta_costs(g->p);
    int nstarts = n > LS_MULTISTART_MAX ? 2 : 3;
    if (nstarts == 3) {
        g->m = &cta;
        rc = order_greedy(g, starts[2]);
        g->m = model;
        if (rc < 0)
            goto out;
    }
    rc = 0;
    double cost[3];
    for (int k = 0; k < nstarts; k++)
        cost[k] = read_order_cost(g->p, model, g->head_off, items, starts[k], n);
    int best = 0;
    if (n > LS_MULTISTART_MAX) {
        best = cost[1] < cost[0] ? 1 : 0;
        rc = order_local_search(g, starts[best], budget);
    } else {
        for (int k = 0; k < 3 && rc == 0; k++) {
            rc = order_local_search(g, starts[k], budget / 3);
            cost[k] = read_order_cost(g->p, model, g->head_off, items, starts[k], n);
            if (cost[k] < cost[best])
                best = k;
        }
    }
    if (rc == 0 && best != 0)
        memcpy(perm, starts[best], n * sizeof(size_t));
out:
    free(starts[1]);
    free(starts[2]);
    return rc;
}

int read_order(const tape_profile_t *p, const tape_cost_model_t *model, order_algo_t algo,
               uint64_t head, const order_item_t *items, size_t n,
               const order_limits_t *limits, size_t *perm, si_error_t *err)
{
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    if (n < 2 || algo == ORDER_ARRIVAL)
        return 0;
    if (algo == ORDER_LINEAR) {
        linear_ctx_t ctx = {items, head};
        qsort_r(perm, n, sizeof(size_t), by_linear, &ctx);
        return 0;
    }
    geo_t g;
    if (geo_build(&g, p, model, head, items, n) < 0)
        return si_errprintf(err, "read order: out of memory for %zu items", n);
    int rc = order_greedy(&g, perm);
    if (rc == 0 && algo == ORDER_GREEDY_LS)
        rc = order_improve(&g, items, limits, perm);
    geo_free(&g);
    if (rc < 0)
        return si_errprintf(err, "read order: out of memory for %zu items", n);
    return 0;
}

double read_order_cost(const tape_profile_t *p, const tape_cost_model_t *model, uint64_t head,
                       const order_item_t *items, const size_t *perm, size_t n)
{
    double total = 0;
    tape_pos_t hp = tape_position_estimate(p, head);
    uint64_t hoff = head;
    for (size_t k = 0; k < n; k++) {
        const order_item_t *it = &items[perm[k]];
        tape_pos_t sp = tape_position_estimate(p, it->offset);
        total += tape_cost(model, hp, hoff, sp, it->offset);
        hoff = it->offset + it->size;
        hp = tape_position_estimate(p, hoff);
    }
    return total;
}
