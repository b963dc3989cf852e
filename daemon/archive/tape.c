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

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/text.h"
#include "daemon/archive/backend.h"
#include "daemon/archive/tape/drive.h"
#include "daemon/sched/sched.h"
#include "daemon/volume/tar.h"
#include "daemon/volume/volume.h"

#define TAPE_MAX_DRIVES 64
#define DEFAULT_BLOCK (256u << 10)
#define FM_BYTES TAPEVOL_RECORD      /* logical bytes of a filemark */

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
    {"archive.tape.capacity", SI_CONF_INT, 1 << 20, INT64_MAX, NULL},
    {"archive.tape.profile", SI_CONF_STRING, 0, 0, "lto9|lto10"},
    {"archive.tape.positioning", SI_CONF_STRING, 0, 0, "auto|space"},
    {"archive.tape.retries", SI_CONF_INT, 0, 1000, NULL},
    {"archive.tape.retry_interval", SI_CONF_FLOAT, 0.001, 60, NULL},
    {"archive.tape.command_log", SI_CONF_STRING, 0, 0, NULL},
    SI_CONF_KEYS_END,
};

typedef struct {
    uint64_t start, end;
    uint32_t block;
} tfile_t;

typedef struct {
    char label[ARCHIVE_LABEL_MAX + 1];
    uint16_t slot;             /* home storage element */
    int drive;                 /* -1: not in a drive */
    bool busy;                 /* being mounted, read or written */
    bool refused, readonly, full;
    bool scanned;              /* its index checked against the tape this run */
    char why[300];             /* why refused */
    uint64_t capacity;
    int64_t nfiles;
    tfile_t *files;            /* files[seq - 1] */
} tvol_t;

typedef struct {
    archive_item_t item;
    uint64_t req;
    bool cancelled;
    char why[300];             /* the latest failure of a copy */
} trec_t;

typedef struct {
    uint64_t *tokens;
    size_t n;
} treq_t;

typedef struct tape tape_t;

typedef struct {
    tape_t *t;
    int index;
    char device[256];
    uint16_t element;
    tape_drive_t io;
    pthread_t thread;
    bool started;
    int vol;                   /* the cartridge in it, -1 none */
    bool verified;             /* its label checked since it was loaded (or found) */
    bool failed;
    char why[300];
    uint64_t head;             /* logical bytes, for the scheduler */
    unsigned char *buf;        /* one block: the last one read stays for the next object */
    size_t buf_len;
    int buf_vol;
    int64_t buf_file;
    uint64_t buf_block;
    /* Read-ahead: while the worker delivers a block, the next block of the
     * same object is read by this drive's reader thread into pf_buf (the
     * worker leaves the SCSI handle alone until it has joined it). */
    pthread_t pf_thread;
    bool pf_started, pf_stop, pf_pending, pf_done;
    pthread_mutex_t pf_mu;
    pthread_cond_t pf_cv;
    unsigned char *pf_buf;
    int64_t pf_file;
    uint64_t pf_block;
    size_t pf_write;           /* >0: write pf_buf[0, pf_write) instead of reading */
    size_t pf_got;
    bool pf_fm, pf_eod;
    int pf_rc, pf_errno;
    si_error_t pf_err;
} tdrive_t;

typedef struct {
    const archive_member_t *members;
    size_t n;
    int copy;
    int *chosen;               /* the aggregate's volumes, one per copy (-1 none yet) */
    int ncopies;
    bool taken, done;
    uint64_t wp_drives;        /* drives that found a cartridge write protected for it */
    int rc;
    si_error_t err;
    int vol;
    uint64_t *positions;       /* per member */
    int64_t file_seq;
    uint64_t used;
} twrite_t;

typedef struct {
    int64_t id;
    bool ok;
    char why[300];
} treport_t;

struct tape {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t changer_mu;
    bool stop;
    archive_recall_cb_t cb;
    si_log_t *log;
    char state_dir[PATH_MAX];
    uint32_t block;
    uint32_t max_block;        /* the largest block of any indexed archive file, or block */
    bool compression, label_blank, force_space;
    char media[TAPEVOL_MEDIA_MAX + 1];
    uint64_t capacity;
    int checksum_retries;
    FILE *command_log;
    pthread_mutex_t log_mu;

    tape_changer_t changer;
    tdrive_t drives[TAPE_MAX_DRIVES];
    int ndrives;
    tvol_t *vols;
    int nvols;
    sched_t *sched;

    trec_t **recs;             /* by token - 1 */
    size_t nrecs, cap_recs;
    treq_t *reqs;              /* by request id - 1 */
    size_t nreqs, cap_reqs;
    twrite_t **writes;
    size_t nwrites;
    treport_t *reports;        /* done, to be reported outside mu */
    size_t nreports, cap_reports;
    uint64_t outstanding, outstanding_bytes;
    uint64_t mounts, reads, read_failures, bytes_read, bytes_written, files_written;
};

/* Reads ask for twice the block size: a block written with it is then
 * shorter than asked by at least its own length, and tgt 1.0.85 sends only
 * min(block, asked - block) bytes of a short block (its residue): a real
 * drive sends the whole block either way. */
static size_t read_max(const tape_t *t)
{
    return 2 * (size_t)t->max_block;
}

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

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
    pthread_mutex_lock(&t->log_mu);
    fprintf(t->command_log, "%.6f %s %s%s status=%s %.6f\n", mono(), device, cmd->name, args,
            !res ? "transport-failure" : res->status == 0 ? "good" : "check", seconds);
    fflush(t->command_log);
    pthread_mutex_unlock(&t->log_mu);
}

/* ---- per-cartridge index ------------------------------------------------------------------- */

static void index_path(const tape_t *t, const char *label, char *out, size_t size)
{
    snprintf(out, size, "%s/tape/%s.index", t->state_dir, label);
}

static int index_load(tape_t *t, tvol_t *v, si_error_t *err)
{
    char path[PATH_MAX];
    index_path(t, v->label, path, sizeof(path));
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT ? 0 : si_errprintf(err, "%s: %s", path, strerror(errno));
    char line[256];
    int lineno = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        int64_t seq;
        uint64_t start, end;
        uint32_t block;
        if (strncmp(line, "full", 4) == 0) {
            v->full = true;
            continue;
        }
        if (sscanf(line, "file %" SCNd64 " %" SCNu64 " %" SCNu64 " %" SCNu32, &seq, &start, &end,
                   &block) != 4 || seq != v->nfiles + 1 || end < start || block == 0) {
            fclose(f);
            return si_errprintf(err, "%s:%d: malformed (expected 'file %" PRId64
                                " START END BLOCK_SIZE')", path, lineno, v->nfiles + 1);
        }
        tfile_t *grown = realloc(v->files, (size_t)seq * sizeof(*grown));
        if (!grown) {
            fclose(f);
            return si_errprintf(err, "out of memory");
        }
        v->files = grown;
        v->files[seq - 1] = (tfile_t){start, end, block};
        v->nfiles = seq;
    }
    fclose(f);
    return 0;
}

static int index_append(tape_t *t, const char *label, const char *line, si_error_t *err)
{
    char dir[PATH_MAX], path[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/tape", t->state_dir);
    mkdir(dir, 0700);
    index_path(t, label, path, sizeof(path));
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    size_t len = strlen(line);
    if (fd < 0 || write(fd, line, len) != (ssize_t)len || fsync(fd) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return si_errnoprintf(err, e, "%s: %s", path, strerror(e));
    }
    close(fd);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

/* Logical end of data: after the label (and its filemark), or the last file's filemark. */
static uint64_t vol_used(const tvol_t *v)
{
    return v->nfiles ? v->files[v->nfiles - 1].end + FM_BYTES : TAPEVOL_FIRST_FILE_OFFSET;
}

/* The logical object number of the first block of tape file seq (LOCATE):
 * every block and filemark before it. */
static uint64_t file_base(const tvol_t *v, int64_t seq)
{
    uint64_t n = 2; /* the label block and its filemark */
    for (int64_t i = 0; i + 1 < seq && i < v->nfiles; i++) {
        const tfile_t *f = &v->files[i];
        n += (f->end - f->start + f->block - 1) / f->block + 1;
    }
    return n;
}

/* ---- reports ----------------------------------------------------------------------------- */

static trec_t *rec_get(tape_t *t, uint64_t token)
{
    return token >= 1 && token <= t->nrecs ? t->recs[token - 1] : NULL;
}

/* Queues the outcome of a record and frees it. mu held. */
static void rec_report(tape_t *t, uint64_t token, bool ok, const char *why)
{
    trec_t *r = rec_get(t, token);
    if (!r)
        return;
    t->recs[token - 1] = NULL;
    t->outstanding--;
    t->outstanding_bytes -= r->item.size;
    if (si_array_grow((void **)&t->reports, &t->cap_reports, t->nreports + 1,
                      sizeof(*t->reports)) == 0) {
        treport_t *p = &t->reports[t->nreports++];
        p->id = r->item.object_id;
        p->ok = ok && !r->cancelled;
        snprintf(p->why, sizeof(p->why), "%s", r->cancelled ? "cancelled" : why ? why : "");
    }
    free(r);
}

/* Delivers queued outcomes; called without mu. */
static void flush_reports(tape_t *t)
{
    pthread_mutex_lock(&t->mu);
    treport_t *list = t->reports;
    size_t n = t->nreports;
    t->reports = NULL;
    t->nreports = t->cap_reports = 0;
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < n; i++)
        if (t->cb.done)
            t->cb.done(t->cb.arg, list[i].id, list[i].ok, list[i].ok ? NULL : list[i].why);
    free(list);
}

/* The scheduler finished a request: what of it is still here could not be read. */
static void on_request_done(void *arg, uint64_t request, double now, size_t failed, const char *why)
{
    tape_t *t = arg;
    (void)now, (void)failed;
    if (request < 1 || request > t->nreqs)
        return;
    treq_t *q = &t->reqs[request - 1];
    for (size_t i = 0; i < q->n; i++) {
        trec_t *r = rec_get(t, q->tokens[i]);
        rec_report(t, q->tokens[i], false, r && r->why[0] ? r->why : why ? why : "recall failed");
    }
    free(q->tokens);
    q->tokens = NULL;
    q->n = 0;
}

/* ---- mounting ----------------------------------------------------------------------------- */

static int vol_index(const tape_t *t, const char *label)
{
    for (int v = 0; v < t->nvols; v++)
        if (strcmp(t->vols[v].label, label) == 0)
            return v;
    return -1;
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
        tfile_t *grown = realloc(vol->files, (size_t)seq * sizeof(*grown));
        if (!grown)
            return si_errprintf(err, "out of memory");
        vol->files = grown;
        vol->files[seq - 1] = (tfile_t){start, start + bytes, block ? block : t->block};
        vol->nfiles = seq;
        if (index_append(t, vol->label, line, err) < 0)
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

/* Why a mount failed: the drive (EHOSTDOWN, ETIMEDOUT) or the cartridge. */
static bool drive_fault(int e)
{
    return e == EHOSTDOWN || e == ETIMEDOUT || e == ENOMEDIUM;
}

/* Volume v into drive d, ready, its label checked: 1 when the cartridge is
 * blank (no label yet), 0 labelled and matching, -1 error (errno EBADF: the
 * label does not match; the cartridge is refused). No mu; v is busy. */
static int mount(tdrive_t *d, int v, bool *write_protect, si_error_t *err)
{
    tape_t *t = d->t;
    tvol_t *vol = &t->vols[v];
    if (d->vol != v) {
        if (unmount(d, err) < 0)
            return -1;
        pthread_mutex_lock(&t->changer_mu);
        int rc = tape_changer_move(&t->changer, vol->slot, d->element, err);
        pthread_mutex_unlock(&t->changer_mu);
        if (rc < 0)
            return si_errprefix(err, "mount %s", vol->label);
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
        return si_errprefix(err, "mount %s", vol->label);
    if (!t->force_space && !d->io.probed) {
        tape_drive_probe(&d->io);
        si_log(t->log, SI_LOG_INFO, "tape: drive %d positions by %s%s", d->index,
               d->io.can_locate ? "LOCATE(16)" : "SPACE (no LOCATE(16) with block positions)",
               d->io.can_rao ? "; it offers RAO" : "");
    }
    if (tape_drive_to_file(&d->io, 0, err) < 0)
        return si_errprefix(err, "mount %s", vol->label);
    size_t got;
    bool fm, eod;
    if (tape_drive_read_block(&d->io, d->buf, read_max(t), &got, &fm, &eod, err) < 0)
        return si_errprefix(err, "mount %s: reading the label", vol->label);
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
        return si_errprefix(err, "mount %s", vol->label);
    d->verified = true;
    return 0;
}

/* ---- reading ------------------------------------------------------------------------------- */

static void *reader_main(void *arg)
{
    tdrive_t *d = arg;
    pthread_mutex_lock(&d->pf_mu);
    for (;;) {
        while (!d->pf_stop && !(d->pf_pending && !d->pf_done))
            pthread_cond_wait(&d->pf_cv, &d->pf_mu);
        if (d->pf_stop)
            break;
        pthread_mutex_unlock(&d->pf_mu);
        si_error_t err = {0};
        size_t got = 0;
        bool fm = false, eod = false;
        int rc = d->pf_write
                     ? tape_drive_write_block(&d->io, d->pf_buf, d->pf_write, &err)
                     : tape_drive_read_block(&d->io, d->pf_buf, read_max(d->t), &got, &fm, &eod,
                                             &err);
        int e = errno;
        pthread_mutex_lock(&d->pf_mu);
        d->pf_got = got;
        d->pf_fm = fm;
        d->pf_eod = eod;
        d->pf_rc = rc;
        d->pf_errno = e;
        d->pf_err = err;
        d->pf_done = true;
        pthread_cond_broadcast(&d->pf_cv);
    }
    pthread_mutex_unlock(&d->pf_mu);
    return NULL;
}

/* Reads block `block` of tape file `file` ahead, where the head already is. */
static void prefetch_start(tdrive_t *d, int64_t file, uint64_t block)
{
    if (!d->pf_started || d->pf_pending || !d->io.pos_known || d->io.file != file ||
        d->io.block != block)
        return;
    pthread_mutex_lock(&d->pf_mu);
    d->pf_file = file;
    d->pf_block = block;
    d->pf_write = 0;
    d->pf_pending = true;
    d->pf_done = false;
    pthread_cond_broadcast(&d->pf_cv);
    pthread_mutex_unlock(&d->pf_mu);
}

/* Waits for the read ahead, if any: 1 when it read block `block` of `file`
 * (now in d->buf), 0 when there was none or another one (discarded), -1
 * when it failed (err, errno). */
static int prefetch_join(tdrive_t *d, int v, int64_t file, uint64_t block, si_error_t *err)
{
    if (!d->pf_pending)
        return 0;
    pthread_mutex_lock(&d->pf_mu);
    while (!d->pf_done)
        pthread_cond_wait(&d->pf_cv, &d->pf_mu);
    d->pf_pending = false;
    pthread_mutex_unlock(&d->pf_mu);
    if (d->pf_file != file || d->pf_block != block)
        return 0;
    if (d->pf_rc < 0) {
        if (err)
            *err = d->pf_err;
        errno = d->pf_errno;
        return -1;
    }
    if (d->pf_fm || d->pf_eod || d->pf_got == 0) {
        errno = EIO;
        return si_errnoprintf(err, EIO, "archive file %" PRId64 " ends early", file);
    }
    unsigned char *tmp = d->buf;
    d->buf = d->pf_buf;
    d->pf_buf = tmp;
    d->buf_len = d->pf_got;
    d->buf_vol = v;
    d->buf_file = file;
    d->buf_block = block;
    return 1;
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
    char mismatch[sizeof(err->text)] = "checksum mismatch";
    for (int attempt = 0; attempt <= t->checksum_retries; attempt++) {
        void *session = NULL;
        if (t->cb.begin(t->cb.arg, item, &session, err) < 0)
            return -1;
        uint64_t b = block, done = 0;
        size_t off = skip;
        left = item->size;
        int rc = 0;
        while (left > 0) {
            int pf = prefetch_join(d, v, cp->file_seq, b, err);
            if (pf < 0) {
                rc = -1;
                break;
            }
            if (!(d->buf_vol == v && d->buf_file == cp->file_seq && d->buf_block == b)) {
                bool fm, eod;
                size_t got;
                d->buf_vol = -1;
                if (tape_drive_to_block(&d->io, cp->file_seq, b,
                                        file_base(vol, cp->file_seq), err) < 0 ||
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
            size_t n = d->buf_len - off;
            if (n > left)
                n = (size_t)left;
            else if (n < left)
                prefetch_start(d, cp->file_seq, b + 1); /* the object goes on */
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
            if (prefetch_join(d, v, -1, 0, NULL) == 0)
                d->buf_vol = -1; /* the head moved past the block kept */
            t->cb.abort(t->cb.arg, session);
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
        d->buf_vol = -1; /* re-read from the medium */
    }
    return si_errnoprintf(err, EBADMSG, "%s (read %d times from volume %s at %" PRIu64 ")",
                          mismatch, t->checksum_retries + 1, vol->label, cp->position);
}

/* Work on volume v in the scheduler's order until its queue is empty. mu held. */
static void read_volume(tdrive_t *d, int v)
{
    tape_t *t = d->t;
    sched_read_t r;
    while (!t->stop && !d->failed && sched_next_read(t->sched, v, d->head, mono(), &r) == 1) {
        trec_t *rec = rec_get(t, r.object_id);
        if (!rec || rec->cancelled) {
            rec_report(t, r.object_id, false, "cancelled");
            sched_read_done(t->sched, &r, mono());
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
            rec_report(t, r.object_id, true, NULL);
            sched_read_done(t->sched, &r, mono());
        } else if (drive_fault(e)) {
            /* the drive stopped answering: offline; the cartridge stays in it,
             * so its queue moves to other copies */
            d->failed = true;
            snprintf(d->why, sizeof(d->why), "%s", err.text);
            si_log(t->log, SI_LOG_ERROR, "tape: drive %d (%s) offline: %s", d->index, d->device,
                   err.text);
            sched_read_retry(t->sched, &r);
            sched_volume_lost(t->sched, v, mono(), err.text);
            t->vols[v].busy = true; /* stuck in the failed drive */
            return;
        } else {
            t->read_failures++;
            si_log(t->log, SI_LOG_WARNING, "tape: %s", err.text);
            /* its own reason, not the request's: recorded first, then the
             * scheduler queues another copy (the record stays) or gives up */
            trec_t *fr = rec_get(t, r.object_id);
            if (fr)
                snprintf(fr->why, sizeof(fr->why), "%s", err.text);
            sched_read_failed(t->sched, &r, mono(), err.text);
        }
    }
}

/* ---- writing ------------------------------------------------------------------------------ */

/* Write-behind: the full block in d->buf goes to the reader thread, which
 * writes it while the worker fills the other buffer; the previous write's
 * outcome (errno ENOSPC at end of medium) is returned first. */
static int write_join(tdrive_t *d, si_error_t *err)
{
    if (!d->pf_pending)
        return 0;
    pthread_mutex_lock(&d->pf_mu);
    while (!d->pf_done)
        pthread_cond_wait(&d->pf_cv, &d->pf_mu);
    d->pf_pending = false;
    pthread_mutex_unlock(&d->pf_mu);
    if (d->pf_rc < 0) {
        if (err)
            *err = d->pf_err;
        errno = d->pf_errno;
        return -1;
    }
    return 0;
}

static int write_behind(tdrive_t *d, size_t len, si_error_t *err)
{
    if (!d->pf_started)
        return tape_drive_write_block(&d->io, d->buf, len, err);
    if (write_join(d, err) < 0)
        return -1;
    unsigned char *tmp = d->buf;
    d->buf = d->pf_buf;
    d->pf_buf = tmp;
    pthread_mutex_lock(&d->pf_mu);
    d->pf_write = len;
    d->pf_file = -1;
    d->pf_pending = true;
    d->pf_done = false;
    pthread_cond_broadcast(&d->pf_cv);
    pthread_mutex_unlock(&d->pf_mu);
    return 0;
}


typedef struct {
    tdrive_t *d;
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

static int hash_file(const char *path, char out[SI_CHECKSUM_TEXT_MAX], si_error_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return si_errprintf(err, "%s: %s", path, strerror(errno));
    si_checksum_t *sum = si_checksum_new("sha256", err);
    unsigned char buf[1 << 16];
    ssize_t n;
    while (sum && (n = read(fd, buf, sizeof(buf))) > 0)
        si_checksum_update(sum, buf, (size_t)n);
    close(fd);
    if (!sum)
        return -1;
    si_checksum_final(sum, out);
    si_checksum_free(sum);
    return 0;
}

/* One member: pax header (its checksum known before the data: the cache's
 * record, else hashed first), ustar header, data (hashed again on the way
 * and compared), padding: the layout of daemon/volume's writer. */
static int put_member(twriter_t *w, const archive_member_t *m, uint64_t *position)
{
    si_error_t *err = w->err;
    char sum_text[SI_CHECKSUM_TEXT_MAX];
    if (m->checksum && si_checksum_text_valid(m->checksum) &&
        strlen(m->checksum) == TAR_CHECKSUM_LEN)
        snprintf(sum_text, sizeof(sum_text), "%s", m->checksum);
    else if (hash_file(m->path, sum_text, err) < 0)
        return -1;
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
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return si_errprintf(err, "member %s/%s: %s: %s", m->bucket, m->key, m->path,
                            strerror(errno));
    si_checksum_t *sum = si_checksum_new("sha256", err);
    uint64_t left = m->size;
    tape_t *t = w->d->t;
    while (sum && left > 0) {
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
    if (!sum || left > 0) {
        si_checksum_free(sum);
        return -1;
    }
    char got[SI_CHECKSUM_TEXT_MAX];
    si_checksum_final(sum, got);
    si_checksum_free(sum);
    if (strcmp(got, sum_text) != 0)
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
    int m = mount(d, v, &wp, err);
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
    uint64_t start = vol_used(vol);
    if (tape_drive_to_file(&d->io, seq, err) < 0)
        return si_errprefix(err, "cartridge %s: to the end of archive file %" PRId64,
                            vol->label, seq - 1);
    d->buf_vol = -1;
    twriter_t w = {d, 0, start, err};
    for (size_t i = 0; i < job->n; i++)
        if (put_member(&w, &job->members[i], &job->positions[i]) < 0)
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
    if (index_append(t, vol->label, line, err) < 0)
        return -1;
    pthread_mutex_lock(&t->mu);
    tfile_t *grown = realloc(vol->files, (size_t)seq * sizeof(*grown));
    if (grown) {
        vol->files = grown;
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
        write_join(d, NULL); /* the block in flight, if any: its outcome no longer matters */
        errno = e;
    }
    si_errprefix(err, "cartridge %s, archive file %" PRId64, vol->label, seq);
    if (errno == ENOSPC) {
        /* end of medium: the partial archive file is never recorded (the next
         * write would start there, but the cartridge takes none: full) */
        index_append(t, vol->label, "full\n", NULL);
        pthread_mutex_lock(&t->mu);
        vol->full = true;
        pthread_mutex_unlock(&t->mu);
        errno = ENOSPC;
    }
    return -1;
}

/* The volume a write job goes to: this drive's own when it fits, else the
 * first with room not used by another copy of the aggregate. mu held. */
static int choose_write_volume(tape_t *t, tdrive_t *d, twrite_t *job, uint64_t bytes)
{
    int best = -1;
    for (int v = 0; v < t->nvols; v++) {
        tvol_t *vol = &t->vols[v];
        bool taken = false;
        for (int c = 0; c < job->ncopies; c++)
            taken |= job->chosen[c] == v;
        if (taken || vol->busy || vol->refused || vol->readonly || vol->full ||
            (vol->drive >= 0 && vol->drive != d->index) || vol_used(vol) + bytes > vol->capacity)
            continue;
        if (vol->drive == d->index)
            return v;
        if (best < 0)
            best = v;
    }
    return best;
}

static void run_write(tdrive_t *d, twrite_t *job)
{
    tape_t *t = d->t;
    uint64_t bytes = 2 * TAR_BLOCK + FM_BYTES;
    for (size_t i = 0; i < job->n; i++) {
        tar_pax_member_t pm = {job->members[i].bucket, job->members[i].key, job->members[i].size,
                               job->members[i].mtime, job->members[i].headers,
                               job->members[i].storage_class};
        bytes += tar_member_bytes(&pm);
    }
    for (;;) {
        int v = choose_write_volume(t, d, job, bytes);
        if (v < 0) {
            si_errnoprintf(&job->err, ENOSPC, "copy %d: no cartridge with %" PRIu64 " bytes of "
                           "room (not full, write protected or refused, and not holding another "
                           "copy)", job->copy, bytes);
            job->rc = -1;
            return;
        }
        t->vols[v].busy = true;
        job->chosen[job->copy - 1] = v;
        pthread_mutex_unlock(&t->mu);
        si_error_t err = {0};
        int rc = write_copy(d, v, job, &err);
        int e = errno;
        pthread_mutex_lock(&t->mu);
        t->vols[v].busy = false;
        if (rc == 0) {
            job->vol = v;
            job->rc = 0;
            return;
        }
        si_log(t->log, SI_LOG_WARNING, "tape: archive write, copy %d: %s", job->copy, err.text);
        if (e == EROFS) {
            /* this cartridge, and another drive for the copy: a drive that
             * reports write protection on every cartridge would take them all */
            t->vols[v].readonly = true;
            job->chosen[job->copy - 1] = -1;
            job->wp_drives |= UINT64_C(1) << d->index;
            job->taken = false;
            return;
        } else if (e == EBADF) {
            t->vols[v].refused = true;
            snprintf(t->vols[v].why, sizeof(t->vols[v].why), "%s", err.text);
        } else if (e != ENOSPC) {
            if (drive_fault(e)) {
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
            run_write(d, job);
            job->done = job->taken;
            pthread_cond_broadcast(&t->cv);
            continue;
        }
        for (int v = 0; v < t->nvols; v++)
            unavailable[v] = t->vols[v].busy || t->vols[v].refused ||
                             (t->vols[v].drive >= 0 && t->vols[v].drive != d->index);
        double wake = INFINITY;
        int v = sched_choose_volume(t->sched, mono(), d->vol, d->head, unavailable, &wake);
        if (v < 0) {
            double wait = isfinite(wake) ? fmin(fmax(wake - mono(), 0.001), 1.0) : 1.0;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            double at = (double)ts.tv_sec + ts.tv_nsec / 1e9 + wait;
            ts.tv_sec = (time_t)at;
            ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
            pthread_cond_timedwait(&t->cv, &t->mu, &ts);
            continue;
        }
        t->vols[v].busy = true;
        pthread_mutex_unlock(&t->mu);
        si_error_t err = {0};
        bool wp;
        int m = mount(d, v, &wp, &err);
        if (m == 1)
            m = si_errnoprintf(&err, EBADF, "cartridge %s is blank", t->vols[v].label);
        int e = errno;
        pthread_mutex_lock(&t->mu);
        if (m < 0 && drive_fault(e)) {
            /* the drive stopped answering: offline. What is in it (the
             * volume it was to mount, or the one it failed to unload) stays
             * there: its queue moves to other copies; another volume waits
             * for another drive. */
            si_log(t->log, SI_LOG_ERROR, "tape: drive %d (%s) offline: %s", d->index, d->device,
                   err.text);
            d->failed = true;
            snprintf(d->why, sizeof(d->why), "%s", err.text);
            t->vols[v].busy = false;
            if (d->vol >= 0) {
                t->vols[d->vol].busy = true;
                sched_volume_lost(t->sched, d->vol, mono(), err.text);
            }
            if (d->vol != v)
                sched_volume_released(t->sched, v);
        } else if (m < 0) {
            si_log(t->log, SI_LOG_ERROR, "tape: drive %d: %s", d->index, err.text);
            t->vols[v].refused = e == EBADF;
            snprintf(t->vols[v].why, sizeof(t->vols[v].why), "%s", err.text);
            t->vols[v].busy = false;
            sched_volume_lost(t->sched, v, mono(), err.text);
        } else {
            if (d->head == 0 || d->vol != v)
                d->head = TAPEVOL_RECORD;
            read_volume(d, v);
            if (!d->failed)
                t->vols[v].busy = false;
        }
        pthread_mutex_unlock(&t->mu);
        flush_reports(t);
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
            int v = vol_index(t, it->copies[c].volume);
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
    double deadline = batch->deadline > 0 ? mono() + (batch->deadline - (double)time(NULL)) : 0;
    sched_request_t req = {t->nreqs + 1, batch->priority, deadline};
    if (sched_submit(t->sched, mono(), &req, files, n, err) < 0)
        goto unlock;
    for (size_t i = 0; i < n; i++) {
        recs[i]->req = req.id;
        t->recs[t->nrecs++] = recs[i];
        recs[i] = NULL;
        t->outstanding++;
        t->outstanding_bytes += items[i].size;
    }
    t->reqs[t->nreqs++] = (treq_t){tokens, n};
    tokens = NULL;
    pthread_cond_broadcast(&t->cv);
    rc = 0;
unlock:
    pthread_mutex_unlock(&t->mu);
out:
    if (recs)
        for (size_t i = 0; i < n; i++)
            free(recs[i]);
    free(recs);
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
    if (!pos)
        return si_errprintf(err, "out of memory");
    pthread_mutex_lock(&t->mu);
    twrite_t **grown = realloc(t->writes, (t->nwrites + (size_t)ncopies) * sizeof(*grown));
    if (!grown) {
        pthread_mutex_unlock(&t->mu);
        free(pos);
        return si_errprintf(err, "out of memory");
    }
    t->writes = grown;
    for (int c = 0; c < ncopies; c++) {
        chosen[c] = -1;
        jobs[c] = (twrite_t){.members = members, .n = n, .copy = c + 1, .chosen = chosen,
                             .ncopies = ncopies, .vol = -1, .positions = pos + (size_t)c * n};
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
    out->clock_s = mono();
    pthread_mutex_unlock(&t->mu);
    return 0;
}

static void tape_metrics(archive_backend_t *b, FILE *out)
{
    tape_t *t = b->impl;
    archive_status_t st;
    tape_status(b, &st, NULL);
    fprintf(out, "# HELP stagein_drive_state Tape drives of the library by state.\n"
                 "# TYPE stagein_drive_state gauge\n");
    pthread_mutex_lock(&t->mu);
    for (int d = 0; d < t->ndrives; d++) {
        tdrive_t *dr = &t->drives[d];
        fprintf(out, "stagein_drive_state{drive=\"%d\",state=\"%s\",volume=\"%s\"} 1\n", d,
                dr->failed                 ? "failed"
                : dr->vol < 0              ? "empty"
                : t->vols[dr->vol].busy    ? "busy"
                                           : "idle",
                dr->vol >= 0 ? t->vols[dr->vol].label : "");
    }
    uint64_t cmds = scsi_dev_commands(t->changer.dev);
    for (int d = 0; d < t->ndrives; d++)
        cmds += scsi_dev_commands(t->drives[d].io.dev);
    pthread_mutex_unlock(&t->mu);
    archive_metrics_library(out, &st);
    fprintf(out,
            "# HELP stagein_scsi_commands_total SCSI commands sent to the library.\n"
            "# TYPE stagein_scsi_commands_total counter\n"
            "stagein_scsi_commands_total %" PRIu64 "\n", cmds);
}

static void tape_free(archive_backend_t *b)
{
    if (!b)
        return;
    tape_t *t = b->impl;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    for (int d = 0; d < t->ndrives; d++) {
        tdrive_t *dr = &t->drives[d];
        if (dr->started)
            pthread_join(dr->thread, NULL);
        if (dr->pf_started) {
            pthread_mutex_lock(&dr->pf_mu);
            dr->pf_stop = true;
            pthread_cond_broadcast(&dr->pf_cv);
            pthread_mutex_unlock(&dr->pf_mu);
            pthread_join(dr->pf_thread, NULL);
            pthread_mutex_destroy(&dr->pf_mu);
            pthread_cond_destroy(&dr->pf_cv);
        }
        scsi_close(dr->io.dev);
        free(dr->buf);
        free(dr->pf_buf);
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
    pthread_cond_destroy(&t->cv);
    free(t);
    free(b);
}

static const archive_backend_ops_t tape_ops = {
    "tape", tape_recall, tape_cancel, tape_archive, tape_status, tape_metrics, tape_free, false,
    NULL,
};

/* ---- creation ----------------------------------------------------------------------------- */

static scsi_dev_t *open_dev(tape_t *t, const char *address, si_error_t *err)
{
    scsi_dev_t *d = scsi_open(address, err);
    if (d && t->command_log)
        scsi_set_trace(d, trace, t);
    return d;
}

/* The cartridges the changer reports (slots and drives), by barcode. */
static int inventory(tape_t *t, si_error_t *err)
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
        tvol_t *grown = realloc(t->vols, ((size_t)t->nvols + 1) * sizeof(*grown));
        if (!grown)
            return si_errprintf(err, "out of memory");
        t->vols = grown;
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
        if (index_load(t, v, err) < 0)
            return -1;
    }
    return 0;
}

archive_backend_t *archive_tape_new(const archive_backend_opts_t *opts, si_error_t *err)
{
    const si_conf_t *conf = opts->conf;
    archive_backend_t *b = calloc(1, sizeof(*b));
    tape_t *t = calloc(1, sizeof(*t));
    if (!b || !t) {
        free(b);
        free(t);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_init(&t->changer_mu, NULL);
    pthread_mutex_init(&t->log_mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    b->ops = &tape_ops;
    b->impl = t;
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
    if (!changer || !drives || config_setting_length(drives) < 1) {
        si_errprintf(err, "archive.backend = \"tape\" needs archive.tape.changer (a /dev/sgN "
                     "or iscsi:// URL) and archive.tape.drives (a list of { device = ...; "
                     "element = N; })");
        goto fail;
    }
    int nd = config_setting_length(drives);
    if (nd > TAPE_MAX_DRIVES) {
        si_conf_fail(conf, "archive.tape.drives", err, "%d drives (at most %d)", nd,
                     TAPE_MAX_DRIVES);
        goto fail;
    }
    int retries = (int)si_conf_int(conf, "archive.tape.retries", 30);
    unsigned retry_ms = (unsigned)(si_conf_float(conf, "archive.tape.retry_interval", 1.0) * 1000);
    if (!(t->changer.dev = open_dev(t, changer, err))) {
        si_errprefix(err, "archive.tape.changer");
        goto fail;
    }
    for (int i = 0; i < nd; i++) {
        const config_setting_t *e = config_setting_get_elem(drives, (unsigned)i);
        const char *dev = NULL;
        int element = -1;
        if (!config_setting_lookup_string(e, "device", &dev) ||
            !config_setting_lookup_int(e, "element", &element) || element < 0 || element > 0xffff) {
            si_errprintf(err, "archive.tape.drives[%d]: needs device (a /dev/sgN or iscsi:// "
                         "URL) and element (the drive's element address, 0..65535)", i);
            goto fail;
        }
        tdrive_t *d = &t->drives[t->ndrives++];
        d->t = t;
        d->index = i;
        d->vol = -1;
        d->buf_vol = -1;
        d->element = (uint16_t)element;
        snprintf(d->device, sizeof(d->device), "%s", dev);
        d->io.retries = retries;
        d->io.retry_ms = retry_ms;
        if (!(d->io.dev = open_dev(t, dev, err)) ||
            tape_drive_identify(&d->io, err) < 0) {
            si_errprefix(err, "archive.tape.drives[%d]", i);
            goto fail;
        }
        if (d->io.inquiry.type != 1) {
            si_errprintf(err, "archive.tape.drives[%d]: %s is not a tape drive (peripheral type "
                         "%d)", i, dev, d->io.inquiry.type);
            goto fail;
        }
        si_log(t->log, SI_LOG_INFO, "tape: drive %d: %s %s %s serial %s at element %d", i,
               d->io.inquiry.vendor, d->io.inquiry.product, d->io.inquiry.revision,
               d->io.serial[0] ? d->io.serial : "-", element);
    }
    if (inventory(t, err) < 0)
        goto fail;
    t->max_block = t->block;
    for (int v = 0; v < t->nvols; v++)
        for (int64_t f = 0; f < t->vols[v].nfiles; f++)
            if (t->vols[v].files[f].block > t->max_block)
                t->max_block = t->vols[v].files[f].block;
    for (int d = 0; d < t->ndrives; d++) {
        tdrive_t *dr = &t->drives[d];
        if (!(dr->buf = malloc(read_max(t))) || !(dr->pf_buf = malloc(read_max(t)))) {
            si_errprintf(err, "out of memory");
            goto fail;
        }
        pthread_mutex_init(&dr->pf_mu, NULL);
        pthread_cond_init(&dr->pf_cv, NULL);
        if (pthread_create(&dr->pf_thread, NULL, reader_main, dr) != 0) {
            pthread_mutex_destroy(&dr->pf_mu);
            pthread_cond_destroy(&dr->pf_cv);
            si_errprintf(err, "cannot start a drive reader thread");
            goto fail;
        }
        dr->pf_started = true;
    }
    sched_options_t so;
    sched_options_default(&so);
    if (tape_profile_from_conf(conf, si_conf_string(conf, "archive.tape.profile", "lto9"),
                               &so.profile, err) < 0)
        goto fail;
    so.nvolumes = t->nvols > 0 ? t->nvols : 1;
    so.drives = t->ndrives;
    const char *policy = si_conf_string(conf, "library.policy", SCHED_DEFAULT_POLICY);
    const sched_policy_t *pol = sched_policy_find(policy, err);
    sched_callbacks_t cb = {on_request_done, t};
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
