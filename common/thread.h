/* A thread that sleeps on a condition variable until a flag is raised (a
 * service's kick, its stop): raising the flag and stopping the thread,
 * written once for every such thread. */
#ifndef SI_THREAD_H
#define SI_THREAD_H

#include <pthread.h>
#include <stdbool.h>

/* Sets *flag under mu and wakes every thread waiting on cv (all of them: a
 * waiter that is not the flag's reader only checks its own condition again). */
void si_flag_raise(pthread_mutex_t *mu, pthread_cond_t *cv, bool *flag);
/* Raises *stop (si_flag_raise) and waits for thread to end. */
void si_thread_stop(pthread_t thread, pthread_mutex_t *mu, pthread_cond_t *cv, bool *stop);

#endif
