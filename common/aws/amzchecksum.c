#include "config.h"
#include "common/aws/amzchecksum.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/crc_tables.h"

static uint32_t crc_slice8(const uint32_t t[8][256], uint32_t crc, const unsigned char *p,
                           size_t len)
{
    crc = ~crc;
    while (len >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
              t[4][lo >> 24] ^ t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

uint32_t si_crc32_update(uint32_t crc, const void *data, size_t len)
{
    return crc_slice8(crc32_table, crc, data, len);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* SSE4.2 has a CRC32C instruction: ~10x the table's speed. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc,
                                                                const unsigned char *p,
                                                                size_t len)
{
    uint64_t c = ~crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#endif

uint32_t si_crc32c_update(uint32_t crc, const void *data, size_t len)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("sse4.2"))
        return crc32c_sse42(crc, data, len);
#endif
    return crc_slice8(crc32c_table, crc, data, len);
}

static const struct {
    const char *name;
    const char *header;
    si_amz_checksum_alg_t alg;
} algs[] = {
    {"crc32", "x-amz-checksum-crc32", SI_AMZ_CRC32},
    {"crc32c", "x-amz-checksum-crc32c", SI_AMZ_CRC32C},
    {"sha1", "x-amz-checksum-sha1", SI_AMZ_SHA1},
    {"sha256", "x-amz-checksum-sha256", SI_AMZ_SHA256},
};

int si_amz_checksum_alg_parse(const char *name, si_amz_checksum_alg_t *alg)
{
    if (strncasecmp(name, "x-amz-checksum-", 15) == 0)
        name += 15;
    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++)
        if (strcasecmp(name, algs[i].name) == 0) {
            *alg = algs[i].alg;
            return 0;
        }
    return -1;
}

const char *si_amz_checksum_header(si_amz_checksum_alg_t alg)
{
    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++)
        if (algs[i].alg == alg)
            return algs[i].header;
    return "x-amz-checksum-unknown";
}

struct si_amz_checksum {
    si_amz_checksum_alg_t alg;
    uint32_t crc;
    EVP_MD_CTX *md;
};

si_amz_checksum_t *si_amz_checksum_new(si_amz_checksum_alg_t alg, si_error_t *err)
{
    si_amz_checksum_t *c = calloc(1, sizeof(*c));
    if (!c) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    c->alg = alg;
    if (alg == SI_AMZ_SHA1 || alg == SI_AMZ_SHA256) {
        c->md = EVP_MD_CTX_new();
        if (!c->md ||
            EVP_DigestInit_ex(c->md, alg == SI_AMZ_SHA1 ? EVP_sha1() : EVP_sha256(), NULL) != 1) {
            si_amz_checksum_free(c);
            si_errprintf(err, "cannot initialise %s", alg == SI_AMZ_SHA1 ? "sha1" : "sha256");
            return NULL;
        }
    }
    return c;
}

void si_amz_checksum_update(si_amz_checksum_t *c, const void *data, size_t len)
{
    switch (c->alg) {
    case SI_AMZ_CRC32:
        c->crc = si_crc32_update(c->crc, data, len);
        break;
    case SI_AMZ_CRC32C:
        c->crc = si_crc32c_update(c->crc, data, len);
        break;
    case SI_AMZ_SHA1:
    case SI_AMZ_SHA256:
        EVP_DigestUpdate(c->md, data, len);
        break;
    }
}

void si_amz_checksum_final(si_amz_checksum_t *c, char out[SI_AMZ_CHECKSUM_B64_MAX])
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 4;
    if (c->md) {
        EVP_DigestFinal_ex(c->md, digest, &len);
    } else {
        digest[0] = (unsigned char)(c->crc >> 24);
        digest[1] = (unsigned char)(c->crc >> 16);
        digest[2] = (unsigned char)(c->crc >> 8);
        digest[3] = (unsigned char)c->crc;
    }
    EVP_EncodeBlock((unsigned char *)out, digest, (int)len);
}

void si_amz_checksum_free(si_amz_checksum_t *c)
{
    if (!c)
        return;
    EVP_MD_CTX_free(c->md);
    free(c);
}
