/* Per-user bounds on uploads arriving at once: how many, and how many bytes
 * of the cache they hold (s3.max_user_uploads, s3.max_user_upload_bytes), so
 * that one user's slow or numerous uploads cannot take the cache from the
 * others. Thread safe. */
#ifndef STAGEIN_S3_QUOTA_H
#define STAGEIN_S3_QUOTA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct s3_quota s3_quota_t;

/* max_uploads, max_bytes: 0 for no bound. NULL when out of memory. */
s3_quota_t *s3_quota_new(unsigned max_uploads, uint64_t max_bytes);
void s3_quota_free(s3_quota_t *q);

/* One more upload of bytes for uid: 0, or -1 (errno EDQUOT) with err naming
 * the bound that refused it and what uid holds. */
int s3_quota_take(s3_quota_t *q, uid_t uid, uint64_t bytes, si_error_t *err);
/* Gives back what s3_quota_take took. */
void s3_quota_give(s3_quota_t *q, uid_t uid, uint64_t bytes);
/* What uid holds now. */
void s3_quota_held(s3_quota_t *q, uid_t uid, unsigned *uploads, uint64_t *bytes);

#endif
