#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "common/tap.h"
#include "daemon/http/workers.h"

#define JOBS 1000

typedef struct {
    http_work_t work;                /* first: the job is the work node */
    http_workers_t *workers;
    atomic_int *done;
    int requeue;                     /* times it queues itself again */
    pthread_t ran_on;
} job_t;

static void run(http_work_t *work)
{
    job_t *j = (job_t *)work;
    j->ran_on = pthread_self();
    if (j->requeue-- > 0) {
        http_workers_submit(j->workers, &j->work);
        return;
    }
    atomic_fetch_add(j->done, 1);
}

/* Blocks until released: the other threads go on meanwhile. */
static atomic_int gate;
static void block(http_work_t *work)
{
    (void)work;
    while (!atomic_load(&gate))
        usleep(1000);
}

int main(void)
{
    si_error_t err;
    ok(http_workers_new("t", 0, &err) == NULL && strstr(err.text, "at least one"),
       "no threads refused: %s", err.text);

    http_workers_t *w = http_workers_new("t", 4, &err);
    ok(w != NULL, "four workers started");
    static job_t jobs[JOBS];
    atomic_int done = 0;
    for (int i = 0; i < JOBS; i++) {
        jobs[i] = (job_t){.work.fn = run, .workers = w, .done = &done, .requeue = i % 3};
        http_workers_submit(w, &jobs[i].work);
    }
    for (int i = 0; i < 5000 && atomic_load(&done) < JOBS; i++)
        usleep(1000);
    is_int(atomic_load(&done), JOBS, "every job ran, the requeued ones to their end");
    int off_main = 1;
    for (int i = 0; i < JOBS; i++)
        off_main &= !pthread_equal(jobs[i].ran_on, pthread_self());
    ok(off_main, "jobs run on the workers, not the submitter");

    /* one job blocks a thread: the others still run the queue */
    http_work_t blocker = {.fn = block};
    http_workers_submit(w, &blocker);
    atomic_store(&done, 0);
    for (int i = 0; i < 10; i++) {
        jobs[i] = (job_t){.work.fn = run, .workers = w, .done = &done};
        http_workers_submit(w, &jobs[i].work);
    }
    for (int i = 0; i < 5000 && atomic_load(&done) < 10; i++)
        usleep(1000);
    is_int(atomic_load(&done), 10, "a blocked job holds up only its own thread");
    atomic_store(&gate, 1);

    /* free runs what is still queued */
    atomic_store(&done, 0);
    for (int i = 0; i < 100; i++) {
        jobs[i] = (job_t){.work.fn = run, .workers = w, .done = &done, .requeue = 1};
        http_workers_submit(w, &jobs[i].work);
    }
    http_workers_free(w);
    is_int(atomic_load(&done), 100, "free ran the queued jobs before stopping");
    http_workers_free(NULL);
    return done_testing();
}
