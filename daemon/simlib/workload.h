/* Recall workloads: a library, volumes with their fill level, files with
 * their copies, and requests (arrival, priority, deadline, files). Read from
 * the text format of doc/workload-format.md, or generated (W1..W4, seeded and
 * deterministic, W1..W9 and W6X). */
#ifndef STAGEIN_SIMLIB_WORKLOAD_H
#define STAGEIN_SIMLIB_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "daemon/sched/sched.h"
#include "daemon/simlib/engine.h"

typedef struct {
    sched_request_t req;
    double at;            /* arrival time, seconds */
    size_t first;         /* its files: files[req_files[first .. first + n)] */
    size_t n;
} workload_request_t;

typedef struct {
    char name[64];
    simlib_config_t lib;      /* drives, robots, slots, profile, volumes, faults */
    sched_file_t *files;
    size_t nfiles;
    workload_request_t *requests;
    size_t nrequests;
    size_t *req_files;        /* indices into files */
    size_t nreq_files;
} workload_t;

/* Parses a workload file; errors name FILE:LINE. */
int workload_load(const char *path, workload_t *w, si_error_t *err);
/* The same from a string (name stands for the file in errors). */
int workload_parse(const char *text, const char *name, workload_t *w, si_error_t *err);
/* The standard workloads, NULL-terminated: W1..W9 and W6X. */
extern const char *const workload_standard[];
/* Is name one of them (case-insensitive)? */
bool workload_is_standard(const char *name);
/* A standard workload; quick: the scaled-down variant. */
int workload_generate(const char *name, bool quick, uint64_t seed, workload_t *w, si_error_t *err);
void workload_free(workload_t *w);

/* Total bytes of all files requested (each object counted once). */
uint64_t workload_requested_bytes(const workload_t *w);

#endif
