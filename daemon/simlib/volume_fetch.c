/* Reading recalled bytes from volume images; see volume_fetch.h. */
#include "config.h"
#include "daemon/simlib/volume_fetch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/volume/volume.h"

/* A cache writer's whole buffer (cache.write_buffer's default), from an
 * address aligned for direct I/O: it writes such feeds to the disk as they
 * are, with no copy into its own buffer. */
#define FETCH_CHUNK (4 << 20)
#define FETCH_ALIGN 4096

struct simlib_volume_reader {
    char *dir;
    int nvolumes;
    char (*labels)[SIMLIB_LABEL_MAX + 1];
    pthread_mutex_t mu;   /* guards open[] (the volumes themselves are pread) */
    tapevol_t **open;
};

simlib_volume_reader_t *simlib_volume_reader_new(const char *dir, const simlib_config_t *cfg,
                                                 si_error_t *err)
{
    simlib_volume_reader_t *rd = calloc(1, sizeof(*rd));
    if (!rd)
        goto oom;
    pthread_mutex_init(&rd->mu, NULL);
    rd->dir = strdup(dir);
    rd->nvolumes = cfg->nvolumes;
    rd->labels = calloc((size_t)cfg->nvolumes + 1, sizeof(*rd->labels));
    rd->open = calloc((size_t)cfg->nvolumes + 1, sizeof(tapevol_t *));
    if (!rd->dir || !rd->labels || !rd->open)
        goto oom;
    for (int v = 0; v < cfg->nvolumes; v++)
        memcpy(rd->labels[v], cfg->volumes[v].label, sizeof(rd->labels[v]));
    return rd;
oom:
    simlib_volume_reader_free(rd);
    si_errprintf(err, "volume reader: out of memory");
    return NULL;
}

void simlib_volume_reader_free(simlib_volume_reader_t *rd)
{
    if (!rd)
        return;
    for (int v = 0; rd->open && v < rd->nvolumes; v++)
        tapevol_close(rd->open[v]);
    free(rd->open);
    free(rd->labels);
    free(rd->dir);
    pthread_mutex_destroy(&rd->mu);
    free(rd);
}

int simlib_volume_fetch(simlib_volume_reader_t *rd, const simlib_read_t *r, simlib_sink_fn sink,
                        void *sink_arg, si_error_t *err)
{
    if (r->volume < 0 || r->volume >= rd->nvolumes)
        return si_errprintf(err, "volume reader: no volume %d", r->volume);
    pthread_mutex_lock(&rd->mu);
    tapevol_t *vol = rd->open[r->volume];
    if (!vol)
        vol = rd->open[r->volume] = tapevol_open(rd->dir, rd->labels[r->volume], TAPEVOL_RDONLY,
                                                 err);
    pthread_mutex_unlock(&rd->mu);
    if (!vol)
        return -1;
    size_t chunk = r->size < FETCH_CHUNK ? (size_t)r->size : FETCH_CHUNK;
    unsigned char *buf = NULL;
    if (posix_memalign((void **)&buf, FETCH_ALIGN, chunk ? chunk : 1) != 0)
        return si_errprintf(err, "volume reader: out of memory");
    int rc = 0;
    for (uint64_t done = 0; rc == 0 && done < r->size;) {
        size_t n = r->size - done < chunk ? (size_t)(r->size - done) : chunk;
        if (r->abandoned && atomic_load(r->abandoned))
            rc = si_errprintf(err, "volume %s: read of %llu bytes at %llu abandoned (drive "
                              "failed or library stopped)", rd->labels[r->volume],
                              (unsigned long long)r->size, (unsigned long long)r->offset);
        else if (tapevol_read(vol, r->offset + done, buf, n, err) < 0 ||
                 (sink && sink(sink_arg, r, done, buf, n, err) < 0))
            rc = -1;
        done += n;
    }
    free(buf);
    return rc;
}
