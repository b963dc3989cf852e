/* The iSCSI transport over libiscsi: iSCSI-attached libraries, and the
 * emulated one of the tests, without any kernel module. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "daemon/scsi/scsi.h"
#include "common/thread.h"

#ifdef HAVE_LIBISCSI
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define INITIATOR_IQN "iqn.2026-12.org.stagein:stageind"
#define QUEUE_MAX 32

/* A command started without waiting (scsi_start): its task, where its
 * outcome goes, and whether libiscsi has called back. */
typedef struct {
    struct iscsi_dev *s;
    struct scsi_task *task;
    const scsi_cmd_t *cmd;
    scsi_result_t *res;
    void *tag;
    struct scsi_iovec iov;
    struct iscsi_data out;
    bool used, done;
    int status;                /* libiscsi's, from the callback */
    double deadline;
} iscsi_slot_t;

/* Commands started without waiting are served by a thread of the device's
 * own (started with the first one): it polls the connection and runs
 * libiscsi's event loop, so that data keeps arriving into the buffers of
 * the READs in flight (and WRITE data keeps leaving) while the caller
 * hashes a block, instead of only while it waits in reap. libiscsi is not
 * thread safe: mu guards the context, the slots and started; every call
 * into libiscsi is made holding it. */
typedef struct iscsi_dev {
    struct iscsi_context *ctx;
    int lun;
    iscsi_slot_t slots[QUEUE_MAX];
    size_t started;            /* slots in use */
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* a slot is done, or there is work */
    pthread_t service;
    bool service_started, stop;
    int wake[2];               /* a byte: the service thread polls again (new PDUs to send) */
} iscsi_dev_t;

void *scsi_iscsi_open(const char *url, si_error_t *err)
{
    iscsi_dev_t *s = calloc(1, sizeof(*s));
    if (!s || !(s->ctx = iscsi_create_context(INITIATOR_IQN))) {
        free(s);
        si_errprintf(err, "%s: cannot create an iSCSI context", url);
        return NULL;
    }
    struct iscsi_url *u = iscsi_parse_full_url(s->ctx, url);
    if (!u) {
        si_errnoprintf(err, EINVAL, "%s: %s (expected iscsi://HOST[:PORT]/IQN/LUN)", url,
                       iscsi_get_error(s->ctx));
        goto fail;
    }
    iscsi_set_targetname(s->ctx, u->target);
    iscsi_set_session_type(s->ctx, ISCSI_SESSION_NORMAL);
    iscsi_set_header_digest(s->ctx, ISCSI_HEADER_DIGEST_NONE_CRC32C);
    iscsi_set_timeout(s->ctx, 30);
    s->lun = u->lun;
    if (iscsi_full_connect_sync(s->ctx, u->portal, u->lun) != 0) {
        si_errnoprintf(err, EHOSTDOWN, "%s: cannot log in: %s", url, iscsi_get_error(s->ctx));
        iscsi_destroy_url(u);
        goto fail;
    }
    iscsi_destroy_url(u);
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        si_errprintf(err, "%s: pipe: %s", url, strerror(errno));
        iscsi_logout_sync(s->ctx);
        goto fail;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    return s;
fail:
    iscsi_destroy_context(s->ctx);
    free(s);
    return NULL;
}

static struct scsi_task *new_task(const scsi_cmd_t *cmd, struct scsi_iovec *iov,
                                  struct iscsi_data *out, si_error_t *err)
{
    int dir = cmd->dir == SCSI_DIR_IN    ? SCSI_XFER_READ
              : cmd->dir == SCSI_DIR_OUT ? SCSI_XFER_WRITE
                                         : SCSI_XFER_NONE;
    struct scsi_task *task = scsi_create_task((int)cmd->cdb_len, (unsigned char *)cmd->cdb, dir,
                                              (int)cmd->len);
    if (!task) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    /* data in lands in the caller's buffer: no copy */
    *iov = (struct scsi_iovec){cmd->buf, cmd->len};
    if (cmd->dir == SCSI_DIR_IN)
        scsi_task_set_iov_in(task, iov, 1);
    *out = (struct iscsi_data){cmd->len, cmd->buf};
    return task;
}

/* A finished task into res (0), or -1 when it did not complete (err). */
static int task_result(iscsi_dev_t *s, struct scsi_task *task, const scsi_cmd_t *cmd,
                       scsi_result_t *res, si_error_t *err)
{
    if (task->status == SCSI_STATUS_TIMEOUT || task->status == SCSI_STATUS_CANCELLED ||
        task->status == SCSI_STATUS_ERROR) {
        int e = task->status == SCSI_STATUS_TIMEOUT ? ETIMEDOUT : EHOSTDOWN;
        const char *why = iscsi_get_error(s->ctx);
        return si_errnoprintf(err, e, "iSCSI: %s", why && *why ? why
                              : task->status == SCSI_STATUS_TIMEOUT ? "timed out"
                                                                     : "command failed");
    }
    res->status = task->status & 0xff;
    res->transferred = cmd->len;
    if (task->residual_status == SCSI_RESIDUAL_UNDERFLOW && task->residual <= cmd->len)
        res->transferred = cmd->len - task->residual;
    else if (cmd->dir == SCSI_DIR_NONE)
        res->transferred = 0;
    /* the sense data of a CHECK CONDITION: its 2-byte length, then the bytes */
    if (task->status == SCSI_STATUS_CHECK_CONDITION && task->datain.size >= 2) {
        size_t n = (size_t)task->datain.data[0] << 8 | task->datain.data[1];
        if (n > (size_t)task->datain.size - 2)
            n = (size_t)task->datain.size - 2;
        if (n > sizeof(res->sense))
            n = sizeof(res->sense);
        memcpy(res->sense, task->datain.data + 2, n);
        res->sense_len = n;
    }
    return 0;
}

static int iscsi_submit(void *impl, const scsi_cmd_t *cmd, scsi_result_t *res, si_error_t *err)
{
    iscsi_dev_t *s = impl;
    struct scsi_iovec iov;
    struct iscsi_data out;
    struct scsi_task *task = new_task(cmd, &iov, &out, err);
    if (!task)
        return -1;
    /* nothing is in flight (scsi_run refuses otherwise): the service
     * thread, if any, waits; mu keeps it off the context meanwhile */
    pthread_mutex_lock(&s->mu);
    iscsi_set_timeout(s->ctx, (int)((cmd->timeout_ms + 999) / 1000));
    struct scsi_task *done = iscsi_scsi_command_sync(s->ctx, s->lun, task,
                                                     cmd->dir == SCSI_DIR_OUT ? &out : NULL);
    int rc;
    if (!done) {
        const char *why = iscsi_get_error(s->ctx);
        int e = why && strstr(why, "imed out") ? ETIMEDOUT : EHOSTDOWN;
        rc = si_errnoprintf(err, e, "iSCSI: %s", why ? why : "command failed");
    } else {
        rc = task_result(s, task, cmd, res, err);
    }
    pthread_mutex_unlock(&s->mu);
    scsi_free_scsi_task(task);
    return rc;
}

/* Called from iscsi_service, mu held. */
static void started_cb(struct iscsi_context *ctx, int status, void *data, void *private_data)
{
    (void)ctx, (void)data;
    iscsi_slot_t *slot = private_data;
    slot->status = status;
    slot->done = true;
    pthread_cond_broadcast(&slot->s->cv);
}

/* The service thread: while commands are in flight, poll the connection
 * (and the wake pipe) and run libiscsi's event loop; a poll of a second at
 * most, so that libiscsi's timeouts are checked. */
static void *service_main(void *arg)
{
    iscsi_dev_t *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        if (s->started == 0) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        struct pollfd pfd[2] = {{iscsi_get_fd(s->ctx), (short)iscsi_which_events(s->ctx), 0},
                                {s->wake[0], POLLIN, 0}};
        pthread_mutex_unlock(&s->mu);
        int n = poll(pfd, 2, 1000);
        if (n > 0 && (pfd[1].revents & POLLIN)) {
            char drain[64];
            while (read(s->wake[0], drain, sizeof(drain)) > 0)
                ;
        }
        pthread_mutex_lock(&s->mu);
        if (s->started == 0)
            continue; /* reaped meanwhile: a synchronous command may own the context */
        if ((n < 0 && errno != EINTR) ||
            iscsi_service(s->ctx, n > 0 ? pfd[0].revents : 0) < 0)
            iscsi_scsi_cancel_all_tasks(s->ctx);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static int iscsi_start(void *impl, const scsi_cmd_t *cmd, scsi_result_t *res, void *tag,
                       si_error_t *err)
{
    iscsi_dev_t *s = impl;
    if (!s->service_started) {
        if (pthread_create(&s->service, NULL, service_main, s) != 0)
            return si_errnoprintf(err, EAGAIN, "iSCSI: cannot start the service thread");
        s->service_started = true;
    }
    pthread_mutex_lock(&s->mu);
    iscsi_slot_t *slot = NULL;
    for (size_t i = 0; i < QUEUE_MAX && !slot; i++)
        if (!s->slots[i].used)
            slot = &s->slots[i];
    if (!slot) {
        pthread_mutex_unlock(&s->mu);
        return si_errnoprintf(err, EBUSY, "iSCSI: %d commands in flight already", QUEUE_MAX);
    }
    *slot = (iscsi_slot_t){.s = s, .cmd = cmd, .res = res, .tag = tag};
    if (!(slot->task = new_task(cmd, &slot->iov, &slot->out, err))) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    iscsi_set_timeout(s->ctx, (int)((cmd->timeout_ms + 999) / 1000));
    if (iscsi_scsi_command_async(s->ctx, s->lun, slot->task, started_cb,
                                 cmd->dir == SCSI_DIR_OUT ? &slot->out : NULL, slot) != 0) {
        si_errnoprintf(err, EHOSTDOWN, "iSCSI: %s", iscsi_get_error(s->ctx));
        scsi_free_scsi_task(slot->task);
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    /* libiscsi's own timeout ends it; ours is the backstop should the
     * connection hang where libiscsi does not look */
    slot->deadline = si_mono_now() + cmd->timeout_ms / 1000.0 + 5;
    slot->used = true;
    s->started++;
    /* a command without data out (a READ's CDB) leaves now, from this
     * thread: waking the service thread for it cost a pipe write, a poll
     * wake-up and a read per command. WRITE data stays with the service
     * thread, which sends it while this one fills the next block. */
    if (cmd->dir != SCSI_DIR_OUT && iscsi_service(s->ctx, POLLOUT) < 0)
        iscsi_scsi_cancel_all_tasks(s->ctx);
    bool pending = (iscsi_which_events(s->ctx) & POLLOUT) != 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (pending) {
        /* the service thread may be in a poll without POLLOUT: it polls
         * again (a full pipe says so already) */
        ssize_t woken = write(s->wake[1], "", 1);
        (void)woken;
    }
    return 0;
}

/* Waits until a started command is done: its outcome into its result, its
 * tag into *tag; 0, or -1 when it did not complete (err). */
static int iscsi_reap(void *impl, void **tag, si_error_t *err)
{
    iscsi_dev_t *s = impl;
    pthread_mutex_lock(&s->mu);
    int rc = -1;
    if (s->started == 0) {
        si_errnoprintf(err, EINVAL, "iSCSI: no command in flight");
        goto out;
    }
    for (;;) {
        iscsi_slot_t *slot = NULL;
        double deadline = 0;
        for (size_t i = 0; i < QUEUE_MAX; i++) {
            iscsi_slot_t *x = &s->slots[i];
            if (x->used && x->done && !slot)
                slot = x;
            if (x->used && (deadline == 0 || x->deadline < deadline))
                deadline = x->deadline;
        }
        if (slot) {
            if (slot->status == SCSI_STATUS_TIMEOUT || slot->status == SCSI_STATUS_CANCELLED ||
                slot->status == SCSI_STATUS_ERROR)
                slot->task->status = slot->status;
            rc = task_result(s, slot->task, slot->cmd, slot->res, err);
            int e = errno;
            scsi_free_scsi_task(slot->task);
            *tag = slot->tag;
            slot->used = false;
            s->started--;
            errno = e;
            goto out;
        }
        if (si_mono_now() > deadline) {
            /* every callback runs now, with SCSI_STATUS_CANCELLED */
            iscsi_scsi_cancel_all_tasks(s->ctx);
            continue;
        }
        /* the service thread moves the data; a second at most between looks */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
out:
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static int iscsi_reset(void *impl, si_error_t *err)
{
    iscsi_dev_t *s = impl;
    pthread_mutex_lock(&s->mu);
    int rc = iscsi_task_mgmt_lun_reset_sync(s->ctx, s->lun) != 0
                 ? si_errnoprintf(err, EHOSTDOWN, "iSCSI: %s", iscsi_get_error(s->ctx))
                 : 0;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void iscsi_close(void *impl)
{
    iscsi_dev_t *s = impl;
    if (!s)
        return;
    si_error_t ignored;
    while (s->started > 0) {
        void *tag;
        iscsi_reap(s, &tag, &ignored);
    }
    if (s->service_started)
        si_thread_stop(s->service, &s->mu, &s->cv, &s->stop);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    iscsi_logout_sync(s->ctx);
    iscsi_destroy_context(s->ctx);
    free(s);
}

#else

void *scsi_iscsi_open(const char *url, si_error_t *err)
{
    si_errnoprintf(err, ENOTSUP, "%s: built without libiscsi (libiscsi-dev)", url);
    return NULL;
}

static int iscsi_submit(void *impl, const scsi_cmd_t *cmd, scsi_result_t *res, si_error_t *err)
{
    (void)impl, (void)cmd, (void)res;
    return si_errnoprintf(err, ENOTSUP, "built without libiscsi");
}

static void iscsi_close(void *impl)
{
    (void)impl;
}

#define iscsi_start NULL
#define iscsi_reap NULL
#define iscsi_reset NULL

#endif

const scsi_transport_t scsi_iscsi_transport = {iscsi_submit, iscsi_close, iscsi_start,
                                               iscsi_reap, iscsi_reset};
