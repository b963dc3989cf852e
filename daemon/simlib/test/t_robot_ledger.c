/* The shared robots' booking file, alone and under two engines. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/tap.h"
#include "daemon/simlib/engine.h"
#include "daemon/simlib/robot_ledger.h"

static double mono_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void on_request(void *arg, uint64_t request, double t, size_t failed, const char *why)
{
    (void)request;
    (void)t;
    (void)why;
    int *done = arg;
    *done += failed ? 100 : 1;
}

static void on_read(void *arg, const simlib_read_t *r)
{
    (void)arg;
    (void)r;
}

/* A real-time engine of one drive and one robot over volume V1 (scale 1e-2:
 * a 12 s robot move takes 0.12 s), sharing robots through ledger. */
static simlib_t *engine(robot_ledger_t *ledger, simlib_config_t *cfg, int *done)
{
    simlib_config_default(cfg);
    cfg->time_scale = 1e-2;
    cfg->shared_robots = ledger;
    simlib_config_add_volume(cfg, "V1", 1000000000ULL, NULL);
    sched_options_t opt;
    sched_options_default(&opt);
    simlib_callbacks_t cb = {on_request, on_read, NULL, done};
    si_error_t err = {{0}};
    simlib_t *lib = simlib_new(cfg, sched_policy_find("job-aware", NULL), &opt, &cb, &err);
    if (!lib || simlib_start(lib, &err) < 0)
        diag("engine: %s", err.text);
    return lib;
}

static void recall_one(simlib_t *lib)
{
    sched_file_t f = {1, 1, {{0, 0, 1000000}}};
    sched_request_t r = {1, 0, 0};
    si_error_t err = {{0}};
    simlib_submit(lib, 0, &r, &f, 1, &err);
}

int main(void)
{
    char dir[] = "/tmp/t_robot_ledger.XXXXXX", path[64];
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof(path), "%s/robots", dir);
    si_error_t err = {{0}};
    bool both[2] = {true, true}, second[2] = {false, true};
    int r = -1;
    double wait = -1;

    robot_ledger_t *a = robot_ledger_open(path, 2, &err), *b = robot_ledger_open(path, 2, &err);
    ok(a && b, "two handles on one new booking file");
    struct stat st;
    ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "the file is private (0600)");
    ok(robot_ledger_book(a, both, 100, &r, &wait, &err) == 0 && r == 0 && wait == 0,
       "first move: robot 0, at once");
    ok(robot_ledger_book(b, both, 50, &r, &wait, &err) == 0 && r == 1 && wait == 0,
       "second move, other handle: the free robot 1, at once");
    int rc = robot_ledger_book(a, both, 10, &r, &wait, &err);
    ok(rc == 0 && r == 1 && wait > 49 && wait <= 50,
       "third: robot 1, free soonest, after its move (waits %.3f s)", wait);
    rc = robot_ledger_book(b, second, 10, &r, &wait, &err);
    ok(rc == 0 && r == 1 && wait > 59 && wait <= 60,
       "only robot 1 usable: queued behind both its moves (waits %.3f s)", wait);
    bool none[2] = {false, false};
    rc = robot_ledger_book(a, none, 10, &r, &wait, &err);
    ok(rc < 0 && strstr(err.text, "no working"), "no usable robot: refused (%s)", err.text);
    robot_ledger_close(b);

    robot_ledger_t *c = robot_ledger_open(path, 3, &err);
    ok(!c && strstr(err.text, "library.robots = 3") && strstr(err.text, "have 2 robots"),
       "another robot count: refused naming the setting (%s)", err.text);
    robot_ledger_close(a);

    char bad[80];
    snprintf(bad, sizeof(bad), "%s/other", dir);
    FILE *f = fopen(bad, "w");
    fputs("not a booking file at all", f);
    fclose(f);
    c = robot_ledger_open(bad, 1, &err);
    ok(!c && strstr(err.text, "is not a robot booking file"), "a foreign file: refused (%s)",
       err.text);
    unlink(bad);
    unlink(path);

    /* Engines: another instance's move booked for 0.3 s holds the one robot;
     * this engine's mount waits for it. */
    robot_ledger_t *shared = robot_ledger_open(path, 1, &err), *other = robot_ledger_open(path, 1, &err);
    bool one[1] = {true};
    double t0 = mono_s();
    ok(robot_ledger_book(other, one, 0.3, &r, &wait, &err) == 0 && wait == 0,
       "another instance's move booked for 0.3 s");
    simlib_config_t cfg1, cfg2;
    int done1 = 0, done2 = 0;
    simlib_t *e1 = engine(shared, &cfg1, &done1);
    recall_one(e1);
    simlib_wait_idle(e1);
    double took = mono_s() - t0;
    simlib_stats_t s1;
    simlib_stats(e1, &s1);
    ok(done1 == 1 && s1.violations == 0, "the recall completed");
    ok(took >= 0.3 && s1.robot_wait_s > 0,
       "its mount began after the other's move: done %.3f s after, waited %.1f simulated s",
       took, s1.robot_wait_s);
    ok(s1.robot_ledger_errors == 0, "no booking failed");

    /* Two engines at once over one robot: each move booked, none lost. */
    simlib_t *e2 = engine(other, &cfg2, &done2);
    recall_one(e2);
    simlib_wait_idle(e2);
    simlib_stats_t s2;
    simlib_stats(e2, &s2);
    ok(done2 == 1 && s2.violations == 0 && s2.robot_moves >= 1, "a second engine recalls too");
    simlib_free(e1);
    simlib_free(e2);
    simlib_config_free(&cfg1);
    simlib_config_free(&cfg2);

    /* Without a ledger nothing is booked (one instance). */
    simlib_config_t cfg3;
    int done3 = 0;
    simlib_t *e3 = engine(NULL, &cfg3, &done3);
    recall_one(e3);
    simlib_wait_idle(e3);
    simlib_stats_t s3;
    simlib_stats(e3, &s3);
    ok(done3 == 1 && s3.robot_wait_s == 0, "alone: no wait for others");
    simlib_free(e3);
    simlib_config_free(&cfg3);
    robot_ledger_close(shared);
    robot_ledger_close(other);
    unlink(path);
    rmdir(dir);
    return done_testing();
}
