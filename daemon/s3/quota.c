/* Per-user upload bounds: a small table of the users with uploads
 * arriving (a row goes when its last upload ends). */
#include "config.h"
#include "daemon/s3/quota.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"

typedef struct {
    uid_t uid;
    unsigned uploads;
    uint64_t bytes;
} quota_row_t;

struct s3_quota {
    pthread_mutex_t mu;
    unsigned max_uploads;
    uint64_t max_bytes;
    quota_row_t *rows;
    size_t n, cap;
};

s3_quota_t *s3_quota_new(unsigned max_uploads, uint64_t max_bytes)
{
    s3_quota_t *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    pthread_mutex_init(&q->mu, NULL);
    q->max_uploads = max_uploads;
    q->max_bytes = max_bytes;
    return q;
}

void s3_quota_free(s3_quota_t *q)
{
    if (!q)
        return;
    pthread_mutex_destroy(&q->mu);
    free(q->rows);
    free(q);
}

/* uid's row, NULL when it has none; mu held. */
static quota_row_t *row_of(s3_quota_t *q, uid_t uid)
{
    for (size_t i = 0; i < q->n; i++)
        if (q->rows[i].uid == uid)
            return &q->rows[i];
    return NULL;
}

int s3_quota_take(s3_quota_t *q, uid_t uid, uint64_t bytes, si_error_t *err)
{
    pthread_mutex_lock(&q->mu);
    quota_row_t *r = row_of(q, uid);
    quota_row_t none = {.uid = uid};
    const quota_row_t *held = r ? r : &none;
    int rc = 0;
    if (q->max_uploads && held->uploads >= q->max_uploads)
        rc = si_errnoprintf(err, EDQUOT, "over s3.max_user_uploads (%u): uid %u has %u uploads"
                            " arriving", q->max_uploads, (unsigned)uid, held->uploads);
    else if (q->max_bytes && bytes > q->max_bytes - (held->bytes < q->max_bytes ? held->bytes
                                                                             : q->max_bytes))
        rc = si_errnoprintf(err, EDQUOT, "over s3.max_user_upload_bytes (%" PRIu64 "): uid %u's"
                            " arriving uploads would hold %" PRIu64 " bytes with this one of %"
                            PRIu64, q->max_bytes, (unsigned)uid, held->bytes + bytes, bytes);
    if (rc == 0 && !r) {
        if (si_array_grow((void **)&q->rows, &q->cap, q->n + 1, sizeof(*q->rows)) < 0) {
            pthread_mutex_unlock(&q->mu);
            return si_errnoprintf(err, ENOMEM, "out of memory");
        }
        r = &q->rows[q->n++];
        *r = none;
    }
    if (rc == 0) {
        r->uploads++;
        r->bytes += bytes;
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void s3_quota_give(s3_quota_t *q, uid_t uid, uint64_t bytes)
{
    pthread_mutex_lock(&q->mu);
    quota_row_t *r = row_of(q, uid);
    if (r) {
        r->bytes -= bytes < r->bytes ? bytes : r->bytes;
        if (r->uploads && --r->uploads == 0)
            *r = q->rows[--q->n];
    }
    pthread_mutex_unlock(&q->mu);
}

void s3_quota_held(s3_quota_t *q, uid_t uid, unsigned *uploads, uint64_t *bytes)
{
    pthread_mutex_lock(&q->mu);
    const quota_row_t *r = row_of(q, uid);
    *uploads = r ? r->uploads : 0;
    *bytes = r ? r->bytes : 0;
    pthread_mutex_unlock(&q->mu);
}
