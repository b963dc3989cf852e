/* The library engine's clock: a virtual discrete-event clock (time jumps to
 * the next event, nothing sleeps: the benchmark) or real time scaled by
 * time_scale (0.001: a 45 s locate takes 45 ms: the daemon and the demo). */
#ifndef STAGEIN_SIMLIB_CLOCK_H
#define STAGEIN_SIMLIB_CLOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

typedef struct {
    bool real;
    double scale;          /* real seconds per simulated second */
    struct timespec start; /* CLOCK_MONOTONIC at simulated time 0 */
    double now;            /* virtual: the current event's time */
} simclock_t;

void simclock_init_virtual(simclock_t *c);
void simclock_init_real(simclock_t *c, double time_scale);
/* Simulated seconds since start. */
double simclock_now(const simclock_t *c);
/* Virtual: advances to t and returns 0 at once. Real: waits on cv (mu held)
 * until simulated time t (t = INFINITY: until signalled); returns 0 when t
 * was reached, 1 when woken earlier. */
int simclock_wait_until(simclock_t *c, double t, pthread_cond_t *cv, pthread_mutex_t *mu);

#endif
