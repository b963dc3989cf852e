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
    return done_testing();
}
