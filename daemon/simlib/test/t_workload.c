/* Workload files (format and errors), the W1..W9 generators, the default
 * policy's pass estimate and deadline check. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/simlib/replay.h"
#include "daemon/simlib/workload.h"

static const char good[] =
    "# two volumes, one drive\n"
    "library drives=1 robots=1 profile=lto9\n"
    "volume A00001 fill=1000000000000\n"
    "volume A00002 fill=500000000000\n"
    "file 1 1000000 A00001:0\n"
    "file 2 2000000 A00001:500000000000 A00002:1000   # two copies\n"
    "file 3 3000000 A00002:400000000000\n"
    "request 7 at=0 files=1-3\n"
    "request 8 at=60.5 priority=2 deadline=3600 files=2,3\n"
    "fault drive=0 at=100000\n"
    "fault region volume=A00002 start=0 length=2000\n";

static void bad(const char *text, const char *want, const char *what)
{
    workload_t w;
    si_error_t err = {{0}};
    int rc = workload_parse(text, "t.wl", &w, &err);
    ok(rc < 0 && strstr(err.text, want), "%s: %s", what, err.text);
}

int main(void)
{
    workload_t w;
    si_error_t err = {{0}};

    ok(workload_parse(good, "good.wl", &w, &err) == 0, "good workload parses: %s", err.text);
    is_int(w.lib.drives, 1, "drives");
    is_int(w.lib.nvolumes, 2, "volumes");
    is_int(w.nfiles, 3, "files");
    is_int(w.files[1].ncopies, 2, "file 2 has two copies");
    is_int(w.files[1].copies[1].volume, 1, "second copy on A00002");
    is_int(w.nrequests, 2, "requests");
    is_int(w.requests[0].n, 3, "range 1-3 is three files");
    ok(w.requests[1].at == 60.5 && w.requests[1].req.priority == 2 &&
       w.requests[1].req.deadline == 3600, "arrival, priority, deadline");
    is_int(w.lib.nfaults, 2, "two faults");
    ok(w.lib.faults[1].kind == FAULT_REGION && w.lib.faults[1].volume == 1,
       "region fault on A00002");
    replay_result_t r;
    ok(workload_replay(&w, sched_policy_find("job-aware", NULL), &r, &err) == 0 &&
       r.violations == 0 && r.reads == 3 && r.requests_failed == 0,
       "replay: 3 reads (file 2 from its readable copy), no violation");
    workload_free(&w);

    bad("library drives=0\n", "t.wl:1: drives", "zero drives");
    bad("volume A fill=10\nvolume A fill=10\n", "t.wl:2: volume A declared twice", "duplicate");
    bad("volume A fill=10\nfile 1 100 A:0\n", "t.wl:2:", "file past the fill");
    bad("volume A fill=1000\nfile 1 10 B:0\n", "t.wl:2: file 1: volume 'B' is not declared",
        "unknown volume");
    bad("volume A fill=1000\nfile 2 10 A:0\nfile 1 10 A:20\n", "t.wl:3: file 1: ids must be",
        "decreasing ids");
    bad("volume A fill=1000\nfile 1 10 A:0\nrequest 1 at=0 files=1,9\n",
        "t.wl:3: request names file 9", "unknown file in a request");
    bad("volume A fill=1000\nfile 1 10 A:0\nrequest 1 at=-4 files=1\n", "t.wl:3: at: '-4' is not a number",
        "negative time");
    bad("volume A fill=1000\nfile 1 10 A:0\nrequest 1 files=1\n", "t.wl:3: request 1 needs",
        "missing at=");
    bad("volume A fill=1000\n\n# c\nbogus 1\n", "t.wl:4: unknown statement 'bogus'", "bogus");
    bad("volume A fill=1000\nfile 1 1x A:0\n", "t.wl:2: file size: '1x'", "bad number");
    bad("volume A fill=1000\nfile 1 10 A:0\nrequest 1 at=0 files=1\nfile 2 10 A:20\n",
        "t.wl:4: file lines must come before", "file after a request");
    bad("volume A fill=1000\nfile 1 10 A:0\nrequest 1 at=0 files=1\nfault drive=3 at=1\n",
        "fault on drive 3", "fault on a missing drive");
    ok(workload_load("/nonexistent/x.wl", &w, &err) < 0 && strstr(err.text, "/nonexistent/x.wl"),
       "missing file: %s", err.text);

    /* Generators: deterministic, and the documented shapes. */
    for (int i = 0; workload_standard[i]; i++) {
        const char *const *names = workload_standard;
        workload_t a, b;
        ok(workload_generate(names[i], true, 42, &a, &err) == 0 &&
           workload_generate(names[i], true, 42, &b, &err) == 0, "%s quick generated", names[i]);
        ok(a.nfiles == b.nfiles && a.nreq_files == b.nreq_files &&
           memcmp(a.files, b.files, a.nfiles * sizeof(*a.files)) == 0 &&
           memcmp(a.req_files, b.req_files, a.nreq_files * sizeof(size_t)) == 0,
           "%s: same seed, same workload", names[i]);
        bool inside = true;
        for (size_t f = 0; f < a.nfiles; f++)
            for (int c = 0; c < a.files[f].ncopies; c++) {
                const sched_copy_t *cp = &a.files[f].copies[c];
                inside &= cp->offset + cp->size <= a.lib.volumes[cp->volume].used;
            }
        ok(inside, "%s: every copy lies within its volume's fill", names[i]);
        workload_free(&a);
        workload_free(&b);
    }
    ok(workload_generate("W1", false, 1, &w, &err) == 0 && w.nfiles == 20000 &&
       w.lib.nvolumes == 40 && w.lib.drives == 8, "W1: 20,000 files, 40 volumes, 8 drives");
    workload_free(&w);
    ok(workload_generate("w4", false, 1, &w, &err) == 0 && w.nfiles == 2000 &&
       w.lib.drives == 1 && w.nrequests == 1, "W4: 2,000 files, one drive, one request");
    workload_free(&w);
    /* The scheduler plans with positions off by up to 50 m: still correct,
     * still ahead of linear order. */
    const char *est = "library drives=1 position_error_m=50\n";
    ok(workload_parse(est, "e.wl", &w, &err) < 0 && strstr(err.text, "needs at least"),
       "position_error_m parses (the workload is empty)");
    workload_t w4;
    workload_generate("W4", true, 3, &w4, &err);
    replay_result_t lin, def;
    workload_replay(&w4, sched_policy_find("linear", NULL), &lin, &err);
    w4.lib.profile.position_error_m = 50;
    ok(workload_replay(&w4, sched_policy_find("job-aware", NULL), &def, &err) == 0 &&
       def.violations == 0 && def.reads == w4.nfiles, "W4 with 50 m position error: all read");
    ok(def.locate_s < lin.locate_s, "and still less positioning than linear (%.0f vs %.0f s)",
       def.locate_s, lin.locate_s);
    workload_free(&w4);
    ok(workload_generate("W10", false, 1, &w, &err) < 0 && strstr(err.text, "W10"),
       "unknown workload: %s", err.text);
    ok(workload_is_standard("w6x") && !workload_is_standard("W10"), "standard names");

    /* The default's cost model: its pass estimate against the engine's
     * simulated pass (makespan - mount) on one drive, random and contiguous
     * layouts. */
    for (int layout = 0; layout < 2; layout++) {
        workload_t lw;
        if (layout == 0) {
            workload_generate("W4", true, 7, &lw, &err);
        } else {
            /* 3,000 files of 1-100 MB back to back from 5 TB in, tar
             * headers between, and every third one requested. */
            size_t cap = 4096 * 64 + 1024;
            char *text = malloc(cap);
            size_t len = (size_t)snprintf(text, cap, "volume C fill=18000000000000\n");
            uint64_t pos = 5000000000000ULL;
            for (int i = 1; i <= 3000; i++) {
                uint64_t size = 1000000ULL * (uint64_t)(1 + (i * 37) % 100);
                if (len + 64 >= cap)
                    text = realloc(text, cap *= 2);
                len += (size_t)snprintf(text + len, cap - len, "file %d %llu C:%llu\n", i,
                                        (unsigned long long)size, (unsigned long long)pos);
                pos += size + 1024;
            }
            if (len + 64 >= cap)
                text = realloc(text, cap *= 2);
            snprintf(text + len, cap - len, "request 1 at=0 files=1-3000\n");
            ok(workload_parse(text, "contiguous.wl", &lw, &err) == 0, "contiguous layout parses");
            free(text);
        }
        sched_options_t opt;
        sched_options_default(&opt);
        opt.nvolumes = lw.lib.nvolumes;
        opt.profile = lw.lib.profile;
        opt.drives = 1;
        sched_t *s = sched_new(sched_policy_find("job-aware", NULL), &opt, NULL, &err);
        sched_file_t *fl = malloc(lw.requests[0].n * sizeof(*fl));
        for (size_t k = 0; k < lw.requests[0].n; k++)
            fl[k] = lw.files[lw.req_files[lw.requests[0].first + k]];
        sched_submit(s, 0, &lw.requests[0].req, fl, lw.requests[0].n, &err);
        double estimate = sched_volume_pass_time(s, 0, 0);
        replay_result_t run;
        workload_replay(&lw, sched_policy_find("job-aware", NULL), &run, &err);
        double simulated = run.makespan_s - tape_mount_time(&lw.lib.profile);
        ok(fabs(estimate / simulated - 1) < 0.03,
           "%s layout: pass estimate %.0f s, engine %.0f s (within 3%%)",
           layout == 0 ? "random (W4)" : "contiguous", estimate, simulated);
        free(fl);
        sched_free(s);
        workload_free(&lw);
    }

    /* Deadlines: one big job due in 1 h beside three small ones without a
     * deadline, one drive. Serving the small ones first (more completions
     * per second: Smith's rule alone) would finish the big one at ~3,700 s;
     * the feasibility check serves it first and meets its deadline. */
    const char *dl = "library drives=1\n"
                     "volume A fill=2000000000000\nvolume B fill=100000000000\n"
                     "volume C fill=100000000000\nvolume D fill=100000000000\n"
                     "file 1 600000000000 A:0\nfile 2 600000000000 A:600000000000\n"
                     "file 3 1000000000 B:50000000000\nfile 4 1000000000 C:50000000000\n"
                     "file 5 1000000000 D:50000000000\n"
                     "request 1 at=0 deadline=3500 files=1-2\n"
                     "request 2 at=0 files=3\nrequest 3 at=0 files=4\nrequest 4 at=0 files=5\n";
    ok(workload_parse(dl, "dl.wl", &w, &err) == 0, "deadline workload parses");
    replay_result_t dr, de;
    ok(workload_replay(&w, sched_policy_find("job-aware", NULL), &dr, &err) == 0 &&
       dr.violations == 0, "job-aware runs it");
    is_int(dr.missed_deadlines, 0, "job-aware: the feasible deadline is met");
    workload_replay(&w, sched_policy_find("edf", NULL), &de, &err);
    is_int(de.missed_deadlines, 0, "as EDF meets it");
    ok(dr.mean_completion_s <= de.mean_completion_s * 1.01,
       "and the small jobs are no later than under EDF (mean %.0f s vs %.0f s)",
       dr.mean_completion_s, de.mean_completion_s);
    workload_free(&w);
    /* Without the deadline Smith's rule serves the small ones first: the
     * check above is what kept the big job on time. */
    ok(workload_parse(dl, "dl.wl", &w, &err) == 0, "again");
    w.requests[0].req.deadline = 0;
    workload_replay(&w, sched_policy_find("job-aware", NULL), &dr, &err);
    ok(dr.makespan_s > 3500 && dr.mean_completion_s < de.mean_completion_s,
       "without a deadline the big job ends last (%.0f s)", dr.makespan_s);
    workload_free(&w);
    return done_testing();
}
