/* Off the event threads: a request's connection suspended while a worker
 * runs what may wait (internal.h, s3_offload); a helper below the
 * operations and the dispatcher, calling none of them. */
#include "config.h"
#include "daemon/s3/internal.h"

#include <stddef.h>

static void suspend(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    pthread_mutex_lock(&s->suspend_mu);
    s->suspended++;
    pthread_mutex_unlock(&s->suspend_mu);
    r->suspended = true;
    MHD_suspend_connection(r->conn);
}

/* r may be gone once this returns: its event thread goes on with it. */
static void resume(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    struct MHD_Connection *conn = r->conn;
    /* an answer to send: the stop waits for it too (counted before the
     * suspension ends, so that the stop never sees neither) */
    bool answered = r->answer != NULL;
    r->answer_counted = answered;
    if (answered) {
        pthread_mutex_lock(&s->suspend_mu);
        s->answering++;
        pthread_mutex_unlock(&s->suspend_mu);
    }
    r->suspended = false;
    r->on_worker = false;
    MHD_resume_connection(conn);
    pthread_mutex_lock(&s->suspend_mu);
    s->suspended--;
    pthread_cond_broadcast(&s->suspend_cv);
    pthread_mutex_unlock(&s->suspend_mu);
}

static void run_deferred(http_work_t *work)
{
    s3_req_t *r = (s3_req_t *)(void *)((char *)work - offsetof(s3_req_t, work));
    bool held = false;
    r->on_worker = true;
    r->held = &held;
    r->deferred(r);
    /* held: r is another thread's now (s3_continue), not to be touched */
    if (!held)
        resume(r);
}

void s3_offload(s3_req_t *r, void (*fn)(s3_req_t *r))
{
    if (r->on_worker) {
        fn(r);
        return;
    }
    r->offloaded_in_call = true;
    suspend(r);
    s3_continue(r, fn);
}

void s3_hold(s3_req_t *r)
{
    *r->held = true;
}

void s3_release(s3_req_t *r)
{
    *r->held = false;
}

void s3_continue(s3_req_t *r, void (*fn)(s3_req_t *r))
{
    r->deferred = fn;
    r->work.fn = run_deferred;
    http_workers_submit(r->srv->workers, &r->work);
}

