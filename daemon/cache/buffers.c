/* Object buffers, kept for the next writer: a buffer of a writer's size is
 * taken from the cache's free list when one is there. Allocated fresh, a
 * megabyte's buffer was mapped, faulted in page by page and unmapped for
 * each object (glibc maps allocations of 128 KiB and more): 16 % of
 * stageind's CPU in a push of 1 MiB files, the copy into pages this VM
 * faults in anew. The free list keeps at most half of cache.segment_memory
 * (the memory an admin gives the cache's writers): 32 uploads of 16 MiB at
 * once hold 128 MiB of 4 MiB write buffers. */
#include "config.h"
#include "daemon/cache/internal.h"

#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE (2u << 20)

/* A free buffer: its first bytes say what it is. */
typedef struct cache_buffer {
    struct cache_buffer *next;
    size_t size;
} cache_buffer_t;

void *cache_buffer_get(cache_t *c, size_t size)
{
    pthread_mutex_lock(&c->buffers_lock);
    for (cache_buffer_t **p = &c->buffers; *p; p = &(*p)->next) {
        if ((*p)->size != size)
            continue;
        cache_buffer_t *b = *p;
        *p = b->next;
        c->buffers_kept -= size;
        pthread_mutex_unlock(&c->buffers_lock);
        return b;
    }
    pthread_mutex_unlock(&c->buffers_lock);
    /* a large one in huge pages where the kernel has them: two faults per
     * 4 MiB write buffer instead of a thousand */
    bool huge = size >= HUGE_PAGE;
    void *buf = NULL;
    if (posix_memalign(&buf, huge ? HUGE_PAGE : CACHE_BLOCK, size ? size : CACHE_BLOCK) != 0)
        return NULL;
    if (huge)
        madvise(buf, size, MADV_HUGEPAGE); /* advice: without it, small pages */
    return buf;
}

void cache_buffer_put(cache_t *c, void *buf, size_t size)
{
    if (!buf)
        return;
    pthread_mutex_lock(&c->buffers_lock);
    if (size >= sizeof(cache_buffer_t) && c->buffers_kept + size <= c->conf.segment_memory / 2) {
        cache_buffer_t *b = buf;
        b->size = size;
        b->next = c->buffers;
        c->buffers = b;
        c->buffers_kept += size;
        buf = NULL;
    }
    pthread_mutex_unlock(&c->buffers_lock);
    free(buf);
}

void cache_buffers_free(cache_t *c)
{
    for (cache_buffer_t *b = c->buffers, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    c->buffers = NULL;
    c->buffers_kept = 0;
}
