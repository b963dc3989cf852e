/* What backends that forecast by replaying their queue (sim, tape) share. */
#include "config.h"

#include <stdlib.h>

#include "daemon/archive/backend.h"
#include "daemon/archive/internal.h"

archive_forecast_t *archive_forecast_add(archive_forecast_t *list, size_t *n, uint64_t batch,
                                         double eta_s)
{
    size_t k = 0;
    while (k < *n && list[k].batch != batch)
        k++;
    if (k == *n)
        list[(*n)++] = (archive_forecast_t){.batch = batch};
    if (eta_s > list[k].eta_s)
        list[k].eta_s = eta_s;
    return &list[k];
}

static void replay_done(void *arg, uint64_t request, double at, size_t failed, const char *why)
{
    (void)failed, (void)why;
    ((archive_replay_t *)arg)->done_at[request - 1] = at;
}

int archive_replay_start(archive_replay_t *rp, size_t most, const simlib_config_t *cfg,
                         const sched_policy_t *policy, const sched_options_t *so,
                         si_error_t *err)
{
    simlib_callbacks_t cb = {.request_done = replay_done, .arg = rp};
    *rp = (archive_replay_t){NULL};
    rp->done_at = calloc(most + 1, sizeof(double));
    rp->batch = calloc(most + 1, sizeof(uint64_t));
    if (!rp->done_at || !rp->batch || !(rp->lib = simlib_new(cfg, policy, so, &cb, err))) {
        if (!err || !err->text[0])
            si_errprintf(err, "out of memory");
        return -1;
    }
    return 0;
}

int archive_replay_submit(archive_replay_t *rp, uint64_t batch, int priority, double deadline,
                          const sched_file_t *files, size_t n, si_error_t *err)
{
    sched_request_t req = {++rp->n, priority, deadline};
    rp->batch[rp->n - 1] = batch;
    return simlib_submit(rp->lib, 0, &req, files, n, err);
}

void archive_replay_free(archive_replay_t *rp)
{
    simlib_free(rp->lib);
    free(rp->done_at);
    free(rp->batch);
    *rp = (archive_replay_t){NULL};
}
