/* stagein.conf (common/conf.c): libconfig syntax validated against every
 * component's schema, then stageind's own settings derived from it. */
#include "config.h"

#include <stdio.h>

#include "common/conf.h"
#include "daemon/conf/stageind_conf.h"
#include "daemon/conf/schema.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strndup(data, size);
    si_error_t err;

    char *wide = si_conf_widen_integers(text);
    free(wide);
    si_conf_t *conf = si_conf_load_string(text, stagein_conf_schemas(), &err);
    if (getenv("FUZZ_VERBOSE")) /* why a seed loads or not */
        fprintf(stderr, "load: %s\n", conf ? "OK" : err.text);
    if (conf) {
        stageind_overrides_t o = {.port = -1};
        stageind_settings_t settings;
        (void)stageind_settings(conf, &o, &settings, &err);
        (void)si_conf_int(conf, "cache.capacity", 0);
        (void)si_conf_string(conf, "state_dir", NULL);
        si_conf_free(conf);
    }
    free(text);
    return 0;
}
