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
/* STAGEIN.headers and STAGEIN.storage_class read back are refused at these
 * lengths: what the S3 server's object_meta holds (S3_META_HEADERS_MAX,
 * S3_STORAGE_CLASS_MAX). */
#define TAR_HEADERS_MAX 8192
#define TAR_STORAGE_CLASS_MAX 24

static inline uint64_t tar_round_up(uint64_t n)
{
    return (n + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
}

/* What the pax extended header of one member is written from. */
typedef struct {
    const char *bucket;
    const char *key;
    uint64_t size;
    int64_t mtime;
    const char *headers;        /* S3 "name: value\n" lines; NULL or "": no record */
    const char *storage_class;  /* asked for at upload; NULL or "": no record */
} tar_pax_member_t;

/* The pax extended header data of one member: records path, size, mtime,
 * STAGEIN.bucket, STAGEIN.key, STAGEIN.headers and STAGEIN.storage_class
 * (escaped, when set) and STAGEIN.checksum (placeholder of
 * TAR_CHECKSUM_LEN zeros at *checksum_at). Returns its length, or 0 when
 * out of space. */
size_t tar_pax_records(char *out, size_t size, const tar_pax_member_t *m, size_t *checksum_at);
/* Length tar_pax_records would return, without writing. */
size_t tar_pax_records_len(const tar_pax_member_t *m);

/* value with a backslash as two, newline as "\n" and other control bytes
 * as "\xHH" into out (room for the returned length + 1), or only the length
 * when out is NULL. tar_pax_parse reverses it. */
size_t tar_pax_escape(char *out, const char *value);

/* A ustar header block: typeflag '0' (file) or 'x' (pax header). */
void tar_header(unsigned char block[TAR_BLOCK], const char *name, char typeflag,
                uint64_t size, int64_t mtime);

/* Blocks one member occupies: pax header, its data, ustar header, data. */
uint64_t tar_member_bytes(const tar_pax_member_t *m);

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
    char *headers;           /* STAGEIN.headers unescaped, NULL when absent */
    char *storage_class;     /* STAGEIN.storage_class, NULL when absent */
} tar_pax_t;

int tar_pax_parse(const char *data, size_t len, tar_pax_t *pax, si_error_t *err);
void tar_pax_clear(tar_pax_t *pax);

#endif
