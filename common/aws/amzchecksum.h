/* The x-amz-checksum-* algorithms S3 clients send as headers or aws-chunked
 * trailers: CRC32, CRC32C, SHA1, SHA256, each written as base64 of the
 * big-endian digest. */
#ifndef SI_AMZCHECKSUM_H
#define SI_AMZCHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SI_AMZ_CHECKSUM_B64_MAX 48 /* base64 of a sha256 (44) + NUL, with room */

typedef enum {
    SI_AMZ_CRC32,
    SI_AMZ_CRC32C,
    SI_AMZ_SHA1,
    SI_AMZ_SHA256,
} si_amz_checksum_alg_t;

/* "crc32", "CRC32" or the header name "x-amz-checksum-crc32" (any case).
 * -1 for anything else, including crc64nvme, which is not implemented. */
int si_amz_checksum_alg_parse(const char *name, si_amz_checksum_alg_t *alg);
/* "x-amz-checksum-crc32" */
const char *si_amz_checksum_header(si_amz_checksum_alg_t alg);

typedef struct si_amz_checksum si_amz_checksum_t;

si_amz_checksum_t *si_amz_checksum_new(si_amz_checksum_alg_t alg, si_error_t *err);
void si_amz_checksum_update(si_amz_checksum_t *c, const void *data, size_t len);
/* Base64 of the digest; the context may then only be freed. */
void si_amz_checksum_final(si_amz_checksum_t *c, char out[SI_AMZ_CHECKSUM_B64_MAX]);
void si_amz_checksum_free(si_amz_checksum_t *c);

/* Running CRCs: start from 0, feed pieces, the result is the CRC of all. */
uint32_t si_crc32_update(uint32_t crc, const void *data, size_t len);
uint32_t si_crc32c_update(uint32_t crc, const void *data, size_t len);

#endif
