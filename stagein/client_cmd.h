/* What the control API commands share (cmd_request.c, cmd_status.c,
 * cmd_bind.c, cmd_queue.c, cmd_push.c): the connection to stageind,
 * --endpoint/--json and the common option parsers, printing the daemon's
 * answers, and waiting on a request (wait.c). */
#ifndef STAGEIN_CLIENT_CMD_H
#define STAGEIN_CLIENT_CMD_H

#include <getopt.h>
#include <stdbool.h>

#include "common/table.h"
#include "stagein/cli.h"
#include "stagein/client.h"

/* Exit status when a wait's --timeout ran out (1: failed, 2: usage). */
#define CLIENT_CMD_EXIT_TIMEOUT 3

/* A client for the endpoint from --endpoint (or NULL), $STAGEIN_ENDPOINT,
 * the configuration or stageind's settings. */
client_t *client_cmd_open(cli_t *cli, const char *endpoint, si_error_t *err);

/* --endpoint and --json, parsed with each command's own options. */
typedef struct {
    const char *endpoint;
    bool json;
} client_cmd_conn_t;

#define CLIENT_CMD_OPTIONS                          \
    {"endpoint", required_argument, NULL, 'e'},     \
    {"json", no_argument, NULL, 'j'}

/* true when getopt's opt was one of CLIENT_CMD_OPTIONS ("e:j"). */
bool client_cmd_conn_option(int opt, client_cmd_conn_t *o);

/* --timeout DURATION as seconds; an exit status on error, else 0. */
int client_cmd_timeout(cli_t *cli, const char *text, double *out);

/* A request or push id goes into a URL path: letters, digits, '-'. */
int client_cmd_check_id(const char *id, si_error_t *err);

/* The daemon's answer as it sent it, on stdout. */
void client_cmd_print_answer(const client_reply_t *r);
/* "stagein:   PATH: ERROR" for the FAILED entries of a files array. */
void client_cmd_list_failed(cli_t *cli, const json_t *files);

/* Rows of a JSON array of objects as a table with the given columns (only
 * the rows of uid only_uid when it is >= 0); NULL when out of memory. */
si_table_t *client_cmd_rows_table(const json_t *rows, const si_column_t *cols, size_t ncols,
                                  long only_uid);
/* Parses [--json] [--endpoint E] [--timeout D] and `npos` positional
 * arguments (npos < 0: 0 or 1; a request id is checked), then opens the
 * client (*c, to free). Returns -1 to go on, else an exit status. */
int client_cmd_simple_args(cli_t *cli, int argc, char **argv, const char *usage, int npos,
                           bool timeout_ok, client_cmd_conn_t *co, double *timeout_s,
                           client_t **c);
/* client_cmd_simple_args, and --all where all is not NULL. */
int client_cmd_status_args(cli_t *cli, int argc, char **argv, const char *usage, int npos,
                           bool timeout_ok, client_cmd_conn_t *co, double *timeout_s, bool *all,
                           client_t **c);
/* Polls request id until it ends or timeout_s (0: none) passes, showing
 * progress (wait.c); the exit status: 0 COMPLETED, 1 failed, 3 timeout. */
int client_cmd_wait(cli_t *cli, client_t *c, const char *id, double timeout_s, bool json);

#endif
