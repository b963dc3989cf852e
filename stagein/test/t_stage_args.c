/* stagein request's arguments: durations, deadlines, priorities, the
 * request body and manifest files. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tap.h"
#include "stagein/stage_args.h"

static void duration_ok(const char *text, int64_t want)
{
    int64_t got = -1;
    si_error_t err = {{0}};
    int rc = stage_parse_duration(text, &got, &err);
    ok(rc == 0 && got == want, "duration '%s' = %lld s (got %lld, %s)", text, (long long)want,
       (long long)got, err.text);
}

static void duration_bad(const char *text, const char *want)
{
    int64_t got = 42;
    si_error_t err = {{0}};
    int rc = stage_parse_duration(text, &got, &err);
    ok(rc < 0 && got == 42 && strstr(err.text, want), "duration '%s' refused: %s", text,
       err.text);
}

static const time_t NOW = 1700000000;

static void deadline_ok(const char *text, int64_t want)
{
    int64_t got = -1;
    si_error_t err = {{0}};
    int rc = stage_parse_deadline(text, NOW, &got, &err);
    ok(rc == 0 && got == want, "deadline '%s' = %lld (got %lld, %s)", text, (long long)want,
       (long long)got, err.text);
}

static void deadline_bad(const char *text, const char *want)
{
    int64_t got = 42;
    si_error_t err = {{0}};
    int rc = stage_parse_deadline(text, NOW, &got, &err);
    ok(rc < 0 && got == 42 && strstr(err.text, want), "deadline '%s' refused: %s", text,
       err.text);
}

static void test_durations(void)
{
    duration_ok("90", 90);
    duration_ok("90s", 90);
    duration_ok("15m", 900);
    duration_ok("2h", 7200);
    duration_ok("1d", 86400);
    duration_ok("1w", 604800);
    duration_ok("1h30m", 5400);
    duration_ok("1d2h3m4s", 86400 + 7200 + 180 + 4);
    duration_bad("", "bad duration ''");
    duration_bad("0", "more than zero");
    duration_bad("0s", "more than zero");
    duration_bad("1x", "bad duration '1x'");
    duration_bad("h", "bad duration 'h'");
    duration_bad("1h30", "bad duration '1h30'");
    duration_bad("-5", "bad duration '-5'");
    duration_bad("5 m", "bad duration");
    duration_bad("99999999999999999999", "too large");
    duration_bad("9999999999999999w", "too large");
}

static void test_deadlines(void)
{
    setenv("TZ", "UTC0", 1);
    tzset();
    deadline_ok("+2h", NOW + 7200);
    deadline_ok("+90", NOW + 90);
    deadline_ok("@1800000000", 1800000000);
    deadline_ok("1800000000", 1800000000);
    deadline_ok("2030-01-02T03:04:05Z", 1893553445);
    deadline_ok("2030-01-02 03:04Z", 1893553440);
    deadline_ok("2030-01-02T03:04:05", 1893553445);
    /* local time: one hour east of UTC is an hour earlier in UTC */
    setenv("TZ", "XST-1", 1);
    tzset();
    deadline_ok("2030-01-02T03:04:05", 1893553445 - 3600);
    deadline_ok("2030-01-02T03:04:05Z", 1893553445);
    setenv("TZ", "UTC0", 1);
    tzset();
    deadline_bad("tomorrow", "bad deadline 'tomorrow' (examples:");
    deadline_bad("2030-02-30T00:00", "bad deadline");
    deadline_bad("2030-01-02", "bad deadline");
    deadline_bad("2030-01-02T25:00", "bad deadline");
    deadline_bad("2030-01-02T03:04:05+01", "bad deadline");
    deadline_bad("@12x", "unix seconds");
    deadline_bad("@", "unix seconds");
    deadline_bad("1000", "in the past");
    deadline_bad("2001-01-01T00:00Z", "in the past");
    deadline_bad("+0", "deadline '+0': duration '0' must be more than zero");
    deadline_bad("+soon", "deadline '+soon': bad duration");
}

static void test_priority(void)
{
    int p = 7;
    si_error_t err;
    ok(stage_parse_priority("5", &p, &err) == 0 && p == 5, "priority 5");
    ok(stage_parse_priority("-1000", &p, &err) == 0 && p == -1000, "priority -1000");
    ok(stage_parse_priority("1000", &p, &err) == 0 && p == 1000, "priority 1000");
    p = 7;
    ok(stage_parse_priority("1001", &p, &err) < 0 && p == 7 &&
           strstr(err.text, "priority 1001 is out of range (-1000 to 1000)"),
       "priority 1001 refused: %s", err.text);
    ok(stage_parse_priority("high", &p, &err) < 0 && strstr(err.text, "bad priority 'high'"),
       "priority 'high' refused: %s", err.text);
    ok(stage_parse_priority("", &p, &err) < 0, "empty priority refused");
    ok(stage_parse_priority("5x", &p, &err) < 0, "priority '5x' refused");
    ok(stage_parse_priority(" 5", &p, &err) < 0, "priority ' 5' refused");
    is_int(p, 7, "a refused priority leaves the value alone");
}

static void test_user(void)
{
    int64_t uid = 7, gid = 7;
    si_error_t err;
    ok(stage_parse_user("65534:100", &uid, &gid, &err) == 0 && uid == 65534 && gid == 100,
       "user 65534:100");
    ok(stage_parse_user("0:0", &uid, &gid, &err) == 0 && uid == 0 && gid == 0, "user 0:0");
    static const char *const bad[] = {"65534", ":100", "65534:", "a:b", "1:2:3", "-1:5",
                                      "4294967295:0", "12345678901234567:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uid = gid = 7;
        ok(stage_parse_user(bad[i], &uid, &gid, &err) < 0 && uid == 7 && gid == 7 &&
               strstr(err.text, "is not UID:GID"),
           "user '%s' refused: %s", bad[i], err.text);
    }
}

static char *body_text(const stage_opts_t *o, si_error_t *err)
{
    json_t *b = stage_request_body(o, err);
    if (!b)
        return NULL;
    char *text = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(b);
    return text;
}

static void test_body(void)
{
    const char *datasets[] = {"climate", "era5"};
    const char *files[] = {"data/a.bin", "data/dir/"};
    stage_opts_t o = {.datasets = datasets, .ndatasets = 2, .files = files, .nfiles = 2,
                      .manifest = "data/m1\n# comment\n", .job = "4242", .has_priority = true,
                      .priority = -3, .deadline = 1800000000, .pin_lifetime = 3600};
    si_error_t err;
    char *text = body_text(&o, &err);
    is_str(text,
           "{\"datasets\":[\"climate\",\"era5\"],\"deadline\":1800000000,\"files\":[\"data/a.bin\","
           "\"data/dir/\"],\"job\":\"4242\",\"manifest\":\"data/m1\\n# comment\\n\","
           "\"pin_lifetime\":3600,\"priority\":-3}",
           "every option in the body");
    free(text);

    stage_opts_t only = {.datasets = datasets, .ndatasets = 1};
    text = body_text(&only, &err);
    is_str(text, "{\"datasets\":[\"climate\"]}", "defaults are left to the daemon");
    free(text);

    stage_opts_t zero_priority = {.files = files, .nfiles = 1, .has_priority = true};
    text = body_text(&zero_priority, &err);
    is_str(text, "{\"files\":[\"data/a.bin\"],\"priority\":0}", "an explicit priority 0 is sent");
    free(text);

    stage_opts_t none = {.job = "1"};
    ok(body_text(&none, &err) == NULL && strstr(err.text, "nothing to stage"),
       "a request naming nothing is refused: %s", err.text);

    stage_opts_t behalf = {.datasets = datasets, .ndatasets = 1, .for_user = true, .uid = 65534,
                           .gid = 100};
    text = body_text(&behalf, &err);
    is_str(text, "{\"datasets\":[\"climate\"],\"gid\":100,\"uid\":65534}",
           "on behalf of a user: uid and gid");
    free(text);
    stage_opts_t root_self = {.datasets = datasets, .ndatasets = 1, .uid = 0, .gid = 0};
    text = body_text(&root_self, &err);
    is_str(text, "{\"datasets\":[\"climate\"]}", "uid 0 without for_user sends no uid");
    free(text);

    const char *bad[] = {"caf\xe9"};
    stage_opts_t latin1 = {.datasets = bad, .ndatasets = 1};
    ok(body_text(&latin1, &err) == NULL && strstr(err.text, "not valid UTF-8"),
       "a name that is not UTF-8 is refused: %s", err.text);
}

static void test_manifest(void)
{
    char dir[] = "/tmp/t_stage_args.XXXXXX";
    if (!mkdtemp(dir)) {
        skip(4, "no temporary directory");
        return;
    }
    char path[256];
    snprintf(path, sizeof(path), "%s/list", dir);
    FILE *f = fopen(path, "w");
    fputs("data/a\n\ndata/b/\n", f);
    fclose(f);
    si_error_t err;
    char *text = stage_read_manifest(path, &err);
    is_str(text, "data/a\n\ndata/b/\n", "manifest read whole");
    free(text);

    f = fopen(path, "w");
    fclose(f);
    text = stage_read_manifest(path, &err);
    is_str(text, "", "an empty manifest is an empty string (the daemon says it names nothing)");
    free(text);

    f = fopen(path, "w");
    fwrite("data/a\0x\n", 1, 9, f);
    fclose(f);
    ok(stage_read_manifest(path, &err) == NULL && strstr(err.text, "contains a NUL byte"),
       "binary manifest refused: %s", err.text);
    unlink(path);

    ok(stage_read_manifest(path, &err) == NULL && strstr(err.text, path) &&
           strstr(err.text, "No such file"),
       "missing manifest named: %s", err.text);
    rmdir(dir);
}

int main(void)
{
    test_durations();
    test_deadlines();
    test_priority();
    test_user();
    test_body();
    test_manifest();
    return done_testing();
}
