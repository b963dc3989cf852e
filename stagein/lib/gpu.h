/* CUDA driver calls of libstagein. The driver (libcuda.so.1) is loaded at
 * run time, so that a build --with-cuda still runs on machines without a
 * GPU and says so ("no CUDA driver") instead of failing to start. Without
 * HAVE_CUDA every call fails with "built without CUDA". */
#ifndef STAGEIN_LIB_GPU_H
#define STAGEIN_LIB_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

typedef struct lib_cuda lib_cuda_t;

bool lib_cuda_built(void);
/* Loads the driver and makes device gpu's primary context current. */
int lib_cuda_open(int gpu, lib_cuda_t **out, si_error_t *err);
void lib_cuda_close(lib_cuda_t *c);

/* Pinned host memory for staging copies (the calling thread is bound to
 * c's context first). */
int lib_cuda_bounce_alloc(lib_cuda_t *c, size_t size, void **out, si_error_t *err);
void lib_cuda_bounce_free(lib_cuda_t *c, void *p);
int lib_cuda_copy_to_device(lib_cuda_t *c, uint64_t dst, const void *src, size_t len,
                            si_error_t *err);
int lib_cuda_copy_to_host(lib_cuda_t *c, void *dst, uint64_t src, size_t len, si_error_t *err);

/* GPU memory through the VMM API, shareable as a POSIX file descriptor. */
typedef struct {
    uint64_t handle;    /* CUmemGenericAllocationHandle */
    uint64_t ptr;       /* mapped device address */
    size_t size;        /* padded to the allocation granularity */
} lib_cuda_block_t;

/* Allocates, maps and grants read-write access to at least size bytes. */
int lib_cuda_block_alloc(lib_cuda_t *c, size_t size, lib_cuda_block_t *out, si_error_t *err);
/* A new descriptor for the block's memory (close it when sent). */
int lib_cuda_block_export(lib_cuda_t *c, const lib_cuda_block_t *b, int *fd, si_error_t *err);
/* Maps an exported block of padded size bytes read-only... CUDA VMM grants
 * read-write or nothing: access is read-write, by convention not written. */
int lib_cuda_block_import(lib_cuda_t *c, int fd, size_t size, lib_cuda_block_t *out,
                          si_error_t *err);
void lib_cuda_block_free(lib_cuda_t *c, lib_cuda_block_t *b);

#endif
