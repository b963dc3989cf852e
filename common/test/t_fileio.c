#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/tap.h"

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    chmod(path, mode);
}

int main(void)
{
    char dir[] = "/tmp/t_fileio.XXXXXX", path[256], missing[256];
    si_error_t err;
    size_t len = 0;
    if (!mkdtemp(dir)) {
        plan_skip_all("no temporary directory");
        return 0;
    }
    snprintf(path, sizeof(path), "%s/f", dir);
    snprintf(missing, sizeof(missing), "%s/missing", dir);

    write_file(path, "-----BEGIN CERTIFICATE-----\n", 0644);
    char *s = si_read_file(path, 100, false, &len, &err);
    ok(s && len == 28 && strcmp(s, "-----BEGIN CERTIFICATE-----\n") == 0,
       "a public file is read whole, NUL-terminated");
    free(s);
    ok(!si_read_file(path, 10, false, &len, &err) && strstr(err.text, "more than the 10"),
       "a file over the limit is refused: %s", err.text);
    ok(!si_read_file(path, 100, true, &len, &err) && strstr(err.text, "mode 0644") &&
       strstr(err.text, "chmod 600"), "as a secret, mode 0644 is refused: %s", err.text);
    chmod(path, 0600);
    s = si_read_file(path, 100, true, &len, &err);
    ok(s != NULL, "as a secret, mode 0600 is read");
    free(s);
    chmod(path, 0640);
    int fd = open(path, O_RDONLY);
    ok(si_check_private(fd, path, "the key", &err) < 0 && strstr(err.text, "lets group or others at the key"),
       "si_check_private names what the file holds: %s", err.text);
    close(fd);
    fd = open(dir, O_RDONLY);
    ok(si_check_private(fd, dir, "the key", &err) < 0 && strstr(err.text, "not a regular file"),
       "a directory is not a private file: %s", err.text);
    close(fd);
    ok(!si_read_file(missing, 100, false, &len, &err) && strstr(err.text, missing) &&
       strstr(err.text, "No such file"), "a missing file: %s", err.text);
    ok(!si_read_file(dir, 100, false, &len, &err) && strstr(err.text, "not a regular file"),
       "a directory is refused: %s", err.text);
    write_file(path, "", 0600);
    s = si_read_file(path, 100, true, &len, &err);
    ok(s && len == 0 && s[0] == '\0', "an empty file is an empty string");
    free(s);

    fd = open(path, O_RDWR | O_TRUNC);
    ok(fd >= 0 && si_write_all(fd, "hello, ", 7) == 0 && si_write_all(fd, "world", 5) == 0,
       "si_write_all appends at the file's offset");
    ok(si_pwrite_all(fd, "W", 1, 7) == 0 && lseek(fd, 0, SEEK_CUR) == 12,
       "si_pwrite_all writes at its offset and leaves the file's where it was");
    close(fd);
    s = si_read_file(path, 100, false, &len, &err);
    is_str(s, "hello, World", "the file holds both writes");
    free(s);
    ok(si_write_all(-1, "x", 1) < 0 && si_pwrite_all(-1, "x", 1, 0) < 0,
       "a bad descriptor fails");
    unlink(path);
    rmdir(dir);
    return done_testing();
}
