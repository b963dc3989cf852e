/* The `s3` archive backend's state (daemon/archive/glacier.c), private to
 * its files: the recalls, the backend, and the functions its files share.
 * Locking: see glacier.c. */
#ifndef STAGEIN_ARCHIVE_GLACIER_INTERNAL_H
#define STAGEIN_ARCHIVE_GLACIER_INTERNAL_H

#include "daemon/archive/glacier.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/aws/s3window.h"
#include "common/checksum.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "common/strbuf.h"
#include "common/uri.h"
#include "daemon/archive/internal.h"
#include "daemon/archive/order.h"

#define MIB (UINT64_C(1) << 20)
#define HEAD_CHUNK 256 /* HEADs answered before their restores go out */

/* ---- the backend's state ------------------------------------------------------- */

typedef enum {
    RS_QUEUED,      /* in the order queue */
    RS_CHECK,       /* due for a HEAD (and a restore if needed) at next_at */
    RS_CHECKING,    /* the control thread has it */
    RS_RESTORING,   /* restore requested; polled at next_at */
    RS_READY,       /* online: waits for a GET worker */
    RS_FETCHING,    /* a GET worker has it */
} rstate_t;

typedef struct s3_recall {
    archive_item_t *item;          /* owns bucket/key */
    char ubucket[SI_BUCKET_MAX + 1];
    char *ukey;
    char where[SI_BUCKET_MAX + SI_KEY_MAX + 8]; /* "s3://bucket/key", for messages */
    archive_order_entry_t *entry;
    rstate_t state;
    uint64_t admitted;             /* admission order: HEADs and restores go out in it */
    bool cancelled;
    int attempts;                  /* glacier_transient failures in a row */
    double next_at;
    double poll_wait;
    double restore_started;        /* when the restore was requested; 0: none yet */
    struct s3_recall *next_ready;
} s3_recall_t;

typedef struct {
    archive_s3_conf_t conf;
    si_s3_t *client;
    archive_recall_cb_t cb;
    si_log_t *log;
    int checksum_retries;
    atomic_bool stop;

    pthread_mutex_t mu;
    pthread_cond_t control_cv, ready_cv;
    archive_queue_t q;             /* every item not yet reported */
    size_t in_restore;             /* items between QUEUED and READY */
    uint64_t admissions;
    s3_recall_t *ready_head, **ready_tail;
    archive_counts_t counts;
    uint64_t restores_requested, heads, retries_done;

    pthread_t control;
    bool control_started;
    pthread_t *workers;
    int nworkers;
} s3b_t;

/* What a HEAD or RestoreObject answer means for its item (the GET workers
 * judge theirs the same way). */
typedef enum { CHECK_READY, CHECK_WAIT, CHECK_RETRY, CHECK_FAIL } check_t;

/* glacier_restore.c */
si_s3_xfer_t *glacier_xfer_new(s3b_t *b, si_error_t *err);
void glacier_nap(s3b_t *b, double s);
void glacier_recall_free(s3_recall_t *r);
void glacier_finish(s3b_t *b, s3_recall_t *r, bool ok, const char *why);
check_t glacier_transient(s3b_t *b, s3_recall_t *r, const si_s3_response_t *rs, const char *what,
                          char *why, size_t whysize);
void *glacier_control_main(void *arg);

/* glacier_transfer.c */
void *glacier_worker_main(void *arg);
int glacier_put_member(s3b_t *b, si_s3_xfer_t *x, const archive_member_t *m, si_error_t *err);

#endif
