/* libfabric loaded at run time (common/rdma/loader.h): the process does not
 * map it until the first fabric is opened; a missing or wrong library is
 * reported with the package to install and errno ENODEV (the callers'
 * "provider not available": HTTP instead). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/rdma/transport.h"
#include "common/tap.h"

/* Whether this process has a libfabric mapped (/proc/self/maps). */
static bool libfabric_mapped(void)
{
    char line[4096];
    bool found = false;
    FILE *maps = fopen("/proc/self/maps", "r");

    if (!maps)
        return false;
    while (!found && fgets(line, sizeof line, maps))
        found = strstr(line, "/libfabric.so") != NULL;
    fclose(maps);
    return found;
}

int main(void)
{
    si_error_t err;
    rdma_fi_t fi;
    const rdma_fi_t *first, *again;
    rdma_fabric_t *fab;

    plan(16);

    ok(!libfabric_mapped(), "libfabric is not mapped before a fabric is opened");

    errno = 0;
    ok(rdma_fi_load("libstagein-no-such-fabric.so.1", &fi, &err) < 0, "a missing library fails");
    is_int(errno, ENODEV, "... with ENODEV (provider not available)");
    ok(strstr(err.text, "libstagein-no-such-fabric.so.1") != NULL, "... naming the library: %s",
       err.text);
    ok(strstr(err.text, "Debian package " RDMA_FI_PACKAGE) != NULL, "... and the package");

    errno = 0;
    ok(rdma_fi_load("libc.so.6", &fi, &err) < 0, "a library without libfabric's API fails");
    is_int(errno, ENODEV, "... with ENODEV");
    ok(strstr(err.text, "has no fi_getinfo") != NULL, "... naming what it lacks: %s", err.text);

    /* An unknown provider: the library is loaded, fi_getinfo finds nothing. */
    errno = 0;
    fab = rdma_fabric_open("no_such_provider", NULL, false, &err);
    ok(fab == NULL && errno == ENODEV, "an unknown provider fails with ENODEV: %s", err.text);
    ok(libfabric_mapped(), "opening a fabric loaded libfabric");

    first = rdma_fi_get(&err);
    again = rdma_fi_get(&err);
    ok(first != NULL, "rdma_fi_get: %s", first ? "loaded" : err.text);
    ok(first == again, "one table for the process");
    ok(first && !FI_VERSION_LT(first->version(), RDMA_FI_VERSION), "the library is new enough");
    ok(first && strcmp(first->strerror(FI_EAGAIN), "Resource temporarily unavailable") == 0,
       "fi_strerror resolved");

    /* The loaded library works end to end: shm is in every libfabric build. */
    fab = rdma_fabric_open("shm", NULL, false, &err);
    if (!fab) {
        skip(2, "shm provider not available");
    } else {
        unsigned char addr[SI_RDMA_ADDR_MAX];
        size_t len = sizeof addr;
        ok(rdma_fabric_name(fab, addr, &len, &err) == 0 && len > 0, "a shm endpoint opened");
        is_str(rdma_fabric_provider(fab), "shm", "its provider");
        rdma_fabric_close(fab);
    }
    return done_testing();
}
