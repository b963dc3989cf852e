/* The tape backend's records of recalled items: their outcomes queued
 * under mu and delivered to the sink without it. */
#include "config.h"

#include "daemon/archive/tape/state.h"

/* ---- reports ----------------------------------------------------------------------------- */

trec_t *tape_rec_get(tape_t *t, uint64_t token)
{
    return token >= 1 && token <= t->nrecs ? t->recs[token - 1] : NULL;
}

/* Queues the outcome of a record and frees it. mu held. */
void tape_rec_report(tape_t *t, uint64_t token, bool ok, const char *why)
{
    trec_t *r = tape_rec_get(t, token);
    if (!r)
        return;
    t->recs[token - 1] = NULL;
    t->outstanding--;
    t->outstanding_bytes -= r->item.size;
    if (si_array_grow((void **)&t->reports, &t->cap_reports, t->nreports + 1,
                      sizeof(*t->reports)) == 0) {
        treport_t *p = &t->reports[t->nreports++];
        p->id = r->item.object_id;
        p->ok = ok && !r->cancelled;
        snprintf(p->why, sizeof(p->why), "%s", r->cancelled ? "cancelled" : why ? why : "");
    }
    free(r);
}

/* Delivers queued outcomes; called without mu. */
void tape_flush_reports(tape_t *t)
{
    pthread_mutex_lock(&t->mu);
    treport_t *list = t->reports;
    size_t n = t->nreports;
    t->reports = NULL;
    t->nreports = t->cap_reports = 0;
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; i < n; i++)
        if (t->cb.done)
            t->cb.done(t->cb.arg, list[i].id, list[i].ok, list[i].ok ? NULL : list[i].why);
    free(list);
}

/* The scheduler finished a request: what of it is still here could not be read. */
void tape_on_request_done(void *arg, uint64_t request, double now, size_t failed, const char *why)
{
    tape_t *t = arg;
    (void)now, (void)failed;
    if (request < 1 || request > t->nreqs)
        return;
    treq_t *q = &t->reqs[request - 1];
    for (size_t i = 0; i < q->n; i++) {
        trec_t *r = tape_rec_get(t, q->tokens[i]);
        tape_rec_report(t, q->tokens[i], false, r && r->why[0] ? r->why : why ? why : "recall failed");
    }
    free(q->tokens);
    q->tokens = NULL;
    q->n = 0;
}
