/* Shared context of the stagein command's subcommands. */
#ifndef STAGEIN_CLI_H
#define STAGEIN_CLI_H

#include <stdbool.h>

#include "catalog/catalog.h"
#include "common/conf.h"
#include "common/error.h"
#include "common/table.h"

typedef struct {
    const char *prog;          /* "stagein" */
    const char *config_path;   /* --config, or NULL */
    const char *catalog_path;  /* --catalog, or NULL: from the configuration */
    si_conf_t *conf;           /* loaded on first use */
    char catalog_buf[4096];
} cli_t;

typedef int (*cli_command_fn)(cli_t *cli, int argc, char **argv);

typedef struct {
    const char *name;
    cli_command_fn run;
    const char *summary;
} cli_command_t;

/* The configuration (every component's schema), loaded once. */
si_conf_t *cli_conf(cli_t *cli, si_error_t *err);
/* The catalog file named by --catalog, STAGEIN_CATALOG, catalog.path or
 * the state directory. */
const char *cli_catalog_path(cli_t *cli, si_error_t *err);
catalog_t *cli_open_catalog(cli_t *cli, int flags, si_error_t *err);

/* "stagein: <text>" on stderr; returns the exit status 1. */
int cli_fail(const cli_t *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints t on stdout (a table, or JSON) and frees it; NULL is a table that
 * could not be made (out of memory). Returns the exit status. */
int cli_print_table(const cli_t *cli, si_table_t *t, bool json);
/* Runs the named subcommand of table (NULL-name terminated). */
int cli_dispatch(cli_t *cli, const char *group, const cli_command_t *table, int argc,
                 char **argv);

int cmd_catalog(cli_t *cli, int argc, char **argv);
int cmd_tape(cli_t *cli, int argc, char **argv);
/* The control API client commands (cmd_request.c, cmd_status.c, cmd_bind.c,
 * cmd_queue.c). */
int cmd_request(cli_t *cli, int argc, char **argv);
int cmd_status(cli_t *cli, int argc, char **argv);
int cmd_wait(cli_t *cli, int argc, char **argv);
int cmd_cancel(cli_t *cli, int argc, char **argv);
int cmd_release(cli_t *cli, int argc, char **argv);
int cmd_bind(cli_t *cli, int argc, char **argv);
int cmd_token(cli_t *cli, int argc, char **argv);
int cmd_queue(cli_t *cli, int argc, char **argv);
int cmd_drives(cli_t *cli, int argc, char **argv);
int cmd_ui(cli_t *cli, int argc, char **argv);
int cmd_push(cli_t *cli, int argc, char **argv);
/* libstagein commands (cmd_get.c, cmd_agent.c). */
int cmd_get(cli_t *cli, int argc, char **argv);
int cmd_put(cli_t *cli, int argc, char **argv);
int cmd_agent(cli_t *cli, int argc, char **argv);
struct stagein;
/* Sets h's control endpoint and MUNGE socket as the other client commands
 * resolve them (--endpoint, $STAGEIN_ENDPOINT, the configuration). */
int cli_configure_library(cli_t *cli, struct stagein *h, const char *endpoint);

#endif
