/* The `tape` archive backend: a real tape library, its media changer and
 * drives reached over SG_IO or iSCSI (daemon/scsi), driven by the recall
 * scheduler of daemon/sched (mount choice and read order, from the tape
 * model's cost estimates), with the on-tape format of the simulated volumes
 * (doc/tape-format.md): tape file 0 holds the label record, archive file N
 * is tape file N, a pax tar stream written in variable blocks of
 * archive.tape.block_size bytes, each followed by a filemark. Positions are
 * the logical bytes of the equivalent volume image (a filemark counts as the
 * image's 512-byte filemark record), so the catalog, the model and
 * `stagein tape dump/import` of an image read off the cartridge agree.
 *
 * Per cartridge the backend keeps an index in <state_dir>/tape/LABEL.index
 * ("file SEQ START END BLOCK_SIZE" per archive file, fsync'd once its
 * filemark is on tape, before the write is acknowledged): the block of any
 * position follows from it. A write interrupted before its line exists is
 * overwritten by the next write (tape is append only: writing at the start
 * of tape file N+1 discards what followed).
 *
 * Threads: one worker per drive takes archive writes first, then asks the
 * scheduler for a volume and reads in its order. mu guards everything but
 * the SCSI handles, which belong to their worker (the changer to whoever
 * holds changer_mu). Sink callbacks run on the workers without mu. */
#include "config.h"

#include "daemon/archive/internal.h"
#include "daemon/archive/tape/state.h"
#include "common/thread.h"

const si_conf_key_t archive_tape_conf_keys[] = {
    {"archive.tape", SI_CONF_GROUP, 0, 0, NULL},
    {"archive.tape.changer", SI_CONF_STRING, 0, 0, NULL},
    {"archive.tape.drives", SI_CONF_LIST, 0, -1, NULL},
    {"archive.tape.drives.[]", SI_CONF_GROUP, 0, 0, NULL},
    {"archive.tape.drives.[].device", SI_CONF_STRING, 0, 0, NULL},
    {"archive.tape.drives.[].element", SI_CONF_INT, 0, 65535, NULL},
    {"archive.tape.block_size", SI_CONF_INT, 512, 8 << 20, NULL},
    {"archive.tape.compression", SI_CONF_BOOL, 0, 0, NULL},
    {"archive.tape.label_blank", SI_CONF_BOOL, 0, 0, NULL},
    {"archive.tape.media", SI_CONF_STRING, 0, 0, NULL},
    {"archive.tape.capacity", SI_CONF_INT, 1 << 20, 9.2e18, NULL},
    {"archive.tape.profile", SI_CONF_STRING, 0, 0, "lto9|lto10"},
    {"archive.tape.positioning", SI_CONF_STRING, 0, 0, "auto|space"},
    {"archive.tape.rao", SI_CONF_STRING, 0, 0, "off|compare|use"},
    {"archive.tape.retries", SI_CONF_INT, 0, 1000, NULL},
    {"archive.tape.queue_depth", SI_CONF_INT, 1, SCSI_QUEUE_MAX, NULL},
    {"archive.tape.retry_interval", SI_CONF_FLOAT, 0.001, 60, NULL},
    {"archive.tape.command_log", SI_CONF_STRING, 0, 0, NULL},
    {"archive.tape.sysfs", SI_CONF_STRING, 0, 0, NULL},
    SI_CONF_KEYS_END,
};

/* ---- the drive workers -------------------------------------------------------------------- */

static void *drive_main(void *arg)
{
    tdrive_t *d = arg;
    tape_t *t = d->t;
    uint8_t *unavailable = calloc((size_t)t->nvols + 1, 1);
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        if (d->failed || !unavailable) {
            pthread_cond_wait(&t->cv, &t->mu);
            continue;
        }
        twrite_t *job = NULL;
        for (size_t i = 0; i < t->nwrites && !job; i++)
            if (!t->writes[i]->taken && !(t->writes[i]->wp_drives & (UINT64_C(1) << d->index)))
                job = t->writes[i];
        if (job) {
            job->taken = true;
            tape_run_write(d, job);
            job->done = job->taken;
            pthread_cond_broadcast(&t->cv);
            continue;
        }
        for (int v = 0; v < t->nvols; v++)
            unavailable[v] = t->vols[v].busy || t->vols[v].refused ||
                             (t->vols[v].drive >= 0 && t->vols[v].drive != d->index);
        double wake = INFINITY;
        int v = sched_choose_volume(t->sched, si_mono_now(), d->vol, d->head, unavailable, &wake);
        if (v < 0) {
            double wait = isfinite(wake) ? fmin(fmax(wake - si_mono_now(), 0.001), 1.0) : 1.0;
            struct timespec ts = si_wall_deadline(wait);
            pthread_cond_timedwait(&t->cv, &t->mu, &ts);
            continue;
        }
        t->vols[v].busy = true;
        pthread_mutex_unlock(&t->mu);
        si_error_t err = {0};
        bool wp;
        int m = tape_mount(d, v, &wp, &err);
        if (m == 1)
            m = si_errnoprintf(&err, EBADF, "cartridge %s is blank", t->vols[v].label);
        int e = errno;
        pthread_mutex_lock(&t->mu);
        if (m < 0 && tape_is_drive_fault(e)) {
            /* the drive stopped answering: offline. What is in it (the
             * volume it was to tape_mount, or the one it failed to unload) stays
             * there: its queue moves to other copies; another volume waits
             * for another drive. */
            si_log(t->log, SI_LOG_ERROR, "tape: drive %d (%s) offline: %s", d->index, d->device,
                   err.text);
            d->failed = true;
            snprintf(d->why, sizeof(d->why), "%s", err.text);
            t->vols[v].busy = false;
            if (d->vol >= 0) {
                t->vols[d->vol].busy = true;
                sched_volume_lost(t->sched, d->vol, si_mono_now(), err.text);
            }
            if (d->vol != v)
                sched_volume_released(t->sched, v);
        } else if (m < 0) {
            si_log(t->log, SI_LOG_ERROR, "tape: drive %d: %s", d->index, err.text);
            t->vols[v].refused = e == EBADF;
            snprintf(t->vols[v].why, sizeof(t->vols[v].why), "%s", err.text);
            t->vols[v].busy = false;
            sched_volume_lost(t->sched, v, si_mono_now(), err.text);
        } else {
            if (d->head == 0 || d->vol != v)
                d->head = TAPEVOL_RECORD;
            tape_read_volume(d, v);
            if (!d->failed)
                t->vols[v].busy = false;
        }
        pthread_mutex_unlock(&t->mu);
        tape_flush_reports(t);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    free(unavailable);
    return NULL;
}

/* ---- the vtable ------------------------------------------------------------------------------ */

static int tape_recall(archive_backend_t *b, const archive_batch_t *batch,
                       const archive_item_t *items, size_t n, si_error_t *err)
{
    tape_t *t = b->impl;
    if (n == 0)
        return 0;
    sched_file_t *files = calloc(n, sizeof(*files));
    trec_t **recs = calloc(n, sizeof(*recs));
    uint64_t *tokens = calloc(n, sizeof(*tokens));
    int rc = -1;
    if (!files || !recs || !tokens) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n; i++) {
        const archive_item_t *it = &items[i];
        if (it->ncopies < 1) {
            si_errprintf(err, "object %" PRId64 " has no tape copy", it->object_id);
            goto unlock;
        }
        files[i].ncopies = 0;
        for (int c = 0; c < it->ncopies; c++) {
            int v = tape_vol_index(t, it->copies[c].volume);
            if (v < 0)
                continue; /* a cartridge not in this library */
            sched_copy_t *sc = &files[i].copies[files[i].ncopies++];
            sc->volume = v;
            sc->offset = it->copies[c].position;
            sc->size = it->size;
        }
        if (files[i].ncopies == 0) {
            si_errprintf(err, "object %" PRId64 ": no copy on a cartridge of this library "
                         "(volume %s is not in the changer)", it->object_id, it->copies[0].volume);
            goto unlock;
        }
        if (!(recs[i] = calloc(1, sizeof(trec_t))) ||
            si_array_grow((void **)&t->recs, &t->cap_recs, t->nrecs + i + 1,
                          sizeof(*t->recs)) < 0) {
            si_errprintf(err, "out of memory");
            goto unlock;
        }
        recs[i]->item = *it;
        recs[i]->item.bucket = recs[i]->item.key = NULL;
        tokens[i] = t->nrecs + i + 1;
        files[i].object = tokens[i];
    }
    if (si_array_grow((void **)&t->reqs, &t->cap_reqs, t->nreqs + 1, sizeof(*t->reqs)) < 0) {
        si_errprintf(err, "out of memory");
        goto unlock;
    }
    /* the deadline (unix seconds) on the scheduler's clock (monotonic) */
    double deadline = batch->deadline > 0 ? si_mono_now() + (batch->deadline - (double)time(NULL)) : 0;
    sched_request_t req = {t->nreqs + 1, batch->priority, deadline};
    if (sched_submit(t->sched, si_mono_now(), &req, files, n, err) < 0)
        goto unlock;
    for (size_t i = 0; i < n; i++) {
        recs[i]->req = req.id;
        t->recs[t->nrecs++] = recs[i];
        recs[i] = NULL;
        t->outstanding++;
        t->outstanding_bytes += items[i].size;
    }
    t->reqs[t->nreqs++] = (treq_t){tokens, n, batch->id, batch->priority, deadline};
    tokens = NULL;
    pthread_cond_broadcast(&t->cv);
    rc = 0;
unlock:
    pthread_mutex_unlock(&t->mu);
out:
    archive_records_free((void **)recs, n);
    free(files);
    free(tokens);
    return rc;
}

static int tape_cancel(archive_backend_t *b, int64_t object_id)
{
    tape_t *t = b->impl;
    int found = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->nrecs; i++)
        if (t->recs[i] && t->recs[i]->item.object_id == object_id && !t->recs[i]->cancelled) {
            t->recs[i]->cancelled = true;
            found = 1;
        }
    pthread_mutex_unlock(&t->mu);
    return found;
}

static int tape_archive(archive_backend_t *b, const archive_member_t *members, size_t n,
                        int ncopies, archive_placement_t *placements, si_error_t *err)
{
    tape_t *t = b->impl;
    if (ncopies < 1 || ncopies > ARCHIVE_MAX_COPIES)
        return si_errprintf(err, "copies = %d (1..%d)", ncopies, ARCHIVE_MAX_COPIES);
    twrite_t jobs[ARCHIVE_MAX_COPIES];
    int chosen[ARCHIVE_MAX_COPIES];
    uint64_t *pos = calloc(n * (size_t)ncopies + 1, sizeof(*pos));
    atomic_uchar *hashed = calloc(n + 1, sizeof(*hashed));
    if (!pos || !hashed) {
        free(pos);
        free(hashed);
        return si_errprintf(err, "out of memory");
    }
    pthread_mutex_lock(&t->mu);
    if (si_array_grow((void **)&t->writes, &t->cap_writes, t->nwrites + (size_t)ncopies,
                      sizeof(*t->writes)) < 0) {
        pthread_mutex_unlock(&t->mu);
        free(pos);
        free(hashed);
        return si_errprintf(err, "out of memory");
    }
    for (int c = 0; c < ncopies; c++) {
        chosen[c] = -1;
        jobs[c] = (twrite_t){.members = members, .n = n, .hashed = hashed, .copy = c + 1,
                             .chosen = chosen,
                             .ncopies = ncopies, .vol = -1, .positions = pos + (size_t)c * n,
                             .claims = b->write_claims.claim ? &b->write_claims : NULL};
        t->writes[t->nwrites++] = &jobs[c];
    }
    pthread_cond_broadcast(&t->cv);
    for (;;) {
        bool all = true;
        for (int c = 0; c < ncopies; c++)
            all &= jobs[c].done;
        if (all)
            break;
        bool stuck = false;
        for (int c = 0; c < ncopies; c++) {
            bool can = false;
            for (int d = 0; d < t->ndrives; d++)
                can |= !t->drives[d].failed && !(jobs[c].wp_drives & (UINT64_C(1) << d));
            if (!jobs[c].taken && !can) {
                jobs[c].taken = jobs[c].done = stuck = true;
                jobs[c].rc = -1;
                si_errnoprintf(&jobs[c].err, EHOSTDOWN, "no drive left to write it (offline, "
                               "or found the cartridges write protected)");
            }
        }
        if (stuck)
            continue;
        pthread_cond_wait(&t->cv, &t->mu);
    }
    size_t k = 0;
    for (size_t i = 0; i < t->nwrites; i++)
        if (t->writes[i]->members != members)
            t->writes[k++] = t->writes[i];
    t->nwrites = k;
    int rc = 0;
    for (int c = 0; c < ncopies && rc == 0; c++)
        if (jobs[c].rc < 0) {
            *err = jobs[c].err;
            si_errprefix(err, "archive write, copy %d", c + 1);
            rc = -1;
        }
    for (int c = 0; c < ncopies && rc == 0; c++)
        for (size_t i = 0; i < n; i++) {
            archive_placement_t *p = &placements[i * (size_t)ncopies + (size_t)c];
            p->copy = c + 1;
            snprintf(p->volume, sizeof(p->volume), "%s", t->vols[jobs[c].vol].label);
            p->file_seq = jobs[c].file_seq;
            p->position = jobs[c].positions[i];
            p->length = members[i].size;
            p->volume_used = jobs[c].used;
        }
    pthread_mutex_unlock(&t->mu);
    free(pos);
    free(hashed);
    return rc;
}

static int tape_status(archive_backend_t *b, archive_status_t *out, si_error_t *err)
{
    tape_t *t = b->impl;
    (void)err;
    memset(out, 0, sizeof(*out));
    out->backend = "tape";
    pthread_mutex_lock(&t->mu);
    out->drives = t->ndrives;
    for (int d = 0; d < t->ndrives; d++) {
        out->drives_failed += t->drives[d].failed;
        out->drives_busy += !t->drives[d].failed && t->drives[d].vol >= 0 &&
                            t->vols[t->drives[d].vol].busy;
    }
    out->volumes = t->nvols;
    out->mounts = t->mounts;
    out->reads = t->reads;
    out->read_failures = t->read_failures;
    out->bytes_read = t->bytes_read;
    out->bytes_written = t->bytes_written;
    out->archive_files_written = t->files_written;
    out->queued_items = t->outstanding;
    out->queued_bytes = t->outstanding_bytes;
    out->clock_s = si_mono_now();
    pthread_mutex_unlock(&t->mu);
    return 0;
}

static void tape_metrics(archive_backend_t *b, FILE *out)
{
    tape_t *t = b->impl;
    archive_status_t st;
    tape_status(b, &st, NULL);
    archive_metrics_drive_states(out, "the library");
    pthread_mutex_lock(&t->mu);
    for (int d = 0; d < t->ndrives; d++) {
        tdrive_t *dr = &t->drives[d];
        archive_metrics_drive_state(out, d,
                                    dr->failed                 ? "failed"
                                    : dr->vol < 0              ? "empty"
                                    : t->vols[dr->vol].busy    ? "busy"
                                                               : "idle",
                                    dr->vol >= 0 ? t->vols[dr->vol].label : "");
    }
    uint64_t cmds = scsi_dev_commands(t->changer.dev);
    for (int d = 0; d < t->ndrives; d++)
        cmds += scsi_dev_commands(t->drives[d].io.dev);
    uint64_t rao_passes = t->rao_passes, rao_used = t->rao_used;
    double rao_drive_s = t->rao_drive_s, rao_sched_s = t->rao_sched_s;
    pthread_mutex_unlock(&t->mu);
    archive_metrics_library(out, &st);
    fprintf(out,
            "# HELP stagein_scsi_commands_total SCSI commands sent to the library.\n"
            "# TYPE stagein_scsi_commands_total counter\n"
            "stagein_scsi_commands_total %" PRIu64 "\n", cmds);
    fprintf(out,
            "# HELP stagein_tape_rao_passes_total Passes over a cartridge for which the drive's "
            "Recommended Access Order was asked, by the order read.\n"
            "# TYPE stagein_tape_rao_passes_total counter\n"
            "stagein_tape_rao_passes_total{order=\"drive\"} %" PRIu64 "\n"
            "stagein_tape_rao_passes_total{order=\"scheduler\"} %" PRIu64 "\n"
            "# HELP stagein_tape_rao_locate_seconds_total The model's estimated positioning time "
            "of those passes in the drive's and in the scheduler's order.\n"
            "# TYPE stagein_tape_rao_locate_seconds_total counter\n"
            "stagein_tape_rao_locate_seconds_total{order=\"drive\"} %.3f\n"
            "stagein_tape_rao_locate_seconds_total{order=\"scheduler\"} %.3f\n",
            rao_used, rao_passes - rao_used, rao_drive_s, rao_sched_s);
    fprintf(out,
            "# HELP stagein_tape_bytes_hashed_total Bytes of archived members hashed while "
            "written (checked against the cache's checksum), once per aggregate whatever the "
            "copies.\n"
            "# TYPE stagein_tape_bytes_hashed_total counter\n"
            "stagein_tape_bytes_hashed_total %" PRIu64 "\n",
            (uint64_t)atomic_load(&t->bytes_hashed));
}

static void tape_free(archive_backend_t *b)
{
    if (!b)
        return;
    tape_t *t = b->impl;
    si_flag_raise(&t->mu, &t->cv, &t->stop);
    for (int d = 0; d < t->ndrives; d++) {
        tdrive_t *dr = &t->drives[d];
        if (dr->started)
            pthread_join(dr->thread, NULL);
        scsi_close(dr->io.dev);
        free(dr->buf);
        for (size_t i = 0; i < dr->io_nfree; i++)
            free(dr->io_free[i]);
    }
    scsi_close(t->changer.dev);
    free(t->changer.els);
    sched_free(t->sched);
    for (size_t i = 0; i < t->nrecs; i++)
        free(t->recs[i]);
    for (size_t i = 0; i < t->nreqs; i++)
        free(t->reqs[i].tokens);
    for (int v = 0; v < t->nvols; v++)
        free(t->vols[v].files);
    free(t->vols);
    free(t->recs);
    free(t->reqs);
    free(t->writes);
    free(t->reports);
    if (t->command_log)
        fclose(t->command_log);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->changer_mu);
    pthread_mutex_destroy(&t->log_mu);
    pthread_mutex_destroy(&t->claims_mu);
    pthread_cond_destroy(&t->cv);
    free(t);
    free(b);
}

/* In a drive, or being moved into one: the recall service keeps the
 * volume's lease meanwhile, so no other instance mounts it. */
int tape_volume_loaded(archive_backend_t *b, const char *label)
{
    tape_t *t = b->impl;
    pthread_mutex_lock(&t->mu);
    int v = tape_vol_index(t, label);
    int loaded = v >= 0 && (t->vols[v].drive >= 0 || t->vols[v].busy);
    pthread_mutex_unlock(&t->mu);
    return loaded;
}

static const archive_backend_ops_t tape_ops = {
    "tape", tape_recall, tape_cancel, tape_archive, tape_status, tape_metrics, tape_free, false,
    tape_forecast,
};

/* Drives configured without an element get the drive element whose
 * identifier (READ ELEMENT STATUS, DVCID) names their serial number (INQUIRY
 * VPD 80h); a configured element whose identifier names another serial is
 * logged. elements[d] is -1 where none was configured. */
static int map_drive_elements(tape_t *t, const int *elements, si_error_t *err)
{
    if (tape_changer_inventory(&t->changer, err) < 0)
        return -1;
    for (int i = 0; i < t->ndrives; i++) {
        tdrive_t *d = &t->drives[i];
        if (elements[i] >= 0) {
            const scsi_element_t *e = tape_changer_element(&t->changer, d->element);
            if (e && e->type == SCSI_ELEM_DRIVE && e->ident[0] && d->io.serial[0] &&
                !tape_ident_names_serial(e->ident, d->io.serial))
                si_log(t->log, SI_LOG_WARNING, "tape: archive.tape.drives[%d]: element %u "
                       "reports drive '%s', but %s has serial %s: check the element", i,
                       d->element, e->ident, d->device, d->io.serial);
            continue;
        }
        uint16_t address = 0;
        int n = d->io.serial[0] ? tape_changer_match_serial(&t->changer, d->io.serial, &address)
                                : 0;
        if (n != 1) {
            char known[1024] = "";
            size_t at = 0;
            for (size_t k = 0; k < t->changer.nels && at < sizeof(known) - 1; k++)
                if (t->changer.els[k].type == SCSI_ELEM_DRIVE)
                    at += (size_t)snprintf(known + at, sizeof(known) - at, "%s%u '%s'",
                                           at ? ", " : "", t->changer.els[k].address,
                                           t->changer.els[k].ident);
            if (at >= sizeof(known))
                at = sizeof(known) - 1;
            return si_errprintf(err, "archive.tape.drives[%d]: %s (serial '%s') %s; give its "
                                "element (the changer's drive elements and identifiers: %s)",
                                i, d->device, d->io.serial,
                                n ? "matches more than one drive element"
                                  : "matches no drive element's identifier", known);
        }
        for (int j = 0; j < t->ndrives; j++)
            if (j != i && (elements[j] >= 0 || j < i) && t->drives[j].element == address)
                return si_errprintf(err, "archive.tape.drives[%d]: %s (serial %s) is drive "
                                    "element %u, which archive.tape.drives[%d] has as well", i,
                                    d->device, d->io.serial, address, j);
        d->element = address;
        si_log(t->log, SI_LOG_INFO, "tape: drive %d: serial %s is drive element %u (its "
               "identifier in READ ELEMENT STATUS)", i, d->io.serial, address);
    }
    return 0;
}

/* archive.tape.drives left out with a /dev/sgN changer: the tape drives
 * sysfs relates to it (scsi_sg_list: the same target, or the only changer
 * on their host), each then given its element by serial number. A changer
 * path that is a udev link is resolved first. */
static int discover_drives(tape_t *t, const char *changer, const char *sysfs,
                           char found[][32], si_error_t *err)
{
    char real[PATH_MAX];
    if (!realpath(changer, real))
        snprintf(real, sizeof(real), "%s", changer);
    scsi_sg_entry_t *e = NULL;
    size_t n = 0, idx[TAPE_MAX_DRIVES];
    if (scsi_sg_list(sysfs, &e, &n, err) < 0)
        return si_errprefix(err, "archive.tape.drives left out: finding the drives");
    size_t c = 0;
    while (c < n && !(e[c].type == 8 && strcmp(e[c].path, real) == 0))
        c++;
    size_t nd = c < n ? scsi_sg_drives_of(e, n, c, idx, TAPE_MAX_DRIVES) : 0;
    if (nd == 0) {
        free(e);
        return si_errprintf(err, "archive.tape.drives left out, and %s (%s) %s %s: list "
                            "the drives (stagein-tape devices shows what sysfs has)", changer,
                            real, c < n ? "has no tape drive on its target or host in"
                                        : "is not a changer listed in", sysfs);
    }
    for (size_t i = 0; i < nd; i++) {
        snprintf(found[i], 32, "%s", e[idx[i]].path);
        si_log(t->log, SI_LOG_INFO, "tape: drive %zu: %s (%s %s serial %s, %s), found in sysfs "
               "beside changer %s", i, e[idx[i]].path, e[idx[i]].vendor, e[idx[i]].product,
               e[idx[i]].serial[0] ? e[idx[i]].serial : "-", e[idx[i]].hctl, real);
    }
    free(e);
    return (int)nd;
}

archive_backend_t *archive_tape_new(const archive_backend_opts_t *opts, si_error_t *err)
{
    const si_conf_t *conf = opts->conf;
    archive_backend_t *b = archive_backend_alloc(&tape_ops, sizeof(tape_t), err);
    if (!b)
        return NULL;
    tape_t *t = b->impl;
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_init(&t->changer_mu, NULL);
    pthread_mutex_init(&t->log_mu, NULL);
    pthread_mutex_init(&t->claims_mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    b->volume_loaded = tape_volume_loaded;
    t->cb = opts->cb;
    t->log = opts->log;
    snprintf(t->state_dir, sizeof(t->state_dir), "%s", opts->state_dir);
    t->block = (uint32_t)si_conf_int(conf, "archive.tape.block_size", DEFAULT_BLOCK);
    if (t->block % TAPEVOL_RECORD) {
        si_conf_fail(conf, "archive.tape.block_size", err, "must be a multiple of 512");
        goto fail;
    }
    t->compression = si_conf_bool(conf, "archive.tape.compression", false);
    t->label_blank = si_conf_bool(conf, "archive.tape.label_blank", true);
    t->force_space = strcmp(si_conf_string(conf, "archive.tape.positioning", "auto"), "space") == 0;
    const char *rao = si_conf_string(conf, "archive.tape.rao", "compare");
    t->rao = strcmp(rao, "off") == 0 ? TAPE_RAO_OFF
             : strcmp(rao, "use") == 0 ? TAPE_RAO_USE : TAPE_RAO_COMPARE;
    t->checksum_retries = (int)si_conf_int(conf, "archive.checksum_retries", 1);
    snprintf(t->media, sizeof(t->media), "%s", si_conf_string(conf, "archive.tape.media", "LTO-9"));
    if (tapevol_media_check(t->media, err) < 0) {
        si_errprefix(err, "archive.tape.media");
        goto fail;
    }
    t->capacity = (uint64_t)si_conf_int(conf, "archive.tape.capacity",
                                        (int64_t)tapevol_media_capacity(t->media));
    if (!t->capacity) {
        si_conf_fail(conf, "archive.tape.media", err, "media %s has no known capacity: set "
                     "archive.tape.capacity", t->media);
        goto fail;
    }
    const char *log = si_conf_string(conf, "archive.tape.command_log", NULL);
    if (log && !(t->command_log = fopen(log, "a"))) {
        si_conf_fail(conf, "archive.tape.command_log", err, "%s: %s", log, strerror(errno));
        goto fail;
    }
    const char *changer = si_conf_string(conf, "archive.tape.changer", NULL);
    const config_setting_t *drives = si_conf_setting(conf, "archive.tape.drives");
    char found[TAPE_MAX_DRIVES][32];
    int nd = drives ? config_setting_length(drives) : 0;
    if (changer && !drives && strncmp(changer, "/dev/", 5) == 0) {
        nd = discover_drives(t, changer, si_conf_string(conf, "archive.tape.sysfs",
                                                        "/sys/class/scsi_generic"), found, err);
        if (nd < 0)
            goto fail;
    }
    if (!changer || nd < 1) {
        si_errprintf(err, "archive.backend = \"tape\" needs archive.tape.changer (a /dev/sgN "
                     "or iscsi:// URL) and archive.tape.drives (a list of { device = ...; "
                     "element = N; }; left out with a /dev/sgN changer, the drives sysfs "
                     "relates to it)");
        goto fail;
    }
    int elements[TAPE_MAX_DRIVES];
    if (nd > TAPE_MAX_DRIVES) {
        si_conf_fail(conf, "archive.tape.drives", err, "%d drives (at most %d)", nd,
                     TAPE_MAX_DRIVES);
        goto fail;
    }
    int retries = (int)si_conf_int(conf, "archive.tape.retries", 30);
    int queue_depth = (int)si_conf_int(conf, "archive.tape.queue_depth", 4);
    unsigned retry_ms = (unsigned)(si_conf_float(conf, "archive.tape.retry_interval", 1.0) * 1000);
    if (!(t->changer.dev = tape_open_dev(t, changer, err))) {
        si_errprefix(err, "archive.tape.changer");
        goto fail;
    }
    for (int i = 0; i < nd; i++) {
        const config_setting_t *e = drives ? config_setting_get_elem(drives, (unsigned)i) : NULL;
        const char *dev = drives ? NULL : found[i];
        int element = -1;
        bool has_element = e && config_setting_lookup_int(e, "element", &element);
        if ((e && !config_setting_lookup_string(e, "device", &dev)) ||
            (has_element && (element < 0 || element > 0xffff))) {
            si_errprintf(err, "archive.tape.drives[%d]: needs device (a /dev/sgN or iscsi:// "
                         "URL), and element (the drive's element address, 0..65535) where the "
                         "changer does not report drive serial numbers", i);
            goto fail;
        }
        elements[i] = has_element ? element : -1;
        tdrive_t *d = &t->drives[t->ndrives++];
        d->t = t;
        d->index = i;
        d->vol = -1;
        d->buf_vol = -1;
        d->element = has_element ? (uint16_t)element : 0;
        snprintf(d->device, sizeof(d->device), "%s", dev);
        d->io.retries = retries;
        d->io.retry_ms = retry_ms;
        d->io.queue_depth = queue_depth;
        if (!(d->io.dev = tape_open_dev(t, dev, err)) ||
            tape_drive_identify(&d->io, err) < 0) {
            si_errprefix(err, "archive.tape.drives[%d]", i);
            goto fail;
        }
        if (d->io.inquiry.type != 1) {
            si_errprintf(err, "archive.tape.drives[%d]: %s is not a tape drive (peripheral type "
                         "%d)", i, dev, d->io.inquiry.type);
            goto fail;
        }
        d->io_depth = tape_drive_depth(&d->io);
        char at[32] = "element: by serial";
        if (has_element)
            snprintf(at, sizeof(at), "at element %d", element);
        si_log(t->log, SI_LOG_INFO, "tape: drive %d: %s %s %s serial %s %s, %d "
               "READ/WRITE%s in flight%s", i, d->io.inquiry.vendor, d->io.inquiry.product,
               d->io.inquiry.revision, d->io.serial[0] ? d->io.serial : "-", at,
               d->io_depth, d->io_depth > 1 ? "s" : "",
               d->io_depth < queue_depth
                   ? (d->io.inquiry.cmdque ? " (the transport sends one at a time)"
                                           : " (the drive does not queue commands: CmdQue 0)")
                   : "");
    }
    if (map_drive_elements(t, elements, err) < 0 || tape_inventory(t, err) < 0)
        goto fail;
    t->max_block = t->block;
    for (int v = 0; v < t->nvols; v++)
        for (int64_t f = 0; f < t->vols[v].nfiles; f++)
            if (t->vols[v].files[f].block > t->max_block)
                t->max_block = t->vols[v].files[f].block;
    for (int d = 0; d < t->ndrives; d++) {
        tdrive_t *dr = &t->drives[d];
        if (!(dr->buf = malloc(read_max(t)))) {
            si_errprintf(err, "out of memory");
            goto fail;
        }
        for (; dr->io_nfree < (size_t)dr->io_depth; dr->io_nfree++)
            if (!(dr->io_free[dr->io_nfree] = malloc(read_max(t)))) {
                si_errprintf(err, "out of memory");
                goto fail;
            }
    }
    sched_options_t so;
    sched_options_default(&so);
    if (tape_profile_from_conf(conf, si_conf_string(conf, "archive.tape.profile", "lto9"),
                               &so.profile, err) < 0)
        goto fail;
    t->profile = so.profile;
    so.nvolumes = t->nvols > 0 ? t->nvols : 1;
    so.drives = t->ndrives;
    const char *policy = si_conf_string(conf, "library.policy", SCHED_DEFAULT_POLICY);
    const sched_policy_t *pol = sched_policy_find(policy, err);
    sched_callbacks_t cb = {tape_on_request_done, t};
    if (!pol || !(t->sched = sched_new(pol, &so, &cb, err)))
        goto fail;
    si_log(t->log, SI_LOG_INFO, "tape: library %s: %d drives, %d cartridges, blocks of %u bytes",
           changer, t->ndrives, t->nvols, t->block);
    for (int d = 0; d < t->ndrives; d++) {
        if (pthread_create(&t->drives[d].thread, NULL, drive_main, &t->drives[d]) != 0) {
            si_errprintf(err, "cannot start a drive thread");
            goto fail;
        }
        t->drives[d].started = true;
    }
    return b;
fail:
    tape_free(b);
    return NULL;
}
