#include "config.h"

#include <errno.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/control/control.h"

static int parse(const char *body, control_stage_t *st, si_error_t *err)
{
    return control_parse_stage(body, strlen(body), 86400, st, err);
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

    static const struct {
        const char *body, *want;
    } bad[] = {
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

    is_int(control_status_for_errno(EINVAL), 400, "EINVAL -> 400");
    is_int(control_status_for_errno(EACCES), 403, "EACCES -> 403");
    is_int(control_status_for_errno(ENOENT), 404, "ENOENT -> 404");
    is_int(control_status_for_errno(EBUSY), 409, "EBUSY -> 409");
    is_int(control_status_for_errno(EIO), 500, "EIO -> 500");
    return done_testing();
}
