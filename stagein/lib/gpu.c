#include "config.h"
#include "stagein/lib/gpu.h"

#include <stdlib.h>
#include <string.h>

#ifdef HAVE_CUDA

#include <dlfcn.h>

#include <cuda.h>

/* The symbol a cuda.h name stands for (cuMemcpyHtoD -> cuMemcpyHtoD_v2). */
#define SYMBOL_TEXT_(x) #x
#define SYMBOL_TEXT(x) SYMBOL_TEXT_(x)
#define DRIVER_CALLS(X)                                                                      \
    X(cuGetErrorString) X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain)                  \
    X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuMemHostAlloc) X(cuMemFreeHost)       \
    X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemAddressReserve) X(cuMemAddressFree)               \
    X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess)               \
    X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)                        \
    X(cuMemGetAllocationGranularity)

struct lib_cuda {
    void *dl;
    CUdevice device;
    CUcontext ctx;
    int ordinal;
#define DECLARE(f) __typeof__(&f) p_##f;
    DRIVER_CALLS(DECLARE)
#undef DECLARE
};

static int cu_fail(const lib_cuda_t *c, CUresult r, const char *what, si_error_t *err)
{
    const char *text = NULL;
    if (!c->p_cuGetErrorString || c->p_cuGetErrorString(r, &text) != CUDA_SUCCESS || !text)
        text = "unknown error";
    return si_errprintf(err, "GPU %d: %s: %s (CUDA error %d)", c->ordinal, what, text, (int)r);
}

#define CU(c, call, what)                                                                    \
    do {                                                                                     \
        CUresult r_ = (c)->p_##call;                                                         \
        if (r_ != CUDA_SUCCESS)                                                              \
            return cu_fail((c), r_, (what), err);                                            \
    } while (0)

bool lib_cuda_built(void)
{
    return true;
}

int lib_cuda_open(int gpu, lib_cuda_t **out, si_error_t *err)
{
    lib_cuda_t *c = calloc(1, sizeof(*c));
    if (!c)
        return si_errprintf(err, "out of memory");
    c->ordinal = gpu;
    c->dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->dl) {
        si_errprintf(err, "GPU %d: no CUDA driver on this machine (%s)", gpu, dlerror());
        goto error;
    }
#define RESOLVE(f)                                                                           \
    if (!(c->p_##f = (__typeof__(&f))dlsym(c->dl, SYMBOL_TEXT(f)))) {                        \
        si_errprintf(err, "GPU %d: the CUDA driver lacks %s", gpu, SYMBOL_TEXT(f));          \
        goto error;                                                                          \
    }
    DRIVER_CALLS(RESOLVE)
#undef RESOLVE
    CUresult r = c->p_cuInit(0);
    if (r == CUDA_SUCCESS)
        r = c->p_cuDeviceGet(&c->device, gpu);
    if (r == CUDA_SUCCESS)
        r = c->p_cuDevicePrimaryCtxRetain(&c->ctx, c->device);
    if (r != CUDA_SUCCESS) {
        cu_fail(c, r, "cannot open the device", err);
        goto error;
    }
    if ((r = c->p_cuCtxSetCurrent(c->ctx)) != CUDA_SUCCESS) {
        cu_fail(c, r, "cannot make its context current", err);
        c->p_cuDevicePrimaryCtxRelease(c->device);
        goto error;
    }
    *out = c;
    return 0;
error:
    if (c->dl)
        dlclose(c->dl);
    free(c);
    return -1;
}

void lib_cuda_close(lib_cuda_t *c)
{
    if (!c)
        return;
    c->p_cuDevicePrimaryCtxRelease(c->device);
    dlclose(c->dl);
    free(c);
}

int lib_cuda_bounce_alloc(lib_cuda_t *c, size_t size, void **out, si_error_t *err)
{
    CU(c, cuCtxSetCurrent(c->ctx), "cannot make its context current");
    CU(c, cuMemHostAlloc(out, size, 0), "cannot allocate pinned host memory");
    return 0;
}

void lib_cuda_bounce_free(lib_cuda_t *c, void *p)
{
    c->p_cuMemFreeHost(p);
}

int lib_cuda_copy_to_device(lib_cuda_t *c, uint64_t dst, const void *src, size_t len,
                            si_error_t *err)
{
    CU(c, cuMemcpyHtoD((CUdeviceptr)dst, src, len), "copy to the device failed");
    return 0;
}

int lib_cuda_copy_to_host(lib_cuda_t *c, void *dst, uint64_t src, size_t len, si_error_t *err)
{
    CU(c, cuCtxSetCurrent(c->ctx), "cannot make its context current");
    CU(c, cuMemcpyDtoH(dst, (CUdeviceptr)src, len), "copy from the device failed");
    return 0;
}

static void block_prop(const lib_cuda_t *c, CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof(*prop));
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = c->device;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

/* Reserves, maps and opens [ptr, ptr+size) of handle to this device. */
static int block_map(lib_cuda_t *c, lib_cuda_block_t *b, si_error_t *err)
{
    CUdeviceptr ptr = 0;
    CU(c, cuMemAddressReserve(&ptr, b->size, 0, 0, 0), "cannot reserve an address range");
    CUresult r = c->p_cuMemMap(ptr, b->size, 0, (CUmemGenericAllocationHandle)b->handle, 0);
    if (r != CUDA_SUCCESS) {
        c->p_cuMemAddressFree(ptr, b->size);
        return cu_fail(c, r, "cannot map the memory", err);
    }
    CUmemAccessDesc access = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = c->device},
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if ((r = c->p_cuMemSetAccess(ptr, b->size, &access, 1)) != CUDA_SUCCESS) {
        c->p_cuMemUnmap(ptr, b->size);
        c->p_cuMemAddressFree(ptr, b->size);
        return cu_fail(c, r, "cannot grant access to the memory", err);
    }
    b->ptr = (uint64_t)ptr;
    return 0;
}

int lib_cuda_block_alloc(lib_cuda_t *c, size_t size, lib_cuda_block_t *out, si_error_t *err)
{
    CUmemAllocationProp prop;
    size_t gran = 0;
    block_prop(c, &prop);
    CU(c, cuCtxSetCurrent(c->ctx), "cannot make its context current");
    CU(c, cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
       "cannot read the allocation granularity");
    lib_cuda_block_t b = {.size = (size + gran - 1) / gran * gran};
    if (b.size == 0)
        b.size = gran;
    CUmemGenericAllocationHandle h;
    CU(c, cuMemCreate(&h, b.size, &prop, 0), "cannot allocate GPU memory");
    b.handle = (uint64_t)h;
    if (block_map(c, &b, err) < 0) {
        c->p_cuMemRelease(h);
        return -1;
    }
    *out = b;
    return 0;
}

int lib_cuda_block_export(lib_cuda_t *c, const lib_cuda_block_t *b, int *fd, si_error_t *err)
{
    int handle_fd = -1;
    CU(c, cuMemExportToShareableHandle(&handle_fd, (CUmemGenericAllocationHandle)b->handle,
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
       "cannot export the memory as a descriptor");
    *fd = handle_fd;
    return 0;
}

int lib_cuda_block_import(lib_cuda_t *c, int fd, size_t size, lib_cuda_block_t *out,
                          si_error_t *err)
{
    CUmemGenericAllocationHandle h;
    CU(c, cuCtxSetCurrent(c->ctx), "cannot make its context current");
    /* the descriptor travels by value in the pointer argument (CUDA's rule
     * for POSIX file descriptors) */
    CU(c, cuMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
       "cannot import the agent's memory");
    lib_cuda_block_t b = {.handle = (uint64_t)h, .size = size};
    if (block_map(c, &b, err) < 0) {
        c->p_cuMemRelease(h);
        return -1;
    }
    *out = b;
    return 0;
}

void lib_cuda_block_free(lib_cuda_t *c, lib_cuda_block_t *b)
{
    if (!b->size)
        return;
    c->p_cuMemUnmap((CUdeviceptr)b->ptr, b->size);
    c->p_cuMemAddressFree((CUdeviceptr)b->ptr, b->size);
    c->p_cuMemRelease((CUmemGenericAllocationHandle)b->handle);
    memset(b, 0, sizeof(*b));
}

#else /* !HAVE_CUDA */

#define NO_CUDA "GPU memory: this libstagein was built without CUDA (configure --with-cuda)"

bool lib_cuda_built(void)
{
    return false;
}

int lib_cuda_open(int gpu, lib_cuda_t **out, si_error_t *err)
{
    (void)gpu;
    (void)out;
    return si_errprintf(err, NO_CUDA);
}

void lib_cuda_close(lib_cuda_t *c)
{
    (void)c;
}

int lib_cuda_bounce_alloc(lib_cuda_t *c, size_t size, void **out, si_error_t *err)
{
    (void)c, (void)size, (void)out;
    return si_errprintf(err, NO_CUDA);
}

void lib_cuda_bounce_free(lib_cuda_t *c, void *p)
{
    (void)c, (void)p;
}

int lib_cuda_copy_to_device(lib_cuda_t *c, uint64_t dst, const void *src, size_t len,
                            si_error_t *err)
{
    (void)c, (void)dst, (void)src, (void)len;
    return si_errprintf(err, NO_CUDA);
}

int lib_cuda_copy_to_host(lib_cuda_t *c, void *dst, uint64_t src, size_t len, si_error_t *err)
{
    (void)c, (void)dst, (void)src, (void)len;
    return si_errprintf(err, NO_CUDA);
}

int lib_cuda_block_alloc(lib_cuda_t *c, size_t size, lib_cuda_block_t *out, si_error_t *err)
{
    (void)c, (void)size, (void)out;
    return si_errprintf(err, NO_CUDA);
}

int lib_cuda_block_export(lib_cuda_t *c, const lib_cuda_block_t *b, int *fd, si_error_t *err)
{
    (void)c, (void)b, (void)fd;
    return si_errprintf(err, NO_CUDA);
}

int lib_cuda_block_import(lib_cuda_t *c, int fd, size_t size, lib_cuda_block_t *out,
                          si_error_t *err)
{
    (void)c, (void)fd, (void)size, (void)out;
    return si_errprintf(err, NO_CUDA);
}

void lib_cuda_block_free(lib_cuda_t *c, lib_cuda_block_t *b)
{
    (void)c, (void)b;
}

#endif
