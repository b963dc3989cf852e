/* squeue parsing and the reconciliation plan. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/tap.h"
#include "daemon/jobs/reconcile.h"
#include "daemon/jobs/slurm.h"

static time_t local_time(const char *text)
{
    struct tm tm = {0};
    strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
    tm.tm_isdst = -1;
    return mktime(&tm);
}

static requests_holder_t holder(int64_t id, const char *uuid, uid_t uid, double created,
                                requests_holder_kind_t kind, const char *h)
{
    requests_holder_t x = {.request_id = id, .uid = uid, .created = created, .kind = kind};
    snprintf(x.uuid, sizeof(x.uuid), "%s", uuid);
    snprintf(x.holder, sizeof(x.holder), "%s", h);
    return x;
}

static const reconcile_action_t *find(const reconcile_action_t *p, size_t n, const char *uuid,
                                      reconcile_verb_t verb)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(p[i].uuid, uuid) == 0 && p[i].verb == verb)
            return &p[i];
    return NULL;
}

int main(void)
{
    si_error_t err;
    slurm_job_t *jobs = NULL;
    size_t nj = 0;
    const char *text =
        "3    1    0    1000  COMPLETED  2026-12-01T10:00:00  localhost  1252\n"
        "1    1    1-3  1000  PENDING    2026-12-01T10:00:00  localhost  1252\n"
        "7    7    N/A  1000  CANCELLED  2026-12-01T10:05:00  (null)     800\n"
        "\n"
        "8    8    N/A  2000  RUNNING    2026-12-01T10:06:00  n1         900\n"
        "9    9    N/A  1000  PENDING    N/A                  n1         N/A\n";
    /* the node column is not asked for: drop it from each line */
    char fixed[1024] = "";
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        char line[200];
        snprintf(line, sizeof(line), "%.*s", (int)(nl - p), p);
        char a[6][40], node[40], sid[40];
        if (sscanf(line, "%39s %39s %39s %39s %39s %39s %39s %39s", a[0], a[1], a[2], a[3],
                   a[4], a[5], node, sid) == 8) {
            char out[300];
            snprintf(out, sizeof(out), "%s %s %s %s %s %s %s\n", a[0], a[1], a[2], a[3], a[4],
                     a[5], sid);
            strcat(fixed, out);
        } else {
            strcat(fixed, "\n");
        }
        p = nl + 1;
    }
    ok(slurm_jobs_parse(fixed, &jobs, &nj, &err) == 0, "squeue output parsed: %s",
       nj ? "" : err.text);
    is_int(nj, 5, "five records, blank line skipped");
    if (nj == 5) {
        is_str(jobs[0].id, "3", "job id");
        is_str(jobs[0].array_id, "1", "an array task names its array");
        is_str(jobs[1].array_id, "1", "the array's pending record too");
        is_str(jobs[2].array_id, "", "a plain job has no array");
        is_int(jobs[2].sid, 800, "session id");
        is_int(jobs[3].uid, 2000, "uid");
        ok(jobs[0].submitted == local_time("2026-12-01T10:00:00"), "submit time (local)");
        is_int(jobs[4].submitted, 0, "N/A submit time: 0");
        is_int(jobs[4].sid, -1, "N/A session: -1");
    }
    slurm_job_t *bad = NULL;
    size_t nb = 0;
    ok(slurm_jobs_parse("3 1 0 1000 COMPLETED\n", &bad, &nb, &err) == -1 &&
           strstr(err.text, "line 1"),
       "a short line is refused, naming it: %s", err.text);
    ok(slurm_jobs_parse("x 1 N/A 1000 RUNNING 2026-12-01T10:00:00 5\n", &bad, &nb, &err) == -1,
       "a job id must be a number");
    ok(slurm_state_final("CANCELLED") && slurm_state_final("NODE_FAIL") &&
           slurm_state_final("COMPLETING") && !slurm_state_final("PENDING") &&
           !slurm_state_final("RUNNING") && !slurm_state_final("SUSPENDED") &&
           !slurm_state_final("REQUEUE_HOLD"),
       "final states");

    double t0 = (double)local_time("2026-12-01T10:00:00");
    requests_holder_t h[] = {
        holder(1, "req-array", 1000, t0 - 0.5, REQUESTS_HOLDER_SUBMISSION, "vm:1252"),
        holder(2, "req-cancelled", 1000, t0 + 299.5, REQUESTS_HOLDER_SUBMISSION, "vm:800"),
        holder(3, "req-orphan", 1000, t0 - 1000, REQUESTS_HOLDER_SUBMISSION, "vm:4444"),
        holder(4, "req-young", 1000, t0 + 1000, REQUESTS_HOLDER_SUBMISSION, "vm:5555"),
        holder(5, "req-running", 2000, t0, REQUESTS_HOLDER_JOB, "8"),
        holder(6, "req-gone", 2000, t0, REQUESTS_HOLDER_JOB, "6"),
        holder(7, "req-arr-live", 1000, t0, REQUESTS_HOLDER_ARRAY, "1"),
        holder(8, "req-other-user", 2000, t0, REQUESTS_HOLDER_SUBMISSION, "vm:1252"),
        holder(9, "req-done-task", 1000, t0, REQUESTS_HOLDER_JOB, "3"),
    };
    size_t nh = sizeof(h) / sizeof(h[0]);
    reconcile_action_t *plan = NULL;
    size_t np = 0;
    /* req-arr-live holds array 1: req-array may not take it as well */
    ok(reconcile_plan(h, nh, NULL, 0, jobs, nj, t0 + 1001, 300, &plan, &np, &err) == 0, "plan made");
    const reconcile_action_t *a;
    ok(!find(plan, np, "req-array", RECONCILE_RESOLVE),
       "an array held by another request is not claimed twice");
    a = find(plan, np, "req-cancelled", RECONCILE_RESOLVE);
    ok(a &&
           a->to_kind == REQUESTS_HOLDER_JOB && strcmp(a->to, "7") == 0,
       "a submission is matched by uid, session and time to its job");
    a = find(plan, np, "req-cancelled", RECONCILE_UNHOLD);
    ok(a && a->kind == REQUESTS_HOLDER_JOB &&
           strstr(a->why, "CANCELLED"),
       "... which was cancelled while pending: its holder goes at once (%s)", a ? a->why : "");
    a = find(plan, np, "req-orphan", RECONCILE_UNHOLD);
    ok(a && strstr(a->why, "no Slurm job"),
       "a submission no job claimed within the grace goes: %s", a ? a->why : "");
    ok(!find(plan, np, "req-young", RECONCILE_UNHOLD), "a young submission waits");
    ok(!find(plan, np, "req-running", RECONCILE_UNHOLD), "a running job keeps its request");
    a = find(plan, np, "req-gone", RECONCILE_UNHOLD);
    ok(a && strstr(a->why, "no longer knows"),
       "a job Slurm forgot has ended: %s", a ? a->why : "");
    ok(!find(plan, np, "req-arr-live", RECONCILE_UNHOLD), "an array with a pending task lives");
    ok(!find(plan, np, "req-other-user", RECONCILE_RESOLVE),
       "another user's job never matches a submission");
    a = find(plan, np, "req-done-task", RECONCILE_UNHOLD);
    ok(a && strstr(a->why, "COMPLETED"),
       "a finished array task's own holder goes");
    free(plan);

    /* without the competing array holder the submission takes the array */
    ok(reconcile_plan(h, 1, NULL, 0, jobs, nj, t0 + 5, 300, &plan, &np, &err) == 0 && np == 0,
       "a young submission is left for sbatch to name");
    free(plan);
    ok(reconcile_plan(h, 1, NULL, 0, jobs, nj, t0 + 15, 300, &plan, &np, &err) == 0 && np == 1 &&
           plan[0].verb == RECONCILE_RESOLVE && plan[0].to_kind == REQUESTS_HOLDER_ARRAY &&
           strcmp(plan[0].to, "1") == 0,
       "an array's submission resolves to the array");
    free(plan);
    /* every task final: the array ends */
    strcpy(jobs[1].state, "COMPLETED");
    ok(reconcile_plan(&h[6], 1, NULL, 0, jobs, nj, t0 + 5, 300, &plan, &np, &err) == 0 && np == 1 &&
           plan[0].verb == RECONCILE_UNHOLD && strstr(plan[0].why, "every task finished"),
       "the array ends with its last task");
    free(plan);
    /* a job a (released) request already named never takes a submission */
    requests_job_id_t known[1] = {"1"};
    ok(reconcile_plan(h, 1, known, 1, jobs, nj, t0 + 15, 300, &plan, &np, &err) == 0 && np == 0,
       "a job that had a request is not another submission's");
    free(plan);
    /* a job submitted before the request was made is not its job */
    requests_holder_t late = holder(10, "req-late", 1000, t0 + 2.5, REQUESTS_HOLDER_SUBMISSION,
                                    "vm:1252");
    ok(reconcile_plan(&late, 1, NULL, 0, jobs, nj, t0 + 15, 300, &plan, &np, &err) == 0 && np == 0,
       "a job older than the request does not match it");
    free(plan);
    free(jobs);
    return done_testing();
}
