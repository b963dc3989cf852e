/* The pax/ustar decoders of the volume reader (daemon/volume/tar.c): the
 * input's first 512 bytes as a ustar header block, all of it as pax
 * extended header records. */
#include "config.h"

#include "daemon/volume/tar.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char block[TAR_BLOCK] = {0};
    memcpy(block, data, size < TAR_BLOCK ? size : TAR_BLOCK);
    si_error_t err;
    tar_header_t h;

    (void)tar_block_is_zero(block);
    if (tar_header_parse(block, &h, &err) == 0 && strnlen(h.name, sizeof(h.name)) == sizeof(h.name))
        abort(); /* the name is terminated */

    tar_pax_t pax;
    memset(&pax, 0, sizeof(pax));
    if (tar_pax_parse((const char *)data, size, &pax, &err) == 0 &&
        strnlen(pax.checksum, sizeof(pax.checksum)) == sizeof(pax.checksum))
        abort();
    tar_pax_clear(&pax);
    return 0;
}
