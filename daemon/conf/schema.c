/* Every component's configuration keys: stagein.conf is one file. */
#include "config.h"

#include "daemon/conf/schema.h"

#include "catalog/catalog_conf.h"
#include "daemon/archive/backend.h"
#include "daemon/cache/cache.h"
#include "daemon/jobs/jobs.h"
#include "daemon/push/push.h"
#include "daemon/rdma/rdma.h"
#include "daemon/s3/s3.h"
#include "daemon/ui/ui.h"
#include "daemon/volume/volume.h"
#include "daemon/simlib/engine.h"
#include "daemon/tape/model.h"
#include "daemon/conf/stageind_conf.h"

static const si_conf_key_t general_keys[] = {
    {"state_dir", SI_CONF_STRING, 0, 0, NULL},
    SI_CONF_KEYS_END,
};

/* The stagein client's keys (stagein/client.c reads them). Here rather than
 * in client.c so that stageind, which validates the same file, needs no
 * libcurl. */
static const si_conf_key_t client_conf_keys[] = {
    {"client", SI_CONF_GROUP, 0, 0, NULL},
    {"client.endpoint", SI_CONF_STRING, 0, 0, NULL},
    {"client.endpoints", SI_CONF_LIST, 0, -1, NULL},
    {"client.endpoints.[]", SI_CONF_STRING, 0, 0, NULL},
    {"client.connect_timeout", SI_CONF_INT, 1, 3600, NULL},
    {"client.munge_socket", SI_CONF_STRING, 0, 0, NULL},
    {"client.timeout", SI_CONF_INT, 1, 86400, NULL},
    SI_CONF_KEYS_END,
};

static const si_conf_key_t *const all_schemas[] = {
    general_keys,
    catalog_conf_keys,
    volume_conf_keys,
    stageind_conf_keys,
    jobs_conf_keys,
    client_conf_keys,
    cache_conf_keys,
    push_conf_keys,
    s3_conf_keys,
    library_conf_keys,
    archive_conf_keys,
    archive_s3_conf_keys,
    archive_hsm_conf_keys,
    archive_tape_conf_keys,
    tape_conf_keys,
    rdma_conf_keys,
    ui_conf_keys,
    NULL,
};

const si_conf_key_t *const *stagein_conf_schemas(void)
{
    return all_schemas;
}
