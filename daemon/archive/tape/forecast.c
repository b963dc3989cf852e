/* ETA forecasts of the tape backend: the recalls still queued replayed on a
 * virtual clock by the simulated library's engine and the same scheduler
 * policy (daemon/simlib), with the drives' profile (archive.tape.profile:
 * mount, locate and read times) and the library as it stands: the
 * cartridges in the drives and their heads, failed drives left out, each
 * batch with its priority and deadline; a read in flight counts in full. */
#include "config.h"

#include "daemon/archive/tape/state.h"

typedef struct {
    double *done_at;           /* per submitted request (1-based), virtual s */
} forecast_run_t;

static void forecast_done(void *arg, uint64_t request, double at, size_t failed, const char *why)
{
    (void)failed, (void)why;
    ((forecast_run_t *)arg)->done_at[request - 1] = at;
}

/* Files of request q still to be read, into files (room for q->n). */
static size_t pending_files(tape_t *t, const treq_t *q, sched_file_t *files)
{
    size_t n = 0;
    for (size_t k = 0; k < q->n; k++) {
        const trec_t *r = tape_rec_get(t, q->tokens[k]);
        if (!r || r->cancelled)
            continue;
        sched_file_t *f = &files[n];
        memset(f, 0, sizeof(*f));
        f->object = q->tokens[k];
        for (int c = 0; c < r->item.ncopies && f->ncopies < SCHED_MAX_COPIES; c++) {
            int v = tape_vol_index(t, r->item.copies[c].volume);
            if (v < 0 || t->vols[v].refused)
                continue;
            f->copies[f->ncopies++] = (sched_copy_t){v, r->item.copies[c].position, r->item.size};
        }
        n += f->ncopies > 0;
    }
    return n;
}

int tape_forecast(archive_backend_t *b, archive_forecast_t **out, size_t *count, si_error_t *err)
{
    tape_t *t = b->impl;
    simlib_config_t cfg;
    simlib_config_default(&cfg);
    simlib_t *lib = NULL;
    forecast_run_t run = {NULL};
    uint64_t *req_batch = NULL;
    sched_file_t *files = NULL;
    archive_forecast_t *res = NULL;
    size_t nres = 0, nsub = 0;
    int rc = -1;
    *out = NULL;
    *count = 0;
    pthread_mutex_lock(&t->mu);
    cfg.profile = t->profile;
    cfg.drives = 0;
    for (int d = 0; d < t->ndrives; d++)
        cfg.drives += !t->drives[d].failed;
    if (cfg.drives == 0 || t->nreqs == 0 || t->nvols == 0) {
        rc = 0; /* nothing queued, or nothing can read it: no forecast */
        goto unlock;
    }
    for (int v = 0; v < t->nvols; v++)
        if (simlib_config_add_volume(&cfg, t->vols[v].label, tape_vol_used(&t->vols[v]), err) < 0)
            goto unlock;
    cfg.slots = t->nvols;
    sched_options_t so;
    sched_options_default(&so);
    so.profile = t->profile;
    so.nvolumes = t->nvols;
    so.drives = cfg.drives;
    simlib_callbacks_t cb = {.request_done = forecast_done, .arg = &run};
    size_t most = 1;
    for (size_t i = 0; i < t->nreqs; i++)
        most = t->reqs[i].n > most ? t->reqs[i].n : most;
    run.done_at = calloc(t->nreqs + 1, sizeof(double));
    req_batch = calloc(t->nreqs + 1, sizeof(uint64_t));
    files = calloc(most, sizeof(*files));
    if (!run.done_at || !req_batch || !files ||
        !(lib = simlib_new(&cfg, sched_policy(t->sched), &so, &cb, err)))
        goto nomem_or_err;
    for (int d = 0, k = 0; d < t->ndrives; d++) {
        const tdrive_t *dr = &t->drives[d];
        if (dr->failed)
            continue;
        if (dr->vol >= 0 && simlib_preload(lib, k, dr->vol, dr->head, 0, err) < 0)
            goto unlock;
        k++;
    }
    double now = mono();
    for (size_t i = 0; i < t->nreqs; i++) {
        const treq_t *q = &t->reqs[i];
        size_t n = q->n ? pending_files(t, q, files) : 0;
        if (n == 0)
            continue;
        sched_request_t req = {++nsub, q->priority,
                               q->deadline > 0 ? fmax(q->deadline - now, 1e-9) : 0};
        req_batch[nsub - 1] = q->batch;
        if (simlib_submit(lib, 0, &req, files, n, err) < 0)
            goto unlock;
    }
    pthread_mutex_unlock(&t->mu);
    if (nsub > 0 && simlib_run(lib, err) < 0)
        goto out;
    if (!(res = calloc(nsub + 1, sizeof(*res))))
        goto nomem_out;
    for (size_t i = 0; i < nsub; i++)
        archive_forecast_add(res, &nres, req_batch[i], run.done_at[i]);
    pthread_mutex_lock(&t->mu);
    for (size_t k = 0; k < nres; k++)
        for (size_t i = 0; i < t->nreqs; i++)
            if (t->reqs[i].batch == res[k].batch)
                for (size_t j = 0; j < t->reqs[i].n; j++)
                    res[k].items += tape_rec_get(t, t->reqs[i].tokens[j]) != NULL;
    pthread_mutex_unlock(&t->mu);
    *out = res;
    *count = nres;
    res = NULL;
    rc = 0;
    goto out;
nomem_or_err:
    if (!err || !err->text[0])
        si_errprintf(err, "out of memory");
unlock:
    pthread_mutex_unlock(&t->mu);
    goto out;
nomem_out:
    si_errprintf(err, "out of memory");
out:
    simlib_free(lib);
    simlib_config_free(&cfg);
    free(run.done_at);
    free(req_batch);
    free(files);
    free(res);
    return rc;
}
