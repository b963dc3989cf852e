/* s3_objcache: an entry matches its bucket, key, credential and generation
 * only, and gives back every field of the object it remembered. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/s3/objcache.h"

static s3_object_t object(int64_t id, const char *headers)
{
    s3_object_t o;
    memset(&o, 0, sizeof(o));
    o.id = id;
    o.size = 65536;
    o.mtime = 1700000000 + id;
    snprintf(o.etag, sizeof(o.etag), "\"%lld\"", (long long)id);
    snprintf(o.storage_class, sizeof(o.storage_class), "GLACIER");
    o.readable = true;
    o.cached = true;
    o.cached_at = (cache_place_t){65536, 4096 * (uint64_t)id, id};
    snprintf(o.asked_class, sizeof(o.asked_class), "STANDARD");
    o.multipart = id % 2;
    o.pushed = true;
    o.writer = 1000;
    snprintf(o.headers, sizeof(o.headers), "%s", headers);
    return o;
}

static bool same(const s3_object_t *a, const s3_object_t *b)
{
    return a->id == b->id && a->size == b->size && a->mtime == b->mtime &&
           strcmp(a->etag, b->etag) == 0 && strcmp(a->storage_class, b->storage_class) == 0 &&
           a->readable == b->readable && a->cached == b->cached &&
           a->cached_at.size == b->cached_at.size && a->cached_at.offset == b->cached_at.offset &&
           a->cached_at.segment == b->cached_at.segment && strcmp(a->asked_class, b->asked_class) == 0 &&
           a->multipart == b->multipart && a->pushed == b->pushed && a->writer == b->writer &&
           strcmp(a->headers, b->headers) == 0;
}

int main(void)
{
    s3_objcache_t *c = s3_objcache_new();
    ok(c != NULL, "made");
    s3_who_t alice = {.uid = 1000, .gid = 1000, .ngroups = 2, .groups = {1000, 50}};
    s3_who_t other_groups = alice;
    other_groups.groups[1] = 51;
    s3_who_t root = {.all = true};
    s3_object_t got, o = object(7, "content-type: text/plain\nx-amz-meta-a: b\n");

    ok(!s3_objcache_get(c, 1, "b", "k", &alice, &got), "empty: a miss");
    s3_objcache_put(c, 1, "b", "k", &alice, &o);
    memset(&got, 0x55, sizeof(got));
    ok(s3_objcache_get(c, 1, "b", "k", &alice, &got) && same(&got, &o),
       "a hit gives back every field, the headers included");
    ok(!s3_objcache_get(c, 2, "b", "k", &alice, &got), "another generation: a miss");
    ok(!s3_objcache_get(c, 1, "b", "k2", &alice, &got), "another key: a miss");
    ok(!s3_objcache_get(c, 1, "bk", "", &alice, &got) && !s3_objcache_get(c, 1, "", "bk", &alice,
                                                                           &got),
       "the bucket/key split counts");
    ok(!s3_objcache_get(c, 1, "b", "k", &other_groups, &got), "other groups: a miss");
    ok(!s3_objcache_get(c, 1, "b", "k", &root, &got), "another credential: a miss");

    s3_object_t bare = object(8, "");
    s3_objcache_put(c, 2, "b", "k", &alice, &bare);
    ok(s3_objcache_get(c, 2, "b", "k", &alice, &got) && same(&got, &bare) &&
           !s3_objcache_get(c, 1, "b", "k", &alice, &got),
       "a newer lookup replaces the entry");

    /* many keys: each found as put, or missed (replaced in its slot), never another's */
    int hits = 0, wrong = 0;
    for (int i = 0; i < 10000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "small/%05d", i);
        s3_object_t e = object(100 + i, "");
        s3_objcache_put(c, 3, "bench", key, &alice, &e);
    }
    for (int i = 0; i < 10000; i++) {
        char key[32];
        snprintf(key, sizeof(key), "small/%05d", i);
        if (s3_objcache_get(c, 3, "bench", key, &alice, &got)) {
            hits++;
            wrong += got.id != 100 + i;
        }
    }
    ok(wrong == 0 && hits > 0, "10000 keys: %d hits, none of another key", hits);
    s3_objcache_free(c);
    return done_testing();
}
