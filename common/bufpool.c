/* Aligned buffers kept for reuse; see bufpool.h. */
#include "config.h"
#include "common/bufpool.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE (2u << 20)

/* A kept buffer: its first bytes link it to the next of its class. */
struct si_bufpool_free {
    struct si_bufpool_free *next;
};

void si_bufpool_init(si_bufpool_t *p, size_t max_kept)
{
    *p = (si_bufpool_t){.max_kept = max_kept};
    pthread_mutex_init(&p->mu, NULL);
}

void si_bufpool_destroy(si_bufpool_t *p)
{
    for (unsigned i = 0; i < SI_BUFPOOL_CLASSES; i++) {
        for (struct si_bufpool_free *b = p->free[i], *next; b; b = next) {
            next = b->next;
            free(b);
        }
        p->free[i] = NULL;
    }
    p->kept = 0;
    pthread_mutex_destroy(&p->mu);
}

size_t si_bufpool_class(size_t size, unsigned *index)
{
    if (size <= SI_BUFPOOL_ALIGN) {
        *index = 0;
        return SI_BUFPOOL_ALIGN;
    }
    unsigned log2 = 63 - (unsigned)__builtin_clzll((unsigned long long)(size - 1));
    size_t power = (size_t)1 << log2;
    size_t step = power / 4 > SI_BUFPOOL_ALIGN ? power / 4 : SI_BUFPOOL_ALIGN;
    size_t rounded = (size + step - 1) / step * step;
    /* (rounded - power) / step is 1 to 4 (1 and 2 below 16 KiB, as the
     * steps are whole blocks): four indexes a power of two */
    *index = 4 * (log2 - 12) + (unsigned)((rounded - power) / step);
    return rounded;
}

void *si_bufpool_get(si_bufpool_t *p, size_t size)
{
    unsigned cls;
    size = si_bufpool_class(size, &cls);
    pthread_mutex_lock(&p->mu);
    struct si_bufpool_free *b = cls < SI_BUFPOOL_CLASSES ? p->free[cls] : NULL;
    if (b) {
        p->free[cls] = b->next;
        p->kept -= size;
    }
    pthread_mutex_unlock(&p->mu);
    if (b)
        return b;
    /* a large one in huge pages where the kernel has them: two faults per
     * 4 MiB buffer instead of a thousand */
    int huge = size >= HUGE_PAGE;
    void *buf = NULL;
    if (posix_memalign(&buf, huge ? HUGE_PAGE : SI_BUFPOOL_ALIGN, size) != 0)
        return NULL;
    if (huge)
        madvise(buf, size, MADV_HUGEPAGE); /* advice: without it, small pages */
    return buf;
}

void si_bufpool_put(si_bufpool_t *p, void *buf, size_t size)
{
    if (!buf)
        return;
    unsigned cls;
    size = si_bufpool_class(size, &cls);
    pthread_mutex_lock(&p->mu);
    if (cls < SI_BUFPOOL_CLASSES && p->kept + size <= p->max_kept) {
        struct si_bufpool_free *b = buf;
        b->next = p->free[cls];
        p->free[cls] = b;
        p->kept += size;
        buf = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    free(buf);
}

size_t si_bufpool_kept(si_bufpool_t *p)
{
    pthread_mutex_lock(&p->mu);
    size_t kept = p->kept;
    pthread_mutex_unlock(&p->mu);
    return kept;
}
