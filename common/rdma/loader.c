/* libfabric loaded at run time (loader.h). */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "common/rdma/loader.h"

/* The exported functions resolved, by name and place in the table. */
static const struct {
    const char *name;
    size_t offset;
} fi_symbols[] = {
    {"fi_getinfo", offsetof(rdma_fi_t, getinfo)},
    {"fi_freeinfo", offsetof(rdma_fi_t, freeinfo)},
    {"fi_dupinfo", offsetof(rdma_fi_t, dupinfo)},
    {"fi_fabric", offsetof(rdma_fi_t, fabric)},
    {"fi_strerror", offsetof(rdma_fi_t, strerror)},
    {"fi_version", offsetof(rdma_fi_t, version)},
};

int rdma_fi_load(const char *soname, rdma_fi_t *out, si_error_t *err)
{
    rdma_fi_t fi;
    void *lib;
    uint32_t version;

    /* RTLD_LOCAL: the fi_* names stay out of the process's global scope,
     * where they could satisfy some other library by accident. */
    lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return si_errnoprintf(err, ENODEV,
                              "rdma: libfabric is not available (%s); install the Debian "
                              "package %s",
                              dlerror(), RDMA_FI_PACKAGE);
    memset(&fi, 0, sizeof fi);
    for (size_t i = 0; i < sizeof fi_symbols / sizeof fi_symbols[0]; i++) {
        void *fn;

        dlerror();
        fn = dlsym(lib, fi_symbols[i].name);
        if (!fn) {
            si_errnoprintf(err, ENODEV,
                           "rdma: %s has no %s: not libfabric, or too old (>= %d.%d needed; "
                           "Debian package %s)",
                           soname, fi_symbols[i].name, FI_MAJOR(RDMA_FI_VERSION),
                           FI_MINOR(RDMA_FI_VERSION), RDMA_FI_PACKAGE);
            dlclose(lib);
            return -1;
        }
        /* POSIX lets a data pointer from dlsym hold a function's address. */
        memcpy((char *)&fi + fi_symbols[i].offset, &fn, sizeof fn);
    }
    version = fi.version();
    if (FI_VERSION_LT(version, RDMA_FI_VERSION)) {
        si_errnoprintf(err, ENODEV,
                       "rdma: %s is libfabric %u.%u; %d.%d or newer is needed (Debian package "
                       "%s)",
                       soname, FI_MAJOR(version), FI_MINOR(version), FI_MAJOR(RDMA_FI_VERSION),
                       FI_MINOR(RDMA_FI_VERSION), RDMA_FI_PACKAGE);
        dlclose(lib);
        return -1;
    }
    *out = fi;
    return 0;
}

/* The process's one libfabric. A process has one copy of the library, so
 * its table is process-wide: written once, under pthread_once, and only
 * read afterwards (the fabric objects hold a pointer to it). The error,
 * too, is kept so that every later open reports the same cause without
 * trying dlopen again. */
static struct {
    pthread_once_t once;
    rdma_fi_t fi;
    int failed_errno; /* 0: loaded */
    si_error_t failure;
} process_fi = {.once = PTHREAD_ONCE_INIT};

static void process_fi_load(void)
{
    if (rdma_fi_load(RDMA_FI_LIBRARY, &process_fi.fi, &process_fi.failure) < 0)
        process_fi.failed_errno = errno ? errno : ENODEV;
}

const rdma_fi_t *rdma_fi_get(si_error_t *err)
{
    pthread_once(&process_fi.once, process_fi_load);
    if (process_fi.failed_errno) {
        if (err)
            *err = process_fi.failure;
        errno = process_fi.failed_errno;
        return NULL;
    }
    return &process_fi.fi;
}
