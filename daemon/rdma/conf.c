/* The "rdma" configuration group. */
#include "config.h"

#include <string.h>

#include "daemon/rdma/rdma.h"

const si_conf_key_t rdma_conf_keys[] = {
    {"rdma", SI_CONF_GROUP, 0, 0, NULL},
    {"rdma.enabled", SI_CONF_BOOL, 0, 0, NULL},
    {"rdma.provider", SI_CONF_STRING, 0, 0, "tcp;ofi_rxm|shm|verbs;ofi_rxm|cxi|efa"},
    {"rdma.domain", SI_CONF_STRING, 0, 0, NULL},
    {"rdma.buffer_size", SI_CONF_INT, 4096, 1 << 30, NULL},
    {"rdma.buffer_count", SI_CONF_INT, 1, 65536, NULL},
    {"rdma.op_size", SI_CONF_INT, 4096, 1 << 30, NULL},
    {"rdma.max_transfer", SI_CONF_INT, 1, 1099511627776.0, NULL},
    {"rdma.max_concurrent", SI_CONF_INT, 1, 4096, NULL},
    {"rdma.depth", SI_CONF_INT, 1, 256, NULL},
    {"rdma.zero_copy", SI_CONF_BOOL, 0, 0, NULL},
    {"rdma.idle_seconds", SI_CONF_INT, 1, 86400, NULL},
    {"rdma.timeout_seconds", SI_CONF_INT, 1, 3600, NULL},
    {"rdma.shm_cma", SI_CONF_BOOL, 0, 0, NULL},
    SI_CONF_KEYS_END,
};

void rdma_config_defaults(rdma_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->enabled = false;
    strcpy(cfg->provider, "tcp;ofi_rxm");
    cfg->buffer_size = 4 << 20;
    cfg->buffer_count = 64;
    cfg->op_size = 0; /* the provider's (rdma_server_open) */
    cfg->max_transfer = 64ULL << 30;
    cfg->max_concurrent = 64;
    cfg->depth = 4;
    cfg->zero_copy = true;
    cfg->idle_seconds = 60;
    cfg->timeout_seconds = 30;
}

int rdma_config_load(const si_conf_t *conf, rdma_config_t *cfg, si_error_t *err)
{
    rdma_config_t c;
    const char *provider, *domain;

    rdma_config_defaults(&c);
    c.enabled = si_conf_bool(conf, "rdma.enabled", c.enabled);
    provider = si_conf_string(conf, "rdma.provider", c.provider);
    domain = si_conf_string(conf, "rdma.domain", "");
    if (strlen(domain) >= sizeof c.domain)
        return si_errprintf(err, "%s: rdma.domain: longer than %zu characters",
                            si_conf_source(conf), sizeof c.domain - 1);
    /* one of the schema's choices, or the default: c.provider itself */
    if (provider != c.provider)
        strcpy(c.provider, provider);
    strcpy(c.domain, domain);
    c.buffer_size = (uint64_t)si_conf_int(conf, "rdma.buffer_size", (int64_t)c.buffer_size);
    c.buffer_count = (unsigned)si_conf_int(conf, "rdma.buffer_count", c.buffer_count);
    c.op_size = (uint64_t)si_conf_int(conf, "rdma.op_size", (int64_t)c.op_size);
    c.max_transfer = (uint64_t)si_conf_int(conf, "rdma.max_transfer", (int64_t)c.max_transfer);
    c.max_concurrent = (unsigned)si_conf_int(conf, "rdma.max_concurrent", c.max_concurrent);
    c.depth = (unsigned)si_conf_int(conf, "rdma.depth", c.depth);
    c.zero_copy = si_conf_bool(conf, "rdma.zero_copy", c.zero_copy);
    c.idle_seconds = (unsigned)si_conf_int(conf, "rdma.idle_seconds", c.idle_seconds);
    c.timeout_seconds = (unsigned)si_conf_int(conf, "rdma.timeout_seconds", c.timeout_seconds);
    c.shm_cma = si_conf_bool(conf, "rdma.shm_cma", c.shm_cma);
    if (c.depth > c.buffer_count)
        return si_errprintf(err, "%s: rdma.depth %u exceeds rdma.buffer_count %u",
                            si_conf_source(conf), c.depth, c.buffer_count);
    *cfg = c;
    return 0;
}
