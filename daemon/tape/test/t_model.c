/* The tape model against hand-computed values and IBM's published averages. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/tape/model.h"

static void averages(const tape_profile_t *p, double *avg_locate, double *max_locate,
                     double *avg_rewind)
{
    /* Uniform targets: a fine even grid over the whole capacity. */
    const int n = 200000;
    double sum = 0, max = 0, rsum = 0;
    for (int i = 0; i < n; i++) {
        uint64_t off = (uint64_t)((i + 0.5) / n * p->capacity);
        double t = tape_locate_time(p, 0, off);
        sum += t;
        if (t > max)
            max = t;
        rsum += tape_rewind_time(p, off);
    }
    *avg_locate = sum / n;
    *max_locate = max;
    *avg_rewind = rsum / n;
}

int main(void)
{
    si_error_t err = {{0}};
    tape_profile_t p;
    plan(55);

    ok(tape_profile_builtin("lto9", &p, &err) == 0, "lto9 profile");
    ok(tape_profile_builtin("lto7", &p, &err) < 0 && strstr(err.text, "lto7"),
       "unknown profile refused: %s", err.text);
    tape_profile_builtin(NULL, &p, &err);
    is_str(p.name, "lto9", "default profile is lto9");

    double bpw = tape_bytes_per_wrap(&p);
    is_near(bpw, 18e12 / 280, 1, "bytes per wrap = 64.3 GB");
    is_near(tape_full_pass_time(&p), 160.714, 0.01, "full pass ~161 s");

    double avg, max, rew;
    averages(&p, &avg, &max, &rew);
    is_near(avg, 45.0, 0.5, "average locate from BOT ~45 s (got %.2f)", avg);
    is_near(max, 78.0, 0.6, "longest locate from BOT ~78 s (got %.2f)", max);
    is_near(rew, 56.0, 0.3, "average rewind ~56 s (got %.2f)", rew);

    /* Positions. */
    tape_pos_t pos = tape_position(&p, 0);
    ok(pos.wrap == 0 && pos.band == 0 && pos.lpos == 0, "offset 0 is BOT");
    pos = tape_position(&p, (uint64_t)(bpw / 2));
    is_int(pos.wrap, 0, "half a wrap: wrap 0");
    is_near(pos.lpos, 517.5, 1e-3, "half a wrap: lpos 517.5 m");
    pos = tape_position(&p, (uint64_t)(1.25 * bpw));
    is_int(pos.wrap, 1, "1.25 wraps: wrap 1");
    is_near(pos.lpos, 776.25, 1e-3, "odd wrap runs backwards: lpos 776.25 m");
    pos = tape_position(&p, (uint64_t)(70 * bpw));
    ok(pos.wrap == 70 && pos.band == 1 && pos.lpos < 1e-6, "wrap 70 starts band 1 at BOT");
    is_int(tape_physical_band(&p, 0), 3, "logical band 0 is physical band 3");
    pos = tape_position(&p, (uint64_t)p.capacity);
    ok(pos.wrap == 279 && pos.lpos == 0, "end of tape: last (odd) wrap ends at BOT");
    /* The end of wrap 0 and the start of wrap 1 are the same spot. */
    tape_pos_t e0 = tape_position(&p, (uint64_t)bpw - 1);
    tape_pos_t s1 = tape_position(&p, (uint64_t)bpw);
    is_near(e0.lpos, s1.lpos, 1e-3, "wrap turn: same lpos at EOT");

    /* Locates computed by hand with the LTO-9 constants. */
    is_near(tape_locate_time(&p, 0, 0), 0, 0, "locate to where the head is: 0");
    is_near(tape_locate_time(&p, 0, (uint64_t)(bpw / 2)), 4.29 + 517.5 / 17.8, 1e-3,
            "BOT -> mid wrap 0: t_base + 517.5/17.8 = 33.363");
    is_near(tape_locate_time(&p, (uint64_t)(bpw / 2), (uint64_t)(bpw / 4)),
            4.29 + 11.32 + 258.75 / 17.8, 1e-3, "step back on wrap 0: 30.147");
    is_near(tape_locate_time(&p, 0, (uint64_t)(1.25 * bpw)),
            4.29 + 6.69 + 5.22 + 776.25 / 17.8, 1e-3,
            "BOT -> wrap 1: wrap + direction change: 59.810");
    is_near(tape_locate_time(&p, 0, (uint64_t)(70 * bpw)), 4.29 + 6.69 + 3.2, 1e-3,
            "BOT -> wrap 70: wrap + band change, no distance: 14.18");
    is_near(tape_locate_time(&p, 0, 1), 4.29 + (1035.0 / bpw) / 17.8, 1e-6,
            "one byte ahead still costs t_base");
    is_near(tape_rewind_time(&p, (uint64_t)(bpw / 2)), 4.29 + 51.75, 1e-3,
            "rewind from mid wrap: 56.04");
    is_near(tape_rewind_time(&p, 0), 0, 0, "rewind at BOT: 0");
    is_near(tape_read_time(&p, 400000000), 1.0, 1e-12, "400 MB read in 1 s");
    is_near(tape_mount_time(&p), 29, 1e-9, "mount = robot 12 + load 17");
    is_near(tape_unmount_time(&p, 0), 42, 1e-9, "unmount at BOT = unload 30 + robot 12");

    /* Cost models. */
    tape_cost_model_t cta = tape_cta_costs(&p);
    tape_pos_t bot = tape_position(&p, 0), mid = tape_position(&p, (uint64_t)(bpw / 2));
    tape_pos_t far = tape_position(&p, (uint64_t)(0.75 * bpw));
    is_near(tape_cost(&cta, bot, 0, far, (uint64_t)(0.75 * bpw)),
            4.29 - 6.04 + 776.25 * 0.086, 1e-3, "CTA heuristic BOT -> 3/4 wrap: landing zone bonus");
    tape_cost_model_t tru = tape_true_costs(&p);
    is_near(tape_cost(&tru, mid, 5, mid, 5), 0, 0, "true cost of a contiguous target: 0");
    tape_pos_t near = tape_position(&p, (uint64_t)(bpw / 2) + 400000000);
    is_near(tape_cost(&tru, mid, (uint64_t)(bpw / 2), near, (uint64_t)(bpw / 2) + 400000000),
            1.0, 1e-9, "reading 400 MB through a gap (1 s) beats a 4.3 s locate");

    /* Read-through: the drive streams over a gap ahead when that is quicker
     * than a locate. Same wrap, gap g: stream g / R against
     * 4.29 + (g / bpw) x L / 17.8; equal at g = 4.29 / (1 / R - L / (bpw x 17.8))
     * = 2.689 GB. */
    uint64_t m0 = (uint64_t)(bpw / 4);
    bool streamed = false;
    is_near(tape_seek_time(&p, m0, m0 + 1024, &streamed), 1024 / 400e6, 1e-15,
            "a 1 KB tar header ahead: streamed (2.56 us), no 4.29 s locate");
    ok(streamed, "and it says it streamed");
    is_near(tape_seek_time(&p, m0, m0 + 2500000000ULL, &streamed), 6.25, 1e-9,
            "2.5 GB ahead: streamed, 6.25 s < locate 6.55 s");
    ok(streamed, "below the 2.689 GB crossover it streams");
    double loc29 = 4.29 + 2.9e9 / bpw * 1035 / 17.8;
    is_near(tape_seek_time(&p, m0, m0 + 2900000000ULL, &streamed), loc29, 1e-9,
            "2.9 GB ahead: located, %.3f s < streaming 7.25 s", loc29);
    ok(!streamed, "above the crossover it locates");
    is_near(tape_seek_time(&p, m0 + 1024, m0, &streamed), 4.29 + 11.32 + 1024 / bpw * 1035 / 17.8,
            1e-9, "a target behind the head: a locate with a step-back");
    ok(!streamed, "never streams backwards");
    is_near(tape_seek_time(&p, m0, m0, &streamed), 0, 0, "the next byte: 0");
    uint64_t wrap_end = (uint64_t)bpw - 1000;
    is_near(tape_seek_time(&p, wrap_end, wrap_end + 2000, &streamed), 2000 / 400e6, 1e-15,
            "a small gap across a wrap turn is streamed too (serpentine)");
    /* The true cost model is the drive's decision, exactly. */
    bool same = true;
    for (uint64_t k = 1; k < 200; k++) {
        uint64_t a = (k * 7919 * 1000003ULL) % (uint64_t)p.capacity;
        uint64_t b = a + (k * k * 1000000ULL) % 6000000000ULL;
        double c = tape_cost(&tru, tape_position(&p, a), a, tape_position(&p, b), b);
        same &= fabs(c - tape_seek_time(&p, a, b, NULL)) < 1e-9;
    }
    ok(same, "tape_cost under the true model equals tape_seek_time (200 gaps, 0-6 GB)");

    /* LTO-10 profile reproduces IBM's averages. */
    ok(tape_profile_builtin("lto10", &p, &err) == 0, "lto10 profile");
    averages(&p, &avg, &max, &rew);
    is_near(avg, 65.0, 0.5, "lto10 average locate ~65 s (got %.2f)", avg);
    is_near(rew, 62.0, 0.5, "lto10 average rewind ~62 s (got %.2f)", rew);

    /* Configuration overrides and errors. */
    const si_conf_key_t *const schemas[] = {tape_conf_keys, NULL};
    si_conf_t *conf = si_conf_load_string("tape = { locate_speed_m_s = 20.0; wraps = 208; "
                                          "bands = 4; load_s = 10; buffer_bytes = 0.0; }\n",
                                          schemas, &err);
    ok(conf != NULL, "tape group accepted: %s", conf ? "" : err.text);
    ok(tape_profile_from_conf(conf, "lto9", &p, &err) == 0, "profile from conf");
    is_near(p.v_locate, 20.0, 0, "locate speed overridden");
    is_int(p.wraps, 208, "wraps overridden");
    is_near(p.load_s, 10, 0, "load time overridden");
    is_near(p.buffer_bytes, 0, 0, "drive buffer overridden (none)");
    tape_profile_t lto9;
    tape_profile_builtin("lto9", &lto9, NULL);
    is_near(lto9.buffer_bytes, 16.0 * 1024 * 1024, 0, "lto9's drive buffer: 16 MiB");
    si_conf_free(conf);

    conf = si_conf_load_string("tape = {\n bands = 4;\n band_order = [0, 1];\n}\n", schemas, &err);
    ok(conf && tape_profile_from_conf(conf, "lto9", &p, &err) < 0 &&
       strstr(err.text, ":3:") && strstr(err.text, "band_order"),
       "band_order of the wrong length refused with its line: %s", err.text);
    si_conf_free(conf);
    conf = si_conf_load_string("tape = { wraps = 281; }\n", schemas, &err);
    ok(conf && tape_profile_from_conf(conf, "lto9", &p, &err) < 0 &&
       strstr(err.text, "multiple"), "wraps not a multiple of bands refused: %s", err.text);
    si_conf_free(conf);
    conf = si_conf_load_string("tape = { locate_speed = 1.0; }\n", schemas, &err);
    ok(conf == NULL && strstr(err.text, "tape.locate_speed"), "unknown key refused: %s",
       err.text);
    return done_testing();
}
