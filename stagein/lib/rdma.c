/* The RDMA transport hook of stagein_read. The libfabric client (engineer
 * Y's part, with common/rdma_token) plugs in here: register dst, send the
 * signed range GET with its x-amz-rdma-token, and return 1 on
 * x-amz-rdma-reply 200, 0 on 501 (the caller then reads over HTTP). Until
 * it is wired, RDMA is reported as not available and nothing is read. */
#include "config.h"
#include "stagein/lib/internal.h"

bool lib_rdma_available(void)
{
    return false;
}

int lib_rdma_read(stagein_t *h, const char *bucket, const char *key, uint64_t offset,
                  void *dst, uint64_t len, si_error_t *err)
{
    (void)h, (void)bucket, (void)key, (void)offset, (void)dst, (void)len, (void)err;
    return 0;
}
