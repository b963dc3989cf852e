/* Real bytes for the real-time engine: the body of a `fetch` callback
 * (engine.h) that reads a recall from the volume image files of
 * daemon/volume (tapevol_read, which fails inside an unreadable region) and
 * hands them to the caller's sink in chunks. Only the daemon and the demo
 * need it; it links the volume code (and through it the catalog).
 *
 * Thread-safe: the engine runs one fetch per drive at a time, concurrently;
 * a reader shares its open volumes between them (pread). */
#ifndef STAGEIN_SIMLIB_VOLUME_FETCH_H
#define STAGEIN_SIMLIB_VOLUME_FETCH_H

#include <stddef.h>

#include "common/error.h"
#include "daemon/simlib/engine.h"

/* Where the bytes of one read go, in order, in chunks. bytes receives a
 * chunk read into the reader's own buffer; -1 aborts the read (it then fails
 * like an unreadable one). room (optional) offers memory of the sink's for
 * the next bytes (up to *len; NULL: none): a chunk that fits is read there
 * and announced by landed instead (required with room), with no copy.
 * arg is per call, so concurrent fetches keep apart. */
typedef struct {
    int (*bytes)(void *arg, const simlib_read_t *r, uint64_t at, const void *buf, size_t len,
                 si_error_t *err);
    void *(*room)(void *arg, size_t *len);
    int (*landed)(void *arg, const simlib_read_t *r, uint64_t at, size_t len, si_error_t *err);
    void *arg;
} simlib_sink_t;

typedef struct simlib_volume_reader simlib_volume_reader_t;

/* dir: the volume directory (library.volume_dir); volumes are opened by the
 * labels of cfg on first use and kept open. */
simlib_volume_reader_t *simlib_volume_reader_new(const char *dir, const simlib_config_t *cfg,
                                                 si_error_t *err);
void simlib_volume_reader_free(simlib_volume_reader_t *rd);

/* The bytes of one read, to sink (NULL: read and dropped): call it from the
 * engine's fetch callback (on the drive's transfer worker). Stops with -1
 * ("read abandoned") between chunks once r->abandoned is set. */
int simlib_volume_fetch(simlib_volume_reader_t *rd, const simlib_read_t *r,
                        const simlib_sink_t *sink, si_error_t *err);

#endif
