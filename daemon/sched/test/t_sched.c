/* The scheduler's bookkeeping and decisions, without an engine. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/sched/sched.h"

typedef struct {
    int done;
    uint64_t last;
    size_t failed;
    char why[256];
} seen_t;

static void on_done(void *arg, uint64_t request, double now, size_t failed, const char *why)
{
    (void)now;
    seen_t *s = arg;
    s->done++;
    s->last = request;
    s->failed += failed;
    if (why)
        snprintf(s->why, sizeof(s->why), "%s", why);
}

static sched_t *make(const char *policy, int nvolumes, seen_t *seen)
{
    sched_options_t opt;
    sched_options_default(&opt);
    opt.nvolumes = nvolumes;
    sched_callbacks_t cb = {on_done, seen};
    return sched_new(sched_policy_find(policy, NULL), &opt, &cb, NULL);
}

static sched_file_t file1(uint64_t id, int vol, uint64_t off, uint64_t size)
{
    sched_file_t f = {id, 1, {{vol, off, size}}};
    return f;
}

/* The pass as seen from outside (a drive's RAO): listed, costed, reordered. */
static void test_plan_reorder(void)
{
    seen_t seen = {0};
    sched_t *s = make("linear", 1, &seen);
    sched_file_t f[4] = {file1(1, 0, 9000000000ULL, 1000), file1(2, 0, 1000000000ULL, 1000),
                         file1(3, 0, 5000000000ULL, 1000), file1(4, 0, 3000000000ULL, 1000)};
    sched_request_t rq = {1, 0, 0};
    sched_submit(s, 0, &rq, f, 4, NULL);
    sched_pending_t p[8];
    size_t n = sched_volume_plan(s, 0, 0, p, 8);
    ok(n == 4 && p[0].object_id == 2 && p[1].object_id == 4 && p[2].object_id == 3 &&
           p[3].object_id == 1, "the pass listed in the scheduler's order (linear: by offset)");
    is_int(sched_volume_plan(s, 0, 0, p, 2), 2, "at most max listed");
    sched_volume_plan(s, 0, 0, p, 8);
    sched_pending_t rev[4] = {p[3], p[2], p[1], p[0]};
    double t_sched = sched_order_locate_time(s, 0, p, 4);
    double t_rev = sched_order_locate_time(s, 0, rev, 4);
    ok(t_sched > 0 && t_rev > t_sched, "the model costs the reversed order more (%.1f s > %.1f s)",
       t_rev, t_sched);
    uint64_t ids[3] = {3, 99, 1}; /* 99: not in the pass */
    is_int(sched_volume_reorder(s, 0, ids, 3), 2, "two reads placed by the given order");
    sched_read_t r;
    uint64_t got[4] = {0};
    for (int i = 0; i < 4 && sched_next_read(s, 0, 0, 0, &r) == 1; i++) {
        got[i] = r.object_id;
        sched_read_done(s, &r, 0);
    }
    ok(got[0] == 3 && got[1] == 1 && got[2] == 2 && got[3] == 4,
       "the reads come in the new order, the rest after as planned (%llu %llu %llu %llu)",
       (unsigned long long)got[0], (unsigned long long)got[1], (unsigned long long)got[2],
       (unsigned long long)got[3]);
    is_int(seen.done, 1, "the request completes");
    sched_free(s);
}

int main(void)
{
    si_error_t err = {{0}};
    uint8_t none[8] = {0};
    double wake;
    sched_read_t r;

    test_plan_reorder();
    ok(sched_policy_find("job-aware", &err) != NULL, "default policy exists");
    ok(sched_policy_find("nope", &err) == NULL && strstr(err.text, "fifo, linear"),
       "unknown policy lists the known ones: %s", err.text);

    /* Shared objects are recalled once; requests complete when all is read. */
    seen_t seen = {0};
    sched_t *s = make("linear", 2, &seen);
    sched_file_t a[2] = {file1(10, 0, 5000000000ULL, 1000), file1(11, 0, 1000000000ULL, 1000)};
    sched_file_t b[1] = {file1(10, 0, 5000000000ULL, 1000)};
    sched_request_t ra = {1, 0, 0}, rb = {2, 0, 0};
    ok(sched_submit(s, 0, &ra, a, 2, &err) == 0, "request 1 accepted");
    ok(sched_submit(s, 0, &rb, b, 1, &err) == 0, "request 2 shares object 10");
    ok(sched_submit(s, 0, &ra, b, 1, &err) < 0 && strstr(err.text, "already"),
       "a request id twice is refused: %s", err.text);
    sched_file_t bad = file1(12, 7, 0, 1);
    sched_request_t rc = {3, 0, 0};
    ok(sched_submit(s, 0, &rc, &bad, 1, &err) < 0 && strstr(err.text, "volume 7"),
       "a copy on a volume that does not exist is refused: %s", err.text);
    is_int(sched_queued(s), 2, "two objects queued (not three)");
    is_int(sched_open_requests(s), 2, "the refused request left nothing behind");
    is_int(sched_choose_volume(s, 0, -1, 0, none, &wake), 0, "linear: the queued volume");
    ok(sched_next_read(s, 0, 0, 0, &r) == 1 && r.object_id == 11, "linear: lower offset first");
    sched_read_done(s, &r, 10);
    is_int(seen.done, 0, "no request complete yet");
    ok(sched_next_read(s, 0, r.offset + r.size, 10, &r) == 1 && r.object_id == 10,
       "then the shared object");
    sched_read_done(s, &r, 20);
    is_int(seen.done, 2, "both requests complete after one read of the shared object");
    ok(sched_next_read(s, 0, 0, 20, &r) == 0, "the volume's queue is empty");
    sched_request_t rd = {4, 0, 0};
    sched_submit(s, 30, &rd, b, 1, &err);
    is_int(seen.done, 3, "an object already staged completes a new request at once");
    is_int(sched_queued(s), 0, "and is not queued again");
    sched_free(s);

    /* Failure of a copy: the second copy is used; without one the request
     * fails with the reason, and the others complete. */
    memset(&seen, 0, sizeof(seen));
    s = make("job-aware", 3, &seen);
    sched_file_t two = {20, 2, {{0, 100, 10}, {1, 200, 10}}};
    sched_file_t one = file1(21, 0, 300, 10);
    sched_file_t three[2] = {two, one};
    sched_request_t r5 = {5, 0, 0};
    sched_submit(s, 0, &r5, three, 2, &err);
    ok(sched_next_read(s, 0, 0, 0, &r) == 1 && r.object_id == 20, "object 20 from volume 0");
    is_int(sched_read_failed(s, &r, 1, "volume V0: unreadable"), 1,
           "copy failure: another copy queued");
    ok(sched_next_read(s, 0, 110, 1, &r) == 1 && r.object_id == 21, "object 21 still read");
    is_int(sched_read_failed(s, &r, 2, "volume V0: unreadable at 300"), 0,
           "no other copy: the object fails");
    ok(sched_next_read(s, 1, 0, 3, &r) == 1 && r.object_id == 20, "object 20 from volume 1");
    sched_read_done(s, &r, 4);
    ok(seen.done == 1 && seen.failed == 1 && strstr(seen.why, "unreadable at 300"),
       "request completes with one failure and its reason: %s", seen.why);
    sched_free(s);

    /* CTA-like qualification: a small young queue waits for min-age. */
    memset(&seen, 0, sizeof(seen));
    s = make("cta-sltf", 2, &seen);
    sched_request_t r6 = {6, 0, 0};
    sched_file_t f6 = file1(30, 1, 0, 1000);
    sched_submit(s, 100, &r6, &f6, 1, &err);
    is_int(sched_choose_volume(s, 100, -1, 0, none, &wake), -1, "cta: small young queue waits");
    is_near(wake, 700, 1e-9, "until its oldest request is 600 s old");
    is_int(sched_choose_volume(s, 700, -1, 0, none, &wake), 1, "then it qualifies");
    uint8_t busy[2] = {0, 1};
    is_int(sched_choose_volume(s, 700, -1, 0, busy, &wake), -1,
           "a volume in another drive is not chosen");
    sched_free(s);

    /* Job-aware: the volume that completes a request goes before a bigger
     * one that completes nothing yet; priority classes read first. */
    memset(&seen, 0, sizeof(seen));
    s = make("job-aware", 2, &seen);
    sched_file_t big[3] = {file1(40, 0, 0, 1000), file1(41, 0, 10000000000ULL, 1000),
                           file1(42, 1, 0, 1000)};
    sched_request_t r7 = {7, 0, 0};
    sched_submit(s, 0, &r7, big, 3, &err);
    sched_file_t small = file1(43, 1, 20000000000ULL, 1000);
    sched_request_t r8 = {8, 0, 0};
    sched_submit(s, 0, &r8, &small, 1, &err);
    is_int(sched_choose_volume(s, 0, -1, 0, none, &wake), 1,
           "job-aware: the volume that finishes request 8 first");
    sched_file_t urgent = file1(44, 1, 30000000000ULL, 1000);
    sched_request_t r9 = {9, 5, 0};
    sched_submit(s, 0, &r9, &urgent, 1, &err);
    ok(sched_next_read(s, 1, 0, 0, &r) == 1 && r.object_id == 44,
       "the priority-5 file is read first on the volume");
    sched_free(s);

    /* EDF: the volume holding the earliest deadline, then priority, then
     * age; files in offset order on it. */
    memset(&seen, 0, sizeof(seen));
    s = make("edf", 4, &seen);
    sched_file_t e0 = file1(50, 0, 0, 1000), e1[2] = {file1(51, 1, 9000000, 1000),
                                                       file1(52, 1, 1000, 1000)};
    sched_file_t e2 = file1(53, 2, 0, 1000), e3 = file1(54, 3, 0, 1000);
    sched_request_t q0 = {20, 0, 0}, q1 = {21, 0, 5000}, q2 = {22, 3, 9000}, q3 = {23, 0, 9000};
    sched_submit(s, 0, &q0, &e0, 1, &err);
    sched_submit(s, 1, &q3, &e3, 1, &err);
    sched_submit(s, 2, &q2, &e2, 1, &err);
    sched_submit(s, 3, &q1, e1, 2, &err);
    is_int(sched_choose_volume(s, 3, -1, 0, none, &wake), 1, "edf: earliest deadline first");
    ok(sched_next_read(s, 1, 0, 3, &r) == 1 && r.object_id == 52, "edf: linear order on it");
    uint8_t no1[4] = {0, 1, 0, 0};
    is_int(sched_choose_volume(s, 3, -1, 0, no1, &wake), 2,
           "edf: equal deadlines, higher priority first");
    uint8_t no12[4] = {0, 1, 1, 0};
    is_int(sched_choose_volume(s, 3, -1, 0, no12, &wake), 3,
           "edf: a deadline before none at all");
    uint8_t no123[4] = {0, 1, 1, 1};
    is_int(sched_choose_volume(s, 3, -1, 0, no123, &wake), 0, "edf: then requests without one");
    sched_free(s);

    /* cta-mount: CTA's mount criteria with the true-cost greedy. */
    memset(&seen, 0, sizeof(seen));
    s = make("cta-mount", 2, &seen);
    sched_submit(s, 100, &r6, &f6, 1, &err);
    is_int(sched_choose_volume(s, 100, -1, 0, none, &wake), -1,
           "cta-mount: a small young queue waits for min-age");
    sched_file_t many[3] = {file1(60, 0, 0, 200000000000ULL), file1(61, 0, 300000000000ULL,
                                                                   200000000000ULL),
                            file1(62, 0, 600000000000ULL, 200000000000ULL)};
    sched_request_t r10 = {10, 0, 0};
    sched_submit(s, 100, &r10, many, 3, &err);
    is_int(sched_choose_volume(s, 100, -1, 0, none, &wake), 0,
           "cta-mount: a queue of >= 500 GB qualifies at once");
    sched_free(s);

    /* Job-aware: the pass time it costs a volume with is the plan's, from
     * the drive's locate/stream decisions. 1,000 files of 100 MB one after
     * the other (1 KB tar headers between): one locate from BOT, then
     * streaming. */
    memset(&seen, 0, sizeof(seen));
    s = make("job-aware", 1, &seen);
    sched_file_t run[1000];
    for (int i = 0; i < 1000; i++)
        run[i] = file1(100 + (uint64_t)i, 0, 5000000000ULL + (uint64_t)i * 100001024ULL,
                       100000000);
    sched_request_t r11 = {11, 0, 0};
    sched_submit(s, 0, &r11, run, 1000, &err);
    tape_profile_t lto9;
    tape_profile_builtin("lto9", &lto9, NULL);
    double want = tape_locate_time(&lto9, 0, 5000000000ULL) + 1000 * 1e8 / 400e6 +
                  999 * 1024 / 400e6;
    is_near(sched_volume_pass_time(s, 0, 0), want, 1e-6,
            "contiguous run: one locate + bytes / rate = %.1f s (not a locate per file)", want);
    sched_free(s);
    return done_testing();
}
