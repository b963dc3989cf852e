#include "config.h"
#include "spank/run.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define KILL_GRACE_S 2.0

/* In the child only: become the user, then exec. Never returns. */
static void become_and_exec(const run_as_t *as, char *const argv[])
{
    static char *const clean_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C", NULL};
    if (as->uid != 0 || getuid() != 0) {
        struct passwd pw, *found = NULL;
        char buf[4096];
        if (getpwuid_r(as->uid, &pw, buf, sizeof(buf), &found) == 0 && found) {
            if (initgroups(pw.pw_name, as->gid) < 0 && getuid() == 0)
                _exit(126);
        } else if (getuid() == 0 && setgroups(0, NULL) < 0) {
            _exit(126);
        }
        if (setresgid(as->gid, as->gid, as->gid) < 0 || setresuid(as->uid, as->uid, as->uid) < 0)
            _exit(126);
    }
    if (chdir("/") < 0)
        _exit(126);
    execve(argv[0], argv, as->env ? as->env : clean_env);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static int wait_status(pid_t pid, double deadline, int *status)
{
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid)
            return 0;
        if (w < 0 && errno != EINTR)
            return -1;
        if (si_mono_now() >= deadline)
            return -1;
        usleep(20000);
    }
}

/* A pipe (close-on-exec) and a fork: 0 in the child, the child's pid in
 * the parent, or -1 with err "cannot VERB PROG: ..." and no pipe left. */
static pid_t fork_with_pipe(int fds[2], const char *verb, const char *prog, si_error_t *err)
{
    if (pipe2(fds, O_CLOEXEC) < 0)
        return si_errnoprintf(err, errno, "cannot %s %s: pipe: %s", verb, prog, strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        return si_errnoprintf(err, saved, "cannot %s %s: fork: %s", verb, prog, strerror(saved));
    }
    return pid;
}

int run_command(const run_as_t *as, char *const argv[], char *out, size_t size,
                si_error_t *err)
{
    int fds[2];
    pid_t pid = fork_with_pipe(fds, "run", argv[0], err);
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int null = open("/dev/null", O_RDONLY);
        if (null < 0 || dup2(null, 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[1], 2) < 0)
            _exit(126);
        become_and_exec(as, argv);
    }
    close(fds[1]);
    size_t len = 0;
    double deadline = si_mono_now() + as->timeout_s;
    bool timed_out = false;
    for (;;) {
        int left_ms = (int)((deadline - si_mono_now()) * 1000);
        if (left_ms <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int n = poll(&p, 1, left_ms);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            continue;
        char chunk[4096];
        ssize_t r = read(fds[0], chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        size_t keep = size > 0 && len < size - 1 ? size - 1 - len : 0;
        if (keep > (size_t)r)
            keep = (size_t)r;
        memcpy(out + len, chunk, keep);
        len += keep;
    }
    close(fds[0]);
    if (size > 0)
        out[len] = '\0';
    int status;
    if (timed_out) {
        kill(pid, SIGTERM);
        if (wait_status(pid, si_mono_now() + KILL_GRACE_S, &status) < 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
        return si_errprintf(err, "%s did not finish within %.0f s", argv[0], as->timeout_s);
    }
    if (waitpid(pid, &status, 0) < 0)
        return si_errnoprintf(err, errno, "cannot wait for %s: %s", argv[0], strerror(errno));
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

int run_detached(const run_as_t *as, char *const argv[], const char *log_path, pid_t *pid,
                 si_error_t *err)
{
    /* The command's pid comes back through a pipe from the intermediate
     * child, which exits at once so the command belongs to init, not to
     * the (short-lived) prolog. */
    int fds[2];
    pid_t mid = fork_with_pipe(fds, "start", argv[0], err);
    if (mid < 0)
        return -1;
    if (mid == 0) {
        close(fds[0]);
        if (setsid() < 0)
            _exit(126);
        pid_t child = fork();
        if (child < 0)
            _exit(126);
        if (child > 0) {
            ssize_t w = write(fds[1], &child, sizeof(child));
            _exit(w == (ssize_t)sizeof(child) ? 0 : 126);
        }
        int null = open("/dev/null", O_RDONLY);
        int log = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0644);
        if (null < 0 || log < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0)
            _exit(126);
        if (log > 2 && fchown(log, as->uid, as->gid) < 0 && getuid() == 0)
            _exit(126);
        become_and_exec(as, argv);
    }
    close(fds[1]);
    pid_t got = -1;
    ssize_t r;
    do {
        r = read(fds[0], &got, sizeof(got));
    } while (r < 0 && errno == EINTR);
    close(fds[0]);
    int status;
    waitpid(mid, &status, 0);
    if (r != (ssize_t)sizeof(got) || got <= 0)
        return si_errprintf(err, "cannot start %s: the intermediate process failed", argv[0]);
    *pid = got;
    return 0;
}

bool run_stop(pid_t pid, double grace_s)
{
    if (pid <= 1 || kill(pid, SIGTERM) < 0)
        return true;
    double deadline = si_mono_now() + grace_s;
    while (si_mono_now() < deadline) {
        if (kill(pid, 0) < 0 && errno == ESRCH)
            return true;
        usleep(50000);
    }
    kill(pid, SIGKILL);
    usleep(50000);
    return kill(pid, 0) < 0 && errno == ESRCH;
}
