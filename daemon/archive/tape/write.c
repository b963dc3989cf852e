/* The tape backend's writes: an aggregate written as one pax tar tape file
 * in variable blocks (several WRITE(6)s in flight behind the one filled), its
 * index line fsync'd once its filemark is on tape. */
#include "config.h"

#include "daemon/archive/tape/state.h"

#include "common/clock.h"
#include "common/fileio.h"

/* ---- writing ------------------------------------------------------------------------------ */

/* The outcome of the oldest WRITE(6) in flight; its buffer back to the pool. */
static int write_reap_one(tdrive_t *d, si_error_t *err)
{
    void *buf = NULL;
    int rc = tape_drive_write_reap(&d->io, &buf, err);
    d->io_n--;
    if (buf)
        d->io_free[d->io_nfree++] = buf;
    return rc;
}

/* Every WRITE(6) in flight reaped; the first failure returned (errno
 * ENOSPC at end of medium). */
static int write_join(tdrive_t *d, si_error_t *err)
{
    int rc = 0, first = 0;
    while (d->io_n > 0) {
        si_error_t e = {0};
        if (write_reap_one(d, &e) < 0 && rc == 0) {
            rc = -1;
            first = errno;
            if (err)
                *err = e;
        }
    }
    errno = first;
    return rc;
}

/* Write-behind: the full block in d->buf is sent (up to io_depth WRITE(6)s
 * in flight) while the worker fills a buffer from the pool; with none free,
 * the oldest write's outcome is taken first. */
static int write_behind(tdrive_t *d, size_t len, si_error_t *err)
{
    if (d->io_nfree == 0 && write_reap_one(d, err) < 0) {
        int e = errno;
        write_join(d, NULL);
        errno = e;
        return -1;
    }
    unsigned char *next = d->io_free[--d->io_nfree];
    if (tape_drive_write_start(&d->io, d->buf, len, err) < 0) {
        d->io_free[d->io_nfree++] = next;
        return -1;
    }
    d->io_n++;
    d->buf = next;
    return 0;
}

typedef struct {
    tdrive_t *d;
    twrite_t *job;
    size_t used;
    uint64_t logical;          /* logical offset of the next byte */
    si_error_t *err;
} twriter_t;

static int put(twriter_t *w, const void *data, size_t len)
{
    const unsigned char *p = data;
    tape_t *t = w->d->t;
    while (len) {
        size_t n = t->block - w->used;
        if (n > len)
            n = len;
        if (p)
            memcpy(w->d->buf + w->used, p, n);
        else
            memset(w->d->buf + w->used, 0, n);
        w->used += n;
        w->logical += n;
        len -= n;
        if (p)
            p += n;
        if (w->used == t->block) {
            if (write_behind(w->d, w->used, w->err) < 0)
                return -1;
            w->used = 0;
        }
    }
    return 0;
}

static int hash_member(const archive_member_t *m, char out[SI_CHECKSUM_TEXT_MAX],
                       si_error_t *err)
{
    int fd = si_open_range(m->path, m->offset, m->size, err);
    if (fd < 0)
        return -1;
    si_checksum_t *sum = si_checksum_new("sha256", err);
    unsigned char buf[1 << 16];
    int rc = sum ? si_checksum_fd(sum, fd, m->offset, m->size, buf, sizeof(buf), err) : -1;
    close(fd);
    if (rc == 0)
        si_checksum_final(sum, out);
    si_checksum_free(sum);
    return rc < 0 ? si_errprefix(err, "%s", m->path) : 0;
}

/* One member: pax header (its checksum known before the data: the cache's
 * record, else hashed first), ustar header, data, padding: the layout of
 * daemon/volume's writer. The data is hashed on the way and compared with
 * the cache's record by the one copy that claims the member first; a
 * member hashed first for want of a record is not hashed again. */
static int put_member(twriter_t *w, size_t index, uint64_t *position)
{
    si_error_t *err = w->err;
    const archive_member_t *m = &w->job->members[index];
    char sum_text[SI_CHECKSUM_TEXT_MAX];
    bool known = m->checksum && si_checksum_text_valid(m->checksum) &&
                 strlen(m->checksum) == TAR_CHECKSUM_LEN;
    if (known)
        snprintf(sum_text, sizeof(sum_text), "%s", m->checksum);
    else if (hash_member(m, sum_text, err) < 0)
        return -1;
    else
        atomic_fetch_add(&w->d->t->bytes_hashed, m->size);
    bool verify = known && atomic_exchange(&w->job->hashed[index], 1) == 0;
    tar_pax_member_t pm = {m->bucket, m->key, m->size, m->mtime, m->headers, m->storage_class};
    size_t plen = tar_pax_records_len(&pm), at = 0;
    char *pax = malloc(plen);
    if (!pax)
        return si_errprintf(err, "out of memory");
    tar_pax_records(pax, plen, &pm, &at);
    memcpy(pax + at, sum_text, TAR_CHECKSUM_LEN);
    char name[600], xname[100];
    snprintf(name, sizeof(name), "%s/%s", m->bucket, m->key);
    const char *base = strrchr(m->key, '/');
    snprintf(xname, sizeof(xname), "PaxHeaders/%.80s", base ? base + 1 : m->key);
    unsigned char block[TAR_BLOCK];
    tar_header(block, xname, 'x', plen, m->mtime);
    int rc = put(w, block, TAR_BLOCK) < 0 || put(w, pax, plen) < 0 ||
                     put(w, NULL, tar_round_up(plen) - plen) < 0 ? -1 : 0;
    free(pax);
    if (rc < 0)
        return -1;
    tar_header(block, name, '0', m->size, m->mtime);
    if (put(w, block, TAR_BLOCK) < 0)
        return -1;
    *position = w->logical;
    int fd = si_open_range(m->path, m->offset, m->size, err);
    if (fd < 0) {
        if (verify)
            atomic_store(&w->job->hashed[index], 0);
        return si_errprefix(err, "member %s/%s", m->bucket, m->key);
    }
    si_checksum_t *sum = verify ? si_checksum_new("sha256", err) : NULL;
    uint64_t left = m->size;
    tape_t *t = w->d->t;
    while ((sum || !verify) && left > 0) {
        /* straight into the block buffer */
        size_t want = t->block - w->used;
        if (want > left)
            want = (size_t)left;
        ssize_t n = read(fd, w->d->buf + w->used, want);
        if (n <= 0) {
            si_errprintf(err, "member %s/%s: %s ended after %" PRIu64 " of %" PRIu64 " bytes",
                         m->bucket, m->key, m->path, m->size - left, m->size);
            break;
        }
        if (sum)
            si_checksum_update(sum, w->d->buf + w->used, (size_t)n);
        w->used += (size_t)n;
        w->logical += (uint64_t)n;
        left -= (uint64_t)n;
        if (w->used == t->block) {
            if (write_behind(w->d, w->used, err) < 0)
                break;
            w->used = 0;
        }
    }
    close(fd);
    if ((verify && !sum) || left > 0) {
        /* not hashed to the end: the next attempt at it (another cartridge) hashes it */
        if (verify)
            atomic_store(&w->job->hashed[index], 0);
        si_checksum_free(sum);
        return -1;
    }
    char got[SI_CHECKSUM_TEXT_MAX];
    if (sum) {
        si_checksum_final(sum, got);
        si_checksum_free(sum);
        atomic_fetch_add(&t->bytes_hashed, m->size);
    }
    if (sum && strcmp(got, sum_text) != 0)
        return si_errnoprintf(err, EBADMSG, "member %s/%s: data has checksum %s, expected %s",
                              m->bucket, m->key, got, sum_text);
    return put(w, NULL, tar_round_up(m->size) - m->size);
}

/* Labels a blank cartridge: the label record, its filemark. */
static int write_label(tdrive_t *d, tvol_t *vol, si_error_t *err)
{
    tape_t *t = d->t;
    unsigned char rec[TAPEVOL_RECORD];
    tapevol_label_format(rec, vol->label, t->media, vol->capacity, (int64_t)time(NULL));
    if (tape_drive_rewind(&d->io, err) < 0 ||
        tape_drive_write_block(&d->io, rec, sizeof(rec), err) < 0 ||
        tape_drive_write_filemark(&d->io, err) < 0)
        return si_errprefix(err, "labelling cartridge %s", vol->label);
    si_log(t->log, SI_LOG_INFO, "tape: cartridge %s labelled", vol->label);
    return 0;
}

/* One copy of an aggregate onto volume v in drive d. No mu; v busy. */
static int write_copy(tdrive_t *d, int v, twrite_t *job, si_error_t *err)
{
    tape_t *t = d->t;
    tvol_t *vol = &t->vols[v];
    bool wp = false;
    int m = tape_mount(d, v, &wp, err);
    if (m < 0)
        return -1;
    if (wp)
        return si_errnoprintf(err, EROFS, "cartridge %s is write protected", vol->label);
    if (m == 1) {
        if (vol->nfiles > 0)
            return si_errnoprintf(err, EBADF, "cartridge %s reads blank but its index has %" PRId64
                                  " archive files: refused", vol->label, vol->nfiles);
        if (!t->label_blank)
            return si_errnoprintf(err, EBADF, "cartridge %s is blank (archive.tape.label_blank "
                                  "is off)", vol->label);
        if (write_label(d, vol, err) < 0)
            return -1;
        d->verified = true;
    }
    int64_t seq = vol->nfiles + 1;
    uint64_t start = tape_vol_used(vol);
    if (tape_drive_to_file(&d->io, seq, err) < 0)
        return si_errprefix(err, "cartridge %s: to the end of archive file %" PRId64,
                            vol->label, seq - 1);
    d->buf_vol = -1;
    twriter_t w = {d, job, 0, start, err};
    for (size_t i = 0; i < job->n; i++)
        if (put_member(&w, i, &job->positions[i]) < 0)
            goto fail;
    if (put(&w, NULL, 2 * TAR_BLOCK) < 0 || write_join(d, err) < 0 ||
        (w.used && tape_drive_write_block(&d->io, d->buf, w.used, err) < 0))
        goto fail;
    uint64_t end = w.logical;
    if (tape_drive_write_filemark(&d->io, err) < 0)
        goto fail;
    char line[128];
    snprintf(line, sizeof(line), "file %" PRId64 " %" PRIu64 " %" PRIu64 " %u\n", seq, start, end,
             t->block);
    if (tape_index_append(t, vol->label, line, err) < 0)
        return -1;
    pthread_mutex_lock(&t->mu);
    bool grown = si_array_grow((void **)&vol->files, &vol->cap_files, (size_t)seq,
                               sizeof(*vol->files)) == 0;
    if (grown) {
        vol->files[seq - 1] = (tfile_t){start, end, t->block};
        vol->nfiles = seq;
    }
    t->bytes_written += end - start;
    t->files_written++;
    pthread_mutex_unlock(&t->mu);
    if (!grown)
        return si_errprintf(err, "out of memory");
    job->file_seq = seq;
    job->used = end + FM_BYTES;
    d->head = end + FM_BYTES;
    return 0;
fail:
    {
        int e = errno;
        write_join(d, NULL); /* the blocks in flight: their outcomes no longer matter */
        errno = e;
    }
    si_errprefix(err, "cartridge %s, archive file %" PRId64, vol->label, seq);
    if (errno == ENOSPC) {
        /* end of medium: the partial archive file is never recorded (the next
         * write would start there, but the cartridge takes none: full) */
        tape_index_append(t, vol->label, "full\n", NULL);
        pthread_mutex_lock(&t->mu);
        vol->full = true;
        pthread_mutex_unlock(&t->mu);
        errno = ENOSPC;
    }
    return -1;
}

/* The volume a write job goes to: this drive's own when it fits, else the
 * first with room not used by another copy of the aggregate nor held by
 * another instance when last asked. *others: how many were left out for
 * that reason alone. mu held. */
static int choose_write_volume(tape_t *t, tdrive_t *d, twrite_t *job, uint64_t bytes,
                               int *others)
{
    int best = -1;
    double now = si_mono_now();
    *others = 0;
    for (int v = 0; v < t->nvols; v++) {
        tvol_t *vol = &t->vols[v];
        bool taken = false;
        for (int c = 0; c < job->ncopies; c++)
            taken |= job->chosen[c] == v;
        bool fits = !vol->refused && !vol->readonly && !vol->full &&
                    tape_vol_used(vol) + bytes <= vol->capacity;
        if (!taken && fits && vol->others_until > now) {
            (*others)++;
            continue;
        }
        if (taken || vol->busy || vol->refused || vol->readonly || vol->full ||
            (vol->drive >= 0 && vol->drive != d->index) || tape_vol_used(vol) + bytes > vol->capacity)
            continue;
        if (vol->drive == d->index)
            return v;
        if (best < 0)
            best = v;
    }
    return best;
}

/* UNIT ATTENTION (a reset, power on, a medium change), becoming ready,
 * ABORTED COMMAND while writing: which blocks in flight reached the tape
 * is unknown. The position is re-read (READ POSITION where the drive has
 * it, logged), the cartridge's label checked again, and the archive file
 * written again from its start, which overwrites what the interrupted
 * attempt left (tape is append only): nothing is on tape twice. No mu. */
static void write_attention(tdrive_t *d, twrite_t *job, int v, const si_error_t *why,
                            int attempt)
{
    tape_t *t = d->t;
    char seen[96] = "";
    scsi_position_t pos;
    if (d->io.can_locate && tape_drive_read_position(&d->io, &pos, NULL) == 0 && pos.block_valid)
        snprintf(seen, sizeof(seen), " (the drive reports logical object %" PRIu64 ")",
                 pos.block);
    d->io.pos_known = false;
    d->verified = false;
    d->buf_vol = -1;
    si_log(t->log, SI_LOG_WARNING, "tape: archive write, copy %d: %s; position re-read%s, "
           "archive file %" PRId64 " of %s written again from its start (%d of %d)", job->copy,
           why->text, seen, t->vols[v].nfiles + 1, t->vols[v].label, attempt, d->io.retries);
    struct timespec ts = {d->io.retry_ms / 1000, (long)(d->io.retry_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Several instances share the library: the volume's lease asked of the
 * writer before it is written (1 ours, 0 another instance's, -1 error).
 * mu held; released while asking (the claim is a catalog statement). */
static int claim_write_volume(tape_t *t, twrite_t *job, int v, si_error_t *err)
{
    if (!job->claims)
        return 1;
    char label[sizeof(t->vols[v].label)];
    memcpy(label, t->vols[v].label, sizeof(label));
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_lock(&t->claims_mu);
    int rc = job->claims->claim(job->claims->arg, label, err);
    pthread_mutex_unlock(&t->claims_mu);
    pthread_mutex_lock(&t->mu);
    if (rc == 0)
        t->vols[v].others_until = si_mono_now() + ARCHIVE_CLAIM_POLL_S;
    return rc;
}

/* A claimed volume the write no longer uses (full, refused, write
 * protected): given back. mu held; released while giving it back. */
static void unclaim_write_volume(tape_t *t, twrite_t *job, int v)
{
    if (!job->claims)
        return;
    char label[sizeof(t->vols[v].label)];
    memcpy(label, t->vols[v].label, sizeof(label));
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_lock(&t->claims_mu);
    job->claims->unclaim(job->claims->arg, label);
    pthread_mutex_unlock(&t->claims_mu);
    pthread_mutex_lock(&t->mu);
}

void tape_run_write(tdrive_t *d, twrite_t *job)
{
    tape_t *t = d->t;
    int attentions = 0;
    double claim_until = si_mono_now() + ARCHIVE_CLAIM_WAIT_S;
    uint64_t bytes = 2 * TAR_BLOCK + FM_BYTES;
    for (size_t i = 0; i < job->n; i++) {
        tar_pax_member_t pm = {job->members[i].bucket, job->members[i].key, job->members[i].size,
                               job->members[i].mtime, job->members[i].headers,
                               job->members[i].storage_class};
        bytes += tar_member_bytes(&pm);
    }
    for (;;) {
        int others = 0;
        int v = choose_write_volume(t, d, job, bytes, &others);
        if (v < 0 && others > 0 && si_mono_now() < claim_until) {
            /* every cartridge with room is another instance's for now */
            pthread_mutex_unlock(&t->mu);
            si_sleep(ARCHIVE_CLAIM_POLL_S);
            pthread_mutex_lock(&t->mu);
            continue;
        }
        if (v < 0) {
            if (others > 0)
                si_errnoprintf(&job->err, EBUSY, "copy %d: the %d cartridges with %" PRIu64
                               " bytes of room are held by other instances since %.0f s",
                               job->copy, others, bytes, ARCHIVE_CLAIM_WAIT_S);
            else
                si_errnoprintf(&job->err, ENOSPC, "copy %d: no cartridge with %" PRIu64
                               " bytes of room (not full, write protected or refused, and not "
                               "holding another copy)", job->copy, bytes);
            job->rc = -1;
            return;
        }
        t->vols[v].busy = true;
        job->chosen[job->copy - 1] = v;
        si_error_t err = {0};
        int claimed = claim_write_volume(t, job, v, &err);
        if (claimed != 1) {
            t->vols[v].busy = false;
            job->chosen[job->copy - 1] = -1;
            if (claimed == 0)
                continue; /* another instance's: another cartridge, or wait */
            job->err = err;
            job->rc = -1;
            return;
        }
        pthread_mutex_unlock(&t->mu);
        int rc = write_copy(d, v, job, &err);
        int e = errno;
        if (rc < 0 && e == EAGAIN && attentions < d->io.retries) {
            write_attention(d, job, v, &err, ++attentions);
            pthread_mutex_lock(&t->mu);
            t->vols[v].busy = false;
            unclaim_write_volume(t, job, v); /* asked again with the next try */
            job->chosen[job->copy - 1] = -1; /* this drive's own cartridge again */
            continue;
        }
        pthread_mutex_lock(&t->mu);
        t->vols[v].busy = false;
        if (rc == 0) {
            job->vol = v;
            job->rc = 0;
            return;
        }
        si_log(t->log, SI_LOG_WARNING, "tape: archive write, copy %d: %s", job->copy, err.text);
        if (e == EROFS)
            t->vols[v].readonly = true;
        else if (e == EBADF)
            t->vols[v].refused = true;
        /* this cartridge takes nothing of this write (its state set first:
         * mu is released while the claim is given back) */
        unclaim_write_volume(t, job, v);
        if (e == EROFS) {
            /* this cartridge, and another drive for the copy: a drive that
             * reports write protection on every cartridge would take them all */
            job->chosen[job->copy - 1] = -1;
            job->wp_drives |= UINT64_C(1) << d->index;
            job->taken = false;
            return;
        } else if (e == EBADF) {
            snprintf(t->vols[v].why, sizeof(t->vols[v].why), "%s", err.text);
        } else if (e != ENOSPC) {
            if (tape_is_drive_fault(e)) {
                d->failed = true;
                snprintf(d->why, sizeof(d->why), "%s", err.text);
            }
            job->err = err;
            job->rc = -1;
            return;
        }
        job->chosen[job->copy - 1] = -1; /* another cartridge */
    }
}
