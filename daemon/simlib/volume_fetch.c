/* Reading recalled bytes from volume images; see volume_fetch.h. */
#include "config.h"
#include "daemon/simlib/volume_fetch.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/volume/volume.h"

#define FETCH_CHUNK (1 << 20)

struct simlib_volume_reader {
    char *dir;
    int nvolumes;
    char (*labels)[SIMLIB_LABEL_MAX + 1];
    tapevol_t **open;
    simlib_sink_fn sink;
    void *sink_arg;
    unsigned char *buf;
};

simlib_volume_reader_t *simlib_volume_reader_new(const char *dir, const simlib_config_t *cfg,
                                                 simlib_sink_fn sink, void *sink_arg,
                                                 si_error_t *err)
{
    simlib_volume_reader_t *rd = calloc(1, sizeof(*rd));
    if (!rd)
        goto oom;
    rd->dir = strdup(dir);
    rd->nvolumes = cfg->nvolumes;
    rd->labels = calloc((size_t)cfg->nvolumes + 1, sizeof(*rd->labels));
    rd->open = calloc((size_t)cfg->nvolumes + 1, sizeof(tapevol_t *));
    rd->buf = malloc(FETCH_CHUNK);
    if (!rd->dir || !rd->labels || !rd->open || !rd->buf)
        goto oom;
    for (int v = 0; v < cfg->nvolumes; v++)
        memcpy(rd->labels[v], cfg->volumes[v].label, sizeof(rd->labels[v]));
    rd->sink = sink;
    rd->sink_arg = sink_arg;
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
    free(rd->buf);
    free(rd);
}

int simlib_volume_fetch(simlib_volume_reader_t *rd, const simlib_read_t *r, si_error_t *err)
{
    if (r->volume < 0 || r->volume >= rd->nvolumes)
        return si_errprintf(err, "volume reader: no volume %d", r->volume);
    if (!rd->open[r->volume]) {
        rd->open[r->volume] = tapevol_open(rd->dir, rd->labels[r->volume], TAPEVOL_RDONLY, err);
        if (!rd->open[r->volume])
            return -1;
    }
    for (uint64_t done = 0; done < r->size;) {
        size_t n = r->size - done < FETCH_CHUNK ? (size_t)(r->size - done) : FETCH_CHUNK;
        if (tapevol_read(rd->open[r->volume], r->offset + done, rd->buf, n, err) < 0)
            return -1;
        if (rd->sink && rd->sink(rd->sink_arg, r, done, rd->buf, n, err) < 0)
            return -1;
        done += n;
    }
    return 0;
}
