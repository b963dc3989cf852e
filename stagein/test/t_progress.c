/* stagein wait's progress: the status from the daemon's JSON, the rate
 * window, the terminal bar and the plain log line. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "stagein/progress.h"

/* The example of doc/control-api.md. */
static const char status_doc[] =
    "{\"id\": \"6f1c\", \"state\": \"STARTED\", \"uid\": 1000, \"gid\": 100, \"job\": \"4242\","
    " \"priority\": 3, \"deadline\": null, \"pinLifetime\": 86400,"
    " \"createdAt\": 1795965067.12, \"lastModified\": 1795965070.5,"
    " \"filesTotal\": 2, \"filesCompleted\": 1, \"filesFailed\": 0,"
    " \"bytesTotal\": 3000, \"bytesDone\": 1400, \"queuePosition\": 1, \"eta\": null,"
    " \"files\": []}";

static void test_from_json(void)
{
    json_t *j = json_loads(status_doc, 0, NULL);
    progress_status_t s;
    si_error_t err;
    ok(progress_status_from_json(j, &s, &err) == 0, "the documented status parses");
    is_str(s.id, "6f1c", "id");
    is_str(s.state, "STARTED", "state");
    ok(s.files_total == 2 && s.files_completed == 1 && s.files_failed == 0, "file counts");
    ok(s.bytes_total == 3000 && s.bytes_done == 1400, "byte counts");
    is_int(s.queue_position, 1, "queue position");
    ok(s.eta < 0, "eta null: not given");
    json_object_set_new(j, "eta", json_real(12.5));
    progress_status_from_json(j, &s, &err);
    is_near(s.eta, 12.5, 1e-9, "eta from the daemon");
    json_object_del(j, "bytesDone");
    ok(progress_status_from_json(j, &s, &err) < 0 && strstr(err.text, "'bytesDone'"),
       "a missing field is named: %s", err.text);
    json_decref(j);
    j = json_array();
    ok(progress_status_from_json(j, &s, &err) < 0 && strstr(err.text, "not a JSON object"),
       "not an object: %s", err.text);
    json_decref(j);
    ok(progress_status_from_json(NULL, &s, &err) < 0, "no JSON at all");
}

static void test_final(void)
{
    ok(progress_state_final("COMPLETED") && progress_state_final("FAILED") &&
           progress_state_final("CANCELLED") && progress_state_final("RELEASED"),
       "COMPLETED, FAILED, CANCELLED, RELEASED end a wait");
    ok(!progress_state_final("SUBMITTED") && !progress_state_final("STARTED"),
       "SUBMITTED and STARTED do not");
}

static void test_rate(void)
{
    progress_rate_t r;
    progress_rate_init(&r);
    ok(progress_rate(&r) < 0, "no samples: unknown");
    progress_rate_add(&r, 100.0, 0);
    ok(progress_rate(&r) < 0, "one sample: unknown");
    progress_rate_add(&r, 100.0, 50);
    ok(progress_rate(&r) < 0, "two samples at the same time: unknown");
    progress_rate_add(&r, 102.0, 250);
    is_near(progress_rate(&r), 125.0, 1e-9, "250 bytes over 2 s");

    /* a burst, then 20 s at 1000 B/s: only the last 10 s count */
    progress_rate_init(&r);
    progress_rate_add(&r, 0.0, 0);
    progress_rate_add(&r, 1.0, 1000000);
    for (int t = 2; t <= 21; t++)
        progress_rate_add(&r, (double)t, 1000000 + 1000 * (int64_t)(t - 1));
    is_near(progress_rate(&r), 1000.0, 1e-6, "the window forgets the burst");

    /* more samples than slots: the oldest are dropped */
    progress_rate_init(&r);
    for (int i = 0; i < 3 * PROGRESS_RATE_SAMPLES; i++)
        progress_rate_add(&r, i * 0.1, (int64_t)i * 10);
    is_near(progress_rate(&r), 100.0, 1e-6, "steady 100 B/s through a full ring");

    progress_rate_init(&r);
    progress_rate_add(&r, 0.0, 500);
    progress_rate_add(&r, 1.0, 500);
    is_near(progress_rate(&r), 0.0, 1e-9, "no progress: 0 B/s");
}

static void test_rendering(void)
{
    progress_status_t s = {.id = "r1", .state = "STARTED", .files_total = 10,
                           .files_completed = 3, .bytes_total = 4000000000,
                           .bytes_done = 1200000000, .eta = 80};
    char buf[512];
    is_str(progress_bar(&s, 120e6, 100, buf, sizeof(buf)),
           "[==========>                       ]  30%  3/10 files  1.2 GB/4.0 GB  120.0 MB/s"
           "  ETA 1m20s  STARTED",
           "bar fills a 100-column terminal");
    is_int(strlen(buf), 100, "exactly the terminal's width");
    is_str(progress_bar(&s, 120e6, 40, buf, sizeof(buf)), "[===>      ]  30%  3/10 files  1.2 GB/4.",
           "a narrow terminal: the line is cut, never wrapped");
    is_str(progress_line(&s, 120e6, buf, sizeof(buf)),
           "request r1: STARTED, 3/10 files, 1.2 GB of 4.0 GB, 120.0 MB/s, ETA 1m20s",
           "plain line");

    progress_status_t done = {.id = "r2", .state = "COMPLETED", .files_total = 2,
                              .files_completed = 2, .bytes_total = 3000, .bytes_done = 3000,
                              .eta = -1};
    is_str(progress_bar(&done, -1, 80, buf, sizeof(buf)),
           "[=================================] 100%  2/2 files  3.0 kB/3.0 kB  -  COMPLETED",
           "complete: a full bar, unknown rate shown as -");
    is_str(progress_line(&done, -1, buf, sizeof(buf)),
           "request r2: COMPLETED, 2/2 files, 3.0 kB of 3.0 kB", "plain line without rate or ETA");

    progress_status_t queued = {.id = "r3", .state = "SUBMITTED", .files_total = 2,
                                .bytes_total = 3000, .queue_position = 2, .eta = -1};
    is_str(progress_bar(&queued, -1, 80, buf, sizeof(buf)),
           "[>                       ]   0%  0/2 files  0 B/3.0 kB  -  SUBMITTED #2 in queue",
           "queued: empty bar and the queue position");
    is_str(progress_line(&queued, 0, buf, sizeof(buf)),
           "request r3: SUBMITTED #2 in queue, 0/2 files, 0 B of 3.0 kB, 0 B/s",
           "plain line with the queue position");

    progress_status_t failed = {.id = "r4", .state = "FAILED", .files_total = 4,
                                .files_completed = 3, .files_failed = 1, .eta = -1};
    is_str(progress_line(&failed, -1, buf, sizeof(buf)),
           "request r4: FAILED (1 failed), 3/4 files, 0 B of 0 B", "failed files counted");
    ok(strncmp(progress_bar(&failed, -1, 80, buf, sizeof(buf)), "[=====", 6) == 0 &&
           strstr(buf, "100%"),
       "sizes unknown: progress by finished files (%s)", buf);
}

int main(void)
{
    test_from_json();
    test_final();
    test_rate();
    test_rendering();
    return done_testing();
}
