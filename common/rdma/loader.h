/* libfabric, loaded at run time: nothing in the project links it, so that
 * programs that never open a fabric (every CLI command but an RDMA GET or
 * PUT, every program linking libstagein.so) do not pay its load. Debian's
 * libfabric1 pulls libpsm_infinipath, whose constructor pins the process
 * to one CPU and sleeps for about a quarter of a second (BENCHMARKS.md,
 * "CLI start-up"). The headers are still used at build time: the inline
 * wrappers (fi_domain, fi_write, fi_cq_read, ...) call through the
 * provider's ops tables and need no symbol; the few exported functions the
 * code calls come from this table. Internal to common/rdma/ and
 * daemon/rdma/. */
#ifndef SI_RDMA_LOADER_H
#define SI_RDMA_LOADER_H

#include <rdma/fabric.h>

#include "common/error.h"

/* The library dlopen()ed, and the Debian package that installs it. */
#define RDMA_FI_LIBRARY "libfabric.so.1"
#define RDMA_FI_PACKAGE "libfabric1"

/* The API version the code is written against (fi_getinfo's version). */
#define RDMA_FI_VERSION FI_VERSION(1, 11)

/* libfabric's exported functions that the code calls, typed as the header
 * declares them. */
typedef struct {
    __typeof__(fi_getinfo) *getinfo;
    __typeof__(fi_freeinfo) *freeinfo;
    __typeof__(fi_dupinfo) *dupinfo;
    __typeof__(fi_fabric) *fabric;
    __typeof__(fi_strerror) *strerror;
    __typeof__(fi_version) *version;
} rdma_fi_t;

/* libfabric of this process: loaded by the first call, the same table (or
 * the same error) afterwards. Fails with errno ENODEV, and text naming the
 * package to install, when the library is missing or too old: callers
 * treat that as an unavailable provider (HTTP instead). Thread-safe. */
const rdma_fi_t *rdma_fi_get(si_error_t *err);

/* Loads the library named soname into *out (what rdma_fi_get does once,
 * with RDMA_FI_LIBRARY; tests name others). The library stays loaded: a
 * fabric's providers keep threads and handlers past their last close. */
int rdma_fi_load(const char *soname, rdma_fi_t *out, si_error_t *err);

/* fi_allocinfo() without its inline call to fi_dupinfo. */
static inline struct fi_info *rdma_fi_allocinfo(const rdma_fi_t *fi)
{
    return fi->dupinfo(NULL);
}

#endif
