/* Recall scheduler benchmark: every workload under every policy on the
 * virtual clock, each standard workload with several seeds; one table of
 * runs and one of the default's worst ratios across seeds (or one JSON
 * object with --json).
 *   recall [--quick] [--json] [--seeds N] [--workload FILE|W1..W9|W6X]... [--policy NAME]...
 * Invariant checks are printed on stderr; any broken invariant exits 1. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/table.h"
#include "daemon/simlib/replay.h"

#define MAX_ARGS 32
#define MAX_SEEDS 100
#define SEED 20260101

static void usage(FILE *out)
{
    fprintf(out, "usage: recall [--quick] [--json] [--seeds N] [--workload FILE|NAME]... "
                 "[--policy NAME]...\nworkloads:");
    for (const char *const *n = workload_standard; *n; n++)
        fprintf(out, " %s", *n);
    fprintf(out, " (each run with seeds %d.., --seeds of them, default 3)\npolicies:", SEED);
    for (const sched_policy_t *p = sched_policies; p->name; p++)
        fprintf(out, " %s", p->name);
    fprintf(out, " (default: %s)\n", SCHED_DEFAULT_POLICY);
}

static const si_column_t run_columns[] = {
    {"workload", SI_COL_STR},        {"seed", SI_COL_INT},
    {"policy", SI_COL_STR},
    {"makespan_s", SI_COL_SECONDS},  {"mean_completion_s", SI_COL_SECONDS},
    {"p95_completion_s", SI_COL_SECONDS}, {"missed_deadlines", SI_COL_INT},
    {"lateness_s", SI_COL_SECONDS},  {"mounts", SI_COL_INT},
    {"locate_s", SI_COL_SECONDS},    {"efficiency", SI_COL_PERCENT},
    {"cpu_s", SI_COL_REAL},
};

/* The default against the best policy of the same run, worst over seeds:
 * how far above the best (percent; 0 = it is the best), deadlines missed
 * beyond the fewest, and the fixed comparisons. */
static const si_column_t worst_columns[] = {
    {"workload", SI_COL_STR},             {"seeds", SI_COL_INT},
    {"makespan_over_best", SI_COL_PERCENT}, {"mean_over_best", SI_COL_PERCENT},
    {"p95_over_best", SI_COL_PERCENT},    {"missed_over_best", SI_COL_INT},
    {"fifo_makespan_x", SI_COL_REAL},     {"locate_below_linear", SI_COL_PERCENT},
};

typedef struct {
    double makespan, mean, p95, missed, fifo_x, below_linear;
    int seeds;
} worst_t;

static void worst_init(worst_t *w)
{
    *w = (worst_t){-INFINITY, -INFINITY, -INFINITY, -INFINITY, INFINITY, INFINITY, 0};
}

static double over(double mine, double best)
{
    return best > 0 ? mine / best - 1 : mine > 0 ? INFINITY : 0;
}

/* Folds one seed's runs (r[0..np), policies pol) into w. */
static void worst_add(worst_t *w, const replay_result_t *r, const sched_policy_t *const *pol,
                      int np)
{
    int def = -1, fifo = -1, linear = -1;
    double best[4] = {INFINITY, INFINITY, INFINITY, INFINITY};
    for (int i = 0; i < np; i++) {
        if (strcmp(pol[i]->name, SCHED_DEFAULT_POLICY) == 0)
            def = i;
        else if (strcmp(pol[i]->name, "fifo") == 0)
            fifo = i;
        else if (strcmp(pol[i]->name, "linear") == 0)
            linear = i;
        best[0] = fmin(best[0], r[i].makespan_s);
        best[1] = fmin(best[1], r[i].mean_completion_s);
        best[2] = fmin(best[2], r[i].p95_completion_s);
        best[3] = fmin(best[3], (double)r[i].missed_deadlines);
    }
    if (def < 0)
        return;
    const replay_result_t *d = &r[def];
    w->seeds++;
    w->makespan = fmax(w->makespan, over(d->makespan_s, best[0]));
    w->mean = fmax(w->mean, over(d->mean_completion_s, best[1]));
    w->p95 = fmax(w->p95, over(d->p95_completion_s, best[2]));
    w->missed = fmax(w->missed, (double)d->missed_deadlines - best[3]);
    if (fifo >= 0 && d->makespan_s > 0)
        w->fifo_x = fmin(w->fifo_x, r[fifo].makespan_s / d->makespan_s);
    if (linear >= 0 && r[linear].locate_s > 0)
        w->below_linear = fmin(w->below_linear, 1 - d->locate_s / r[linear].locate_s);
}

static void worst_row(si_table_t *t, const char *name, const worst_t *w, bool json)
{
    double k = json ? 1 : 100;
    si_table_row(t);
    si_table_str(t, name);
    si_table_int(t, w->seeds);
    si_table_real(t, k * w->makespan);
    si_table_real(t, k * w->mean);
    si_table_real(t, k * w->p95);
    si_table_int(t, (int64_t)w->missed);
    if (isfinite(w->fifo_x))
        si_table_real(t, w->fifo_x);
    else
        si_table_null(t);
    if (isfinite(w->below_linear))
        si_table_real(t, k * w->below_linear);
    else
        si_table_null(t);
}

/* Runs every policy on w; rows into t, results into r. Returns 1 when an
 * invariant broke or a run failed, else 0. */
static int run_policies(const workload_t *w, int64_t seed, const sched_policy_t *const *pol,
                        int np, bool json, si_table_t *t, replay_result_t *r)
{
    int status = 0;
    si_error_t err = {{0}};
    for (int pi = 0; pi < np; pi++) {
        if (workload_replay(w, pol[pi], &r[pi], &err) < 0) {
            fprintf(stderr, "recall: %s/%s: %s\n", w->name, pol[pi]->name, err.text);
            memset(&r[pi], 0, sizeof(r[pi]));
            status = 1;
            continue;
        }
        if (r[pi].violations) {
            fprintf(stderr, "recall: %s/%lld/%s: INVARIANT BROKEN (%llu): %s\n", w->name,
                    (long long)seed, pol[pi]->name, (unsigned long long)r[pi].violations,
                    r[pi].first_violation);
            status = 1;
        } else {
            fprintf(stderr, "recall: %s/%lld/%s: invariants held: %llu requests, %llu reads "
                    "(each object once), %llu failed objects, %llu mounts\n", w->name,
                    (long long)seed, pol[pi]->name, (unsigned long long)r[pi].requests,
                    (unsigned long long)r[pi].reads, (unsigned long long)r[pi].objects_failed,
                    (unsigned long long)r[pi].mounts);
        }
        if (*r[pi].first_failure)
            fprintf(stderr, "recall: %s/%s: %s\n", w->name, pol[pi]->name,
                    r[pi].first_failure);
        si_table_row(t);
        si_table_str(t, w->name);
        si_table_int(t, seed);
        si_table_str(t, pol[pi]->name);
        si_table_real(t, r[pi].makespan_s);
        si_table_real(t, r[pi].mean_completion_s);
        si_table_real(t, r[pi].p95_completion_s);
        si_table_int(t, (int64_t)r[pi].missed_deadlines);
        si_table_real(t, r[pi].lateness_s);
        si_table_int(t, (int64_t)r[pi].mounts);
        si_table_real(t, r[pi].locate_s);
        si_table_real(t, json ? r[pi].efficiency : 100 * r[pi].efficiency);
        si_table_real(t, r[pi].cpu_s);
    }
    return status;
}

int main(int argc, char **argv)
{
    bool quick = false, json = false;
    long seeds = 3;
    const char *workloads[MAX_ARGS], *policies[MAX_ARGS];
    int nw = 0, np = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
            char *end;
            seeds = strtol(argv[++i], &end, 10);
            if (*end || seeds < 1 || seeds > MAX_SEEDS) {
                fprintf(stderr, "recall: --seeds '%s': a number 1..%d\n", argv[i], MAX_SEEDS);
                return 2;
            }
        } else if ((strcmp(argv[i], "--workload") == 0 || strcmp(argv[i], "--policy") == 0) &&
                   i + 1 < argc) {
            bool wl = argv[i][2] == 'w';
            if ((wl ? nw : np) == MAX_ARGS) {
                fprintf(stderr, "recall: too many %s options\n", argv[i]);
                return 2;
            }
            if (wl)
                workloads[nw++] = argv[++i];
            else
                policies[np++] = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "recall: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (nw == 0)
        for (const char *const *n = workload_standard; *n; n++)
            workloads[nw++] = *n;
    const sched_policy_t *pol[MAX_ARGS];
    si_error_t err = {{0}};
    if (np == 0) {
        for (const sched_policy_t *p = sched_policies; p->name; p++)
            pol[np++] = p;
    } else {
        for (int i = 0; i < np; i++)
            if (!(pol[i] = sched_policy_find(policies[i], &err))) {
                fprintf(stderr, "recall: %s\n", err.text);
                return 2;
            }
    }

    si_table_t *runs = si_table_new(run_columns, sizeof(run_columns) / sizeof(run_columns[0]));
    si_table_t *worst = si_table_new(worst_columns,
                                     sizeof(worst_columns) / sizeof(worst_columns[0]));
    replay_result_t *r = calloc((size_t)np, sizeof(*r));
    if (!runs || !worst || !r)
        return 1;
    int status = 0;
    for (int wi = 0; wi < nw; wi++) {
        bool standard = workload_is_standard(workloads[wi]);
        worst_t wst;
        worst_init(&wst);
        char name[64] = "";
        for (long k = 0; k < (standard ? seeds : 1); k++) {
            workload_t w;
            int64_t seed = standard ? SEED + k : 0;
            int rc = standard ? workload_generate(workloads[wi], quick, (uint64_t)seed, &w, &err)
                              : workload_load(workloads[wi], &w, &err);
            if (rc < 0) {
                fprintf(stderr, "recall: %s\n", err.text);
                status = 2;
                goto out;
            }
            snprintf(name, sizeof(name), "%s", w.name);
            status |= run_policies(&w, seed, pol, np, json, runs, r);
            worst_add(&wst, r, pol, np);
            workload_free(&w);
        }
        if (wst.seeds)
            worst_row(worst, name, &wst, json);
    }
    if (json) {
        printf("{\"default_policy\": \"%s\", \"results\": ", SCHED_DEFAULT_POLICY);
        fflush(stdout);
        si_table_print(runs, stdout, true);
        printf(", \"worst\": ");
        fflush(stdout);
        si_table_print(worst, stdout, true);
        printf("}\n");
    } else {
        si_table_print(runs, stdout, false);
        if (si_table_rows(worst)) {
            printf("\n%s against the best policy of each run, worst over seeds:\n",
                   SCHED_DEFAULT_POLICY);
            si_table_print(worst, stdout, false);
        }
    }
out:
    si_table_free(runs);
    si_table_free(worst);
    free(r);
    return status;
}
