/* Recall scheduler benchmark: every workload under every policy on the
 * virtual clock, one table (or one JSON object with --json).
 *   recall [--quick] [--json] [--workload FILE|W1|W2|W3|W4]... [--policy NAME]...
 * Invariant checks are printed on stderr; any broken invariant exits 1. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/table.h"
#include "daemon/simlib/replay.h"

#define MAX_ARGS 32
#define SEED 20260101

static void usage(FILE *out)
{
    fprintf(out, "usage: recall [--quick] [--json] [--workload FILE|W1|W2|W3|W4]... "
                 "[--policy NAME]...\npolicies:");
    for (const sched_policy_t *p = sched_policies; p->name; p++)
        fprintf(out, " %s", p->name);
    fprintf(out, " (default: %s)\n", SCHED_DEFAULT_POLICY);
}

static const si_column_t columns[] = {
    {"workload", SI_COL_STR},        {"policy", SI_COL_STR},
    {"makespan_s", SI_COL_SECONDS},  {"mean_completion_s", SI_COL_SECONDS},
    {"p95_completion_s", SI_COL_SECONDS}, {"mounts", SI_COL_INT},
    {"locate_s", SI_COL_SECONDS},    {"efficiency", SI_COL_PERCENT},
    {"cpu_s", SI_COL_REAL},
};

int main(int argc, char **argv)
{
    bool quick = false, json = false;
    const char *workloads[MAX_ARGS], *policies[MAX_ARGS];
    int nw = 0, np = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
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
    if (nw == 0) {
        static const char *const all[] = {"W1", "W2", "W3", "W4"};
        for (int i = 0; i < 4; i++)
            workloads[nw++] = all[i];
    }
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

    si_table_t *t = si_table_new(columns, sizeof(columns) / sizeof(columns[0]));
    if (!t)
        return 1;
    int status = 0;
    for (int wi = 0; wi < nw; wi++) {
        workload_t w;
        bool builtin = strlen(workloads[wi]) == 2 && (workloads[wi][0] == 'W' ||
                                                      workloads[wi][0] == 'w');
        int rc = builtin ? workload_generate(workloads[wi], quick, SEED, &w, &err)
                         : workload_load(workloads[wi], &w, &err);
        if (rc < 0) {
            fprintf(stderr, "recall: %s\n", err.text);
            si_table_free(t);
            return 2;
        }
        for (int pi = 0; pi < np; pi++) {
            replay_result_t r;
            if (workload_replay(&w, pol[pi], &r, &err) < 0) {
                fprintf(stderr, "recall: %s/%s: %s\n", w.name, pol[pi]->name, err.text);
                status = 1;
                continue;
            }
            if (r.violations) {
                fprintf(stderr, "recall: %s/%s: INVARIANT BROKEN (%llu): %s\n", w.name,
                        pol[pi]->name, (unsigned long long)r.violations, r.first_violation);
                status = 1;
            } else {
                fprintf(stderr, "recall: %s/%s: invariants held: %llu requests, %llu reads "
                        "(each object once), %llu failed objects, %llu mounts\n", w.name,
                        pol[pi]->name, (unsigned long long)r.requests,
                        (unsigned long long)r.reads, (unsigned long long)r.objects_failed,
                        (unsigned long long)r.mounts);
            }
            if (*r.first_failure)
                fprintf(stderr, "recall: %s/%s: %s\n", w.name, pol[pi]->name, r.first_failure);
            si_table_row(t);
            si_table_str(t, w.name);
            si_table_str(t, pol[pi]->name);
            si_table_real(t, r.makespan_s);
            si_table_real(t, r.mean_completion_s);
            si_table_real(t, r.p95_completion_s);
            si_table_int(t, (int64_t)r.mounts);
            si_table_real(t, r.locate_s);
            si_table_real(t, json ? r.efficiency : 100 * r.efficiency);
            si_table_real(t, r.cpu_s);
        }
        workload_free(&w);
    }
    if (json) {
        printf("{\"default_policy\": \"%s\", \"results\": ", SCHED_DEFAULT_POLICY);
        fflush(stdout);
        si_table_print(t, stdout, true);
        printf("}\n");
    } else {
        si_table_print(t, stdout, false);
    }
    si_table_free(t);
    return status;
}
