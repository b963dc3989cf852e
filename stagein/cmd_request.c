/* stagein request: a staging request for datasets, files or a manifest
 * (doc/control-api.md). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "stagein/api.h"
#include "stagein/client_cmd.h"
#include "stagein/stage_args.h"

static const char request_usage[] =
    "usage: stagein request DATASET... [--file BUCKET/KEY]... [--manifest FILE] [--job ID]\n"
    "                       [--priority N] [--deadline TIME] [--pin-lifetime DURATION]\n"
    "                       [--user UID:GID] [--wait [--timeout DURATION]]\n"
    "                       [--endpoint URL|unix:PATH] [--json]\n";

int cmd_request(cli_t *cli, int argc, char **argv)
{
    static const struct option options[] = {
        {"file", required_argument, NULL, 'f'},
        {"manifest", required_argument, NULL, 'm'},
        {"job", required_argument, NULL, 'J'},
        {"priority", required_argument, NULL, 'p'},
        {"deadline", required_argument, NULL, 'd'},
        {"pin-lifetime", required_argument, NULL, 'l'},
        {"user", required_argument, NULL, 'u'},
        {"wait", no_argument, NULL, 'w'},
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        CLIENT_CMD_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    stage_opts_t so = {0};
    client_cmd_conn_t co = {0};
    const char *manifest_path = NULL;
    bool wait = false;
    double timeout_s = 0;
    si_error_t err;
    int rc = 2, opt;
    const char **files = calloc((size_t)argc, sizeof(*files));
    char *manifest = NULL;
    json_t *body = NULL;
    char *text = NULL;
    client_t *c = NULL;
    client_reply_t r = {0};
    if (!files)
        return cli_fail(cli, "out of memory");
    so.files = files;
    so.job = getenv("SLURM_JOB_ID");
    if (so.job && !*so.job)
        so.job = NULL;

    optind = 0; /* GNU getopt: 0 re-initialises its state */
    while ((opt = getopt_long(argc, argv, "f:m:J:p:d:l:u:wt:he:j", options, NULL)) != -1) {
        if (client_cmd_conn_option(opt, &co))
            continue;
        switch (opt) {
        case 'f':
            files[so.nfiles++] = optarg;
            break;
        case 'm':
            if (manifest_path) {
                rc = cli_fail(cli, "--manifest given twice: list every file in one manifest");
                goto done;
            }
            manifest_path = optarg;
            break;
        case 'J':
            so.job = optarg;
            break;
        case 'p':
            if (stage_parse_priority(optarg, &so.priority, &err) < 0) {
                rc = cli_fail(cli, "--priority: %s", err.text);
                goto done;
            }
            so.has_priority = true;
            break;
        case 'd':
            if (stage_parse_deadline(optarg, time(NULL), &so.deadline, &err) < 0) {
                rc = cli_fail(cli, "--deadline: %s", err.text);
                goto done;
            }
            break;
        case 'l':
            if (stage_parse_duration(optarg, &so.pin_lifetime, &err) < 0) {
                rc = cli_fail(cli, "--pin-lifetime: %s", err.text);
                goto done;
            }
            break;
        case 'u':
            if (stage_parse_user(optarg, &so.uid, &so.gid, &err) < 0) {
                rc = cli_fail(cli, "--user: %s", err.text);
                goto done;
            }
            so.for_user = true;
            break;
        case 'w':
            wait = true;
            break;
        case 't':
            if (client_cmd_timeout(cli, optarg, &timeout_s) != 0) {
                rc = 2;
                goto done;
            }
            break;
        case 'h':
            fputs(request_usage, stdout);
            rc = 0;
            goto done;
        default:
            fputs(request_usage, stderr);
            goto done;
        }
    }
    if (timeout_s > 0 && !wait) {
        rc = cli_fail(cli, "--timeout needs --wait");
        goto done;
    }
    so.datasets = (const char **)argv + optind;
    so.ndatasets = (size_t)(argc - optind);
    if (manifest_path) {
        if (!(manifest = stage_read_manifest(manifest_path, &err))) {
            rc = cli_fail(cli, "%s", err.text);
            goto done;
        }
        so.manifest = manifest;
    }
    if (!(body = stage_request_body(&so, &err))) {
        cli_fail(cli, "%s", err.text);
        fputs(request_usage, stderr);
        goto done;
    }
    if (!(text = json_dumps(body, JSON_COMPACT))) {
        rc = cli_fail(cli, "out of memory");
        goto done;
    }
    if (!(c = client_cmd_open(cli, co.endpoint, &err))) {
        rc = cli_fail(cli, "%s", err.text);
        goto done;
    }
    if (api_stage_submit(c, text, &r, &err) < 0) {
        rc = cli_fail(cli, "%s", err.text);
        goto done;
    }
    const char *id = json_string_value(json_object_get(r.json, "requestId"));
    if (!id || client_cmd_check_id(id, &err) < 0) {
        rc = cli_fail(cli, "stageind's answer names no request id: %.200s", r.body);
        goto done;
    }
    if (co.json && !wait) {
        client_cmd_print_answer(&r);
    } else if (!co.json) {
        char bytes[32];
        printf("request %s: %lld files, %s\n", id,
               (long long)json_integer_value(json_object_get(r.json, "files")),
               si_format_bytes((uint64_t)json_integer_value(json_object_get(r.json, "bytes")),
                               bytes, sizeof(bytes)));
        fflush(stdout);
    }
    rc = wait ? client_cmd_wait(cli, c, id, timeout_s, co.json) : 0;
done:
    client_reply_free(&r);
    client_free(c);
    free(text);
    json_decref(body);
    free(manifest);
    free(files);
    return rc;
}
