#include "config.h"
#include "stagein/client_cmd.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

double client_cmd_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void client_cmd_sleep(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}
