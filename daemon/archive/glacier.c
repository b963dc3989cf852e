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

#include "daemon/archive/glacier_internal.h"

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
        glacier_recall_free(r);
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
        glacier_recall_free(recs[i]); /* on success the queue owns them */
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
        glacier_finish(b, now, false, "cancelled");
    return found;
}

static int s3_archive(archive_backend_t *be, const archive_member_t *members, size_t n,
                      int ncopies, archive_placement_t *placements, si_error_t *err)
{
    s3b_t *b = be->impl;
    if (n == 0)
        return si_errprintf(err, "an archive write needs members");
    if (archive_single_copy_check("s3", ncopies, err) < 0)
        return -1;
    si_s3_xfer_t *x = glacier_xfer_new(b, err);
    if (!x)
        return -1;
    uint64_t bytes = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = glacier_put_member(b, x, &members[i], err);
        bytes += members[i].size;
    }
    si_s3_xfer_free(x);
    if (rc < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        archive_pseudo_placement(b->conf.volume, members[i].size, 0, &placements[i]);
    pthread_mutex_lock(&b->mu);
    b->counts.bytes_written += bytes;
    b->counts.files_written += n;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

/* ---- status ---------------------------------------------------------------------- */

static int s3_status(archive_backend_t *be, archive_status_t *out, si_error_t *err)
{
    s3b_t *b = be->impl;
    (void)err;
    pthread_mutex_lock(&b->mu);
    archive_external_status("s3", &b->counts, &b->q, out);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

static void s3_metrics(archive_backend_t *be, FILE *out)
{
    s3b_t *b = be->impl;
    pthread_mutex_lock(&b->mu);
    uint64_t reads = b->counts.reads, failures = b->counts.read_failures,
             bytes = b->counts.bytes_read, written = b->counts.bytes_written,
             restores = b->restores_requested, heads = b->heads,
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
            "# HELP stagein_s3_retries_total Requests retried after a glacier_transient failure.\n"
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
        glacier_recall_free(b->q.live[i]);
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
    archive_backend_t *be = archive_backend_alloc(&s3_ops, sizeof(s3b_t), err);
    if (!be)
        return NULL;
    s3b_t *b = be->impl;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->control_cv, NULL);
    pthread_cond_init(&b->ready_cv, NULL);
    b->ready_tail = &b->ready_head;
    b->cb = opts->cb;
    b->log = opts->log;
    b->checksum_retries = (int)si_conf_int(opts->conf, "archive.checksum_retries", 1);
    if (archive_s3_conf_from(opts->conf, &b->conf, err) < 0 ||
        archive_single_copy_conf(opts->conf, "s3", err) < 0 ||
        !(b->client = archive_s3_client(&b->conf, err)) ||
        archive_queue_init(&b->q, b->conf.volume, err) < 0)
        goto error;
    if (pthread_create(&b->control, NULL, glacier_control_main, b) != 0) {
        si_errprintf(err, "s3: cannot start its control thread");
        goto error;
    }
    b->control_started = true;
    if (!(b->workers = calloc((size_t)b->conf.gets, sizeof(*b->workers)))) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    for (; b->nworkers < b->conf.gets; b->nworkers++)
        if (pthread_create(&b->workers[b->nworkers], NULL, glacier_worker_main, b) != 0) {
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
