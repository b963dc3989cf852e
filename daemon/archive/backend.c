/* The archive backend registry and the "archive" configuration group. */
#include "config.h"
#include <errno.h>
#include <inttypes.h>

#include <string.h>

#include "daemon/archive/backend.h"

const si_conf_key_t archive_conf_keys[] = {
    {"archive", SI_CONF_GROUP, 0, 0, NULL},
    {"archive.backend", SI_CONF_STRING, 0, 0, "sim|s3|hsm|tape"},
    /* re-reads of a copy whose bytes do not match the catalog's checksum */
    {"archive.checksum_retries", SI_CONF_INT, 0, 10, NULL},
    /* seconds between persisted progress of objects being recalled */
    {"archive.progress_interval", SI_CONF_FLOAT, 0.01, 3600, NULL},
    /* seconds between scans of the catalog for new stage requests */
    {"archive.poll_interval", SI_CONF_FLOAT, 0.001, 60, NULL},
    /* threads making recalled objects durable in the cache */
    {"archive.committers", SI_CONF_INT, 1, 64, NULL},
    SI_CONF_KEYS_END,
};

archive_backend_t *archive_backend_new(const archive_backend_opts_t *opts, si_error_t *err)
{
    const char *name = si_conf_string(opts->conf, "archive.backend", "sim");
    if (strcmp(name, "sim") == 0)
        return archive_sim_new(opts, err);
    if (strcmp(name, "s3") == 0)
        return archive_s3_new(opts, err);
    if (strcmp(name, "hsm") == 0)
        return archive_hsm_new(opts, err);
    if (strcmp(name, "tape") == 0)
        return archive_tape_new(opts, err);
    si_errprintf(err, "archive.backend: unknown backend '%s' (known: sim, s3, hsm, tape)", name);
    return NULL;
}

int archive_recall(archive_backend_t *b, const archive_batch_t *batch,
                   const archive_item_t *items, size_t n, si_error_t *err)
{
    return b->ops->recall(b, batch, items, n, err);
}

int archive_cancel(archive_backend_t *b, int64_t object_id)
{
    return b->ops->cancel(b, object_id);
}

int archive_forecast(archive_backend_t *b, archive_forecast_t **out, size_t *n,
                     si_error_t *err)
{
    if (!b->ops->forecast)
        return si_errnoprintf(err, ENOTSUP, "the %s backend makes no forecast", b->ops->name);
    return b->ops->forecast(b, out, n, err);
}

int archive_write(archive_backend_t *b, const archive_member_t *members, size_t n, int ncopies,
                  archive_placement_t *placements, si_error_t *err)
{
    return b->ops->archive(b, members, n, ncopies, placements, err);
}

int archive_status(archive_backend_t *b, archive_status_t *out, si_error_t *err)
{
    return b->ops->status(b, out, err);
}

void archive_metrics(archive_backend_t *b, FILE *out)
{
    b->ops->metrics(b, out);
}

void archive_backend_free(archive_backend_t *b)
{
    if (b)
        b->ops->free(b);
}

