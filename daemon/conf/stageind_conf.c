#include "config.h"
#include "daemon/conf/stageind_conf.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

const si_conf_key_t stageind_conf_keys[] = {
    {"stageind", SI_CONF_GROUP, 0, 0, NULL},
    {"stageind.bind", SI_CONF_STRING, 0, 0, NULL},
    {"stageind.port", SI_CONF_INT, -1, 65535, NULL},
    {"stageind.socket", SI_CONF_STRING, 0, 0, NULL},
    {"stageind.socket_mode", SI_CONF_INT, 0, 0777, NULL},
    {"stageind.body_limit", SI_CONF_INT, 1024, 1073741824, NULL},
    {"stageind.timeout", SI_CONF_INT, 1, 86400, NULL},
    {"stageind.threads", SI_CONF_INT, 1, 256, NULL},
    {"stageind.munge_socket", SI_CONF_STRING, 0, 0, NULL},
    {"stageind.peercred", SI_CONF_BOOL, 0, 0, NULL},
    {"stageind.pin_lifetime", SI_CONF_INT, 1, 31536000, NULL},
    {"stageind.pin_lifetime_max", SI_CONF_INT, 1, 31536000, NULL},
    {"stageind.max_user_pinned_bytes", SI_CONF_INT, 0, 9.2e18, NULL},
    {"stageind.credentials_lifetime", SI_CONF_INT, 60, 31536000, NULL},
    {"stageind.credentials_lifetime_max", SI_CONF_INT, 60, 31536000, NULL},
    {"stageind.sitename", SI_CONF_STRING, 0, 0, NULL},
    {"stageind.token_issuers", SI_CONF_STRING, 0, 0, NULL},
    {"stageind.token_map", SI_CONF_STRING, 0, 0, NULL},
    {"stageind.token_audience", SI_CONF_STRING, 0, 0, NULL},
    {"stageind.token_skew", SI_CONF_INT, 0, 3600, NULL},
    {"stageind.pid_file", SI_CONF_STRING, 0, 0, NULL},
    {"stageind.log_file", SI_CONF_STRING, 0, 0, NULL},
    {"stageind.log_level", SI_CONF_STRING, 0, 0, "error|warning|notice|info|debug"},
    {"stageind.syslog", SI_CONF_BOOL, 0, 0, NULL},
    {"stageind.instance", SI_CONF_STRING, 0, 0, NULL},
    {"stageind.lease_time", SI_CONF_FLOAT, 0.5, 3600, NULL},
    {"stageind.heartbeat_interval", SI_CONF_FLOAT, 0.1, 1200, NULL},
    {"stageind.volumes_per_drive", SI_CONF_INT, 1, 64, NULL},
    SI_CONF_KEYS_END,
};

int stageind_instance_check(const char *name, si_error_t *err)
{
    size_t n = strlen(name);
    if (n == 0 || n > STAGEIND_INSTANCE_MAX)
        return si_errprintf(err, "stageind.instance '%s': 1 to %d characters", name,
                            STAGEIND_INSTANCE_MAX);
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return si_errprintf(err, "stageind.instance '%s': character %zu ('%c') is not a "
                                "letter, digit, '.', '_' or '-'", name, i + 1, c);
    }
    return 0;
}

static int set_path(char *dst, size_t size, const char *what, const char *value, si_error_t *err)
{
    if ((size_t)snprintf(dst, size, "%s", value) >= size)
        return si_errprintf(err, "%s '%.80s...' is too long", what, value);
    return 0;
}

int stageind_settings(const si_conf_t *conf, const stageind_overrides_t *o,
                      stageind_settings_t *out, si_error_t *err)
{
    stageind_settings_t s;
    memset(&s, 0, sizeof(s));
    const char *state_dir = o->state_dir ? o->state_dir
                                         : si_conf_string(conf, "state_dir",
                                                          LOCALSTATEDIR "/lib/stagein");
    if (!*state_dir)
        return si_errprintf(err, "the state directory must not be empty");
    if (set_path(s.state_dir, sizeof(s.state_dir), "state directory", state_dir, err) < 0)
        return -1;
    /* catalog.url, else catalog.path, else in the state directory (the
     * password file and the site: catalog_conf_opts, when it is opened) */
    const char *url = si_conf_string(conf, "catalog.url", NULL);
    const char *catalog = url ? url : si_conf_string(conf, "catalog.path", NULL);
    char buf[PATH_MAX + 32];
    if (!catalog) {
        snprintf(buf, sizeof(buf), "%s/catalog.db", s.state_dir);
        catalog = buf;
    }
    if (set_path(s.catalog, sizeof(s.catalog), "catalog path", catalog, err) < 0)
        return -1;

    const char *bind = o->bind ? o->bind : si_conf_string(conf, "stageind.bind", "127.0.0.1");
    if (set_path(s.bind, sizeof(s.bind), "bind address", bind, err) < 0)
        return -1;
    s.port = o->port >= 0 ? o->port
                          : (int)si_conf_int(conf, "stageind.port", STAGEIND_DEFAULT_PORT);
    if (s.port > 65535)
        return si_errprintf(err, "port %d is out of range (0 to 65535, -1 for none)", s.port);

    snprintf(buf, sizeof(buf), "%s/stageind.sock", s.state_dir);
    const char *sock = o->socket ? o->socket : si_conf_string(conf, "stageind.socket", buf);
    if (set_path(s.socket, sizeof(s.socket), "socket path", sock, err) < 0)
        return -1;
    if (s.port < 0 && !s.socket[0])
        return si_errprintf(err, "neither a TCP port nor a Unix socket to listen on");
    s.socket_mode = (mode_t)si_conf_int(conf, "stageind.socket_mode", 0666);
    s.body_limit = (size_t)si_conf_int(conf, "stageind.body_limit", 1048576);
    s.timeout_s = (unsigned)si_conf_int(conf, "stageind.timeout", 60);
    s.threads = (unsigned)si_conf_int(conf, "stageind.threads", 4);
    if (set_path(s.munge_socket, sizeof(s.munge_socket), "munge socket",
                 si_conf_string(conf, "stageind.munge_socket", ""), err) < 0)
        return -1;
    s.peercred = si_conf_bool(conf, "stageind.peercred", true);
    s.pin_lifetime = si_conf_int(conf, "stageind.pin_lifetime", 86400);
    s.pin_lifetime_max = si_conf_int(conf, "stageind.pin_lifetime_max", 7 * 86400);
    s.max_user_pinned_bytes = si_conf_int(conf, "stageind.max_user_pinned_bytes", -1);
    if (s.pin_lifetime > s.pin_lifetime_max)
        return si_errprintf(err, "stageind.pin_lifetime (%lld) is larger than"
                                 " stageind.pin_lifetime_max (%lld)",
                            (long long)s.pin_lifetime, (long long)s.pin_lifetime_max);
    s.credentials_lifetime = si_conf_int(conf, "stageind.credentials_lifetime", 12 * 3600);
    s.credentials_lifetime_max = si_conf_int(conf, "stageind.credentials_lifetime_max",
                                             7 * 86400);
    if (s.credentials_lifetime > s.credentials_lifetime_max)
        return si_errprintf(err, "stageind.credentials_lifetime (%lld) is larger than"
                                 " stageind.credentials_lifetime_max (%lld)",
                            (long long)s.credentials_lifetime,
                            (long long)s.credentials_lifetime_max);

    if (set_path(s.sitename, sizeof(s.sitename), "stageind.sitename",
                 si_conf_string(conf, "stageind.sitename", "stagein"), err) < 0 ||
        set_path(s.token_issuers, sizeof(s.token_issuers), "stageind.token_issuers",
                 si_conf_string(conf, "stageind.token_issuers", ""), err) < 0 ||
        set_path(s.token_map, sizeof(s.token_map), "stageind.token_map",
                 si_conf_string(conf, "stageind.token_map", ""), err) < 0 ||
        set_path(s.token_audience, sizeof(s.token_audience), "stageind.token_audience",
                 si_conf_string(conf, "stageind.token_audience", ""), err) < 0)
        return -1;
    if (!s.sitename[0])
        return si_errprintf(err, "stageind.sitename must not be empty");
    s.token_skew = si_conf_int(conf, "stageind.token_skew", 60);
    snprintf(buf, sizeof(buf), "%s/token.key", s.state_dir);
    if (set_path(s.token_key, sizeof(s.token_key), "token key", buf, err) < 0)
        return -1;

    snprintf(buf, sizeof(buf), "%s/stageind.pid", s.state_dir);
    if (set_path(s.pid_file, sizeof(s.pid_file), "pid file",
                 si_conf_string(conf, "stageind.pid_file", buf), err) < 0)
        return -1;
    snprintf(buf, sizeof(buf), "%s/stageind.lock", s.state_dir);
    if (set_path(s.lock_file, sizeof(s.lock_file), "lock file", buf, err) < 0)
        return -1;
    const char *log_file = o->log_file ? o->log_file : si_conf_string(conf, "stageind.log_file", "");
    if (set_path(s.log_file, sizeof(s.log_file), "log file", log_file, err) < 0)
        return -1;
    /* this instance among those sharing the catalog (catalog/instances.h) */
    char host[256] = "localhost";
    if (gethostname(host, sizeof(host)) < 0 || !host[0])
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    snprintf(s.host, sizeof(s.host), "%s", host);
    host[strcspn(host, ".")] = '\0'; /* the short name: a valid instance name */
    if (set_path(s.instance, sizeof(s.instance), "stageind.instance",
                 si_conf_string(conf, "stageind.instance", host), err) < 0 ||
        stageind_instance_check(s.instance, err) < 0)
        return -1;
    s.shared = si_conf_setting(conf, "stageind.instance") != NULL;
    s.lease_time = si_conf_float(conf, "stageind.lease_time", 30.0);
    s.heartbeat_interval = si_conf_float(conf, "stageind.heartbeat_interval", s.lease_time / 3);
    if (s.heartbeat_interval * 2 > s.lease_time)
        return si_errprintf(err, "stageind.heartbeat_interval (%g s) must be at most half of "
                            "stageind.lease_time (%g s): one late heartbeat must not lose the "
                            "instance's leases", s.heartbeat_interval, s.lease_time);
    s.volumes_per_drive = (int)si_conf_int(conf, "stageind.volumes_per_drive", 1);
    s.syslog = o->syslog || si_conf_bool(conf, "stageind.syslog", false);
    int level = si_log_level_parse(si_conf_string(conf, "stageind.log_level", "notice"));
    level += o->verbose;
    s.log_level = level > SI_LOG_DEBUG ? SI_LOG_DEBUG : (si_log_level_t)level;
    *out = s;
    return 0;
}
