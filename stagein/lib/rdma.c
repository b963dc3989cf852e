/* The RDMA transport of stagein_read (internal.h, doc/rdma.md): the
 * handle's libfabric client (common/rdma/client.h), registrations of the
 * destination memory, tokens for the ranges the reader threads GET, and
 * the progress the provider needs while the server writes. */
#include "config.h"
#include "stagein/lib/internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rdma/client.h"

/* Without a wait fd (shm) the provider moves only when called, but it
 * needs little from this side: with CMA the server writes straight into
 * this process; with the bounce-buffer path each call drains what is
 * there. Calling it every millisecond instead of spinning keeps the core
 * free for the server's copy (twice the throughput on two CPUs, a quarter
 * of the client CPU time; tests/bench/rdma). */
#define SHM_WAIT_MS 1

struct lib_rdma {
    rdma_client_t *client;
    char provider[SI_RDMA_PROVIDER_MAX + 1];
    /* held by the thread that drives progress; the others need not */
    pthread_mutex_t driver;
};

struct lib_rdma_region {
    rdma_region_t *region;
};

int lib_rdma_open(stagein_t *h, const char *provider, si_error_t *err)
{
    if (h->rdma && strcmp(h->rdma->provider, provider) == 0)
        return 0;
    lib_rdma_close(h);
    if (strlen(provider) > SI_RDMA_PROVIDER_MAX)
        return si_errprintf(err, "rdma provider '%.40s...' is too long", provider);
    struct lib_rdma *r = calloc(1, sizeof(*r));
    if (!r)
        return si_errprintf(err, "out of memory");
    r->client = rdma_client_open(provider, h->rdma_domain, err);
    if (!r->client) {
        free(r);
        return -1;
    }
    snprintf(r->provider, sizeof(r->provider), "%s", provider);
    pthread_mutex_init(&r->driver, NULL);
    h->rdma = r;
    return 0;
}

void lib_rdma_close(stagein_t *h)
{
    if (!h->rdma)
        return;
    rdma_client_close(h->rdma->client);
    pthread_mutex_destroy(&h->rdma->driver);
    free(h->rdma);
    h->rdma = NULL;
}

lib_rdma_region_t *lib_rdma_register(stagein_t *h, void *buf, uint64_t len, bool server_writes,
                                     si_error_t *err)
{
    lib_rdma_region_t *r = calloc(1, sizeof(*r));
    if (!r) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    r->region = rdma_client_register(h->rdma->client, buf, (size_t)len,
                                     server_writes ? SI_RDMA_ACCESS_WRITE : SI_RDMA_ACCESS_READ,
                                     err);
    if (!r->region) {
        free(r);
        return NULL;
    }
    return r;
}

void lib_rdma_unregister(stagein_t *h, lib_rdma_region_t *r)
{
    if (!r)
        return;
    rdma_region_close(h->rdma->client, r->region);
    free(r);
}

int lib_rdma_token(stagein_t *h, const lib_rdma_region_t *r, uint64_t offset, uint64_t len,
                   char *out, size_t size, si_error_t *err)
{
    return rdma_client_token(h->rdma->client, r->region, offset, len, out, size, err);
}

void lib_rdma_progress(stagein_t *h, int *wait_fd, int *wait_ms)
{
    *wait_fd = rdma_client_wait_handle(h->rdma->client);
    *wait_ms = 1; /* another thread drives: look again soon */
    if (pthread_mutex_trylock(&h->rdma->driver) != 0)
        return;
    bool may_block = false;
    si_error_t ignored; /* a failed RMA shows in the server's answer */
    rdma_client_progress(h->rdma->client, &may_block, &ignored);
    pthread_mutex_unlock(&h->rdma->driver);
    /* with a wait fd: sleep on it when allowed, else progress again at
     * once; without one (shm) the provider only moves when called */
    *wait_ms = may_block ? 50 : *wait_fd >= 0 ? 0 : SHM_WAIT_MS;
}

void lib_rdma_note(stagein_t *h, const char *fmt, ...)
{
    if (atomic_exchange(&h->rdma_noted, 1))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->rdma_note, sizeof(h->rdma_note), fmt, ap);
    va_end(ap);
}
