/* Shared by the files of daemon/volume only. */
#ifndef STAGEIN_VOLUME_INTERNAL_H
#define STAGEIN_VOLUME_INTERNAL_H

#include <pthread.h>
#include <sys/stat.h>

#include "daemon/volume/volume.h"

struct tapevol {
    int fd;
    int flags;
    char *path;          /* <dir>/<label>.vol */
    char *faults_path;   /* <dir>/<label>.unreadable */
    tapevol_info_t label; /* fields from the label record (used, files unset) */

    /* Unreadable regions, reloaded whenever the sidecar file changes, so a
     * fault set by another process applies to the next read. */
    pthread_mutex_t faults_lock;
    bool faults_loaded;
    bool faults_exist;
    struct stat faults_stat;
    tapevol_region_t *regions;
    size_t nregions;
};

/* Parses a filemark record; err says what is wrong with it. */
int tapevol_filemark_parse(const unsigned char rec[TAPEVOL_RECORD], int64_t *seq,
                           uint64_t *start, uint64_t *end, si_error_t *err);

/* The last filemark, which must close the data: the number of archive
 * files and the end of data. */
int tapevol_tail(tapevol_t *vol, int64_t *files, uint64_t *eod, si_error_t *err);

/* 1 and *hit when [pos, pos + len) overlaps an unreadable region, else 0;
 * -1 when the region file cannot be read. */
int tapevol_faults_overlap(tapevol_t *vol, uint64_t pos, uint64_t len,
                           tapevol_region_t *hit, si_error_t *err);

#endif
