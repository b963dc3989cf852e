/* The "library" configuration group: shape, clock, profile and faults. */
#include "config.h"

#include <string.h>

#include "daemon/simlib/engine.h"

const si_conf_key_t library_conf_keys[] = {
    {"library", SI_CONF_GROUP, 0, 0, NULL},
    {"library.drives", SI_CONF_INT, 1, 1024, NULL},
    {"library.slots", SI_CONF_INT, 1, 1000000, NULL},
    {"library.robots", SI_CONF_INT, 1, 64, NULL},
    {"library.time_scale", SI_CONF_FLOAT, 0, 1000, NULL},
    {"library.profile", SI_CONF_STRING, 0, 0, "lto9|lto10"},
    {"library.policy", SI_CONF_STRING, 0, 0, "fifo|linear|edf|cta-sltf|cta-mount|sltf|job-aware"},
    {"library.faults", SI_CONF_LIST, 0, -1, NULL},
    {"library.faults.[]", SI_CONF_GROUP, 0, 0, NULL},
    {"library.faults.[].kind", SI_CONF_STRING, 0, 0, "drive|robot|region"},
    {"library.faults.[].drive", SI_CONF_INT, 0, 1023, NULL},
    {"library.faults.[].robot", SI_CONF_INT, 0, 63, NULL},
    {"library.faults.[].at", SI_CONF_FLOAT, 0, 1e12, NULL},
    {"library.faults.[].volume", SI_CONF_STRING, 0, 0, NULL},
    {"library.faults.[].start", SI_CONF_FLOAT, 0, 1e15, NULL},
    {"library.faults.[].length", SI_CONF_FLOAT, 1, 1e15, NULL},
    SI_CONF_KEYS_END,
};

static int fault_error(const si_conf_t *conf, const config_setting_t *s, si_error_t *err,
                       const char *what)
{
    return si_errprintf(err, "%s:%d: library.faults: %s", si_conf_file_of(conf, s),
                        config_setting_source_line(s), what);
}

int simlib_config_from_conf(const si_conf_t *conf, simlib_config_t *cfg, si_error_t *err)
{
    simlib_config_t c;
    simlib_config_default(&c);
    c.drives = (int)si_conf_int(conf, "library.drives", c.drives);
    c.slots = (int)si_conf_int(conf, "library.slots", c.slots);
    c.robots = (int)si_conf_int(conf, "library.robots", c.robots);
    c.time_scale = si_conf_float(conf, "library.time_scale", c.time_scale);
    const char *profile = si_conf_string(conf, "library.profile", "lto9");
    if (tape_profile_from_conf(conf, profile, &c.profile, err) < 0)
        return -1;
    const config_setting_t *faults = si_conf_setting(conf, "library.faults");
    int n = faults ? config_setting_length(faults) : 0;
    for (int i = 0; i < n; i++) {
        const config_setting_t *f = config_setting_get_elem(faults, (unsigned)i);
        const char *kind = NULL;
        simlib_fault_t fault = {0};
        if (!config_setting_lookup_string(f, "kind", &kind)) {
            fault_error(conf, f, err, "a fault needs kind = \"drive\", \"robot\" or \"region\"");
            goto error;
        }
        double at = 0;
        config_setting_lookup_float(f, "at", &at);
        fault.at = at;
        if (strcmp(kind, "drive") == 0 || strcmp(kind, "robot") == 0) {
            int index;
            fault.kind = kind[0] == 'd' ? FAULT_DRIVE : FAULT_ROBOT;
            if (!config_setting_lookup_int(f, kind, &index)) {
                fault_error(conf, f, err, kind[0] == 'd' ? "a drive fault needs drive = N"
                                                   : "a robot fault needs robot = N");
                goto error;
            }
            fault.index = index;
            int limit = fault.kind == FAULT_DRIVE ? c.drives : c.robots;
            if (index >= limit) {
                fault_error(conf, f, err, fault.kind == FAULT_DRIVE ? "drive number past library.drives"
                                                              : "robot number past library.robots");
                goto error;
            }
        } else {
            /* By label: resolved when the engine is created with its volumes. */
            const char *label = NULL;
            double start = -1, length = 0;
            config_setting_lookup_float(f, "start", &start);
            config_setting_lookup_float(f, "length", &length);
            if (!config_setting_lookup_string(f, "volume", &label) || start < 0 || length < 1) {
                fault_error(conf, f, err, "a region fault needs volume = \"LABEL\", start and length");
                goto error;
            }
            if (strlen(label) > SIMLIB_LABEL_MAX) {
                fault_error(conf, f, err, "volume label too long");
                goto error;
            }
            fault.kind = FAULT_REGION;
            fault.volume = -1;
            snprintf(fault.label, sizeof(fault.label), "%s", label);
            fault.start = (uint64_t)start;
            fault.length = (uint64_t)length;
        }
        if (simlib_config_add_fault(&c, &fault, err) < 0)
            goto error;
    }
    *cfg = c;
    return 0;
error:
    simlib_config_free(&c);
    return -1;
}
