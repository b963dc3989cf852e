/* ETA forecasts of the tape backend: the recalls still queued replayed on a
 * virtual clock by the simulated library's engine and the same scheduler
 * policy (daemon/simlib), with the drives' profile (archive.tape.profile:
 * mount, locate and read times) and the library as it stands: the
 * cartridges in the drives and their heads, failed drives left out, each
 * batch with its priority and deadline; a read in flight counts in full. */
#include "config.h"

#include "daemon/archive/internal.h"
#include "daemon/archive/tape/state.h"

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
    archive_replay_t rp = {NULL};
    sched_file_t *files = NULL;
    archive_forecast_t *res = NULL;
    size_t nres = 0;
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
    size_t most = 1;
    for (size_t i = 0; i < t->nreqs; i++)
        most = t->reqs[i].n > most ? t->reqs[i].n : most;
    if (!(files = calloc(most, sizeof(*files))))
        goto nomem_or_err;
    if (archive_replay_start(&rp, t->nreqs, &cfg, sched_policy(t->sched), &so, err) < 0)
        goto unlock;
    for (int d = 0, k = 0; d < t->ndrives; d++) {
        const tdrive_t *dr = &t->drives[d];
        if (dr->failed)
            continue;
        if (dr->vol >= 0 && simlib_preload(rp.lib, k, dr->vol, dr->head, 0, err) < 0)
            goto unlock;
        k++;
    }
    double now = si_mono_now();
    for (size_t i = 0; i < t->nreqs; i++) {
        const treq_t *q = &t->reqs[i];
        size_t n = q->n ? pending_files(t, q, files) : 0;
        if (n == 0)
            continue;
        if (archive_replay_submit(&rp, q->batch, q->priority,
                                  q->deadline > 0 ? fmax(q->deadline - now, 1e-9) : 0, files, n,
                                  err) < 0)
            goto unlock;
    }
    pthread_mutex_unlock(&t->mu);
    if (rp.n > 0 && simlib_run(rp.lib, err) < 0)
        goto out;
    if (!(res = calloc(rp.n + 1, sizeof(*res))))
        goto nomem_out;
    for (size_t i = 0; i < rp.n; i++)
        archive_forecast_add(res, &nres, rp.batch[i], rp.done_at[i]);
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
    archive_replay_free(&rp);
    simlib_config_free(&cfg);
    free(files);
    free(res);
    return rc;
}
