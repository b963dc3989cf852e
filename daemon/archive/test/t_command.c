/* A site's command on a batch of paths: the paths arrive as arguments, the
 * exit status and the output's tail come back, a command past its limit is
 * killed with everything it started, stop ends it too. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/archive/command.h"

int main(void)
{
    archive_command_result_t r;
    si_error_t err;
    const char *paths[] = {"/a b/one", "two", "th'ree"};
    char text[600];

    ok(archive_command_run("printf '<%s>'", paths, 3, 10, NULL, &r, &err) == 0, "ran");
    is_int(r.status, 0, "exit status 0");
    is_str(r.output, "</a b/one><two><th'ree>", "every path one argument, quoting intact");

    ok(archive_command_run("echo first; echo 'cannot stage' \"$2\" >&2; exit 3", paths, 2, 10,
                           NULL, &r, &err) == 0, "a failing command ran");
    is_int(r.status, 3, "its status");
    ok(!r.timed_out, "not timed out");
    archive_command_describe(&r, 10, text, sizeof(text));
    is_str(text, "exited with status 3: cannot stage two", "described by its last line (stderr)");

    ok(archive_command_run("sleep 30 & sleep 30; echo never", NULL, 0, 0.3, NULL, &r, &err) == 0,
       "a hanging command ran");
    ok(r.timed_out, "timed out");
    ok(r.seconds < 10, "killed soon after its limit (%.1f s), its background child with it",
       r.seconds);
    archive_command_describe(&r, 0.3, text, sizeof(text));
    ok(strncmp(text, "timed out after 0.3 s", 21) == 0, "described: %s", text);

    atomic_bool stop = true;
    ok(archive_command_run("sleep 30", NULL, 0, 100, &stop, &r, &err) == 0 && r.timed_out &&
       r.seconds < 10, "stop ends it");

    ok(archive_command_run("/nonexistent/stage", paths, 1, 10, NULL, &r, &err) == 0 &&
       r.status == 127, "a missing program: the shell's status 127");
    return done_testing();
}
