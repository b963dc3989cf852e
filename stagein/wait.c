/* Waiting on a staging request (stagein wait, request --wait): progress as a
 * bar redrawn in place on a terminal or as plain lines, then the outcome. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/text.h"
#include "stagein/client_cmd.h"
#include "stagein/api.h"
#include "stagein/progress.h"

/* How often `wait` asks; plain lines are written at most this often unless
 * the state or the number of finished files changed. */
#define POLL_TTY_S 0.5
#define POLL_PLAIN_S 1.0
#define PLAIN_LINE_EVERY_S 5.0

static int terminal_width(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
        return ws.ws_col;
    return 80;
}

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
int client_cmd_wait(cli_t *cli, client_t *c, const char *id, double timeout_s, bool json)
{
    bool tty = !json && isatty(STDOUT_FILENO);
    progress_rate_t rate;
    progress_rate_init(&rate);
    double start = si_mono_now(), last_line = -1e9;
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
        double t = si_mono_now();
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
        si_sleep(pause);
    }
}
