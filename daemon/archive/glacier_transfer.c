/* The `s3` archive backend's transfers: GETs into the cache by the worker
 * threads (in parallel ranges above part_size) and push's PUTs (multipart
 * above part_size), their windows through common/aws/s3window.h. */
#include "config.h"

#include "daemon/archive/glacier_internal.h"

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
    b->counts.bytes_read += len;
    pthread_mutex_unlock(&b->mu);
    if (b->cb.progress)
        b->cb.progress(b->cb.arg, g->r->item->object_id, g->delivered);
    return 0;
}

static int on_whole(void *arg, const void *data, size_t len)
{
    return deliver(arg, data, len);
}

static int range_setup(si_s3_window_t *w, size_t j, si_error_t *err)
{
    get_t *g = w->arg;
    s3_recall_t *r = g->r;
    si_s3_job_t *jb = &w->jobs[j];
    if (!jb->buf && !(jb->buf = malloc(jb->len)))
        return si_errprintf(err, "out of memory for a %" PRIu64 " byte range", jb->len);
    snprintf(jb->range, sizeof(jb->range), "bytes=%" PRIu64 "-%" PRIu64, jb->off,
             jb->off + jb->len - 1);
    jb->hdr[0] = (si_http_header_t){"Range", jb->range};
    jb->rq = (si_s3_request_t){.method = "GET", .bucket = r->ubucket, .key = r->ukey,
                               .headers = jb->hdr, .nheaders = 1, .on_data = si_s3_job_land,
                               .arg = jb};
    return 0;
}

/* Hands finished ranges to the sink in order. */
static int range_done(si_s3_window_t *w, size_t j, si_error_t *err)
{
    get_t *g = w->arg;
    (void)j;
    (void)err;
    while (w->flushed < w->njobs && w->jobs[w->flushed].state == SI_S3_JOB_DONE) {
        si_s3_job_t *jb = &w->jobs[w->flushed];
        if (deliver(g, jb->buf, jb->len) < 0)
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
    size_t n;
    si_s3_job_t *jobs = si_s3_jobs_split(0, size, ps, &n);
    int rc = -1;
    if (!jobs) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    si_s3_window_t w = window_of(b, jobs, n, range_setup, range_done, g,
                                 (uint64_t)(uintptr_t)g ^ (uint64_t)(si_mono_now() * 1e6));
    rc = si_s3_window_run(&w, b->conf.parts, "GET", g->r->where, err);
out:
    if (jobs)
        for (size_t j = 0; j < n; j++)
            free(jobs[j].buf);
    free(jobs);
    return rc;
}

/* One attempt at the whole object. 0: all bytes delivered; -1 with err and
 * *retry (glacier_transient) or *restore (the upstream says it is archived again). */
static int get_once(s3b_t *b, si_s3_xfer_t *x, get_t *g, bool *retry, bool *restore,
                    si_error_t *err)
{
    s3_recall_t *r = g->r;
    *retry = *restore = false;
    if (r->item->size > b->conf.part_size && b->conf.parts > 1) {
        if (get_ranged(g, err) == 0)
            return 0;
        /* the window retried glacier_transient failures itself */
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
                glacier_nap(b, si_s3_backoff(r->attempts, b->conf.retry_base, b->conf.retry_max, &seed));
                continue;
            }
            if (retry)
                snprintf(why + strlen(why), sizeof(why) - strlen(why),
                         " (gave up after %d attempts)", r->attempts + 1);
            break;
        }
        if (b->cb.commit(b->cb.arg, g.session, &err) == 0) {
            glacier_finish(b, r, true, NULL);
            return;
        }
        snprintf(why, sizeof(why), "%s: %s", r->where, err.text);
        if (errno != EBADMSG || ++mismatches > b->checksum_retries)
            break;
        /* the bytes did not match: read them again */
    }
    glacier_finish(b, r, false, why);
}

void *glacier_worker_main(void *arg)
{
    s3b_t *b = arg;
    si_error_t err;
    si_s3_xfer_t *x = glacier_xfer_new(b, &err);
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
            glacier_finish(b, r, false, "cancelled");
        else
            fetch(b, x, r);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    si_s3_xfer_free(x);
    return NULL;
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
                              (off_t)(p->m->offset + jb->off + done));
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
        glacier_nap(b, si_s3_backoff(attempt + 1, b->conf.retry_base, b->conf.retry_max, &seed));
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
    size_t n;
    si_s3_job_t *jobs = si_s3_jobs_split(0, size, ps, &n);
    si_strbuf_t xml;
    si_strbuf_init(&xml, 64u << 20);
    rc = -1;
    if (!jobs || n > 10000) {
        si_errprintf(err, jobs ? "%s: %zu parts of %" PRIu64 " bytes, more than S3's 10000 "
                     "(raise archive.s3.part_size)" : "out of memory", where, n, ps);
        goto abort;
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

int glacier_put_member(s3b_t *b, si_s3_xfer_t *x, const archive_member_t *m, si_error_t *err)
{
    archive_s3_map_t scratch;
    const archive_s3_map_t *map = archive_s3_map_for(&b->conf, m->bucket, &scratch);
    char key[2 * SI_KEY_MAX + 2], where[SI_BUCKET_MAX + 2 * SI_KEY_MAX + 8];
    snprintf(key, sizeof(key), "%s%s", map->prefix, m->key);
    snprintf(where, sizeof(where), "s3://%s/%s", map->upstream, key);
    int fd = si_open_range(m->path, m->offset, m->size, err);
    if (fd < 0)
        return -1;
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
            rc = c && buf ? si_checksum_fd(c, fd, m->offset, m->size, buf, MIB, err) : -1;
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
                              .body_off = m->offset, .body_len = (size_t)m->size,
                              .payload_sha256 = hash};
        si_s3_response_t rs;
        rc = call(b, x, &rq, &rs, "PUT", where, err);
        if (rc == 0)
            si_s3_response_free(&rs);
    }
    close(fd);
    return rc;
}
