/* ListObjects (V1 and V2) pagination, apart from the catalog: prefix,
 * delimiter (common prefixes), an exclusive start key (V1 marker, V2
 * start-after or continuation token) and max-keys, over a cursor that
 * returns the first key at or after a given one in byte order. */
#ifndef STAGEIN_S3_LIST_H
#define STAGEIN_S3_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/text.h"
#include "daemon/s3/proto.h"

#define S3_LIST_MAX_KEYS 1000

typedef struct {
    char key[SI_KEY_MAX + 1];
    uint64_t size;
    int64_t mtime;
    char etag[S3_ETAG_MAX];     /* quoted */
    char storage_class[16];     /* "GLACIER", "STANDARD" */
} s3_list_entry_t;

/* Fills *out with the first key > from (inclusive: >= from) in byte order
 * and returns 1, 0 when there is none, -1 on error (err filled). */
typedef int (*s3_list_next_fn)(void *arg, const char *from, bool inclusive,
                               s3_list_entry_t *out, si_error_t *err);

typedef struct {
    const char *prefix;         /* "" for all */
    const char *delimiter;      /* NULL or "" for none */
    const char *after;          /* exclusive start; NULL or "" for none */
    int max_keys;               /* 0 .. S3_LIST_MAX_KEYS */
} s3_list_query_t;

typedef struct {
    size_t nentries, entries_cap;
    s3_list_entry_t *entries;
    size_t nprefixes, prefixes_cap;
    char **prefixes;            /* common prefixes, ascending */
    bool truncated;
    char *next;                 /* the last key or prefix returned, when truncated */
} s3_list_result_t;

int s3_list_run(const s3_list_query_t *q, s3_list_next_fn next, void *arg,
                s3_list_result_t *out, si_error_t *err);
void s3_list_result_free(s3_list_result_t *r);

/* V2 continuation tokens: the next start key, hex-encoded (opaque to clients,
 * and safe in XML and URLs). Decoding fails on anything else. */
char *s3_list_token_encode(const char *key);
int s3_list_token_decode(const char *token, char *key, size_t size, si_error_t *err);

/* The smallest string greater than every string that starts with s; false
 * when there is none (s empty or all 0xff bytes). */
bool s3_list_successor(const char *s, char *out, size_t size);

#endif
