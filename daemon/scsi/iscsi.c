/* The iSCSI transport over libiscsi: iSCSI-attached libraries, and the
 * emulated one of the tests, without any kernel module. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/scsi/scsi.h"

#ifdef HAVE_LIBISCSI
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define INITIATOR_IQN "iqn.2026-12.org.stagein:stageind"

typedef struct {
    struct iscsi_context *ctx;
    int lun;
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
    return s;
fail:
    iscsi_destroy_context(s->ctx);
    free(s);
    return NULL;
}

static int iscsi_submit(void *impl, const scsi_cmd_t *cmd, scsi_result_t *res, si_error_t *err)
{
    iscsi_dev_t *s = impl;
    int dir = cmd->dir == SCSI_DIR_IN    ? SCSI_XFER_READ
              : cmd->dir == SCSI_DIR_OUT ? SCSI_XFER_WRITE
                                         : SCSI_XFER_NONE;
    struct scsi_task *task = scsi_create_task((int)cmd->cdb_len, (unsigned char *)cmd->cdb, dir,
                                              (int)cmd->len);
    if (!task)
        return si_errprintf(err, "out of memory");
    /* data in lands in the caller's buffer: no copy */
    struct scsi_iovec iov = {cmd->buf, cmd->len};
    if (cmd->dir == SCSI_DIR_IN)
        scsi_task_set_iov_in(task, &iov, 1);
    struct iscsi_data out = {cmd->len, cmd->buf};
    iscsi_set_timeout(s->ctx, (int)((cmd->timeout_ms + 999) / 1000));
    struct scsi_task *done = iscsi_scsi_command_sync(s->ctx, s->lun, task,
                                                     cmd->dir == SCSI_DIR_OUT ? &out : NULL);
    if (!done) {
        const char *why = iscsi_get_error(s->ctx);
        int e = why && strstr(why, "imed out") ? ETIMEDOUT : EHOSTDOWN;
        scsi_free_scsi_task(task);
        return si_errnoprintf(err, e, "iSCSI: %s", why ? why : "command failed");
    }
    if (task->status == SCSI_STATUS_TIMEOUT || task->status == SCSI_STATUS_CANCELLED ||
        task->status == SCSI_STATUS_ERROR) {
        int e = task->status == SCSI_STATUS_TIMEOUT ? ETIMEDOUT : EHOSTDOWN;
        si_errnoprintf(err, e, "iSCSI: %s", iscsi_get_error(s->ctx));
        scsi_free_scsi_task(task);
        return -1;
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
    scsi_free_scsi_task(task);
    return 0;
}

static void iscsi_close(void *impl)
{
    iscsi_dev_t *s = impl;
    if (!s)
        return;
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

#endif

const scsi_transport_t scsi_iscsi_transport = {iscsi_submit, iscsi_close};
