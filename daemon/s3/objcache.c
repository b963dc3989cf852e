/* s3_objcache: a direct-mapped table of object lookups. A slot holds one
 * entry (a newer lookup that hashes to it replaces it); entries of an older
 * generation are simply never matched. Stripes of locks, not one: the event
 * threads look up concurrently. */
#include "config.h"
#include "daemon/s3/objcache.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

#define OBJCACHE_SLOTS 4096  /* power of two */
#define OBJCACHE_STRIPES 64  /* slot i is guarded by stripe i % OBJCACHE_STRIPES */
#define OBJECT_FIXED offsetof(s3_object_t, headers)

typedef struct {
    uint64_t generation;
    uint32_t hash;
    s3_who_t who;
    size_t bucket_len, key_len;
    unsigned char *fixed;  /* s3_object_t's fields before headers */
    char text[];           /* bucket, NUL, key, NUL, headers, NUL */
} entry_t;

struct s3_objcache {
    pthread_mutex_t stripe[OBJCACHE_STRIPES];
    entry_t *slot[OBJCACHE_SLOTS];
};

s3_objcache_t *s3_objcache_new(void)
{
    s3_objcache_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    for (int i = 0; i < OBJCACHE_STRIPES; i++)
        pthread_mutex_init(&c->stripe[i], NULL);
    return c;
}

void s3_objcache_free(s3_objcache_t *c)
{
    if (!c)
        return;
    for (int i = 0; i < OBJCACHE_SLOTS; i++)
        free(c->slot[i]);
    for (int i = 0; i < OBJCACHE_STRIPES; i++)
        pthread_mutex_destroy(&c->stripe[i]);
    free(c);
}

static uint32_t hash_of(const char *bucket, size_t bucket_len, const char *key, size_t key_len,
                        const s3_who_t *who)
{
    uint32_t h = si_fnv1a(SI_FNV1A_START, bucket, bucket_len + 1);
    h = si_fnv1a(h, key, key_len);
    return si_fnv1a(h, &who->uid, sizeof(who->uid));
}

static bool same_who(const s3_who_t *a, const s3_who_t *b)
{
    return a->uid == b->uid && a->gid == b->gid && a->all == b->all &&
           a->ngroups == b->ngroups &&
           memcmp(a->groups, b->groups, a->ngroups * sizeof(a->groups[0])) == 0;
}

bool s3_objcache_get(s3_objcache_t *c, uint64_t generation, const char *bucket, const char *key,
                     const s3_who_t *who, s3_object_t *out)
{
    size_t bucket_len = strlen(bucket), key_len = strlen(key);
    uint32_t h = hash_of(bucket, bucket_len, key, key_len, who);
    size_t i = h & (OBJCACHE_SLOTS - 1);
    bool hit = false;
    pthread_mutex_lock(&c->stripe[i % OBJCACHE_STRIPES]);
    const entry_t *e = c->slot[i];
    if (e && e->generation == generation && e->hash == h && e->bucket_len == bucket_len &&
        e->key_len == key_len && memcmp(e->text, bucket, bucket_len) == 0 &&
        memcmp(e->text + bucket_len + 1, key, key_len) == 0 && same_who(&e->who, who)) {
        memcpy(out, e->fixed, OBJECT_FIXED);
        const char *headers = e->text + bucket_len + 1 + key_len + 1;
        memcpy(out->headers, headers, strlen(headers) + 1);
        hit = true;
    }
    pthread_mutex_unlock(&c->stripe[i % OBJCACHE_STRIPES]);
    return hit;
}

void s3_objcache_put(s3_objcache_t *c, uint64_t generation, const char *bucket, const char *key,
                     const s3_who_t *who, const s3_object_t *o)
{
    size_t bucket_len = strlen(bucket), key_len = strlen(key);
    size_t headers_len = strnlen(o->headers, sizeof(o->headers) - 1);
    size_t text_len = bucket_len + 1 + key_len + 1 + headers_len + 1;
    size_t fixed_at = offsetof(entry_t, text) + text_len; /* the fields after the text */
    entry_t *e = malloc(fixed_at + OBJECT_FIXED);
    if (!e)
        return; /* not remembered: the next lookup queries */
    e->generation = generation;
    e->hash = hash_of(bucket, bucket_len, key, key_len, who);
    e->who = *who;
    e->bucket_len = bucket_len;
    e->key_len = key_len;
    memcpy(e->text, bucket, bucket_len + 1);
    memcpy(e->text + bucket_len + 1, key, key_len + 1);
    memcpy(e->text + bucket_len + 1 + key_len + 1, o->headers, headers_len);
    e->text[text_len - 1] = '\0';
    e->fixed = (unsigned char *)e + fixed_at;
    memcpy(e->fixed, o, OBJECT_FIXED);
    size_t i = e->hash & (OBJCACHE_SLOTS - 1);
    pthread_mutex_lock(&c->stripe[i % OBJCACHE_STRIPES]);
    entry_t *old = c->slot[i];
    c->slot[i] = e;
    pthread_mutex_unlock(&c->stripe[i % OBJCACHE_STRIPES]);
    free(old);
}
