/* Parallel requests of one object through a curl multi handle: the ranges
 * of a GET or the parts of a multipart upload, at most `concurrency` in
 * flight and no further ahead than that of the first one not yet handed on
 * (so that a caller delivering in order holds a bounded number of them),
 * each retried with backoff on transient failures. Used by the Glacier-style
 * archive backend (daemon/archive/glacier.c) and libstagein's reads and
 * writes (stagein/lib/objects.c). */
#ifndef SI_S3WINDOW_H
#define SI_S3WINDOW_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/aws/s3client.h"
#include "common/error.h"

typedef enum {
    SI_S3_JOB_WAITING,             /* to start (again, at retry_at) */
    SI_S3_JOB_RUNNING,
    SI_S3_JOB_DONE,                /* succeeded; not yet handed on */
    SI_S3_JOB_FLUSHED,             /* handed on by the done callback */
} si_s3_job_state_t;

typedef struct si_s3_window si_s3_window_t;

/* One request of the window (a GET range, a PUT part). */
typedef struct {
    uint64_t off, len;
    unsigned char *buf;            /* GET: len bytes landing; PUT: the part's bytes */
    size_t got;                    /* GET: bytes landed (the setup callback zeroes it) */
    int attempts;
    double retry_at;
    si_s3_job_state_t state;
    si_s3_response_t rs;
    si_s3_request_t rq;            /* set by the setup callback */
    si_http_header_t hdr[2];
    char range[64], query[SI_S3_ETAG_MAX + 64], hash[SI_SIGV4_HEX_LEN + 1];
    char etag[SI_S3_ETAG_MAX];     /* of the answer that succeeded */
    void *slot;
    si_s3_window_t *window;        /* set before each setup: the way back from the job */
} si_s3_job_t;

/* Sets job j's request up (before each attempt); -1 fails the window. */
typedef int (*si_s3_job_fn)(si_s3_window_t *w, size_t j, si_error_t *err);

/* How an answer went, for answers that status and bytes do not judge alone
 * (an extension's headers). */
typedef enum {
    SI_S3_ANSWER_DEFAULT,          /* the window judges it */
    SI_S3_ANSWER_GOOD,             /* the job succeeded */
    SI_S3_ANSWER_AGAIN,            /* start it again now, no retry counted (setup changes it) */
    SI_S3_ANSWER_FAILED,           /* the window fails with err */
} si_s3_answer_t;
typedef si_s3_answer_t (*si_s3_check_fn)(si_s3_window_t *w, size_t j, si_error_t *err);

struct si_s3_window {
    si_s3_t *client;
    const atomic_bool *stop;       /* the window fails ("stopping") once true; NULL: never */
    int retries;                   /* attempts after the first, per job */
    double retry_base, retry_max;  /* backoff (si_s3_backoff) */
    void (*on_retry)(void *arg);   /* a job is tried again (counters); NULL */
    void *retry_arg;
    si_s3_job_t *jobs;             /* off and len set; the rest zero */
    size_t njobs;
    size_t flushed;                /* jobs before this one are FLUSHED */
    si_s3_job_fn setup;
    /* After job j succeeded; hands done jobs on in order (advancing
     * flushed); -1 fails the window. */
    si_s3_job_fn done;
    void *arg;
    uint64_t rng;                  /* jitter state, any seed */
    si_s3_check_fn check;          /* after each answer; NULL: the window judges all */
    /* NULL, or called before each wait with arg: drives what the answers
     * wait on (an RDMA provider); sets *fd (-1: none) to wait on too and
     * *ms, the longest wait (50 ms when not called). */
    void (*progress)(void *arg, int *fd, int *ms);
    _Atomic uint64_t *landed;      /* NULL, or counts what si_s3_job_land lands (all again
                                    * for a range read again) */
    /* After a failure: the HTTP status of the answer that failed it (0:
     * none came, or the window failed otherwise) and its S3 error code. */
    long failed_status;
    char failed_code[64];
};

/* Jobs of len bytes each over [from, to), the last shorter (one empty job
 * for an empty span), their count in *n; NULL: out of memory. */
si_s3_job_t *si_s3_jobs_split(uint64_t from, uint64_t to, uint64_t len, size_t *n);

/* An on_data for GET jobs (the request's arg: the job): the bytes land at
 * buf + got; more than len is refused (and the range read again). */
int si_s3_job_land(void *arg, const void *data, size_t len);

/* Runs the window until every job is flushed: 0, or -1 with err ("what
 * where (bytes A-B): why"; errno EACCES for a 403, else EIO). */
int si_s3_window_run(si_s3_window_t *w, int concurrency, const char *what, const char *where,
                     si_error_t *err);

/* The next transfer of slots[0..n) that ended in multi: its handle taken
 * off the multi handle and its answer completed; its index, -1 when none did. */
int si_s3_multi_finished(void *multi, si_s3_xfer_t **slots, int n);

#endif
