/* stagein request / status / wait / cancel / release / queue / drives / push:
 * the user's side of stageind's control API (doc/control-api.md). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/table.h"
#include "common/text.h"
#include "stagein/api.h"
#include "stagein/cli.h"
#include "stagein/client.h"
#include "stagein/client_cmd.h"
#include "stagein/drives.h"
#include "stagein/progress.h"
#include "stagein/stage_args.h"

/* How often `wait` asks; plain lines are written at most this often unless
 * the state or the number of finished files changed. */
#define POLL_TTY_S 0.5
#define POLL_PLAIN_S 1.0
#define PLAIN_LINE_EVERY_S 5.0

/* ---- helpers ------------------------------------------------------------------ */

static int terminal_width(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
        return ws.ws_col;
    return 80;
}

/* Rows of a JSON array of objects as a table with the given columns. */
static si_table_t *json_rows_table(const json_t *rows, const si_column_t *cols, size_t ncols,
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

/* ---- wait --------------------------------------------------------------------- */

/* How a finished request ends the wait: 0 when COMPLETED, else 1 with the
 * daemon's error and the failed files' errors. */
static int outcome(cli_t *cli, const progress_status_t *s, const json_t *status)
{
    if (strcmp(s->state, "COMPLETED") == 0)
        return 0;
    if (strcmp(s->state, "FAILED") != 0)
        return cli_fail(cli, "request %s was %s: %lld of %lld files completed", s->id, s->state,
                        (long long)s->files_completed, (long long)s->files_total);
    const char *error = json_string_value(json_object_get(status, "error"));
    cli_fail(cli, "request %s FAILED: %s", s->id, error ? error : "some files failed");
    client_cmd_list_failed(cli, json_object_get(status, "files"));
    return 1;
}

/* Polls the request until it ends or timeout_s (0: none) passes, showing
 * progress: a bar redrawn in place on a terminal, else plain lines; with
 * json, nothing until the final status. */
static int wait_request(cli_t *cli, client_t *c, const char *id, double timeout_s, bool json)
{
    bool tty = !json && isatty(STDOUT_FILENO);
    progress_rate_t rate;
    progress_rate_init(&rate);
    double start = client_cmd_clock(), last_line = -1e9;
    char last_state[16] = "";
    int64_t last_files = -1, last_bytes = -1;
    bool bar_drawn = false;
    int rc;

    for (;;) {
        client_reply_t r;
        si_error_t err;
        progress_status_t s;
        if (api_stage_status(c, id, &r, &err) < 0 ||
            progress_status_from_json(r.json, &s, &err) < 0) {
            if (bar_drawn)
                putchar('\n');
            client_reply_free(&r);
            return cli_fail(cli, "%s", err.text);
        }
        double t = client_cmd_clock();
        progress_rate_add(&rate, t, s.bytes_done);
        double bps = progress_rate(&rate);
        bool final = progress_state_final(s.state);
        char line[512];
        if (tty) {
            printf("\r%s\033[K", progress_bar(&s, bps, terminal_width(), line, sizeof(line)));
            bar_drawn = true;
            if (final)
                putchar('\n');
        } else if (!json && (strcmp(s.state, last_state) != 0 ||
                             s.files_completed + s.files_failed != last_files ||
                             (s.bytes_done != last_bytes && t - last_line >= PLAIN_LINE_EVERY_S))) {
            puts(progress_line(&s, bps, line, sizeof(line)));
            last_line = t;
            snprintf(last_state, sizeof(last_state), "%s", s.state);
            last_files = s.files_completed + s.files_failed;
            last_bytes = s.bytes_done;
        }
        fflush(stdout);
        if (final) {
            if (json)
                client_cmd_print_answer(&r);
            rc = outcome(cli, &s, r.json);
            client_reply_free(&r);
            return rc;
        }
        if (timeout_s > 0 && t - start >= timeout_s) {
            if (bar_drawn)
                putchar('\n');
            if (json)
                client_cmd_print_answer(&r);
            char waited[32];
            cli_fail(cli, "timed out after %s waiting for request %s (%s, %lld of %lld files"
                          " completed)", si_format_duration(t - start, waited, sizeof(waited)),
                     id, s.state, (long long)s.files_completed, (long long)s.files_total);
            client_reply_free(&r);
            return CLIENT_CMD_EXIT_TIMEOUT;
        }
        client_reply_free(&r);
        double pause = tty ? POLL_TTY_S : POLL_PLAIN_S;
        if (timeout_s > 0 && start + timeout_s - t < pause)
            pause = start + timeout_s - t;
        client_cmd_sleep(pause);
    }
}

/* ---- request ------------------------------------------------------------------ */

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
    rc = wait ? wait_request(cli, c, id, timeout_s, co.json) : 0;
done:
    client_reply_free(&r);
    client_free(c);
    free(text);
    json_decref(body);
    free(manifest);
    free(files);
    return rc;
}

/* ---- status, wait, cancel, release ---------------------------------------------- */

static int status_args(cli_t *cli, int argc, char **argv, const char *usage, int npos,
                       bool timeout_ok, client_cmd_conn_t *co, double *timeout_s, bool *all,
                       client_t **c);

/* Parses [--json] [--endpoint E] [--timeout D] and `npos` positional
 * arguments (npos < 0: 0 or 1), then opens the client (*c, to free).
 * Returns -1 to go on, else an exit status. */
static int simple_args(cli_t *cli, int argc, char **argv, const char *usage, int npos,
                       bool timeout_ok, client_cmd_conn_t *co, double *timeout_s, client_t **c)
{
    return status_args(cli, argc, argv, usage, npos, timeout_ok, co, timeout_s, NULL, c);
}

/* simple_args, and --all where all is not NULL. */
static int status_args(cli_t *cli, int argc, char **argv, const char *usage, int npos,
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

static void print_request(const json_t *j)
{
    char a[32], b[32], when[64];
    const json_t *job = json_object_get(j, "job"), *eta = json_object_get(j, "eta");
    const json_t *deadline = json_object_get(j, "deadline");
    printf("request   %s\n", json_string_value(json_object_get(j, "id")));
    bool expired = json_is_true(json_object_get(j, "expired"));
    printf("state     %s\n", expired ? "EXPIRED" : json_string_value(json_object_get(j, "state")));
    const char *reason = json_string_value(json_object_get(j, "endReason"));
    if (reason)
        printf("ended     %s\n", reason);
    printf("job       %s\n", json_is_string(job) ? json_string_value(job) : "-");
    printf("priority  %lld\n", (long long)json_integer_value(json_object_get(j, "priority")));
    if (json_is_integer(deadline)) {
        time_t t = (time_t)json_integer_value(deadline);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %Z", localtime_r(&t, &tm));
        printf("deadline  %s\n", when);
    }
    printf("files     %lld of %lld completed, %lld failed\n",
           (long long)json_integer_value(json_object_get(j, "filesCompleted")),
           (long long)json_integer_value(json_object_get(j, "filesTotal")),
           (long long)json_integer_value(json_object_get(j, "filesFailed")));
    printf("bytes     %s of %s\n",
           si_format_bytes((uint64_t)json_integer_value(json_object_get(j, "bytesDone")), a,
                           sizeof(a)),
           si_format_bytes((uint64_t)json_integer_value(json_object_get(j, "bytesTotal")), b,
                           sizeof(b)));
    json_int_t position = json_integer_value(json_object_get(j, "queuePosition"));
    if (position > 0)
        printf("queue     #%lld\n", (long long)position);
    printf("eta       %s\n", json_is_number(eta)
                                 ? si_format_duration(json_number_value(eta), a, sizeof(a))
                                 : "-");
    const char *error = json_string_value(json_object_get(j, "error"));
    if (error)
        printf("error     %s\n", error);
    putchar('\n');
}

/* The active requests of the caller (root: everyone's), from the queue. */
static int status_mine(cli_t *cli, client_t *c, bool json)
{
    static const si_column_t cols[] = {
        {"position", SI_COL_INT}, {"request", SI_COL_STR},     {"state", SI_COL_STR},
        {"job", SI_COL_STR},      {"priority", SI_COL_INT},    {"files", SI_COL_INT},
        {"files_done", SI_COL_INT}, {"bytes", SI_COL_BYTES}, {"bytes_done", SI_COL_BYTES},
    };
    client_reply_t r;
    si_error_t err;
    int rc;
    if (api_queue(c, &r, &err) < 0) {
        rc = cli_fail(cli, "%s", err.text);
        goto done;
    }
    const json_t *queue = json_object_get(r.json, "queue");
    if (!json_is_array(queue)) {
        rc = cli_fail(cli, "stageind's queue answer has no 'queue' array: %.200s", r.body);
        goto done;
    }
    long me = getuid() == 0 ? -1 : (long)getuid();
    if (json) {
        json_t *mine = json_array();
        size_t i;
        json_t *row;
        json_array_foreach(queue, i, row)
            if (me < 0 || json_integer_value(json_object_get(row, "uid")) == me)
                json_array_append(mine, row);
        json_t *out = json_pack("{s:o}", "queue", mine);
        rc = out && json_dumpf(out, stdout, JSON_COMPACT) == 0 ? 0 : cli_fail(cli, "write error");
        putchar('\n');
        json_decref(out);
    } else {
        rc = cli_print_table(cli, json_rows_table(queue, cols, sizeof(cols) / sizeof(cols[0]), me),
                         false);
    }
done:
    client_reply_free(&r);
    return rc;
}

/* Every request of the caller (root: everyone's), finished ones too. */
static int status_all(cli_t *cli, client_t *c, bool json)
{
    static const si_column_t cols[] = {
        {"request", SI_COL_STR},     {"state", SI_COL_STR},      {"job", SI_COL_STR},
        {"files", SI_COL_INT},       {"files_done", SI_COL_INT}, {"files_failed", SI_COL_INT},
        {"bytes", SI_COL_BYTES},     {"bytes_done", SI_COL_BYTES}, {"reason", SI_COL_STR},
    };
    client_reply_t r;
    si_error_t err;
    int rc;
    if (api_requests_all(c, &r, &err) < 0) {
        rc = cli_fail(cli, "%s", err.text);
    } else if (!json_is_array(json_object_get(r.json, "requests"))) {
        rc = cli_fail(cli, "stageind's answer has no 'requests' array: %.200s", r.body);
    } else if (json) {
        client_cmd_print_answer(&r);
        rc = 0;
    } else {
        rc = cli_print_table(cli, json_rows_table(json_object_get(r.json, "requests"),
                                                         cols, sizeof(cols) / sizeof(cols[0]),
                                                         -1),
                                    false);
    }
    client_reply_free(&r);
    return rc;
}

int cmd_status(cli_t *cli, int argc, char **argv)
{
    static const si_column_t cols[] = {
        {"path", SI_COL_STR},       {"state", SI_COL_STR}, {"size", SI_COL_BYTES},
        {"bytesDone", SI_COL_BYTES}, {"error", SI_COL_STR},
    };
    client_cmd_conn_t co;
    bool all = false;
    client_t *c = NULL;
    int rc = status_args(cli, argc, argv,
                         "status [ID | --all] [--endpoint URL|unix:PATH] [--json]", -1, false,
                         &co, NULL, &all, &c);
    if (rc >= 0)
        return rc;
    si_error_t err;
    if (optind == argc) {
        rc = all ? status_all(cli, c, co.json) : status_mine(cli, c, co.json);
        client_free(c);
        return rc;
    }
    client_reply_t r;
    if (api_stage_status(c, argv[optind], &r, &err) < 0) {
        rc = cli_fail(cli, "%s", err.text);
    } else if (co.json) {
        client_cmd_print_answer(&r);
        rc = 0;
    } else if (!json_is_object(r.json)) {
        rc = cli_fail(cli, "stageind's status is not a JSON object: %.200s", r.body);
    } else {
        print_request(r.json);
        rc = cli_print_table(cli, json_rows_table(json_object_get(r.json, "files"), cols,
                                              sizeof(cols) / sizeof(cols[0]), -1),
                         false);
    }
    client_reply_free(&r);
    client_free(c);
    return rc;
}

int cmd_wait(cli_t *cli, int argc, char **argv)
{
    client_cmd_conn_t co;
    double timeout_s = 0;
    client_t *c = NULL;
    int rc = simple_args(cli, argc, argv,
                         "wait ID [--timeout DURATION] [--endpoint URL|unix:PATH] [--json]", 1,
                         true, &co, &timeout_s, &c);
    if (rc >= 0)
        return rc;
    rc = wait_request(cli, c, argv[optind], timeout_s, co.json);
    client_free(c);
    return rc;
}

/* cancel and release: one POST, the new state in the answer. */
static int end_request(cli_t *cli, int argc, char **argv, const char *usage, api_post_fn route)
{
    client_cmd_conn_t co;
    client_t *c = NULL;
    int rc = simple_args(cli, argc, argv, usage, 1, false, &co, NULL, &c);
    if (rc >= 0)
        return rc;
    const char *id = argv[optind];
    si_error_t err;
    client_reply_t r;
    if (route(c, id, NULL, &r, &err) < 0) {
        rc = cli_fail(cli, "%s", err.text);
    } else {
        if (co.json)
            client_cmd_print_answer(&r);
        else
            printf("request %s: %s\n", id,
                   json_string_value(json_object_get(r.json, "state")) ?: "done");
        rc = 0;
    }
    client_reply_free(&r);
    client_free(c);
    return rc;
}

int cmd_cancel(cli_t *cli, int argc, char **argv)
{
    return end_request(cli, argc, argv, "cancel ID [--endpoint URL|unix:PATH] [--json]",
                       api_stage_cancel);
}

int cmd_release(cli_t *cli, int argc, char **argv)
{
    return end_request(cli, argc, argv, "release ID [--endpoint URL|unix:PATH] [--json]",
                       api_release);
}

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

/* ---- queue, drives ---------------------------------------------------------------- */

int cmd_queue(cli_t *cli, int argc, char **argv)
{
    static const si_column_t cols[] = {
        {"position", SI_COL_INT},   {"request", SI_COL_STR}, {"uid", SI_COL_INT},
        {"job", SI_COL_STR},        {"priority", SI_COL_INT}, {"state", SI_COL_STR},
        {"files", SI_COL_INT},      {"files_done", SI_COL_INT}, {"bytes", SI_COL_BYTES},
        {"bytes_done", SI_COL_BYTES},
    };
    client_cmd_conn_t co;
    client_t *c = NULL;
    int rc = simple_args(cli, argc, argv, "queue [--endpoint URL|unix:PATH] [--json]", 0, false,
                         &co, NULL, &c);
    if (rc >= 0)
        return rc;
    si_error_t err;
    client_reply_t r;
    if (api_queue(c, &r, &err) < 0) {
        rc = cli_fail(cli, "%s", err.text);
    } else if (co.json) {
        client_cmd_print_answer(&r);
        rc = 0;
    } else if (!json_is_array(json_object_get(r.json, "queue"))) {
        rc = cli_fail(cli, "stageind's queue answer has no 'queue' array: %.200s", r.body);
    } else {
        rc = cli_print_table(cli, json_rows_table(json_object_get(r.json, "queue"), cols,
                                              sizeof(cols) / sizeof(cols[0]), -1),
                         false);
    }
    client_reply_free(&r);
    client_free(c);
    return rc;
}

/* `stagein ui`: a one-time link to the web status page, logged in as the
 * caller (browsers cannot do MUNGE; doc/status-page.md). */
int cmd_ui(cli_t *cli, int argc, char **argv)
{
    client_cmd_conn_t co;
    client_t *c = NULL;
    int rc = simple_args(cli, argc, argv, "ui [--endpoint URL|unix:PATH] [--json]", 0, false,
                         &co, NULL, &c);
    if (rc >= 0)
        return rc;
    si_error_t err;
    client_reply_t r;
    const char *url = NULL;
    if (api_ui_login(c, &r, &err) < 0) {
        rc = cli_fail(cli, "%s", err.text);
    } else if (co.json) {
        client_cmd_print_answer(&r);
        rc = 0;
    } else if (!(url = json_string_value(json_object_get(r.json, "url")))) {
        rc = cli_fail(cli, "stageind's answer has no 'url': %.200s", r.body);
    } else {
        printf("%s\n", url);
        fprintf(stderr, "stagein: open this link within %.0f s; it works once\n",
                json_number_value(json_object_get(r.json, "expiresIn")));
        rc = 0;
    }
    client_reply_free(&r);
    client_free(c);
    return rc;
}

int cmd_drives(cli_t *cli, int argc, char **argv)
{
    client_cmd_conn_t co;
    client_t *c = NULL;
    int rc = simple_args(cli, argc, argv, "drives [--endpoint URL|unix:PATH] [--json]", 0, false,
                         &co, NULL, &c);
    if (rc >= 0)
        return rc;
    si_error_t err;
    client_reply_t r;
    si_table_t *t = NULL;
    if (api_metrics(c, &r, &err) < 0 || !(t = drives_table(r.body, &err))) {
        rc = cli_fail(cli, "%s", err.text);
    } else if (si_table_rows(t) == 0 && !co.json) {
        printf("stageind reports no drives (no metric with a drive label in /metrics)\n");
        rc = 0;
    } else {
        rc = cli_print_table(cli, t, co.json);
        t = NULL;
    }
    si_table_free(t);
    client_reply_free(&r);
    client_free(c);
    return rc;
}
