/* The drive's Recommended Access Order (GENERATE/RECEIVE RAO) against the
 * scheduler's: at the start of a pass over a mounted cartridge, the reads
 * the scheduler has queued on it are sent to the drive as user data
 * segments (their first and last logical objects); the two orders are
 * costed by the scheduler's model (its estimated positioning time) and
 * logged; with archive.tape.rao = "use" the pass follows the drive's. The
 * drive knows its tape's real geometry (wraps, bands), which the model only
 * estimates from the profile. */
#include "config.h"

#include "daemon/archive/tape/state.h"

/* The first and last logical objects (blocks) of a read: 0 when its
 * position is not in the cartridge's index. */
static int read_segment(tape_t *t, int v, const sched_pending_t *p, scsi_uds_t *u)
{
    const trec_t *rec = tape_rec_get(t, p->object_id);
    if (!rec || p->size == 0)
        return 0;
    const tvol_t *vol = &t->vols[v];
    for (int c = 0; c < rec->item.ncopies; c++) {
        const archive_copy_t *cp = &rec->item.copies[c];
        if (strcmp(cp->volume, vol->label) != 0)
            continue;
        if (cp->file_seq < 1 || cp->file_seq > vol->nfiles)
            return 0;
        const tfile_t *f = &vol->files[cp->file_seq - 1];
        if (cp->position < f->start || cp->position + p->size > f->end || f->block == 0)
            return 0;
        uint64_t base = tape_file_base(vol, cp->file_seq);
        u->begin = base + (cp->position - f->start) / f->block;
        u->end = base + (cp->position + p->size - 1 - f->start) / f->block;
        u->partition = 0;
        return 1;
    }
    return 0;
}

/* At the start of a pass, no READ in flight (a mount came before). mu
 * held; released while the drive works out its order (v is busy). */
void tape_rao_consult(tdrive_t *d, int v)
{
    tape_t *t = d->t;
    if (t->rao == TAPE_RAO_OFF || !d->io.can_rao || !d->io.can_locate)
        return;
    sched_pending_t *reads = malloc(TAPE_RAO_MAX * sizeof(*reads));
    sched_pending_t *mine = malloc(TAPE_RAO_MAX * sizeof(*mine));
    sched_pending_t *theirs = malloc(TAPE_RAO_MAX * sizeof(*theirs));
    scsi_uds_t *uds = malloc(TAPE_RAO_MAX * sizeof(*uds));
    uint64_t *ids = malloc(TAPE_RAO_MAX * sizeof(*ids));
    uint8_t *seen = calloc(TAPE_RAO_MAX, 1);
    scsi_uds_t *order = NULL;
    size_t norder = 0;
    if (!reads || !mine || !theirs || !uds || !ids || !seen)
        goto out;
    uint64_t head = d->head;
    size_t n = sched_volume_plan(t->sched, v, head, reads, TAPE_RAO_MAX), m = 0;
    for (size_t i = 0; i < n; i++)
        if (read_segment(t, v, &reads[i], &uds[m])) {
            snprintf(uds[m].name, sizeof(uds[m].name), "%zu", m);
            mine[m++] = reads[i];
        }
    if (m < 2)
        goto out;
    pthread_mutex_unlock(&t->mu);
    si_error_t err = {0};
    int rc = tape_drive_rao(&d->io, uds, m, &order, &norder, &err);
    int e = errno;
    pthread_mutex_lock(&t->mu);
    if (rc < 0) {
        if (e == ENOTSUP)
            d->io.can_rao = false;
        si_log(t->log, SI_LOG_WARNING, "tape: drive %d: no Recommended Access Order for %zu "
               "reads on %s (the scheduler's order is read): %s", d->index, m,
               t->vols[v].label, err.text);
        goto out;
    }
    /* the drive's order, by the names given; segments it left out follow
     * in the scheduler's order */
    size_t k = 0;
    for (size_t i = 0; i < norder; i++) {
        char *end;
        unsigned long idx = strtoul(order[i].name, &end, 10);
        if (end == order[i].name || *end || idx >= m || seen[idx]) {
            si_log(t->log, SI_LOG_WARNING, "tape: drive %d: its Recommended Access Order "
                   "names segment '%s', which was not asked for (or twice); the scheduler's "
                   "order is read", d->index, order[i].name);
            goto out;
        }
        seen[idx] = 1;
        theirs[k++] = mine[idx];
    }
    for (size_t i = 0; i < m; i++)
        if (!seen[i])
            theirs[k++] = mine[i];
    double t_mine = sched_order_locate_time(t->sched, head, mine, m);
    double t_theirs = sched_order_locate_time(t->sched, head, theirs, m);
    bool use = t->rao == TAPE_RAO_USE;
    t->rao_passes++;
    t->rao_used += use;
    t->rao_drive_s += t_theirs;
    t->rao_sched_s += t_mine;
    si_log(t->log, SI_LOG_INFO, "tape: drive %d: %s, %zu reads: the drive's Recommended Access "
           "Order %.1f s of positioning by the model, the scheduler's %.1f s; reading in %s",
           d->index, t->vols[v].label, m, t_theirs, t_mine,
           use ? "the drive's order" : "the scheduler's order (archive.tape.rao = compare)");
    if (use) {
        for (size_t i = 0; i < m; i++)
            ids[i] = theirs[i].object_id;
        sched_volume_reorder(t->sched, v, ids, m);
    }
out:
    free(order);
    free(reads);
    free(mine);
    free(theirs);
    free(uds);
    free(ids);
    free(seen);
}
