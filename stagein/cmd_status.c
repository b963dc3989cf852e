/* stagein status / wait / cancel / release: one request, or the caller's
 * (or, for an administrator, every) active request. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/text.h"
#include "stagein/api.h"
#include "stagein/client_cmd.h"

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
        si_table_t *t = client_cmd_rows_table(queue, cols, SI_NCOLS(cols), me);
        rc = cli_print_table(cli, t, false);
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
        si_table_t *t = client_cmd_rows_table(json_object_get(r.json, "requests"), cols,
                                              SI_NCOLS(cols), -1);
        rc = cli_print_table(cli, t, false);
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
    int rc = client_cmd_status_args(cli, argc, argv,
                                    "status [ID | --all] [--endpoint URL|unix:PATH] [--json]", -1,
                                    false, &co, NULL, &all, &c);
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
        si_table_t *t = client_cmd_rows_table(json_object_get(r.json, "files"), cols,
                                              SI_NCOLS(cols), -1);
        rc = cli_print_table(cli, t, false);
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
    int rc = client_cmd_simple_args(cli, argc, argv,
                                    "wait ID [--timeout DURATION] [--endpoint URL|unix:PATH] "
                                    "[--json]", 1, true, &co, &timeout_s, &c);
    if (rc >= 0)
        return rc;
    rc = client_cmd_wait(cli, c, argv[optind], timeout_s, co.json);
    client_free(c);
    return rc;
}

/* cancel and release: one POST, the new state in the answer. */
static int end_request(cli_t *cli, int argc, char **argv, const char *usage, api_post_fn route)
{
    client_cmd_conn_t co;
    client_t *c = NULL;
    int rc = client_cmd_simple_args(cli, argc, argv, usage, 1, false, &co, NULL, &c);
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
