/* Shared by the catalog's import modules: one transaction per import,
 * errors as "name:line: reason". */
#ifndef STAGEIN_CATALOG_IMPORT_H
#define STAGEIN_CATALOG_IMPORT_H

#include "catalog/internal.h"

#define IMPORT_LINE_MAX (1024 * 1024)

typedef struct {
    catalog_t *cat;
    const char *name;
    uint64_t line;
    catalog_import_stats_t *stats;
    catalog_import_stats_t scratch;
    int64_t first_new_object; /* objects with this id or larger came from this import */
    struct import_volume {    /* labels seen, and their ids (open addressing) */
        char label[40];
        int64_t id;
    } *volumes;
    size_t volumes_cap, volumes_used;
    char *buf;                /* the current line */
    /* Engines that pay a round trip per statement take position records in
     * batches (import_row_t, in import.c): one statement per batch. */
    const char *batch_sql;    /* NULL: one record at a time */
    struct import_row *batch;
    size_t nbatch;
    struct import_row *pending; /* the batch whose COPY is in flight */
    size_t npending;
    uint64_t pending_objects;   /* its new objects */
    bool broken;                /* the batch in flight failed: the import ends */
    /* Object ids taken from the sequence ahead of the batches, so that a
     * batch's rows are written while the one in flight is inserted. */
    int64_t *ids;
    size_t ids_first, ids_count;
    struct import_prepared {    /* the next batch's COPY text, once written */
        bool ready;
        bool by_statement;      /* two records of one object disagree */
        uint64_t objects_count;
        char *objects, *copies;
        size_t objects_len, copies_len;
    } prepared;
} import_t;

/* One tape position record, whatever format it came in. */
typedef struct {
    const char *bucket, *key, *volume, *checksum, *etag;
    uint64_t size, position;
    int copy;
    int64_t file_seq, mtime;
} position_rec_t;

int import_begin(import_t *im, catalog_t *cat, const char *name,
                 catalog_import_stats_t *stats, si_error_t *err);
/* Commits (rc 0) with an event of the given kind, or rolls back (rc < 0). */
int import_end(import_t *im, int rc, const char *kind, si_error_t *err);
int import_fail(import_t *im, si_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int put_position(import_t *im, const position_rec_t *r, si_error_t *err);
/* Ends the batch in flight, if any: before any other statement of the
 * import, and before the import ends. -1 with its first bad line. */
int import_settle(import_t *im, si_error_t *err);

int catalog_import_ltfs(catalog_t *cat, const char *name, FILE *in,
                        const catalog_positions_opts_t *opts, catalog_import_stats_t *stats,
                        si_error_t *err);

#endif
