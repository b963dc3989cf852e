/* Aligned buffers kept for reuse. A buffer allocated per use (an object
 * held by the cache, a drive's read chunk) came back from the kernel page
 * by page each time: on this kind of VM the faults cost more than the copy
 * into the pages. Kept buffers are sorted into size classes (four per power
 * of two) with one free list each, so a buffer serves any size of its
 * class; at most max_kept bytes are kept, the rest freed. Thread-safe. */
#ifndef STAGEIN_COMMON_BUFPOOL_H
#define STAGEIN_COMMON_BUFPOOL_H

#include <pthread.h>
#include <stddef.h>

/* Alignment of every buffer (direct I/O's), and the smallest class. */
#define SI_BUFPOOL_ALIGN 4096u
/* Size classes with a free list: up to 2^43 bytes. */
#define SI_BUFPOOL_CLASSES 128u

typedef struct si_bufpool {
    pthread_mutex_t mu;
    struct si_bufpool_free *free[SI_BUFPOOL_CLASSES];
    size_t kept, max_kept;
} si_bufpool_t;

void si_bufpool_init(si_bufpool_t *p, size_t max_kept);
/* Frees every kept buffer (those taken are their holders' to put or free). */
void si_bufpool_destroy(si_bufpool_t *p);
/* The size of the class that holds size bytes (at least size, less than a
 * quarter or SI_BUFPOOL_ALIGN more, a multiple of SI_BUFPOOL_ALIGN) and its
 * index (a free list below SI_BUFPOOL_CLASSES). */
size_t si_bufpool_class(size_t size, unsigned *index);
/* The size of the class of that index (what si_bufpool_class returns). */
size_t si_bufpool_class_size(unsigned index);
/* A buffer of at least size bytes, aligned to SI_BUFPOOL_ALIGN (2 MiB and
 * larger ones to 2 MiB; 64 KiB and larger ones in huge pages where the
 * kernel has them, the smaller of those carved from one huge page with
 * neighbours of their class, kept for the next gets): a kept one of its
 * class, or new; NULL without memory. */
void *si_bufpool_get(si_bufpool_t *p, size_t size);
/* Gives back a buffer si_bufpool_get returned for size: kept, or freed
 * when max_kept bytes are kept already (NULL is fine). */
void si_bufpool_put(si_bufpool_t *p, void *buf, size_t size);
/* Bytes kept now. */
size_t si_bufpool_kept(si_bufpool_t *p);

#endif
