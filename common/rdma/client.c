/* Client side of the RDMA data path (client.h). */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/rdma/client.h"
#include "common/rdma/transport.h"

#ifdef HAVE_CUDA
#include <rdma/fi_ext.h>
#endif

struct rdma_client {
    rdma_fabric_t *fab;
    unsigned char addr[SI_RDMA_ADDR_MAX];
    size_t addr_len;
};

struct rdma_region {
    rdma_mr_t mr;
    size_t len;
    unsigned access;
};

rdma_client_t *rdma_client_open(const char *provider, const char *domain, si_error_t *err)
{
    rdma_client_t *c = calloc(1, sizeof *c);

    if (!c) {
        si_errnoprintf(err, ENOMEM, "rdma: out of memory");
        return NULL;
    }
    c->fab = rdma_fabric_open(provider, domain, true, err);
    if (!c->fab)
        goto error;
    c->addr_len = sizeof c->addr;
    if (rdma_fabric_name(c->fab, c->addr, &c->addr_len, err) < 0)
        goto error;
    return c;
error:
    rdma_client_close(c);
    return NULL;
}

void rdma_client_close(rdma_client_t *c)
{
    if (!c)
        return;
    rdma_fabric_close(c->fab);
    free(c);
}

static uint64_t remote_access(unsigned access)
{
    return ((access & SI_RDMA_ACCESS_WRITE) ? FI_REMOTE_WRITE : 0) |
           ((access & SI_RDMA_ACCESS_READ) ? FI_REMOTE_READ : 0);
}

rdma_region_t *rdma_client_register(rdma_client_t *c, void *buf, size_t len, unsigned access,
                                    si_error_t *err)
{
    rdma_region_t *r;
    int rc;

    if (len == 0 || !(access & (SI_RDMA_ACCESS_WRITE | SI_RDMA_ACCESS_READ))) {
        si_errnoprintf(err, EINVAL, "rdma: register needs a length and an access");
        return NULL;
    }
    r = calloc(1, sizeof *r);
    if (!r) {
        si_errnoprintf(err, ENOMEM, "rdma: out of memory");
        return NULL;
    }
    pthread_mutex_lock(&c->fab->lock);
    rc = rdma_fabric_mr_reg(c->fab, buf, len, remote_access(access), &r->mr, err);
    pthread_mutex_unlock(&c->fab->lock);
    if (rc < 0) {
        free(r);
        return NULL;
    }
    r->len = len;
    r->access = access;
    return r;
}

#ifdef HAVE_CUDA
rdma_region_t *rdma_client_register_cuda(rdma_client_t *c, void *dev_ptr, size_t len, int device,
                                         unsigned access, si_error_t *err)
{
    struct fi_mr_attr attr;
    struct iovec iov = {.iov_base = dev_ptr, .iov_len = len};
    struct fid_mr *mr = NULL;
    rdma_region_t *r;
    int rc;

    if (!(c->fab->info->caps & FI_HMEM)) {
        si_errnoprintf(err, ENOTSUP, "rdma: provider %s cannot register device memory (FI_HMEM)",
                       rdma_fabric_provider(c->fab));
        return NULL;
    }
    r = calloc(1, sizeof *r);
    if (!r) {
        si_errnoprintf(err, ENOMEM, "rdma: out of memory");
        return NULL;
    }
    memset(&attr, 0, sizeof attr);
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = remote_access(access);
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = device;
    pthread_mutex_lock(&c->fab->lock);
    if (!(c->fab->mr_mode & FI_MR_PROV_KEY))
        attr.requested_key = c->fab->next_key++;
    rc = fi_mr_regattr(c->fab->domain, &attr, 0, &mr);
    if (rc == 0 && (c->fab->mr_mode & FI_MR_ENDPOINT) &&
        ((rc = fi_mr_bind(mr, &c->fab->ep->fid, 0)) != 0 || (rc = fi_mr_enable(mr)) != 0)) {
        fi_close(&mr->fid);
    }
    if (rc == 0)
        c->fab->mrs_live++;
    pthread_mutex_unlock(&c->fab->lock);
    if (rc != 0) {
        free(r);
        si_errprintf(err, "rdma: registering %zu bytes of GPU %d memory: %s", len, device,
                     c->fab->fi->strerror(-rc));
        return NULL;
    }
    r->mr.mr = mr;
    r->mr.desc = fi_mr_desc(mr);
    r->mr.key = fi_mr_key(mr);
    r->mr.raddr = (c->fab->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)dev_ptr : 0;
    r->len = len;
    r->access = access;
    return r;
}
#endif

void rdma_region_close(rdma_client_t *c, rdma_region_t *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&c->fab->lock);
    rdma_fabric_mr_close(c->fab, &r->mr);
    pthread_mutex_unlock(&c->fab->lock);
    free(r);
}

int rdma_client_token(rdma_client_t *c, const rdma_region_t *r, uint64_t offset, uint64_t len,
                      char *out, size_t out_size, si_error_t *err)
{
    si_rdma_token_t t;

    if (len == 0 || offset > r->len || len > r->len - offset)
        return si_errnoprintf(err, ERANGE, "rdma: range outside the %zu-byte region", r->len);
    memset(&t, 0, sizeof t);
    if (strlen(rdma_fabric_provider(c->fab)) >= sizeof t.provider)
        return si_errnoprintf(err, EINVAL, "rdma: provider name too long for a token");
    strcpy(t.provider, rdma_fabric_provider(c->fab));
    memcpy(t.addr, c->addr, c->addr_len);
    t.addr_len = c->addr_len;
    t.key = r->mr.key;
    t.raddr = r->mr.raddr + offset;
    t.len = len;
    t.access = r->access;
    return si_rdma_token_encode(&t, out, out_size, err);
}

int rdma_client_progress(rdma_client_t *c, bool *may_block, si_error_t *err)
{
    struct fi_cq_entry entries[16];
    ssize_t n;
    int rc = 0;

    pthread_mutex_lock(&c->fab->lock);
    n = fi_cq_read(c->fab->cq, entries, 16);
    if (n == -FI_EAVAIL) {
        void *context;
        rc = rdma_fabric_cq_error(c->fab, &context, err);
    }
    if (may_block)
        *may_block = rc == 0 && n == -FI_EAGAIN && rdma_fabric_can_block(c->fab);
    pthread_mutex_unlock(&c->fab->lock);
    return rc;
}

int rdma_client_wait_handle(const rdma_client_t *c)
{
    return c->fab->wait_fd;
}

int rdma_client_wait_fd(rdma_client_t *c, int fd, int timeout_ms, si_error_t *err)
{
    struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN},
                            {.fd = c->fab->wait_fd, .events = POLLIN}};
    long elapsed = 0;
    bool may_block;
    int rc;

    double start = si_mono_now();
    for (;;) {
        if (rdma_client_progress(c, &may_block, err) < 0)
            return -1;
        /* sleep on the provider's fd when it allows it, else poll again at once */
        long wait = may_block ? (timeout_ms < 0 ? 100 : timeout_ms - elapsed) : 0;
        rc = poll(pfd, c->fab->wait_fd >= 0 ? 2 : 1, (int)(wait < 100 ? wait : 100));
        if (rc > 0 && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
            return 1;
        if (rc < 0 && errno != EINTR)
            return si_errprintf(err, "rdma: poll: %s", strerror(errno));
        elapsed = (long)((si_mono_now() - start) * 1000);
        if (timeout_ms >= 0 && elapsed >= timeout_ms)
            return 0;
    }
}

long rdma_client_registrations(const rdma_client_t *c)
{
    return c->fab->mrs_live;
}
