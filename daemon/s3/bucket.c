/* Archive buckets: the configured ones (s3.archive_buckets, shared) and those
 * made by CreateBucket (kept in memory with their owners, loaded from the
 * catalog at start), and who may write to which. */
#include "config.h"
#include "daemon/s3/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"

/* The created bucket named bucket; buckets_mu held. */
static s3_created_bucket_t *created_bucket(s3_server_t *s, const char *bucket)
{
    for (size_t i = 0; i < s->ncreated; i++)
        if (strcmp(s->created[i].name, bucket) == 0)
            return &s->created[i];
    return NULL;
}

bool s3_created_bucket_owner(s3_server_t *s, const char *bucket, uid_t *owner)
{
    pthread_mutex_lock(&s->buckets_mu);
    const s3_created_bucket_t *b = created_bucket(s, bucket);
    if (b)
        *owner = b->owner;
    pthread_mutex_unlock(&s->buckets_mu);
    return b != NULL;
}

bool s3_is_archive_bucket(s3_server_t *s, const char *bucket)
{
    if (!s->push)
        return false;
    if (s3_bucket_list_has(&s->conf.archive_buckets, bucket))
        return true;
    uid_t owner;
    return s3_created_bucket_owner(s, bucket, &owner);
}

bool s3_writable_bucket(s3_req_t *r)
{
    uid_t owner;
    if (r->map.archive) {
        /* configured archive buckets are shared (doc/s3.md); a created one
         * takes writes from its owner alone */
        if (r->who.all || r->map.shared ||
            !s3_created_bucket_owner(r->srv, r->bucket, &owner) || owner == r->who.uid)
            return true;
        s3_respond_error(r, "AccessDenied", "bucket '%s' belongs to uid %u: only its owner"
                         " may write to it (caller uid %u)", r->bucket, (unsigned)owner,
                         (unsigned)r->who.uid);
        return false;
    }
    si_error_t err;
    s3_db_t *db = s3_dbpool_get(r->srv->pool);
    int has = s3_db_bucket_has_objects(db, r->bucket, &err);
    s3_dbpool_put(r->srv->pool, db);
    if (has < 0)
        s3_respond_error(r, "InternalError", "%s", err.text);
    else if (has == 0)
        s3_respond_error(r, "NoSuchBucket", "The specified bucket does not exist");
    else
        s3_respond_error(r, "AccessDenied", "bucket '%s' is read-only: only archive buckets"
                         " (s3.archive_buckets, or made by CreateBucket) take writes", r->bucket);
    return false;
}

void s3_add_created_bucket(s3_server_t *s, const char *bucket, uid_t owner)
{
    pthread_mutex_lock(&s->buckets_mu);
    if (si_array_grow((void **)&s->created, &s->created_cap, s->ncreated + 1,
                      sizeof(*s->created)) == 0) {
        s3_created_bucket_t *b = &s->created[s->ncreated++];
        snprintf(b->name, sizeof(b->name), "%s", bucket);
        b->owner = owner;
    }
    pthread_mutex_unlock(&s->buckets_mu);
}

void s3_remove_created_bucket(s3_server_t *s, const char *bucket)
{
    pthread_mutex_lock(&s->buckets_mu);
    s3_created_bucket_t *b = created_bucket(s, bucket);
    if (b)
        *b = s->created[--s->ncreated];
    pthread_mutex_unlock(&s->buckets_mu);
}
