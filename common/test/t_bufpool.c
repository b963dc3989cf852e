/* Kept buffers: the size classes, reuse within a class only, the bound on
 * what is kept, alignment. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/tap.h"

static void test_classes(void)
{
    static const size_t asks[] = {1, 4096, 4097, 8192, 8193, 12289, 65536, 100000, 102400,
                                  1u << 20, (1u << 20) + 1, 4u << 20, 16u << 20};
    bool fits = true;
    unsigned last = 0;
    for (size_t i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
        unsigned idx;
        size_t got = si_bufpool_class(asks[i], &idx);
        size_t slack = asks[i] / 4 > SI_BUFPOOL_ALIGN ? asks[i] / 4 : SI_BUFPOOL_ALIGN;
        if (got < asks[i] || got % SI_BUFPOOL_ALIGN || got - asks[i] >= slack || idx < last ||
            idx >= SI_BUFPOOL_CLASSES) {
            fits = false;
            diag("%zu bytes: class of %zu, index %u", asks[i], got, idx);
        }
        last = idx;
    }
    ok(fits, "classes: at least the size, less than a quarter (or a block) more, whole"
             " blocks, in order");
    unsigned a, b, d;
    si_bufpool_class(100000, &a);
    si_bufpool_class(110000, &b);
    si_bufpool_class(200000, &d);
    ok(a == b && b != d, "100,000 and 110,000 bytes share a class, 200,000 does not");
    bool inverse = true;
    for (size_t size = 1; size < (64u << 20); size = size * 5 / 4 + 1) {
        unsigned idx;
        size_t got = si_bufpool_class(size, &idx);
        if (si_bufpool_class_size(idx) != got) {
            inverse = false;
            diag("%zu bytes: class %u of %zu, its size %zu", size, idx, got,
                 si_bufpool_class_size(idx));
        }
    }
    ok(inverse, "a class's size from its index is the size si_bufpool_class gives");
}

static void test_reuse(void)
{
    si_bufpool_t p;
    si_bufpool_init(&p, 1u << 20);
    void *buf = si_bufpool_get(&p, 10000);
    ok(buf && ((uintptr_t)buf % SI_BUFPOOL_ALIGN) == 0, "a buffer for 10,000 bytes, aligned");
    si_bufpool_put(&p, buf, 10000);
    unsigned cls;
    is_int((long long)si_bufpool_kept(&p), (long long)si_bufpool_class(10000, &cls),
           "kept: its class's size");
    void *other = si_bufpool_get(&p, 20000);
    void *again = si_bufpool_get(&p, 11000);
    ok(again == buf && other != buf,
       "given back, it is taken for 11,000 bytes (its class), not for 20,000");
    is_int((long long)si_bufpool_kept(&p), 0, "nothing kept while both are taken");
    if (again)
        memset(again, 0xa5, 11000); /* all of it is the taker's */
    si_bufpool_put(&p, again, 11000);
    si_bufpool_put(&p, other, 20000);
    is_int((long long)si_bufpool_kept(&p),
           (long long)(si_bufpool_class(11000, &cls) + si_bufpool_class(20000, &cls)),
           "both kept");

    /* beyond max_kept: freed, not kept */
    void *big = si_bufpool_get(&p, 4u << 20);
    ok(big && ((uintptr_t)big % (2u << 20)) == 0, "a 4 MiB buffer, aligned to 2 MiB");
    if (big)
        memset(big, 1, 4u << 20);
    size_t before = si_bufpool_kept(&p);
    si_bufpool_put(&p, big, 4u << 20);
    is_int((long long)si_bufpool_kept(&p), (long long)before,
           "a 4 MiB buffer is not kept by a pool of 1 MiB");
    si_bufpool_put(&p, NULL, 4096);
    ok(1, "putting NULL is fine");
    si_bufpool_destroy(&p);

    si_bufpool_t none;
    si_bufpool_init(&none, 0);
    void *x = si_bufpool_get(&none, 4096), *y;
    si_bufpool_put(&none, x, 4096);
    y = si_bufpool_get(&none, 4096);
    is_int((long long)si_bufpool_kept(&none), 0, "a pool of 0 bytes keeps nothing");
    si_bufpool_put(&none, y, 4096);
    si_bufpool_destroy(&none);
}

/* Classes from 64 KiB to 2 MiB are carved from one huge page: the first get
 * keeps its neighbours (as far as max_kept allows), which the next gets take
 * without a new mapping; each is the taker's alone. */
static void test_carved(void)
{
    unsigned cls;
    size_t size = si_bufpool_class(100000, &cls); /* 112 KiB: 18 in 2 MiB */
    si_bufpool_t p;
    si_bufpool_init(&p, 1u << 20);
    char *first = si_bufpool_get(&p, 100000);
    ok(first && ((uintptr_t)first % (2u << 20)) == 0,
       "the first buffer of 112 KiB starts a huge page");
    is_int((long long)si_bufpool_kept(&p), (long long)((1u << 20) / size * size),
           "its neighbours are kept up to the pool's 1 MiB");
    char *taken[9];
    bool adjacent = true;
    for (int i = 0; i < 9; i++) {
        taken[i] = si_bufpool_get(&p, 100000);
        if (!taken[i] || taken[i] < first || taken[i] >= first + (2u << 20) ||
            (size_t)(taken[i] - first) % size)
            adjacent = false;
    }
    ok(adjacent, "the next nine are its neighbours in the same huge page");
    is_int((long long)si_bufpool_kept(&p), 0, "then nothing is kept");
    memset(first, 1, size);
    for (int i = 0; i < 9; i++)
        if (taken[i])
            memset(taken[i], 2 + i, size);
    bool intact = first[size - 1] == 1;
    for (int i = 0; i < 9; i++)
        intact = intact && taken[i] && taken[i][0] == 2 + i && taken[i][size - 1] == 2 + i;
    ok(intact, "each is its taker's: writing one changes no other");
    for (int i = 0; i < 9; i++)
        si_bufpool_put(&p, taken[i], 100000);
    si_bufpool_put(&p, first, 100000); /* past max_kept: unmapped */
    is_int((long long)si_bufpool_kept(&p), (long long)((1u << 20) / size * size),
           "given back: kept up to 1 MiB, the rest unmapped");
    si_bufpool_destroy(&p);

    si_bufpool_t none;
    si_bufpool_init(&none, 0);
    char *alone = si_bufpool_get(&none, 1u << 20);
    ok(alone && ((uintptr_t)alone % SI_BUFPOOL_ALIGN) == 0,
       "a pool of 0 bytes maps a 1 MiB buffer alone");
    if (alone)
        memset(alone, 3, 1u << 20);
    is_int((long long)si_bufpool_kept(&none), 0, "and keeps none of its huge page");
    si_bufpool_put(&none, alone, 1u << 20);
    si_bufpool_destroy(&none);
}

int main(void)
{
    test_classes();
    test_reuse();
    test_carved();
    return done_testing();
}
