/* stagein: the user and admin command line of the staging service. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "stagein/cli.h"

static const cli_command_t commands[] = {
    {"catalog", cmd_catalog, "query and import into the catalog (admin views, imports, sql)"},
    {"tape", cmd_tape, "the simulated tape library: volumes, archive files, import, faults"},
    {"request", cmd_request, "ask stageind to stage datasets or files (--wait: until done)"},
    {"status", cmd_status, "a request's state per file, or your active requests"},
    {"wait", cmd_wait, "wait for a request to complete, showing progress"},
    {"cancel", cmd_cancel, "cancel a request's unfinished files"},
    {"release", cmd_release, "the job no longer needs a request's data: unpin it"},
    {"bind", cmd_bind, "name the job that holds a request (it is released when the job ends)"},
    {"token", cmd_token, "a bearer token from stageind for Tape REST API clients (gfal2, curl)"},
    {"queue", cmd_queue, "the active requests in the order stageind serves them"},
    {"drives", cmd_drives, "the tape drives as stageind reports them"},
    {"ui", cmd_ui, "a one-time link to the web status page, logged in as you"},
    {"push", cmd_push, "send files to stageind to be archived as a dataset"},
    {"get", cmd_get, "copy a dataset or bucket/key from stageind's cache (S3) into files"},
    {"put", cmd_put, "write a file as bucket/key of an archive bucket (S3, RDMA when asked)"},
    {"agent", cmd_agent, "node agent: hold a request's data in memory for jobs to attach"},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: stagein [--config FILE] [--catalog FILE] COMMAND [ARGS]\n"
            "       stagein --version\n\n"
            "commands:\n");
    for (const cli_command_t *c = commands; c->name; c++)
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    fprintf(out, "\nSee stagein(1).\n");
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"config", required_argument, NULL, 'c'},
        {"catalog", required_argument, NULL, 'C'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    cli_t cli = {.prog = "stagein"};
    int opt;

    /* '+': options after the command name belong to the command. */
    while ((opt = getopt_long(argc, argv, "+c:C:hV", options, NULL)) != -1) {
        switch (opt) {
        case 'c':
            cli.config_path = optarg;
            break;
        case 'C':
            cli.catalog_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("stagein %s\n", PACKAGE_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    int rc = cli_dispatch(&cli, NULL, commands, argc - optind, argv + optind);
    si_conf_free(cli.conf);
    return rc;
}
