/* POSIX pax (tar) blocks as written to and read from a volume: the encoder
 * used by tapevol_append and the strict decoder used by tapevol_walk. */
#ifndef STAGEIN_VOLUME_TAR_H
#define STAGEIN_VOLUME_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/checksum.h"
#include "common/error.h"

#define TAR_BLOCK 512
/* A pax extended header larger than this is refused when reading. */
#define TAR_PAX_MAX (64 * 1024)
/* The checksum value is written before the data is hashed, then patched;
 * its length is fixed ("sha256:" + 64 hex). */
#define TAR_CHECKSUM_LEN 71

static inline uint64_t tar_round_up(uint64_t n)
{
    return (n + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
}

/* The pax extended header data of one member: records path, size, mtime,
 * STAGEIN.bucket, STAGEIN.key and STAGEIN.checksum (placeholder of
 * TAR_CHECKSUM_LEN zeros at *checksum_at). Returns its length, or 0 when
 * out of space. */
size_t tar_pax_records(char *out, size_t size, const char *bucket, const char *key,
                       uint64_t data_size, int64_t mtime, size_t *checksum_at);
/* Length tar_pax_records would return, without writing. */
size_t tar_pax_records_len(const char *bucket, const char *key, uint64_t data_size,
                           int64_t mtime);

/* A ustar header block: typeflag '0' (file) or 'x' (pax header). */
void tar_header(unsigned char block[TAR_BLOCK], const char *name, char typeflag,
                uint64_t size, int64_t mtime);

/* Blocks one member occupies: pax header, its data, ustar header, data. */
uint64_t tar_member_bytes(const char *bucket, const char *key, uint64_t data_size,
                          int64_t mtime);

typedef struct {
    char typeflag;
    char name[257];          /* prefix "/" name, from the ustar fields */
    uint64_t size;
    int64_t mtime;
} tar_header_t;

bool tar_block_is_zero(const unsigned char block[TAR_BLOCK]);
/* Checks magic and checksum, decodes the fields. */
int tar_header_parse(const unsigned char block[TAR_BLOCK], tar_header_t *h, si_error_t *err);

/* What the walk uses from a pax extended header. Strings are malloc'd. */
typedef struct {
    char *path;
    char *bucket;
    char *key;
    bool has_size;
    uint64_t size;
    bool has_mtime;
    int64_t mtime;
    char checksum[SI_CHECKSUM_TEXT_MAX];
} tar_pax_t;

int tar_pax_parse(const char *data, size_t len, tar_pax_t *pax, si_error_t *err);
void tar_pax_clear(tar_pax_t *pax);

#endif
