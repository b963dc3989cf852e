#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/log.h"
#include "common/tap.h"

int main(void)
{
    si_error_t err;
    char dir[] = "/tmp/t_log.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char path[256], rotated[256];
    snprintf(path, sizeof(path), "%s/d.log", dir);
    snprintf(rotated, sizeof(rotated), "%s/d.log.1", dir);

    is_int(si_log_level_parse("info"), SI_LOG_INFO, "level name parsed");
    is_int(si_log_level_parse("loud"), -1, "unknown level refused");
    is_str(si_log_level_name(SI_LOG_WARNING), "warning", "level named");

    si_log_opts_t opts = {.ident = "t_log", .level = SI_LOG_INFO, .file = path};
    si_log_t *log = si_log_open(&opts, &err);
    ok(log != NULL, "log opened on a file");
    si_log(log, SI_LOG_INFO, "hello %d", 42);
    si_log(log, SI_LOG_DEBUG, "too detailed");
    ok(si_log_enabled(log, SI_LOG_ERROR) && !si_log_enabled(log, SI_LOG_DEBUG),
       "enabled follows the level");
    size_t len;
    char *text = si_read_file(path, 8192, false, &len, &err);
    ok(text && strstr(text, "t_log[") && strstr(text, "info: hello 42\n"),
       "line has ident, level and message: %s", text ? text : "(none)");
    ok(text && !strstr(text, "too detailed"), "debug dropped at level info");

    /* rotation: the old file is renamed away, reopen starts a new one */
    ok(rename(path, rotated) == 0, "log rotated");
    opts.level = SI_LOG_DEBUG;
    ok(si_log_reopen(log, &opts, &err) == 0, "reopened");
    si_log(log, SI_LOG_DEBUG, "after rotation");
    free(text);
    text = si_read_file(path, 8192, false, &len, &err);
    ok(text && strstr(text, "debug: after rotation") && !strstr(text, "hello"),
       "new file holds only new lines, at the new level");

    si_log_opts_t bad = {.ident = "t_log", .level = SI_LOG_INFO, .file = "/nonexistent/dir/x.log"};
    ok(si_log_reopen(log, &bad, &err) == -1 && strstr(err.text, "/nonexistent/dir/x.log"),
       "reopen failure names the file: %s", err.text);
    si_log(log, SI_LOG_INFO, "still here");
    free(text);
    text = si_read_file(path, 8192, false, &len, &err);
    ok(text && strstr(text, "still here"), "old destination kept after a failed reopen");
    free(text);
    si_log_close(log);

    ok(si_log_open(&bad, &err) == NULL && strstr(err.text, "cannot open log file"),
       "open failure is clear: %s", err.text);

    unlink(path);
    unlink(rotated);
    rmdir(dir);
    return done_testing();
}
