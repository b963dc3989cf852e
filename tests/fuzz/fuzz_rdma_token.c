/* The x-amz-rdma-token header (common/rdma_token.c): decode, and every
 * token decode accepts must encode and decode back to itself. */
#include "config.h"

#include "common/rdma_token.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);
    si_rdma_token_t token, again;
    si_error_t err;

    (void)si_rdma_token_is_cuobject(s);
    if (si_rdma_token_decode(s, &token, &err) == 0) {
        char text[SI_RDMA_TOKEN_MAX + 1];
        if (si_rdma_token_encode(&token, text, sizeof(text), &err) < 0)
            abort(); /* encode refuses only what decode refuses */
        if (si_rdma_token_decode(text, &again, &err) < 0)
            abort();
        if (again.key != token.key || again.raddr != token.raddr || again.len != token.len ||
            again.access != token.access || again.addr_len != token.addr_len ||
            memcmp(again.addr, token.addr, token.addr_len) != 0 ||
            strcmp(again.provider, token.provider) != 0)
            abort();
        (void)si_rdma_token_check_range(&token, token.len / 2, token.len - token.len / 2,
                                        SI_RDMA_ACCESS_WRITE, &err);
        (void)si_rdma_token_check_range(&token, UINT64_MAX - 1, 2, SI_RDMA_ACCESS_READ, &err);
    }
    free(s);
    return 0;
}
