/* The order of reads on one mounted volume, from the current head position.
 * Pure: works on an array of (offset, size) and returns a permutation. */
#ifndef STAGEIN_SCHED_READ_ORDER_H
#define STAGEIN_SCHED_READ_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "daemon/tape/model.h"

typedef enum {
    ORDER_ARRIVAL,   /* as given (FIFO: request order) */
    ORDER_LINEAR,    /* by logical offset, from the head forward, then wrap around */
    ORDER_GREEDY,    /* shortest positioning first under the cost model */
    ORDER_GREEDY_LS, /* greedy, then a bounded or-opt local search */
} order_algo_t;

typedef struct {
    uint64_t offset;
    uint64_t size;
} order_item_t;

typedef struct {
    /* Bound on the local search, in cost evaluations (keeps 100,000 items
     * well under a second); 0 = default. */
    uint64_t max_evals;
} order_limits_t;

/* Writes into perm[0..n) the order in which to read items, starting with the
 * head at logical offset head. Positions come from the profile's estimate
 * (tape_position_estimate); costs from model. O(n log n) for every algo
 * (the local search is bounded). */
int read_order(const tape_profile_t *p, const tape_cost_model_t *model, order_algo_t algo,
               uint64_t head, const order_item_t *items, size_t n,
               const order_limits_t *limits, size_t *perm, si_error_t *err);

/* Total positioning cost of reading items in order perm from head, under model. */
double read_order_cost(const tape_profile_t *p, const tape_cost_model_t *model, uint64_t head,
                       const order_item_t *items, const size_t *perm, size_t n);

#endif
