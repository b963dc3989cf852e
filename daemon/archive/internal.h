/* Shared between the archive files, the recall service and the benchmark. */
#ifndef STAGEIN_ARCHIVE_INTERNAL_H
#define STAGEIN_ARCHIVE_INTERNAL_H

#include <stddef.h>

#include "common/conf.h"
#include "common/error.h"
#include "daemon/simlib/engine.h"

/* The sim backend's library from the configuration, with the daemon's
 * defaults (4 drives, time_scale 0.001) where it says nothing, and its
 * volume directory (library.volume_dir, else <state_dir>/volumes). A
 * virtual clock (time_scale 0) is refused: the daemon runs in real time. */
int archive_sim_config(const si_conf_t *conf, const char *state_dir, simlib_config_t *cfg,
                       char *dir, size_t dirsize, si_error_t *err);

#endif
