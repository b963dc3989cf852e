/* The catalog's configuration keys and where the catalog lives. */
#ifndef STAGEIN_CATALOG_CONF_H
#define STAGEIN_CATALOG_CONF_H

#include "catalog/catalog.h"
#include "common/conf.h"

extern const si_conf_key_t catalog_conf_keys[];

/* The catalog: catalog.url (PostgreSQL), else catalog.path (SQLite), else
 * <state_dir>/catalog.db, else LOCALSTATEDIR/lib/stagein/catalog.db;
 * written into buf, which is returned. */
const char *catalog_conf_path(const si_conf_t *conf, char *buf, size_t size);

/* The options catalog_conf_open opens target with (strings owned by conf);
 * 0, or -1 when catalog.path and catalog.url are both set or the URL is
 * not one. */
int catalog_conf_opts(const si_conf_t *conf, const char *target, int flags,
                      catalog_open_opts_t *o, si_error_t *err);

/* Opens target (catalog_conf_path's, or one given instead) with the
 * configuration's catalog.password_file (PostgreSQL only) and catalog.site;
 * refuses catalog.path and catalog.url set together. */
catalog_t *catalog_conf_open(const si_conf_t *conf, const char *target, int flags,
                             si_error_t *err);

/* How many days ended requests and archived pushes are kept
 * (catalog.history_days; 0 keeps them all; catalog/history.h). */
#define CATALOG_HISTORY_DAYS 90.0
double catalog_conf_history_days(const si_conf_t *conf);

#endif
