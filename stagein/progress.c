#include "config.h"
#include "stagein/progress.h"

#include <stdio.h>
#include <string.h>

#include "common/text.h"

static int get_int(const json_t *j, const char *name, int64_t *out, si_error_t *err)
{
    const json_t *v = json_object_get(j, name);
    if (!json_is_integer(v))
        return si_errprintf(err, "stageind's status has no integer '%s'", name);
    *out = (int64_t)json_integer_value(v);
    return 0;
}

int progress_status_from_json(const json_t *j, progress_status_t *out, si_error_t *err)
{
    progress_status_t s;
    memset(&s, 0, sizeof(s));
    if (!json_is_object(j))
        return si_errprintf(err, "stageind's status is not a JSON object");
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *state = json_string_value(json_object_get(j, "state"));
    if (!id || !state)
        return si_errprintf(err, "stageind's status has no '%s'", id ? "state" : "id");
    snprintf(s.id, sizeof(s.id), "%s", id);
    snprintf(s.state, sizeof(s.state), "%s", state);
    if (get_int(j, "filesTotal", &s.files_total, err) < 0 ||
        get_int(j, "filesCompleted", &s.files_completed, err) < 0 ||
        get_int(j, "filesFailed", &s.files_failed, err) < 0 ||
        get_int(j, "bytesTotal", &s.bytes_total, err) < 0 ||
        get_int(j, "bytesDone", &s.bytes_done, err) < 0 ||
        get_int(j, "queuePosition", &s.queue_position, err) < 0)
        return -1;
    const json_t *eta = json_object_get(j, "eta");
    s.eta = json_is_number(eta) ? json_number_value(eta) : -1;
    s.expired = json_is_true(json_object_get(j, "expired"));
    const char *reason = json_string_value(json_object_get(j, "endReason"));
    snprintf(s.reason, sizeof(s.reason), "%s", reason ? reason : "");
    *out = s;
    return 0;
}

bool progress_state_final(const char *state)
{
    return strcmp(state, "COMPLETED") == 0 || strcmp(state, "FAILED") == 0 ||
           strcmp(state, "CANCELLED") == 0 || strcmp(state, "RELEASED") == 0;
}

void progress_rate_init(progress_rate_t *r)
{
    memset(r, 0, sizeof(*r));
}

void progress_rate_add(progress_rate_t *r, double t, int64_t bytes_done)
{
    size_t slot = (r->first + r->n) % PROGRESS_RATE_SAMPLES;
    if (r->n == PROGRESS_RATE_SAMPLES)
        r->first = (r->first + 1) % PROGRESS_RATE_SAMPLES;
    else
        r->n++;
    r->t[slot] = t;
    r->bytes[slot] = bytes_done;
    /* keep the oldest sample that still lies within the window of the newest */
    while (r->n > 2) {
        size_t next = (r->first + 1) % PROGRESS_RATE_SAMPLES;
        if (t - r->t[next] < PROGRESS_RATE_WINDOW)
            break;
        r->first = next;
        r->n--;
    }
}

double progress_rate(const progress_rate_t *r)
{
    if (r->n < 2)
        return -1;
    size_t last = (r->first + r->n - 1) % PROGRESS_RATE_SAMPLES;
    double dt = r->t[last] - r->t[r->first];
    if (dt <= 0)
        return -1;
    int64_t db = r->bytes[last] - r->bytes[r->first];
    return db > 0 ? (double)db / dt : 0;
}

/* Share done, 0..1: by bytes when the size is known, else by files. */
static double fraction(const progress_status_t *s)
{
    double f;
    if (s->bytes_total > 0)
        f = (double)s->bytes_done / (double)s->bytes_total;
    else if (s->files_total > 0)
        f = (double)(s->files_completed + s->files_failed) / (double)s->files_total;
    else
        f = strcmp(s->state, "COMPLETED") == 0 ? 1 : 0;
    return f < 0 ? 0 : f > 1 ? 1 : f;
}

/* "120.0 MB/s", or "-" when unknown. */
static const char *rate_text(double rate, char *buf, size_t size)
{
    if (rate < 0)
        return "-";
    char bytes[32];
    snprintf(buf, size, "%s/s", si_format_bytes((uint64_t)(rate + 0.5), bytes, sizeof(bytes)));
    return buf;
}

/* "STARTED", "SUBMITTED #2" (queue position), "FAILED (1 failed)" */
static const char *state_text(const progress_status_t *s, char *buf, size_t size)
{
    if (s->queue_position > 0 && strcmp(s->state, "SUBMITTED") == 0)
        snprintf(buf, size, "%s #%lld in queue", s->state, (long long)s->queue_position);
    else if (s->files_failed > 0)
        snprintf(buf, size, "%s (%lld failed)", s->state, (long long)s->files_failed);
    else
        snprintf(buf, size, "%s", s->state);
    return buf;
}

char *progress_bar(const progress_status_t *s, double rate, int width, char *buf, size_t size)
{
    char done[32], total[32], rbuf[40], eta[32], state[48];
    si_format_bytes((uint64_t)s->bytes_done, done, sizeof(done));
    si_format_bytes((uint64_t)s->bytes_total, total, sizeof(total));
    const char *rtext = rate_text(rate, rbuf, sizeof(rbuf));
    if (s->eta >= 0)
        si_format_duration(s->eta, eta, sizeof(eta));
    state_text(s, state, sizeof(state));
    double f = fraction(s);

    char tail[256];
    int tail_len = snprintf(tail, sizeof(tail), " %3d%%  %lld/%lld files  %s/%s  %s%s%s  %s",
                            (int)(f * 100), (long long)s->files_completed,
                            (long long)s->files_total, done, total, rtext,
                            s->eta >= 0 ? "  ETA " : "", s->eta >= 0 ? eta : "", state);
    /* the bar takes what the numbers leave, between 10 and 50 cells */
    int cells = width - tail_len - 2;
    if (cells > 50)
        cells = 50;
    if (cells < 10)
        cells = 10;
    char bar[64];
    int filled = (int)(f * cells);
    for (int i = 0; i < cells; i++)
        bar[i] = i < filled ? '=' : i == filled ? '>' : ' ';
    if (filled >= cells)
        bar[cells - 1] = '=';
    bar[cells] = '\0';
    snprintf(buf, size, "[%s]%s", bar, tail);
    /* a line longer than the terminal wraps, and \r no longer redraws it */
    if (width > 0 && (size_t)width < size)
        buf[width] = '\0';
    return buf;
}

char *progress_line(const progress_status_t *s, double rate, char *buf, size_t size)
{
    char done[32], total[32], rbuf[40], eta[32], state[48];
    si_format_bytes((uint64_t)s->bytes_done, done, sizeof(done));
    si_format_bytes((uint64_t)s->bytes_total, total, sizeof(total));
    rate_text(rate, rbuf, sizeof(rbuf));
    if (s->eta >= 0)
        si_format_duration(s->eta, eta, sizeof(eta));
    snprintf(buf, size, "request %s: %s, %lld/%lld files, %s of %s%s%s%s%s", s->id,
             state_text(s, state, sizeof(state)), (long long)s->files_completed,
             (long long)s->files_total, done, total, rate >= 0 ? ", " : "",
             rate >= 0 ? rbuf : "", s->eta >= 0 ? ", ETA " : "", s->eta >= 0 ? eta : "");
    return buf;
}
