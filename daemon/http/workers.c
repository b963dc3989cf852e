#include "config.h"
#include "daemon/http/workers.h"
#include "common/thread.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct http_workers {
    pthread_mutex_t mu;              /* guards the queue and stopping */
    pthread_cond_t cv;
    http_work_t *head, *tail;
    bool stopping;
    unsigned nthreads;
    pthread_t *threads;
};

static void *worker_main(void *arg)
{
    http_workers_t *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stopping)
            pthread_cond_wait(&w->cv, &w->mu);
        http_work_t *work = w->head;
        if (!work)
            break; /* stopping, and nothing left */
        w->head = work->next;
        if (!w->head)
            w->tail = NULL;
        pthread_mutex_unlock(&w->mu);
        work->fn(work);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

http_workers_t *http_workers_new(const char *name, unsigned threads, si_error_t *err)
{
    if (threads < 1) {
        si_errprintf(err, "%s: at least one worker thread is needed", name);
        return NULL;
    }
    http_workers_t *w = calloc(1, sizeof(*w));
    if (!w || !(w->threads = calloc(threads, sizeof(*w->threads)))) {
        free(w);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    for (; w->nthreads < threads; w->nthreads++) {
        if (pthread_create(&w->threads[w->nthreads], NULL, worker_main, w) != 0) {
            si_errprintf(err, "%s: cannot start worker thread %u of %u", name,
                         w->nthreads + 1, threads);
            http_workers_free(w);
            return NULL;
        }
    }
    return w;
}

void http_workers_submit(http_workers_t *w, http_work_t *work)
{
    work->next = NULL;
    pthread_mutex_lock(&w->mu);
    if (w->tail)
        w->tail->next = work;
    else
        w->head = work;
    w->tail = work;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void http_workers_free(http_workers_t *w)
{
    if (!w)
        return;
    si_flag_raise(&w->mu, &w->cv, &w->stopping);
    for (unsigned i = 0; i < w->nthreads; i++)
        pthread_join(w->threads[i], NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->threads);
    free(w);
}
