#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/conf.h"
#include "common/tap.h"

static const si_conf_key_t keys[] = {
    {"catalog", SI_CONF_GROUP, 0, 0, NULL},
    {"catalog.path", SI_CONF_STRING, 0, 0, NULL},
    {"catalog.busy_timeout_ms", SI_CONF_INT, 0, 600000, NULL},
    {"tape", SI_CONF_GROUP, 0, 0, NULL},
    {"tape.profile", SI_CONF_STRING, 0, 0, "lto9|lto10"},
    {"tape.t_base", SI_CONF_FLOAT, 0, 1000, NULL},
    {"tape.faults", SI_CONF_LIST, 0, 0, NULL},
    {"tape.faults.[]", SI_CONF_GROUP, 0, 0, NULL},
    {"tape.faults.[].drive", SI_CONF_INT, 0, 1000, NULL},
    {"verbose", SI_CONF_BOOL, 0, 0, NULL},
    {"bytes", SI_CONF_INT, 0, 9.2e18, NULL},
    {"ratio", SI_CONF_FLOAT, 0, 1e30, NULL},
    SI_CONF_KEYS_END,
};
static const si_conf_key_t *const schemas[] = {keys, NULL};

static si_conf_t *load(const char *text, si_error_t *err)
{
    return si_conf_load_string(text, schemas, err);
}

int main(void)
{
    si_error_t err;
    si_conf_t *c;

    c = load("catalog: { path = \"/x.db\"; busy_timeout_ms = 500; };\n"
             "tape: { profile = \"lto10\"; t_base = 3; faults = ( { drive = 2; } ); };\n", &err);
    ok(c != NULL, "valid configuration loads");
    if (c) {
        is_str(si_conf_string(c, "catalog.path", "?"), "/x.db", "string read");
        is_int(si_conf_int(c, "catalog.busy_timeout_ms", 0), 500, "int read");
        is_near(si_conf_float(c, "tape.t_base", 0), 3.0, 1e-9, "int accepted as float");
        is_int(si_conf_int(c, "nope.x", 77), 77, "absent key gives default");
        ok(si_conf_setting(c, "tape.faults") != NULL, "list found");
        si_conf_free(c);
    }

    c = load("catalog: { path = \"/x\"; colour = 1; };\n", &err);
    ok(!c && strstr(err.text, ":1: setting 'catalog.colour' is not a known setting"),
       "unknown key refused with line: %s", err.text);
    c = load("\n\ncatalog: { busy_timeout_ms = -5; };\n", &err);
    ok(!c && strstr(err.text, ":3:") && strstr(err.text, "out of range"),
       "out of range refused with line: %s", err.text);
    c = load("tape: { profile = \"lto8\"; };\n", &err);
    ok(!c && strstr(err.text, "not one of lto9|lto10"), "bad choice refused: %s", err.text);
    c = load("catalog: { path = 5; };\n", &err);
    ok(!c && strstr(err.text, "must be a string"), "wrong type refused: %s", err.text);
    c = load("tape: { faults = ( { drive = 2; disk = 1; } ); };\n", &err);
    ok(!c && strstr(err.text, "tape.faults.[].disk"), "unknown key in list element: %s", err.text);
    c = load("catalog: { path = \"x\" \n", &err);
    ok(!c && strstr(err.text, "(string):"), "syntax error reported: %s", err.text);

    char path[] = "/tmp/t_conf_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs("# comment\nverbose = true;\nbogus = 1;\n", f);
    fclose(f);
    c = si_conf_load(path, true, schemas, &err);
    char want[300];
    snprintf(want, sizeof(want), "%s:3: setting 'bogus'", path);
    ok(!c && strstr(err.text, want), "file:line for unknown key: %s", err.text);
    unlink(path);
    c = si_conf_load(path, true, schemas, &err);
    ok(!c && strstr(err.text, "No such file"), "missing explicit file is an error: %s", err.text);
    c = si_conf_load(path, false, schemas, &err);
    ok(c && strcmp(si_conf_source(c), "(defaults)") == 0, "missing default file means defaults");
    si_conf_free(c);

    /* integers past 32 bits without an L (libconfig 1.5 would truncate them) */
    char *w = si_conf_widen_integers("a = 1099511627776; b = 2147483647; c = -3000000000; "
                                     "d = 5000000000L; e = 0x1ffffffff; f = 1.5e12; "
                                     "g = \"9999999999\"; # 8888888888\nh = 12.34567890123;"
                                     " /* 7777777777 */ x9999999999 = 1;");
    is_str(w, "a = 1099511627776L; b = 2147483647; c = -3000000000L; d = 5000000000L; "
              "e = 0x1ffffffffL; f = 1.5e12; g = \"9999999999\"; # 8888888888\nh = "
              "12.34567890123; /* 7777777777 */ x9999999999 = 1;",
           "big integer literals get an L; strings, comments, floats, names do not");
    free(w);
    c = load("bytes = 1099511627776; ratio = 4294967297;", &err);
    ok(c && si_conf_int(c, "bytes", 0) == 1099511627776LL, "1099511627776 reads as itself");
    ok(c && si_conf_float(c, "ratio", 0) == 4294967297.0, "a large integer as a float reads as itself");
    si_conf_free(c);
    char path2[] = "/tmp/t_conf_XXXXXX";
    fd = mkstemp(path2);
    f = fdopen(fd, "w");
    fputs("# comment\nbytes = 4294967297;\ncatalog: { busy_timeout_ms = 4294967297; };\n", f);
    fclose(f);
    c = si_conf_load(path2, true, schemas, &err);
    snprintf(want, sizeof(want), "%s:3: setting 'catalog.busy_timeout_ms'", path2);
    ok(!c && strstr(err.text, want) && strstr(err.text, "out of range"),
       "4294967297 past a setting's range is refused (not read as 1), file:line: %s", err.text);
    unlink(path2);

    bool explicit_path;
    setenv("STAGEIN_CONF", "/env/stagein.conf", 1);
    is_str(si_conf_default_path(NULL, &explicit_path), "/env/stagein.conf", "STAGEIN_CONF used");
    is_str(si_conf_default_path("/cli.conf", &explicit_path), "/cli.conf", "--config wins");
    unsetenv("STAGEIN_CONF");
    ok(strstr(si_conf_default_path(NULL, &explicit_path), "/stagein/stagein.conf") && !explicit_path,
       "default path under sysconfdir");
    return done_testing();
}
