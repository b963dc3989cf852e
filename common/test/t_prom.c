#include "config.h"

#include <string.h>

#include "common/prom.h"
#include "common/tap.h"

typedef struct {
    int n;
    si_prom_sample_t last, first;
} seen_t;

static int on_sample(const si_prom_sample_t *s, void *arg, si_error_t *err)
{
    seen_t *seen = arg;
    (void)err;
    if (seen->n++ == 0)
        seen->first = *s;
    seen->last = *s;
    return 0;
}

static int stop_at_second(const si_prom_sample_t *s, void *arg, si_error_t *err)
{
    seen_t *seen = arg;
    (void)s;
    return ++seen->n == 2 ? si_errprintf(err, "stop here") : 0;
}

int main(void)
{
    seen_t seen = {0};
    si_error_t err;
    const char *text = "# HELP stagein_mounts_total Volume mounts.\n"
                       "# TYPE stagein_mounts_total counter\n"
                       "stagein_mounts_total 42\n"
                       "\n"
                       "stagein_drive_state{drive=\"0\",state=\"reading\",volume=\"V\\\"1\"} 1\n";
    is_int(si_prom_each(text, on_sample, &seen, &err), 2, "two samples, comments skipped");
    is_str(seen.first.name, "stagein_mounts_total", "name");
    is_near(seen.first.value, 42, 1e-9, "value");
    is_str(seen.last.name, "stagein_drive_state", "labelled name");
    is_str(si_prom_label(&seen.last, "state"), "reading", "a label");
    is_str(si_prom_label(&seen.last, "volume"), "V\"1", "an escaped label value");
    is_str(si_prom_label(&seen.last, "robot"), "", "a missing label is empty");
    seen.n = 0;
    is_int(si_prom_each("x 1.5e3", on_sample, &seen, &err), 1, "no final newline");
    is_near(seen.last.value, 1500, 1e-9, "exponent");
    is_int(si_prom_each("", on_sample, &seen, &err), 0, "empty text");
    ok(si_prom_each("a 1\nbroken{x=\"1\" 3\n", on_sample, &seen, &err) < 0 &&
           strstr(err.text, "metrics line 2"),
       "a malformed line is an error naming it: %s", err.text);
    seen.n = 0;
    ok(si_prom_each("a 1\nb 2\nc 3\n", stop_at_second, &seen, &err) < 0 && seen.n == 2 &&
           strcmp(err.text, "stop here") == 0,
       "the callback stops the walk");
    return done_testing();
}
