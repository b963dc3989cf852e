/* The `s3` archive backend (its settings: the archive.s3 group): the client
 * of a Glacier-style S3 archive, a tape gateway speaking S3 with Glacier
 * semantics (Versity Gateway in glacier mode, AWS S3 Glacier, stageind's
 * own archive mode), over libcurl, signed with the project's SigV4.
 *
 * Recall, per item: HEAD (an object already online is read at once);
 * otherwise RestoreObject (Days, Tier) and HEAD again with a growing
 * interval (poll_min .. poll_max) until x-amz-restore says
 * ongoing-request="false", at most restore_timeout; then GET into the
 * cache, in parallel ranges for objects above part_size, whose writer
 * verifies size and checksum (a mismatch is read again). The control
 * thread issues the HEADs and restores, taking items in the order of
 * order.h (volume by volume in position order where the catalog knows
 * tape positions, else in bounded batches in urgency order) with at most
 * `restores` of them in progress; `gets` worker threads read the ready
 * ones. 5xx, SlowDown, RequestTimeout, resets and timeouts are retried with
 * exponential backoff and jitter up to `retries` times; 403 and 404 fail
 * the item at once.
 *
 * Push: each member is PUT with x-amz-storage-class (GLACIER by default),
 * signed with its SHA-256 so the upstream verifies the body, or uploaded in
 * parts above part_size (each part's own SHA-256), `parts` at a time. The
 * write returns only after the upstream answered 200 to every PUT or
 * CompleteMultipartUpload.
 *
 * Locks: mu guards the tables, the ready queue and the counters; nothing
 * talks to the upstream or calls a callback with it held. */
#include "config.h"
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

const si_conf_key_t archive_s3_conf_keys[] = {
    {"archive.s3", SI_CONF_GROUP, 0, 0, NULL},
    {"archive.s3.endpoint", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.region", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.credentials_file", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.buckets", SI_CONF_LIST, 0, -1, NULL},
    {"archive.s3.buckets.[]", SI_CONF_GROUP, 0, 0, NULL},
    {"archive.s3.buckets.[].bucket", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.buckets.[].upstream", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.buckets.[].prefix", SI_CONF_STRING, 0, 0, NULL},
    {"archive.s3.restores", SI_CONF_INT, 1, 100000, NULL},
    {"archive.s3.gets", SI_CONF_INT, 1, 256, NULL},
    {"archive.s3.parts", SI_CONF_INT, 1, 64, NULL},
    {"archive.s3.part_size", SI_CONF_INT, 5 * 1048576.0, 5368709120.0, NULL},
    {"archive.s3.storage_class", SI_CONF_STRING, 0, 0,
     "GLACIER|DEEP_ARCHIVE|GLACIER_IR|STANDARD|STANDARD_IA"},
    {"archive.s3.restore_tier", SI_CONF_STRING, 0, 0, "Expedited|Standard|Bulk"},
    {"archive.s3.restore_days", SI_CONF_INT, 1, 36500, NULL},
    {"archive.s3.poll_min", SI_CONF_FLOAT, 0.01, 86400, NULL},
    {"archive.s3.poll_max", SI_CONF_FLOAT, 0.01, 86400, NULL},
    {"archive.s3.restore_timeout", SI_CONF_FLOAT, 0.1, 31536000, NULL},
    {"archive.s3.connect_timeout", SI_CONF_INT, 1, 3600, NULL},
    {"archive.s3.timeout", SI_CONF_INT, 1, 86400, NULL},
    {"archive.s3.retries", SI_CONF_INT, 0, 100, NULL},
    {"archive.s3.retry_base", SI_CONF_FLOAT, 0.001, 3600, NULL},
    {"archive.s3.retry_max", SI_CONF_FLOAT, 0.001, 86400, NULL},
    {"archive.s3.volume", SI_CONF_STRING, 0, 0, NULL},
    SI_CONF_KEYS_END,
};

/* ---- configuration ---------------------------------------------------------- */

static int copy_setting(const si_conf_t *conf, const char *path, const char *def, char *out,
                        size_t size, si_error_t *err)
{
    const char *v = si_conf_string(conf, path, def);
    if (!v)
        return 0;
    if (strlen(v) >= size)
        return si_conf_fail(conf, path, err, "is longer than %zu bytes", size - 1);
    memmove(out, v, strlen(v) + 1);
    return 0;
}

static int read_maps(const si_conf_t *conf, archive_s3_conf_t *c, si_error_t *err)
{
    const config_setting_t *list = si_conf_setting(conf, "archive.s3.buckets");
    int n = list ? config_setting_length(list) : 0;
    for (int i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);
        const char *file = si_conf_file_of(conf, e);
        int line = config_setting_source_line(e);
        const char *bucket = NULL, *upstream = NULL, *prefix = "";
        config_setting_lookup_string(e, "bucket", &bucket);
        config_setting_lookup_string(e, "upstream", &upstream);
        config_setting_lookup_string(e, "prefix", &prefix);
        si_error_t why;
        char probe[SI_KEY_MAX + 2]; /* a prefix may end in '/': checked as the start of a key */
        snprintf(probe, sizeof(probe), "%sx", prefix);
        if (!bucket || !upstream)
            return si_errprintf(err, "%s:%d: archive.s3.buckets: each entry needs bucket and "
                                "upstream", file, line);
        if (si_bucket_check(bucket, strlen(bucket), &why) < 0 ||
            si_bucket_check(upstream, strlen(upstream), &why) < 0 ||
            (*prefix && si_key_check(probe, strlen(probe), &why) < 0))
            return si_errprintf(err, "%s:%d: archive.s3.buckets: %s", file,
                                line, why.text);
        if (c->nmaps == ARCHIVE_S3_MAPS_MAX)
            return si_errprintf(err, "%s:%d: archive.s3.buckets: more than %d entries",
                                file, line, ARCHIVE_S3_MAPS_MAX);
        archive_s3_map_t *m = &c->maps[c->nmaps++];
        snprintf(m->bucket, sizeof(m->bucket), "%s", bucket);
        snprintf(m->upstream, sizeof(m->upstream), "%s", upstream);
        snprintf(m->prefix, sizeof(m->prefix), "%s", prefix);
    }
    return 0;
}

int archive_s3_conf_from(const si_conf_t *conf, archive_s3_conf_t *c, si_error_t *err)
{
    memset(c, 0, sizeof(*c));
    if (!si_conf_string(conf, "archive.s3.endpoint", NULL))
        return si_conf_fail(conf, "archive.s3.endpoint", err, "is required by the s3 backend "
                            "(http://HOST:PORT of the tape gateway)");
    if (!si_conf_string(conf, "archive.s3.credentials_file", NULL))
        return si_conf_fail(conf, "archive.s3.credentials_file", err, "is required by the s3 "
                            "backend (a 0600 file: ACCESS_KEY SECRET)");
    if (copy_setting(conf, "archive.s3.endpoint", NULL, c->endpoint, sizeof(c->endpoint),
                     err) < 0 ||
        copy_setting(conf, "archive.s3.region", "us-east-1", c->region, sizeof(c->region),
                     err) < 0 ||
        copy_setting(conf, "archive.s3.credentials_file", NULL, c->credentials_file,
                     sizeof(c->credentials_file), err) < 0 ||
        copy_setting(conf, "archive.s3.storage_class", "GLACIER", c->storage_class,
                     sizeof(c->storage_class), err) < 0 ||
        copy_setting(conf, "archive.s3.restore_tier", "Standard", c->restore_tier,
                     sizeof(c->restore_tier), err) < 0)
        return -1;
    if (strncmp(c->endpoint, "http://", 7) != 0 && strncmp(c->endpoint, "https://", 8) != 0)
        return si_conf_fail(conf, "archive.s3.endpoint", err, "= \"%s\" is not http://HOST:PORT "
                            "or https://HOST[:PORT]", c->endpoint);
    if (si_secrets_load_client(c->credentials_file, &c->credentials, err) < 0)
        return si_conf_fail(conf, "archive.s3.credentials_file", err, "%s", err->text);
    c->restores = (int)si_conf_int(conf, "archive.s3.restores", 1000);
    c->gets = (int)si_conf_int(conf, "archive.s3.gets", 8);
    c->parts = (int)si_conf_int(conf, "archive.s3.parts", 4);
    c->part_size = (uint64_t)si_conf_int(conf, "archive.s3.part_size", (int64_t)(16 * MIB));
    c->restore_days = (int)si_conf_int(conf, "archive.s3.restore_days", 1);
    c->poll_min = si_conf_float(conf, "archive.s3.poll_min", 1.0);
    c->poll_max = si_conf_float(conf, "archive.s3.poll_max", 60.0);
    c->restore_timeout = si_conf_float(conf, "archive.s3.restore_timeout", 2 * 86400.0);
    c->connect_timeout = (long)si_conf_int(conf, "archive.s3.connect_timeout", 10);
    c->timeout = (long)si_conf_int(conf, "archive.s3.timeout", 60);
    c->retries = (int)si_conf_int(conf, "archive.s3.retries", 8);
    c->retry_base = si_conf_float(conf, "archive.s3.retry_base", 0.2);
    c->retry_max = si_conf_float(conf, "archive.s3.retry_max", 30.0);
    if (c->poll_max < c->poll_min)
        return si_conf_fail(conf, "archive.s3.poll_max", err, "(%g) is below archive.s3.poll_min "
                            "(%g)", c->poll_max, c->poll_min);
    if (read_maps(conf, c, err) < 0 ||
        archive_pseudo_volume(conf, "archive.s3.volume", "S3", c->volume, err) < 0)
        return -1;
    return 0;
}

si_s3_t *archive_s3_client(const archive_s3_conf_t *c, si_error_t *err)
{
    si_s3_conf_t sc = {c->endpoint, c->region, c->credentials.access_key, c->credentials.secret,
                       c->connect_timeout, c->timeout, 0, NULL};
    return si_s3_new(&sc, err);
}

const archive_s3_map_t *archive_s3_map_for(const archive_s3_conf_t *c, const char *bucket,
                                           archive_s3_map_t *scratch)
{
    for (size_t i = 0; i < c->nmaps; i++)
        if (strcmp(c->maps[i].bucket, bucket) == 0)
            return &c->maps[i];
    memset(scratch, 0, sizeof(*scratch));
    snprintf(scratch->bucket, sizeof(scratch->bucket), "%s", bucket);
    snprintf(scratch->upstream, sizeof(scratch->upstream), "%s", bucket);
    return scratch;
}

void archive_s3_local_name(const archive_s3_conf_t *c, const char *ubucket, const char *ukey,
                           char bucket[SI_BUCKET_MAX + 1], const char **key)
{
    for (size_t i = 0; i < c->nmaps; i++) {
        const archive_s3_map_t *m = &c->maps[i];
        size_t plen = strlen(m->prefix);
        if (strcmp(m->upstream, ubucket) == 0 && strncmp(ukey, m->prefix, plen) == 0 &&
            ukey[plen]) {
            snprintf(bucket, SI_BUCKET_MAX + 1, "%s", m->bucket);
            *key = ukey + plen;
            return;
        }
    }
    snprintf(bucket, SI_BUCKET_MAX + 1, "%s", ubucket);
    *key = ukey;
}

bool archive_s3_online(const char *storage_class, const char *restore)
{
    bool archived = strcmp(storage_class, "GLACIER") == 0 ||
                    strcmp(storage_class, "DEEP_ARCHIVE") == 0;
    return !archived || strstr(restore, "ongoing-request=\"false\"") != NULL;
}

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
    int attempts;                  /* transient failures in a row */
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
    uint64_t reads, read_failures, bytes_read, bytes_written, files_written;
    uint64_t restores_requested, heads, retries_done;

    pthread_t control;
    bool control_started;
    pthread_t *workers;
    int nworkers;
} s3b_t;

/* A transfer handle of the backend's, ended early when it stops. */
static si_s3_xfer_t *xfer_new(s3b_t *b, si_error_t *err)
{
    si_s3_xfer_t *x = si_s3_xfer_new(b->client, err);
    if (x)
        si_s3_xfer_stop_on(x, &b->stop);
    return x;
}

/* Sleeps up to s seconds, less when stopping. */
static void nap(s3b_t *b, double s)
{
    double until = si_mono_now() + s;
    while (!atomic_load(&b->stop)) {
        double left = until - si_mono_now();
        if (left <= 0)
            break;
        usleep((useconds_t)((left < 0.05 ? left : 0.05) * 1e6));
    }
}

static void recall_free(s3_recall_t *r)
{
    if (r) {
        free(r->item);
        free(r->ukey);
        free(r);
    }
}

/* Reports r (once) and frees it. Lock NOT held. */
static void finish(s3b_t *b, s3_recall_t *r, bool ok, const char *why)
{
    pthread_mutex_lock(&b->mu);
    archive_queue_forget(&b->q, r, r->item->size);
    if (r->state != RS_READY && r->state != RS_FETCHING && r->state != RS_QUEUED)
        b->in_restore--;
    bool cancelled = r->cancelled;
    if (ok && !cancelled)
        b->reads++;
    else if (!cancelled)
        b->read_failures++;
    pthread_cond_signal(&b->control_cv); /* a restore slot may be free */
    pthread_mutex_unlock(&b->mu);
    if (!ok && !cancelled)
        si_log(b->log, SI_LOG_INFO, "s3: %s: %s", r->where, why);
    if (b->cb.done)
        b->cb.done(b->cb.arg, r->item->object_id, ok && !cancelled,
                   ok && !cancelled ? NULL : cancelled ? "cancelled" : why);
    recall_free(r);
}

static void make_ready(s3b_t *b, s3_recall_t *r)
{
    /* mu held */
    if (r->state != RS_QUEUED)
        b->in_restore--;
    r->state = RS_READY;
    r->attempts = 0;
    r->next_ready = NULL;
    *b->ready_tail = r;
    b->ready_tail = &r->next_ready;
    pthread_cond_signal(&b->ready_cv);
    pthread_cond_signal(&b->control_cv);
}

/* ---- HEAD and RestoreObject (control thread) ---------------------------------- */

typedef enum { CHECK_READY, CHECK_WAIT, CHECK_RETRY, CHECK_FAIL } check_t;

static check_t transient(s3b_t *b, s3_recall_t *r, const si_s3_response_t *rs, const char *what,
                         char *why, size_t whysize)
{
    char text[400];
    si_s3_describe(rs, text, sizeof(text));
    if (si_s3_retryable(rs) && r->attempts < b->conf.retries) {
        r->attempts++;
        return CHECK_RETRY;
    }
    if (si_s3_retryable(rs))
        snprintf(why, whysize, "%s %s: %s (gave up after %d attempts)", what, r->where, text,
                 r->attempts + 1);
    else if (rs->status == 404)
        snprintf(why, whysize, "%s %s: not found upstream (%s)", what, r->where, text);
    else if (rs->status == 403)
        snprintf(why, whysize, "%s %s: access denied upstream (%s)", what, r->where, text);
    else
        snprintf(why, whysize, "%s %s: %s", what, r->where, text);
    return CHECK_FAIL;
}

static const char restore_fmt[] =
    "<RestoreRequest xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Days>%d</Days>"
    "<GlacierJobParameters><Tier>%s</Tier></GlacierJobParameters></RestoreRequest>";

static check_t request_restore(s3b_t *b, si_s3_xfer_t *x, s3_recall_t *r, char *why,
                               size_t whysize)
{
    char body[400];
    int len = snprintf(body, sizeof(body), restore_fmt, b->conf.restore_days,
                       b->conf.restore_tier);
    si_http_header_t h[] = {{"Content-Type", "application/xml"}};
    si_s3_request_t rq = {.method = "POST", .bucket = r->ubucket, .key = r->ukey,
                          .query = "restore", .headers = h, .nheaders = 1, .body = body,
                          .body_len = (size_t)len};
    si_s3_response_t rs;
    si_error_t err;
    if (si_s3_xfer_perform(x, &rq, &rs, &err) < 0) {
        snprintf(why, whysize, "RestoreObject %s: %s", r->where, err.text);
        return CHECK_FAIL;
    }
    check_t c;
    if (rs.curl_code == CURLE_OK && (rs.status == 200 || rs.status == 202 ||
                                     (rs.status == 409 &&
                                      strcmp(rs.code, "RestoreAlreadyInProgress") == 0))) {
        if (!r->restore_started)
            r->restore_started = si_mono_now();
        r->attempts = 0;
        pthread_mutex_lock(&b->mu);
        b->restores_requested++;
        pthread_mutex_unlock(&b->mu);
        /* 200: a restored copy is there already: look again now */
        c = rs.status == 200 ? CHECK_RETRY : CHECK_WAIT;
        if (rs.status == 200)
            r->next_at = 0;
    } else {
        c = transient(b, r, &rs, "RestoreObject", why, whysize);
    }
    si_s3_response_free(&rs);
    return c;
}

/* What a HEAD's answer means for r; CHECK_RESTORE: ask for a restore. */
enum { CHECK_RESTORE = CHECK_FAIL + 1 };

static int judge_head(s3b_t *b, s3_recall_t *r, const si_s3_response_t *rs, char *why,
                      size_t whysize)
{
    if (rs->curl_code != CURLE_OK || rs->status != 200)
        return transient(b, r, rs, "HEAD", why, whysize);
    if (rs->has_length && rs->content_length != r->item->size) {
        snprintf(why, whysize, "%s has %" PRIu64 " bytes upstream, the catalog says %" PRIu64,
                 r->where, rs->content_length, r->item->size);
        return CHECK_FAIL;
    }
    if (archive_s3_online(rs->storage_class, rs->restore))
        return CHECK_READY;
    if (r->restore_started && si_mono_now() - r->restore_started > b->conf.restore_timeout) {
        snprintf(why, whysize, "the restore of %s did not complete within %g s (x-amz-restore: "
                 "%s)", r->where, b->conf.restore_timeout, rs->restore[0] ? rs->restore : "none");
        return CHECK_FAIL;
    }
    if (strstr(rs->restore, "ongoing-request=\"true\"")) {
        if (!r->restore_started)
            r->restore_started = si_mono_now(); /* someone else asked: its time counts from now */
        r->attempts = 0;
        return CHECK_WAIT;
    }
    return CHECK_RESTORE;
}

/* HEADs of due[0..n), up to nslots at once (the upstream answers them in
 * parallel; the restores that follow go out one by one, in order). */
static void head_all(s3b_t *b, CURLM *multi, si_s3_xfer_t **slots, int nslots,
                     s3_recall_t **due, size_t n, si_s3_request_t *rq, si_s3_response_t *rs,
                     bool *made)
{
    size_t next = 0, running = 0;
    int *slot_of = calloc((size_t)nslots, sizeof(*slot_of));
    for (int k = 0; slot_of && k < nslots; k++)
        slot_of[k] = -1;
    while (slot_of && (next < n || running > 0) && !atomic_load(&b->stop)) {
        for (int k = 0; k < nslots && next < n; k++) {
            if (slot_of[k] >= 0)
                continue;
            rq[next] = (si_s3_request_t){.method = "HEAD", .bucket = due[next]->ubucket,
                                         .key = due[next]->ukey};
            si_error_t err;
            made[next] = si_s3_xfer_prepare(slots[k], &rq[next], &rs[next], &err) == 0;
            if (!made[next]) {
                next++;
                continue;
            }
            curl_multi_add_handle(multi, si_s3_xfer_curl(slots[k]));
            slot_of[k] = (int)next++;
            running++;
        }
        int still, k;
        curl_multi_perform(multi, &still);
        while ((k = si_s3_multi_finished(multi, slots, nslots)) >= 0) {
            slot_of[k] = -1;
            running--;
        }
        if (running > 0)
            curl_multi_poll(multi, NULL, 0, 50, NULL);
    }
    for (int k = 0; slot_of && k < nslots; k++)
        if (slot_of[k] >= 0) /* stopping */
            curl_multi_remove_handle(multi, si_s3_xfer_curl(slots[k]));
    if (!slot_of)
        memset(made, 0, n * sizeof(*made));
    free(slot_of);
    pthread_mutex_lock(&b->mu);
    b->heads += n;
    pthread_mutex_unlock(&b->mu);
}

static void apply_check(s3b_t *b, s3_recall_t *r, check_t c, const char *why)
{
    double now = si_mono_now();
    pthread_mutex_lock(&b->mu);
    if (r->cancelled) {
        pthread_mutex_unlock(&b->mu);
        finish(b, r, false, "cancelled");
        return;
    }
    switch (c) {
    case CHECK_READY:
        make_ready(b, r);
        break;
    case CHECK_WAIT:
        r->state = RS_RESTORING;
        if (r->poll_wait <= 0)
            r->poll_wait = b->conf.poll_min;
        r->next_at = now + r->poll_wait;
        r->poll_wait = fmin(r->poll_wait * 2, b->conf.poll_max);
        break;
    case CHECK_RETRY: {
        uint64_t seed = (uint64_t)(uintptr_t)r ^ (uint64_t)(now * 1e6);
        r->state = RS_CHECK;
        r->next_at = r->next_at == 0 && r->attempts == 0
                         ? now
                         : now + si_s3_backoff(r->attempts, b->conf.retry_base,
                                               b->conf.retry_max, &seed);
        b->retries_done += r->attempts > 0;
        break;
    }
    case CHECK_FAIL:
        pthread_mutex_unlock(&b->mu);
        finish(b, r, false, why);
        return;
    }
    pthread_mutex_unlock(&b->mu);
}

static int by_admission(const void *a, const void *b)
{
    uint64_t x = (*(s3_recall_t *const *)a)->admitted, y = (*(s3_recall_t *const *)b)->admitted;
    return x < y ? -1 : x > y;
}

static void *control_main(void *arg)
{
    s3b_t *b = arg;
    si_error_t err;
    si_s3_xfer_t *x = xfer_new(b, &err);
    size_t cap = 256;
    s3_recall_t **due = calloc(cap, sizeof(*due));
    int nslots = b->conf.gets;
    CURLM *multi = curl_multi_init();
    si_s3_xfer_t **slots = calloc((size_t)nslots, sizeof(*slots));
    si_s3_request_t *rq = calloc(HEAD_CHUNK, sizeof(*rq));
    si_s3_response_t *rs = calloc(HEAD_CHUNK, sizeof(*rs));
    bool *made = calloc(HEAD_CHUNK, sizeof(*made));
    bool ready = x && due && multi && slots && rq && rs && made;
    for (int k = 0; ready && k < nslots; k++)
        ready = (slots[k] = xfer_new(b, &err)) != NULL;
    if (!ready) {
        si_log(b->log, SI_LOG_ERROR, "s3: the control thread cannot start: out of memory");
        goto out;
    }
    pthread_mutex_lock(&b->mu);
    while (!atomic_load(&b->stop)) {
        double now = si_mono_now(), wake = now + 1.0;
        size_t n = 0;
        /* admit new items while restore slots are free */
        while (b->in_restore < (size_t)b->conf.restores && archive_order_count(b->q.order) > 0) {
            size_t room = (size_t)b->conf.restores - b->in_restore;
            s3_recall_t *got[256];
            size_t k = archive_order_take(b->q.order, room < 256 ? room : 256, (void **)got);
            for (size_t i = 0; i < k; i++) {
                got[i]->entry = NULL;
                got[i]->state = RS_CHECK;
                got[i]->next_at = now;
                got[i]->admitted = ++b->admissions;
                b->in_restore++;
            }
            if (k == 0)
                break;
        }
        /* the items due now, in the order they were admitted */
        for (size_t i = 0; i < b->q.nlive; i++) {
            s3_recall_t *r = b->q.live[i];
            if (r->state != RS_CHECK && r->state != RS_RESTORING)
                continue;
            if (r->next_at <= now) {
                if (n == cap) {
                    s3_recall_t **g = realloc(due, 2 * cap * sizeof(*due));
                    if (!g)
                        break;
                    due = g;
                    cap *= 2;
                }
                r->state = RS_CHECKING;
                due[n++] = r;
            } else if (r->next_at < wake) {
                wake = r->next_at;
            }
        }
        if (n == 0) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            double t = until.tv_sec + until.tv_nsec / 1e9 + (wake - now);
            until.tv_sec = (time_t)t;
            until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
            pthread_cond_timedwait(&b->control_cv, &b->mu, &until);
            continue;
        }
        pthread_mutex_unlock(&b->mu);
        qsort(due, n, sizeof(*due), by_admission);
        for (size_t at = 0; at < n && !atomic_load(&b->stop); at += HEAD_CHUNK) {
            size_t k = n - at < HEAD_CHUNK ? n - at : HEAD_CHUNK;
            head_all(b, multi, slots, nslots, due + at, k, rq, rs, made);
            for (size_t i = 0; i < k; i++) {
                s3_recall_t *r = due[at + i];
                char why[1200] = "";
                int c = CHECK_FAIL;
                if (r->cancelled)
                    snprintf(why, sizeof(why), "cancelled");
                else if (!made[i])
                    snprintf(why, sizeof(why), "HEAD %s: the request could not be made",
                             r->where);
                else if ((c = judge_head(b, r, &rs[i], why, sizeof(why))) == CHECK_RESTORE)
                    c = request_restore(b, x, r, why, sizeof(why));
                if (made[i])
                    si_s3_response_free(&rs[i]);
                apply_check(b, r, (check_t)c, why);
            }
        }
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
out:
    for (int k = 0; slots && k < nslots; k++)
        si_s3_xfer_free(slots[k]);
    if (multi)
        curl_multi_cleanup(multi);
    free(slots);
    free(rq);
    free(rs);
    free(made);
    si_s3_xfer_free(x);
    free(due);
    return NULL;
}

/* ---- ranged transfers (common/aws/s3window.h) ------------------------------------ */

static void count_retry(void *arg)
{
    s3b_t *b = arg;
    pthread_mutex_lock(&b->mu);
    b->retries_done++;
    pthread_mutex_unlock(&b->mu);
}

/* A window of the backend's: its client, retry policy and counters. */
static si_s3_window_t window_of(s3b_t *b, si_s3_job_t *jobs, size_t n, si_s3_job_fn setup,
                                si_s3_job_fn done, void *arg, uint64_t seed)
{
    return (si_s3_window_t){.client = b->client, .stop = &b->stop, .retries = b->conf.retries,
                            .retry_base = b->conf.retry_base, .retry_max = b->conf.retry_max,
                            .on_retry = count_retry, .retry_arg = b, .jobs = jobs, .njobs = n,
                            .setup = setup, .done = done, .arg = arg, .rng = seed};
}

/* ---- GET (worker threads) ---------------------------------------------------------- */

typedef struct {
    s3b_t *b;
    s3_recall_t *r;
    void *session;
    uint64_t delivered;
    si_error_t *err;
    bool sink_failed;
} get_t;

static int deliver(get_t *g, const void *data, size_t len)
{
    s3b_t *b = g->b;
    if (b->cb.write(b->cb.arg, g->session, data, len, g->err) < 0) {
        g->sink_failed = true;
        return -1;
    }
    g->delivered += len;
    pthread_mutex_lock(&b->mu);
    b->bytes_read += len;
    pthread_mutex_unlock(&b->mu);
    if (b->cb.progress)
        b->cb.progress(b->cb.arg, g->r->item->object_id, g->delivered);
    return 0;
}

static int on_whole(void *arg, const void *data, size_t len)
{
    return deliver(arg, data, len);
}

static size_t range_body(si_s3_window_t *w, size_t j, const void *data, size_t len)
{
    si_s3_job_t *jb = &w->jobs[j];
    if (jb->got + len > jb->len)
        return 0; /* more than the range: refused (and retried) */
    memcpy(jb->buf + jb->got, data, len);
    jb->got += len;
    return len;
}

typedef struct {
    si_s3_window_t *w;
    size_t j;
} range_ctx_t;

static int on_range(void *arg, const void *data, size_t len)
{
    range_ctx_t *c = arg;
    return range_body(c->w, c->j, data, len) == len ? 0 : -1;
}

typedef struct {
    get_t *g;
    range_ctx_t *ctx;
} ranged_t;

static int range_setup(si_s3_window_t *w, size_t j, si_error_t *err)
{
    ranged_t *rg = w->arg;
    s3_recall_t *r = rg->g->r;
    si_s3_job_t *jb = &w->jobs[j];
    if (!jb->buf && !(jb->buf = malloc(jb->len)))
        return si_errprintf(err, "out of memory for a %" PRIu64 " byte range", jb->len);
    jb->got = 0;
    snprintf(jb->range, sizeof(jb->range), "bytes=%" PRIu64 "-%" PRIu64, jb->off,
             jb->off + jb->len - 1);
    jb->hdr[0] = (si_http_header_t){"Range", jb->range};
    rg->ctx[j] = (range_ctx_t){w, j};
    jb->rq = (si_s3_request_t){.method = "GET", .bucket = r->ubucket, .key = r->ukey,
                               .headers = jb->hdr, .nheaders = 1, .on_data = on_range,
                               .arg = &rg->ctx[j]};
    return 0;
}

/* Hands finished ranges to the sink in order. */
static int range_done(si_s3_window_t *w, size_t j, si_error_t *err)
{
    ranged_t *rg = w->arg;
    (void)j;
    (void)err;
    while (w->flushed < w->njobs && w->jobs[w->flushed].state == SI_S3_JOB_DONE) {
        si_s3_job_t *jb = &w->jobs[w->flushed];
        if (deliver(rg->g, jb->buf, jb->len) < 0)
            return -1;
        free(jb->buf);
        jb->buf = NULL;
        jb->state = SI_S3_JOB_FLUSHED;
        w->flushed++;
    }
    return 0;
}

static int get_ranged(get_t *g, si_error_t *err)
{
    s3b_t *b = g->b;
    uint64_t size = g->r->item->size, ps = b->conf.part_size;
    size_t n = (size_t)((size + ps - 1) / ps);
    si_s3_job_t *jobs = calloc(n, sizeof(*jobs));
    range_ctx_t *ctx = calloc(n, sizeof(*ctx));
    int rc = -1;
    if (!jobs || !ctx) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    for (size_t j = 0; j < n; j++) {
        jobs[j].off = (uint64_t)j * ps;
        jobs[j].len = size - jobs[j].off < ps ? size - jobs[j].off : ps;
    }
    ranged_t rg = {g, ctx};
    si_s3_window_t w = window_of(b, jobs, n, range_setup, range_done, &rg,
                                 (uint64_t)(uintptr_t)g ^ (uint64_t)(si_mono_now() * 1e6));
    rc = si_s3_window_run(&w, b->conf.parts, "GET", g->r->where, err);
out:
    if (jobs)
        for (size_t j = 0; j < n; j++)
            free(jobs[j].buf);
    free(jobs);
    free(ctx);
    return rc;
}

/* One attempt at the whole object. 0: all bytes delivered; -1 with err and
 * *retry (transient) or *restore (the upstream says it is archived again). */
static int get_once(s3b_t *b, si_s3_xfer_t *x, get_t *g, bool *retry, bool *restore,
                    si_error_t *err)
{
    s3_recall_t *r = g->r;
    *retry = *restore = false;
    if (r->item->size > b->conf.part_size && b->conf.parts > 1) {
        if (get_ranged(g, err) == 0)
            return 0;
        /* the window retried transient failures itself */
        *restore = strstr(err->text, "InvalidObjectState") != NULL;
        return -1;
    }
    si_s3_request_t rq = {.method = "GET", .bucket = r->ubucket, .key = r->ukey,
                          .on_data = on_whole, .arg = g};
    si_s3_response_t rs;
    if (si_s3_xfer_perform(x, &rq, &rs, err) < 0)
        return -1;
    int rc = 0;
    char text[400];
    si_s3_describe(&rs, text, sizeof(text));
    if (g->sink_failed) {
        rc = -1; /* err says why */
    } else if (rs.curl_code != CURLE_OK || rs.status != 200) {
        *retry = si_s3_retryable(&rs);
        *restore = rs.status == 403 && strcmp(rs.code, "InvalidObjectState") == 0;
        rc = si_errprintf(err, "GET %s: %s", r->where, text);
    } else if (g->delivered != r->item->size) {
        *retry = true;
        rc = si_errprintf(err, "GET %s: %" PRIu64 " of %" PRIu64 " bytes came", r->where,
                          g->delivered, r->item->size);
    }
    si_s3_response_free(&rs);
    return rc;
}

static void fetch(s3b_t *b, si_s3_xfer_t *x, s3_recall_t *r)
{
    char why[1200];
    si_error_t err;
    int mismatches = 0;
    uint64_t seed = (uint64_t)(uintptr_t)r ^ (uint64_t)(si_mono_now() * 1e6);
    for (;;) {
        if (atomic_load(&b->stop))
            return; /* not reported: the backend is going away */
        get_t g = {b, r, NULL, 0, &err, false};
        if (b->cb.begin(b->cb.arg, r->item, &g.session, &err) < 0) {
            snprintf(why, sizeof(why), "%s: %s", r->where, err.text);
            break;
        }
        bool retry, restore;
        if (get_once(b, x, &g, &retry, &restore, &err) < 0) {
            b->cb.abort(b->cb.arg, g.session);
            snprintf(why, sizeof(why), "%s", err.text);
            if (restore && r->attempts < b->conf.retries) {
                /* the restored copy expired meanwhile: restore it again */
                pthread_mutex_lock(&b->mu);
                r->attempts++;
                r->state = RS_CHECK;
                r->next_at = 0;
                r->restore_started = 0;
                b->in_restore++;
                pthread_cond_signal(&b->control_cv);
                pthread_mutex_unlock(&b->mu);
                return;
            }
            if (retry && r->attempts < b->conf.retries && !r->cancelled) {
                r->attempts++;
                pthread_mutex_lock(&b->mu);
                b->retries_done++;
                pthread_mutex_unlock(&b->mu);
                nap(b, si_s3_backoff(r->attempts, b->conf.retry_base, b->conf.retry_max, &seed));
                continue;
            }
            if (retry)
                snprintf(why + strlen(why), sizeof(why) - strlen(why),
                         " (gave up after %d attempts)", r->attempts + 1);
            break;
        }
        if (b->cb.commit(b->cb.arg, g.session, &err) == 0) {
            finish(b, r, true, NULL);
            return;
        }
        snprintf(why, sizeof(why), "%s: %s", r->where, err.text);
        if (errno != EBADMSG || ++mismatches > b->checksum_retries)
            break;
        /* the bytes did not match: read them again */
    }
    finish(b, r, false, why);
}

static void *worker_main(void *arg)
{
    s3b_t *b = arg;
    si_error_t err;
    si_s3_xfer_t *x = xfer_new(b, &err);
    if (!x) {
        si_log(b->log, SI_LOG_ERROR, "s3: a GET worker cannot start: %s", err.text);
        return NULL;
    }
    pthread_mutex_lock(&b->mu);
    while (!atomic_load(&b->stop)) {
        s3_recall_t *r = b->ready_head;
        if (!r) {
            pthread_cond_wait(&b->ready_cv, &b->mu);
            continue;
        }
        b->ready_head = r->next_ready;
        if (!b->ready_head)
            b->ready_tail = &b->ready_head;
        r->state = RS_FETCHING;
        bool cancelled = r->cancelled;
        pthread_mutex_unlock(&b->mu);
        if (cancelled)
            finish(b, r, false, "cancelled");
        else
            fetch(b, x, r);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    si_s3_xfer_free(x);
    return NULL;
}

/* ---- the vtable: recall, cancel ---------------------------------------------------- */

static s3_recall_t *make_recall(const s3b_t *b, const archive_item_t *item, si_error_t *err)
{
    s3_recall_t *r = calloc(1, sizeof(*r));
    if (!r || !(r->item = archive_item_copy(item, err))) {
        if (!r)
            si_errprintf(err, "out of memory");
        free(r);
        return NULL;
    }
    archive_s3_map_t scratch;
    const archive_s3_map_t *m = archive_s3_map_for(&b->conf, item->bucket, &scratch);
    size_t klen = strlen(m->prefix) + strlen(item->key) + 1;
    if (!(r->ukey = malloc(klen))) {
        recall_free(r);
        return si_errprintf(err, "out of memory"), NULL;
    }
    snprintf(r->ukey, klen, "%s%s", m->prefix, item->key);
    snprintf(r->ubucket, sizeof(r->ubucket), "%s", m->upstream);
    snprintf(r->where, sizeof(r->where), "s3://%s/%s", r->ubucket, r->ukey);
    r->state = RS_QUEUED;
    return r;
}

static int s3_recall(archive_backend_t *be, const archive_batch_t *batch,
                     const archive_item_t *items, size_t n, si_error_t *err)
{
    s3b_t *b = be->impl;
    s3_recall_t **recs = calloc(n ? n : 1, sizeof(*recs));
    archive_order_entry_t **entries = calloc(n ? n : 1, sizeof(*entries));
    int rc = recs && entries ? 0 : si_errprintf(err, "out of memory");
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!(recs[i] = make_recall(b, &items[i], err)))
            rc = -1;
    if (rc == 0) {
        pthread_mutex_lock(&b->mu);
        rc = archive_queue_add(&b->q, batch, items, (void **)recs, n, entries, err);
        for (size_t i = 0; rc == 0 && i < n; i++)
            recs[i]->entry = entries[i];
        pthread_cond_signal(&b->control_cv);
        pthread_mutex_unlock(&b->mu);
    }
    for (size_t i = 0; rc < 0 && recs && i < n; i++)
        recall_free(recs[i]); /* on success the queue owns them */
    free(recs);
    free(entries);
    return rc;
}

static int s3_cancel(archive_backend_t *be, int64_t object_id)
{
    s3b_t *b = be->impl;
    s3_recall_t *now = NULL;
    int found = 0;
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < b->q.nlive && !found; i++) {
        s3_recall_t *r = b->q.live[i];
        if (r->item->object_id != object_id || r->cancelled)
            continue;
        r->cancelled = true;
        found = 1;
        /* reported here when no thread has it (then owned here: FETCHING
         * keeps the threads off it); the others see the flag */
        if (r->state == RS_QUEUED && archive_order_remove(b->q.order, r->entry)) {
            now = r;
        } else if (r->state == RS_CHECK || r->state == RS_RESTORING) {
            b->in_restore--;
            now = r;
        } else if (r->state == RS_READY) {
            for (s3_recall_t **p = &b->ready_head; *p; p = &(*p)->next_ready)
                if (*p == r) {
                    *p = r->next_ready;
                    if (!*p)
                        b->ready_tail = p;
                    break;
                }
            now = r;
        }
        if (now)
            r->state = RS_FETCHING;
    }
    pthread_mutex_unlock(&b->mu);
    if (now)
        finish(b, now, false, "cancelled");
    return found;
}

/* ---- push ------------------------------------------------------------------------ */

typedef struct {
    const archive_member_t *m;
    int fd;
    const char *bucket, *key;
    const char *upload_id;
    char *sclass_header;
} put_ctx_t;

static int part_setup(si_s3_window_t *w, size_t j, si_error_t *err)
{
    put_ctx_t *p = w->arg;
    si_s3_job_t *jb = &w->jobs[j];
    if (!jb->buf) {
        if (!(jb->buf = malloc(jb->len)))
            return si_errprintf(err, "out of memory for a %" PRIu64 " byte part", jb->len);
        for (uint64_t done = 0; done < jb->len;) {
            ssize_t n = pread(p->fd, jb->buf + done, (size_t)(jb->len - done),
                              (off_t)(jb->off + done));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return si_errprintf(err, "reading %s: %s", p->m->path,
                                    n < 0 ? strerror(errno) : "the file ended early");
            done += (uint64_t)n;
        }
        si_checksum_t *c = si_checksum_new("sha256", err);
        if (!c)
            return -1;
        char text[SI_CHECKSUM_TEXT_MAX];
        si_checksum_update(c, jb->buf, jb->len);
        si_checksum_final(c, text);
        si_checksum_free(c);
        snprintf(jb->hash, sizeof(jb->hash), "%s", text + 7);
    }
    snprintf(jb->query, sizeof(jb->query), "partNumber=%zu&uploadId=%s", j + 1, p->upload_id);
    jb->rq = (si_s3_request_t){.method = "PUT", .bucket = p->bucket, .key = p->key,
                               .query = jb->query, .body = jb->buf, .body_len = jb->len,
                               .payload_sha256 = jb->hash};
    return 0;
}

static int part_done(si_s3_window_t *w, size_t j, si_error_t *err)
{
    si_s3_job_t *jb = &w->jobs[j];
    if (!jb->etag[0])
        return si_errprintf(err, "part %zu: the upstream answered without an ETag", j + 1);
    free(jb->buf);
    jb->buf = NULL;
    while (w->flushed < w->njobs && w->jobs[w->flushed].state == SI_S3_JOB_DONE)
        w->jobs[w->flushed++].state = SI_S3_JOB_FLUSHED;
    return 0;
}

/* A request with retries; 0 when the upstream answered 2xx. */
static int call(s3b_t *b, si_s3_xfer_t *x, const si_s3_request_t *rq, si_s3_response_t *rs,
                const char *what, const char *where, si_error_t *err)
{
    uint64_t seed = (uint64_t)(uintptr_t)rs ^ (uint64_t)(si_mono_now() * 1e6);
    for (int attempt = 0;; attempt++) {
        if (si_s3_xfer_perform(x, rq, rs, err) < 0)
            return -1;
        /* CompleteMultipartUpload may answer 200 with an <Error> body */
        bool error_body = rs->status == 200 && rs->body && strstr(rs->body, "<Error>");
        if (rs->curl_code == CURLE_OK && rs->status >= 200 && rs->status < 300 && !error_body)
            return 0;
        if (error_body)
            snprintf(rs->code, sizeof(rs->code), "InternalError");
        char text[400];
        si_s3_describe(rs, text, sizeof(text));
        if (!si_s3_retryable(rs) || attempt >= b->conf.retries || atomic_load(&b->stop)) {
            si_errprintf(err, "%s %s: %s%s", what, where, text,
                         si_s3_retryable(rs) ? " (gave up after retries)" : "");
            si_s3_response_free(rs);
            return -1;
        }
        si_s3_response_free(rs);
        pthread_mutex_lock(&b->mu);
        b->retries_done++;
        pthread_mutex_unlock(&b->mu);
        nap(b, si_s3_backoff(attempt + 1, b->conf.retry_base, b->conf.retry_max, &seed));
    }
}

static int put_multipart(s3b_t *b, si_s3_xfer_t *x, put_ctx_t *p, const char *where,
                         si_error_t *err)
{
    si_http_header_t h[] = {{"x-amz-storage-class", b->conf.storage_class}};
    si_s3_request_t rq = {.method = "POST", .bucket = p->bucket, .key = p->key,
                          .query = "uploads", .headers = h, .nheaders = 1};
    si_s3_response_t rs;
    char upload_id[512];
    if (call(b, x, &rq, &rs, "CreateMultipartUpload", where, err) < 0)
        return -1;
    int rc = si_s3_xml_text(rs.body, rs.body_len, "InitiateMultipartUploadResult/UploadId",
                            upload_id, sizeof(upload_id), err);
    si_s3_response_free(&rs);
    if (rc < 0)
        return si_errprefix(err, "CreateMultipartUpload %s", where);
    si_strbuf_t enc;
    si_strbuf_init(&enc, 2048);
    si_uri_encode(&enc, upload_id, strlen(upload_id), false);
    p->upload_id = si_strbuf_str(&enc);
    uint64_t size = p->m->size, ps = b->conf.part_size;
    size_t n = (size_t)((size + ps - 1) / ps);
    si_s3_job_t *jobs = calloc(n, sizeof(*jobs));
    si_strbuf_t xml;
    si_strbuf_init(&xml, 64u << 20);
    rc = -1;
    if (!jobs || n > 10000) {
        si_errprintf(err, n > 10000 ? "%s: %zu parts of %" PRIu64 " bytes, more than S3's 10000 "
                     "(raise archive.s3.part_size)" : "out of memory", where, n, ps);
        goto abort;
    }
    for (size_t j = 0; j < n; j++) {
        jobs[j].off = (uint64_t)j * ps;
        jobs[j].len = size - jobs[j].off < ps ? size - jobs[j].off : ps;
    }
    si_s3_window_t w = window_of(b, jobs, n, part_setup, part_done, p,
                                 (uint64_t)(uintptr_t)p ^ (uint64_t)(si_mono_now() * 1e6));
    if (si_s3_window_run(&w, b->conf.parts, "UploadPart", where, err) < 0)
        goto abort;
    const char **etags = malloc(n * sizeof(*etags));
    if (!etags) {
        si_errprintf(err, "out of memory");
        goto abort;
    }
    for (size_t j = 0; j < n; j++)
        etags[j] = jobs[j].etag;
    si_s3_complete_xml(&xml, etags, n);
    free(etags);
    char query[700];
    snprintf(query, sizeof(query), "uploadId=%s", p->upload_id);
    si_http_header_t ct[] = {{"Content-Type", "application/xml"}};
    si_s3_request_t done = {.method = "POST", .bucket = p->bucket, .key = p->key, .query = query,
                            .headers = ct, .nheaders = 1, .body = si_strbuf_str(&xml),
                            .body_len = xml.len};
    if (xml.failed) {
        si_errprintf(err, "out of memory");
        goto abort;
    }
    if (call(b, x, &done, &rs, "CompleteMultipartUpload", where, err) == 0) {
        si_s3_response_free(&rs);
        rc = 0;
        goto out;
    }
abort:;
    /* best effort: the upload's parts are not left behind upstream */
    char query2[700];
    snprintf(query2, sizeof(query2), "uploadId=%s", p->upload_id);
    si_s3_request_t ab = {.method = "DELETE", .bucket = p->bucket, .key = p->key,
                          .query = query2};
    si_error_t ignored;
    if (si_s3_xfer_perform(x, &ab, &rs, &ignored) == 0)
        si_s3_response_free(&rs);
out:
    if (jobs)
        for (size_t j = 0; j < n; j++)
            free(jobs[j].buf);
    free(jobs);
    si_strbuf_free(&xml);
    si_strbuf_free(&enc);
    return rc;
}

static int put_member(s3b_t *b, si_s3_xfer_t *x, const archive_member_t *m, si_error_t *err)
{
    archive_s3_map_t scratch;
    const archive_s3_map_t *map = archive_s3_map_for(&b->conf, m->bucket, &scratch);
    char key[2 * SI_KEY_MAX + 2], where[SI_BUCKET_MAX + 2 * SI_KEY_MAX + 8];
    snprintf(key, sizeof(key), "%s%s", map->prefix, m->key);
    snprintf(where, sizeof(where), "s3://%s/%s", map->upstream, key);
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return si_errnoprintf(err, errno, "%s: %s", m->path, strerror(errno));
    put_ctx_t p = {m, fd, map->upstream, key, NULL, NULL};
    int rc;
    if (m->size > b->conf.part_size) {
        rc = put_multipart(b, x, &p, where, err);
    } else {
        /* signed with the body's SHA-256: the upstream checks the bytes */
        char hash[SI_SIGV4_HEX_LEN + 1] = "";
        if (m->checksum && strncmp(m->checksum, "sha256:", 7) == 0) {
            snprintf(hash, sizeof(hash), "%s", m->checksum + 7);
        } else {
            si_checksum_t *c = si_checksum_new("sha256", err);
            unsigned char *buf = malloc(MIB);
            char text[SI_CHECKSUM_TEXT_MAX];
            rc = c && buf ? si_checksum_fd(c, fd, 0, m->size, buf, MIB, err) : -1;
            if (rc == 0) {
                si_checksum_final(c, text);
                snprintf(hash, sizeof(hash), "%s", text + 7);
            }
            si_checksum_free(c);
            free(buf);
            if (rc < 0) {
                close(fd);
                return si_errprefix(err, "%s", m->path);
            }
        }
        si_http_header_t h[] = {{"x-amz-storage-class", b->conf.storage_class}};
        si_s3_request_t rq = {.method = "PUT", .bucket = map->upstream, .key = key, .headers = h,
                              .nheaders = 1, .body_from_fd = true, .body_fd = fd,
                              .body_len = (size_t)m->size, .payload_sha256 = hash};
        si_s3_response_t rs;
        rc = call(b, x, &rq, &rs, "PUT", where, err);
        if (rc == 0)
            si_s3_response_free(&rs);
    }
    close(fd);
    return rc;
}

static int s3_archive(archive_backend_t *be, const archive_member_t *members, size_t n,
                      int ncopies, archive_placement_t *placements, si_error_t *err)
{
    s3b_t *b = be->impl;
    if (n == 0)
        return si_errprintf(err, "an archive write needs members");
    if (archive_single_copy_check("s3", ncopies, err) < 0)
        return -1;
    si_s3_xfer_t *x = xfer_new(b, err);
    if (!x)
        return -1;
    uint64_t bytes = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = put_member(b, x, &members[i], err);
        bytes += members[i].size;
    }
    si_s3_xfer_free(x);
    if (rc < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        archive_pseudo_placement(b->conf.volume, members[i].size, 0, &placements[i]);
    pthread_mutex_lock(&b->mu);
    b->bytes_written += bytes;
    b->files_written += n;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

/* ---- status ---------------------------------------------------------------------- */

static int s3_status(archive_backend_t *be, archive_status_t *out, si_error_t *err)
{
    s3b_t *b = be->impl;
    (void)err;
    memset(out, 0, sizeof(*out));
    out->backend = "s3";
    pthread_mutex_lock(&b->mu);
    out->reads = b->reads;
    out->read_failures = b->read_failures;
    out->bytes_read = b->bytes_read;
    out->bytes_written = b->bytes_written;
    out->archive_files_written = b->files_written;
    out->queued_items = b->q.nlive;
    out->queued_bytes = b->q.live_bytes;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

static void s3_metrics(archive_backend_t *be, FILE *out)
{
    s3b_t *b = be->impl;
    pthread_mutex_lock(&b->mu);
    uint64_t reads = b->reads, failures = b->read_failures, bytes = b->bytes_read,
             written = b->bytes_written, restores = b->restores_requested, heads = b->heads,
             retries = b->retries_done, queued = b->q.nlive, restoring = b->in_restore;
    pthread_mutex_unlock(&b->mu);
    fprintf(out,
            "# HELP stagein_s3_recalls_total Objects read from the S3 archive into the cache.\n"
            "# TYPE stagein_s3_recalls_total counter\nstagein_s3_recalls_total %" PRIu64 "\n"
            "# HELP stagein_s3_recall_failures_total Objects that could not be recalled.\n"
            "# TYPE stagein_s3_recall_failures_total counter\n"
            "stagein_s3_recall_failures_total %" PRIu64 "\n"
            "# HELP stagein_s3_bytes_read_total Bytes read from the S3 archive.\n"
            "# TYPE stagein_s3_bytes_read_total counter\nstagein_s3_bytes_read_total %" PRIu64
            "\n"
            "# HELP stagein_s3_bytes_written_total Bytes pushed to the S3 archive.\n"
            "# TYPE stagein_s3_bytes_written_total counter\n"
            "stagein_s3_bytes_written_total %" PRIu64 "\n"
            "# HELP stagein_s3_restores_total RestoreObject requests accepted upstream.\n"
            "# TYPE stagein_s3_restores_total counter\nstagein_s3_restores_total %" PRIu64 "\n"
            "# HELP stagein_s3_heads_total HeadObject requests.\n"
            "# TYPE stagein_s3_heads_total counter\nstagein_s3_heads_total %" PRIu64 "\n"
            "# HELP stagein_s3_retries_total Requests retried after a transient failure.\n"
            "# TYPE stagein_s3_retries_total counter\nstagein_s3_retries_total %" PRIu64 "\n"
            "# HELP stagein_s3_restoring Objects between admission and online.\n"
            "# TYPE stagein_s3_restoring gauge\nstagein_s3_restoring %" PRIu64 "\n"
            "# HELP stagein_archive_queued_items Recalls handed to the backend, not done.\n"
            "# TYPE stagein_archive_queued_items gauge\n"
            "stagein_archive_queued_items %" PRIu64 "\n",
            reads, failures, bytes, written, restores, heads, retries, restoring, queued);
}

static void s3_free(archive_backend_t *be)
{
    if (!be)
        return;
    s3b_t *b = be->impl;
    pthread_mutex_lock(&b->mu);
    atomic_store(&b->stop, true);
    pthread_cond_broadcast(&b->control_cv);
    pthread_cond_broadcast(&b->ready_cv);
    pthread_mutex_unlock(&b->mu);
    if (b->control_started)
        pthread_join(b->control, NULL);
    for (int i = 0; i < b->nworkers; i++)
        pthread_join(b->workers[i], NULL);
    for (size_t i = 0; i < b->q.nlive; i++)
        recall_free(b->q.live[i]);
    free(b->workers);
    archive_queue_free(&b->q);
    si_s3_free(b->client);
    OPENSSL_cleanse(&b->conf.credentials, sizeof(b->conf.credentials));
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->control_cv);
    pthread_cond_destroy(&b->ready_cv);
    free(b);
    free(be);
}

static const archive_backend_ops_t s3_ops = {
    "s3", s3_recall, s3_cancel, s3_archive, s3_status, s3_metrics, s3_free, true,
    NULL, /* S3 Glacier gives no restore times */
};

archive_backend_t *archive_s3_new(const archive_backend_opts_t *opts, si_error_t *err)
{
    archive_backend_t *be = calloc(1, sizeof(*be));
    s3b_t *b = calloc(1, sizeof(*b));
    if (!be || !b) {
        free(be);
        free(b);
        return si_errprintf(err, "out of memory"), NULL;
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->control_cv, NULL);
    pthread_cond_init(&b->ready_cv, NULL);
    b->ready_tail = &b->ready_head;
    be->ops = &s3_ops;
    be->impl = b;
    b->cb = opts->cb;
    b->log = opts->log;
    b->checksum_retries = (int)si_conf_int(opts->conf, "archive.checksum_retries", 1);
    if (archive_s3_conf_from(opts->conf, &b->conf, err) < 0 ||
        archive_single_copy_conf(opts->conf, "s3", err) < 0 ||
        !(b->client = archive_s3_client(&b->conf, err)) ||
        archive_queue_init(&b->q, b->conf.volume, err) < 0)
        goto error;
    if (pthread_create(&b->control, NULL, control_main, b) != 0) {
        si_errprintf(err, "s3: cannot start its control thread");
        goto error;
    }
    b->control_started = true;
    if (!(b->workers = calloc((size_t)b->conf.gets, sizeof(*b->workers)))) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    for (; b->nworkers < b->conf.gets; b->nworkers++)
        if (pthread_create(&b->workers[b->nworkers], NULL, worker_main, b) != 0) {
            si_errprintf(err, "s3: cannot start its GET workers");
            goto error;
        }
    si_log(b->log, SI_LOG_NOTICE, "archive: s3 backend at %s (region %s, %d restores, %d GETs, "
           "%d parts of %" PRIu64 " bytes in flight, push as %s)", b->conf.endpoint,
           b->conf.region, b->conf.restores, b->conf.gets, b->conf.parts, b->conf.part_size,
           b->conf.storage_class);
    return be;
error:
    s3_free(be);
    return NULL;
}
