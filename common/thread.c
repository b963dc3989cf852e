#include "config.h"

#include "common/thread.h"

void si_flag_raise(pthread_mutex_t *mu, pthread_cond_t *cv, bool *flag)
{
    pthread_mutex_lock(mu);
    *flag = true;
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
}

void si_thread_stop(pthread_t thread, pthread_mutex_t *mu, pthread_cond_t *cv, bool *stop)
{
    si_flag_raise(mu, cv, stop);
    pthread_join(thread, NULL);
}
