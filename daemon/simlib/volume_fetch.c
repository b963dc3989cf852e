/* Reading recalled bytes from volume images; see volume_fetch.h. */
#include "config.h"
#include "daemon/simlib/volume_fetch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "daemon/volume/volume.h"

/* A cache writer's whole buffer (cache.write_buffer's default), from an
 * address aligned for direct I/O: it writes such feeds to the disk as they
 * are, with no copy into its own buffer. */
#define FETCH_CHUNK (4 << 20)
#define FETCH_ALIGN 4096
/* Buffers kept for the next fetches: one per drive reading at once. A
 * buffer allocated per fetch came back from the kernel page by page each
 * time (a 16 MiB recall spent a quarter of stageind's CPU faulting its
 * chunk buffer in, and cost 2.0 CPU s/GB against 1 GiB's 0.7). */
#define FETCH_KEEP 64

struct simlib_volume_reader {
    char *dir;
    int nvolumes;
    char (*labels)[SIMLIB_LABEL_MAX + 1];
    pthread_mutex_t mu;   /* guards open[] and spare[] (the volumes themselves are pread) */
    tapevol_t **open;
    unsigned char *spare[FETCH_KEEP];
    int nspare;
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
    for (int i = 0; i < rd->nspare; i++)
        free(rd->spare[i]);
    free(rd->open);
    free(rd->labels);
    free(rd->dir);
    pthread_mutex_destroy(&rd->mu);
    free(rd);
}

/* buf kept for the next fetch, or freed when enough are kept. */
static void buffer_put(simlib_volume_reader_t *rd, unsigned char *buf)
{
    if (!buf)
        return;
    pthread_mutex_lock(&rd->mu);
    if (rd->nspare < FETCH_KEEP) {
        rd->spare[rd->nspare++] = buf;
        buf = NULL;
    }
    pthread_mutex_unlock(&rd->mu);
    free(buf);
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
    unsigned char *buf = rd->nspare ? rd->spare[--rd->nspare] : NULL;
    pthread_mutex_unlock(&rd->mu);
    if (!vol) {
        buffer_put(rd, buf);
        return -1;
    }
    if (!buf) {
        if (posix_memalign((void **)&buf, FETCH_ALIGN, FETCH_CHUNK) != 0)
            return si_errprintf(err, "volume reader: out of memory");
        madvise(buf, FETCH_CHUNK, MADV_HUGEPAGE); /* a hint: fewer faults and TLB misses */
    }
    int rc = 0;
    for (uint64_t done = 0; rc == 0 && done < r->size;) {
        size_t n = r->size - done < FETCH_CHUNK ? (size_t)(r->size - done) : FETCH_CHUNK;
        if (r->abandoned && atomic_load(r->abandoned))
            rc = si_errprintf(err, "volume %s: read of %llu bytes at %llu abandoned (drive "
                              "failed or library stopped)", rd->labels[r->volume],
                              (unsigned long long)r->size, (unsigned long long)r->offset);
        else if (tapevol_read(vol, r->offset + done, buf, n, err) < 0 ||
                 (sink && sink(sink_arg, r, done, buf, n, err) < 0))
            rc = -1;
        done += n;
    }
    buffer_put(rd, buf);
    return rc;
}
