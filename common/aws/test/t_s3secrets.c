/* The S3 secrets file: permissions, format errors with file:line, lookup. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/aws/s3secrets.h"
#include "common/tap.h"

static char path[64];

static void write_file(const char *text, size_t len, mode_t mode)
{
    FILE *f = fopen(path, "w");
    fwrite(text, 1, len, f);
    fclose(f);
    chmod(path, mode);
}

static si_secrets_t *load(const char *text, mode_t mode, si_error_t *err)
{
    write_file(text, strlen(text), mode);
    return si_secrets_load(path, err);
}

/* Session credentials: minted, checked, refused when altered, expired or
 * from another master key; the master key file's own rules. */
static void test_sessions(void)
{
    si_error_t err = {{0}};
    si_sigv4_credential_t cred;
    si_session_credential_t sc;
    char keypath[80], other[96];
    snprintf(keypath, sizeof(keypath), "/tmp/t_s3secrets.session.%d", (int)getpid());
    snprintf(other, sizeof(other), "%s.other", keypath);
    unlink(keypath);
    unlink(other);

    si_session_keys_t *k = si_session_keys_open(keypath, &err);
    struct stat st;
    ok(k && stat(keypath, &st) == 0 && (st.st_mode & 0777) == 0600 &&
           st.st_size == SI_SESSION_MASTER_LEN,
       "a missing master key is created, 0600 (%s)", k ? "ok" : err.text);
    int64_t now = 1700000000;
    ok(si_session_mint(k, 1001, 100, now + 3600, &sc, &err) == 0, "minted: %s", sc.access_key);
    is_int(strlen(sc.access_key), SI_SESSION_ACCESS_KEY_LEN, "access key length");
    is_int(strlen(sc.secret), SI_SESSION_SECRET_LEN, "secret length");
    ok(strncmp(sc.access_key, SI_SESSION_PREFIX, strlen(SI_SESSION_PREFIX)) == 0 &&
           strspn(sc.access_key, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") == strlen(sc.access_key),
       "the access key is upper-case letters and digits");
    ok(si_session_check(k, sc.access_key, now, &cred) == 0 && cred.uid == 1001 &&
           cred.gid == 100 && strcmp(cred.secret, sc.secret) == 0,
       "checked: uid, gid and the same secret");
    ok(si_session_check(k, sc.access_key, now + 3600, &cred) < 0, "refused once expired");
    si_session_credential_t sc2;
    si_session_mint(k, 1001, 100, now + 3600, &sc2, &err);
    ok(strcmp(sc.access_key, sc2.access_key) != 0 && strcmp(sc.secret, sc2.secret) != 0,
       "two credentials for the same user differ");

    /* every single-character change of the key is refused */
    int accepted = 0;
    for (size_t i = 0; i < strlen(sc.access_key); i++) {
        char altered[SI_SESSION_ACCESS_KEY_LEN + 1];
        memcpy(altered, sc.access_key, sizeof(altered));
        altered[i] = altered[i] == 'A' ? 'B' : 'A';
        accepted += si_session_check(k, altered, now, &cred) == 0;
    }
    is_int(accepted, 0, "no altered access key is accepted");
    char longer[SI_SESSION_ACCESS_KEY_LEN + 2];
    snprintf(longer, sizeof(longer), "%sA", sc.access_key);
    ok(si_session_check(k, longer, now, &cred) < 0 &&
           si_session_check(k, "STAGEIN", now, &cred) < 0 &&
           si_session_check(k, "alice", now, &cred) < 0 &&
           si_session_check(NULL, sc.access_key, now, &cred) < 0,
       "longer, short, foreign keys and no master refused");

    si_session_keys_t *again = si_session_keys_open(keypath, &err);
    ok(again && si_session_check(again, sc.access_key, now, &cred) == 0 &&
           strcmp(cred.secret, sc.secret) == 0,
       "the master key read again (a restart) still checks the credential");
    si_session_keys_free(again);
    si_session_keys_t *foreign = si_session_keys_open(other, &err);
    ok(foreign && si_session_check(foreign, sc.access_key, now, &cred) < 0,
       "another master key refuses it");
    si_session_keys_free(foreign);

    chmod(keypath, 0640);
    again = si_session_keys_open(keypath, &err);
    ok(!again && strstr(err.text, "0600 or stricter"), "a group-readable master key is "
       "refused: %s", err.text);
    chmod(keypath, 0600);
    if (truncate(keypath, 5) < 0)
        exit(99);
    again = si_session_keys_open(keypath, &err);
    ok(!again && strstr(err.text, "holds 5 bytes"), "a master key of the wrong size is "
       "refused: %s", err.text);
    si_session_keys_free(k);
    unlink(keypath);
    unlink(other);
}

int main(void)
{
    si_error_t err;
    si_sigv4_credential_t cred;
    snprintf(path, sizeof(path), "/tmp/t_s3secrets.%d", (int)getpid());

    si_secrets_t *s = load("# stageind S3 credentials\n"
                           "\n"
                           "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY 1000 100\n"
                           "  alice\tpass+word#1   1001  1001\r\n"
                           "bob s3cr3t 0 0\n",
                           0600, &err);
    ok(s != NULL, "a 0600 file loads (%s)", s ? "ok" : err.text);
    is_int(si_secrets_count(s), 3, "three credentials");
    ok(si_secrets_lookup(s, "alice", &cred) == 0 && strcmp(cred.secret, "pass+word#1") == 0 &&
       cred.uid == 1001 && cred.gid == 1001, "alice found with her secret and ids ('#' inside a "
       "secret is kept, tabs and CRLF accepted)");
    ok(si_secrets_lookup(s, "AKIAIOSFODNN7EXAMPLE", &cred) == 0 && cred.uid == 1000 &&
       strcmp(cred.secret, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY") == 0, "AWS example key");
    ok(si_secrets_lookup(s, "carol", &cred) < 0, "unknown key not found");
    ok(si_secrets_lookup(s, "Alice", &cred) < 0, "keys are case-sensitive");
    si_secrets_free(s);

    s = load("k1 s1 1 1\n", 0400, &err);
    ok(s != NULL, "0400 is accepted");
    si_secrets_free(s);
    s = load("", 0600, &err);
    ok(s && si_secrets_count(s) == 0, "an empty file is no credentials");
    ok(s && si_secrets_lookup(s, "anyone", &cred) < 0, "and looks up nobody");
    si_secrets_free(s);

    static const mode_t open_modes[] = {0644, 0640, 0604, 0660, 0602, 0620};
    for (size_t i = 0; i < sizeof(open_modes) / sizeof(open_modes[0]); i++) {
        s = load("k1 s1 1 1\n", open_modes[i], &err);
        char want[16];
        snprintf(want, sizeof(want), "mode %04o", (unsigned)open_modes[i]);
        ok(!s && strstr(err.text, path) && strstr(err.text, want) && strstr(err.text, "0600"),
           "mode %04o refused: %s", (unsigned)open_modes[i], err.text);
        si_secrets_free(s);
    }

    struct {
        const char *text, *want;
    } bad[] = {
        {"k1 s1 1\n", ":1: 3 fields"},
        {"# c\nk1 s1 1 1 extra\n", ":2: more than 4 fields"},
        {"k1 s1 1 1\nk2 s2 x 1\n", ":2: UID 'x'"},
        {"k1 s1 1 -1\n", ":1: GID '-1'"},
        {"k1 s1 1 4294967295\n", ":1: GID"},
        {"a/b s1 1 1\n", ":1: access key"},
        {"k1 s1 1 1\n\nk2 s2 2 2\nk1 s3 3 3\n", ":4: access key 'k1' repeats line 1"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        s = load(bad[i].text, 0600, &err);
        ok(!s && strstr(err.text, path) && strstr(err.text, bad[i].want), "bad file %zu: %s", i,
           err.text);
        si_secrets_free(s);
    }
    write_file("k1 s\0 1 1\n", 10, 0600);
    s = si_secrets_load(path, &err);
    ok(!s && strstr(err.text, ":1: NUL"), "NUL byte refused: %s", err.text);
    char *huge = malloc(3000);
    memset(huge, 'x', 2999);
    huge[2999] = '\0';
    s = load(huge, 0600, &err);
    ok(!s && strstr(err.text, ":1: line longer"), "overlong line refused: %s", err.text);
    free(huge);
    char longkey[200];
    memset(longkey, 'k', 129);
    strcpy(longkey + 129, " s 1 1\n");
    s = load(longkey, 0600, &err);
    ok(!s && strstr(err.text, "access key must be"), "129-byte access key refused: %s", err.text);

    /* the client side: the first line's key pair, UID/GID optional */
    si_secrets_client_t cl;
    write_file("# upstream\nKEYB secretb\nKEYA secreta 5 5\n", strlen("# upstream\nKEYB secretb\nKEYA secreta 5 5\n"), 0600);
    ok(si_secrets_load_client(path, &cl, &err) == 0 && strcmp(cl.access_key, "KEYB") == 0 &&
       strcmp(cl.secret, "secretb") == 0, "client file: the first line's key pair");
    ok(si_secrets_load(path, &err) == NULL && strstr(err.text, ":2: 2 fields"),
       "the server side still wants UID GID: %s", err.text);
    write_file("KEYB secretb\n", strlen("KEYB secretb\n"), 0644);
    ok(si_secrets_load_client(path, &cl, &err) < 0 && strstr(err.text, "mode 0644"),
       "client file readable by others refused: %s", err.text);
    write_file("# nothing\n", strlen("# nothing\n"), 0600);
    ok(si_secrets_load_client(path, &cl, &err) < 0 && strstr(err.text, "no ACCESS_KEY SECRET"),
       "client file without a key: %s", err.text);
    write_file("K S 1\n", strlen("K S 1\n"), 0600);
    ok(si_secrets_load_client(path, &cl, &err) < 0 && strstr(err.text, ":1: 3 fields"),
       "three fields refused: %s", err.text);

    unlink(path);
    s = si_secrets_load(path, &err);
    ok(!s && strstr(err.text, "cannot open"), "missing file: %s", err.text);
    s = si_secrets_load("/tmp", &err);
    ok(!s && strstr(err.text, "not a regular file"), "directory refused: %s", err.text);
    test_sessions();
    return done_testing();
}
