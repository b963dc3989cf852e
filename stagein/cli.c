#include "config.h"
#include "stagein/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog_conf.h"
#include "daemon/conf/schema.h"

si_conf_t *cli_conf(cli_t *cli, si_error_t *err)
{
    if (!cli->conf) {
        bool explicit_path;
        const char *path = si_conf_default_path(cli->config_path, &explicit_path);
        cli->conf = si_conf_load(path, explicit_path, stagein_conf_schemas(), err);
    }
    return cli->conf;
}

const char *cli_catalog_path(cli_t *cli, si_error_t *err)
{
    /* The configuration is read (and validated) even when it is overridden,
     * so a broken file never goes unnoticed. */
    si_conf_t *conf = cli_conf(cli, err);
    if (!conf)
        return NULL;
    if (cli->catalog_path)
        return cli->catalog_path;
    const char *env = getenv("STAGEIN_CATALOG");
    if (env && *env)
        return env;
    return catalog_conf_path(conf, cli->catalog_buf, sizeof(cli->catalog_buf));
}

catalog_t *cli_open_catalog(cli_t *cli, int flags, si_error_t *err)
{
    const char *path = cli_catalog_path(cli, err);
    if (!path)
        return NULL;
    return catalog_conf_open(cli_conf(cli, err), path, flags, err);
}

int cli_fail(const cli_t *cli, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", cli->prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 1;
}

static void list_commands(FILE *out, const char *group, const cli_command_t *table)
{
    fprintf(out, "usage: stagein %s%sCOMMAND [ARGS]\n\ncommands:\n", group ? group : "",
            group ? " " : "");
    for (const cli_command_t *c = table; c->name; c++)
        fprintf(out, "  %-12s %s\n", c->name, c->summary);
}

int cli_print_table(const cli_t *cli, si_table_t *t, bool json)
{
    if (!t)
        return cli_fail(cli, "out of memory");
    int rc = si_table_print(t, stdout, json) == 0 ? 0 : cli_fail(cli, "write error");
    si_table_free(t);
    return rc;
}

int cli_dispatch(cli_t *cli, const char *group, const cli_command_t *table, int argc,
                 char **argv)
{
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        list_commands(argc < 1 ? stderr : stdout, group, table);
        return argc < 1 ? 2 : 0;
    }
    for (const cli_command_t *c = table; c->name; c++)
        if (strcmp(c->name, argv[0]) == 0)
            return c->run(cli, argc, argv);
    cli_fail(cli, "unknown command '%s%s%s' (see 'stagein %s%s--help')", group ? group : "",
             group ? " " : "", argv[0], group ? group : "", group ? " " : "");
    return 2;
}
