/* The engine's figures for the status page, read from its Prometheus text
 * (drives, mounts, bytes read, robots). */
#include "config.h"
#include "daemon/ui/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/prom.h"

static int on_metric(const si_prom_sample_t *m, void *arg, si_error_t *err)
{
    (void)err;
    engine_figures_t *f = arg;
    if (strcmp(m->name, "stagein_tape_bytes_read_total") == 0)
        f->bytes_read = m->value;
    else if (strcmp(m->name, "stagein_mounts_total") == 0)
        f->mounts = m->value;
    else if (strcmp(m->name, "stagein_recall_failures_total") == 0)
        f->failures = m->value;
    else if (strcmp(m->name, "stagein_drives_failed") == 0)
        f->drives_failed = m->value;
    else if (strcmp(m->name, "stagein_robots") == 0)
        f->robots = m->value;
    else if (strcmp(m->name, "stagein_robot_moves_total") == 0)
        f->robot_moves = m->value;
    else if (strcmp(m->name, "stagein_drive_bytes_read_total") == 0 && f->drive_bytes &&
             si_prom_label(m, "drive"))
        json_object_set_new(f->drive_bytes, si_prom_label(m, "drive"), json_real(m->value));
    else if (strcmp(m->name, "stagein_drive_state") == 0 && f->drives)
        json_array_append_new(f->drives,
                              json_pack("{s:s, s:s, s:s}", "drive", si_prom_label(m, "drive"),
                                        "state", si_prom_label(m, "state"), "volume",
                                        si_prom_label(m, "volume")));
    return 0;
}

void ui_engine_figures(ui_t *ui, engine_figures_t *f, bool with_drives)
{
    memset(f, 0, sizeof(*f));
    f->robots = f->robot_moves = -1;
    f->drives = with_drives ? json_array() : NULL;
    f->drive_bytes = json_object();
    if (!ui->metrics)
        return;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return;
    ui->metrics(out, ui->metrics_arg);
    fclose(out);
    si_error_t err;
    if (si_prom_each(text, on_metric, f, &err) < 0)
        si_log(ui->log, SI_LOG_WARNING, "ui: reading the engine's metrics: %s", err.text);
    free(text);
}

bool ui_drive_busy(const char *state)
{
    return strcmp(state, "empty") != 0 && strcmp(state, "idle") != 0 &&
           strcmp(state, "failed") != 0;
}
