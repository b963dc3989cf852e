/* stagein queue / drives / ui: the recall queue, the drives (from
 * stageind's metrics) and a login link to the status page. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stagein/api.h"
#include "stagein/client_cmd.h"
#include "stagein/drives.h"

/* The answer of a command's GET, shown its own way; returns the exit status. */
typedef int (*show_answer_fn)(cli_t *cli, const client_cmd_conn_t *co, const client_reply_t *r);

/* A command with no options of its own ([--endpoint] [--json]): one GET of
 * stageind's (get), its answer shown by show; the connection and the reply
 * are set up and freed here, once for every such command. */
static int simple_get(cli_t *cli, int argc, char **argv, const char *usage,
                      int (*get)(client_t *c, client_reply_t *r, si_error_t *err),
                      show_answer_fn show)
{
    client_cmd_conn_t co;
    client_t *c = NULL;
    int rc = client_cmd_simple_args(cli, argc, argv, usage, 0, false, &co, NULL, &c);
    if (rc >= 0)
        return rc;
    si_error_t err;
    client_reply_t r;
    if (get(c, &r, &err) < 0)
        rc = cli_fail(cli, "%s", err.text);
    else
        rc = show(cli, &co, &r);
    client_reply_free(&r);
    client_free(c);
    return rc;
}

static int show_queue(cli_t *cli, const client_cmd_conn_t *co, const client_reply_t *r)
{
    static const si_column_t cols[] = {
        {"position", SI_COL_INT},   {"request", SI_COL_STR}, {"uid", SI_COL_INT},
        {"job", SI_COL_STR},        {"priority", SI_COL_INT}, {"state", SI_COL_STR},
        {"files", SI_COL_INT},      {"files_done", SI_COL_INT}, {"bytes", SI_COL_BYTES},
        {"bytes_done", SI_COL_BYTES},
    };
    if (co->json) {
        client_cmd_print_answer(r);
        return 0;
    }
    if (!json_is_array(json_object_get(r->json, "queue")))
        return cli_fail(cli, "stageind's queue answer has no 'queue' array: %.200s", r->body);
    si_table_t *t = client_cmd_rows_table(json_object_get(r->json, "queue"), cols,
                                          SI_NCOLS(cols), -1);
    return cli_print_table(cli, t, false);
}

int cmd_queue(cli_t *cli, int argc, char **argv)
{
    return simple_get(cli, argc, argv, "queue [--endpoint URL|unix:PATH] [--json]", api_queue,
                      show_queue);
}

static int show_ui_link(cli_t *cli, const client_cmd_conn_t *co, const client_reply_t *r)
{
    if (co->json) {
        client_cmd_print_answer(r);
        return 0;
    }
    const char *url = json_string_value(json_object_get(r->json, "url"));
    if (!url)
        return cli_fail(cli, "stageind's answer has no 'url': %.200s", r->body);
    printf("%s\n", url);
    fprintf(stderr, "stagein: open this link within %.0f s; it works once\n",
            json_number_value(json_object_get(r->json, "expiresIn")));
    return 0;
}

/* `stagein ui`: a one-time link to the web status page, logged in as the
 * caller (browsers cannot do MUNGE; doc/status-page.md). */
int cmd_ui(cli_t *cli, int argc, char **argv)
{
    return simple_get(cli, argc, argv, "ui [--endpoint URL|unix:PATH] [--json]", api_ui_login,
                      show_ui_link);
}

/* The drives from stageind's metrics, as a table (--json: the table's rows). */
static int show_drives(cli_t *cli, const client_cmd_conn_t *co, const client_reply_t *r)
{
    si_error_t err;
    si_table_t *t = drives_table(r->body, &err);
    if (!t)
        return cli_fail(cli, "%s", err.text);
    if (si_table_rows(t) == 0 && !co->json) {
        printf("stageind reports no drives (no metric with a drive label in /metrics)\n");
        si_table_free(t);
        return 0;
    }
    return cli_print_table(cli, t, co->json);
}

int cmd_drives(cli_t *cli, int argc, char **argv)
{
    return simple_get(cli, argc, argv, "drives [--endpoint URL|unix:PATH] [--json]",
                      api_metrics, show_drives);
}
