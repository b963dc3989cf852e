/* The tape backend's recall side over a scripted drive that has LOCATE(16)
 * and RAO (tgt has neither). The drive's Recommended Access Order against
 * the scheduler's: the GENERATE RAO list names each queued read's first
 * and last logical object, both orders are costed by the model and logged,
 * and the order executed (the LOCATE(16)s of the pass) is the drive's with
 * rao = use, the scheduler's with compare, and no RAO is asked for with
 * off. ETA forecasts: from the library as it stands (a mounted cartridge
 * saves the mount), none once nothing is queued or no drive is left. */
#include "config.h"

#include <stdio.h>

#include "common/tap.h"
#include "daemon/archive/tape/state.h"

#define BLOCK 4096u
#define GB 1000000000ULL

typedef struct {
    char log[4096];            /* "NAME args;" per command */
    uint8_t list[8 + 32 * 8];  /* the last GENERATE RAO parameter list */
    size_t list_len;
} rao_drive_t;

static void log_cmd(rao_drive_t *s, const char *name, const char *args)
{
    size_t n = strlen(s->log);
    snprintf(s->log + n, sizeof(s->log) - n, "%s%s;", name, args);
}

static int drive_submit(void *impl, const scsi_cmd_t *c, scsi_result_t *res, si_error_t *err)
{
    rao_drive_t *s = impl;
    (void)err;
    char args[64] = "";
    const uint8_t *b = c->cdb;
    res->status = SCSI_GOOD;
    res->transferred = c->len;
    if (b[0] == 0x92) {
        uint64_t id = 0;
        for (int i = 4; i < 12; i++)
            id = id << 8 | b[i];
        snprintf(args, sizeof(args), " %llu", (unsigned long long)id);
    } else if (b[0] == 0xa4 && c->len <= sizeof(s->list)) {
        memcpy(s->list, c->buf, c->len);
        s->list_len = c->len;
    } else if (b[0] == 0xa3 && s->list_len) {
        /* the drive recommends the segments in reverse */
        scsi_uds_t *u = NULL;
        size_t n = 0;
        scsi_parse_rao(s->list, s->list_len, &u, &n, NULL);
        for (size_t i = 0; i < n / 2; i++) {
            scsi_uds_t x = u[i];
            u[i] = u[n - 1 - i];
            u[n - 1 - i] = x;
        }
        res->transferred = scsi_rao_list(c->buf, c->len, u, n);
        free(u);
    } else if (b[0] == 0x08) {
        /* a block of BLOCK bytes, shorter than asked: ILI with the residue */
        uint32_t resid = (uint32_t)(c->len - BLOCK);
        uint8_t sn[18] = {0xf0, 0, 0x20, (uint8_t)(resid >> 24), (uint8_t)(resid >> 16),
                          (uint8_t)(resid >> 8), (uint8_t)resid, 10};
        memset(c->buf, 'x', BLOCK);
        res->status = SCSI_CHECK_CONDITION;
        memcpy(res->sense, sn, sizeof(sn));
        res->sense_len = sizeof(sn);
        res->transferred = BLOCK;
    }
    log_cmd(s, c->name, args);
    return 0;
}

static void drive_close(void *impl)
{
    (void)impl;
}

static const scsi_transport_t drive_transport = {drive_submit, drive_close, NULL, NULL, NULL};

/* the cache's side: every attempt accepted */
static int sink_begin(void *arg, const archive_item_t *item, void **session, si_error_t *err)
{
    (void)arg, (void)err;
    *session = (void *)(intptr_t)item->object_id;
    return 0;
}

static int sink_write(void *arg, void *session, const void *buf, size_t len, si_error_t *err)
{
    (void)arg, (void)session, (void)buf, (void)len, (void)err;
    return 0;
}

static int sink_commit(void *arg, void *session, si_error_t *err)
{
    (void)arg, (void)session, (void)err;
    return 0;
}

static void sink_abort(void *arg, void *session)
{
    (void)arg, (void)session;
}

static void sink_done(void *arg, int64_t object_id, bool ok, const char *why)
{
    (void)object_id, (void)why;
    *(int *)arg += ok;
}

/* Three objects of one block, about 1, 2 and 3 GB into archive file 1 of
 * cartridge T1, recalled in one request through tape_read_volume. */
static tape_t *setup(tape_rao_mode_t mode, rao_drive_t *s, const char *logfile, int *delivered)
{
    tape_t *t = calloc(1, sizeof(*t));
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_init(&t->changer_mu, NULL);
    pthread_mutex_init(&t->log_mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    si_log_opts_t lo = {.ident = "t_backend", .level = SI_LOG_INFO, .file = logfile};
    t->log = si_log_open(&lo, NULL);
    t->block = t->max_block = BLOCK;
    t->rao = mode;
    t->cb = (archive_recall_cb_t){sink_begin, sink_write, sink_commit, sink_abort, NULL,
                                  sink_done, delivered, NULL, NULL, NULL};
    t->nvols = 1;
    t->vols = calloc(1, sizeof(*t->vols));
    snprintf(t->vols[0].label, sizeof(t->vols[0].label), "T1");
    t->vols[0].drive = 0;
    t->vols[0].busy = true;
    t->vols[0].nfiles = 1;
    t->vols[0].files = calloc(1, sizeof(tfile_t));
    t->vols[0].files[0] = (tfile_t){1024, 1024 + 4 * GB, BLOCK};

    sched_options_t so;
    sched_options_default(&so);
    so.nvolumes = 1;
    so.drives = 1;
    tape_profile_builtin("lto9", &so.profile, NULL);
    t->profile = so.profile;
    sched_callbacks_t cb = {tape_on_request_done, t};
    t->sched = sched_new(sched_policy_find("job-aware", NULL), &so, &cb, NULL);

    enum { N = 3 };
    sched_file_t files[N];
    t->recs = calloc(N, sizeof(*t->recs));
    t->reqs = calloc(1, sizeof(*t->reqs));
    t->reqs[0].tokens = calloc(N, sizeof(uint64_t));
    t->reqs[0].n = N;
    t->reqs[0].batch = 77;
    t->nreqs = t->cap_reqs = 1;
    for (int i = 0; i < N; i++) {
        trec_t *r = calloc(1, sizeof(*r));
        r->req = 1;
        r->item.object_id = 100 + i;
        r->item.size = BLOCK;
        r->item.ncopies = 1;
        r->item.copies[0] = (archive_copy_t){1, "T1", 1, 1024 + (uint64_t)(i + 1) * 250000 * BLOCK, BLOCK};
        t->recs[i] = r;
        t->reqs[0].tokens[i] = (uint64_t)i + 1;
        files[i] = (sched_file_t){(uint64_t)i + 1, 1, {{0, r->item.copies[0].position, BLOCK}}};
    }
    t->nrecs = t->cap_recs = N;
    t->outstanding = N;
    sched_request_t req = {1, 0, 0};
    sched_submit(t->sched, si_mono_now(), &req, files, N, NULL);

    t->ndrives = 1;
    tdrive_t *d = &t->drives[0];
    d->t = t;
    d->vol = 0;
    d->verified = true;
    d->buf_vol = -1;
    d->buf = malloc(read_max(t));
    d->head = TAPEVOL_RECORD;
    d->io = (tape_drive_t){.can_locate = true, .can_rao = true, .probed = true, .retries = 1,
                           .retry_ms = 1};
    d->io.dev = scsi_dev_new("drive0", &drive_transport, s, NULL);
    return t;
}

static void done(tape_t *t)
{
    scsi_close(t->drives[0].io.dev);
    free(t->drives[0].buf);
    sched_free(t->sched);
    for (size_t i = 0; i < t->nrecs; i++)
        free(t->recs[i]);
    free(t->recs);
    free(t->reqs[0].tokens);
    free(t->reqs);
    free(t->vols[0].files);
    free(t->vols);
    free(t->reports);
    si_log_close(t->log);
    free(t);
}

/* A pass over the cartridge in the drive. */
static void read_pass(tape_t *t)
{
    pthread_mutex_lock(&t->mu);
    tape_read_volume(&t->drives[0], 0);
    pthread_mutex_unlock(&t->mu);
    tape_flush_reports(t);
}

static void run(tape_rao_mode_t mode, rao_drive_t *s, const char *logfile, int *delivered,
                tape_t **out)
{
    *out = setup(mode, s, logfile, delivered);
    read_pass(*out);
}

static void test_forecast(const char *logfile)
{
    rao_drive_t s = {0};
    int delivered = 0;
    tape_t *t = setup(TAPE_RAO_OFF, &s, logfile, &delivered);
    archive_backend_t b = {.ops = NULL, .impl = t};
    archive_forecast_t *f = NULL;
    size_t n = 0;
    si_error_t err = {0};
    int rc = tape_forecast(&b, &f, &n, &err);
    ok(rc == 0 && n == 1 && f[0].batch == 77 && f[0].items == 3,
       "forecast: one batch, 3 items queued");
    double mounted = rc == 0 && n == 1 ? f[0].eta_s : 0;
    free(f);
    /* the model's pass: 3 locates and reads, no mount */
    ok(mounted > 0 && mounted < tape_mount_time(&t->profile) + 600,
       "the cartridge in the drive: ETA %.1f s (locates and reads)", mounted);
    is_int(tape_volume_loaded(&b, "T1"), 1, "a cartridge in a drive is loaded (its lease kept)");
    is_int(tape_volume_loaded(&b, "T9"), 0, "an unknown cartridge is not loaded");
    t->drives[0].vol = -1;
    t->vols[0].drive = -1;
    is_int(tape_volume_loaded(&b, "T1"), 1, "one being moved into a drive is loaded");
    t->vols[0].busy = false;
    is_int(tape_volume_loaded(&b, "T1"), 0, "one in its slot is not");
    t->vols[0].busy = true;
    rc = tape_forecast(&b, &f, &n, &err);
    double unmounted = rc == 0 && n == 1 ? f[0].eta_s : 0;
    free(f);
    ok(unmounted >= mounted + tape_mount_time(&t->profile) * 0.5,
       "not mounted: the mount is added (%.1f s, mount %.1f s)", unmounted,
       tape_mount_time(&t->profile));
    t->drives[0].failed = true;
    ok(tape_forecast(&b, &f, &n, &err) == 0 && n == 0, "no drive left: no forecast");
    free(f);
    t->drives[0].failed = false;
    t->drives[0].vol = 0;
    t->vols[0].drive = 0;
    read_pass(t);
    is_int(delivered, 3, "the pass read everything");
    ok(tape_forecast(&b, &f, &n, &err) == 0 && n == 0, "nothing queued: no forecast");
    free(f);
    done(t);
}

static bool file_has(const char *path, const char *what)
{
    char buf[8192] = "";
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strstr(buf, what) != NULL;
}

int main(void)
{
    char logfile[] = "/tmp/t_backend.XXXXXX";
    int fd = mkstemp(logfile);
    close(fd);
    /* logical objects: 2 before archive file 1 (label, filemark), then
     * the objects' blocks 250000, 500000, 750000 */
    const char *ascending = "LOCATE(16) 250002;READ(6);LOCATE(16) 500002;READ(6);"
                            "LOCATE(16) 750002;READ(6);";
    const char *descending = "LOCATE(16) 750002;READ(6);LOCATE(16) 500002;READ(6);"
                             "LOCATE(16) 250002;READ(6);";

    rao_drive_t s = {0};
    int delivered = 0;
    tape_t *t;
    run(TAPE_RAO_USE, &s, logfile, &delivered, &t);
    const char *rao = "GENERATE RECOMMENDED ACCESS ORDER;RECEIVE RECOMMENDED ACCESS ORDER;";
    ok(strncmp(s.log, rao, strlen(rao)) == 0, "use: GENERATE then RECEIVE RAO before the pass");
    scsi_uds_t *u = NULL;
    size_t n = 0;
    scsi_parse_rao(s.list, s.list_len, &u, &n, NULL);
    ok(n == 3 && u[0].begin == 250002 && u[0].end == 250002 && u[2].begin == 750002 && u[2].end == 750002 &&
           strcmp(u[0].name, "0") == 0 && strcmp(u[2].name, "2") == 0,
       "the list sent: one segment per queued read, its first and last logical object, in "
       "the scheduler's order");
    free(u);
    ok(strstr(s.log, descending) != NULL, "use: the pass executed in the drive's order: %s",
       s.log);
    is_int(delivered, 3, "every object delivered");
    ok(t->rao_passes == 1 && t->rao_used == 1 && t->rao_drive_s > t->rao_sched_s &&
           t->rao_sched_s > 0,
       "the model's estimates: the drive's order %.1f s, the scheduler's %.1f s", t->rao_drive_s,
       t->rao_sched_s);
    ok(file_has(logfile, "the drive's Recommended Access Order") &&
           file_has(logfile, "reading in the drive's order"), "the comparison is logged");
    done(t);

    memset(&s, 0, sizeof(s));
    delivered = 0;
    run(TAPE_RAO_COMPARE, &s, logfile, &delivered, &t);
    ok(strstr(s.log, "RECEIVE RECOMMENDED ACCESS ORDER;") && strstr(s.log, ascending),
       "compare: asked, and the pass executed in the scheduler's order: %s", s.log);
    ok(t->rao_passes == 1 && t->rao_used == 0 && delivered == 3, "compare: counted, not used");
    ok(file_has(logfile, "(archive.tape.rao = compare)"), "compare: logged as such");
    done(t);

    memset(&s, 0, sizeof(s));
    delivered = 0;
    run(TAPE_RAO_OFF, &s, logfile, &delivered, &t);
    ok(!strstr(s.log, "RECOMMENDED") && strstr(s.log, ascending) && t->rao_passes == 0,
       "off: no RAO asked, the scheduler's order: %s", s.log);
    done(t);

    test_forecast(logfile);
    unlink(logfile);
    return done_testing();
}
