/* The `s3` archive backend's restore polling (the control thread): HEAD,
 * RestoreObject and HEAD again with a growing interval until the object is
 * online, in the order of order.h, at most `restores` at once; and the
 * recall states the GET workers share with it. */
#include "config.h"

#include "daemon/archive/glacier_internal.h"

/* ---- the recalls' states ------------------------------------------------------ */

/* A transfer handle of the backend's, ended early when it stops. */
si_s3_xfer_t *glacier_xfer_new(s3b_t *b, si_error_t *err)
{
    si_s3_xfer_t *x = si_s3_xfer_new(b->client, err);
    if (x)
        si_s3_xfer_stop_on(x, &b->stop);
    return x;
}

/* Sleeps up to s seconds, less when stopping. */
void glacier_nap(s3b_t *b, double s)
{
    double until = si_mono_now() + s;
    while (!atomic_load(&b->stop)) {
        double left = until - si_mono_now();
        if (left <= 0)
            break;
        si_sleep(left < 0.05 ? left : 0.05);
    }
}

void glacier_recall_free(s3_recall_t *r)
{
    if (r) {
        free(r->item);
        free(r->ukey);
        free(r);
    }
}

/* Reports r (once) and frees it. Lock NOT held. */
void glacier_finish(s3b_t *b, s3_recall_t *r, bool ok, const char *why)
{
    pthread_mutex_lock(&b->mu);
    archive_queue_forget(&b->q, r, r->item->size);
    if (r->state != RS_READY && r->state != RS_FETCHING && r->state != RS_QUEUED)
        b->in_restore--;
    bool cancelled = r->cancelled;
    if (ok && !cancelled)
        b->counts.reads++;
    else if (!cancelled)
        b->counts.read_failures++;
    pthread_cond_signal(&b->control_cv); /* a restore slot may be free */
    pthread_mutex_unlock(&b->mu);
    if (!ok && !cancelled)
        si_log(b->log, SI_LOG_INFO, "s3: %s: %s", r->where, why);
    if (b->cb.done)
        b->cb.done(b->cb.arg, r->item->object_id, ok && !cancelled,
                   ok && !cancelled ? NULL : cancelled ? "cancelled" : why);
    glacier_recall_free(r);
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

check_t glacier_transient(s3b_t *b, s3_recall_t *r, const si_s3_response_t *rs, const char *what,
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
        c = glacier_transient(b, r, &rs, "RestoreObject", why, whysize);
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
        return glacier_transient(b, r, rs, "HEAD", why, whysize);
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
        glacier_finish(b, r, false, "cancelled");
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
        glacier_finish(b, r, false, why);
        return;
    }
    pthread_mutex_unlock(&b->mu);
}

static int by_admission(const void *a, const void *b)
{
    uint64_t x = (*(s3_recall_t *const *)a)->admitted, y = (*(s3_recall_t *const *)b)->admitted;
    return x < y ? -1 : x > y;
}

void *glacier_control_main(void *arg)
{
    s3b_t *b = arg;
    si_error_t err;
    si_s3_xfer_t *x = glacier_xfer_new(b, &err);
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
        ready = (slots[k] = glacier_xfer_new(b, &err)) != NULL;
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
                if (si_array_grow((void **)&due, &cap, n + 1, sizeof(*due)) < 0)
                    break;
                r->state = RS_CHECKING;
                due[n++] = r;
            } else if (r->next_at < wake) {
                wake = r->next_at;
            }
        }
        if (n == 0) {
            struct timespec until = si_wall_deadline(wake - now);
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
