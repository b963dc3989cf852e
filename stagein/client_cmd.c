#include "config.h"
#include "stagein/client_cmd.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "stagein/stage_args.h"

/* Failed files listed one per line; the rest are counted. */
#define FAILED_FILES_SHOWN 20

client_t *client_cmd_open(cli_t *cli, const char *endpoint, si_error_t *err)
{
    si_conf_t *conf = cli_conf(cli, err);
    if (!conf)
        return NULL;
    client_address_t addr;
    if (client_resolve_endpoint(endpoint, conf, &addr, err) < 0)
        return NULL;
    client_opts_t o = {.endpoint = addr.text, .source = addr.source};
    client_conf_opts(conf, &o);
    return client_new(&o, err);
}

bool client_cmd_conn_option(int opt, client_cmd_conn_t *o)
{
    if (opt == 'e')
        o->endpoint = optarg;
    else if (opt == 'j')
        o->json = true;
    else
        return false;
    return true;
}

int client_cmd_timeout(cli_t *cli, const char *text, double *out)
{
    int64_t s;
    si_error_t err;
    if (stage_parse_duration(text, &s, &err) < 0) {
        cli_fail(cli, "--timeout: %s", err.text);
        return 2;
    }
    *out = (double)s;
    return 0;
}

int client_cmd_check_id(const char *id, si_error_t *err)
{
    size_t len = strlen(id);
    if (len == 0 || len > 64 ||
        strspn(id, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-") != len)
        return si_errprintf(err, "bad id '%.80s': letters, digits and '-' only", id);
    return 0;
}

void client_cmd_print_answer(const client_reply_t *r)
{
    fwrite(r->body, 1, r->len, stdout);
    if (r->len == 0 || r->body[r->len - 1] != '\n')
        putchar('\n');
}

void client_cmd_list_failed(cli_t *cli, const json_t *files)
{
    size_t i, failed = 0;
    const json_t *f;
    json_array_foreach(files, i, f) {
        const char *state = json_string_value(json_object_get(f, "state"));
        if (!state || strcmp(state, "FAILED") != 0)
            continue;
        if (failed++ < FAILED_FILES_SHOWN) {
            const char *path = json_string_value(json_object_get(f, "path"));
            const char *error = json_string_value(json_object_get(f, "error"));
            cli_fail(cli, "  %s: %s", path ? path : "?", error ? error : "failed");
        }
    }
    if (failed > FAILED_FILES_SHOWN)
        cli_fail(cli, "  ... and %zu more failed files", failed - FAILED_FILES_SHOWN);
}

/* Rows of a JSON array of objects as a table with the given columns. */
si_table_t *client_cmd_rows_table(const json_t *rows, const si_column_t *cols, size_t ncols,
                                  long only_uid)
{
    si_table_t *t = si_table_new(cols, ncols);
    size_t i;
    const json_t *row;
    json_array_foreach(rows, i, row) {
        if (!t)
            break;
        if (only_uid >= 0 && json_integer_value(json_object_get(row, "uid")) != only_uid)
            continue;
        int rc = si_table_row(t);
        for (size_t c = 0; c < ncols; c++) {
            const json_t *v = json_object_get(row, cols[c].name);
            if (json_is_string(v))
                rc |= si_table_str(t, json_string_value(v));
            else if (json_is_integer(v))
                rc |= si_table_int(t, (int64_t)json_integer_value(v));
            else if (json_is_real(v))
                rc |= si_table_real(t, json_real_value(v));
            else
                rc |= si_table_null(t);
        }
        if (rc != 0) {
            si_table_free(t);
            t = NULL;
        }
    }
    return t;
}

/* Parses [--json] [--endpoint E] [--timeout D] and `npos` positional
 * arguments (npos < 0: 0 or 1), then opens the client (*c, to free).
 * Returns -1 to go on, else an exit status. */
int client_cmd_simple_args(cli_t *cli, int argc, char **argv, const char *usage, int npos,
                           bool timeout_ok, client_cmd_conn_t *co, double *timeout_s,
                           client_t **c)
{
    return client_cmd_status_args(cli, argc, argv, usage, npos, timeout_ok, co, timeout_s, NULL,
                                  c);
}

/* client_cmd_simple_args, and --all where all is not NULL. */
int client_cmd_status_args(cli_t *cli, int argc, char **argv, const char *usage, int npos,
                           bool timeout_ok, client_cmd_conn_t *co, double *timeout_s, bool *all,
                           client_t **c)
{
    static const struct option options[] = {
        {"all", no_argument, NULL, 'a'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        CLIENT_CMD_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    int opt;
    memset(co, 0, sizeof(*co));
    optind = 0; /* GNU getopt: 0 re-initialises its state */
    while ((opt = getopt_long(argc, argv, "at:he:j", options, NULL)) != -1) {
        if (client_cmd_conn_option(opt, co))
            continue;
        if (opt == 'a' && all) {
            *all = true;
        } else if (opt == 't' && timeout_ok) {
            if (client_cmd_timeout(cli, optarg, timeout_s) != 0)
                return 2;
        } else if (opt == 'h') {
            printf("usage: stagein %s\n", usage);
            return 0;
        } else {
            fprintf(stderr, "usage: stagein %s\n", usage);
            return 2;
        }
    }
    int n = argc - optind;
    if (npos >= 0 ? n != npos : n > 1) {
        fprintf(stderr, "usage: stagein %s\n", usage);
        return 2;
    }
    si_error_t err;
    if (n == 1 && npos != 0 && client_cmd_check_id(argv[optind], &err) < 0)
        return cli_fail(cli, "%s", err.text);
    if (!(*c = client_cmd_open(cli, co->endpoint, &err)))
        return cli_fail(cli, "%s", err.text);
    return -1;
}
