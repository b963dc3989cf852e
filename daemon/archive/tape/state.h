/* The tape backend's state (daemon/archive/tape.c), private to its files:
 * the library, its drives and cartridges, the records of recalls and
 * writes, and the functions its files share. Locking: see tape.c. */
#ifndef STAGEIN_ARCHIVE_TAPE_STATE_H
#define STAGEIN_ARCHIVE_TAPE_STATE_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/clock.h"
#include "common/text.h"
#include "daemon/archive/backend.h"
#include "daemon/archive/tape/drive.h"
#include "daemon/sched/sched.h"
#include "daemon/simlib/engine.h"
#include "daemon/volume/tar.h"
#include "daemon/volume/volume.h"

#define TAPE_MAX_DRIVES 64
#define DEFAULT_BLOCK (256u << 10)
#define FM_BYTES TAPEVOL_RECORD      /* logical bytes of a filemark */


typedef struct {
    uint64_t start, end;
    uint32_t block;
} tfile_t;

typedef struct {
    char label[ARCHIVE_LABEL_MAX + 1];
    uint16_t slot;             /* home storage element */
    int drive;                 /* -1: not in a drive */
    bool busy;                 /* being mounted, read or written */
    double others_until;       /* until then (monotonic) left to the other instance that
                                * held its volume lease when a write last asked */
    bool refused, readonly, full;
    bool scanned;              /* its index checked against the tape this run */
    char why[300];             /* why refused */
    uint64_t capacity;
    int64_t nfiles;
    size_t cap_files;
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
    uint64_t batch;            /* the caller's batch id, its priority and deadline */
    int priority;
    double deadline;           /* on the monotonic clock; 0 none */
} treq_t;

typedef struct tape tape_t;

/* archive.tape.rao: whether the drive's Recommended Access Order is asked
 * for, and whose order the pass follows. */
typedef enum { TAPE_RAO_OFF, TAPE_RAO_COMPARE, TAPE_RAO_USE } tape_rao_mode_t;
#define TAPE_RAO_MAX 2048      /* segments in one GENERATE RAO (drives take ~2700) */

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
    /* Commands in flight (io_n, at most io_depth), each with a block buffer
     * taken from io_free. Reading, they read ahead of the block in buf that
     * the worker delivers: blocks rd_next - io_n .. rd_next - 1 of tape file
     * rd_file; writing, they write the blocks filled before the one in buf. */
    int io_depth;
    size_t io_n, io_nfree;
    unsigned char *io_free[SCSI_QUEUE_MAX];
    int rd_vol;
    int64_t rd_file;
    uint64_t rd_next;
} tdrive_t;

typedef struct {
    const archive_member_t *members;
    size_t n;
    /* Shared by the copies of the aggregate: each member's data is hashed
     * (checked against its checksum) by the first copy that claims it, once
     * per aggregate however many copies are written. */
    atomic_uchar *hashed;
    int copy;
    int *chosen;               /* the aggregate's volumes, one per copy (-1 none yet) */
    int ncopies;
    bool taken, done;
    uint64_t wp_drives;        /* drives that found a cartridge write protected for it */
    int rc;
    si_error_t err;
    int vol;
    uint64_t *positions;       /* per member */
    const archive_write_claims_t *claims; /* several instances: the writer's volume claims */
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
    tape_rao_mode_t rao;
    char media[TAPEVOL_MEDIA_MAX + 1];
    uint64_t capacity;
    int checksum_retries;
    FILE *command_log;
    pthread_mutex_t log_mu;
    pthread_mutex_t claims_mu; /* the writer's claims are asked one at a time */

    tape_changer_t changer;
    tdrive_t drives[TAPE_MAX_DRIVES];
    int ndrives;
    tvol_t *vols;
    int nvols;
    size_t cap_vols;
    sched_t *sched;
    tape_profile_t profile;    /* the scheduler's model of the drives */

    trec_t **recs;             /* by token - 1 */
    size_t nrecs, cap_recs;
    treq_t *reqs;              /* by request id - 1 */
    size_t nreqs, cap_reqs;
    twrite_t **writes;
    size_t nwrites, cap_writes;
    treport_t *reports;        /* done, to be reported outside mu */
    size_t nreports, cap_reports;
    uint64_t outstanding, outstanding_bytes;
    uint64_t mounts, reads, read_failures, bytes_read, bytes_written, files_written;
    atomic_uint_least64_t bytes_hashed; /* member data hashed while written */
    /* RAO asked for, and the model's positioning estimates of both orders */
    uint64_t rao_passes, rao_used;
    double rao_drive_s, rao_sched_s;
};

/* Reads ask for twice the block size: a block written with it is then
 * shorter than asked by at least its own length, and tgt 1.0.85 sends only
 * min(block, asked - block) bytes of a short block (its residue): a real
 * drive sends the whole block either way. */
static inline size_t read_max(const tape_t *t)
{
    return 2 * (size_t)t->max_block;
}

/* tape.c: 1 when the cartridge is in a drive or on its way there
 * (archive_backend_t.volume_loaded), else 0. */
int tape_volume_loaded(archive_backend_t *b, const char *label);

/* mount.c */
bool tape_is_drive_fault(int e);
int tape_mount(tdrive_t *d, int v, bool *write_protect, si_error_t *err);
scsi_dev_t *tape_open_dev(tape_t *t, const char *address, si_error_t *err);
int tape_inventory(tape_t *t, si_error_t *err);

/* index.c */
int tape_index_load(tape_t *t, tvol_t *v, si_error_t *err);
int tape_index_append(tape_t *t, const char *label, const char *line, si_error_t *err);
uint64_t tape_vol_used(const tvol_t *v);
uint64_t tape_file_base(const tvol_t *v, int64_t seq);
int tape_vol_index(const tape_t *t, const char *label);

/* report.c */
trec_t *tape_rec_get(tape_t *t, uint64_t token);
void tape_rec_report(tape_t *t, uint64_t token, bool ok, const char *why);
void tape_flush_reports(tape_t *t);
void tape_on_request_done(void *arg, uint64_t request, double now, size_t failed, const char *why);

/* read.c */
void tape_stream_stop(tdrive_t *d);
void tape_read_volume(tdrive_t *d, int v);

/* forecast.c */
int tape_forecast(archive_backend_t *b, archive_forecast_t **out, size_t *n, si_error_t *err);

/* rao.c */
void tape_rao_consult(tdrive_t *d, int v);

/* write.c */
void tape_run_write(tdrive_t *d, twrite_t *job);

#endif
