/* Object checksums, written "algorithm:hex" everywhere they are stored. */
#ifndef SI_CHECKSUM_H
#define SI_CHECKSUM_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

#define SI_CHECKSUM_TEXT_MAX 80 /* "sha256:" + 64 hex + NUL, with room */

typedef struct si_checksum si_checksum_t;

/* algorithm: "sha256" or "md5". */
si_checksum_t *si_checksum_new(const char *algorithm, si_error_t *err);
void si_checksum_update(si_checksum_t *c, const void *data, size_t len);
/* Writes "algorithm:hex" into out; the context may then be freed. */
void si_checksum_final(si_checksum_t *c, char out[SI_CHECKSUM_TEXT_MAX]);
void si_checksum_free(si_checksum_t *c);

/* The same, computed by a thread of its own beside the caller's other work
 * on the bytes (a PUT body is also checked and written on the caller's
 * thread): update copies the bytes into one of a few buffers the thread
 * hashes in order. final waits for it; free discards. */
typedef struct si_checksum_async si_checksum_async_t;

si_checksum_async_t *si_checksum_async_new(const char *algorithm, si_error_t *err);
void si_checksum_async_update(si_checksum_async_t *a, const void *data, size_t len);
void si_checksum_async_final(si_checksum_async_t *a, char out[SI_CHECKSUM_TEXT_MAX]);
void si_checksum_async_free(si_checksum_async_t *a);

/* "sha256:<64 hex>" or "md5:<32 hex>", lower-case. */
bool si_checksum_text_valid(const char *text);

#endif
