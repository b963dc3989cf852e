#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/tap.h"
#include "spank/jobrec.h"

int main(void)
{
    char base[] = "/tmp/t_jobrec.XXXXXX";
    if (!mkdtemp(base))
        return 1;
    char dir[256];
    snprintf(dir, sizeof(dir), "%s/run", base);
    char buf[JOBREC_VALUE_MAX];
    si_error_t err;
    is_int(jobrec_get(dir, "7", "request", buf, sizeof(buf), &err), 0, "no record: not found");
    ok(jobrec_set(dir, "7", "request", "abc-123", &err) == 0, "set creates the directory and record");
    struct stat st;
    ok(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0755, "run directory 0755");
    ok(jobrec_set(dir, "7", "staging", "TIMEOUT", &err) == 0, "a second key");
    ok(jobrec_set(dir, "7", "staging", "COMPLETED\nagent_pid=1", &err) == 0, "a value with a newline");
    is_int(jobrec_get(dir, "7", "request", buf, sizeof(buf), &err), 1, "request found");
    is_str(buf, "abc-123", "request value");
    jobrec_get(dir, "7", "staging", buf, sizeof(buf), &err);
    is_str(buf, "COMPLETED agent_pid=1", "the last value wins, its newline made a space");
    is_int(jobrec_get(dir, "7", "agent_pid", buf, sizeof(buf), &err), 0,
           "a newline in a value cannot forge another key");
    is_int(jobrec_get(dir, "8", "request", buf, sizeof(buf), &err), 0, "another job's record is separate");
    ok(jobrec_set(dir, "../x", "k", "v", &err) < 0 && strstr(err.text, "cannot name a record"),
       "a job id with '/' refused");
    ok(jobrec_set(dir, "7", "a=b", "v", &err) < 0, "a key with '=' refused");
    ok(jobrec_remove(dir, "7", &err) == 0, "remove");
    is_int(jobrec_get(dir, "7", "request", buf, sizeof(buf), &err), 0, "gone");
    ok(jobrec_remove(dir, "7", &err) == 0, "removing again is not an error");
    rmdir(dir);
    rmdir(base);
    return done_testing();
}
