/* Reading recalled bytes from volume images; see volume_fetch.h. */
#include "config.h"
#include "daemon/simlib/volume_fetch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "daemon/volume/volume.h"

/* A cache writer's whole buffer (cache.write_buffer's default), from an
 * address aligned for direct I/O: it writes such feeds to the disk as they
 * are, with no copy into its own buffer. */
#define FETCH_CHUNK (4 << 20)
/* Buffers kept for the next fetches: one per drive reading at once. A
 * buffer allocated per fetch came back from the kernel page by page each
 * time (a 16 MiB recall spent a quarter of stageind's CPU faulting its
 * chunk buffer in, and cost 2.0 CPU s/GB against 1 GiB's 0.7). */
#define FETCH_KEEP 64

struct simlib_volume_reader {
    char *dir;
    int nvolumes;
    char (*labels)[SIMLIB_LABEL_MAX + 1];
    pthread_mutex_t mu;   /* guards open[] (the volumes themselves are pread) */
    tapevol_t **open;
    si_bufpool_t buffers; /* FETCH_KEEP chunk buffers */
};

simlib_volume_reader_t *simlib_volume_reader_new(const char *dir, const simlib_config_t *cfg,
                                                 si_error_t *err)
{
    simlib_volume_reader_t *rd = calloc(1, sizeof(*rd));
    if (!rd)
        goto oom;
    pthread_mutex_init(&rd->mu, NULL);
    si_bufpool_init(&rd->buffers, (size_t)FETCH_KEEP * FETCH_CHUNK);
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
    si_bufpool_destroy(&rd->buffers);
    free(rd->open);
    free(rd->labels);
    free(rd->dir);
    pthread_mutex_destroy(&rd->mu);
    free(rd);
}

int simlib_volume_fetch(simlib_volume_reader_t *rd, const simlib_read_t *r,
                        const simlib_sink_t *sink, si_error_t *err)
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
    unsigned char *buf = NULL; /* taken at the first chunk the sink has no room for */
    int rc = 0;
    for (uint64_t done = 0; rc == 0 && done < r->size;) {
        size_t n = r->size - done < FETCH_CHUNK ? (size_t)(r->size - done) : FETCH_CHUNK;
        size_t room_len = 0;
        unsigned char *room = sink && sink->room ? sink->room(sink->arg, &room_len) : NULL;
        if (room && room_len < n)
            room = NULL; /* more bytes than the sink expects: bytes says so */
        if (!room && !buf && !(buf = si_bufpool_get(&rd->buffers, FETCH_CHUNK)))
            return si_errprintf(err, "volume reader: out of memory");
        if (r->abandoned && atomic_load(r->abandoned))
            rc = si_errprintf(err, "volume %s: read of %llu bytes at %llu abandoned (drive "
                              "failed or library stopped)", rd->labels[r->volume],
                              (unsigned long long)r->size, (unsigned long long)r->offset);
        else if (tapevol_read(vol, r->offset + done, room ? room : buf, n, err) < 0)
            rc = -1;
        else if (room)
            rc = sink->landed(sink->arg, r, done, n, err);
        else if (sink)
            rc = sink->bytes(sink->arg, r, done, buf, n, err);
        done += n;
    }
    si_bufpool_put(&rd->buffers, buf, FETCH_CHUNK);
    return rc;
}
