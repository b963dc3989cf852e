#include "config.h"

#include <time.h>

#include "common/clock.h"
#include "common/tap.h"

int main(void)
{
    double m1 = si_mono_now();
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    double m2 = si_mono_now();
    ok(m2 - m1 >= 0.019, "the monotonic clock moved on by the pause (%.4f s)", m2 - m1);
    double w = si_wall_now();
    time_t t = time(NULL);
    ok(w > 1.6e9 && w - (double)t > -2 && w - (double)t < 2,
       "the wall clock is the epoch's seconds (%.1f vs %lld)", w, (long long)t);
    struct timespec now, at = si_wall_deadline(2.75);
    clock_gettime(CLOCK_REALTIME, &now);
    double ahead = (double)(at.tv_sec - now.tv_sec) + (double)(at.tv_nsec - now.tv_nsec) / 1e9;
    ok(ahead > 2.7 && ahead <= 2.75 && at.tv_nsec >= 0 && at.tv_nsec < 1000000000L,
       "a deadline 2.75 s ahead on the wall clock (%.4f s, %ld ns)", ahead, at.tv_nsec);
    at = si_wall_deadline(-5);
    ok(at.tv_sec <= now.tv_sec + 1, "a negative wait is a deadline of now");
    at = si_mono_deadline(1.5);
    clock_gettime(CLOCK_MONOTONIC, &now);
    ahead = (double)(at.tv_sec - now.tv_sec) + (double)(at.tv_nsec - now.tv_nsec) / 1e9;
    ok(ahead > 1.45 && ahead <= 1.5 && at.tv_nsec >= 0 && at.tv_nsec < 1000000000L,
       "a deadline 1.5 s ahead on the monotonic clock (%.4f s)", ahead);
    m1 = si_mono_now();
    si_sleep(0.03);
    m2 = si_mono_now();
    ok(m2 - m1 >= 0.029, "si_sleep sleeps its time (%.4f s)", m2 - m1);
    m1 = si_mono_now();
    si_sleep(-1);
    ok(si_mono_now() - m1 < 0.5, "si_sleep of a negative time returns at once");
    return done_testing();
}
