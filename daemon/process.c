#include "config.h"
#include "daemon/process.h"

#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* In the original process: the daemon's verdict decides the exit status. */
static void wait_for_daemon(int fd) __attribute__((noreturn));
static void wait_for_daemon(int fd)
{
    char msg[1024];
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, msg + got, sizeof(msg) - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got == sizeof(msg) - 1)
            break;
    }
    msg[got] = '\0';
    if (got == 1 && msg[0] == '\n')
        _exit(0);
    if (got == 0)
        fprintf(stderr, "stageind: the daemon exited during start-up\n");
    else
        fprintf(stderr, "stageind: %s\n", msg);
    _exit(1);
}

int process_daemonize(int *notify_fd, si_error_t *err)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0)
        return si_errprintf(err, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return si_errprintf(err, "fork: %s", strerror(e));
    }
    if (pid > 0) {
        close(fds[1]);
        wait_for_daemon(fds[0]);
    }
    close(fds[0]);
    if (setsid() < 0)
        _exit(1);
    /* a second fork: the daemon is no session leader, so it never gets a
     * controlling terminal back */
    pid = fork();
    if (pid < 0) {
        process_started(fds[1], "fork failed");
        _exit(1);
    }
    if (pid > 0)
        _exit(0);
    umask(077); /* state files are the service's own */
    if (chdir("/") < 0) {
        process_started(fds[1], "cannot change directory to /");
        _exit(1);
    }
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        if (null > STDERR_FILENO)
            close(null);
    }
    *notify_fd = fds[1];
    return 0;
}

void process_started(int fd, const char *error)
{
    if (fd < 0)
        return;
    /* the waiting parent reads EOF if this fails: no one to tell here */
    if (error)
        (void)si_write_all(fd, error, strlen(error));
    else
        (void)si_write_all(fd, "\n", 1);
    close(fd);
}

int process_lock(const char *path, int *fd_out, pid_t *holder, si_error_t *err)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return si_errprintf(err, "cannot open lock file %s: %s", path, strerror(errno));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &fl) < 0) {
        int e = errno;
        struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        pid_t other = fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK ? who.l_pid : 0;
        close(fd);
        if (holder)
            *holder = other;
        if (e == EACCES || e == EAGAIN)
            return si_errprintf(err, "another stageind (pid %ld) owns this state directory"
                                     " (lock file %s)", (long)other, path);
        return si_errprintf(err, "cannot lock %s: %s", path, strerror(e));
    }
    char pid[32];
    int n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
        int e = errno;
        close(fd);
        return si_errprintf(err, "cannot write lock file %s: %s", path, strerror(e));
    }
    *fd_out = fd;
    return 0;
}

void process_unlock(int fd)
{
    if (fd >= 0)
        close(fd);
}

int process_write_pid(const char *path, si_error_t *err)
{
    char tmp[PATH_MAX + 8];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
        return si_errprintf(err, "pid file path %s is too long", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return si_errprintf(err, "cannot write pid file %s: %s", tmp, strerror(errno));
    fprintf(f, "%ld\n", (long)getpid());
    if (fclose(f) != 0 || rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return si_errprintf(err, "cannot write pid file %s: %s", path, strerror(e));
    }
    return 0;
}

int process_mkdirs(const char *path, mode_t mode, si_error_t *err)
{
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof(buf), "%s", path) >= sizeof(buf))
        return si_errprintf(err, "path %s is too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return si_errprintf(err, "cannot create directory %s: %s", buf, strerror(errno));
            *p = saved;
            if (!saved)
                break;
        }
    }
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return si_errprintf(err, "%s is not a directory", path);
    return 0;
}

int process_private_state(const char *state_dir, const char *catalog, si_error_t *err)
{
    struct stat st;
    if (stat(state_dir, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 0066) &&
        chmod(state_dir, 0711) < 0)
        return si_errprintf(err, "cannot make %s private: %s", state_dir, strerror(errno));
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal", "-gen"};
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof(path), "%s%s", catalog, suffixes[i]) >= sizeof(path))
            return si_errprintf(err, "catalog path %s is too long", catalog);
        if (stat(path, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 0077) &&
            chmod(path, 0600) < 0)
            return si_errprintf(err, "cannot make %s private: %s", path, strerror(errno));
    }
    return 0;
}
