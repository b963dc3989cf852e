/* The tape backend's devices and mounts: the changer and drives opened (their
 * commands traced to the command log), a cartridge moved into a drive, its
 * label checked and its index verified against the tape, back to its slot;
 * and the library's inventory at start. */
#include "config.h"

#include "daemon/archive/tape/state.h"

/* ---- the command log --------------------------------------------------------------------- */

static void trace(void *arg, const char *device, const scsi_cmd_t *cmd, const scsi_result_t *res,
                  double seconds)
{
    tape_t *t = arg;
    char args[64] = "";
    const uint8_t *c = cmd->cdb;
    if (c[0] == 0xa5)
        snprintf(args, sizeof(args), " src=%u dst=%u", c[4] << 8 | c[5], c[6] << 8 | c[7]);
    else if (c[0] == 0x11) {
        int32_t n = (int32_t)((uint32_t)c[2] << 16 | (uint32_t)c[3] << 8 | c[4]);
        if (n & 0x800000)
            n -= 0x1000000;
        snprintf(args, sizeof(args), " %s=%d", (c[1] & 7) == 1 ? "filemarks" : (c[1] & 7) == 3
                                                                        ? "eod" : "blocks", n);
    } else if (c[0] == 0x92) {
        uint64_t id = 0;
        for (int i = 4; i < 12; i++)
            id = id << 8 | c[i];
        snprintf(args, sizeof(args), " object=%" PRIu64, id);
    } else if (c[0] == 0x08 || c[0] == 0x0a)
        snprintf(args, sizeof(args), " len=%zu", cmd->len);
    char status[64] = "good";
    if (!res) {
        snprintf(status, sizeof(status), "transport-failure");
    } else if (res->status != SCSI_GOOD) {
        /* the condition: key and additional sense code (UNIT ATTENTION 29h/00h) */
        scsi_sense_t sense;
        if (scsi_sense_parse(res->sense, res->sense_len, &sense) == 0 && sense.valid)
            snprintf(status, sizeof(status), "check(%s %02Xh/%02Xh)",
                     scsi_sense_key_name(sense.key), sense.asc, sense.ascq);
        else
            snprintf(status, sizeof(status), "check(status %02Xh)", res->status);
    }
    pthread_mutex_lock(&t->log_mu);
    fprintf(t->command_log, "%.6f %s %s%s status=%s %.6f\n", si_mono_now(), device, cmd->name, args,
            status, seconds);
    fflush(t->command_log);
    pthread_mutex_unlock(&t->log_mu);
}

/* Back to its home slot (rewound, unloaded). No mu. */
static int unmount(tdrive_t *d, si_error_t *err)
{
    tape_t *t = d->t;
    int v = d->vol;
    if (v < 0)
        return 0;
    if (tape_drive_rewind(&d->io, err) < 0 || tape_drive_unload(&d->io, err) < 0)
        return -1;
    pthread_mutex_lock(&t->changer_mu);
    int rc = tape_changer_move(&t->changer, d->element, t->vols[v].slot, err);
    pthread_mutex_unlock(&t->changer_mu);
    if (rc < 0)
        return -1;
    pthread_mutex_lock(&t->mu);
    t->vols[v].drive = -1;
    d->vol = -1;
    d->verified = false;
    d->buf_vol = -1;
    sched_volume_released(t->sched, v);
    pthread_mutex_unlock(&t->mu);
    return 0;
}

/* A labelled cartridge this state has no index for (a new state directory,
 * or the index lost): its archive files read from the tape, every block,
 * to end of data, and the index written, so that nothing on it is taken for
 * free space. An archive file cut short (no filemark) is left out: the next
 * write replaces it. The head is after the label. No mu; the volume is busy. */
static int scan_index(tdrive_t *d, tvol_t *vol, si_error_t *err)
{
    tape_t *t = d->t;
    uint64_t start = TAPEVOL_FIRST_FILE_OFFSET;
    bool fm, eod;
    size_t got;
    /* past the label's filemark */
    if (tape_drive_read_block(&d->io, d->buf, read_max(t), &got, &fm, &eod, err) < 0)
        return -1;
    if (!fm) {
        vol->scanned = true;
        return eod ? 0 : si_errnoprintf(err, EBADF, "cartridge %s: tape file 0 holds more "
                                        "than the label record; refused", vol->label);
    }
    for (int64_t seq = 1;; seq++) {
        uint64_t bytes = 0;
        uint32_t block = 0;
        for (;;) {
            if (tape_drive_read_block(&d->io, d->buf, read_max(t), &got, &fm, &eod, err) < 0)
                return -1;
            if (fm || eod)
                break;
            if (!block)
                block = (uint32_t)got;
            bytes += got;
        }
        if (eod)
            break;
        char line[128];
        snprintf(line, sizeof(line), "file %" PRId64 " %" PRIu64 " %" PRIu64 " %u\n", seq, start,
                 start + bytes, block ? block : t->block);
        if (si_array_grow((void **)&vol->files, &vol->cap_files, (size_t)seq,
                          sizeof(*vol->files)) < 0)
            return si_errprintf(err, "out of memory");
        vol->files[seq - 1] = (tfile_t){start, start + bytes, block ? block : t->block};
        vol->nfiles = seq;
        if (tape_index_append(t, vol->label, line, err) < 0)
            return -1;
        start += bytes + FM_BYTES;
    }
    if (vol->nfiles)
        si_log(t->log, SI_LOG_WARNING, "tape: cartridge %s: no index in this state; %" PRId64
               " archive files found on the tape and recorded", vol->label, vol->nfiles);
    d->buf_vol = -1;
    vol->scanned = true;
    return 0;
}

/* Why a tape_mount failed: the drive (EHOSTDOWN, ETIMEDOUT) or the cartridge. */
bool tape_is_drive_fault(int e)
{
    return e == EHOSTDOWN || e == ETIMEDOUT || e == ENOMEDIUM;
}

/* A move from the cartridge's recorded slot failed, and the changer's
 * inventory has been read again: where the inventory now has the cartridge
 * (moved by hand, or by another application), it is moved from there, the
 * slot recorded; not found, the mount fails saying so. changer_mu held. */
static int move_from_where_found(tdrive_t *d, tvol_t *vol, si_error_t *err)
{
    tape_t *t = d->t;
    int e = errno;
    const scsi_element_t *at = tape_changer_find(&t->changer, vol->label);
    if (!at) {
        errno = e;
        return si_errprefix(err, "cartridge %s is nowhere in the library's inventory (read "
                            "again after the move failed)", vol->label);
    }
    if (at->address == vol->slot || at->type == SCSI_ELEM_DRIVE) {
        errno = e;
        return si_errprefix(err, "cartridge %s is in %s element %u", vol->label,
                            at->type == SCSI_ELEM_DRIVE ? "drive" : "slot", at->address);
    }
    uint16_t from = at->address;
    si_log(t->log, SI_LOG_WARNING, "tape: cartridge %s is in slot %u, not %u as recorded "
           "(the inventory read again after the move failed: moved by hand?); moving it "
           "from there", vol->label, from, vol->slot);
    if (tape_changer_move(&t->changer, from, d->element, err) < 0)
        return -1;
    pthread_mutex_lock(&t->mu);
    vol->slot = from; /* its home from now on: where it was put */
    pthread_mutex_unlock(&t->mu);
    return 0;
}

/* Volume v into drive d, ready, its label checked: 1 when the cartridge is
 * blank (no label yet), 0 labelled and matching, -1 error (errno EBADF: the
 * label does not match; the cartridge is refused). No mu; v is busy. */
int tape_mount(tdrive_t *d, int v, bool *write_protect, si_error_t *err)
{
    tape_t *t = d->t;
    tvol_t *vol = &t->vols[v];
    if (d->vol != v) {
        if (unmount(d, err) < 0)
            return -1;
        pthread_mutex_lock(&t->changer_mu);
        int rc = tape_changer_move(&t->changer, vol->slot, d->element, err);
        if (rc < 0 && errno != EHOSTDOWN && errno != ETIMEDOUT)
            rc = move_from_where_found(d, vol, err);
        pthread_mutex_unlock(&t->changer_mu);
        if (rc < 0)
            return si_errprefix(err, "tape_mount %s", vol->label);
        pthread_mutex_lock(&t->mu);
        vol->drive = d->index;
        d->vol = v;
        d->buf_vol = -1;
        t->mounts++;
        pthread_mutex_unlock(&t->mu);
        d->io.pos_known = false;
        d->verified = false;
    }
    if (d->verified)
        return 0;
    if (tape_drive_ready(&d->io, err) < 0 ||
        tape_drive_setup(&d->io, !t->compression, write_protect, err) < 0)
        return si_errprefix(err, "tape_mount %s", vol->label);
    if (!t->force_space && !d->io.probed) {
        tape_drive_probe(&d->io);
        si_log(t->log, SI_LOG_INFO, "tape: drive %d positions by %s%s", d->index,
               d->io.can_locate ? "LOCATE(16)" : "SPACE (no LOCATE(16) with block positions)",
               d->io.can_rao ? "; it offers RAO" : "");
    }
    if (tape_drive_to_file(&d->io, 0, err) < 0)
        return si_errprefix(err, "tape_mount %s", vol->label);
    size_t got;
    bool fm, eod;
    if (tape_drive_read_block(&d->io, d->buf, read_max(t), &got, &fm, &eod, err) < 0)
        return si_errprefix(err, "tape_mount %s: reading the label", vol->label);
    d->buf_vol = -1;
    if (eod)
        return 1;
    tapevol_info_t info;
    if (fm || got != TAPEVOL_RECORD || tapevol_label_parse(d->buf, &info, err) < 0) {
        si_errnoprintf(err, EBADF, "cartridge %s: its first block is not a stagein label "
                       "record (%zu bytes%s); refused, nothing written", vol->label, got,
                       fm ? ", a filemark" : "");
        return -1;
    }
    if (strcmp(info.label, vol->label) != 0)
        return si_errnoprintf(err, EBADF, "cartridge %s: its label record says %s (a "
                              "cartridge whose label does not match its barcode and the "
                              "catalog); refused, nothing written", vol->label, info.label);
    d->io.file = 0;
    d->io.block = 1;
    if (vol->nfiles == 0 && !vol->scanned && scan_index(d, vol, err) < 0)
        return si_errprefix(err, "tape_mount %s", vol->label);
    d->verified = true;
    return 0;
}

/* ---- creation ----------------------------------------------------------------------------- */

scsi_dev_t *tape_open_dev(tape_t *t, const char *address, si_error_t *err)
{
    scsi_dev_t *d = scsi_open(address, err);
    if (d && t->command_log)
        scsi_set_trace(d, trace, t);
    return d;
}

/* The cartridges the changer reports (slots and drives), by barcode. */
int tape_inventory(tape_t *t, si_error_t *err)
{
    if (tape_changer_inventory(&t->changer, err) < 0)
        return -1;
    for (size_t i = 0; i < t->changer.nels; i++) {
        const scsi_element_t *e = &t->changer.els[i];
        if (!e->full || !e->barcode[0] || (e->type != SCSI_ELEM_SLOT && e->type != SCSI_ELEM_DRIVE))
            continue;
        si_error_t lerr = {0};
        if (tapevol_label_check(e->barcode, &lerr) < 0) {
            si_log(t->log, SI_LOG_WARNING, "tape: element %u: barcode ignored: %s", e->address,
                   lerr.text);
            continue;
        }
        if (si_array_grow((void **)&t->vols, &t->cap_vols, (size_t)t->nvols + 1,
                          sizeof(*t->vols)) < 0)
            return si_errprintf(err, "out of memory");
        tvol_t *v = &t->vols[t->nvols++];
        memset(v, 0, sizeof(*v));
        snprintf(v->label, sizeof(v->label), "%s", e->barcode);
        v->drive = -1;
        v->slot = e->address;
        v->capacity = t->capacity;
        if (e->type == SCSI_ELEM_DRIVE) {
            if (!e->source_valid)
                return si_errprintf(err, "cartridge %s is in drive element %u and the changer "
                                    "does not say which slot it came from", e->barcode, e->address);
            v->slot = e->source;
            for (int d = 0; d < t->ndrives; d++)
                if (t->drives[d].element == e->address) {
                    v->drive = d;
                    t->drives[d].vol = t->nvols - 1;
                }
        }
        if (tape_index_load(t, v, err) < 0)
            return -1;
    }
    return 0;
}
