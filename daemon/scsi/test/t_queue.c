/* Several commands in flight (scsi_start / scsi_reap): outcomes come back
 * oldest first whatever order the transport ends them in, each with its
 * own result; a transport that runs one at a time runs them in order on
 * the device's thread; the limit and the failures. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/scsi/cdb.h"

/* A transport that ends the commands it holds newest first. */
typedef struct {
    struct {
        const scsi_cmd_t *cmd;
        scsi_result_t *res;
        void *tag;
    } held[SCSI_QUEUE_MAX + 1];
    size_t n;
    int submits, refuse_start;
} lifo_t;

static void answer(const scsi_cmd_t *cmd, scsi_result_t *res)
{
    /* a READ(6) of 7 bytes fails with a medium error; others move len - 1 bytes */
    if (cmd->cdb[0] == 0x08 && cmd->len == 7) {
        uint8_t sn[18] = {0x70, 0, 0x03, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x11, 0x00};
        res->status = SCSI_CHECK_CONDITION;
        memcpy(res->sense, sn, sizeof(sn));
        res->sense_len = sizeof(sn);
        return;
    }
    res->status = SCSI_GOOD;
    res->transferred = cmd->len - 1;
}

static int lifo_submit(void *impl, const scsi_cmd_t *cmd, scsi_result_t *res, si_error_t *err)
{
    (void)err;
    lifo_t *l = impl;
    l->submits++;
    answer(cmd, res);
    return 0;
}

static int lifo_start(void *impl, const scsi_cmd_t *cmd, scsi_result_t *res, void *tag,
                      si_error_t *err)
{
    lifo_t *l = impl;
    if (l->refuse_start)
        return si_errnoprintf(err, EHOSTDOWN, "connection lost");
    l->held[l->n].cmd = cmd;
    l->held[l->n].res = res;
    l->held[l->n].tag = tag;
    l->n++;
    return 0;
}

static int lifo_reap(void *impl, void **tag, si_error_t *err)
{
    lifo_t *l = impl;
    if (l->n == 0)
        return si_errprintf(err, "nothing held");
    l->n--;
    answer(l->held[l->n].cmd, l->held[l->n].res);
    *tag = l->held[l->n].tag;
    return 0;
}

static void lifo_close(void *impl)
{
    (void)impl;
}

static const scsi_transport_t async_transport = {lifo_submit, lifo_close, lifo_start, lifo_reap,
                                                 NULL};
static const scsi_transport_t sync_transport = {lifo_submit, lifo_close, NULL, NULL, NULL};

int main(void)
{
    uint8_t buf[64];
    int tags[SCSI_QUEUE_MAX + 1];
    scsi_cmd_t c;
    scsi_result_t res;
    scsi_sense_t sense;
    si_error_t err = {0};
    void *tag;

    lifo_t l = {0};
    scsi_dev_t *d = scsi_dev_new("drive0", &async_transport, &l, NULL);
    is_int(scsi_queue_depth(d), SCSI_QUEUE_MAX, "an asynchronous transport: queue depth 16");
    for (int i = 0; i < 3; i++) {
        tags[i] = i;
        scsi_cdb_read6(&c, buf, (uint32_t)(10 + i));
        ok(scsi_start(d, &c, &tags[i], &err) == 0, "READ(6) %d started", i);
    }
    ok(scsi_in_flight(d) == 3 && l.submits == 0, "3 in flight, none waited for");
    bool in_order = true;
    for (int i = 0; i < 3; i++) {
        int rc = scsi_reap(d, &tag, &res, &sense, &err);
        in_order = in_order && rc == 0 && tag == &tags[i] && res.transferred == (size_t)(9 + i);
    }
    ok(in_order, "ended newest first by the transport, reaped oldest first with their own results");
    ok(scsi_in_flight(d) == 0 && scsi_dev_commands(d) == 3, "none left; 3 commands counted");
    errno = 0;
    ok(scsi_reap(d, &tag, &res, &sense, &err) < 0 && errno == EINVAL && tag == NULL,
       "reaping with nothing in flight: EINVAL");

    /* a failure among them belongs to its command */
    scsi_cdb_read6(&c, buf, 10);
    scsi_start(d, &c, &tags[0], &err);
    scsi_cdb_read6(&c, buf, 7);
    scsi_start(d, &c, &tags[1], &err);
    ok(scsi_reap(d, &tag, &res, &sense, &err) == 0 && tag == &tags[0], "the first READ is good");
    errno = 0;
    ok(scsi_reap(d, &tag, &res, &sense, &err) < 0 && errno == EIO && tag == &tags[1] &&
           sense.key == SCSI_KEY_MEDIUM_ERROR,
       "the second fails with its sense: %s", err.text);
    ok(strstr(err.text, "drive0: READ(6): MEDIUM ERROR") != NULL,
       "the message names device, command and condition");

    /* the limit, and a start the transport refuses */
    bool all = true;
    for (int i = 0; i < SCSI_QUEUE_MAX; i++) {
        scsi_cdb_read6(&c, buf, 10);
        all = all && scsi_start(d, &c, &tags[i], &err) == 0;
    }
    errno = 0;
    ok(all && scsi_start(d, &c, &tags[SCSI_QUEUE_MAX], &err) < 0 && errno == EBUSY,
       "a 17th command in flight is refused: %s", err.text);
    while (scsi_in_flight(d) > 0)
        scsi_reap(d, &tag, &res, &sense, &err);
    l.refuse_start = 1;
    ok(scsi_start(d, &c, &tags[0], &err) < 0 && errno == EHOSTDOWN && scsi_in_flight(d) == 0,
       "a start the transport cannot send fails, nothing in flight: %s", err.text);
    scsi_close(d);

    /* one at a time: the commands run in order on the device's thread */
    lifo_t s = {0};
    d = scsi_dev_new("drive1", &sync_transport, &s, NULL);
    is_int(scsi_queue_depth(d), 1, "a transport without start: queue depth 1");
    scsi_cdb_read6(&c, buf, 10);
    ok(scsi_start(d, &c, &tags[0], &err) == 0 && scsi_in_flight(d) == 1, "started");
    scsi_cdb_read6(&c, buf, 7);
    scsi_start(d, &c, &tags[1], &err);
    scsi_cdb_test_unit_ready(&c);
    errno = 0;
    ok(scsi_run(d, &c, &res, &sense, &err) < 0 && errno == EBUSY,
       "scsi_run while started commands are not reaped: refused (%s)", err.text);
    ok(scsi_reap(d, &tag, &res, &sense, &err) == 0 && tag == &tags[0] && res.transferred == 9,
       "first outcome");
    ok(scsi_reap(d, &tag, &res, &sense, &err) < 0 && tag == &tags[1] &&
           sense.key == SCSI_KEY_MEDIUM_ERROR, "second outcome: its medium error");
    ok(s.submits == 2 && scsi_run(d, &c, &res, &sense, &err) == 0, "both ran; scsi_run again");
    scsi_cdb_read6(&c, buf, 10);
    scsi_start(d, &c, &tags[0], &err);
    scsi_close(d); /* with one in flight: the thread ends it first */
    ok(s.submits == 4, "closed with a command in flight: it ran, the thread ended");
    return done_testing();
}
