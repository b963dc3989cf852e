#include "config.h"
#include "common/checksum.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

struct si_checksum {
    EVP_MD_CTX *ctx;
    char algorithm[8];
};

si_checksum_t *si_checksum_new(const char *algorithm, si_error_t *err)
{
    const EVP_MD *md;
    if (strcmp(algorithm, "sha256") == 0)
        md = EVP_sha256();
    else if (strcmp(algorithm, "md5") == 0)
        md = EVP_md5();
    else {
        si_errprintf(err, "unknown checksum algorithm '%s' (known: sha256, md5)", algorithm);
        return NULL;
    }
    si_checksum_t *c = calloc(1, sizeof(*c));
    if (!c || !(c->ctx = EVP_MD_CTX_new()) || EVP_DigestInit_ex(c->ctx, md, NULL) != 1) {
        si_checksum_free(c);
        si_errprintf(err, "cannot initialise %s digest", algorithm);
        return NULL;
    }
    snprintf(c->algorithm, sizeof(c->algorithm), "%s", algorithm);
    return c;
}

void si_checksum_update(si_checksum_t *c, const void *data, size_t len)
{
    EVP_DigestUpdate(c->ctx, data, len);
}

void si_checksum_final(si_checksum_t *c, char out[SI_CHECKSUM_TEXT_MAX])
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(c->ctx, digest, &len);
    size_t prefix = (size_t)snprintf(out, SI_CHECKSUM_TEXT_MAX, "%s:", c->algorithm);
    si_hex(digest, len, out + prefix);
}

void si_checksum_free(si_checksum_t *c)
{
    if (!c)
        return;
    EVP_MD_CTX_free(c->ctx);
    free(c);
}

bool si_checksum_text_valid(const char *text)
{
    size_t hexlen;
    const char *hex;
    if (strncmp(text, "sha256:", 7) == 0) {
        hex = text + 7;
        hexlen = 64;
    } else if (strncmp(text, "md5:", 4) == 0) {
        hex = text + 4;
        hexlen = 32;
    } else {
        return false;
    }
    if (strlen(hex) != hexlen)
        return false;
    for (size_t i = 0; i < hexlen; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
            return false;
    return true;
}
