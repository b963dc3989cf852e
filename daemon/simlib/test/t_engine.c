/* The library engine: invariants, faults, writes and the real-time clock. */
#include "config.h"

#include <math.h>
#include <string.h>
#include <time.h>

#include "common/tap.h"
#include "daemon/simlib/engine.h"

typedef struct {
    int requests, failed_requests, reads, read_failures, writes;
    double last_t;
    uint64_t write_offset;
    char why[512];
} log_t;

static void on_request(void *arg, uint64_t request, double t, size_t failed, const char *why)
{
    (void)request;
    log_t *l = arg;
    l->requests++;
    l->last_t = t;
    if (failed) {
        l->failed_requests++;
        snprintf(l->why, sizeof(l->why), "%s", why);
    }
}

static void on_read(void *arg, const simlib_read_t *r)
{
    log_t *l = arg;
    if (r->request == 0 && r->ok && r->object >= 1000) {
        l->writes++;
        l->write_offset = r->offset;
    } else if (r->ok) {
        l->reads++;
    } else {
        l->read_failures++;
    }
}

static void base_config(simlib_config_t *cfg, int drives, int robots)
{
    simlib_config_default(cfg);
    cfg->drives = drives;
    cfg->robots = robots;
    simlib_config_add_volume(cfg, "V1", 2000000000000ULL, NULL);
    simlib_config_add_volume(cfg, "V2", 2000000000000ULL, NULL);
    simlib_config_add_volume(cfg, "V3", 2000000000000ULL, NULL);
}

/* 20 files: 1..10 on V1, 11..20 on V2; file 5 also on V3. */
static size_t files20(sched_file_t *f)
{
    for (int i = 0; i < 20; i++) {
        f[i] = (sched_file_t){(uint64_t)i + 1, 1,
                              {{i < 10 ? 0 : 1, (uint64_t)(i % 10) * 100000000000ULL, 2000000000}}};
    }
    f[4].ncopies = 2;
    f[4].copies[1] = (sched_copy_t){2, 5000000000ULL, 2000000000};
    return 20;
}

static simlib_t *run(simlib_config_t *cfg, const char *policy, log_t *l, simlib_stats_t *st)
{
    sched_options_t opt;
    sched_options_default(&opt);
    simlib_callbacks_t cb = {on_request, on_read, NULL, l};
    si_error_t err = {{0}};
    simlib_t *lib = simlib_new(cfg, sched_policy_find(policy, NULL), &opt, &cb, &err);
    if (!lib) {
        diag("simlib_new: %s", err.text);
        return NULL;
    }
    sched_file_t f[20];
    size_t n = files20(f);
    sched_request_t r1 = {1, 0, 0}, r2 = {2, 0, 0};
    simlib_submit(lib, 0, &r1, f, n / 2, &err);
    simlib_submit(lib, 10, &r2, f + n / 2, n / 2, &err);
    simlib_run(lib, &err);
    simlib_stats(lib, st);
    return lib;
}

int main(void)
{
    simlib_config_t cfg;
    simlib_stats_t st;
    log_t l;
    si_error_t err = {{0}};
    const char *policies[] = {"fifo", "linear", "edf", "cta-sltf", "cta-mount", "sltf",
                              "job-aware"};
    const int npolicies = 7;

    /* Every policy, no faults: all read once, invariants hold. */
    for (int p = 0; p < npolicies; p++) {
        base_config(&cfg, 2, 1);
        memset(&l, 0, sizeof(l));
        simlib_t *lib = run(&cfg, policies[p], &l, &st);
        ok(lib && l.requests == 2 && l.reads == 20 && st.reads == 20 && st.violations == 0,
           "%s: 2 requests, 20 reads, no violation (%s)", policies[p], st.first_violation);
        ok(st.mounts >= 2 && st.robot_moves >= 2 * st.mounts - 2, "%s: %llu mounts, %llu moves",
           policies[p], (unsigned long long)st.mounts, (unsigned long long)st.robot_moves);
        simlib_free(lib);
        simlib_config_free(&cfg);
    }

    /* Read-through is the drive's, whatever the policy: 200 files of 10 MB
     * one after the other with 1 KB tar headers between them are read with
     * no locate at all (the first starts at BOT), where a locate per file
     * would cost >= 4.29 s each. */
    for (int p = 0; p < npolicies; p++) {
        simlib_config_default(&cfg);
        simlib_config_add_volume(&cfg, "V1", 3000000000ULL, NULL);
        sched_options_t opt;
        sched_options_default(&opt);
        simlib_t *lib = simlib_new(&cfg, sched_policy_find(policies[p], NULL), &opt, NULL, &err);
        sched_file_t f[200];
        for (int i = 0; i < 200; i++)
            f[i] = (sched_file_t){(uint64_t)i + 1, 1,
                                  {{0, (uint64_t)i * (10000000 + 1024), 10000000}}};
        sched_request_t r = {1, 0, 0};
        simlib_submit(lib, 0, &r, f, 200, &err);
        simlib_run(lib, &err);
        simlib_stats(lib, &st);
        is_near(st.locate_s, 199 * 1024 / 400e6, 1e-9,
                "%s: 200 contiguous files: positioning = streaming 199 headers (%.6f s)",
                policies[p], st.locate_s);
        simlib_free(lib);
        simlib_config_free(&cfg);
    }

    /* Unreadable region over file 5 (second copy on V3) and file 7 (none). */
    base_config(&cfg, 2, 1);
    simlib_fault_t region = {.kind = FAULT_REGION, .volume = 0, .start = 401000000000ULL,
                             .length = 1000};
    simlib_config_add_fault(&cfg, &region, &err);
    region.start = 600000000000ULL;
    simlib_config_add_fault(&cfg, &region, &err);
    memset(&l, 0, sizeof(l));
    simlib_t *lib = run(&cfg, "job-aware", &l, &st);
    ok(lib && l.requests == 2 && st.violations == 0, "region fault: both requests complete");
    is_int(l.failed_requests, 1, "one request has a failed file");
    ok(strstr(l.why, "volume V1") && strstr(l.why, "unreadable region") &&
       strstr(l.why, "object 7"), "its reason names volume, region and object: %s", l.why);
    is_int(st.reads, 19, "19 objects read (file 5 from its second copy on V3)");
    is_int(st.objects_failed, 1, "one object failed");
    int slot, drive;
    simlib_volume_where(lib, 2, &slot, &drive);
    ok(slot >= 0 || drive >= 0, "V3 was used and is somewhere");
    simlib_free(lib);
    simlib_config_free(&cfg);

    /* Drive 0 fails during its first read: retried on drive 1. */
    base_config(&cfg, 2, 1);
    simlib_fault_t dead = {.kind = FAULT_DRIVE, .index = 0, .at = 35};
    simlib_config_add_fault(&cfg, &dead, &err);
    memset(&l, 0, sizeof(l));
    lib = run(&cfg, "linear", &l, &st);
    ok(lib && l.requests == 2 && l.failed_requests == 0 && st.reads == 20 && st.violations == 0,
       "drive failure mid-read: every file still read once (%s)", st.first_violation);
    simlib_drive_info_t di;
    simlib_drive_info(lib, 0, &di);
    is_str(simlib_drive_state_name(di.state), "failed", "drive 0 reports failed");
    simlib_drive_info(lib, 1, &di);
    ok(di.mounts >= 2, "drive 1 mounted both volumes (%llu mounts)",
       (unsigned long long)di.mounts);
    ok(di.volume >= 0 && di.pos.wrap == tape_position(&cfg.profile, di.head).wrap,
       "position report: wrap %d lpos %.1f m", di.pos.wrap, di.pos.lpos);
    simlib_free(lib);
    simlib_config_free(&cfg);

    /* Drive 0 fails at every moment of the run, in turn (mounting, reading,
     * unloading on its way to another volume...): drive 1 always finishes
     * every file, so no volume is left reserved by the dead drive. */
    {
        int bad = 0, tried = 0;
        char first[300] = "";
        for (double at = 1; at < 3000; at += 13) {
            base_config(&cfg, 2, 1);
            simlib_fault_t sweep = {.kind = FAULT_DRIVE, .index = 0, .at = at};
            simlib_config_add_fault(&cfg, &sweep, &err);
            memset(&l, 0, sizeof(l));
            lib = run(&cfg, "job-aware", &l, &st);
            tried++;
            if (!lib || l.requests != 2 || l.failed_requests != 0 || st.reads != 20 ||
                st.violations != 0) {
                if (!bad++)
                    snprintf(first, sizeof(first), "at %.0f s: %u requests, %llu reads, %s", at,
                             l.requests, (unsigned long long)st.reads, st.first_violation);
            }
            simlib_free(lib);
            simlib_config_free(&cfg);
        }
        ok(bad == 0, "drive failure at any of %d moments: all files read by the other drive%s%s",
           tried, bad ? "; first bad run " : "", first);
    }

    /* The only robot fails at once: nothing can be mounted, every request
     * fails with a clear reason, and the run ends. */
    base_config(&cfg, 2, 1);
    simlib_fault_t robot = {.kind = FAULT_ROBOT, .index = 0, .at = 0};
    simlib_config_add_fault(&cfg, &robot, &err);
    memset(&l, 0, sizeof(l));
    lib = run(&cfg, "job-aware", &l, &st);
    ok(lib && l.requests == 2 && l.failed_requests == 2 && strstr(l.why, "no working robot"),
       "robot failure: requests fail: %s", l.why);
    is_int(st.violations, 0, "no invariant broken");
    simlib_free(lib);
    simlib_config_free(&cfg);

    /* Bad fault: refused at creation. */
    base_config(&cfg, 2, 1);
    simlib_fault_t nodrive = {.kind = FAULT_DRIVE, .index = 5, .at = 1};
    simlib_config_add_fault(&cfg, &nodrive, &err);
    sched_options_t opt;
    sched_options_default(&opt);
    ok(simlib_new(&cfg, sched_policy_find("fifo", NULL), &opt, NULL, &err) == NULL &&
       strstr(err.text, "drive 5"), "a fault on a missing drive is refused: %s", err.text);
    simlib_config_free(&cfg);

    /* Write: appended at the end of data. */
    base_config(&cfg, 1, 1);
    memset(&l, 0, sizeof(l));
    simlib_callbacks_t cb = {on_request, on_read, NULL, &l};
    lib = simlib_new(&cfg, sched_policy_find("job-aware", NULL), &opt, &cb, &err);
    ok(simlib_write(lib, 0, 1, 1000, 5000000000ULL, &err) == 0, "write queued");
    ok(simlib_write(lib, 0, 1, 1001, 20e12, &err) < 0 && strstr(err.text, "free"),
       "a write past capacity is refused: %s", err.text);
    simlib_run(lib, &err);
    ok(l.writes == 1 && l.write_offset == 2000000000000ULL, "written at the old end of data");
    simlib_stats(lib, &st);
    ok(st.mounts == 1 && st.violations == 0, "one mount for the write");
    simlib_free(lib);
    simlib_config_free(&cfg);

    /* Write after another instance appended: the fill level read again. */
    base_config(&cfg, 1, 1);
    memset(&l, 0, sizeof(l));
    lib = simlib_new(&cfg, sched_policy_find("job-aware", NULL), &opt, &cb, &err);
    ok(simlib_volume_refill(lib, 1, 3000000000000ULL) == 0, "V2's fill level re-read");
    ok(simlib_volume_refill(lib, 1, 1000ULL) == 0, "a lower one is ignored (never back)");
    ok(simlib_volume_refill(lib, 7, 1000ULL) < 0, "an unknown volume is refused");
    ok(simlib_write(lib, 0, 1, 1000, 5000000000ULL, &err) == 0, "write queued");
    simlib_run(lib, &err);
    ok(l.writes == 1 && l.write_offset == 3000000000000ULL,
       "written at the end of data the other instance left");
    simlib_free(lib);
    simlib_config_free(&cfg);

    /* Real time, scaled: 1 simulated second = 0.1 ms. */
    base_config(&cfg, 2, 1);
    cfg.time_scale = 1e-4;
    memset(&l, 0, sizeof(l));
    lib = simlib_new(&cfg, sched_policy_find("job-aware", NULL), &opt, &cb, &err);
    ok(simlib_run(lib, &err) < 0, "simlib_run refuses the real-time clock");
    ok(simlib_start(lib, &err) == 0, "engine thread started");
    sched_file_t f[20];
    files20(f);
    sched_request_t r1 = {1, 0, 0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    simlib_submit(lib, 0, &r1, f, 20, &err);
    simlib_wait_idle(lib);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double real = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    simlib_stop(lib);
    simlib_stats(lib, &st);
    ok(l.requests == 1 && st.reads == 20 && st.violations == 0, "real time: request complete");
    ok(real >= l.last_t * 1e-4 * 0.9, "took %.3f s real for %.0f s simulated", real, l.last_t);
    simlib_free(lib);
    simlib_config_free(&cfg);
    return done_testing();
}
