/* In-volume read order: permutations, hand-checked small cases, and the
 * reference figures of TAPE-MODEL.md (2,000 files on one LTO-9 volume). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tap.h"
#include "daemon/sched/read_order.h"

static uint64_t rs = 7;
static double urand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) / 9007199254740992.0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* n files uniformly placed, non-overlapping, in random (request) order. */
static order_item_t *uniform_items(const tape_profile_t *p, size_t n, double lo, double hi)
{
    order_item_t *it = calloc(n, sizeof(*it));
    uint64_t *st = calloc(n, sizeof(uint64_t));
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        it[i].size = (uint64_t)(lo * exp(urand() * log(hi / lo)));
        total += it[i].size;
    }
    for (size_t i = 0; i < n; i++)
        st[i] = (uint64_t)(urand() * (p->capacity - (double)total));
    qsort(st, n, sizeof(uint64_t), cmp_u64);
    uint64_t before = 0;
    for (size_t i = 0; i < n; i++) {
        it[i].offset = st[i] + before;
        before += it[i].size;
    }
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(urand() * (double)i);
        order_item_t t = it[i - 1];
        it[i - 1] = it[j];
        it[j] = t;
    }
    free(st);
    return it;
}

static bool is_permutation(const size_t *perm, size_t n)
{
    char *seen = calloc(n, 1);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        ok = perm[i] < n && !seen[perm[i]];
        if (ok)
            seen[perm[i]] = 1;
    }
    free(seen);
    return ok;
}

int main(void)
{
    tape_profile_t p;
    tape_profile_builtin("lto9", &p, NULL);
    tape_cost_model_t tru = tape_true_costs(&p), cta = tape_cta_costs(&p);
    double bpw = tape_bytes_per_wrap(&p);

    /* Three files by hand: A mid wrap 0, B a quarter into wrap 0, C at the
     * start of wrap 2 (same band and direction, lpos 0). From BOT: C costs
     * 4.29 + 6.69 = 10.98, B 4.29 + 258.75/17.8 = 18.83, A 33.36: C first.
     * From C: B 10.98 + 14.54 = 25.52 < A 40.05; then A ahead on wrap 0. */
    order_item_t three[3] = {
        {(uint64_t)(bpw / 2), 1000000},
        {(uint64_t)(bpw / 4), 1000000},
        {(uint64_t)ceil(2 * bpw), 1000000},
    };
    size_t perm[4];
    ok(read_order(&p, &tru, ORDER_GREEDY, 0, three, 3, NULL, perm, NULL) == 0, "greedy runs");
    ok(perm[0] == 2 && perm[1] == 1 && perm[2] == 0, "greedy: C, B, A (got %zu %zu %zu)",
       perm[0], perm[1], perm[2]);
    double want = (4.29 + 6.69) +
                  tape_locate_time(&p, three[2].offset + three[2].size, three[1].offset) +
                  tape_locate_time(&p, three[1].offset + three[1].size, three[0].offset);
    is_near(read_order_cost(&p, &tru, 0, three, perm, 3), want, 1e-6,
            "cost of that order = sum of the model's locates");
    read_order(&p, &tru, ORDER_LINEAR, (uint64_t)(bpw / 3), three, 3, NULL, perm, NULL);
    ok(perm[0] == 0 && perm[1] == 2 && perm[2] == 1,
       "linear from a third of wrap 0: A, C ahead, then B on the next pass");
    read_order(&p, &tru, ORDER_ARRIVAL, 0, three, 3, NULL, perm, NULL);
    ok(perm[0] == 0 && perm[1] == 1 && perm[2] == 2, "arrival keeps request order");

    /* Contiguous files: true costs read them back to back for free. */
    order_item_t chain[4] = {{3000, 1000}, {1000, 1000}, {0, 1000}, {2000, 1000}};
    read_order(&p, &tru, ORDER_GREEDY_LS, 0, chain, 4, NULL, perm, NULL);
    is_near(read_order_cost(&p, &tru, 0, chain, perm, 4), 0, 0,
            "a contiguous run from the head costs nothing");

    /* Reference workload (TAPE-MODEL.md): 2,000 files, 1 MB-4 GB. */
    size_t n = 2000;
    order_item_t *it = uniform_items(&p, n, 1e6, 4e9);
    size_t *pm = malloc(n * sizeof(size_t));
    double cost[4];
    const char *names[4] = {"arrival", "linear", "greedy", "greedy+local search"};
    for (int a = 0; a < 4; a++) {
        ok(read_order(&p, &tru, (order_algo_t)a, 0, it, n, NULL, pm, NULL) == 0 &&
           is_permutation(pm, n), "%s: a permutation of 2,000 items", names[a]);
        cost[a] = read_order_cost(&p, &tru, 0, it, pm, n);
        diag("%-20s %8.0f s locating", names[a], cost[a]);
    }
    ok(cost[1] > 20000 && cost[1] < 32000, "linear ~26,300 s (got %.0f)", cost[1]);
    ok(cost[2] < cost[1], "greedy beats linear (%.1f%%)", 100 * (1 - cost[2] / cost[1]));
    ok(cost[3] <= 0.80 * cost[1], "greedy + local search: >= 20%% less than linear (%.1f%%)",
       100 * (1 - cost[3] / cost[1]));
    read_order(&p, &cta, ORDER_GREEDY, 0, it, n, NULL, pm, NULL);
    ok(is_permutation(pm, n), "greedy with CTA's heuristic: a permutation");
    diag("cta-heuristic greedy  %8.0f s (true cost)", read_order_cost(&p, &tru, 0, it, pm, n));
    free(it);
    free(pm);

    /* 100,000 small files: every algorithm stays O(n log n). Time is
     * reported, not asserted. */
    n = 100000;
    it = uniform_items(&p, n, 65536, 1048576);
    pm = malloc(n * sizeof(size_t));
    tru.read_rate = p.rate;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ok(read_order(&p, &tru, ORDER_GREEDY_LS, 0, it, n, NULL, pm, NULL) == 0 &&
       is_permutation(pm, n), "greedy + local search orders 100,000 items");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    diag("100,000 items: %.3f s", (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
    double ls = read_order_cost(&p, &tru, 0, it, pm, n);
    read_order(&p, &tru, ORDER_LINEAR, 0, it, n, NULL, pm, NULL);
    ok(ls <= read_order_cost(&p, &tru, 0, it, pm, n), "never worse than linear on a dense set");
    free(it);
    free(pm);
    return done_testing();
}
