/* Workload files (format and errors) and the W1..W4 generators. */
#include "config.h"

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
    const char *names[] = {"W1", "W2", "W3", "W4"};
    for (int i = 0; i < 4; i++) {
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
    ok(workload_generate("W9", false, 1, &w, &err) < 0 && strstr(err.text, "W9"),
       "unknown workload: %s", err.text);
    return done_testing();
}
