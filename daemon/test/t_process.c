#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/tap.h"
#include "daemon/process.h"

int main(void)
{
    si_error_t err;
    char dir[] = "/tmp/t_process.XXXXXX", path[256], lock[300], pid[300];
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof(path), "%s/a/b/c", dir);
    snprintf(lock, sizeof(lock), "%s/stageind.lock", path);
    snprintf(pid, sizeof(pid), "%s/stageind.pid", path);

    ok(process_mkdirs(path, 0755, &err) == 0, "nested directories created");
    ok(process_mkdirs(path, 0755, &err) == 0, "existing directory accepted");
    ok(process_mkdirs(pid, 0755, &err) == 0, "then a plain path (made a dir)");
    rmdir(pid);
    FILE *f = fopen(pid, "w");
    fclose(f);
    ok(process_mkdirs(pid, 0755, &err) == -1 && strstr(err.text, "not a directory"),
       "a file in the way is refused: %s", err.text);
    unlink(pid);

    int fd = -1;
    ok(process_lock(lock, &fd, NULL, &err) == 0, "lock taken");
    /* a child process is another owner: it must be refused, naming us */
    pid_t child = fork();
    if (child == 0) {
        int cfd;
        pid_t holder = 0;
        si_error_t cerr;
        int rc = process_lock(lock, &cfd, &holder, &cerr);
        char want[64];
        snprintf(want, sizeof(want), "pid %ld", (long)getppid());
        _exit(rc == -1 && holder == getppid() && strstr(cerr.text, want) &&
                      strstr(cerr.text, "owns this state directory")
                  ? 0
                  : 1);
    }
    int st = 0;
    waitpid(child, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "second owner refused with our pid named");
    f = fopen(lock, "r");
    long written = 0;
    ok(f && fscanf(f, "%ld", &written) == 1 && written == (long)getpid(), "lock file holds our pid");
    if (f)
        fclose(f);
    process_unlock(fd);
    child = fork();
    if (child == 0) {
        int cfd;
        _exit(process_lock(lock, &cfd, NULL, NULL) == 0 ? 0 : 1);
    }
    waitpid(child, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "after unlock another process may lock");

    ok(process_write_pid(pid, &err) == 0, "pid file written");
    f = fopen(pid, "r");
    ok(f && fscanf(f, "%ld", &written) == 1 && written == (long)getpid(), "pid file content");
    if (f)
        fclose(f);
    ok(process_write_pid("/nonexistent/dir/x.pid", &err) == -1 && strstr(err.text, "x.pid"),
       "unwritable pid file named: %s", err.text);

    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        diag("cleanup failed");
    return done_testing();
}
