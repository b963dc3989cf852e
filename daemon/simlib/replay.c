/* Workload replay on the virtual clock; see replay.h. */
#include "config.h"
#include "daemon/simlib/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const workload_t *w;
    double *done_at;          /* by request index; < 0 until complete */
    size_t completed;
    uint64_t duplicate_completions;
    char first_failure[256];
} replay_ctx_t;

static size_t request_index(const replay_ctx_t *c, uint64_t id)
{
    /* Generated and parsed workloads number requests in order mostly; fall
     * back to a scan otherwise. */
    const workload_t *w = c->w;
    if (id >= 1 && id <= w->nrequests && w->requests[id - 1].req.id == id)
        return (size_t)(id - 1);
    for (size_t i = 0; i < w->nrequests; i++)
        if (w->requests[i].req.id == id)
            return i;
    return SIZE_MAX;
}

static void on_done(void *arg, uint64_t request, double t, size_t failed, const char *why)
{
    replay_ctx_t *c = arg;
    size_t i = request_index(c, request);
    if (i == SIZE_MAX)
        return;
    if (c->done_at[i] >= 0) {
        c->duplicate_completions++;
        return;
    }
    c->done_at[i] = t;
    c->completed++;
    if (failed && !*c->first_failure)
        snprintf(c->first_failure, sizeof(c->first_failure), "request %llu: %zu files failed: %s",
                 (unsigned long long)request, failed, why ? why : "?");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int workload_replay(const workload_t *w, const sched_policy_t *policy, replay_result_t *out,
                    si_error_t *err)
{
    memset(out, 0, sizeof(*out));
    replay_ctx_t ctx = {.w = w};
    ctx.done_at = malloc((w->nrequests + 1) * sizeof(double));
    sched_file_t *files = NULL;
    simlib_t *lib = NULL;
    int rc = -1;
    if (!ctx.done_at) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < w->nrequests; i++)
        ctx.done_at[i] = -1;
    simlib_config_t cfg = w->lib;
    cfg.time_scale = 0;
    sched_options_t opt;
    sched_options_default(&opt);
    simlib_callbacks_t cb = {.request_done = on_done, .arg = &ctx};
    lib = simlib_new(&cfg, policy, &opt, &cb, err);
    if (!lib)
        goto out;
    size_t maxn = 0;
    for (size_t r = 0; r < w->nrequests; r++)
        if (w->requests[r].n > maxn)
            maxn = w->requests[r].n;
    files = malloc((maxn + 1) * sizeof(sched_file_t));
    if (!files) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    for (size_t r = 0; r < w->nrequests; r++) {
        const workload_request_t *rq = &w->requests[r];
        for (size_t k = 0; k < rq->n; k++)
            files[k] = w->files[w->req_files[rq->first + k]];
        if (simlib_submit(lib, rq->at, &rq->req, files, rq->n, err) < 0)
            goto out;
    }
    if (simlib_run(lib, err) < 0)
        goto out;

    simlib_stats_t st;
    simlib_stats(lib, &st);
    double *lat = malloc((w->nrequests + 1) * sizeof(double));
    if (!lat) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    double sum = 0;
    size_t n = 0;
    for (size_t r = 0; r < w->nrequests; r++)
        if (ctx.done_at[r] >= 0) {
            lat[n] = ctx.done_at[r] - w->requests[r].at;
            sum += lat[n++];
            double deadline = w->requests[r].req.deadline;
            if (deadline > 0 && ctx.done_at[r] > deadline) {
                out->missed_deadlines++;
                out->lateness_s += ctx.done_at[r] - deadline;
            }
        }
    qsort(lat, n, sizeof(double), cmp_double);
    out->makespan_s = st.makespan;
    out->mean_completion_s = n ? sum / (double)n : 0;
    out->p95_completion_s = n ? lat[(size_t)((double)(n - 1) * 0.95 + 0.5)] : 0;
    free(lat);
    out->mounts = st.mounts;
    out->locate_s = st.locate_s;
    out->efficiency = st.makespan > 0
                          ? (double)st.bytes_read / ((double)w->lib.drives * w->lib.profile.rate *
                                                     st.makespan)
                          : 0;
    out->cpu_s = st.sched_cpu_s;
    out->requests = st.requests;
    out->requests_failed = st.requests_failed;
    out->reads = st.reads;
    out->objects_failed = st.objects_failed;
    out->violations = st.violations;
    snprintf(out->first_violation, sizeof(out->first_violation), "%s", st.first_violation);
    if (ctx.completed != w->nrequests) {
        if (out->violations++ == 0)
            snprintf(out->first_violation, sizeof(out->first_violation),
                     "%zu of %zu requests completed", ctx.completed, w->nrequests);
    }
    /* Each requested object read exactly once, or failed. */
    uint8_t *seen = calloc(w->nfiles + 1, 1);
    uint64_t distinct = 0;
    for (size_t i = 0; seen && i < w->nreq_files; i++)
        if (!seen[w->req_files[i]]) {
            seen[w->req_files[i]] = 1;
            distinct++;
        }
    free(seen);
    if (st.reads + st.objects_failed != distinct) {
        if (out->violations++ == 0)
            snprintf(out->first_violation, sizeof(out->first_violation),
                     "%llu objects requested, %llu read + %llu failed",
                     (unsigned long long)distinct, (unsigned long long)st.reads,
                     (unsigned long long)st.objects_failed);
    }
    if (ctx.duplicate_completions) {
        if (out->violations++ == 0)
            snprintf(out->first_violation, sizeof(out->first_violation),
                     "a request completed twice");
    }
    snprintf(out->first_failure, sizeof(out->first_failure), "%s", ctx.first_failure);
    rc = 0;
out:
    simlib_free(lib);
    free(files);
    free(ctx.done_at);
    return rc;
}
