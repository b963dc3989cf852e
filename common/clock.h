/* The clocks as seconds in a double: the one implementation for the whole
 * project (durations on the monotonic clock, timestamps on the wall clock). */
#ifndef SI_CLOCK_H
#define SI_CLOCK_H

/* CLOCK_MONOTONIC: for intervals and deadlines within one process. */
double si_mono_now(void);
/* CLOCK_REALTIME: seconds since the Unix epoch, for what is stored or shown. */
double si_wall_now(void);

#endif
