/* The real-time engine delivering real bytes from volume images. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/tap.h"
#include "daemon/simlib/volume_fetch.h"
#include "daemon/volume/volume.h"

typedef struct {
    unsigned char *got;
    size_t len;
    int done, failed;
    char why[512];
    simlib_volume_reader_t *reader;
    const void *buf;     /* the buffer of the last chunk delivered */
    /* with a room: got offered, at most room_max bytes of it */
    bool rooms;
    size_t room_max;
    int bytes_calls, landed_calls;
    size_t landed;       /* bytes announced as landed in got */
} sink_t;

static int sink(void *arg, const simlib_read_t *r, uint64_t at, const void *buf, size_t len,
                si_error_t *err);

static void *room(void *arg, size_t *len)
{
    sink_t *s = arg;
    *len = s->len - s->landed < s->room_max ? s->len - s->landed : s->room_max;
    return s->got + s->landed;
}

static int landed(void *arg, const simlib_read_t *r, uint64_t at, size_t len, si_error_t *err)
{
    (void)r;
    (void)err;
    sink_t *s = arg;
    if (at != s->landed)
        return -1;
    s->landed += len;
    s->landed_calls++;
    return 0;
}

/* The engine's callbacks share one argument: ours, holding the reader. */
static int fetch(void *arg, const simlib_read_t *r, si_error_t *err)
{
    sink_t *s = arg;
    simlib_sink_t to = {sink, s->rooms ? room : NULL, landed, s};
    return simlib_volume_fetch(s->reader, r, &to, err);
}

static int sink(void *arg, const simlib_read_t *r, uint64_t at, const void *buf, size_t len,
                si_error_t *err)
{
    (void)err;
    sink_t *s = arg;
    if (at + len > s->len || r->size > s->len)
        return -1;
    memcpy(s->got + at, buf, len);
    s->buf = buf;
    s->bytes_calls++;
    return 0;
}

/* Request id reads the member at position, of size bytes; waits until done. */
static void read_member(simlib_t *lib, uint64_t id, uint64_t position, uint64_t size)
{
    si_error_t err;
    sched_file_t file = {id, 1, {{0, position, size}}};
    sched_request_t request = {id, 0, 0};
    if (simlib_submit(lib, 0, &request, &file, 1, &err) < 0)
        diag("request %llu not submitted: %s", (unsigned long long)id, err.text);
    simlib_wait_idle(lib);
}

static void on_request(void *arg, uint64_t request, double t, size_t failed, const char *why)
{
    (void)request;
    (void)t;
    sink_t *s = arg;
    s->done++;
    if (failed) {
        s->failed++;
        snprintf(s->why, sizeof(s->why), "%s", why);
    }
}

int main(void)
{
    si_error_t err = {{0}};
    char dir[] = "/tmp/t_volume_fetch.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char src[4200];
    snprintf(src, sizeof(src), "%s/src", dir);
    size_t size = 3 * 1024 * 1024 + 17;
    unsigned char *data = malloc(size);
    for (size_t i = 0; i < size; i++)
        data[i] = (unsigned char)(i * 131 + 7);
    FILE *f = fopen(src, "wb");
    fwrite(data, 1, size, f);
    fclose(f);

    ok(tapevol_create(dir, "F00001", "LTO-9", 18000000000000ULL, &err) == 0, "volume created: %s",
       err.text);
    tapevol_t *vol = tapevol_open(dir, "F00001", TAPEVOL_RDWR, &err);
    tapevol_member_t m[2] = {
        {.bucket = "bkt", .key = "one", .path = src, .fd = -1, .size = size},
        {.bucket = "bkt", .key = "two", .path = src, .fd = -1, .size = size},
    };
    tapevol_listing_t *written = NULL;
    if (!ok(vol && tapevol_append(vol, m, 2, &written, &err) == 0, "two members written: %s",
            err.text))
        return done_testing();
    tapevol_info_t info;
    tapevol_info(vol, &info, &err);

    simlib_config_t cfg;
    simlib_config_default(&cfg);
    cfg.time_scale = 1e-5;
    simlib_config_add_volume(&cfg, "F00001", info.used, &err);
    sink_t s = {calloc(1, size), size, 0, 0, "", NULL, NULL, false, 0, 0, 0, 0};
    simlib_volume_reader_t *rd = simlib_volume_reader_new(dir, &cfg, &err);
    s.reader = rd;
    simlib_callbacks_t cb = {on_request, NULL, fetch, &s};
    sched_options_t opt;
    sched_options_default(&opt);
    simlib_t *lib = simlib_new(&cfg, sched_policy_find("job-aware", NULL), &opt, &cb, &err);
    ok(lib && simlib_start(lib, &err) == 0, "engine running in real time");

    read_member(lib, 1, written->entries[0].position, size);
    ok(s.done == 1 && s.failed == 0, "request complete");
    ok(memcmp(s.got, data, size) == 0, "the sink received the member's bytes, read from the volume");
    const void *first_buf = s.buf;
    ok(((uintptr_t)first_buf & 4095) == 0, "delivered from an address aligned for direct I/O");

    ok(tapevol_fault_add(vol, written->entries[1].position + 100, 10, &err) == 0,
       "unreadable region on the second member");
    read_member(lib, 2, written->entries[1].position, size);
    ok(s.done == 2 && s.failed == 1 && strstr(s.why, "unreadable"),
       "a read into it fails with the volume's reason: %s", s.why);
    /* the same member again, after the failed read: the buffer is kept */
    memset(s.got, 0, size);
    read_member(lib, 3, written->entries[0].position, size);
    ok(s.done == 3 && s.failed == 1 && memcmp(s.got, data, size) == 0,
       "read again: the member's bytes, identical");
    ok(s.buf == first_buf, "from the buffer the first read used (kept for the next fetch)");

    /* a sink with room for the bytes: they land in it, not copied from ours */
    memset(s.got, 0, size);
    s.rooms = true;
    s.room_max = size;
    s.bytes_calls = 0;
    read_member(lib, 4, written->entries[0].position, size);
    ok(s.done == 4 && s.failed == 1 && memcmp(s.got, data, size) == 0,
       "read into the sink's room: the member's bytes, identical");
    ok(s.landed == size && s.landed_calls == 1 && s.bytes_calls == 0,
       "announced as landed, in one chunk, never passed as bytes (%zu landed in %d, %d passed)",
       s.landed, s.landed_calls, s.bytes_calls);
    /* a room smaller than a chunk: that chunk goes through the reader's buffer */
    memset(s.got, 0, size);
    s.landed = 0;
    s.landed_calls = 0;
    s.room_max = 4096;
    read_member(lib, 5, written->entries[0].position, size);
    ok(s.done == 5 && s.failed == 1 && memcmp(s.got, data, size) == 0 && s.landed == 0 &&
       s.bytes_calls == 1, "a room too small for the chunk: passed as bytes, identical");
    /* the unreadable member with room: it fails, and nothing is announced */
    s.room_max = size;
    read_member(lib, 6, written->entries[1].position, size);
    ok(s.done == 6 && s.failed == 2 && s.landed == 0 && s.landed_calls == 0,
       "an unreadable region read into the room fails, nothing announced as landed");

    simlib_stats_t st;
    simlib_stats(lib, &st);
    is_int(st.violations, 0, "no invariant broken");

    simlib_free(lib);
    simlib_volume_reader_free(rd);
    simlib_config_free(&cfg);
    tapevol_listing_free(written);
    tapevol_close(vol);
    free(s.got);
    free(data);
    tap_remove_tree(dir);
    return done_testing();
}
