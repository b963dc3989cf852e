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

/* A free buffer: its first bytes link it to the next of its class. */
typedef struct cache_buffer {
    struct cache_buffer *next;
} cache_buffer_t;

size_t cache_buffer_class(size_t size, unsigned *index)
{
    if (size <= CACHE_BLOCK) {
        *index = 0;
        return CACHE_BLOCK;
    }
    unsigned log2 = 63 - (unsigned)__builtin_clzll((unsigned long long)(size - 1));
    size_t power = (size_t)1 << log2;
    size_t step = power / 4 > CACHE_BLOCK ? power / 4 : CACHE_BLOCK;
    size_t rounded = (size + step - 1) / step * step;
    /* (rounded - power) / step is 1 to 4 (1 and 2 below 16 KiB, as the
     * steps are whole blocks): four indexes a power of two */
    *index = 4 * (log2 - 12) + (unsigned)((rounded - power) / step);
    return rounded;
}

void *cache_buffer_get(cache_t *c, size_t size)
{
    unsigned cls;
    size = cache_buffer_class(size, &cls);
    pthread_mutex_lock(&c->buffers_lock);
    cache_buffer_t *b = cls < CACHE_BUFFER_CLASSES ? c->buffers[cls] : NULL;
    if (b) {
        c->buffers[cls] = b->next;
        c->buffers_kept -= size;
    }
    pthread_mutex_unlock(&c->buffers_lock);
    if (b)
        return b;
    /* a large one in huge pages where the kernel has them: two faults per
     * 4 MiB write buffer instead of a thousand */
    bool huge = size >= HUGE_PAGE;
    void *buf = NULL;
    if (posix_memalign(&buf, huge ? HUGE_PAGE : CACHE_BLOCK, size) != 0)
        return NULL;
    if (huge)
        madvise(buf, size, MADV_HUGEPAGE); /* advice: without it, small pages */
    return buf;
}

void cache_buffer_put(cache_t *c, void *buf, size_t size)
{
    if (!buf)
        return;
    unsigned cls;
    size = cache_buffer_class(size, &cls);
    pthread_mutex_lock(&c->buffers_lock);
    if (cls < CACHE_BUFFER_CLASSES && c->buffers_kept + size <= c->conf.segment_memory / 2) {
        cache_buffer_t *b = buf;
        b->next = c->buffers[cls];
        c->buffers[cls] = b;
        c->buffers_kept += size;
        buf = NULL;
    }
    pthread_mutex_unlock(&c->buffers_lock);
    free(buf);
}

void cache_buffers_free(cache_t *c)
{
    for (unsigned i = 0; i < CACHE_BUFFER_CLASSES; i++) {
        for (cache_buffer_t *b = c->buffers[i], *next; b; b = next) {
            next = b->next;
            free(b);
        }
        c->buffers[i] = NULL;
    }
    c->buffers_kept = 0;
}
