/* Virtual and scaled real-time clocks; see clock.h. */
#include "config.h"
#include "daemon/simlib/clock.h"

#include <errno.h>
#include <math.h>

void simclock_init_virtual(simclock_t *c)
{
    c->real = false;
    c->scale = 0;
    c->now = 0;
    clock_gettime(CLOCK_MONOTONIC, &c->start);
}

void simclock_init_real(simclock_t *c, double time_scale)
{
    c->real = true;
    c->scale = time_scale;
    c->now = 0;
    clock_gettime(CLOCK_MONOTONIC, &c->start);
}

double simclock_now(const simclock_t *c)
{
    if (!c->real)
        return c->now;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double real = (double)(t.tv_sec - c->start.tv_sec) + (t.tv_nsec - c->start.tv_nsec) / 1e9;
    return real / c->scale;
}

int simclock_wait_until(simclock_t *c, double t, pthread_cond_t *cv, pthread_mutex_t *mu)
{
    if (!c->real) {
        if (t > c->now && isfinite(t))
            c->now = t;
        return 0;
    }
    if (!isfinite(t)) {
        pthread_cond_wait(cv, mu);
        return 1;
    }
    /* The condition variable uses CLOCK_REALTIME by default: convert the
     * remaining monotonic interval into an absolute realtime deadline. */
    double left = (t - simclock_now(c)) * c->scale;
    if (left <= 0)
        return 0;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    double sec = floor(left);
    dl.tv_sec += (time_t)sec;
    dl.tv_nsec += (long)((left - sec) * 1e9);
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    int rc = pthread_cond_timedwait(cv, mu, &dl);
    return rc == ETIMEDOUT ? 0 : 1;
}
