/* Growth of a heap array: the one implementation for the whole project. */
#ifndef SI_ARRAY_H
#define SI_ARRAY_H

#include <stddef.h>

/* Makes *arr hold at least `need` elements of `elem` bytes, doubling from 64;
 * *cap is updated. Returns 0, or -1 (ENOMEM) leaving *arr and *cap as they
 * were. */
int si_array_grow(void **arr, size_t *cap, size_t need, size_t elem);

#endif
