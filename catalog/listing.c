/* Imports of an archive's own object listing (no tape positions): objects,
 * sizes, ETags, storage classes. */
#include "config.h"
#include "catalog/internal.h"
#include "catalog/import.h"

#include <string.h>

int catalog_import_listing(catalog_t *cat, const char *name, catalog_listing_next_fn next,
                           void *arg, catalog_import_stats_t *stats, si_error_t *err)
{
    import_t im;
    if (import_begin(&im, cat, name, stats, err) < 0)
        return -1;
    db_stmt_t *cls = catalog_prepare(cat, "UPDATE objects SET storage_class = ?2"
                                             " WHERE id = ?1 AND storage_class IS NOT ?2", err);
    int rc = cls ? 0 : -1;
    for (;;) {
        if (rc < 0)
            break;
        catalog_listed_object_t l;
        memset(&l, 0, sizeof(l));
        si_error_t why;
        int got = next(arg, &l, &why);
        if (got < 0) {
            rc = si_errprintf(err, "%s", why.text);
            break;
        }
        if (got == 0)
            break;
        im.line++;
        im.stats->lines++;
        catalog_object_t o = {.bucket = l.bucket, .key = l.key, .size = l.size,
                              .checksum = l.checksum, .mtime = l.mtime, .etag = l.etag};
        int64_t id;
        int created = catalog_object_put(cat, &o, &id, &why);
        if (created < 0) {
            rc = import_fail(&im, err, "%s/%s: %s", l.bucket, l.key, why.text);
            break;
        }
        im.stats->objects += (uint64_t)created;
        db_reset(cls);
        db_bind_int64(cls, 1, id);
        db_bind_text_copy(cls, 2, l.storage_class ? l.storage_class : "GLACIER");
        if (db_step(cls) != DB_DONE)
            rc = catalog_sqlerr(cat, err, "recording a storage class");
    }
    db_finalize(cls);
    return import_end(&im, rc, "catalog.import_listing", err);
}
