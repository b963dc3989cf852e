/* stageind's settings: the "stageind" group of stagein.conf, overridden by
 * command-line options, with defaults that need no configuration at all. */
#ifndef STAGEIN_CONF_STAGEIND_CONF_H
#define STAGEIN_CONF_STAGEIND_CONF_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/conf.h"
#include "common/error.h"
#include "common/log.h"

extern const si_conf_key_t stageind_conf_keys[];

#define STAGEIND_DEFAULT_PORT 8470
/* stageind.instance's longest name (catalog/instances.h: INSTANCE_NAME_MAX) */
#define STAGEIND_INSTANCE_MAX 64

typedef struct {
    char state_dir[PATH_MAX];
    char catalog[PATH_MAX];      /* catalog.url, else catalog.path, else <state_dir>/catalog.db */
    char bind[64];
    int port;                    /* 0: a free port, -1: no TCP listener */
    char socket[PATH_MAX];       /* "" : no Unix socket */
    mode_t socket_mode;
    size_t body_limit;
    unsigned timeout_s;
    unsigned threads;
    char munge_socket[PATH_MAX]; /* "": libmunge's default */
    bool peercred;
    int64_t pin_lifetime, pin_lifetime_max;
    int64_t max_user_pinned_bytes; /* a user's staged bytes in the cache; -1: the cache's
                                    * capacity; 0: no bound */
    int64_t credentials_lifetime, credentials_lifetime_max; /* S3 session credentials */
    char sitename[65];           /* the Tape REST API's sitename */
    char token_issuers[PATH_MAX];/* "": no bearer tokens */
    char token_map[PATH_MAX];
    char token_audience[256];
    int64_t token_skew;          /* seconds */
    char token_key[PATH_MAX];    /* <state_dir>/token.key: stageind's own signing key */
    char pid_file[PATH_MAX];
    char lock_file[PATH_MAX];
    char log_file[PATH_MAX];     /* "": stderr (or syslog) */
    bool syslog;
    si_log_level_t log_level;
    /* several instances on one catalog (doc/admin-scale-out.md) */
    char instance[65];           /* stageind.instance; default: the short host name */
    bool shared;                 /* stageind.instance set: the cache directory and the
                                  * pushes are shared with the site's other instances */
    char host[256];              /* this host's name, as registered */
    double lease_time;           /* seconds a lease lasts without a heartbeat */
    double heartbeat_interval;   /* seconds between heartbeats */
    int volumes_per_drive;       /* shared: volumes with work queued at most, per drive */
} stageind_settings_t;

/* Command-line values; NULL / -1 / 0 leave the configuration's. */
typedef struct {
    const char *state_dir;
    const char *bind;
    int port;                    /* -1: not given */
    const char *socket;
    const char *log_file;
    bool syslog;
    int verbose;                 /* each -v raises the log level by one */
} stageind_overrides_t;

/* Letters, digits, '.', '_' and '-', 1 to STAGEIND_INSTANCE_MAX; else an
 * error naming the setting. */
int stageind_instance_check(const char *name, si_error_t *err);

int stageind_settings(const si_conf_t *conf, const stageind_overrides_t *o,
                      stageind_settings_t *out, si_error_t *err);

#endif
