/* Progress of a stage request as `stagein wait` shows it: the status the
 * daemon reports, the transfer rate over the last seconds, and the two
 * renderings (a bar redrawn in place on a terminal, plain lines in logs). */
#ifndef STAGEIN_PROGRESS_H
#define STAGEIN_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/error.h"

typedef struct {
    char id[64];
    char state[16];            /* SUBMITTED, STARTED, COMPLETED, FAILED, ... */
    int64_t files_total, files_completed, files_failed;
    int64_t bytes_total, bytes_done;
    int64_t queue_position;    /* 0: not queued */
    double eta;                /* seconds from the daemon; < 0: not given */
    bool expired;              /* released because its pin lifetime passed */
    char reason[256];          /* why it ended ("" while active, or not said) */
} progress_status_t;

/* From the answer of GET /api/v1/stage/{id}; err names a missing field. */
int progress_status_from_json(const json_t *j, progress_status_t *out, si_error_t *err);

/* COMPLETED, FAILED, CANCELLED and RELEASED end a wait. */
bool progress_state_final(const char *state);

/* The rate over a sliding window of (time, bytes done) samples. */
#define PROGRESS_RATE_SAMPLES 32
#define PROGRESS_RATE_WINDOW 10.0  /* seconds */

typedef struct {
    double t[PROGRESS_RATE_SAMPLES];
    int64_t bytes[PROGRESS_RATE_SAMPLES];
    size_t n, first;
} progress_rate_t;

void progress_rate_init(progress_rate_t *r);
void progress_rate_add(progress_rate_t *r, double t, int64_t bytes_done);
/* Bytes per second over the window; < 0 until two samples span some time. */
double progress_rate(const progress_rate_t *r);

/* One terminal line of at most width columns:
 *   "[=========>          ]  45%  3/10 files  1.2 GB/4.0 GB  120.0 MB/s  ETA 1m20s  STARTED" */
char *progress_bar(const progress_status_t *s, double rate, int width, char *buf, size_t size);

/* One log line:
 *   "request ID: STARTED, 3/10 files, 1.2 GB of 4.0 GB, 120.0 MB/s, ETA 1m20s" */
char *progress_line(const progress_status_t *s, double rate, char *buf, size_t size);

#endif
