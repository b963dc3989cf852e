/* What the control API commands share (cmd_stage.c, cmd_push.c): the
 * connection to stageind, --endpoint/--json, printing the daemon's answers,
 * and the clock of their wait loops. */
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

double client_cmd_clock(void);           /* monotonic seconds */
void client_cmd_sleep(double seconds);

#endif
