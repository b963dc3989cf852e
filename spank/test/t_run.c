#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tap.h"
#include "spank/run.h"

int main(void)
{
    run_as_t as = {.uid = getuid(), .gid = getgid(), .timeout_s = 10};
    char out[256];
    si_error_t err;
    char *echo[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    is_int(run_command(&as, echo, out, sizeof(out), &err), 3, "exit status returned");
    is_str(out, "out\nerr\n", "stdout and stderr captured");
    char *env[] = {"/bin/sh", "-c", "echo \"$PATH|${HOME-unset}\"; pwd", NULL};
    run_command(&as, env, out, sizeof(out), &err);
    is_str(out, "/usr/local/bin:/usr/bin:/bin|unset\n/\n", "a clean environment, in /");
    char small[4];
    char *big[] = {"/bin/sh", "-c", "echo 0123456789", NULL};
    is_int(run_command(&as, big, small, sizeof(small), &err), 0, "long output");
    is_str(small, "012", "truncated to the buffer");
    as.timeout_s = 0.3;
    char *slow[] = {"/bin/sleep", "30", NULL};
    ok(run_command(&as, slow, out, sizeof(out), &err) < 0 && strstr(err.text, "did not finish"),
       "a command past its timeout is killed and reported");
    as.timeout_s = 10;
    char *missing[] = {"/nonexistent/stagein", NULL};
    is_int(run_command(&as, missing, out, sizeof(out), &err), 127, "a missing command: 127");
    ok(strstr(out, "cannot run /nonexistent/stagein") != NULL, "with the reason in its output");
    if (getuid() == 0) {
        run_as_t nobody = {.uid = 65534, .gid = 65534, .timeout_s = 10};
        char *id[] = {"/usr/bin/id", "-u", NULL};
        run_command(&nobody, id, out, sizeof(out), &err);
        is_str(out, "65534\n", "as root: runs as the given user");
    }
    char log[] = "/tmp/t_run.XXXXXX";
    int fd = mkstemp(log);
    close(fd);
    pid_t pid = 0;
    char *daemon[] = {"/bin/sh", "-c", "echo started; exec sleep 30", NULL};
    ok(run_detached(&as, daemon, log, &pid, &err) == 0 && pid > 0, "detached command started");
    ok(getpgid(pid) == getsid(pid) && getsid(pid) != getsid(0), "in its own session");
    ok(kill(pid, 0) == 0, "running");
    usleep(200000);
    FILE *f = fopen(log, "r");
    ok(f && fgets(out, sizeof(out), f) && strcmp(out, "started\n") == 0, "its output in the log");
    if (f)
        fclose(f);
    ok(run_stop(pid, 2.0), "stopped");
    unlink(log);
    return done_testing();
}
