/* The S3 server's object lookups, remembered with the catalog generation
 * they were read at (catalog/db.h db_generation): a GET or HEAD of an object
 * asked before is answered without a catalog read transaction while no
 * commit of any process moved the generation. */
#ifndef STAGEIN_DAEMON_S3_OBJCACHE_H
#define STAGEIN_DAEMON_S3_OBJCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/s3/db.h"

typedef struct s3_objcache s3_objcache_t;

s3_objcache_t *s3_objcache_new(void);
void s3_objcache_free(s3_objcache_t *c);
/* True and *out when (bucket, key, who) was looked up at generation. */
bool s3_objcache_get(s3_objcache_t *c, uint64_t generation, const char *bucket, const char *key,
                     const s3_who_t *who, s3_object_t *out);
/* Remembers o, found for (bucket, key, who) by a query that began after
 * generation was read. Thread-safe, as is get. */
void s3_objcache_put(s3_objcache_t *c, uint64_t generation, const char *bucket, const char *key,
                     const s3_who_t *who, const s3_object_t *o);

#endif
