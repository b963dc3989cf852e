/* Identity: peer credentials, missing credentials, and a MUNGE round trip
 * against a munged started here on its own socket and key (skipped when
 * munged is not installed). */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/tap.h"
#include "common/munge_auth.h"
#include "daemon/control/identity.h"

static const char *find_program(const char *name, char *buf, size_t size)
{
    static const char *const dirs[] = {"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/sbin", NULL};
    for (size_t i = 0; dirs[i]; i++) {
        snprintf(buf, size, "%s/%s", dirs[i], name);
        if (access(buf, X_OK) == 0)
            return buf;
    }
    return NULL;
}

int main(void)
{
    si_error_t err;
    identity_t who;
    unsigned status = 0;
    identity_opts_t opts = {.munge_socket = "/nonexistent/munge.sock", .peercred = true};
    http_peer_t tcp = {.is_unix = false};
    http_peer_t local = {.is_unix = true, .have_cred = true, .uid = 1234, .gid = 55, .pid = 9};

    ok(identity_resolve(&opts, NULL, &local, &who, &status, &err) == 0 && who.uid == 1234 &&
           who.gid == 55 && strcmp(who.method, "peercred") == 0,
       "Unix socket without a credential: SO_PEERCRED identity");
    ok(identity_resolve(&opts, NULL, &tcp, &who, &status, &err) == -1 && status == 401 &&
           strstr(err.text, "required over TCP"),
       "TCP without a credential: 401, %s", err.text);
    opts.peercred = false;
    ok(identity_resolve(&opts, NULL, &local, &who, &status, &err) == -1 && status == 401 &&
           strstr(err.text, "not accepted"),
       "peercred disabled: 401, %s", err.text);
    ok(identity_resolve(&opts, "MUNGE:AAAA:", &tcp, &who, &status, &err) == -1 && status == 503 &&
           strstr(err.text, "/nonexistent/munge.sock"),
       "munged unreachable: 503 naming the socket, %s", err.text);
    ok(si_munge_encode("/nonexistent/munge.sock", &err) == NULL &&
           strstr(err.text, "/nonexistent/munge.sock"),
       "encode without munged fails clearly: %s", err.text);

    /* a connection's memo: the same credential, before its expiry, only */
    identity_memo_t memo;
    memset(&memo, 0, sizeof(memo));
    identity_t known = {.uid = 4321, .gid = 77, .method = "munge"};
    ok(!identity_memo_recall(&memo, "MUNGE:one:", 100, &who), "an empty memo recalls nothing");
    identity_memo_keep(&memo, "MUNGE:one:", &known, 400);
    who = (identity_t){0};
    ok(identity_memo_recall(&memo, "MUNGE:one:", 399, &who) && who.uid == 4321 &&
           who.gid == 77 && strcmp(who.method, "munge") == 0,
       "the same credential before its expiry: the kept uid/gid");
    ok(!identity_memo_recall(&memo, "MUNGE:two:", 399, &who),
       "another credential on the connection is not taken for the kept one");
    ok(!identity_memo_recall(&memo, "MUNGE:one:", 400, &who),
       "the kept credential is not taken at or after its expiry");
    identity_memo_keep(&memo, "MUNGE:two:", &known, 0);
    ok(!identity_memo_recall(&memo, "MUNGE:one:", 100, &who) &&
           !identity_memo_recall(&memo, "MUNGE:two:", 100, &who),
       "a credential of unknown expiry is not kept, and replaces the old one");

    char munged[256], mungekey[256];
    if (!find_program("munged", munged, sizeof(munged)) ||
        !find_program("mungekey", mungekey, sizeof(mungekey))) {
        skip(5, "munged is not installed");
        return done_testing();
    }
    char dir[] = "/tmp/t_identity.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char cmd[2048], sock[300], pidfile[300];
    snprintf(sock, sizeof(sock), "%s/munge.sock", dir);
    snprintf(pidfile, sizeof(pidfile), "%s/munged.pid", dir);
    snprintf(cmd, sizeof(cmd),
             "%s --create --keyfile=%s/key >/dev/null 2>&1 && %s --socket=%s --key-file=%s/key"
             " --pid-file=%s --log-file=%s/log --seed-file=%s/seed --force >/dev/null 2>&1",
             mungekey, dir, munged, sock, dir, pidfile, dir, dir);
    int rc = system(cmd);
    ok(rc == 0, "munged started on %s", sock);

    char *cred = si_munge_encode(sock, &err);
    ok(cred != NULL, "credential encoded: %s", cred ? "" : err.text);
    opts.munge_socket = sock;
    ok(cred && identity_resolve(&opts, cred, &tcp, &who, &status, &err) == 0 &&
           who.uid == getuid() && who.gid == getgid() && strcmp(who.method, "munge") == 0,
       "credential decodes to our uid/gid");
    ok(cred && identity_resolve(&opts, cred, &tcp, &who, &status, &err) == -1 && status == 401 &&
           strstr(err.text, "replayed"),
       "the same credential again is a replay: %s", err.text);
    ok(identity_resolve(&opts, "MUNGE:garbage:", &tcp, &who, &status, &err) == -1 &&
           status == 401 && strstr(err.text, "invalid MUNGE credential"),
       "garbage credential: 401, %s", err.text);
    free(cred);

    FILE *f = fopen(pidfile, "r");
    long pid = 0;
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    if (pid > 0)
        kill((pid_t)pid, SIGTERM);
    for (int i = 0; i < 50 && pid > 0 && kill((pid_t)pid, 0) == 0; i++)
        usleep(100000);
    tap_remove_tree(dir);
    return done_testing();
}
