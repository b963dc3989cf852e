#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tap.h"
#include "daemon/ui/history.h"

static double value_at(json_t *j, const char *series, size_t i)
{
    json_t *v = json_array_get(json_object_get(json_object_get(j, "series"), series), i);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

int main(void)
{
    si_error_t err;
    char dir[] = "/tmp/t_history.XXXXXX", path[256];
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof(path), "%s/h.json", dir);

    ui_history_t *h = ui_history_new(3, path, &err);
    ok(h != NULL, "a history of 3 samples");
    ok(ui_history_load(h, &err) == 0 && ui_history_count(h) == 0, "no file yet: empty");
    const char *ab[] = {"a", "b"};
    const char *a_only[] = {"a"};
    double v1[] = {1, 10}, v2[] = {2}, v3[] = {3, 30}, v4[] = {4, 40};
    ok(ui_history_record(h, 100, ab, v1, 2, &err) == 0, "sample 1");
    ok(ui_history_record(h, 110, a_only, v2, 1, &err) == 0, "sample 2 without b");
    ok(ui_history_record(h, 105, a_only, v2, 1, &err) < 0 && strstr(err.text, "older"),
       "a sample older than the last is refused: %s", err.text);
    ok(ui_history_record(h, 120, ab, v3, 2, &err) == 0, "sample 3");
    json_t *j = ui_history_json(h, 0);
    is_int(json_array_size(json_object_get(j, "t")), 3, "three samples");
    ok(isnan(value_at(j, "b", 1)), "b has no value in sample 2 (null)");
    is_near(value_at(j, "b", 2), 30, 1e-9, "b in sample 3");
    json_decref(j);

    ok(ui_history_record(h, 130, ab, v4, 2, &err) == 0, "sample 4 pushes sample 1 out");
    is_int(ui_history_count(h), 3, "the ring stays at its capacity");
    j = ui_history_json(h, 0);
    is_near(json_number_value(json_array_get(json_object_get(j, "t"), 0)), 110, 1e-9,
            "the oldest kept is sample 2");
    is_near(value_at(j, "a", 2), 4, 1e-9, "the newest is sample 4");
    json_decref(j);
    j = ui_history_json(h, 125);
    is_int(json_array_size(json_object_get(j, "t")), 1, "since 125: one sample");
    json_decref(j);

    /* the series limit and names */
    char name[80];
    memset(name, 'x', 70);
    name[70] = '\0';
    const char *long_name[] = {name};
    ok(ui_history_record(h, 140, long_name, v2, 1, &err) < 0 && strstr(err.text, "characters"),
       "an over-long series name is refused: %s", err.text);
    ui_history_t *many = ui_history_new(2, NULL, &err);
    int refused = 0;
    for (int i = 0; i < UI_HISTORY_SERIES_MAX + 1; i++) {
        char n[16];
        snprintf(n, sizeof(n), "s%d", i);
        const char *names[] = {n};
        refused += ui_history_record(many, i, names, v2, 1, &err) < 0;
    }
    is_int(refused, 1, "the %dth distinct series is refused (bounded memory)",
           UI_HISTORY_SERIES_MAX + 1);
    ui_history_free(many);

    /* survives a restart */
    ok(ui_history_save(h, &err) == 0, "saved");
    ui_history_free(h);
    h = ui_history_new(3, path, &err);
    ok(ui_history_load(h, &err) == 0, "loaded again");
    is_int(ui_history_count(h), 3, "three samples back");
    j = ui_history_json(h, 0);
    is_near(value_at(j, "b", 2), 40, 1e-9, "values back");
    ok(isnan(value_at(j, "b", 0)), "nulls back");
    json_decref(j);
    ui_history_free(h);
    h = ui_history_new(2, path, &err);
    ok(ui_history_load(h, &err) == 0 && ui_history_count(h) == 2,
       "a smaller capacity keeps the newest samples");
    j = ui_history_json(h, 0);
    is_near(json_number_value(json_array_get(json_object_get(j, "t"), 0)), 120, 1e-9,
            "samples 3 and 4 kept");
    json_decref(j);
    ui_history_free(h);

    /* bad files: an error naming the file, an empty history */
    write_text(path, "{\"t\": [1, 2], \"series\": {\"a\": [1]}}");
    h = ui_history_new(3, path, &err);
    ok(ui_history_load(h, &err) < 0 && strstr(err.text, path) && strstr(err.text, "'a'"),
       "a short series is an error naming the file and series: %s", err.text);
    is_int(ui_history_count(h), 0, "and leaves the history empty");
    write_text(path, "{\"t\": [1, 2], \"series\": {\"a\": [1, \"x\"]}}");
    ok(ui_history_load(h, &err) < 0 && strstr(err.text, "not a number"),
       "a value that is no number: %s", err.text);
    is_int(ui_history_count(h), 0, "still empty");
    write_text(path, "not json");
    ok(ui_history_load(h, &err) < 0 && strstr(err.text, path), "not JSON: %s", err.text);
    ui_history_free(h);

    unlink(path);
    rmdir(dir);
    return done_testing();
}
