/* The `sim` archive backend: the simulated tape library (daemon/simlib) on
 * its scaled real-time clock, the recall scheduler deciding mounts and read
 * order, and the bytes read from and appended to the volume images of
 * daemon/volume. See backend.h.
 *
 * Locks, always taken in this order: engine_mu (the engine's life cycle and
 * every simlib_* call), the engine's own lock (its callbacks run under it),
 * mu (this file's tables). Nothing calls simlib_* while holding mu. on_fetch
 * runs on the engine's per-drive transfer workers, concurrently and without
 * the engine's lock: its state is per call (fetch_t). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/archive/backend.h"
#include "daemon/archive/internal.h"
#include "daemon/simlib/engine.h"
#include "daemon/simlib/robot_ledger.h"
#include "daemon/simlib/volume_fetch.h"
#include "daemon/volume/volume.h"
#include "common/array.h"
#include "common/clock.h"

/* Write tokens live in their own half of the engine's object ids. */
#define WRITE_TOKEN_BIT (UINT64_C(1) << 63)

/* Daemon defaults where the configuration says nothing (issue 4: a small
 * library, fast enough for a laptop demo). */
#define SIM_DEFAULT_DRIVES 4
#define SIM_DEFAULT_TIME_SCALE 0.001

typedef struct {
    archive_item_t item;
    uint64_t batch;            /* engine request id */
    bool cancelled;
    int failures;              /* copies that failed */
    char why[300];             /* the latest failure */
} recall_t;

typedef struct {
    uint64_t *tokens;
    size_t n;
    uint64_t id;               /* the caller's batch id */
    int priority;
    double deadline;           /* simulated seconds; 0: none */
} batch_t;

typedef struct {
    char label[ARCHIVE_LABEL_MAX + 1];
    uint64_t capacity, used;
} sim_volume_t;

/* library.drives' bound: every drive has its byte counter */
#define SIM_DRIVE_COUNTERS 1024

typedef struct {
    pthread_mutex_t engine_mu;
    pthread_mutex_t write_mu;  /* one archive write at a time */
    pthread_mutex_t mu;
    pthread_cond_t write_cv;

    const si_conf_t *conf;     /* borrowed at creation only */
    simlib_config_t base;      /* shape, clock, profile, faults; no volumes */
    const sched_policy_t *policy;
    char dir[PATH_MAX];
    int checksum_retries;
    archive_recall_cb_t cb;
    si_log_t *log;             /* borrowed; may be NULL */
    robot_ledger_t *shared_robots; /* several instances on this library, else NULL */

    /* the current engine, built from the volumes present when it started */
    simlib_t *lib;
    simlib_volume_reader_t *reader;
    sim_volume_t *vols;
    int nvols;

    /* under mu */
    recall_t **recalls;        /* by token - 1 */
    size_t nrecalls, cap_recalls;
    batch_t *batches;          /* by engine request id - 1 */
    size_t nbatches, cap_batches;
    uint64_t outstanding, outstanding_bytes;
    uint64_t writing;          /* archive writes waiting for the engine */
    uint64_t write_done_token; /* last write completion seen */
    uint64_t writes_done;
    uint64_t next_write;
    uint64_t bytes_written, archive_files;
    uint64_t fetch_bytes;      /* bytes delivered to sinks */
    uint64_t drive_bytes[SIM_DRIVE_COUNTERS]; /* ... by drive (the status page's MB/s) */
    uint64_t old_mounts, old_reads, old_failures; /* of engines replaced */
} sim_t;

/* ---- engine callbacks (engine thread, engine lock held) -------------------- */

static recall_t *recall_get(sim_t *s, uint64_t token)
{
    return token >= 1 && token <= s->nrecalls ? s->recalls[token - 1] : NULL;
}

/* Takes the record out of the table; the caller reports it and frees it. */
static recall_t *recall_take(sim_t *s, uint64_t token)
{
    recall_t *r = recall_get(s, token);
    if (r) {
        s->recalls[token - 1] = NULL;
        s->outstanding--;
        s->outstanding_bytes -= r->item.size;
    }
    return r;
}

static void report(sim_t *s, recall_t *r, bool ok, const char *why)
{
    if (s->cb.done)
        s->cb.done(s->cb.arg, r->item.object_id, ok, ok ? NULL : why);
    free(r);
}

/* One attempt at an item's bytes (per fetch call: fetches of different
 * drives run at the same time). */
typedef struct {
    sim_t *s;
    void *session;
    int64_t object_id;
} fetch_t;

/* The counters and progress of len bytes of a read landed in the sink. */
static void count_bytes(fetch_t *f, const simlib_read_t *r, uint64_t at, size_t len)
{
    sim_t *s = f->s;
    pthread_mutex_lock(&s->mu);
    s->fetch_bytes += len;
    if (r->drive >= 0 && r->drive < SIM_DRIVE_COUNTERS)
        s->drive_bytes[r->drive] += len;
    pthread_mutex_unlock(&s->mu);
    if (s->cb.progress)
        s->cb.progress(s->cb.arg, f->object_id, at + len);
}

static int sink_bytes(void *arg, const simlib_read_t *r, uint64_t at, const void *buf, size_t len,
                      si_error_t *err)
{
    fetch_t *f = arg;
    if (f->s->cb.write(f->s->cb.arg, f->session, buf, len, err) < 0)
        return -1;
    count_bytes(f, r, at, len);
    return 0;
}

/* The cache's memory for a small object: the drive reads into it (set
 * only where the callbacks have room and landed). */
static void *sink_room(void *arg, size_t *len)
{
    fetch_t *f = arg;
    return f->s->cb.room(f->s->cb.arg, f->session, len);
}

static int sink_landed(void *arg, const simlib_read_t *r, uint64_t at, size_t len,
                       si_error_t *err)
{
    fetch_t *f = arg;
    if (f->s->cb.landed(f->s->cb.arg, f->session, len, err) < 0)
        return -1;
    count_bytes(f, r, at, len);
    return 0;
}

/* A read started on the engine's clock (transfer worker, no engine lock):
 * move its bytes into the sink, with one re-read per configured retry when
 * they do not match the checksum. An abandoned read is never committed. */
static int on_fetch(void *arg, const simlib_read_t *rd, si_error_t *err)
{
    sim_t *s = arg;
    if (rd->object & WRITE_TOKEN_BIT)
        return 0;
    pthread_mutex_lock(&s->mu);
    recall_t *r = recall_get(s, rd->object);
    archive_item_t item = {0};
    bool skip = !r || r->cancelled;
    if (r)
        item = r->item;
    pthread_mutex_unlock(&s->mu);
    if (skip)
        return 0; /* nobody wants the bytes: read_done reports it */
    char mismatch[sizeof(err->text)] = "";
    for (int attempt = 0; attempt <= s->checksum_retries; attempt++) {
        fetch_t f = {s, NULL, item.object_id};
        if (s->cb.begin(s->cb.arg, &item, &f.session, err) < 0)
            return -1;
        simlib_sink_t sink = {sink_bytes, s->cb.room && s->cb.landed ? sink_room : NULL,
                              sink_landed, &f};
        int rc = simlib_volume_fetch(s->reader, rd, &sink, err);
        if (rc == 0 && rd->abandoned && atomic_load(rd->abandoned))
            rc = si_errprintf(err, "read of object %" PRId64 " abandoned", item.object_id);
        if (rc < 0) {
            s->cb.abort(s->cb.arg, f.session);
            return -1;
        }
        if (s->cb.commit(s->cb.arg, f.session, err) == 0)
            return 0;
        if (errno != EBADMSG)
            return -1;
        snprintf(mismatch, sizeof(mismatch), "%s", err->text);
    }
    return si_errprintf(err, "%s (read %d times from volume %s at %" PRIu64 ")", mismatch,
                        s->checksum_retries + 1, s->vols[rd->volume].label, rd->offset);
}

static void on_read_done(void *arg, const simlib_read_t *rd)
{
    sim_t *s = arg;
    pthread_mutex_lock(&s->mu);
    if (rd->object & WRITE_TOKEN_BIT) {
        s->write_done_token = rd->object;
        s->writes_done++;
        pthread_cond_broadcast(&s->write_cv);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    recall_t *r = NULL;
    if (rd->ok) {
        r = recall_take(s, rd->object);
    } else if ((r = recall_get(s, rd->object))) {
        r->failures++;
        snprintf(r->why, sizeof(r->why), "%s", rd->why ? rd->why : "read failed");
        r = NULL; /* another copy may follow; request_done settles it otherwise */
    }
    pthread_mutex_unlock(&s->mu);
    if (r)
        report(s, r, !r->cancelled, "cancelled");
}

static void on_request_done(void *arg, uint64_t request, double t, size_t failed, const char *why)
{
    sim_t *s = arg;
    (void)t;
    (void)failed;
    pthread_mutex_lock(&s->mu);
    if (request < 1 || request > s->nbatches) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    batch_t b = s->batches[request - 1];
    s->batches[request - 1] = (batch_t){.tokens = NULL};
    /* Items of the batch still in the table could not be read from any copy. */
    size_t nleft = 0;
    for (size_t i = 0; i < b.n; i++) {
        recall_t *r = recall_take(s, b.tokens[i]);
        if (r)
            b.tokens[nleft++] = (uint64_t)(uintptr_t)r;
    }
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < nleft; i++) {
        recall_t *r = (recall_t *)(uintptr_t)b.tokens[i];
        const char *reason = r->cancelled ? "cancelled" : *r->why ? r->why
                                                       : why ? why : "recall failed";
        report(s, r, false, reason);
    }
    free(b.tokens);
}

/* ---- the engine ---------------------------------------------------------------- */

static void engine_free(sim_t *s)
{
    if (s->lib) {
        simlib_stats_t st;
        simlib_stats(s->lib, &st);
        s->old_mounts += st.mounts;
        s->old_reads += st.reads;
        s->old_failures += st.read_failures;
    }
    simlib_free(s->lib); /* stops and joins the engine thread */
    simlib_volume_reader_free(s->reader);
    free(s->vols);
    s->lib = NULL;
    s->reader = NULL;
    s->vols = NULL;
    s->nvols = 0;
}

/* A volume's label fields and end of data, after cutting what an
 * interrupted archive write (a crash, kill -9) left after its last complete
 * archive file: that write was never acknowledged, and is redone. */
static int volume_ready(sim_t *s, const char *label, tapevol_info_t *info, si_error_t *err)
{
    tapevol_t *v = tapevol_open(s->dir, label, TAPEVOL_RDWR, err);
    tapevol_recovery_t rec;
    if (!v) {
        if (errno != EACCES && errno != EROFS && errno != EPERM)
            return -1;
        /* a volume this daemon may only read: nothing to recover on it */
        if (!(v = tapevol_open(s->dir, label, TAPEVOL_RDONLY, err)))
            return -1;
        int rc = tapevol_info(v, info, err);
        tapevol_close(v);
        return rc;
    }
    if (tapevol_recover(v, &rec, err) < 0) {
        tapevol_close(v);
        return -1;
    }
    tapevol_label_fields(v, info);
    info->used = rec.used;
    info->files = rec.files;
    tapevol_close(v);
    if (rec.discarded)
        si_log(s->log, SI_LOG_WARNING, "library: volume %s: %" PRIu64 " bytes of an "
               "interrupted archive write after archive file %" PRId64 " (offset %" PRIu64
               ") cut; the write is redone", label, rec.discarded, rec.files, rec.used);
    return 0;
}

/* The base's shape, clock and profile with no volumes or faults: the
 * arrays (and their capacities) stay the base's. */
static simlib_config_t base_shape(const sim_t *s)
{
    simlib_config_t cfg = s->base;
    cfg.volumes = NULL;
    cfg.nvolumes = 0;
    cfg.cap_volumes = 0;
    cfg.faults = NULL;
    cfg.nfaults = 0;
    cfg.cap_faults = 0;
    return cfg;
}

/* Builds an engine over the volumes in the directory now. engine_mu held. */
static int engine_build(sim_t *s, si_error_t *err)
{
    char **labels = NULL;
    size_t nlabels = 0;
    simlib_config_t cfg = base_shape(s);
    sim_volume_t *vols = NULL;
    if (tapevol_list(s->dir, &labels, &nlabels, err) < 0)
        return -1;
    if (nlabels == 0) {
        si_errprintf(err, "the simulated library has no volumes in %s (create them with "
                     "'stagein tape create')", s->dir);
        goto error;
    }
    vols = calloc(nlabels, sizeof(*vols));
    if (!vols) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    for (size_t i = 0; i < nlabels; i++) {
        tapevol_info_t info;
        if (volume_ready(s, labels[i], &info, err) < 0) {
            si_errprefix(err, "library");
            goto error;
        }
        snprintf(vols[i].label, sizeof(vols[i].label), "%s", labels[i]);
        vols[i].capacity = info.capacity;
        vols[i].used = info.used;
        if (simlib_config_add_volume(&cfg, labels[i], info.used, err) < 0)
            goto error;
    }
    for (size_t i = 0; i < s->base.nfaults; i++)
        if (simlib_config_add_fault(&cfg, &s->base.faults[i], err) < 0)
            goto error;
    if (cfg.slots < cfg.nvolumes)
        cfg.slots = cfg.nvolumes;
    sched_options_t so;
    sched_options_default(&so);
    simlib_callbacks_t cb = {on_request_done, on_read_done, on_fetch, s};
    s->lib = simlib_new(&cfg, s->policy, &so, &cb, err);
    if (!s->lib)
        goto error;
    s->reader = simlib_volume_reader_new(s->dir, &cfg, err);
    if (!s->reader || simlib_start(s->lib, err) < 0) {
        simlib_free(s->lib);
        simlib_volume_reader_free(s->reader);
        s->lib = NULL;
        s->reader = NULL;
        goto error;
    }
    s->vols = vols;
    s->nvols = (int)nlabels;
    simlib_config_free(&cfg);
    tapevol_labels_free(labels, nlabels);
    return 0;
error:
    free(vols);
    simlib_config_free(&cfg);
    tapevol_labels_free(labels, nlabels);
    return -1;
}

static int volume_index(const sim_t *s, const char *label)
{
    for (int v = 0; v < s->nvols; v++)
        if (strcmp(s->vols[v].label, label) == 0)
            return v;
    return -1;
}

/* The item's tape copies as the scheduler sees them: each on its volume's
 * index in the engine, at its position. */
static void item_copies(const sim_t *s, const archive_item_t *item, sched_file_t *f)
{
    f->ncopies = item->ncopies;
    for (int c = 0; c < item->ncopies; c++) {
        f->copies[c].volume = volume_index(s, item->copies[c].volume);
        f->copies[c].offset = item->copies[c].position;
        f->copies[c].size = item->size;
    }
}

/* An engine that knows every label named; rebuilt (only while it has no
 * work) when a volume was added since it started. engine_mu held. */
static int engine_for(sim_t *s, const char *const *labels, size_t n, si_error_t *err)
{
    bool known = s->lib != NULL;
    for (size_t i = 0; known && i < n; i++)
        known = volume_index(s, labels[i]) >= 0;
    if (known)
        return 0;
    pthread_mutex_lock(&s->mu);
    bool busy = s->outstanding > 0 || s->writing > 0;
    pthread_mutex_unlock(&s->mu);
    if (busy) {
        for (size_t i = 0; i < n; i++)
            if (volume_index(s, labels[i]) < 0)
                return si_errprintf(err, "volume %s is not in the simulated library yet "
                                    "(added while recalls run; retried when they finish)",
                                    labels[i]);
    }
    if (s->lib)
        engine_free(s);
    if (engine_build(s, err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (volume_index(s, labels[i]) < 0)
            return si_errprintf(err, "volume %s is not in the simulated library (%s)", labels[i],
                                s->dir);
    return 0;
}

/* ---- recall ----------------------------------------------------------------------- */

static int sim_recall(archive_backend_t *b, const archive_batch_t *batch,
                      const archive_item_t *items, size_t n, si_error_t *err)
{
    sim_t *s = b->impl;
    if (n == 0)
        return 0;
    const char **labels = NULL;
    sched_file_t *files = calloc(n, sizeof(*files));
    recall_t **recs = calloc(n, sizeof(*recs));
    size_t nlabels = 0;
    int rc = -1;
    for (size_t i = 0; i < n; i++)
        nlabels += (size_t)items[i].ncopies;
    labels = calloc(nlabels + 1, sizeof(*labels));
    if (!files || !recs || !labels) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    nlabels = 0;
    for (size_t i = 0; i < n; i++) {
        if (items[i].ncopies < 1 || items[i].ncopies > ARCHIVE_MAX_COPIES) {
            si_errprintf(err, "object %" PRId64 " has %d tape copies (1..%d)",
                         items[i].object_id, items[i].ncopies, ARCHIVE_MAX_COPIES);
            goto out;
        }
        for (int c = 0; c < items[i].ncopies; c++)
            labels[nlabels++] = items[i].copies[c].volume;
    }
    pthread_mutex_lock(&s->engine_mu);
    if (engine_for(s, labels, nlabels, err) < 0)
        goto unlock;
    for (size_t i = 0; i < n; i++) {
        if (!(recs[i] = calloc(1, sizeof(recall_t)))) {
            si_errprintf(err, "out of memory");
            goto unlock;
        }
        recs[i]->item = items[i];
        item_copies(s, &items[i], &files[i]);
    }
    /* Tokens and the batch, then the submission; undone if it fails. The
     * engine's clock is read before mu: its callbacks take mu under the
     * engine's lock. */
    double now_sim = simlib_now(s->lib);
    pthread_mutex_lock(&s->mu);
    uint64_t *tokens = malloc(n * sizeof(*tokens));
    if (!tokens ||
        si_array_grow((void **)&s->recalls, &s->cap_recalls, s->nrecalls + n,
                      sizeof(recall_t *)) < 0 ||
        si_array_grow((void **)&s->batches, &s->cap_batches, s->nbatches + 1,
                      sizeof(batch_t)) < 0) {
        pthread_mutex_unlock(&s->mu);
        free(tokens);
        si_errprintf(err, "out of memory");
        goto unlock;
    }
    uint64_t request = ++s->nbatches;
    for (size_t i = 0; i < n; i++) {
        s->recalls[s->nrecalls] = recs[i];
        tokens[i] = files[i].object = ++s->nrecalls;
        recs[i]->batch = request;
        s->outstanding++;
        s->outstanding_bytes += items[i].size;
    }
    sched_request_t req = {request, batch->priority, 0};
    if (batch->deadline > 0) {
        /* the simulated clock runs 1 / time_scale times faster than real time */
        double ahead = (batch->deadline - si_wall_now()) / s->base.time_scale;
        req.deadline = now_sim + (ahead > 0 ? ahead : 0);
    }
    s->batches[request - 1] = (batch_t){tokens, n, batch->id, batch->priority, req.deadline};
    pthread_mutex_unlock(&s->mu);
    if (simlib_submit(s->lib, now_sim, &req, files, n, err) < 0) {
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < n; i++)
            recall_take(s, tokens[i]);
        s->batches[request - 1] = (batch_t){.tokens = NULL};
        pthread_mutex_unlock(&s->mu);
        free(tokens);
        goto unlock;
    }
    memset(recs, 0, n * sizeof(*recs)); /* owned by the table now */
    rc = 0;
unlock:
    pthread_mutex_unlock(&s->engine_mu);
out:
    archive_records_free((void **)recs, n);
    free(files);
    free(labels);
    return rc;
}

static int sim_cancel(archive_backend_t *b, int64_t object_id)
{
    sim_t *s = b->impl;
    int found = 0;
    pthread_mutex_lock(&s->mu);
    for (size_t t = s->nrecalls; t > 0 && !found; t--) {
        recall_t *r = s->recalls[t - 1];
        if (r && r->item.object_id == object_id && !r->cancelled) {
            r->cancelled = true;
            found = 1;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return found;
}

/* ---- archive write ------------------------------------------------------------------ */

/* ncopies distinct volumes with room for bytes, the fullest first (an archive
 * keeps filling the volumes it writes before starting new ones). */
static int choose_volumes(const sim_t *s, uint64_t bytes, int ncopies, int *out, si_error_t *err)
{
    int found = 0;
    bool *taken = calloc((size_t)s->nvols + 1, sizeof(bool));
    if (!taken)
        return si_errprintf(err, "out of memory");
    while (found < ncopies) {
        int best = -1;
        for (int v = 0; v < s->nvols; v++) {
            const sim_volume_t *vol = &s->vols[v];
            if (taken[v] || vol->used + bytes > vol->capacity)
                continue;
            if (best < 0 || vol->used > s->vols[best].used)
                best = v;
        }
        if (best < 0)
            break;
        taken[best] = true;
        out[found++] = best;
    }
    free(taken);
    if (found < ncopies)
        return si_errprintf(err, "an archive file of %" PRIu64 " bytes needs %d volumes with "
                            "room for it; the simulated library has %d", bytes, ncopies, found);
    return 0;
}

typedef struct {
    char label[ARCHIVE_LABEL_MAX + 1];
    uint64_t used;
} sim_candidate_t;

static int by_used_desc(const void *x, const void *y)
{
    const sim_candidate_t *a = x, *c = y;
    return (a->used < c->used) - (a->used > c->used);
}

/* The volumes with room for bytes, the fullest first (choose_volumes'
 * order); *out malloc'd. */
static int rank_volumes(sim_t *s, uint64_t bytes, sim_candidate_t **out, int *n, si_error_t *err)
{
    pthread_mutex_lock(&s->engine_mu);
    int rc = engine_for(s, NULL, 0, err);
    sim_candidate_t *c = rc == 0 ? calloc((size_t)s->nvols + 1, sizeof(*c)) : NULL;
    int k = 0;
    for (int v = 0; c && v < s->nvols; v++)
        if (s->vols[v].used + bytes <= s->vols[v].capacity) {
            memcpy(c[k].label, s->vols[v].label, sizeof(c[k].label));
            c[k++].used = s->vols[v].used;
        }
    pthread_mutex_unlock(&s->engine_mu);
    if (rc < 0)
        return -1;
    if (!c)
        return si_errprintf(err, "out of memory");
    qsort(c, (size_t)k, sizeof(*c), by_used_desc);
    *out = c;
    *n = k;
    return 0;
}

/* A claimed volume's end of data read again from its image (another
 * instance may have appended to it since this engine was built; a writer
 * killed mid-write left a tail, cut now that the volume is this writer's),
 * into the engine's fill level. 1 it still has room, 0 not, -1 error. */
static int refresh_fill(sim_t *s, const char *label, uint64_t bytes, si_error_t *err)
{
    tapevol_info_t info;
    if (volume_ready(s, label, &info, err) < 0)
        return -1;
    int room = 0;
    pthread_mutex_lock(&s->engine_mu);
    int v = volume_index(s, label);
    if (v >= 0) {
        s->vols[v].used = info.used;
        if (s->lib)
            simlib_volume_refill(s->lib, v, info.used);
        room = info.used + bytes <= s->vols[v].capacity;
    }
    pthread_mutex_unlock(&s->engine_mu);
    return room;
}

/* ncopies distinct volumes for a write of bytes, each claimed through the
 * writer's claims (several instances sharing the library): choose_volumes'
 * order, skipping a volume another instance holds; while every volume with
 * room is another's, waits (the claims given back meanwhile, so that two
 * writers of several copies cannot hold one each forever). write_mu held,
 * not engine_mu. */
static int claim_volumes(archive_backend_t *b, uint64_t bytes, int ncopies,
                         char (*labels)[ARCHIVE_LABEL_MAX + 1], si_error_t *err)
{
    sim_t *s = b->impl;
    double until = si_mono_now() + ARCHIVE_CLAIM_WAIT_S;
    for (;;) {
        sim_candidate_t *c = NULL;
        int n = 0, found = 0, refused = 0;
        if (rank_volumes(s, bytes, &c, &n, err) < 0)
            return -1;
        int rc = 0;
        for (int i = 0; i < n && found < ncopies && rc >= 0; i++) {
            rc = b->write_claims.claim(b->write_claims.arg, c[i].label, err);
            if (rc == 0) {
                refused++; /* another instance's: the next one */
                continue;
            }
            if (rc == 1 && (rc = refresh_fill(s, c[i].label, bytes, err)) == 1)
                memcpy(labels[found++], c[i].label, sizeof(labels[0]));
            else /* full since this engine looked, or its image unreadable */
                b->write_claims.unclaim(b->write_claims.arg, c[i].label);
        }
        if (rc < 0) {
            free(c);
            while (found > 0)
                b->write_claims.unclaim(b->write_claims.arg, labels[--found]);
            return -1;
        }
        free(c);
        if (found == ncopies)
            return 0;
        while (found > 0)
            b->write_claims.unclaim(b->write_claims.arg, labels[--found]);
        if (refused == 0)
            return si_errprintf(err, "an archive file of %" PRIu64 " bytes needs %d volumes "
                                "with room for it; the simulated library has %d", bytes,
                                ncopies, n);
        if (si_mono_now() >= until)
            return si_errnoprintf(err, EBUSY, "an archive file of %" PRIu64 " bytes needs %d "
                                  "volumes with room for it: %d of them are held by other "
                                  "instances since %.0f s", bytes, ncopies, refused,
                                  ARCHIVE_CLAIM_WAIT_S);
        si_sleep(ARCHIVE_CLAIM_POLL_S);
    }
}

static int sim_archive(archive_backend_t *b, const archive_member_t *members, size_t n,
                       int ncopies, archive_placement_t *placements, si_error_t *err)
{
    sim_t *s = b->impl;
    if (n == 0 || ncopies < 1 || ncopies > ARCHIVE_MAX_COPIES)
        return si_errprintf(err, "an archive write needs members and 1..%d copies (got %zu "
                            "members, %d copies)", ARCHIVE_MAX_COPIES, n, ncopies);
    tapevol_member_t *tm = calloc(n, sizeof(*tm));
    if (!tm)
        return si_errprintf(err, "out of memory");
    for (size_t i = 0; i < n; i++)
        tm[i] = (tapevol_member_t){members[i].bucket, members[i].key, members[i].path, -1,
                                   members[i].size, members[i].mtime, members[i].checksum,
                                   members[i].headers, members[i].storage_class,
                                   members[i].offset};
    uint64_t bytes = tapevol_archive_bytes(tm, n);
    int vols[ARCHIVE_MAX_COPIES];
    char labels[ARCHIVE_MAX_COPIES][ARCHIVE_LABEL_MAX + 1];
    int rc = -1;

    pthread_mutex_lock(&s->write_mu);
    /* Several instances: the volumes claimed first, then mounted. */
    bool claimed = b->write_claims.claim != NULL;
    if (claimed && claim_volumes(b, bytes, ncopies, labels, err) < 0)
        goto out;
    /* The drive time: each copy queued in the engine (writes go before
     * recalls), waited for. */
    pthread_mutex_lock(&s->engine_mu);
    if (claimed) {
        const char *names[ARCHIVE_MAX_COPIES];
        for (int c = 0; c < ncopies; c++)
            names[c] = labels[c];
        rc = engine_for(s, names, (size_t)ncopies, err);
        for (int c = 0; rc == 0 && c < ncopies; c++)
            vols[c] = volume_index(s, labels[c]);
    } else {
        rc = engine_for(s, NULL, 0, err);
        if (rc == 0)
            rc = choose_volumes(s, bytes, ncopies, vols, err);
    }
    if (rc < 0) {
        rc = -1;
        pthread_mutex_unlock(&s->engine_mu);
        goto out;
    }
    rc = -1;
    pthread_mutex_lock(&s->mu);
    uint64_t first = s->writes_done;
    s->writing++;
    pthread_mutex_unlock(&s->mu);
    int queued = 0;
    for (int c = 0; c < ncopies; c++) {
        memcpy(labels[c], s->vols[vols[c]].label, sizeof(labels[c]));
        uint64_t token = WRITE_TOKEN_BIT | ++s->next_write;
        if (simlib_write(s->lib, simlib_now(s->lib), vols[c], token, bytes, err) < 0)
            break;
        queued++;
    }
    pthread_mutex_unlock(&s->engine_mu);
    pthread_mutex_lock(&s->mu);
    while (s->writes_done - first < (uint64_t)queued)
        pthread_cond_wait(&s->write_cv, &s->mu);
    s->writing--;
    pthread_mutex_unlock(&s->mu);
    if (queued < ncopies)
        goto out;

    /* The bytes: one archive file per copy, fsync'd by tapevol_append. */
    for (int c = 0; c < ncopies; c++) {
        tapevol_listing_t *written = NULL;
        tapevol_t *vol = tapevol_open(s->dir, labels[c], TAPEVOL_RDWR, err);
        if (!vol || tapevol_append(vol, tm, n, &written, err) < 0) {
            tapevol_close(vol);
            si_errprefix(err, "archive write, copy %d on volume %s", c + 1, labels[c]);
            goto out;
        }
        tapevol_info_t info;
        uint64_t used = 0;
        if (tapevol_info(vol, &info, NULL) == 0)
            used = info.used;
        tapevol_close(vol);
        for (size_t i = 0; i < n && i < written->nentries; i++) {
            archive_placement_t *p = &placements[i * (size_t)ncopies + (size_t)c];
            p->copy = c + 1;
            memcpy(p->volume, labels[c], sizeof(p->volume));
            p->file_seq = written->entries[i].file_seq;
            p->position = written->entries[i].position;
            p->length = written->entries[i].size;
            p->volume_used = used;
        }
        tapevol_listing_free(written);
        pthread_mutex_lock(&s->engine_mu);
        int v = volume_index(s, labels[c]);
        if (v >= 0 && used)
            s->vols[v].used = used;
        pthread_mutex_unlock(&s->engine_mu);
        pthread_mutex_lock(&s->mu);
        s->bytes_written += bytes;
        s->archive_files++;
        pthread_mutex_unlock(&s->mu);
    }
    rc = 0;
out:
    pthread_mutex_unlock(&s->write_mu);
    free(tm);
    return rc;
}

/* ---- status -------------------------------------------------------------------------- */

static int sim_status(archive_backend_t *b, archive_status_t *out, si_error_t *err)
{
    sim_t *s = b->impl;
    (void)err;
    memset(out, 0, sizeof(*out));
    out->backend = "sim";
    pthread_mutex_lock(&s->engine_mu);
    out->drives = s->base.drives;
    out->volumes = s->nvols;
    out->mounts = s->old_mounts;
    out->reads = s->old_reads;
    out->read_failures = s->old_failures;
    if (s->lib) {
        simlib_stats_t st;
        simlib_stats(s->lib, &st);
        out->mounts += st.mounts;
        out->reads += st.reads;
        out->read_failures += st.read_failures;
        out->clock_s = st.now;
        for (int d = 0; d < s->base.drives; d++) {
            simlib_drive_info_t info;
            if (simlib_drive_info(s->lib, d, &info) < 0)
                continue;
            out->drives_failed += info.state == DRIVE_FAILED;
            out->drives_busy += info.state != DRIVE_FAILED && info.state != DRIVE_EMPTY &&
                                info.state != DRIVE_IDLE;
        }
    }
    pthread_mutex_unlock(&s->engine_mu);
    pthread_mutex_lock(&s->mu);
    out->bytes_read = s->fetch_bytes;
    out->bytes_written = s->bytes_written;
    out->archive_files_written = s->archive_files;
    out->queued_items = s->outstanding;
    out->queued_bytes = s->outstanding_bytes;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* ---- forecast ------------------------------------------------------------------------- */

/* The queue as it stands, replayed on a virtual clock by the same engine
 * and scheduler: the volumes in the drives stay where they are, each batch
 * keeps its priority and deadline; reads in flight count in full. */
static int sim_forecast(archive_backend_t *b, archive_forecast_t **out, size_t *count,
                        si_error_t *err)
{
    sim_t *s = b->impl;
    simlib_config_t cfg = base_shape(s);
    cfg.time_scale = 0;
    archive_forecast_t *res = NULL;
    size_t nres = 0;
    archive_replay_t rp = {NULL};
    sched_file_t *files = NULL;
    size_t cap_files = 0;
    int rc = -1;
    *out = NULL;
    *count = 0;
    pthread_mutex_lock(&s->engine_mu);
    if (!s->lib) {
        rc = 0;
        goto unlock;
    }
    for (int v = 0; v < s->nvols; v++)
        if (simlib_config_add_volume(&cfg, s->vols[v].label, s->vols[v].used, err) < 0)
            goto unlock;
    if (cfg.slots < cfg.nvolumes)
        cfg.slots = cfg.nvolumes;
    sched_options_t so;
    sched_options_default(&so);
    pthread_mutex_lock(&s->mu);
    size_t nb = s->nbatches;
    pthread_mutex_unlock(&s->mu);
    if (archive_replay_start(&rp, nb, &cfg, s->policy, &so, err) < 0)
        goto unlock;
    for (int d = 0; d < s->base.drives; d++) {
        simlib_drive_info_t info;
        /* a volume being mounted, or the one a drive unloads for (its choice
         * is made), is in the drive once the operations left are done: the
         * rest of the current one, then (unloading or waiting for the
         * robot) the mount; a read in flight is made again in full */
        if (simlib_drive_info(s->lib, d, &info) < 0 || info.state == DRIVE_FAILED)
            continue;
        bool leaving = info.state == DRIVE_UNLOADING || info.state == DRIVE_WAIT_ROBOT;
        int v = info.target >= 0 && (leaving || info.volume < 0) ? info.target
                : leaving                                        ? -1
                                                                 : info.volume;
        double ready = info.state == DRIVE_LOADING ? info.busy_s
                       : v >= 0 && v != info.volume ? info.busy_s + tape_mount_time(&cfg.profile)
                                                    : 0;
        if (v >= 0 &&
            simlib_preload(rp.lib, d, v, v == info.volume ? info.head : 0, ready, err) < 0)
            goto unlock;
    }
    double now_sim = simlib_now(s->lib);
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < nb; i++) {
        batch_t *bt = &s->batches[i];
        size_t n = 0;
        if (si_array_grow((void **)&files, &cap_files, bt->n + 1, sizeof(*files)) < 0) {
            pthread_mutex_unlock(&s->mu);
            goto nomem_or_err;
        }
        for (size_t k = 0; k < bt->n; k++) {
            recall_t *r = recall_get(s, bt->tokens[k]);
            if (!r || r->cancelled)
                continue;
            sched_file_t *f = &files[n++];
            memset(f, 0, sizeof(*f));
            f->object = bt->tokens[k];
            item_copies(s, &r->item, f);
        }
        if (n == 0)
            continue;
        double deadline = bt->deadline > 0 ? (bt->deadline > now_sim ? bt->deadline - now_sim
                                                                     : 1e-9)
                                           : 0;
        if (archive_replay_submit(&rp, bt->id, bt->priority, deadline, files, n, err) < 0) {
            pthread_mutex_unlock(&s->mu);
            goto unlock;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (simlib_run(rp.lib, err) < 0)
        goto unlock;
    res = calloc(rp.n + 1, sizeof(*res));
    if (!res)
        goto nomem_or_err;
    for (size_t i = 0; i < rp.n; i++)
        archive_forecast_add(res, &nres, rp.batch[i], rp.done_at[i] * s->base.time_scale)
            ->items++;
    *out = res;
    *count = nres;
    res = NULL;
    rc = 0;
    goto unlock;
nomem_or_err:
    if (!err || !err->text[0])
        si_errprintf(err, "out of memory");
unlock:
    pthread_mutex_unlock(&s->engine_mu);
    archive_replay_free(&rp);
    simlib_config_free(&cfg);
    free(files);
    free(res);
    return rc;
}

static void sim_metrics(archive_backend_t *b, FILE *out)
{
    sim_t *s = b->impl;
    archive_status_t st;
    sim_status(b, &st, NULL);
    archive_metrics_drive_states(out, "the simulated library");
    pthread_mutex_lock(&s->engine_mu);
    for (int d = 0; d < s->base.drives; d++) {
        simlib_drive_info_t info = {.state = DRIVE_EMPTY, .volume = -1};
        if (s->lib)
            simlib_drive_info(s->lib, d, &info);
        archive_metrics_drive_state(out, d, simlib_drive_state_name(info.state),
                                    info.volume >= 0 && info.volume < s->nvols
                                        ? s->vols[info.volume].label
                                        : "");
    }
    simlib_stats_t ls = {0};
    if (s->lib)
        simlib_stats(s->lib, &ls);
    pthread_mutex_unlock(&s->engine_mu);
    archive_metrics_library(out, &st);
    fprintf(out, "# HELP stagein_robots Robots (accessors) of the library.\n"
                 "# TYPE stagein_robots gauge\nstagein_robots %d\n"
                 "# HELP stagein_robot_moves_total Cartridge moves by the robots (this engine).\n"
                 "# TYPE stagein_robot_moves_total counter\nstagein_robot_moves_total %" PRIu64
                 "\n"
                 "# HELP stagein_robot_wait_seconds_total Simulated seconds this engine's moves "
                 "waited for other instances' moves (shared robots).\n"
                 "# TYPE stagein_robot_wait_seconds_total counter\n"
                 "stagein_robot_wait_seconds_total %.3f\n",
            s->base.robots, ls.robot_moves, ls.robot_wait_s);
    fprintf(out, "# HELP stagein_drive_bytes_read_total Bytes each drive recalled.\n"
                 "# TYPE stagein_drive_bytes_read_total counter\n");
    pthread_mutex_lock(&s->mu);
    for (int d = 0; d < s->base.drives && d < SIM_DRIVE_COUNTERS; d++)
        fprintf(out, "stagein_drive_bytes_read_total{drive=\"%d\"} %" PRIu64 "\n", d,
                s->drive_bytes[d]);
    pthread_mutex_unlock(&s->mu);
    fprintf(out,
            "# HELP stagein_library_clock_seconds The simulated library's clock.\n"
            "# TYPE stagein_library_clock_seconds gauge\n"
            "stagein_library_clock_seconds %.3f\n", st.clock_s);
}

static void sim_free(archive_backend_t *b)
{
    if (!b)
        return;
    sim_t *s = b->impl;
    pthread_mutex_lock(&s->engine_mu);
    engine_free(s);
    pthread_mutex_unlock(&s->engine_mu);
    for (size_t i = 0; i < s->nrecalls; i++)
        free(s->recalls[i]);
    for (size_t i = 0; i < s->nbatches; i++)
        free(s->batches[i].tokens);
    free(s->recalls);
    free(s->batches);
    simlib_config_free(&s->base);
    robot_ledger_close(s->shared_robots);
    pthread_mutex_destroy(&s->engine_mu);
    pthread_mutex_destroy(&s->write_mu);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->write_cv);
    free(s);
    free(b);
}

/* In a drive, or being moved into one (its lease must outlive the mount). */
static int sim_volume_loaded(archive_backend_t *b, const char *label)
{
    sim_t *s = b->impl;
    int loaded = 0;
    pthread_mutex_lock(&s->engine_mu);
    for (int i = 0; s->lib && i < s->nvols; i++)
        if (strcmp(s->vols[i].label, label) == 0) {
            int slot, drive;
            loaded = simlib_volume_where(s->lib, i, &slot, &drive) == 0 && slot < 0;
            break;
        }
    pthread_mutex_unlock(&s->engine_mu);
    return loaded;
}

static const archive_backend_ops_t sim_ops = {
    "sim", sim_recall, sim_cancel, sim_archive, sim_status, sim_metrics, sim_free, false,
    sim_forecast,
};

/* ---- creation -------------------------------------------------------------------------- */

int archive_sim_config(const si_conf_t *conf, const char *state_dir, simlib_config_t *cfg,
                       char *dir, size_t dirsize, si_error_t *err)
{
    if (simlib_config_from_conf(conf, cfg, err) < 0)
        return si_errprefix(err, "library");
    if (!si_conf_setting(conf, "library.drives"))
        cfg->drives = SIM_DEFAULT_DRIVES;
    if (!si_conf_setting(conf, "library.time_scale"))
        cfg->time_scale = SIM_DEFAULT_TIME_SCALE;
    if (!(cfg->time_scale > 0)) {
        simlib_config_free(cfg);
        return si_errprintf(err, "library.time_scale = 0 is the benchmark's virtual clock; "
                            "stageind needs real time (e.g. 0.001: a 45 s locate takes 45 ms)");
    }
    const char *vdir = si_conf_string(conf, "library.volume_dir", NULL);
    if (vdir)
        snprintf(dir, dirsize, "%s", vdir);
    else
        snprintf(dir, dirsize, "%s/volumes", state_dir);
    return 0;
}

archive_backend_t *archive_sim_new(const archive_backend_opts_t *opts, si_error_t *err)
{
    archive_backend_t *b = archive_backend_alloc(&sim_ops, sizeof(sim_t), err);
    if (!b)
        return NULL;
    sim_t *s = b->impl;
    if (archive_sim_config(opts->conf, opts->state_dir, &s->base, s->dir, sizeof(s->dir),
                           err) < 0) {
        free(b);
        free(s);
        return NULL;
    }
    const char *policy = si_conf_string(opts->conf, "library.policy", SCHED_DEFAULT_POLICY);
    if (!(s->policy = sched_policy_find(policy, err))) {
        simlib_config_free(&s->base);
        free(b);
        free(s);
        return NULL;
    }
    s->checksum_retries = (int)si_conf_int(opts->conf, "archive.checksum_retries", 1);
    s->cb = opts->cb;
    s->log = opts->log;
    pthread_mutex_init(&s->engine_mu, NULL);
    pthread_mutex_init(&s->write_mu, NULL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->write_cv, NULL);
    b->volume_loaded = sim_volume_loaded;
    /* Built now when there are volumes, so that a bad fault configuration
     * is reported at start-up, then put away: the library starts on first
     * use, so that its clock (and the configured faults' times) count from
     * the first recall or write. */
    char **labels = NULL;
    size_t n = 0;
    if (tapevol_list(s->dir, &labels, &n, err) < 0) {
        sim_free(b);
        return NULL;
    }
    tapevol_labels_free(labels, n);
    /* Instances sharing the volumes share the library's robots too. */
    if (si_conf_string(opts->conf, "stageind.instance", NULL)) {
        char path[PATH_MAX + 8];
        snprintf(path, sizeof(path), "%s/robots", s->dir);
        if (!(s->shared_robots = robot_ledger_open(path, s->base.robots, err))) {
            si_errprefix(err, "library");
            sim_free(b);
            return NULL;
        }
        s->base.shared_robots = s->shared_robots;
    }
    if (n > 0) {
        pthread_mutex_lock(&s->engine_mu);
        int rc = engine_build(s, err);
        if (rc == 0)
            engine_free(s);
        pthread_mutex_unlock(&s->engine_mu);
        if (rc < 0) {
            sim_free(b);
            return NULL;
        }
    }
    return b;
}
