#include "config.h"

#include <string.h>

#include "common/tap.h"
#include "daemon/ui/prom.h"

typedef struct {
    int n;
    prom_sample_t last, first;
} seen_t;

static void on_sample(const prom_sample_t *s, void *arg)
{
    seen_t *seen = arg;
    if (seen->n++ == 0)
        seen->first = *s;
    seen->last = *s;
}

int main(void)
{
    seen_t seen = {0};
    const char *text = "# HELP stagein_mounts_total Volume mounts.\n"
                       "# TYPE stagein_mounts_total counter\n"
                       "stagein_mounts_total 42\n"
                       "broken{x=\"1\" 3\n"
                       "nolabel\n"
                       "stagein_drive_state{drive=\"0\",state=\"reading\",volume=\"V\\\"1\"} 1\n";
    is_int(prom_parse(text, on_sample, &seen), 2, "two samples, malformed lines skipped");
    is_str(seen.first.name, "stagein_mounts_total", "name");
    is_near(seen.first.value, 42, 1e-9, "value");
    is_str(seen.last.name, "stagein_drive_state", "labelled name");
    is_str(prom_label(&seen.last, "state"), "reading", "a label");
    is_str(prom_label(&seen.last, "volume"), "V\"1", "an escaped label value");
    is_str(prom_label(&seen.last, "robot"), "", "a missing label is empty");
    seen.n = 0;
    is_int(prom_parse("x 1.5e3", on_sample, &seen), 1, "no final newline");
    is_near(seen.last.value, 1500, 1e-9, "exponent");
    is_int(prom_parse("", on_sample, &seen), 0, "empty text");
    return done_testing();
}
