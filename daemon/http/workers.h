/* Threads for the work an HTTP server's event threads must not do: a
 * handler that waits (a transparent recall, an fsync, a catalog write, an
 * RDMA transfer) runs here while its connection is suspended, so the few
 * event threads serving every connection never block. Jobs run in the order
 * they were queued, each on one of the threads. A job is a node the caller
 * embeds in its own state (no allocation: queuing never fails). */
#ifndef STAGEIN_HTTP_WORKERS_H
#define STAGEIN_HTTP_WORKERS_H

#include "common/error.h"

typedef struct http_workers http_workers_t;

typedef struct http_work {
    void (*fn)(struct http_work *work);
    struct http_work *next;          /* the queue's */
} http_work_t;

http_workers_t *http_workers_new(const char *name, unsigned threads, si_error_t *err);
/* Queues work (work->fn set by the caller) from any thread. */
void http_workers_submit(http_workers_t *w, http_work_t *work);
/* Runs what is queued (jobs may queue more meanwhile), then stops the
 * threads and frees. NULL: nothing. */
void http_workers_free(http_workers_t *w);

#endif
