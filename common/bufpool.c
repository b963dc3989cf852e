/* Aligned buffers kept for reuse; see bufpool.h. */
#include "config.h"
#include "common/bufpool.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE_PAGE (2u << 20)
/* Classes of this size and more are mapped, in huge pages where the kernel
 * has them, and smaller ones of them carved from one huge page together;
 * smaller classes come from malloc (mapping each would cost a mapping per
 * buffer). */
#define MAPPED_MIN (64u << 10)

/* A kept buffer: its first bytes link it to the next of its class. */
struct si_bufpool_free {
    struct si_bufpool_free *next;
};

static void release(void *buf, size_t class_size)
{
    if (class_size >= MAPPED_MIN)
        munmap(buf, class_size);
    else
        free(buf);
}

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
            release(b, si_bufpool_class_size(i));
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

size_t si_bufpool_class_size(unsigned index)
{
    if (index == 0)
        return SI_BUFPOOL_ALIGN;
    /* the inverse of si_bufpool_class: index 4 * (log2 - 12) + k, k in 1..4 */
    unsigned log2 = 12 + (index - 1) / 4, k = (index - 1) % 4 + 1;
    size_t power = (size_t)1 << log2;
    size_t step = power / 4 > SI_BUFPOOL_ALIGN ? power / 4 : SI_BUFPOOL_ALIGN;
    return power + k * step;
}

/* size bytes mapped at a multiple of HUGE_PAGE (the kernel aligns only to
 * pages: map more, unmap the ends), in huge pages where the kernel has
 * them; NULL without memory. */
static void *map_huge_aligned(size_t size)
{
    size_t span = size + HUGE_PAGE;
    char *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *start = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (start > m)
        munmap(m, (size_t)(start - m));
    if (m + span > start + size)
        munmap(start + size, (size_t)(m + span - (start + size)));
    madvise(start, size, MADV_HUGEPAGE); /* advice: without it, small pages */
    return start;
}

/* A new buffer of class_size (a class's size) bytes. A mapped class under
 * HUGE_PAGE is carved from one huge page with its neighbours, which go to
 * the class's free list as far as max_kept allows (the rest unmapped): a
 * fresh buffer then costs one fault per huge page instead of one per page,
 * and on a virtual machine a fault costs more than the copy into its page. */
static void *allocate(si_bufpool_t *p, size_t class_size, unsigned cls)
{
    if (class_size < MAPPED_MIN) {
        void *buf = NULL;
        return posix_memalign(&buf, SI_BUFPOOL_ALIGN, class_size) == 0 ? buf : NULL;
    }
    if (class_size >= HUGE_PAGE)
        return map_huge_aligned(class_size);
    char *slab = map_huge_aligned(HUGE_PAGE);
    if (!slab)
        return NULL;
    size_t count = HUGE_PAGE / class_size, used = 1;
    pthread_mutex_lock(&p->mu);
    for (; used < count && p->kept + class_size <= p->max_kept; used++) {
        struct si_bufpool_free *b = (struct si_bufpool_free *)(slab + used * class_size);
        b->next = p->free[cls];
        p->free[cls] = b;
        p->kept += class_size;
    }
    pthread_mutex_unlock(&p->mu);
    if (used * class_size < HUGE_PAGE)
        munmap(slab + used * class_size, HUGE_PAGE - used * class_size);
    return slab;
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
    return allocate(p, size, cls);
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
    if (buf)
        release(buf, size);
}

size_t si_bufpool_kept(si_bufpool_t *p)
{
    pthread_mutex_lock(&p->mu);
    size_t kept = p->kept;
    pthread_mutex_unlock(&p->mu);
    return kept;
}
