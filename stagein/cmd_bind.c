/* stagein bind / token: a request bound to a Slurm job, and the S3 and RDMA
 * credentials the control API hands out. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "stagein/api.h"
#include "stagein/client_cmd.h"
#include "stagein/stage_args.h"

/* POSTs body (decref'd here) by route (to request id) at co's endpoint: 0
 * with *r, or an exit status after saying why; free *r either way. */
static int post_json(cli_t *cli, const client_cmd_conn_t *co, api_post_fn route, const char *id,
                     json_t *body, client_reply_t *r)
{
    si_error_t err;
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    memset(r, 0, sizeof(*r));
    if (!text)
        return cli_fail(cli, "out of memory");
    client_t *c = client_cmd_open(cli, co->endpoint, &err);
    if (!c) {
        free(text);
        return cli_fail(cli, "%s", err.text);
    }
    int rc = route(c, id, text, r, &err) < 0 ? cli_fail(cli, "%s", err.text) : 0;
    client_free(c);
    free(text);
    return rc;
}

/* stagein bind ID --job JOB [--array ARRAY] [--pending]: the job (an array's
 * task) holds the request from now on; stageind releases it when the job
 * (the array) ends. */
int cmd_bind(cli_t *cli, int argc, char **argv)
{
    static const char usage[] =
        "usage: stagein bind ID --job JOB [--array ARRAY] [--pending]"
        " [--endpoint URL|unix:PATH] [--json]\n";
    static const struct option options[] = {
        {"job", required_argument, NULL, 'J'},
        {"array", required_argument, NULL, 'A'},
        {"pending", no_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        CLIENT_CMD_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    client_cmd_conn_t co;
    memset(&co, 0, sizeof(co));
    const char *job = NULL, *array = NULL;
    bool pending = false;
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "J:A:Phe:j", options, NULL)) != -1) {
        if (client_cmd_conn_option(opt, &co))
            continue;
        switch (opt) {
        case 'J': job = optarg; break;
        case 'A': array = optarg; break;
        case 'P': pending = true; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (argc - optind != 1 || !job) {
        fputs(usage, stderr);
        return 2;
    }
    si_error_t err;
    if (client_cmd_check_id(argv[optind], &err) < 0)
        return cli_fail(cli, "%s", err.text);
    json_t *body = json_pack("{s:s, s:b}", "job", job, "started", !pending);
    if (body && array)
        json_object_set_new(body, "array", json_string(array));
    client_reply_t r;
    int rc = post_json(cli, &co, api_stage_bind, argv[optind], body, &r);
    if (rc == 0 && co.json)
        client_cmd_print_answer(&r);
    else if (rc == 0)
        printf("request %s: held by job %s\n", argv[optind], job);
    client_reply_free(&r);
    return rc;
}

static int token_route(client_t *c, const char *id, const char *body, client_reply_t *r,
                       si_error_t *err)
{
    (void)id;
    return api_token(c, body, r, err);
}

/* stagein token [--lifetime D] [--scope S]: a bearer token stageind signs
 * for the caller (MUNGE or the socket's peer credentials), for tools that
 * speak the WLCG Tape REST API (gfal2, curl). Prints the token alone. */
int cmd_token(cli_t *cli, int argc, char **argv)
{
    static const char usage[] =
        "usage: stagein token [--lifetime DURATION] [--scope SCOPE] [--endpoint URL|unix:PATH]"
        " [--json]\n";
    static const struct option options[] = {
        {"lifetime", required_argument, NULL, 'L'},
        {"scope", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        CLIENT_CMD_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    client_cmd_conn_t co;
    memset(&co, 0, sizeof(co));
    const char *scope = NULL;
    int64_t lifetime = 0;
    si_error_t err;
    int opt;
    optind = 0;
    while ((opt = getopt_long(argc, argv, "L:S:he:j", options, NULL)) != -1) {
        if (client_cmd_conn_option(opt, &co))
            continue;
        switch (opt) {
        case 'L':
            if (stage_parse_duration(optarg, &lifetime, &err) < 0) {
                cli_fail(cli, "--lifetime: %s", err.text);
                return 2;
            }
            break;
        case 'S': scope = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (argc != optind) {
        fputs(usage, stderr);
        return 2;
    }
    json_t *body = json_object();
    if (body && lifetime)
        json_object_set_new(body, "lifetime", json_integer(lifetime));
    if (body && scope)
        json_object_set_new(body, "scope", json_string(scope));
    client_reply_t r;
    int rc = post_json(cli, &co, token_route, NULL, body, &r);
    if (rc == 0 && co.json)
        client_cmd_print_answer(&r);
    else if (rc == 0)
        printf("%s\n", json_string_value(json_object_get(r.json, "token")));
    client_reply_free(&r);
    return rc;
}
