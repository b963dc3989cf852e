/* The tape reference model: see model.h and doc/tape-model.md. */
#include "config.h"
#include "daemon/tape/model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const si_conf_key_t tape_conf_keys[] = {
    {"tape", SI_CONF_GROUP, 0, 0, NULL},
    {"tape.rate", SI_CONF_FLOAT, 1e6, 1e11, NULL},
    {"tape.capacity", SI_CONF_FLOAT, 1e9, 1e15, NULL},
    {"tape.length_m", SI_CONF_FLOAT, 10, 10000, NULL},
    {"tape.wraps", SI_CONF_INT, 2, 100000, NULL},
    {"tape.bands", SI_CONF_INT, 1, TAPE_MAX_BANDS, NULL},
    {"tape.band_order", SI_CONF_LIST, 0, -1, NULL},
    {"tape.band_order.[]", SI_CONF_INT, 0, TAPE_MAX_BANDS - 1, NULL},
    {"tape.buffer_bytes", SI_CONF_FLOAT, 0, 1e12, NULL},
    {"tape.load_s", SI_CONF_FLOAT, 0, 3600, NULL},
    {"tape.unload_s", SI_CONF_FLOAT, 0, 3600, NULL},
    {"tape.robot_move_s", SI_CONF_FLOAT, 0, 3600, NULL},
    {"tape.locate_base_s", SI_CONF_FLOAT, 0, 3600, NULL},
    {"tape.wrap_change_s", SI_CONF_FLOAT, 0, 3600, NULL},
    {"tape.band_change_s", SI_CONF_FLOAT, 0, 3600, NULL},
    {"tape.direction_change_s", SI_CONF_FLOAT, 0, 3600, NULL},
    {"tape.step_back_s", SI_CONF_FLOAT, 0, 3600, NULL},
    {"tape.locate_speed_m_s", SI_CONF_FLOAT, 0.01, 1000, NULL},
    {"tape.rewind_speed_m_s", SI_CONF_FLOAT, 0.01, 1000, NULL},
    {"tape.position_error_m", SI_CONF_FLOAT, 0, 10000, NULL},
    SI_CONF_KEYS_END,
};

/* The LTO-9 FH layout and fixed locate terms (CERN's CTA fit), written once
 * because LTO-10 has no public figures of its own and reuses them. */
#define LTO_FH_LAYOUT .length_m = 1035, .wraps = 280, .bands = 4, .band_order = {3, 1, 0, 2}
#define LTO_FH_FIXED_TERMS .t_base = 4.29, .t_wrap = 6.69, .t_band = 3.2, .t_dir = 5.22, \
                           .t_back = 11.32

/* The drive's buffer in the model: far less than a current LTO drive's (a
 * gigabyte), 42 ms of streaming at 400 MB/s, so that a host slower than the
 * drive on average shows soon (10 % slower: after 0.4 s), while its
 * moment-long stalls (a thread preempted, a lock waited for) cost the tape
 * nothing, as on a real drive. */
#define TAPE_DRIVE_BUFFER (16.0 * 1024 * 1024)

/* LTO-9 FH: IBM figures; locate coefficients are CERN's CTA fit with the
 * distance speed rescaled so that the average locate from BOT is IBM's 45 s. */
static const tape_profile_t lto9 = {
    .name = "lto9",
    .rate = 400e6,
    .capacity = 18e12,
    LTO_FH_LAYOUT,
    .buffer_bytes = TAPE_DRIVE_BUFFER,
    .load_s = 17,
    .unload_s = 30,
    .robot_move_s = 12,
    LTO_FH_FIXED_TERMS,
    .v_locate = 17.8,
    .v_rewind = 10,
    .position_error_m = 0,
};

/* LTO-10: IBM's 30 TB, load 12 s, unload 27 s, average locate 65 s and
 * rewind 62 s. Same layout and fixed terms as LTO-9 (no public figures);
 * the speeds are solved from the averages: E|dLPOS| from BOT is L/2, so
 * v_locate = (L/2) / (65 - 15.97) and v_rewind = (L/2) / (62 - 4.29). */
static const tape_profile_t lto10 = {
    .name = "lto10",
    .rate = 400e6,
    .capacity = 30e12,
    LTO_FH_LAYOUT,
    .buffer_bytes = TAPE_DRIVE_BUFFER,
    .load_s = 12,
    .unload_s = 27,
    .robot_move_s = 12,
    LTO_FH_FIXED_TERMS,
    .v_locate = 10.55,
    .v_rewind = 8.97,
    .position_error_m = 0,
};

int tape_profile_check(const tape_profile_t *p, si_error_t *err)
{
    if (p->bands < 1 || p->bands > TAPE_MAX_BANDS)
        return si_errprintf(err, "tape profile %s: bands = %d, must be 1..%d", p->name,
                            p->bands, TAPE_MAX_BANDS);
    if (p->wraps < p->bands || p->wraps % p->bands != 0)
        return si_errprintf(err, "tape profile %s: wraps = %d is not a multiple of bands = %d",
                            p->name, p->wraps, p->bands);
    if (!(p->rate > 0) || !(p->capacity > 0) || !(p->length_m > 0) || !(p->v_locate > 0) ||
        !(p->v_rewind > 0))
        return si_errprintf(err, "tape profile %s: rate, capacity, length and speeds must be "
                            "positive", p->name);
    bool seen[TAPE_MAX_BANDS] = {false};
    for (int b = 0; b < p->bands; b++) {
        int phys = p->band_order[b];
        if (phys < 0 || phys >= p->bands || seen[phys])
            return si_errprintf(err, "tape profile %s: band_order must be a permutation of "
                                "0..%d", p->name, p->bands - 1);
        seen[phys] = true;
    }
    return 0;
}

int tape_profile_builtin(const char *name, tape_profile_t *out, si_error_t *err)
{
    if (!name || strcmp(name, "lto9") == 0)
        *out = lto9;
    else if (strcmp(name, "lto10") == 0)
        *out = lto10;
    else
        return si_errprintf(err, "unknown tape profile '%s' (known: lto9, lto10)", name);
    return 0;
}

int tape_profile_from_conf(const si_conf_t *conf, const char *name, tape_profile_t *out,
                           si_error_t *err)
{
    tape_profile_t p;
    if (tape_profile_builtin(name, &p, err) < 0)
        return -1;
    p.rate = si_conf_float(conf, "tape.rate", p.rate);
    p.capacity = si_conf_float(conf, "tape.capacity", p.capacity);
    p.length_m = si_conf_float(conf, "tape.length_m", p.length_m);
    p.wraps = (int)si_conf_int(conf, "tape.wraps", p.wraps);
    p.bands = (int)si_conf_int(conf, "tape.bands", p.bands);
    p.buffer_bytes = si_conf_float(conf, "tape.buffer_bytes", p.buffer_bytes);
    p.load_s = si_conf_float(conf, "tape.load_s", p.load_s);
    p.unload_s = si_conf_float(conf, "tape.unload_s", p.unload_s);
    p.robot_move_s = si_conf_float(conf, "tape.robot_move_s", p.robot_move_s);
    p.t_base = si_conf_float(conf, "tape.locate_base_s", p.t_base);
    p.t_wrap = si_conf_float(conf, "tape.wrap_change_s", p.t_wrap);
    p.t_band = si_conf_float(conf, "tape.band_change_s", p.t_band);
    p.t_dir = si_conf_float(conf, "tape.direction_change_s", p.t_dir);
    p.t_back = si_conf_float(conf, "tape.step_back_s", p.t_back);
    p.v_locate = si_conf_float(conf, "tape.locate_speed_m_s", p.v_locate);
    p.v_rewind = si_conf_float(conf, "tape.rewind_speed_m_s", p.v_rewind);
    p.position_error_m = si_conf_float(conf, "tape.position_error_m", p.position_error_m);
    const config_setting_t *order = si_conf_setting(conf, "tape.band_order");
    if (order) {
        int n = config_setting_length(order);
        if (n != p.bands) {
            const char *file = si_conf_file_of(conf, order);
            return si_errprintf(err, "%s:%d: setting 'tape.band_order' has %d entries, "
                                "expected bands = %d", file,
                                config_setting_source_line(order), n, p.bands);
        }
        for (int b = 0; b < n; b++)
            p.band_order[b] = config_setting_get_int_elem(order, b);
    } else if (p.bands != 4) {
        for (int b = 0; b < p.bands; b++)
            p.band_order[b] = b;
    }
    if (tape_profile_check(&p, err) < 0)
        return -1;
    *out = p;
    return 0;
}

double tape_bytes_per_wrap(const tape_profile_t *p)
{
    return p->capacity / p->wraps;
}

int tape_physical_band(const tape_profile_t *p, int logical_band)
{
    return p->band_order[logical_band];
}

tape_pos_t tape_position(const tape_profile_t *p, uint64_t offset)
{
    double bpw = tape_bytes_per_wrap(p);
    double off = (double)offset;
    tape_pos_t pos;
    if (off >= p->capacity) {
        /* End of the last wrap: where a full tape's head stands. */
        pos.wrap = p->wraps - 1;
        pos.lpos = (pos.wrap % 2 == 0) ? p->length_m : 0;
    } else {
        pos.wrap = (int)floor(off / bpw);
        if (pos.wrap >= p->wraps)
            pos.wrap = p->wraps - 1;
        double f = (off - pos.wrap * bpw) / bpw;
        pos.lpos = (pos.wrap % 2 == 0) ? f * p->length_m : (1 - f) * p->length_m;
    }
    pos.band = pos.wrap / (p->wraps / p->bands);
    return pos;
}

/* splitmix64: a fixed, well-mixed hash so the estimate error is repeatable. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

tape_pos_t tape_position_estimate(const tape_profile_t *p, uint64_t offset)
{
    tape_pos_t pos = tape_position(p, offset);
    if (p->position_error_m > 0) {
        double u = (double)(mix64(offset) >> 11) / 9007199254740992.0; /* [0,1) */
        pos.lpos += (2 * u - 1) * p->position_error_m;
        if (pos.lpos < 0)
            pos.lpos = 0;
        if (pos.lpos > p->length_m)
            pos.lpos = p->length_m;
    }
    return pos;
}

tape_cost_model_t tape_true_costs(const tape_profile_t *p)
{
    tape_cost_model_t m = {
        .base = p->t_base, .wrap = p->t_wrap, .band = p->t_band, .dir = p->t_dir,
        .back = p->t_back, .landing = 0, .per_m = 1.0 / p->v_locate,
        .length_m = p->length_m, .zero_if_contiguous = true, .read_rate = p->rate,
    };
    return m;
}

tape_cost_model_t tape_cta_costs(const tape_profile_t *p)
{
    /* CTA's RAO cost heuristic, CERN's fit on LTO-7M; dLPOS in LPOS units of
     * 7.2 mm, so the per-metre coefficient is 0.0006192 / 0.0072. */
    tape_cost_model_t m = {
        .base = 4.29, .wrap = 6.69, .band = 3.2, .dir = 5.22, .back = 11.32,
        .landing = -6.04, .per_m = 0.0006192 / 0.0072, .length_m = p->length_m,
        .zero_if_contiguous = false, .read_rate = 0,
    };
    return m;
}

static double cost_between(const tape_cost_model_t *m, tape_pos_t a, tape_pos_t b)
{
    double c = m->base;
    if (a.wrap != b.wrap)
        c += m->wrap;
    if (a.band != b.band)
        c += m->band;
    if ((a.wrap & 1) != (b.wrap & 1))
        c += m->dir;
    if (a.wrap == b.wrap) {
        /* Even wraps run BOT->EOT (lpos grows), odd wraps the other way. */
        bool behind = (a.wrap % 2 == 0) ? b.lpos < a.lpos : b.lpos > a.lpos;
        if (behind)
            c += m->back;
    }
    if (m->landing != 0) {
        double half = m->length_m / 2;
        if ((a.lpos < half) != (b.lpos < half))
            c += m->landing;
    }
    return c + fabs(b.lpos - a.lpos) * m->per_m;
}

double tape_cost(const tape_cost_model_t *m, tape_pos_t pa, uint64_t a_end, tape_pos_t pb,
                 uint64_t b_start)
{
    if (m->zero_if_contiguous && a_end == b_start)
        return 0;
    double c = cost_between(m, pa, pb);
    if (m->read_rate > 0 && b_start >= a_end) {
        double through = (double)(b_start - a_end) / m->read_rate;
        if (through < c)
            c = through;
    }
    return c;
}

double tape_locate_between(const tape_profile_t *p, tape_pos_t a, tape_pos_t b)
{
    tape_cost_model_t m = tape_true_costs(p);
    return cost_between(&m, a, b);
}

double tape_locate_time(const tape_profile_t *p, uint64_t from, uint64_t to)
{
    if (from == to)
        return 0;
    return tape_locate_between(p, tape_position(p, from), tape_position(p, to));
}

double tape_seek_time(const tape_profile_t *p, uint64_t from, uint64_t to, bool *streamed)
{
    double locate = tape_locate_time(p, from, to);
    double through = to >= from ? tape_read_time(p, to - from) : INFINITY;
    if (streamed)
        *streamed = through < locate;
    return through < locate ? through : locate;
}

double tape_read_time(const tape_profile_t *p, uint64_t bytes)
{
    return (double)bytes / p->rate;
}

double tape_rewind_time(const tape_profile_t *p, uint64_t head)
{
    if (head == 0)
        return 0;
    return p->t_base + tape_position(p, head).lpos / p->v_rewind;
}

double tape_full_pass_time(const tape_profile_t *p)
{
    return tape_bytes_per_wrap(p) / p->rate;
}

double tape_mount_time(const tape_profile_t *p)
{
    return p->robot_move_s + p->load_s;
}

double tape_unmount_time(const tape_profile_t *p, uint64_t head)
{
    return tape_rewind_time(p, head) + p->unload_s + p->robot_move_s;
}
