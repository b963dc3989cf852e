/* What `stagein request` sends: durations, deadlines, priorities parsed
 * from the command line, and the JSON body of POST /api/v1/stage. */
#ifndef STAGEIN_STAGE_ARGS_H
#define STAGEIN_STAGE_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#include "common/error.h"

/* "90", "90s", "15m", "2h", "1d", "1w" or sums like "1h30m"; > 0. */
int stage_parse_duration(const char *text, int64_t *seconds, si_error_t *err);

/* A deadline as unix seconds: "1795965067" or "@1795965067", "+DURATION"
 * from now, or a date "YYYY-MM-DD[ T]HH:MM[:SS]" in local time ("Z" at the
 * end: UTC). Refused when it lies before now. */
int stage_parse_deadline(const char *text, time_t now, int64_t *deadline, si_error_t *err);

/* -1000..1000, as stageind accepts. */
int stage_parse_priority(const char *text, int *priority, si_error_t *err);

/* "UID:GID", two numbers below 2^32 - 1 (root staging on behalf of a user). */
int stage_parse_user(const char *text, int64_t *uid, int64_t *gid, si_error_t *err);

typedef struct {
    const char **datasets;
    size_t ndatasets;
    const char **files;        /* "bucket/key" or "bucket/prefix/" */
    size_t nfiles;
    const char *manifest;      /* manifest text, or NULL */
    const char *job;           /* NULL: none */
    bool has_priority;
    int priority;
    int64_t deadline;          /* 0: none */
    int64_t pin_lifetime;      /* 0: the daemon's default */
    bool for_user;             /* on behalf of uid/gid (root only), not the caller */
    int64_t uid, gid;
} stage_opts_t;

/* The POST /api/v1/stage body; NULL with err when it would name nothing. */
json_t *stage_request_body(const stage_opts_t *o, si_error_t *err);

/* A whole manifest file (malloc'd, NUL-terminated); err names the file. */
char *stage_read_manifest(const char *path, si_error_t *err);

#endif
