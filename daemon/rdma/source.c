/* The memory of an RDMA transfer: the cache file mapped whole (kept for the
 * GETs that follow) or buffers of the registered pool. */
#include "config.h"
#include "daemon/rdma/internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/clock.h"

/* Drops unused mappings beyond MAPPINGS_KEPT, those unused for
 * idle_seconds and those of files the cache has removed (a mapping would
 * keep their space), or every unused one when all is set. Caller holds
 * srv->lock. */
void rdma_mappings_trim(rdma_server_t *srv, bool all)
{
    double cutoff = si_mono_now() - srv->cfg.idle_seconds;
    unsigned unused = 0;
    struct stat st;

    for (mapping_t **pp = &srv->mappings; *pp;) {
        mapping_t *m = *pp;
        if (m->refs == 0 && (all || ++unused > MAPPINGS_KEPT || m->last_used < cutoff ||
                             fstat(m->fd, &st) < 0 || st.st_nlink == 0)) {
            *pp = m->next;
            munmap(m->addr, (size_t)m->size);
            close(m->fd);
            free(m);
            continue;
        }
        pp = &m->next;
    }
}

/* The mapping of fd's file (or of the object's window of it) for a
 * zero-copy GET, made on first use. */
void rdma_source_map(rdma_server_t *srv, source_t *src, int fd, const rdma_window_t *window,
                     uint64_t offset, uint64_t len)
{
    struct stat st;
    mapping_t *m;
    void *addr;

    if (!srv->cfg.zero_copy || fstat(fd, &st) < 0 || st.st_size <= 0 ||
        (uint64_t)st.st_size < offset + len || (uint64_t)st.st_size > SIZE_MAX)
        return;
    /* an object of a segment: its blocks alone (segments start objects on
     * page boundaries; mapping the whole file would read other objects) */
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    bool whole = !window;
    uint64_t map_off = whole ? 0 : window->from / page * page;
    uint64_t map_end = whole ? (uint64_t)st.st_size : window->from + window->size;
    if (map_end > (uint64_t)st.st_size || offset < map_off || offset + len > map_end ||
        map_end == map_off)
        return;
    pthread_mutex_lock(&srv->lock);
    for (mapping_t **pp = &srv->mappings; *pp; pp = &(*pp)->next) {
        m = *pp;
        if (m->dev == st.st_dev && m->ino == st.st_ino && m->whole == whole &&
            m->off == map_off && (uint64_t)m->size == map_end - map_off &&
            (!whole || (m->mtime.tv_sec == st.st_mtim.tv_sec &&
                        m->mtime.tv_nsec == st.st_mtim.tv_nsec))) {
            *pp = m->next; /* to the front */
            m->next = srv->mappings;
            srv->mappings = m;
            goto found;
        }
    }
    pthread_mutex_unlock(&srv->lock);
    m = NULL;
    size_t map_len = (size_t)(map_end - map_off);
    addr = mmap(NULL, map_len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, (off_t)map_off);
    if (addr == MAP_FAILED || !(m = calloc(1, sizeof *m)) ||
        (m->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        if (addr != MAP_FAILED)
            munmap(addr, map_len);
        free(m);
        return;
    }
    m->dev = st.st_dev;
    m->ino = st.st_ino;
    m->whole = whole;
    m->off = map_off;
    m->size = (off_t)map_len;
    m->mtime = st.st_mtim;
    m->addr = addr;
    pthread_mutex_lock(&srv->lock);
    m->next = srv->mappings;
    srv->mappings = m;
found:
    m->refs++;
    src->mapping = m;
    src->mapped = m->addr;
    src->map_delta = (size_t)(offset - m->off);
    rdma_mappings_trim(srv, false);
    pthread_mutex_unlock(&srv->lock);
}

/* Registers the transfer's range of the mapping where the provider wants
 * local registrations; the pool is used if that fails. Caller holds
 * gen->lock (and the mapping stays referenced). */
void rdma_source_register(generation_t *gen, source_t *src, uint64_t len)
{
    si_error_t ignored;

    if (src->mapped && rdma_fabric_local_mr(gen->fab) &&
        rdma_fabric_mr_reg(gen->fab, src->mapped + src->map_delta, (size_t)len, FI_WRITE,
                           &src->map_mr, &ignored) < 0)
        src->mapped = NULL; /* released with the source */
}

/* Returns the pool buffers and the mapping; the range's registration is
 * closed before (rdma_fabric_mr_close under gen->lock, or by rdma_gen_close).
 * Caller holds srv->lock. */
void rdma_source_release(rdma_server_t *srv, source_t *src)
{
    for (unsigned i = 0; i < src->buffer_count; i++)
        srv->free_buffers[srv->free_count++] = src->buffers[i];
    src->buffer_count = 0;
    if (src->mapping) {
        src->mapping->refs--;
        src->mapping->last_used = si_mono_now();
    }
    src->mapping = NULL;
    src->mapped = NULL;
}
