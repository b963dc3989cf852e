/* The tape backend's reads: a mounted cartridge read in the scheduler's
 * order, with up to tape_drive_depth READs in flight ahead of the block
 * being delivered, on through the archive file (its next objects). */
#include "config.h"

#include "daemon/archive/tape/state.h"

/* ---- the blocks read ahead: several READs in flight ------------------------------------ */

/* Reaps every READ in flight, their blocks dropped (the head ends after
 * the last one). Before any other command on the drive. */
void tape_stream_stop(tdrive_t *d)
{
    while (d->io_n > 0) {
        void *buf = NULL;
        size_t got;
        bool fm, eod;
        tape_drive_read_reap(&d->io, &buf, &got, &fm, &eod, NULL);
        d->io_n--;
        if (buf)
            d->io_free[d->io_nfree++] = buf;
    }
}

/* Keeps READs in flight from where the head is, through the blocks of tape
 * file `file` (nblocks): they read on while the block in d->buf is
 * delivered, and on into the next objects of the archive file. */
static void stream_fill(tdrive_t *d, int v, int64_t file, uint64_t nblocks)
{
    if (d->io_n == 0) {
        if (!d->io.pos_known || d->io.file != file)
            return;
        d->rd_vol = v;
        d->rd_file = file;
        d->rd_next = d->io.block;
    } else if (d->rd_vol != v || d->rd_file != file) {
        return;
    }
    while (d->io_n < (size_t)d->io_depth && d->io_nfree > 0 && d->rd_next < nblocks) {
        unsigned char *buf = d->io_free[d->io_nfree - 1];
        if (tape_drive_read_start(&d->io, buf, read_max(d->t), NULL) < 0)
            return; /* read when needed instead, where a failure is reported */
        d->io_nfree--;
        d->io_n++;
        d->rd_next++;
    }
}

/* Block `block` of tape file `file` into d->buf from the READs in flight:
 * 1 when it was among them (those before it dropped), 0 when not (the
 * stream stopped: the caller positions and reads), -1 when its READ or one
 * before it failed (err, errno; the stream stopped). */
static int stream_get(tdrive_t *d, int v, int64_t file, uint64_t block, si_error_t *err)
{
    if (d->io_n == 0 || d->rd_vol != v || d->rd_file != file || block >= d->rd_next ||
        block < d->rd_next - d->io_n) {
        tape_stream_stop(d);
        return 0;
    }
    for (;;) {
        uint64_t b = d->rd_next - d->io_n;
        void *buf = NULL;
        size_t got;
        bool fm, eod;
        int rc = tape_drive_read_reap(&d->io, &buf, &got, &fm, &eod, err);
        d->io_n--;
        if (!buf) {
            tape_stream_stop(d);
            return -1;
        }
        if (rc == 0 && b == block && !(fm || eod || got == 0)) {
            d->io_free[d->io_nfree++] = d->buf;
            d->buf = buf;
            d->buf_len = got;
            d->buf_vol = v;
            d->buf_file = file;
            d->buf_block = block;
            return 1;
        }
        d->io_free[d->io_nfree++] = buf;
        if (rc < 0 || fm || eod || got == 0) {
            int e = rc < 0 ? errno : EIO;
            tape_stream_stop(d);
            if (rc == 0)
                si_errnoprintf(err, EIO, "archive file %" PRId64 " ends early", file);
            errno = e;
            return -1;
        }
    }
}

/* The bytes of one copy into the sink, block by block; the last block read
 * stays in d->buf for an object that starts in it. */
static int read_copy(tdrive_t *d, int v, const archive_item_t *item, const archive_copy_t *cp,
                     si_error_t *err)
{
    tape_t *t = d->t;
    const tvol_t *vol = &t->vols[v];
    if (cp->file_seq < 1 || cp->file_seq > vol->nfiles)
        return si_errnoprintf(err, EIO, "volume %s has no record of archive file %" PRId64
                              " (its index %s/tape/%s.index lacks it)", vol->label, cp->file_seq,
                              t->state_dir, vol->label);
    const tfile_t *f = &vol->files[cp->file_seq - 1];
    if (cp->position < f->start || cp->position + item->size > f->end)
        return si_errnoprintf(err, EIO, "volume %s: position %" PRIu64 " is outside archive "
                              "file %" PRId64, vol->label, cp->position, cp->file_seq);
    if (f->block > t->max_block)
        return si_errnoprintf(err, EIO, "volume %s: archive file %" PRId64 " has blocks of %u "
                              "bytes, more than this daemon reads (%u)", vol->label,
                              cp->file_seq, f->block, t->max_block);
    uint64_t rel = cp->position - f->start;
    uint64_t block = rel / f->block;
    size_t skip = (size_t)(rel % f->block);
    uint64_t left = item->size;
    uint64_t nblocks = (f->end - f->start + f->block - 1) / f->block;
    char mismatch[sizeof(err->text)] = "checksum mismatch";
    int attentions = 0;
    for (int attempt = 0; attempt <= t->checksum_retries; attempt++) {
        void *session = NULL;
        if (t->cb.begin(t->cb.arg, item, &session, err) < 0)
            return -1;
        uint64_t b = block, done = 0;
        size_t off = skip;
        left = item->size;
        int rc = 0;
        while (left > 0) {
            bool have = d->buf_vol == v && d->buf_file == cp->file_seq && d->buf_block == b;
            int streamed = have ? 1 : stream_get(d, v, cp->file_seq, b, err);
            if (streamed < 0) {
                rc = -1;
                break;
            }
            if (streamed == 0) {
                bool fm, eod;
                size_t got;
                d->buf_vol = -1;
                if (tape_drive_to_block(&d->io, cp->file_seq, b,
                                        tape_file_base(vol, cp->file_seq), err) < 0 ||
                    tape_drive_read_block(&d->io, d->buf, read_max(t), &got, &fm, &eod, err) < 0) {
                    rc = -1;
                    break;
                }
                if (fm || eod || got == 0) {
                    rc = si_errnoprintf(err, EIO, "archive file %" PRId64 " ends early",
                                        cp->file_seq);
                    break;
                }
                d->buf_len = got;
                d->buf_vol = v;
                d->buf_file = cp->file_seq;
                d->buf_block = b;
            }
            if (off >= d->buf_len) {
                rc = si_errnoprintf(err, EIO, "block %" PRIu64 " of archive file %" PRId64
                                    " is %zu bytes, %u expected", b, cp->file_seq, d->buf_len,
                                    f->block);
                break;
            }
            stream_fill(d, v, cp->file_seq, nblocks);
            size_t n = d->buf_len - off;
            if (n > left)
                n = (size_t)left;
            if (t->cb.write(t->cb.arg, session, d->buf + off, n, err) < 0) {
                rc = -1;
                break;
            }
            left -= n;
            done += n;
            if (t->cb.progress)
                t->cb.progress(t->cb.arg, item->object_id, done);
            off = 0;
            b++;
        }
        if (rc < 0) {
            int e = errno;
            tape_stream_stop(d);
            d->buf_vol = -1;
            t->cb.abort(t->cb.arg, session);
            if (e == EAGAIN && attentions++ < d->io.retries) {
                /* UNIT ATTENTION (a reset, a medium change), becoming ready: the
                 * head may have moved; positioned again from BOT, read again */
                si_log(t->log, SI_LOG_WARNING, "tape: drive %d: %s; reading object %" PRId64
                       " again from a known position (%d of %d)", d->index, err->text,
                       item->object_id, attentions, d->io.retries);
                d->io.pos_known = false;
                struct timespec ts = {d->io.retry_ms / 1000,
                                      (long)(d->io.retry_ms % 1000) * 1000000L};
                nanosleep(&ts, NULL);
                attempt--;
                continue;
            }
            errno = e;
            return si_errprefix(err, "volume %s, archive file %" PRId64 ", block %" PRIu64
                                " (position %" PRIu64 ")", vol->label, cp->file_seq, b,
                                cp->position);
        }
        if (t->cb.commit(t->cb.arg, session, err) == 0) {
            pthread_mutex_lock(&t->mu);
            t->bytes_read += item->size;
            pthread_mutex_unlock(&t->mu);
            return 0;
        }
        if (errno != EBADMSG)
            return -1;
        snprintf(mismatch, sizeof(mismatch), "%s", err->text);
        tape_stream_stop(d);
        d->buf_vol = -1; /* re-read from the medium */
    }
    return si_errnoprintf(err, EBADMSG, "%s (read %d times from volume %s at %" PRIu64 ")",
                          mismatch, t->checksum_retries + 1, vol->label, cp->position);
}

/* Work on volume v in the scheduler's order until its queue is empty. mu held. */
void tape_read_volume(tdrive_t *d, int v)
{
    tape_t *t = d->t;
    sched_read_t r;
    tape_rao_consult(d, v);
    while (!t->stop && !d->failed && sched_next_read(t->sched, v, d->head, si_mono_now(), &r) == 1) {
        trec_t *rec = tape_rec_get(t, r.object_id);
        if (!rec || rec->cancelled) {
            tape_rec_report(t, r.object_id, false, "cancelled");
            sched_read_done(t->sched, &r, si_mono_now());
            continue;
        }
        archive_item_t item = rec->item;
        const archive_copy_t *cp = NULL;
        for (int c = 0; c < item.ncopies; c++)
            if (strcmp(item.copies[c].volume, t->vols[v].label) == 0)
                cp = &item.copies[c];
        pthread_mutex_unlock(&t->mu);
        si_error_t err = {0};
        int rc = cp ? read_copy(d, v, &item, cp, &err)
                    : si_errnoprintf(&err, EIO, "no copy on volume %s", t->vols[v].label);
        int e = errno;
        pthread_mutex_lock(&t->mu);
        if (rc == 0) {
            t->reads++;
            d->head = cp->position + item.size;
            /* reported before the scheduler hears of it: the last read of a
             * request ends the request, whose leftovers are its failures */
            tape_rec_report(t, r.object_id, true, NULL);
            sched_read_done(t->sched, &r, si_mono_now());
        } else if (tape_is_drive_fault(e)) {
            /* the drive stopped answering: offline; the cartridge stays in it,
             * so its queue moves to other copies */
            d->failed = true;
            snprintf(d->why, sizeof(d->why), "%s", err.text);
            si_log(t->log, SI_LOG_ERROR, "tape: drive %d (%s) offline: %s", d->index, d->device,
                   err.text);
            sched_read_retry(t->sched, &r);
            sched_volume_lost(t->sched, v, si_mono_now(), err.text);
            t->vols[v].busy = true; /* stuck in the failed drive */
            return;
        } else {
            t->read_failures++;
            si_log(t->log, SI_LOG_WARNING, "tape: %s", err.text);
            /* its own reason, not the request's: recorded first, then the
             * scheduler queues another copy (the record stays) or gives up */
            trec_t *fr = tape_rec_get(t, r.object_id);
            if (fr)
                snprintf(fr->why, sizeof(fr->why), "%s", err.text);
            sched_read_failed(t->sched, &r, si_mono_now(), err.text);
        }
    }
    if (d->io_n > 0) {
        /* the READs read ahead end before the drive does anything else */
        pthread_mutex_unlock(&t->mu);
        tape_stream_stop(d);
        pthread_mutex_lock(&t->mu);
    }
}
