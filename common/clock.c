#include "config.h"

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
