/* The catalog's configuration keys and where the catalog file lives. */
#ifndef STAGEIN_CATALOG_CONF_H
#define STAGEIN_CATALOG_CONF_H

#include "common/conf.h"

extern const si_conf_key_t catalog_conf_keys[];

/* catalog.path, else <state_dir>/catalog.db, else
 * LOCALSTATEDIR/lib/stagein/catalog.db; written into buf, which is returned. */
const char *catalog_conf_path(const si_conf_t *conf, char *buf, size_t size);

#endif
