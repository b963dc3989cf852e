/* stagein queue / drives / ui: the recall queue, the drives (from
 * stageind's metrics) and a login link to the status page. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stagein/api.h"
#include "stagein/client_cmd.h"
#include "stagein/drives.h"

int cmd_queue(cli_t *cli, int argc, char **argv)
{
    static const si_column_t cols[] = {
        {"position", SI_COL_INT},   {"request", SI_COL_STR}, {"uid", SI_COL_INT},
        {"job", SI_COL_STR},        {"priority", SI_COL_INT}, {"state", SI_COL_STR},
        {"files", SI_COL_INT},      {"files_done", SI_COL_INT}, {"bytes", SI_COL_BYTES},
        {"bytes_done", SI_COL_BYTES},
    };
    client_cmd_conn_t co;
    client_t *c = NULL;
    int rc = client_cmd_simple_args(cli, argc, argv, "queue [--endpoint URL|unix:PATH] [--json]",
                                    0, false, &co, NULL, &c);
    if (rc >= 0)
        return rc;
    si_error_t err;
    client_reply_t r;
    if (api_queue(c, &r, &err) < 0) {
        rc = cli_fail(cli, "%s", err.text);
    } else if (co.json) {
        client_cmd_print_answer(&r);
        rc = 0;
    } else if (!json_is_array(json_object_get(r.json, "queue"))) {
        rc = cli_fail(cli, "stageind's queue answer has no 'queue' array: %.200s", r.body);
    } else {
        si_table_t *t = client_cmd_rows_table(json_object_get(r.json, "queue"), cols,
                                              SI_NCOLS(cols), -1);
        rc = cli_print_table(cli, t, false);
    }
    client_reply_free(&r);
    client_free(c);
    return rc;
}

/* `stagein ui`: a one-time link to the web status page, logged in as the
 * caller (browsers cannot do MUNGE; doc/status-page.md). */
int cmd_ui(cli_t *cli, int argc, char **argv)
{
    client_cmd_conn_t co;
    client_t *c = NULL;
    int rc = client_cmd_simple_args(cli, argc, argv, "ui [--endpoint URL|unix:PATH] [--json]",
                                    0, false, &co, NULL, &c);
    if (rc >= 0)
        return rc;
    si_error_t err;
    client_reply_t r;
    const char *url = NULL;
    if (api_ui_login(c, &r, &err) < 0) {
        rc = cli_fail(cli, "%s", err.text);
    } else if (co.json) {
        client_cmd_print_answer(&r);
        rc = 0;
    } else if (!(url = json_string_value(json_object_get(r.json, "url")))) {
        rc = cli_fail(cli, "stageind's answer has no 'url': %.200s", r.body);
    } else {
        printf("%s\n", url);
        fprintf(stderr, "stagein: open this link within %.0f s; it works once\n",
                json_number_value(json_object_get(r.json, "expiresIn")));
        rc = 0;
    }
    client_reply_free(&r);
    client_free(c);
    return rc;
}

int cmd_drives(cli_t *cli, int argc, char **argv)
{
    client_cmd_conn_t co;
    client_t *c = NULL;
    int rc = client_cmd_simple_args(cli, argc, argv, "drives [--endpoint URL|unix:PATH] [--json]",
                                    0, false, &co, NULL, &c);
    if (rc >= 0)
        return rc;
    si_error_t err;
    client_reply_t r;
    si_table_t *t = NULL;
    if (api_metrics(c, &r, &err) < 0 || !(t = drives_table(r.body, &err))) {
        rc = cli_fail(cli, "%s", err.text);
    } else if (si_table_rows(t) == 0 && !co.json) {
        printf("stageind reports no drives (no metric with a drive label in /metrics)\n");
        rc = 0;
    } else {
        rc = cli_print_table(cli, t, co.json);
        t = NULL;
    }
    si_table_free(t);
    client_reply_free(&r);
    client_free(c);
    return rc;
}
