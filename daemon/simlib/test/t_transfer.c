/* The real-time engine's byte transfers: a read's fetch starts with the
 * modelled read, on the drive's own worker, without the engine's lock; the
 * read ends when both are over. Checked without timing thresholds: fetches
 * wait for each other or for the test, so a serialised engine fails (or
 * times out) instead of merely being slower. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/tap.h"
#include "daemon/simlib/engine.h"
#include "daemon/tape/model.h"
#include "common/thread.h"

#define MAX_OBJ 32
#define WAIT_S 20.0   /* only bounds a broken engine's hang */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* fetches */
    int in_fetch, max_in_fetch;
    int calls[MAX_OBJ], running[MAX_OBJ], max_running_same;
    int fetch_drive[MAX_OBJ], fetch_volume[MAX_OBJ];
    double fetch_t[MAX_OBJ];          /* simulated start of the read */
    uint64_t gated;                   /* its fetch waits for gate_open */
    bool gate_open, gated_in;
    uint64_t partner;                 /* its fetch waits until gated's runs */
    bool partner_met;
    uint64_t spin;                    /* its first fetch waits to be abandoned */
    bool spinning, saw_abandoned;
    uint64_t fail_first;              /* its first fetch fails */
    uint64_t fail_always;             /* every fetch of it fails */
    /* engine callbacks */
    int ok_reads[MAX_OBJ], failed_reads[MAX_OBJ];
    int ok_volume[MAX_OBJ], failed_volume[MAX_OBJ];
    double done_t[MAX_OBJ];
    pthread_t fetch_thread[MAX_OBJ], read_thread[MAX_OBJ];
    int requests, failed_requests;
    char why[512];
} ctx_t;

static void ctx_init(ctx_t *c)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
}

static void ctx_free(ctx_t *c)
{
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
}

static void deadline_in(struct timespec *t, double s)
{
    clock_gettime(CLOCK_REALTIME, t);
    t->tv_sec += (time_t)s;
}

/* Waits (mu held) until *flag, at most WAIT_S; returns *flag. */
static bool wait_flag(ctx_t *c, const bool *flag)
{
    struct timespec dl;
    deadline_in(&dl, WAIT_S);
    while (!*flag)
        if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT)
            break;
    return *flag;
}

static int fetch(void *arg, const simlib_read_t *r, si_error_t *err)
{
    ctx_t *c = arg;
    uint64_t o = r->object;
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    c->calls[o]++;
    c->fetch_drive[o] = r->drive;
    c->fetch_volume[o] = r->volume;
    c->fetch_t[o] = r->t;
    c->fetch_thread[o] = pthread_self();
    if (++c->in_fetch > c->max_in_fetch)
        c->max_in_fetch = c->in_fetch;
    if (++c->running[o] > c->max_running_same)
        c->max_running_same = c->running[o];
    pthread_cond_broadcast(&c->cv);
    if (o == c->gated) {
        c->gated_in = true;
        pthread_cond_broadcast(&c->cv);
        wait_flag(c, &c->gate_open);
    } else if (o == c->partner) {
        /* both inside fetch at once: the transfers overlap */
        c->partner_met = wait_flag(c, &c->gated_in);
    } else if (o == c->spin && c->calls[o] == 1) {
        c->spinning = true;
        pthread_cond_broadcast(&c->cv);
        struct timespec dl;
        deadline_in(&dl, WAIT_S);
        while (!atomic_load(r->abandoned)) {
            struct timespec tick;
            clock_gettime(CLOCK_REALTIME, &tick);
            tick.tv_nsec += 1000000;
            if (tick.tv_nsec >= 1000000000L) {
                tick.tv_sec++;
                tick.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&c->cv, &c->mu, &tick);
            if (tick.tv_sec > dl.tv_sec)
                break;
        }
        c->saw_abandoned = atomic_load(r->abandoned);
        rc = si_errprintf(err, "test: transfer abandoned");
    } else if ((o == c->fail_first && c->calls[o] == 1) || o == c->fail_always) {
        rc = si_errprintf(err, "test: EIO from the transfer of object %llu on volume %d",
                          (unsigned long long)o, r->volume);
    }
    c->in_fetch--;
    c->running[o]--;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static void on_read(void *arg, const simlib_read_t *r)
{
    ctx_t *c = arg;
    pthread_mutex_lock(&c->mu);
    if (r->ok) {
        c->ok_reads[r->object]++;
        c->ok_volume[r->object] = r->volume;
        c->done_t[r->object] = r->t;
        c->read_thread[r->object] = pthread_self();
    } else {
        c->failed_reads[r->object]++;
        c->failed_volume[r->object] = r->volume;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void on_request(void *arg, uint64_t request, double t, size_t failed, const char *why)
{
    ctx_t *c = arg;
    (void)request;
    (void)t;
    pthread_mutex_lock(&c->mu);
    c->requests++;
    if (failed) {
        c->failed_requests++;
        snprintf(c->why, sizeof(c->why), "%s", why ? why : "");
    }
    pthread_mutex_unlock(&c->mu);
}

/* buffer: the drives' buffer in bytes, < 0 for the profile's */
static simlib_t *start_lib_buffer(ctx_t *c, int drives, int nvolumes, double buffer)
{
    si_error_t err = {{0}};
    simlib_config_t cfg;
    simlib_config_default(&cfg);
    if (buffer >= 0)
        cfg.profile.buffer_bytes = buffer;
    cfg.drives = drives;
    cfg.time_scale = 1e-3;
    for (int v = 0; v < nvolumes; v++) {
        char label[8];
        snprintf(label, sizeof(label), "T%d", v + 1);
        simlib_config_add_volume(&cfg, label, 2000000000000ULL, NULL);
    }
    simlib_callbacks_t cb = {on_request, on_read, fetch, c};
    sched_options_t opt;
    sched_options_default(&opt);
    simlib_t *lib = simlib_new(&cfg, sched_policy_find("job-aware", NULL), &opt, &cb, &err);
    simlib_config_free(&cfg);
    if (!lib || simlib_start(lib, &err) < 0) {
        diag("engine: %s", err.text);
        simlib_free(lib);
        return NULL;
    }
    return lib;
}

static simlib_t *start_lib(ctx_t *c, int drives, int nvolumes)
{
    return start_lib_buffer(c, drives, nvolumes, -1);
}

static sched_file_t file_on(uint64_t object, int volume, uint64_t offset)
{
    return (sched_file_t){object, 1, {{volume, offset, 1000000000}}};
}

/* Lets the gated fetch go on and waits until every request is done. */
static void open_gate_until_idle(ctx_t *c, simlib_t *lib, simlib_stats_t *st)
{
    si_flag_raise(&c->mu, &c->cv, &c->gate_open);
    simlib_wait_idle(lib);
    simlib_stats(lib, st);
}

/* Object 1 (on T1) has a fetch that blocks until the test lets it go; 2..4
 * (on T2) are read by the other drive meanwhile; 2's fetch runs while 1's
 * does. */
static void slow_fetch_delays_only_its_drive(void)
{
    ctx_t c;
    ctx_init(&c);
    c.gated = 1;
    c.partner = 2;
    simlib_t *lib = start_lib(&c, 2, 2);
    if (!ok(lib != NULL, "two-drive engine running with a fetch callback"))
        return;
    sched_file_t f[4] = {file_on(1, 0, 0), file_on(2, 1, 0), file_on(3, 1, 50000000000ULL),
                         file_on(4, 1, 90000000000ULL)};
    sched_request_t req = {1, 0, 0};
    si_error_t err = {{0}};
    ok(simlib_submit(lib, 0, &req, f, 4, &err) == 0, "request submitted: %s", err.text);

    pthread_mutex_lock(&c.mu);
    bool in = wait_flag(&c, &c.gated_in);
    struct timespec dl;
    deadline_in(&dl, WAIT_S);
    while (in && c.ok_reads[2] + c.ok_reads[3] + c.ok_reads[4] < 3)
        if (pthread_cond_timedwait(&c.cv, &c.mu, &dl) == ETIMEDOUT)
            break;
    int others = c.ok_reads[2] + c.ok_reads[3] + c.ok_reads[4];
    int first = c.ok_reads[1], drive1 = c.fetch_drive[1], drive2 = c.fetch_drive[2];
    bool met = c.partner_met;
    double started1 = c.fetch_t[1];
    pthread_mutex_unlock(&c.mu);
    ok(in, "object 1's fetch started");
    is_int(others, 3, "the other drive read objects 2..4 while object 1's fetch was blocked");
    ok(met, "object 2's fetch ran while object 1's fetch was still running (overlap)");
    ok(drive1 != drive2, "on different drives (%d, %d)", drive1, drive2);
    is_int(first, 0, "object 1's read has not completed: its bytes are not in");
    simlib_drive_info_t info = {.state = DRIVE_FAILED};
    int info_rc = simlib_drive_info(lib, drive1, &info);
    ok(info_rc == 0 && info.state == DRIVE_READING,
       "its drive reports reading (and the engine's lock is free during the fetch): %s",
       simlib_drive_state_name(info.state));
    /* modelled: 1 GB at 400 MB/s = 2.5 s after the read started */
    double opened = simlib_now(lib);
    ok(opened > started1 + 2.5, "the modelled read (from %.2f s) was over before the fetch "
       "(now %.2f s)", started1, opened);

    simlib_stats_t st;
    open_gate_until_idle(&c, lib, &st);
    pthread_mutex_lock(&c.mu);
    ok(c.done_t[1] >= opened, "object 1 completed at %.2f s, after its fetch returned (%.2f s)",
       c.done_t[1], opened);
    ok(c.requests == 1 && c.failed_requests == 0, "request complete");
    for (int o = 1; o <= 4; o++)
        if (c.calls[o] != 1 || c.ok_reads[o] != 1)
            diag("object %d: %d fetches, %d reads", o, c.calls[o], c.ok_reads[o]);
    ok(c.calls[1] == 1 && c.calls[2] == 1 && c.calls[3] == 1 && c.calls[4] == 1,
       "one fetch per object");
    pthread_mutex_unlock(&c.mu);
    is_int(st.reads, 4, "four reads");
    is_int(st.violations, 0, "no invariant broken: %s", st.first_violation);
    simlib_free(lib);
    ctx_free(&c);
}

/* The drive fails while object 11's fetch runs: the fetch is told, its
 * result dropped, and the read retried elsewhere only after it returned. */
static void drive_failure_abandons_transfer(void)
{
    ctx_t c;
    ctx_init(&c);
    c.spin = 11;
    simlib_t *lib = start_lib(&c, 2, 1);
    if (!ok(lib != NULL, "engine running"))
        return;
    sched_file_t f[2] = {file_on(11, 0, 0), file_on(12, 0, 30000000000ULL)};
    sched_request_t req = {1, 0, 0};
    si_error_t err = {{0}};
    simlib_submit(lib, 0, &req, f, 2, &err);
    pthread_mutex_lock(&c.mu);
    bool spinning = wait_flag(&c, &c.spinning);
    int drive = c.fetch_drive[11];
    pthread_mutex_unlock(&c.mu);
    if (!ok(spinning, "object 11's fetch is running")) {
        simlib_free(lib);
        return;
    }
    simlib_fault_t fault = {.kind = FAULT_DRIVE, .index = drive, .at = 0};
    ok(simlib_inject(lib, &fault, &err) == 0, "drive %d fails now: %s", drive, err.text);
    simlib_wait_idle(lib);
    simlib_stats_t st;
    simlib_stats(lib, &st);
    pthread_mutex_lock(&c.mu);
    ok(c.saw_abandoned, "the fetch saw its read abandoned");
    is_int(c.calls[11], 2, "object 11 fetched again after the failure");
    is_int(c.max_running_same, 1, "never two fetches of one object at a time");
    ok(c.fetch_drive[11] != drive, "the retry ran on the other drive (%d)", c.fetch_drive[11]);
    is_int(c.ok_reads[11], 1, "object 11 read once");
    is_int(c.failed_reads[11], 0, "the abandoned attempt is not a failed copy");
    is_int(c.ok_reads[12], 1, "object 12 read once");
    ok(c.requests == 1 && c.failed_requests == 0, "request complete: %s", c.why);
    pthread_mutex_unlock(&c.mu);
    is_int(st.reads, 2, "two reads counted");
    is_int(st.violations, 0, "no invariant broken: %s", st.first_violation);
    simlib_free(lib);
    ctx_free(&c);
}

/* An archive file's members read back to back (1 MB each, a 512-byte header
 * between them): object 1's bytes come long after its modelled read is over.
 * Its drive's worker then ends the read and starts the next one itself,
 * instead of handing it to the engine thread and waiting to be handed the
 * next read back; each modelled read is counted once. Meanwhile the tape
 * read on into the drive's buffer: with the profile's (16 MiB) the next
 * members began in it; with none the tape stopped, and they take their
 * modelled time after object 1. */
static void late_bytes_end_on_worker(double buffer)
{
    enum { N = 8, SIZE = 1000000, HEADER = 512 };
    ctx_t c;
    ctx_init(&c);
    c.gated = 1;
    diag("drive buffer: %s", buffer < 0 ? "the profile's" : "none");
    simlib_t *lib = start_lib_buffer(&c, 1, 1, buffer);
    if (!ok(lib != NULL, "engine running"))
        return;
    sched_file_t f[N];
    for (int i = 0; i < N; i++)
        f[i] = (sched_file_t){(uint64_t)i + 1, 1,
                              {{0, (uint64_t)i * (SIZE + HEADER) + HEADER, SIZE}}};
    sched_request_t req = {1, 0, 0};
    si_error_t err = {{0}};
    simlib_submit(lib, 0, &req, f, N, &err);
    pthread_mutex_lock(&c.mu);
    bool in = wait_flag(&c, &c.gated_in);
    double started = c.fetch_t[1];
    pthread_mutex_unlock(&c.mu);
    simlib_config_t cfg;
    simlib_config_default(&cfg);
    double model = tape_read_time(&cfg.profile, SIZE);
    simlib_config_free(&cfg);
    /* hold the bytes until the modelled read is well over */
    struct timespec dl;
    deadline_in(&dl, WAIT_S);
    while (in && simlib_now(lib) < started + 10 * model) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec > dl.tv_sec)
            break;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    double opened = simlib_now(lib);
    simlib_stats_t st;
    open_gate_until_idle(&c, lib, &st);
    pthread_mutex_lock(&c.mu);
    ok(in, "object 1's fetch started");
    int once = 0;
    for (int o = 1; o <= N; o++)
        once += c.calls[o] == 1 && c.ok_reads[o] == 1;
    is_int(once, N, "each member fetched and read once");
    ok(c.done_t[1] >= opened, "object 1 ended after its bytes came (%.4f s, gate at %.4f s)",
       c.done_t[1], opened);
    ok(pthread_equal(c.read_thread[1], c.fetch_thread[1]),
       "its read was ended on its drive's worker, which fetched it");
    ok(pthread_equal(c.fetch_thread[2], c.fetch_thread[1]), "the next member's fetch ran there too");
    ok(c.ok_reads[2] == 1 && c.fetch_t[2] >= c.done_t[1],
       "the next member's read started when object 1's ended (%.4f s >= %.4f s)", c.fetch_t[2],
       c.done_t[1]);
    pthread_mutex_unlock(&c.mu);
    ok(st.read_s > N * model * 0.999 && st.read_s < N * model * 1.001,
       "each modelled read counted once: read_s %.6f s for %d x %.6f s", st.read_s, N, model);
    double rest = c.done_t[N] - c.done_t[1];
    double cap = 16.0 * 1024 * 1024 / 400e6;
    if (buffer < 0)
        ok(st.buffered_s >= model && st.buffered_s <= (N - 1) * cap,
           "the next members began in the drive's buffer: %.4f s of tape time buffered"
           " (at most %.4f s a read)", st.buffered_s, cap);
    else
        ok(rest >= (N - 1) * model * 0.999 && st.buffered_s == 0,
           "without a buffer the tape waited: they took their %.4f s after object 1", rest);
    is_int(st.violations, 0, "no invariant broken: %s", st.first_violation);
    simlib_free(lib);
    ctx_free(&c);
}

/* EIO from a transfer: the object's other copy is read; with no other copy
 * the request fails with the transfer's reason. */
static void transfer_error_tries_next_copy(void)
{
    ctx_t c;
    ctx_init(&c);
    c.fail_first = 21;
    c.fail_always = 22;
    simlib_t *lib = start_lib(&c, 2, 2);
    if (!ok(lib != NULL, "engine running"))
        return;
    sched_file_t f[2] = {file_on(21, 0, 0), file_on(22, 0, 40000000000ULL)};
    f[0].ncopies = 2;
    f[0].copies[1] = (sched_copy_t){1, 0, 1000000000};
    sched_request_t req = {1, 0, 0};
    si_error_t err = {{0}};
    simlib_submit(lib, 0, &req, f, 2, &err);
    simlib_wait_idle(lib);
    simlib_stats_t st;
    simlib_stats(lib, &st);
    pthread_mutex_lock(&c.mu);
    is_int(c.failed_reads[21], 1, "object 21's first copy failed");
    is_int(c.ok_reads[21], 1, "object 21 read from its other copy");
    ok(c.ok_volume[21] != c.failed_volume[21], "on the other volume (%d, failed on %d)",
       c.ok_volume[21], c.failed_volume[21]);
    is_int(c.failed_reads[22], 1, "object 22's only copy failed");
    ok(c.requests == 1 && c.failed_requests == 1 && strstr(c.why, "EIO from the transfer"),
       "the request fails with the transfer's reason: %s", c.why);
    pthread_mutex_unlock(&c.mu);
    is_int(st.read_failures, 2, "two failed reads counted");
    is_int(st.violations, 0, "no invariant broken: %s", st.first_violation);
    simlib_free(lib);
    ctx_free(&c);
}

int main(void)
{
    slow_fetch_delays_only_its_drive();
    drive_failure_abandons_transfer();
    transfer_error_tries_next_copy();
    late_bytes_end_on_worker(-1);
    late_bytes_end_on_worker(0);
    return done_testing();
}
