/* stagein catalog import --from-s3 (import_s3.c). */
#ifndef STAGEIN_IMPORT_S3_H
#define STAGEIN_IMPORT_S3_H

#include <stdbool.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/conf.h"
#include "common/error.h"

/* Lists BUCKET[/PREFIX] of the archive.s3 upstream into the catalog (names
 * mapped back through archive.s3.buckets); a single-part ETag becomes the
 * object's md5 checksum when etag_md5. *skipped: directory markers left out. */
int import_from_s3(catalog_t *cat, const si_conf_t *conf, const char *spec, bool etag_md5,
                   catalog_import_stats_t *stats, uint64_t *skipped, si_error_t *err);

#endif
