/* Real bytes for the real-time engine: a `fetch` callback (engine.h) that
 * reads each finished recall from the volume image files of daemon/volume
 * (tapevol_read, which fails inside an unreadable region) and hands them to
 * the caller's sink in chunks. Only the daemon and the demo need it; it links
 * the volume code (and through it the catalog). */
#ifndef STAGEIN_SIMLIB_VOLUME_FETCH_H
#define STAGEIN_SIMLIB_VOLUME_FETCH_H

#include <stddef.h>

#include "common/error.h"
#include "daemon/simlib/engine.h"

/* Receives the bytes of one read, in order, in chunks; -1 aborts the read
 * (it then fails like an unreadable one). */
typedef int (*simlib_sink_fn)(void *arg, const simlib_read_t *r, uint64_t at, const void *buf,
                              size_t len, si_error_t *err);

typedef struct simlib_volume_reader simlib_volume_reader_t;

/* dir: the volume directory (library.volume_dir); volumes are opened by the
 * labels of cfg on first use and kept open. */
simlib_volume_reader_t *simlib_volume_reader_new(const char *dir, const simlib_config_t *cfg,
                                                 simlib_sink_fn sink, void *sink_arg,
                                                 si_error_t *err);
void simlib_volume_reader_free(simlib_volume_reader_t *rd);

/* The bytes of one finished read, to the sink: call it from the engine's
 * fetch callback (whose argument is the caller's own context). Runs on the
 * engine thread. */
int simlib_volume_fetch(simlib_volume_reader_t *rd, const simlib_read_t *r, si_error_t *err);

#endif
