/* The clocks as seconds in a double: the one implementation for the whole
 * project (durations on the monotonic clock, timestamps on the wall clock). */
#ifndef SI_CLOCK_H
#define SI_CLOCK_H

#include <time.h>

/* CLOCK_MONOTONIC: for intervals and deadlines within one process. */
double si_mono_now(void);
/* CLOCK_REALTIME: seconds since the Unix epoch, for what is stored or shown. */
double si_wall_now(void);
/* The wall-clock time `seconds` from now, as pthread_cond_timedwait and
 * pthread_mutex_timedlock take it. */
struct timespec si_wall_deadline(double seconds);
/* The same on CLOCK_MONOTONIC, for condition variables set to that clock
 * (pthread_condattr_setclock): a change of the wall clock moves no wait. */
struct timespec si_mono_deadline(double seconds);
/* Sleeps `seconds` (nothing when <= 0), resumed after signals. */
void si_sleep(double seconds);

#endif
