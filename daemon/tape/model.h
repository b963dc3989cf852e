/* The tape reference model (doc/tape-model.md, shared TAPE-MODEL.md): drive and
 * cartridge profiles, the serpentine position model (wrap, band, direction,
 * LPOS) and the time of every tape operation. Pure functions: the simulated
 * library uses them as its physics, the scheduler as its cost estimates. */
#ifndef STAGEIN_TAPE_MODEL_H
#define STAGEIN_TAPE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/conf.h"
#include "common/error.h"

#define TAPE_MAX_BANDS 8

typedef struct {
    char name[16];              /* "lto9", "lto10" */
    double rate;                /* native transfer rate R, bytes/s */
    double capacity;            /* native capacity, bytes */
    double length_m;            /* tape length L */
    int wraps;                  /* total wraps, all bands */
    int bands;                  /* wraps / bands wraps per band */
    int band_order[TAPE_MAX_BANDS]; /* logical band -> physical band */
    /* The drive's data buffer: while the tape streams, the head reads on
     * into it ahead of the host, so that a host late by less than this many
     * bytes (at rate) costs the tape no time (real time only). */
    double buffer_bytes;
    double load_s;              /* load to ready */
    double unload_s;            /* unload after rewind */
    double robot_move_s;        /* one robot move slot <-> drive */
    /* Locate physics (TAPE-MODEL.md "Time model"). */
    double t_base, t_wrap, t_band, t_dir, t_back;
    double v_locate;            /* m/s along the tape while locating */
    double v_rewind;            /* m/s while rewinding */
    /* How far (m, +/-) the scheduler's position estimate may be from the
     * truth; 0 = exact. Deterministic per offset. */
    double position_error_m;
} tape_profile_t;

/* A physical head position. lpos in metres from the BOT end of the tape. */
typedef struct {
    int wrap;
    int band;                   /* logical band = wrap / wraps per band */
    double lpos;
} tape_pos_t;

/* Coefficients of a locate cost of the CTA form; serves both the physics
 * (tape_true_costs) and CTA's published heuristic (tape_cta_costs). */
typedef struct {
    double base, wrap, band, dir, back;
    double landing;             /* added when the landing zone changes */
    double per_m;               /* seconds per metre of |dLPOS| */
    double length_m;            /* landing zone boundary is length_m / 2 */
    bool zero_if_contiguous;    /* a target starting where the head stands costs 0 */
    double read_rate;           /* > 0: reading forward through a gap at this rate
                                 * is allowed when cheaper than a locate */
} tape_cost_model_t;

/* Group "tape": every constant of the model, overriding the chosen profile. */
extern const si_conf_key_t tape_conf_keys[];

/* The built-in profiles: "lto9" (default) and "lto10". */
int tape_profile_builtin(const char *name, tape_profile_t *out, si_error_t *err);
/* The named built-in profile with every "tape.*" setting of conf applied. */
int tape_profile_from_conf(const si_conf_t *conf, const char *name, tape_profile_t *out,
                           si_error_t *err);
/* Checks a profile's internal consistency (e.g. wraps divisible by bands). */
int tape_profile_check(const tape_profile_t *p, si_error_t *err);

double tape_bytes_per_wrap(const tape_profile_t *p);
/* The physical band a logical band is written on (band fill order). */
int tape_physical_band(const tape_profile_t *p, int logical_band);

/* Where logical byte offset lies on the tape. Offsets past capacity clamp to
 * the end of the last wrap. */
tape_pos_t tape_position(const tape_profile_t *p, uint64_t offset);
/* The scheduler's estimate of tape_position: the truth moved by a
 * deterministic pseudo-random error within +/- position_error_m. */
tape_pos_t tape_position_estimate(const tape_profile_t *p, uint64_t offset);

/* True cost of a locate between physical positions (no contiguity rule). */
double tape_locate_between(const tape_profile_t *p, tape_pos_t a, tape_pos_t b);
/* True locate time from the head standing at logical offset from to the
 * start of logical offset to: 0 when equal. */
double tape_locate_time(const tape_profile_t *p, uint64_t from, uint64_t to);
/* What a drive does to get from the head at logical offset from to the start
 * of to (drive behaviour, the same for every policy): it streams over a gap
 * ahead of the head when reading the gap at the native rate is quicker than a
 * locate (a tar header, the next file on tape), else it locates. Returns the
 * time; *streamed (may be NULL) says which. */
double tape_seek_time(const tape_profile_t *p, uint64_t from, uint64_t to, bool *streamed);
double tape_read_time(const tape_profile_t *p, uint64_t bytes);
/* Rewind from the head at logical offset to BOT. */
double tape_rewind_time(const tape_profile_t *p, uint64_t head);
/* One end-to-end pass of a wrap at the native rate. */
double tape_full_pass_time(const tape_profile_t *p);
/* Robot move + load to ready. */
double tape_mount_time(const tape_profile_t *p);
/* Rewind + unload + robot move back to the slot. */
double tape_unmount_time(const tape_profile_t *p, uint64_t head);

/* Cost models. The true one is the drive's: tape_cost under it is
 * tape_seek_time (locate, or stream over a gap ahead when quicker). */
tape_cost_model_t tape_true_costs(const tape_profile_t *p);
/* CTA's heuristic with CERN's LTO-7M coefficients (landing zone included). */
tape_cost_model_t tape_cta_costs(const tape_profile_t *p);
/* Cost of moving the head from (pa at offset a_end) to the start of a
 * target at (pb, offset b_start) under model m. */
double tape_cost(const tape_cost_model_t *m, tape_pos_t pa, uint64_t a_end, tape_pos_t pb,
                 uint64_t b_start);

#endif
