/* The stagein.conf reader: libconfig syntax, validated against a schema so
 * that unknown keys and bad values are refused with file:line. */
#ifndef SI_CONF_H
#define SI_CONF_H

#include <stdbool.h>
#include <stdint.h>
#include <libconfig.h>

#include "common/error.h"

typedef enum {
    SI_CONF_INT,
    SI_CONF_FLOAT,
    SI_CONF_STRING,
    SI_CONF_BOOL,
    SI_CONF_GROUP,
    SI_CONF_LIST,
} si_conf_type_t;

/* One accepted setting. Elements of a list are named "list.[]", so
 * "library.faults.[].drive" is the drive field of each fault group. */
typedef struct {
    const char *path;
    si_conf_type_t type;
    double min, max;     /* numbers: accepted range (ignored when min > max) */
    const char *choices; /* strings: "a|b|c", or NULL for any */
} si_conf_key_t;

#define SI_CONF_KEYS_END { NULL, 0, 0, 0, NULL }

typedef struct si_conf si_conf_t;

/* The file to read: explicit (--config) wins, then $STAGEIN_CONF, then
 * SYSCONFDIR/stagein/stagein.conf. *explicit_out tells whether a missing
 * file is an error (explicit) or means "all defaults". */
const char *si_conf_default_path(const char *explicit_path, bool *explicit_out);

/* schemas: NULL-terminated array of SI_CONF_KEYS_END-terminated tables,
 * one per component. path NULL or a missing non-explicit file: defaults. */
si_conf_t *si_conf_load(const char *path, bool must_exist,
                        const si_conf_key_t *const *schemas, si_error_t *err);
/* The text with an L after every integer literal past 32 bits (libconfig
 * 1.5 would truncate it); malloc'd, NULL when out of memory. */
/* The file a setting came from, for FILE:LINE messages (with
 * config_setting_source_line): an @include'd file, else the loaded one. */
const char *si_conf_file_of(const si_conf_t *conf, const config_setting_t *s);

char *si_conf_widen_integers(const char *text);

si_conf_t *si_conf_load_string(const char *text,
                               const si_conf_key_t *const *schemas, si_error_t *err);
void si_conf_free(si_conf_t *conf);

/* The file that was read, or "(defaults)". */
const char *si_conf_source(const si_conf_t *conf);

/* Lookups return the default when the setting is absent; the schema
 * validated type and range at load time. */
int64_t si_conf_int(const si_conf_t *conf, const char *path, int64_t def);
double si_conf_float(const si_conf_t *conf, const char *path, double def);
const char *si_conf_string(const si_conf_t *conf, const char *path, const char *def);
bool si_conf_bool(const si_conf_t *conf, const char *path, bool def);
/* A path setting that defaults into the state directory: the setting at
 * `path` when set, else <state_dir>/<name> (state_dir defaulting to
 * LOCALSTATEDIR/lib/stagein); conf may be NULL (no file). Written into buf,
 * which is returned. */
const char *si_conf_state_path(const si_conf_t *conf, const char *path, const char *name,
                               char *buf, size_t size);
/* For lists and groups; NULL when absent. */
const config_setting_t *si_conf_setting(const si_conf_t *conf, const char *path);

/* For checks the schema cannot express (a file that must exist, a pair of
 * settings that must agree): "file:line: setting 'path' <what>" with the
 * setting's own place, or "source: setting 'path' <what>" when it is absent
 * (a default that does not work). Returns -1. */
int si_conf_fail(const si_conf_t *conf, const char *path, si_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
