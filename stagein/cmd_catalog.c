/* stagein catalog ...: imports and admin views over the SQLite catalog. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <limits.h>

#include "catalog/catalog_conf.h"
#include "catalog/history.h"
#include "common/text.h"
#include "daemon/process.h"
#include "stagein/cli.h"
#include "stagein/import_s3.h"

/* Options every view takes. */
typedef struct {
    bool json;
} view_opts_t;

/* Parses --json (and --help) for a view taking `want` positional arguments. */
static int view_args(cli_t *cli, int argc, char **argv, int want, const char *usage,
                     view_opts_t *o, char ***pos)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    optind = 0; /* GNU getopt: 0 re-initialises its state */
    memset(o, 0, sizeof(*o));
    while ((opt = getopt_long(argc, argv, "jh", options, NULL)) != -1) {
        if (opt == 'j') {
            o->json = true;
        } else if (opt == 'h') {
            printf("usage: stagein catalog %s %s [--json]\n", argv[0], usage);
            return 0;
        } else {
            return 2;
        }
    }
    if (argc - optind != want) {
        fprintf(stderr, "usage: stagein catalog %s %s [--json]\n", argv[0], usage);
        return 2;
    }
    (void)cli;
    *pos = argv + optind;
    return -1;
}

static int show(cli_t *cli, si_table_t *t, const si_error_t *err, bool json)
{
    return t ? cli_print_table(cli, t, json) : cli_fail(cli, "%s", err->text);
}

typedef si_table_t *(*view0_fn)(catalog_t *, si_error_t *);
typedef si_table_t *(*view1_fn)(catalog_t *, const char *, si_error_t *);

/* The views with zero arguments (v0) or one (v1, named by usage). */
static const struct {
    const char *name, *usage;
    view0_fn v0;
    view1_fn v1;
} views[] = {
    {"datasets", "", catalog_view_datasets, NULL},
    {"where", "DATASET", NULL, catalog_view_dataset_volumes},
    {"volume", "LABEL", NULL, catalog_view_volume_datasets},
    {"volumes", "", catalog_view_volumes, NULL},
    {"object", "BUCKET/KEY", NULL, catalog_view_object},
    {"cache", "", catalog_view_cache, NULL},
    {"sql", "\"SELECT ...\"", NULL, catalog_view_sql},
};

/* The view argv[0] names (cmd_catalog routes only those) over a read-only
 * catalog. */
static int cmd_view(cli_t *cli, int argc, char **argv)
{
    size_t i = 0, n = sizeof(views) / sizeof(views[0]);
    while (i < n && strcmp(views[i].name, argv[0]) != 0)
        i++;
    if (i == n)
        return cli_fail(cli, "catalog %s is not a view", argv[0]);
    view0_fn v0 = views[i].v0;
    view1_fn v1 = views[i].v1;
    view_opts_t o;
    char **pos;
    int rc = view_args(cli, argc, argv, v1 ? 1 : 0, views[i].usage, &o, &pos);
    if (rc >= 0)
        return rc;
    si_error_t err;
    catalog_t *cat = cli_open_catalog(cli, CATALOG_READONLY, &err);
    if (!cat)
        return cli_fail(cli, "%s", err.text);
    si_table_t *t = v1 ? v1(cat, pos[0], &err) : v0(cat, &err);
    rc = show(cli, t, &err, o.json);
    catalog_close(cat);
    return rc;
}

static int cmd_plan(cli_t *cli, int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"summary", no_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    bool json = false, summary = false;
    int opt;
    optind = 0; /* GNU getopt: 0 re-initialises its state */
    while ((opt = getopt_long(argc, argv, "js", options, NULL)) != -1) {
        if (opt == 'j')
            json = true;
        else if (opt == 's')
            summary = true;
        else
            return 2;
    }
    if (argc - optind != 1) {
        fprintf(stderr, "usage: stagein catalog plan DATASET [--summary] [--json]\n");
        return 2;
    }
    si_error_t err;
    catalog_t *cat = cli_open_catalog(cli, CATALOG_READONLY, &err);
    if (!cat)
        return cli_fail(cli, "%s", err.text);
    int rc = show(cli, catalog_view_plan(cat, argv[optind], summary, &err), &err, json);
    catalog_close(cat);
    return rc;
}

static int cmd_requests(cli_t *cli, int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},
        {"user", required_argument, NULL, 'u'},
        {"job", required_argument, NULL, 'J'},
        {"state", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    catalog_request_filter_t f = {0};
    bool json = false;
    int opt;
    optind = 0; /* GNU getopt: 0 re-initialises its state */
    while ((opt = getopt_long(argc, argv, "ju:J:s:", options, NULL)) != -1) {
        switch (opt) {
        case 'j':
            json = true;
            break;
        case 'u':
            f.user = optarg;
            break;
        case 'J':
            f.job = optarg;
            break;
        case 's':
            f.state = optarg;
            break;
        default:
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "usage: stagein catalog requests [--user U] [--job ID] "
                        "[--state STATE] [--json]\n");
        return 2;
    }
    si_error_t err;
    catalog_t *cat = cli_open_catalog(cli, CATALOG_READONLY, &err);
    if (!cat)
        return cli_fail(cli, "%s", err.text);
    int rc = show(cli, catalog_view_requests(cat, &f, &err), &err, json);
    catalog_close(cat);
    return rc;
}

static int cmd_init(cli_t *cli, int argc, char **argv)
{
    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "usage: stagein catalog init\n");
        return 2;
    }
    si_error_t err;
    const char *path = cli_catalog_path(cli, &err);
    if (!path)
        return cli_fail(cli, "%s", err.text);
    /* the directory it lives in (state_dir) is made, private, when missing */
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir && !catalog_target_is_url(path)) {
        *slash = '\0';
        if (access(dir, F_OK) != 0) {
            if (process_mkdirs(dir, 0700, &err) < 0)
                return cli_fail(cli, "catalog %s: %s", path, err.text);
            printf("created directory %s (mode 0700)\n", dir);
        }
    }
    catalog_t *cat = cli_open_catalog(cli, CATALOG_CREATE, &err);
    if (!cat)
        return cli_fail(cli, "%s", err.text);
    int v = catalog_schema_version(cat);
    printf("catalog %s: schema %d.%d\n", catalog_path(cat), v / 1000, v % 1000);
    catalog_close(cat);
    return 0;
}

static FILE *open_input(cli_t *cli, const char *path)
{
    if (strcmp(path, "-") == 0)
        return stdin;
    FILE *f = fopen(path, "r");
    if (!f)
        cli_fail(cli, "%s: %s", path, strerror(errno));
    return f;
}

static void print_stats(const char *what, const catalog_import_stats_t *s)
{
    printf("%s: %llu records, %llu new objects, %llu new copies, %llu new volumes",
           what, (unsigned long long)s->lines, (unsigned long long)s->objects,
           (unsigned long long)s->copies, (unsigned long long)s->volumes);
    if (s->members)
        printf(", %llu members", (unsigned long long)s->members);
    printf("\n");
}

/* --from-s3: the archive.s3 upstream's listing (import_s3.c). */
static int import_s3(cli_t *cli, const char *spec, bool etag_md5, int extra_args)
{
    if (extra_args > 0) {
        fprintf(stderr, "usage: stagein catalog import --from-s3 BUCKET[/PREFIX] "
                        "[--no-etag-checksum] (no FILE)\n");
        return 2;
    }
    si_error_t err;
    si_conf_t *conf = cli_conf(cli, &err);
    if (!conf)
        return cli_fail(cli, "%s", err.text);
    catalog_t *cat = cli_open_catalog(cli, CATALOG_CREATE, &err);
    if (!cat)
        return cli_fail(cli, "%s", err.text);
    catalog_import_stats_t stats;
    uint64_t skipped = 0;
    int rc = 0;
    char what[SI_BUCKET_MAX + SI_KEY_MAX + 8];
    snprintf(what, sizeof(what), "s3://%s", spec);
    if (import_from_s3(cat, conf, spec, etag_md5, &stats, &skipped, &err) < 0) {
        rc = cli_fail(cli, "%s (nothing imported)", err.text);
    } else {
        print_stats(what, &stats);
        if (skipped)
            printf("%s: %llu directory markers left out\n", what, (unsigned long long)skipped);
    }
    catalog_close(cat);
    return rc;
}

static int cmd_import(cli_t *cli, int argc, char **argv)
{
    static const struct option options[] = {
        {"format", required_argument, NULL, 'f'},
        {"volume", required_argument, NULL, 'v'},
        {"bucket", required_argument, NULL, 'b'},
        {"block-size", required_argument, NULL, 'B'},
        {"from-s3", required_argument, NULL, 's'},
        {"no-etag-checksum", no_argument, NULL, 'E'},
        {NULL, 0, NULL, 0},
    };
    catalog_positions_opts_t opts = {.format = CATALOG_FORMAT_AUTO};
    const char *from_s3 = NULL;
    bool etag_md5 = true;
    int opt;
    optind = 0; /* GNU getopt: 0 re-initialises its state */
    while ((opt = getopt_long(argc, argv, "f:v:b:B:s:E", options, NULL)) != -1) {
        switch (opt) {
        case 's':
            from_s3 = optarg;
            break;
        case 'E':
            etag_md5 = false;
            break;
        case 'f':
            if (strcmp(optarg, "csv") == 0)
                opts.format = CATALOG_FORMAT_CSV;
            else if (strcmp(optarg, "jsonl") == 0)
                opts.format = CATALOG_FORMAT_JSONL;
            else if (strcmp(optarg, "ltfs") == 0)
                opts.format = CATALOG_FORMAT_LTFS;
            else
                return cli_fail(cli, "--format '%s': use csv, jsonl or ltfs", optarg);
            break;
        case 'v':
            opts.volume = optarg;
            break;
        case 'b':
            opts.bucket = optarg;
            break;
        case 'B':
            if (si_parse_u64(optarg, &opts.block_size) < 0 || opts.block_size == 0)
                return cli_fail(cli, "--block-size '%s' is not a positive integer", optarg);
            break;
        default:
            return 2;
        }
    }
    if (from_s3)
        return import_s3(cli, from_s3, etag_md5, argc - optind);
    if (argc - optind < 1) {
        fprintf(stderr, "usage: stagein catalog import [--format csv|jsonl|ltfs] "
                        "[--volume LABEL] [--bucket B] [--block-size N] FILE...\n"
                        "       stagein catalog import --from-s3 BUCKET[/PREFIX] "
                        "[--no-etag-checksum]\n");
        return 2;
    }
    si_error_t err;
    catalog_t *cat = cli_open_catalog(cli, CATALOG_CREATE, &err);
    if (!cat)
        return cli_fail(cli, "%s", err.text);
    int rc = 0;
    for (int i = optind; i < argc && rc == 0; i++) {
        FILE *in = open_input(cli, argv[i]);
        if (!in) {
            rc = 1;
            break;
        }
        catalog_import_stats_t stats;
        if (catalog_import_positions(cat, argv[i], in, &opts, &stats, &err) < 0)
            rc = cli_fail(cli, "%s (nothing imported from this file)", err.text);
        else
            print_stats(argv[i], &stats);
        if (in != stdin)
            fclose(in);
    }
    catalog_close(cat);
    return rc;
}

static int parse_owner(cli_t *cli, const char *spec, uid_t *uid, gid_t *gid)
{
    char user[256];
    const char *colon = strchr(spec, ':');
    snprintf(user, sizeof(user), "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
    int64_t n;
    if (si_parse_i64(user, &n) == 0 && n >= 0) {
        *uid = (uid_t)n;
        struct passwd *pw = getpwuid(*uid);
        *gid = pw ? pw->pw_gid : (gid_t)n;
    } else {
        struct passwd *pw = getpwnam(user);
        if (!pw)
            return cli_fail(cli, "--owner: no user '%s'", user);
        *uid = pw->pw_uid;
        *gid = pw->pw_gid;
    }
    if (colon) {
        if (si_parse_i64(colon + 1, &n) == 0 && n >= 0) {
            *gid = (gid_t)n;
        } else {
            struct group *gr = getgrnam(colon + 1);
            if (!gr)
                return cli_fail(cli, "--owner: no group '%s'", colon + 1);
            *gid = gr->gr_gid;
        }
    }
    return 0;
}

static int cmd_define(cli_t *cli, int argc, char **argv)
{
    static const struct option options[] = {
        {"owner", required_argument, NULL, 'o'},
        {"mode", required_argument, NULL, 'm'},
        {"description", required_argument, NULL, 'd'},
        {"replace", no_argument, NULL, 'r'},
        {NULL, 0, NULL, 0},
    };
    catalog_dataset_attrs_t a = {.owner_uid = getuid(), .owner_gid = getgid(), .mode = 0644};
    int opt;
    optind = 0; /* GNU getopt: 0 re-initialises its state */
    while ((opt = getopt_long(argc, argv, "o:m:d:r", options, NULL)) != -1) {
        switch (opt) {
        case 'o':
            if (parse_owner(cli, optarg, &a.owner_uid, &a.owner_gid) != 0)
                return 1;
            break;
        case 'm': {
            if (si_parse_mode(optarg, &a.mode) < 0)
                return cli_fail(cli, "--mode '%s' is not an octal mode like 0640", optarg);
            break;
        }
        case 'd':
            a.description = optarg;
            break;
        case 'r':
            a.replace = true;
            break;
        default:
            return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "usage: stagein catalog define DATASET MANIFEST [--owner USER[:GROUP]] "
                        "[--mode 0640] [--description TEXT] [--replace]\n");
        return 2;
    }
    a.name = argv[optind];
    si_error_t err;
    catalog_t *cat = cli_open_catalog(cli, CATALOG_CREATE, &err);
    if (!cat)
        return cli_fail(cli, "%s", err.text);
    FILE *in = open_input(cli, argv[optind + 1]);
    int rc = 1;
    if (in) {
        catalog_import_stats_t stats;
        if (catalog_import_manifest(cat, &a, argv[optind + 1], in, &stats, &err) < 0) {
            rc = cli_fail(cli, "%s (dataset '%s' unchanged)", err.text, a.name);
        } else {
            printf("dataset %s: %llu manifest lines, %llu objects\n", a.name,
                   (unsigned long long)stats.lines, (unsigned long long)stats.members);
            rc = 0;
        }
        if (in != stdin)
            fclose(in);
    }
    catalog_close(cat);
    return rc;
}

/* Ended requests and archived pushes finished more than DAYS ago out of
 * the catalog (stageind does it by itself: catalog.history_days). */
static int cmd_purge(cli_t *cli, int argc, char **argv)
{
    static const struct option options[] = {
        {"older-than", required_argument, NULL, 'o'},
        {"dry-run", no_argument, NULL, 'n'},
        {NULL, 0, NULL, 0},
    };
    si_error_t err;
    si_conf_t *conf = cli_conf(cli, &err);
    if (!conf)
        return cli_fail(cli, "%s", err.text);
    double days = catalog_conf_history_days(conf);
    bool given = false, dry_run = false;
    int opt;
    optind = 0; /* GNU getopt: 0 re-initialises its state */
    while ((opt = getopt_long(argc, argv, "o:n", options, NULL)) != -1) {
        switch (opt) {
        case 'o': {
            char *end;
            errno = 0;
            days = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(days >= 0) || days > 36500)
                return cli_fail(cli, "--older-than '%s' is not a number of days from 0 to 36500"
                                     " (e.g. 30, or 0.5 for twelve hours)", optarg);
            given = true;
            break;
        }
        case 'n':
            dry_run = true;
            break;
        default:
            return 2;
        }
    }
    if (argc != optind) {
        fprintf(stderr, "usage: stagein catalog purge [--older-than DAYS] [--dry-run]\n");
        return 2;
    }
    if (!given && days == 0)
        return cli_fail(cli, "catalog.history_days is 0 (the history is kept): give"
                             " --older-than DAYS to purge");
    catalog_t *cat = cli_open_catalog(cli, 0, &err);
    if (!cat)
        return cli_fail(cli, "%s", err.text);
    double before = (double)time(NULL) - days * 86400.0;
    catalog_history_purged_t gone;
    int rc = catalog_history_purge(cat, before, 1000, dry_run, &gone, &err);
    catalog_close(cat);
    if (rc < 0)
        return cli_fail(cli, "%s (what was purged before the error stays purged)", err.text);
    char when[64];
    time_t t = (time_t)before;
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
    printf("%s %llu requests (%llu items) and %llu pushes (%llu files) finished before %s\n",
           dry_run ? "would purge" : "purged", (unsigned long long)gone.requests,
           (unsigned long long)gone.request_items, (unsigned long long)gone.pushes,
           (unsigned long long)gone.push_files, when);
    return 0;
}

int cmd_catalog(cli_t *cli, int argc, char **argv)
{
    umask(077); /* the catalog is the service's state */
    static const cli_command_t commands[] = {
        {"init", cmd_init, "create the catalog or upgrade its schema"},
        {"import", cmd_import, "import tape positions (CSV, JSON lines, LTFS index) or an S3 "
                               "archive's listing (--from-s3)"},
        {"define", cmd_define, "define a dataset from a manifest"},
        {"datasets", cmd_view, "datasets: size, objects, volumes spanned, % in cache"},
        {"where", cmd_view, "where a dataset lives, per volume"},
        {"volume", cmd_view, "which datasets touch a volume"},
        {"volumes", cmd_view, "volumes: state, capacity, copies"},
        {"object", cmd_view, "look up an object: copies, positions, cache"},
        {"requests", cmd_requests, "stage requests by user, job or state"},
        {"cache", cmd_view, "cache usage"},
        {"plan", cmd_plan, "the recall plan of a dataset (volumes, reads by position)"},
        {"sql", cmd_view, "run a read-only SQL query"},
        {"purge", cmd_purge, "remove ended requests and archived pushes older than"
                             " catalog.history_days (--older-than DAYS, --dry-run)"},
        {NULL, NULL, NULL},
    };
    return cli_dispatch(cli, "catalog", commands, argc - 1, argv + 1);
}
