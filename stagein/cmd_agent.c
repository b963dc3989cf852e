/* stagein agent: the per-job node agent (stagein/lib/agent.c does the work). */
#include "config.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stagein/cli.h"
#include "stagein/lib/agent.h"
#include "stagein/stagein.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

int cmd_agent(cli_t *cli, int argc, char **argv)
{
    static const struct option options[] = {
        {"request", required_argument, NULL, 'r'},
        {"dataset", required_argument, NULL, 'd'},
        {"gpu", required_argument, NULL, 'g'},
        {"socket", required_argument, NULL, 's'},
        {"endpoint", required_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    agent_opts_t o = {.gpu = -1, .log = stderr};
    const char *endpoint = NULL;
    int opt;
    optind = 0; /* GNU getopt: 0 re-initialises its state */
    while ((opt = getopt_long(argc, argv, "r:d:g:s:e:h", options, NULL)) != -1) {
        switch (opt) {
        case 'r':
            o.request = optarg;
            break;
        case 'd':
            o.dataset = optarg;
            break;
        case 'g':
            if (!*optarg || strspn(optarg, "0123456789") != strlen(optarg))
                return cli_fail(cli, "--gpu '%s': expected a device number", optarg);
            o.gpu = atoi(optarg);
            break;
        case 's':
            o.socket_path = optarg;
            break;
        case 'e':
            endpoint = optarg;
            break;
        case 'h':
            printf("usage: stagein agent --request ID|--dataset NAME [--gpu N] --socket PATH"
                   " [--endpoint URL]\n");
            return 0;
        default:
            return 2;
        }
    }
    if (optind != argc)
        return cli_fail(cli, "agent: unexpected argument '%s'", argv[optind]);
    if (!o.socket_path)
        return cli_fail(cli, "agent: --socket PATH is required");
    if (!o.request == !o.dataset)
        return cli_fail(cli, "agent: give --request ID or --dataset NAME");
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = 1;
    if (stagein_open(&o.h) != STAGEIN_SUCCESS) {
        rc = cli_fail(cli, "%s", o.h ? stagein_last_error(o.h) : "out of memory");
        goto done;
    }
    if (cli_configure_library(cli, o.h, endpoint) != 0)
        goto done;
    si_error_t err;
    if (agent_run(&o, &stop_requested, &err) < 0)
        rc = cli_fail(cli, "agent: %s", err.text);
    else
        rc = 0;
done:
    stagein_close(o.h);
    return rc;
}
