/* stagein drives: the drive table from Prometheus text. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "stagein/drives.h"

static const char metrics[] =
    "# HELP stagein_requests Requests by state.\n"
    "# TYPE stagein_requests gauge\n"
    "stagein_requests{state=\"SUBMITTED\"} 2\n"
    "stagein_queued_bytes 3000\n"
    "stagein_drive_state{drive=\"0\",state=\"reading\"} 1\n"
    "stagein_drive_state{drive=\"0\",state=\"idle\"} 0\n"
    "stagein_drive_state{drive=\"1\",state=\"reading\"} 0\n"
    "stagein_drive_state{drive=\"1\",state=\"empty\",volume=\"\"} 1\n"
    "stagein_drive_volume{drive=\"0\",volume=\"L00001\"} 1\n"
    "stagein_drive_bytes_read_total{drive=\"0\"} 5000000000\n"
    "stagein_drive_bytes_read_total{drive=\"1\"} 0 1700000000000\n"
    "stagein_drive_mounts_total{drive=\"1\"} 7\r\n"
    "stagein_drive_utilisation{drive=\"0\"} 0.25\n"
    "stagein_drive_info{drive=\"lto 2\",model=\"LTO-9 \\\"fh\\\"\"} 1\n";

static void test_table(void)
{
    si_error_t err;
    si_table_t *t = drives_table(metrics, &err);
    ok(t != NULL, "metrics parse (%s)", t ? "" : err.text);
    if (!t) {
        skip(2, "no table");
        return;
    }
    is_int(si_table_rows(t), 3, "one row per drive label value");
    char *json = si_table_text(t, true);
    is_str(json,
           "[{\"drive\":\"0\",\"state\":\"reading\",\"volume\":\"L00001\","
           "\"bytes_read_total\":5000000000,\"mounts_total\":null,\"utilisation\":0.25,"
           "\"model\":null},"
           "{\"drive\":\"1\",\"state\":\"empty\",\"volume\":null,\"bytes_read_total\":0,"
           "\"mounts_total\":7,\"utilisation\":null,\"model\":null},"
           "{\"drive\":\"lto 2\",\"state\":null,\"volume\":null,\"bytes_read_total\":null,"
           "\"mounts_total\":null,\"utilisation\":null,\"model\":\"LTO-9 \\\"fh\\\"\"}]\n",
           "columns in first-seen order; one-hot states and info labels as text; numbers typed");
    free(json);
    char *human = si_table_text(t, false);
    if (!ok(human && strstr(human, "5.0 GB") && strstr(human, "reading"),
            "the human table shows bytes in units"))
        diag("%s", human);
    free(human);
    si_table_free(t);
}

static void test_no_drives(void)
{
    si_error_t err;
    si_table_t *t = drives_table("# nothing\nstagein_queued_files 0\n\n", &err);
    ok(t && si_table_rows(t) == 0, "no drive labels: an empty table");
    char *json = t ? si_table_text(t, true) : NULL;
    is_str(json, "[]\n", "--json prints an empty array");
    free(json);
    si_table_free(t);
    t = drives_table("", &err);
    ok(t && si_table_rows(t) == 0, "empty text: an empty table");
    si_table_free(t);
}

static void bad(const char *text, const char *want)
{
    si_error_t err = {{0}};
    si_table_t *t = drives_table(text, &err);
    ok(!t && strstr(err.text, want), "refused: %s", err.text);
    si_table_free(t);
}

static void test_errors(void)
{
    bad("ok_metric 1\n{drive=\"0\"} 1\n", "metrics line 2: no metric name");
    bad("m{drive=\"0\" 1\n", "metrics line 1: expected ',' or '}'");
    bad("m{drive=0} 1\n", "expected label=\"value\"");
    bad("m{drive=\"0} 1\n", "unterminated label value");
    bad("m{drive=\"\\t\"} 1\n", "bad escape");
    bad("m{drive=\"0\"} one\n", "bad sample value");
    bad("m{drive=\"0\"}1\n", "expected a space before the value");
    char many[4096] = "";
    for (int i = 0; i < 40; i++) {
        char line[64];
        snprintf(line, sizeof(line), "stagein_drive_m%d{drive=\"0\"} 1\n", i);
        strcat(many, line);
    }
    bad(many, "more than 32 drive metrics");
}

int main(void)
{
    test_table();
    test_no_drives();
    test_errors();
    return done_testing();
}
