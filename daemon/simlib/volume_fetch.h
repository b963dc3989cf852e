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

/* Receives the bytes of one read, in order, in chunks; -1 aborts the read
 * (it then fails like an unreadable one). arg is the one given to
 * simlib_volume_fetch: per call, so concurrent fetches keep apart. */
typedef int (*simlib_sink_fn)(void *arg, const simlib_read_t *r, uint64_t at, const void *buf,
                              size_t len, si_error_t *err);

typedef struct simlib_volume_reader simlib_volume_reader_t;

/* dir: the volume directory (library.volume_dir); volumes are opened by the
 * labels of cfg on first use and kept open. */
simlib_volume_reader_t *simlib_volume_reader_new(const char *dir, const simlib_config_t *cfg,
                                                 si_error_t *err);
void simlib_volume_reader_free(simlib_volume_reader_t *rd);

/* The bytes of one read, to sink (NULL: read and dropped): call it from the
 * engine's fetch callback (on the drive's transfer worker). Stops with -1
 * ("read abandoned") between chunks once r->abandoned is set. */
int simlib_volume_fetch(simlib_volume_reader_t *rd, const simlib_read_t *r, simlib_sink_fn sink,
                        void *sink_arg, si_error_t *err);

#endif
