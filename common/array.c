#include "config.h"
#include "common/array.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int si_array_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2 / (elem ? elem : 1)) {
            errno = ENOMEM;
            return -1;
        }
        c *= 2;
    }
    void *p = realloc(*arr, c * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}
