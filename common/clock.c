#include "config.h"

#include <errno.h>
#include <math.h>
#include <time.h>

#include "common/clock.h"

static double seconds_of(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double si_mono_now(void)
{
    return seconds_of(CLOCK_MONOTONIC);
}

double si_wall_now(void)
{
    return seconds_of(CLOCK_REALTIME);
}

static struct timespec deadline_on(clockid_t id, double seconds)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    double at = (double)ts.tv_nsec / 1e9 + (seconds > 0 ? seconds : 0);
    double whole = floor(at);
    ts.tv_sec += (time_t)whole;
    ts.tv_nsec = (long)((at - whole) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

struct timespec si_wall_deadline(double seconds)
{
    return deadline_on(CLOCK_REALTIME, seconds);
}

struct timespec si_mono_deadline(double seconds)
{
    return deadline_on(CLOCK_MONOTONIC, seconds);
}

void si_sleep(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec ts = {.tv_sec = (time_t)seconds,
                          .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}
