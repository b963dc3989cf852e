/* Device handles: a transport, a name for messages, a command trace. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "daemon/scsi/scsi.h"
#include "common/thread.h"

/* A started command: a copy of it, and its outcome once the transport
 * reports it (reaped oldest first, whatever order the transport ends them). */
typedef struct {
    scsi_cmd_t cmd;
    void *tag;
    double t0;
    bool done;
    int rc, err_no;
    scsi_result_t res;
    si_error_t err;
} started_t;

struct scsi_dev {
    char *name;
    const scsi_transport_t *t;
    void *impl;
    scsi_trace_fn trace;
    void *trace_arg;
    uint64_t commands;
    started_t q[SCSI_QUEUE_MAX]; /* a ring: q[head] is the oldest */
    size_t head, n;
    /* A transport without start: the started commands run one at a time,
     * in order, on this thread (q[head + ran] is the next), so the caller
     * works while one runs. mu guards q, head, n, ran and stop. */
    pthread_t runner;
    bool runner_started, stop;
    size_t ran;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

scsi_dev_t *scsi_dev_new(const char *name, const scsi_transport_t *t, void *impl,
                         si_error_t *err)
{
    scsi_dev_t *d = calloc(1, sizeof(*d));
    if (!d || !(d->name = strdup(name))) {
        free(d);
        t->close(impl);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    d->t = t;
    d->impl = impl;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    return d;
}

bool scsi_have_iscsi(void)
{
#ifdef HAVE_LIBISCSI
    return true;
#else
    return false;
#endif
}

scsi_dev_t *scsi_open(const char *address, si_error_t *err)
{
    void *impl;
    const scsi_transport_t *t;
    if (strncmp(address, "iscsi://", 8) == 0) {
        if (!scsi_have_iscsi()) {
            si_errnoprintf(err, ENOTSUP, "%s: this stageind was built without libiscsi "
                           "(install libiscsi-dev and rebuild)", address);
            return NULL;
        }
        impl = scsi_iscsi_open(address, err);
        t = &scsi_iscsi_transport;
    } else if (address[0] == '/') {
        impl = scsi_sg_open(address, err);
        t = &scsi_sg_transport;
    } else {
        si_errnoprintf(err, EINVAL, "device '%s' is neither a path (/dev/sgN) nor an "
                       "iscsi:// URL", address);
        return NULL;
    }
    if (!impl)
        return NULL;
    return scsi_dev_new(address, t, impl, err);
}

void scsi_close(scsi_dev_t *d)
{
    if (!d)
        return;
    if (d->runner_started)
        si_thread_stop(d->runner, &d->mu, &d->cv, &d->stop);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    d->t->close(d->impl);
    free(d->name);
    free(d);
}

const char *scsi_dev_name(const scsi_dev_t *d)
{
    return d->name;
}

void scsi_set_trace(scsi_dev_t *d, scsi_trace_fn fn, void *arg)
{
    d->trace = fn;
    d->trace_arg = arg;
}

uint64_t scsi_dev_commands(const scsi_dev_t *d)
{
    return d->commands;
}

/* A command's outcome, as scsi_run returns it: rc is the transport's. */
static int finish(scsi_dev_t *d, const scsi_cmd_t *cmd, int rc, int transport_errno,
                  scsi_result_t *res, scsi_sense_t *sense, si_error_t *err, double seconds)
{
    if (d->trace)
        d->trace(d->trace_arg, d->name, cmd, rc < 0 ? NULL : res, seconds);
    if (rc < 0) {
        int e = transport_errno == ETIMEDOUT ? ETIMEDOUT : EHOSTDOWN;
        si_errprefix(err, "%s: %s", d->name, cmd->name);
        errno = e;
        return -1;
    }
    if (res->status == SCSI_GOOD)
        return 0;
    scsi_sense_parse(res->sense, res->sense_len, sense);
    scsi_cond_t cond = scsi_condition(res->status, sense);
    char what[200];
    if (res->status == SCSI_CHECK_CONDITION)
        scsi_sense_describe(sense, what, sizeof(what));
    else
        snprintf(what, sizeof(what), "SCSI status %02Xh%s", res->status,
                 res->status == SCSI_BUSY ? " (busy)"
                 : res->status == SCSI_RESERVATION_CONFLICT ? " (reservation conflict)" : "");
    si_errnoprintf(err, cond == SCSI_COND_OK ? EIO : scsi_cond_errno(cond), "%s: %s: %s",
                   d->name, cmd->name, what);
    if (cond == SCSI_COND_OK)
        errno = 0; /* a stream condition: the caller looks at *sense */
    return -1;
}

/* A caller may pass NULL for the result or the sense it does not read: the
 * scratch ones in its frame stand in. The sense starts cleared. */
static void outputs_or_scratch(scsi_result_t **res, scsi_result_t *res_scratch,
                               scsi_sense_t **sense, scsi_sense_t *sense_scratch)
{
    if (!*res)
        *res = res_scratch;
    if (!*sense)
        *sense = sense_scratch;
    memset(*sense, 0, sizeof(**sense));
}

int scsi_run(scsi_dev_t *d, const scsi_cmd_t *cmd, scsi_result_t *res, scsi_sense_t *sense,
             si_error_t *err)
{
    scsi_result_t local;
    scsi_sense_t lsense;
    outputs_or_scratch(&res, &local, &sense, &lsense);
    memset(res, 0, sizeof(*res));
    if (d->n > 0)
        return si_errnoprintf(err, EBUSY, "%s: %s: %zu started commands not reaped yet",
                              d->name, cmd->name, d->n);
    double t0 = si_mono_now();
    d->commands++;
    int rc = d->t->submit(d->impl, cmd, res, err);
    return finish(d, cmd, rc, errno, res, sense, err, si_mono_now() - t0);
}

int scsi_reset(scsi_dev_t *d, si_error_t *err)
{
    if (!d->t->reset)
        return si_errnoprintf(err, ENOTSUP, "%s: this transport has no LUN reset", d->name);
    if (d->t->reset(d->impl, err) < 0)
        return si_errprefix(err, "%s: LOGICAL UNIT RESET", d->name);
    return 0;
}

int scsi_queue_depth(const scsi_dev_t *d)
{
    return d->t->start && d->t->reap ? SCSI_QUEUE_MAX : 1;
}

size_t scsi_in_flight(const scsi_dev_t *d)
{
    return d->n;
}

static void *runner_main(void *arg)
{
    scsi_dev_t *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        /* the commands started before close still run: their buffers are the caller's */
        if (d->ran == d->n && d->stop)
            break;
        if (d->ran == d->n) {
            pthread_cond_wait(&d->cv, &d->mu);
            continue;
        }
        started_t *s = &d->q[(d->head + d->ran) % SCSI_QUEUE_MAX];
        pthread_mutex_unlock(&d->mu);
        si_error_t e = {0};
        scsi_result_t res = {0};
        int rc = d->t->submit(d->impl, &s->cmd, &res, &e);
        int err_no = errno;
        pthread_mutex_lock(&d->mu);
        s->res = res;
        s->err = e;
        s->rc = rc;
        s->err_no = err_no;
        s->done = true;
        d->ran++;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int scsi_start(scsi_dev_t *d, const scsi_cmd_t *cmd, void *tag, si_error_t *err)
{
    if (d->n == SCSI_QUEUE_MAX)
        return si_errnoprintf(err, EBUSY, "%s: %s: %d commands in flight already", d->name,
                              cmd->name, SCSI_QUEUE_MAX);
    bool threaded = scsi_queue_depth(d) == 1;
    if (threaded && !d->runner_started) {
        if (pthread_create(&d->runner, NULL, runner_main, d) != 0)
            return si_errnoprintf(err, EAGAIN, "%s: %s: cannot start the command thread",
                                  d->name, cmd->name);
        d->runner_started = true;
    }
    pthread_mutex_lock(&d->mu);
    started_t *s = &d->q[(d->head + d->n) % SCSI_QUEUE_MAX];
    memset(s, 0, sizeof(*s));
    s->cmd = *cmd;
    s->tag = tag;
    s->t0 = si_mono_now();
    if (!threaded && d->t->start(d->impl, &s->cmd, &s->res, s, err) < 0) {
        pthread_mutex_unlock(&d->mu);
        return si_errprefix(err, "%s: %s", d->name, cmd->name);
    }
    d->commands++;
    d->n++;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return 0;
}

int scsi_reap(scsi_dev_t *d, void **tag, scsi_result_t *res, scsi_sense_t *sense,
              si_error_t *err)
{
    scsi_result_t local;
    scsi_sense_t lsense;
    outputs_or_scratch(&res, &local, &sense, &lsense);
    *tag = NULL;
    if (d->n == 0)
        return si_errnoprintf(err, EINVAL, "%s: no command in flight", d->name);
    pthread_mutex_lock(&d->mu);
    started_t *oldest = &d->q[d->head];
    while (!oldest->done) {
        if (d->runner_started) {
            pthread_cond_wait(&d->cv, &d->mu);
            continue;
        }
        void *t = NULL;
        si_error_t e = {0};
        int rc = d->t->reap(d->impl, &t, &e);
        started_t *s = t;
        if (!s) {
            pthread_mutex_unlock(&d->mu);
            return si_errnoprintf(err, EHOSTDOWN, "%s: %s", d->name, e.text);
        }
        s->rc = rc;
        s->err_no = errno;
        s->err = e;
        s->done = true;
    }
    started_t done = *oldest;
    d->head = (d->head + 1) % SCSI_QUEUE_MAX;
    d->n--;
    if (d->runner_started)
        d->ran--;
    pthread_mutex_unlock(&d->mu);
    *tag = done.tag;
    *res = done.res;
    if (err)
        *err = done.err;
    return finish(d, &done.cmd, done.rc, done.err_no, res, sense, err, si_mono_now() - done.t0);
}
