#include "config.h"

#include <string.h>

#include "common/tap.h"
#include "daemon/conf/stageind_conf.h"

static const si_conf_key_t general[] = {
    {"state_dir", SI_CONF_STRING, 0, 0, NULL},
    {"catalog", SI_CONF_GROUP, 0, 0, NULL},
    {"catalog.path", SI_CONF_STRING, 0, 0, NULL},
    SI_CONF_KEYS_END,
};
static const si_conf_key_t *const schemas[] = {general, stageind_conf_keys, NULL};

int main(void)
{
    si_error_t err;
    stageind_settings_t s;
    stageind_overrides_t none = {.port = -1};

    si_conf_t *c = si_conf_load_string("", schemas, &err);
    ok(c && stageind_settings(c, &none, &s, &err) == 0, "no configuration: defaults");
    is_str(s.state_dir, LOCALSTATEDIR "/lib/stagein", "default state directory");
    is_str(s.catalog, LOCALSTATEDIR "/lib/stagein/catalog.db", "catalog in the state directory");
    is_str(s.bind, "127.0.0.1", "loopback by default");
    is_int(s.port, STAGEIND_DEFAULT_PORT, "default port");
    is_str(s.socket, LOCALSTATEDIR "/lib/stagein/stageind.sock", "socket in the state directory");
    is_str(s.lock_file, LOCALSTATEDIR "/lib/stagein/stageind.lock", "lock file");
    is_int(s.log_level, SI_LOG_NOTICE, "notice level");
    ok(!s.shared && s.instance[0], "an instance named after the host, alone on its cache");
    ok(s.peercred && s.pin_lifetime == 86400, "peercred on, one-day pins");
    ok(strcmp(s.sitename, "stagein") == 0 && !s.token_issuers[0] && s.token_skew == 60,
       "sitename stagein, no token issuers, 60 s token skew");
    si_conf_free(c);

    c = si_conf_load_string("state_dir = \"/srv/si\";\n"
                            "stageind: { port = 9000; bind = \"0.0.0.0\"; body_limit = 4096;"
                            " munge_socket = \"/run/m.sock\"; log_level = \"info\";"
                            " pin_lifetime = 60; pin_lifetime_max = 120; };\n",
                            schemas, &err);
    ok(c != NULL, "configuration loads: %s", c ? "" : err.text);
    stageind_overrides_t over = {.state_dir = "/tmp/x", .port = 0, .verbose = 2,
                                 .socket = "/tmp/s.sock"};
    ok(c && stageind_settings(c, &over, &s, &err) == 0, "settings with overrides");
    is_str(s.state_dir, "/tmp/x", "--state-dir wins");
    is_str(s.catalog, "/tmp/x/catalog.db", "catalog follows --state-dir");
    is_int(s.port, 0, "--port 0 wins (free port)");
    is_str(s.bind, "0.0.0.0", "bind from the file");
    is_str(s.socket, "/tmp/s.sock", "--socket wins");
    is_int(s.body_limit, 4096, "body limit from the file");
    is_str(s.munge_socket, "/run/m.sock", "munge socket from the file");
    is_int(s.log_level, SI_LOG_DEBUG, "-v -v above info is debug (capped)");
    is_int(s.pin_lifetime_max, 120, "pin lifetime max");
    si_conf_free(c);

    c = si_conf_load_string("stageind: { pin_lifetime = 600; pin_lifetime_max = 60; };\n",
                            schemas, &err);
    ok(c && stageind_settings(c, &none, &s, &err) == -1 && strstr(err.text, "pin_lifetime_max"),
       "pin lifetime above its maximum refused: %s", err.text);
    si_conf_free(c);
    c = si_conf_load_string("stageind: { port = -1; socket = \"\"; };\n", schemas, &err);
    ok(c && stageind_settings(c, &none, &s, &err) == -1 && strstr(err.text, "neither"),
       "nothing to listen on refused: %s", err.text);
    si_conf_free(c);
    c = si_conf_load_string("stageind: { body_limit = 5; };\n", schemas, &err);
    ok(!c && strstr(err.text, "body_limit"), "tiny body limit refused by the schema: %s", err.text);
    /* instances */
    c = si_conf_load_string("stageind: { instance = \"stage-02\"; lease_time = 6.0; };\n",
                            schemas, &err);
    ok(c && stageind_settings(c, &none, &s, &err) == 0, "instance settings: %s",
       c ? "" : err.text);
    is_str(s.instance, "stage-02", "stageind.instance");
    ok(s.shared, "a named instance shares its cache directory");
    ok(s.lease_time == 6.0 && s.heartbeat_interval == 2.0 && s.volumes_per_drive == 1,
       "lease 6 s, heartbeat a third of it, 1 busy volume per drive");
    si_conf_free(c);
    c = si_conf_load_string("stageind: { instance = \"stage 02\"; };\n", schemas, &err);
    ok(c && stageind_settings(c, &none, &s, &err) == -1 && strstr(err.text, "stageind.instance") &&
           strstr(err.text, "character 6"), "a space in the name refused: %s", err.text);
    si_conf_free(c);
    c = si_conf_load_string("stageind: { lease_time = 4.0; heartbeat_interval = 3.0; };\n",
                            schemas, &err);
    ok(c && stageind_settings(c, &none, &s, &err) == -1 && strstr(err.text, "heartbeat_interval"),
       "a heartbeat slower than half the lease refused: %s", err.text);
    si_conf_free(c);
    c = si_conf_load_string("stageind: { colour = 5; };\n", schemas, &err);
    ok(!c && strstr(err.text, "stageind.colour"), "unknown key refused: %s", err.text);
    return done_testing();
}
