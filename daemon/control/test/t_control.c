#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/control/control.h"

static int parse(const char *body, control_stage_t *st, si_error_t *err)
{
    return control_parse_stage(body, strlen(body), 86400, "TESTSITE", st, err);
}

int main(void)
{
    si_error_t err;
    control_stage_t st;

    ok(parse("{\"datasets\": [\"imagenet\", \"coco\"], \"job\": 1234, \"priority\": 5,"
             " \"deadline\": 1900000000, \"pin_lifetime\": 600}", &st, &err) == 0,
       "full stage body parsed");
    is_int(st.ndatasets, 2, "two datasets");
    is_str(st.datasets[1], "coco", "dataset names kept");
    is_str(st.job, "1234", "numeric job id as text");
    is_int(st.priority, 5, "priority");
    is_int(st.deadline, 1900000000, "deadline");
    is_int(st.pin_lifetime, 600, "pin lifetime");
    ok(!st.on_behalf, "not on behalf of anyone");
    control_stage_free(&st);

    ok(parse("{\"files\": [\"bkt/a\", {\"path\": \"bkt/b\"}], \"manifest\": \"# m\\nbkt/c\\n\","
             " \"job\": \"77.batch\", \"uid\": 1000, \"gid\": 100}", &st, &err) == 0,
       "files in both shapes plus a manifest: %s", err.text);
    is_int(st.nfiles, 3, "files and manifest lines merged");
    is_str(st.files[1], "bkt/b", "WLCG {\"path\"} shape accepted");
    is_str(st.files[2], "bkt/c", "manifest line appended");
    is_str(st.job, "77.batch", "string job id");
    ok(st.on_behalf && st.uid == 1000 && st.gid == 100, "on behalf of uid 1000");
    is_int(st.pin_lifetime, 0, "pin lifetime left to the default");
    control_stage_free(&st);

    ok(parse("{\"files\": [{\"path\": \"/bkt/a\", \"diskLifetime\": \"PT1H\","
             " \"targetedMetadata\": {\"TESTSITE\": {\"job\": 42, \"priority\": 7},"
             " \"OTHER\": {\"anything\": [1]}}}, {\"path\": \"/bkt/b\", \"diskLifetime\": \"P1D\","
             " \"targetedMetadata\": {\"TESTSITE\": {\"job\": 42}}}]}", &st, &err) == 0,
       "Tape REST API body parsed: %s", err.text);
    is_str(st.files[0], "bkt/a", "absolute path /bkt/a names bkt/a");
    is_int(st.pin_lifetime, 86400, "the longest diskLifetime is the pin lifetime");
    is_str(st.job, "42", "job from our sitename's targetedMetadata");
    is_int(st.priority, 7, "priority from targetedMetadata");
    control_stage_free(&st);
    ok(parse("{\"datasets\": [\"/pub\"]}", &st, &err) == 0, "a dataset name with a slash parses");
    is_str(st.datasets[0], "/pub", "... and is kept as given (only file paths are absolute)");
    control_stage_free(&st);
    ok(parse("{\"files\": [{\"path\": \"/bkt/a\", \"diskLifetime\": \"PT1H\"}],"
             " \"pin_lifetime\": 60}", &st, &err) == 0 && st.pin_lifetime == 60,
       "pin_lifetime wins over diskLifetime");
    control_stage_free(&st);

    static const struct {
        const char *body, *want;
    } bad[] = {
        {"{\"files\": [{\"path\": \"/b/k\", \"diskLifetime\": \"P1M\"}]}",
         "files[0].diskLifetime: 'P1M'"},
        {"{\"files\": [{\"path\": \"/b/k\", \"diskLifetime\": 3600}]}", "ISO 8601"},
        {"{\"files\": [{\"path\": \"/b/k\", \"diskLifetime\": \"P2D\"}]}",
         "longer than this site's maximum pin lifetime of 86400 s"},
        {"{\"files\": [{\"path\": \"/b/k\", \"colour\": 1}]}", "files[0]: unknown field 'colour'"},
        {"{\"files\": [{\"path\": \"/b/k\", \"targetedMetadata\": 5}]}",
         "targetedMetadata must be an object"},
        {"{\"files\": [{\"path\": \"/b/k\", \"targetedMetadata\": {\"TESTSITE\": {\"uid\": 0}}}]}",
         "targetedMetadata.TESTSITE: unknown field 'uid'"},
        {"{\"files\": [{\"path\": \"/b/k\", \"targetedMetadata\": {\"TESTSITE\": {\"job\": 2}}}],"
         " \"job\": 1}", "differs from the value given before"},
        {"{\"files\": [{\"path\": \"/b/k\", \"targetedMetadata\": {\"TESTSITE\":"
         " {\"priority\": 5000}}}]}", "between -1000 and 1000"},
        {"{\"datasets\": [\"x\"", "malformed JSON"},
        {"[1, 2]", "must be a JSON object"},
        {"{}", "names nothing to stage"},
        {"{\"datasets\": []}", "'datasets' must be a non-empty array"},
        {"{\"datasets\": \"x\"}", "'datasets' must be a non-empty array"},
        {"{\"datasets\": [5]}", "datasets[0] must be a non-empty string"},
        {"{\"files\": [{\"name\": \"b/k\"}]}", "files[0] must be a non-empty string in \"path\""},
        {"{\"datasets\": [\"x\"], \"colour\": 1}", "unknown field 'colour'"},
        {"{\"datasets\": [\"x\"], \"priority\": 1.5}", "'priority' must be an integer"},
        {"{\"datasets\": [\"x\"], \"priority\": 5000}", "between -1000 and 1000"},
        {"{\"datasets\": [\"x\"], \"pin_lifetime\": 0}", "'pin_lifetime' must be between 1 and 86400"},
        {"{\"datasets\": [\"x\"], \"pin_lifetime\": 90000}", "between 1 and 86400"},
        {"{\"datasets\": [\"x\"], \"deadline\": -1}", "'deadline' must be between"},
        {"{\"datasets\": [\"x\"], \"job\": [1]}", "'job' must be a job id"},
        {"{\"datasets\": [\"x\"], \"uid\": 5}", "'uid' and 'gid' go together"},
        {"{\"manifest\": 7}", "'manifest' must be a string"},
        {"{\"manifest\": \"bkt/a\\nnoslash\\n\"}", "manifest line 2"},
        {"{\"datasets\": [\"x\"], \"datasets\": [\"y\"]}", "duplicate"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        int rc = parse(bad[i].body, &st, &err);
        ok(rc == -1 && strstr(err.text, bad[i].want), "refused %s: %s", bad[i].body, err.text);
        if (rc == 0)
            control_stage_free(&st);
    }

    /* the Tape REST API's times: per file, and the request's first start */
    requests_item_t items[2] = {
        {.bucket = "b", .key = "k1", .state = "COMPLETED", .started = 1700000010.5,
         .finished = 1700000020.2},
        {.bucket = "b", .key = "k2", .state = "SUBMITTED"},
    };
    requests_status_t rs = {.uuid = "u", .state = "STARTED", .created = 1700000000,
                            .nitems = 2, .items = items};
    json_t *j = control_status_json(&rs, -1);
    json_t *f0 = json_array_get(json_object_get(j, "files"), 0);
    json_t *f1 = json_array_get(json_object_get(j, "files"), 1);
    is_int(json_integer_value(json_object_get(f0, "startedAt")), 1700000010, "file startedAt");
    is_int(json_integer_value(json_object_get(f0, "finishedAt")), 1700000020, "file finishedAt");
    ok(!json_object_get(f1, "startedAt") && !json_object_get(f1, "finishedAt"),
       "a waiting file has neither time");
    is_int(json_integer_value(json_object_get(j, "startedAt")), 1700000010,
           "the request's startedAt: its first file's start");
    is_str(json_string_value(json_object_get(f0, "path")), "/b/k1", "spec path /bucket/key");
    json_decref(j);

    is_int(control_status_for_errno(EINVAL), 400, "EINVAL -> 400");
    is_int(control_status_for_errno(EACCES), 403, "EACCES -> 403");
    is_int(control_status_for_errno(ENOENT), 404, "ENOENT -> 404");
    is_int(control_status_for_errno(EBUSY), 409, "EBUSY -> 409");
    is_int(control_status_for_errno(EIO), 500, "EIO -> 500");
    return done_testing();
}
