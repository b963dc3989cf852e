#ifndef STAGEIN_CONF_SCHEMA_H
#define STAGEIN_CONF_SCHEMA_H

#include "common/conf.h"

/* NULL-terminated list of every component's configuration schema. */
const si_conf_key_t *const *stagein_conf_schemas(void);

#endif
