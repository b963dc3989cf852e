/* Parallel requests of one object; see s3window.h. */
#include "config.h"
#include "common/aws/s3window.h"
#include "common/clock.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The next transfer of slots[0..n) that ended: its handle taken off the
 * multi handle and its answer completed; its index, or -1 when none did. */
int si_s3_multi_finished(void *multi, si_s3_xfer_t **slots, int n)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        for (int k = 0; k < n; k++)
            if (si_s3_xfer_curl(slots[k]) == m->easy_handle) {
                CURLcode cc = m->data.result;
                curl_multi_remove_handle(multi, m->easy_handle);
                si_s3_xfer_done(slots[k], (int)cc);
                return k;
            }
    }
    return -1;
}

si_s3_job_t *si_s3_jobs_split(uint64_t from, uint64_t to, uint64_t len, size_t *n)
{
    *n = to > from ? (size_t)((to - from + len - 1) / len) : 1;
    si_s3_job_t *jobs = calloc(*n, sizeof(*jobs));
    for (size_t j = 0; jobs && j < *n; j++) {
        jobs[j].off = from + (uint64_t)j * len;
        jobs[j].len = to - jobs[j].off < len ? to - jobs[j].off : len;
    }
    return jobs;
}

int si_s3_job_land(void *arg, const void *data, size_t len)
{
    si_s3_job_t *jb = arg;
    if (jb->got + len > jb->len)
        return -1;
    memcpy(jb->buf + jb->got, data, len);
    jb->got += len;
    if (jb->window->landed)
        atomic_fetch_add(jb->window->landed, len);
    return 0;
}

/* The window fails on this answer: what the caller may want of it kept. */
static void fail_with(si_s3_window_t *w, si_s3_response_t *rs)
{
    w->failed_status = rs->status;
    snprintf(w->failed_code, sizeof(w->failed_code), "%s", rs->code);
    si_s3_response_free(rs);
}

int si_s3_window_run(si_s3_window_t *w, int concurrency, const char *what, const char *where,
                     si_error_t *err)
{
    w->failed_status = 0;
    w->failed_code[0] = '\0';
    CURLM *multi = curl_multi_init();
    si_s3_xfer_t **slots = calloc((size_t)concurrency, sizeof(*slots));
    bool *busy = calloc((size_t)concurrency, sizeof(*busy));
    int rc = -1;
    if (!multi || !slots || !busy) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    for (int i = 0; i < concurrency; i++) {
        if (!(slots[i] = si_s3_xfer_new(w->client, err)))
            goto out;
        if (w->stop)
            si_s3_xfer_stop_on(slots[i], w->stop);
    }
    size_t next = 0, running = 0;
    while (w->flushed < w->njobs) {
        if (w->stop && atomic_load(w->stop)) {
            si_errprintf(err, "stopping");
            goto out;
        }
        double now = si_mono_now();
        /* start what may start: a free slot, no further ahead than the window */
        for (size_t j = w->flushed; j < w->njobs && j < w->flushed + (size_t)concurrency; j++) {
            si_s3_job_t *jb = &w->jobs[j];
            if (jb->state != SI_S3_JOB_WAITING || jb->retry_at > now)
                continue;
            int s;
            for (s = 0; s < concurrency && busy[s]; s++)
                ;
            if (s == concurrency)
                break;
            jb->window = w;
            jb->got = 0;
            if (w->setup(w, j, err) < 0 ||
                si_s3_xfer_prepare(slots[s], &jb->rq, &jb->rs, err) < 0)
                goto out;
            curl_multi_add_handle(multi, si_s3_xfer_curl(slots[s]));
            busy[s] = true;
            jb->slot = slots[s];
            jb->state = SI_S3_JOB_RUNNING;
            running++;
            if (j >= next)
                next = j + 1;
        }
        int still, s;
        curl_multi_perform(multi, &still);
        while ((s = si_s3_multi_finished(multi, slots, concurrency)) >= 0) {
            size_t j;
            for (j = w->flushed; j < w->njobs && w->jobs[j].slot != slots[s]; j++)
                ;
            busy[s] = false;
            running--;
            si_s3_job_t *jb = &w->jobs[j];
            jb->slot = NULL;
            CURLcode cc = (CURLcode)jb->rs.curl_code;
            si_s3_answer_t verdict = w->check ? w->check(w, j, err) : SI_S3_ANSWER_DEFAULT;
            if (verdict == SI_S3_ANSWER_FAILED) {
                fail_with(w, &jb->rs);
                goto out;
            }
            if (verdict == SI_S3_ANSWER_AGAIN) {
                jb->state = SI_S3_JOB_WAITING;
                jb->retry_at = 0;
                si_s3_response_free(&jb->rs);
                continue;
            }
            bool good = verdict == SI_S3_ANSWER_GOOD ||
                        (cc == CURLE_OK && jb->rs.status >= 200 && jb->rs.status < 300 &&
                         (strcmp(jb->rq.method, "GET") != 0 || jb->got == jb->len));
            if (good) {
                jb->state = SI_S3_JOB_DONE;
                snprintf(jb->etag, sizeof(jb->etag), "%s", jb->rs.etag);
                si_s3_response_free(&jb->rs);
                if (w->done(w, j, err) < 0)
                    goto out;
                continue;
            }
            char text[400];
            if (cc == CURLE_OK && jb->rs.status < 300)
                snprintf(text, sizeof(text), "%zu of %" PRIu64 " bytes came", jb->got, jb->len);
            else
                si_s3_describe(&jb->rs, text, sizeof(text));
            /* a short body, or more than the range asked for, is the
             * connection's fault: read the range again */
            bool damaged = jb->rs.status >= 200 && jb->rs.status < 300 &&
                           (cc == CURLE_OK || jb->rs.sink_failed);
            bool retry = (si_s3_retryable(&jb->rs) || damaged) && jb->attempts < w->retries;
            if (!retry) {
                si_errnoprintf(err, jb->rs.status == 403 ? EACCES : EIO,
                               "%s %s (bytes %" PRIu64 "-%" PRIu64 "): %s%s", what, where,
                               jb->off, jb->off + jb->len - 1, text,
                               si_s3_retryable(&jb->rs) ? " (gave up after retries)" : "");
                fail_with(w, &jb->rs);
                goto out;
            }
            jb->attempts++;
            jb->state = SI_S3_JOB_WAITING;
            jb->retry_at = si_mono_now() + si_s3_backoff(jb->attempts, w->retry_base,
                                                      w->retry_max, &w->rng);
            si_s3_response_free(&jb->rs);
            if (w->on_retry)
                w->on_retry(w->retry_arg);
        }
        if (running > 0) {
            int fd = -1, ms = 50;
            if (w->progress)
                w->progress(w->arg, &fd, &ms);
            struct curl_waitfd extra = {.fd = fd, .events = CURL_WAIT_POLLIN};
            curl_multi_poll(multi, fd >= 0 ? &extra : NULL, fd >= 0 ? 1 : 0, ms, NULL);
        }
        else if (w->flushed < w->njobs)
            usleep(10000); /* only jobs waiting for their retry time */
    }
    rc = 0;
out:
    for (int i = 0; i < concurrency && slots; i++) {
        if (slots[i] && busy[i])
            curl_multi_remove_handle(multi, si_s3_xfer_curl(slots[i]));
        si_s3_xfer_free(slots[i]);
    }
    for (size_t j = 0; j < w->njobs; j++)
        si_s3_response_free(&w->jobs[j].rs);
    free(slots);
    free(busy);
    if (multi)
        curl_multi_cleanup(multi);
    return rc;
}
