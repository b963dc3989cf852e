/* The plumbing every backend needs the same way (its allocation, the
 * records a failed recall never handed over), in a file of its own so the
 * backends call down, never back into the registry (backend.c). */
#include "config.h"

#include <stdlib.h>

#include "daemon/archive/internal.h"

archive_backend_t *archive_backend_alloc(const archive_backend_ops_t *ops, size_t impl_size,
                                         si_error_t *err)
{
    archive_backend_t *b = calloc(1, sizeof(*b));
    void *impl = calloc(1, impl_size);
    if (!b || !impl) {
        free(b);
        free(impl);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    b->ops = ops;
    b->impl = impl;
    return b;
}

void archive_records_free(void **recs, size_t n)
{
    if (recs)
        for (size_t i = 0; i < n; i++)
            free(recs[i]);
    free(recs);
}
