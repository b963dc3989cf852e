/* libfabric setup and memory registration (see transport.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/rdma/transport.h"

/* The registration modes this code implements; a provider that needs any
 * other (FI_MR_RAW keys, FI_MR_MMU_NOTIFY, FI_MR_RMA_EVENT) is not offered. */
#define RDMA_MR_MODES \
    (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED | FI_MR_ENDPOINT)

static struct fi_info *pick_domain(struct fi_info *list, const char *domain)
{
    for (struct fi_info *i = list; i; i = i->next) {
        if (!domain || !*domain)
            return i;
        if (i->domain_attr->name && strcmp(i->domain_attr->name, domain) == 0)
            return i;
    }
    return NULL;
}

/* A CQ with a wait fd where the provider has one, so that waiters can
 * sleep in poll() instead of spinning; else one without. */
static int open_cq(rdma_fabric_t *fab)
{
    struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_FD,
                                 .size = 1024};
    int rc;

    fab->wait_fd = -1;
    if (fi_cq_open(fab->domain, &cq_attr, &fab->cq, NULL) == 0) {
        if (fi_control(&fab->cq->fid, FI_GETWAIT, &fab->wait_fd) == 0)
            return 0;
        fab->wait_fd = -1;
        fi_close(&fab->cq->fid);
        fab->cq = NULL;
    }
    cq_attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(fab->domain, &cq_attr, &fab->cq, NULL);
    if (rc != 0)
        fab->cq = NULL;
    return rc;
}

rdma_fabric_t *rdma_fabric_open(const char *provider, const char *domain, bool device_memory,
                                si_error_t *err)
{
    struct fi_info *hints = NULL, *list = NULL, *chosen;
    struct fi_av_attr av_attr;
    rdma_fabric_t *fab;
    int rc;

    fab = calloc(1, sizeof *fab);
    if (!fab) {
        si_errnoprintf(err, ENOMEM, "rdma: out of memory");
        return NULL;
    }
    pthread_mutex_init(&fab->lock, NULL);
    if (!(fab->fi = rdma_fi_get(err)))
        goto error;
    if (!(hints = rdma_fi_allocinfo(fab->fi))) {
        si_errnoprintf(err, ENOMEM, "rdma: out of memory");
        goto error;
    }
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_RMA;
    hints->domain_attr->mr_mode = RDMA_MR_MODES;
#ifdef HAVE_CUDA
    /* Device memory registration (rdma_client_register_cuda), for clients.
     * Not on shm: 1.17's shm turns CMA off for an endpoint with FI_HMEM (it
     * cannot reach device memory); libstagein lands GPU data through a
     * registered host bounce buffer. */
    if (device_memory && strcmp(provider, "shm") != 0) {
        hints->caps |= FI_HMEM;
        hints->domain_attr->mr_mode |= FI_MR_HMEM;
    }
#else
    (void)device_memory;
#endif
    /* Operations carry a struct fi_context2 at the head of their context. */
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->fabric_attr->prov_name = strdup(provider);
    if (domain && *domain)
        hints->domain_attr->name = strdup(domain);
    rc = fab->fi->getinfo(RDMA_FI_VERSION, NULL, NULL, 0, hints, &list);
#ifdef HAVE_CUDA
    if (rc != 0) { /* device memory is optional: host memory only */
        hints->caps &= ~(uint64_t)FI_HMEM;
        hints->domain_attr->mr_mode &= ~FI_MR_HMEM;
        rc = fab->fi->getinfo(RDMA_FI_VERSION, NULL, NULL, 0, hints, &list);
    }
#endif
    if (rc != 0) {
        si_errnoprintf(err, ENODEV, "rdma: provider '%s' is not available: fi_getinfo: %s",
                       provider, fab->fi->strerror(-rc));
        goto error;
    }
    chosen = pick_domain(list, domain);
    if (!chosen) {
        si_errnoprintf(err, ENODEV, "rdma: provider '%s' has no domain '%s'", provider, domain);
        goto error;
    }
    fab->info = fab->fi->dupinfo(chosen);
    fab->mr_mode = (uint64_t)fab->info->domain_attr->mr_mode;
    fab->max_msg_size = fab->info->ep_attr->max_msg_size;
    fab->next_key = 1;
    /* tcp (alone or under ofi_rxm) completes a write when the bytes are
     * handed to the socket (transmit complete): the target has not placed
     * them yet, nor checked the key, so a GET would be reported done while
     * its data is in flight and a wrong key would look like success. shm
     * does the same for the writes it passes inline in its command queue
     * (up to 4 KiB): a one-byte GET was reported done before the client's
     * side had copied the byte. So writes ask for delivery complete, which
     * waits for the target's acknowledgement (the server drops it where the
     * write is done by the time it is posted: shm with CMA, server.c). */
    fab->write_flags = FI_DELIVERY_COMPLETE;

    if ((rc = fab->fi->fabric(fab->info->fabric_attr, &fab->fabric, NULL)) != 0 ||
        (rc = fi_domain(fab->fabric, fab->info, &fab->domain, NULL)) != 0) {
        si_errprintf(err, "rdma: opening %s fabric/domain: %s", provider, fab->fi->strerror(-rc));
        goto error;
    }
    memset(&av_attr, 0, sizeof av_attr);
    av_attr.type = FI_AV_TABLE;
    if ((rc = open_cq(fab)) != 0 ||
        (rc = fi_av_open(fab->domain, &av_attr, &fab->av, NULL)) != 0) {
        si_errprintf(err, "rdma: opening a %s endpoint: %s", provider, fab->fi->strerror(-rc));
        goto error;
    }
    if ((rc = fi_endpoint(fab->domain, fab->info, &fab->ep, NULL)) != 0 ||
        (rc = fi_ep_bind(fab->ep, &fab->cq->fid, FI_TRANSMIT | FI_RECV)) != 0 ||
        (rc = fi_ep_bind(fab->ep, &fab->av->fid, 0)) != 0 ||
        (rc = fi_enable(fab->ep)) != 0) {
        si_errprintf(err, "rdma: opening a %s endpoint: %s", provider, fab->fi->strerror(-rc));
        goto error;
    }
    fab->fi->freeinfo(list);
    fab->fi->freeinfo(hints);
    return fab;
error:
    if (list)
        fab->fi->freeinfo(list);
    if (hints)
        fab->fi->freeinfo(hints);
    rdma_fabric_close(fab);
    return NULL;
}

void rdma_fabric_close(rdma_fabric_t *fab)
{
    if (!fab)
        return;
    if (fab->ep)
        fi_close(&fab->ep->fid);
    if (fab->av)
        fi_close(&fab->av->fid);
    if (fab->cq)
        fi_close(&fab->cq->fid);
    if (fab->domain)
        fi_close(&fab->domain->fid);
    if (fab->fabric)
        fi_close(&fab->fabric->fid);
    if (fab->info)
        fab->fi->freeinfo(fab->info);
    pthread_mutex_destroy(&fab->lock);
    free(fab);
}

const char *rdma_fabric_provider(const rdma_fabric_t *fab)
{
    return fab->info->fabric_attr->prov_name;
}

int rdma_fabric_name(rdma_fabric_t *fab, unsigned char *addr, size_t *len, si_error_t *err)
{
    size_t size = *len;
    int rc = fi_getname(&fab->ep->fid, addr, &size);

    if (rc != 0)
        return si_errprintf(err, "rdma: fi_getname: %s", fab->fi->strerror(-rc));
    *len = size;
    return 0;
}

bool rdma_fabric_can_block(rdma_fabric_t *fab)
{
    struct fid *fids[1] = {&fab->cq->fid};

    return fab->wait_fd >= 0 && fi_trywait(fab->fabric, fids, 1) == FI_SUCCESS;
}

bool rdma_fabric_local_mr(const rdma_fabric_t *fab)
{
    return (fab->mr_mode & FI_MR_LOCAL) != 0;
}

int rdma_fabric_mr_reg(rdma_fabric_t *fab, const void *buf, size_t len, uint64_t access,
                       rdma_mr_t *out, si_error_t *err)
{
    struct fid_mr *mr = NULL;
    uint64_t requested_key = 0;
    int rc;

    /* Without FI_MR_PROV_KEY the application picks keys, unique per domain. */
    if (!(fab->mr_mode & FI_MR_PROV_KEY))
        requested_key = fab->next_key++;
    rc = fi_mr_reg(fab->domain, buf, len, access, 0, requested_key, 0, &mr, NULL);
    if (rc != 0)
        return si_errprintf(err, "rdma: registering %zu bytes: %s", len, fab->fi->strerror(-rc));
    if (fab->mr_mode & FI_MR_ENDPOINT) {
        if ((rc = fi_mr_bind(mr, &fab->ep->fid, 0)) != 0 || (rc = fi_mr_enable(mr)) != 0) {
            fi_close(&mr->fid);
            return si_errprintf(err, "rdma: binding a registration to the endpoint: %s",
                                fab->fi->strerror(-rc));
        }
    }
    out->mr = mr;
    out->desc = fi_mr_desc(mr);
    out->key = fi_mr_key(mr);
    if (out->key == FI_KEY_NOTAVAIL) {
        fi_close(&mr->fid);
        return si_errprintf(err, "rdma: the provider's key does not fit in 64 bits (FI_MR_RAW)");
    }
    out->raddr = (fab->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf : 0;
    fab->mrs_live++;
    return 0;
}

void rdma_fabric_mr_close(rdma_fabric_t *fab, rdma_mr_t *mr)
{
    if (!mr->mr)
        return;
    fi_close(&mr->mr->fid);
    mr->mr = NULL;
    fab->mrs_live--;
}

int rdma_fabric_cq_error(rdma_fabric_t *fab, void **context, si_error_t *err)
{
    struct fi_cq_err_entry entry;
    char text[256];
    const char *detail;

    memset(&entry, 0, sizeof entry);
    if (fi_cq_readerr(fab->cq, &entry, 0) < 0) {
        *context = NULL;
        return si_errprintf(err, "rdma: completion error (unreadable)");
    }
    *context = entry.op_context;
    detail = fi_cq_strerror(fab->cq, entry.prov_errno, entry.err_data, text, sizeof text);
    return si_errnoprintf(err, entry.err, "rdma: transfer failed: %s (%s)",
                          fab->fi->strerror(entry.err), detail ? detail : "no detail");
}
