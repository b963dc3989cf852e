/* Per-user upload bounds: a user at a bound is refused with the setting
 * named, other users are not, and what is given back can be taken again. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/s3/quota.h"

int main(void)
{
    plan(12);
    si_error_t err = {{0}};
    s3_quota_t *q = s3_quota_new(2, 1000);
    ok(q != NULL, "a quota of 2 uploads and 1000 bytes per user");
    ok(s3_quota_take(q, 1001, 600, &err) == 0, "uid 1001: 600 bytes");
    ok(s3_quota_take(q, 1001, 500, &err) < 0 && errno == EDQUOT &&
       strstr(err.text, "s3.max_user_upload_bytes"), "uid 1001: 500 more refused: %s", err.text);
    ok(s3_quota_take(q, 1002, 1000, &err) == 0, "uid 1002 takes its own 1000 bytes meanwhile");
    ok(s3_quota_take(q, 1001, 400, &err) == 0, "uid 1001: 400 more fit (1000 in all)");
    ok(s3_quota_take(q, 1001, 0, &err) < 0 && strstr(err.text, "s3.max_user_uploads"),
       "uid 1001: a third upload refused: %s", err.text);
    unsigned n;
    uint64_t bytes;
    s3_quota_held(q, 1001, &n, &bytes);
    ok(n == 2 && bytes == 1000, "uid 1001 holds 2 uploads, 1000 bytes");
    s3_quota_give(q, 1001, 600);
    ok(s3_quota_take(q, 1001, 600, &err) == 0, "given back, 600 bytes are taken again");
    s3_quota_give(q, 1001, 600);
    s3_quota_give(q, 1001, 400);
    s3_quota_held(q, 1001, &n, &bytes);
    ok(n == 0 && bytes == 0, "all given back: uid 1001 holds nothing");
    ok(s3_quota_take(q, 1001, 1001, &err) < 0, "one upload over the byte bound is refused");
    s3_quota_free(q);
    q = s3_quota_new(0, 0);
    ok(s3_quota_take(q, 7, UINT64_MAX / 2, &err) == 0 && s3_quota_take(q, 7, UINT64_MAX / 2, &err) == 0,
       "no bounds: anything is taken");
    s3_quota_held(q, 7, &n, &bytes);
    ok(n == 2, "... and counted");
    s3_quota_free(q);
    return done_testing();
}
