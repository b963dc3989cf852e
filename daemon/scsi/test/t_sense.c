/* Sense decoding: fixed and descriptor formats, stream bits and residues,
 * what each condition means, and the messages scsi_run makes of them over
 * a scripted transport. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/scsi/cdb.h"

typedef struct {
    int status;
    uint8_t sense[32];
    size_t sense_len;
    size_t transferred;
    int fail;                  /* the transport fails */
    int calls;
} script_t;

static int script_submit(void *impl, const scsi_cmd_t *cmd, scsi_result_t *res, si_error_t *err)
{
    script_t *s = impl;
    s->calls++;
    if (s->fail)
        return si_errnoprintf(err, ETIMEDOUT, "timed out after %u ms", cmd->timeout_ms);
    res->status = s->status;
    memcpy(res->sense, s->sense, s->sense_len);
    res->sense_len = s->sense_len;
    res->transferred = s->transferred;
    return 0;
}

static void script_close(void *impl)
{
    (void)impl;
}

static const scsi_transport_t script_transport = {script_submit, script_close, NULL, NULL, NULL};

static int traced;

static void trace(void *arg, const char *dev, const scsi_cmd_t *cmd, const scsi_result_t *res,
                  double s)
{
    (void)arg, (void)dev, (void)cmd, (void)res, (void)s;
    traced++;
}

int main(void)
{
    scsi_sense_t s;
    /* fixed format: MEDIUM ERROR 11h/00h, INFORMATION valid = 5 */
    uint8_t fixed[18] = {0xf0, 0, 0x03, 0, 0, 0, 5, 10, 0, 0, 0, 0, 0x11, 0x00};
    ok(scsi_sense_parse(fixed, sizeof(fixed), &s) == 0 && s.key == SCSI_KEY_MEDIUM_ERROR &&
           s.asc == 0x11 && s.info_valid && s.info == 5, "fixed format: key, asc, information");
    char text[200];
    scsi_sense_describe(&s, text, sizeof(text));
    is_str(text, "MEDIUM ERROR: unrecovered read error (asc 11h/00h)", "described");
    is_int(scsi_condition(SCSI_CHECK_CONDITION, &s), SCSI_COND_MEDIUM, "a medium error");
    /* READ(6) of a shorter block: NO SENSE, ILI, residue 262144 - 1024 */
    uint8_t ili[18] = {0xf0, 0, 0x20, 0x00, 0x03, 0xfc, 0x00, 10};
    ok(scsi_sense_parse(ili, sizeof(ili), &s) == 0 && s.ili && s.info == 0x3fc00 &&
           scsi_condition(SCSI_CHECK_CONDITION, &s) == SCSI_COND_OK,
       "ILI with residue: a stream condition");
    /* negative residue: the block was longer than the buffer */
    uint8_t over[18] = {0xf0, 0, 0x20, 0xff, 0xff, 0xff, 0x00, 10};
    scsi_sense_parse(over, sizeof(over), &s);
    is_int(s.info, -256, "negative residue");
    /* SPACE that met a filemark */
    uint8_t fm[18] = {0xf0, 0, 0x80, 0, 0, 0, 2, 10, 0, 0, 0, 0, 0x00, 0x01};
    scsi_sense_parse(fm, sizeof(fm), &s);
    ok(s.filemark && s.info == 2, "filemark, 2 blocks not spaced");
    scsi_sense_describe(&s, text, sizeof(text));
    is_str(text, "NO SENSE: filemark detected (asc 00h/01h), filemark", "filemark described");
    /* descriptor format: DATA PROTECT 27h/00h, stream EOM, information 7 */
    uint8_t desc[8 + 12 + 4] = {0x72, 0x07, 0x27, 0x00, 0, 0, 0, 16,
                                0x00, 0x0a, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 7,
                                0x04, 0x02, 0, 0x40};
    ok(scsi_sense_parse(desc, sizeof(desc), &s) == 0 && s.key == SCSI_KEY_DATA_PROTECT &&
           s.asc == 0x27 && s.eom && s.info_valid && s.info == 7, "descriptor format");
    is_int(scsi_condition(SCSI_CHECK_CONDITION, &s), SCSI_COND_WRITE_PROTECT, "write protect");
    uint8_t bad[4] = {0x12, 0, 0, 0};
    ok(scsi_sense_parse(bad, sizeof(bad), &s) < 0 && !s.valid, "unknown response code");
    struct {
        int key, asc, ascq;
        scsi_cond_t want;
        int err;
    } cases[] = {
        {SCSI_KEY_UNIT_ATTENTION, 0x28, 0, SCSI_COND_RETRY, EAGAIN},
        {SCSI_KEY_NOT_READY, 0x04, 0x01, SCSI_COND_RETRY, EAGAIN},
        {SCSI_KEY_NOT_READY, 0x3a, 0, SCSI_COND_NO_MEDIUM, ENOMEDIUM},
        {SCSI_KEY_NOT_READY, 0x04, 0x03, SCSI_COND_DEVICE, EHOSTDOWN},
        {SCSI_KEY_HARDWARE_ERROR, 0x44, 0, SCSI_COND_DEVICE, EHOSTDOWN},
        {SCSI_KEY_VOLUME_OVERFLOW, 0, 2, SCSI_COND_END_OF_MEDIUM, ENOSPC},
        {SCSI_KEY_BLANK_CHECK, 0, 5, SCSI_COND_BLANK, ENODATA},
        {SCSI_KEY_ILLEGAL_REQUEST, 0x20, 0, SCSI_COND_UNSUPPORTED, ENOTSUP},
        {SCSI_KEY_ILLEGAL_REQUEST, 0x21, 1, SCSI_COND_ILLEGAL, EINVAL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t f[18] = {0x70, 0, (uint8_t)cases[i].key, 0, 0, 0, 0, 10};
        f[12] = (uint8_t)cases[i].asc;
        f[13] = (uint8_t)cases[i].ascq;
        scsi_sense_parse(f, sizeof(f), &s);
        scsi_cond_t c = scsi_condition(SCSI_CHECK_CONDITION, &s);
        ok(c == cases[i].want && scsi_cond_errno(c) == cases[i].err, "%s %02Xh/%02Xh -> %d",
           scsi_sense_key_name(cases[i].key), cases[i].asc, cases[i].ascq, (int)c);
    }
    is_int(scsi_condition(SCSI_BUSY, &s), SCSI_COND_RETRY, "BUSY is retried");

    /* scsi_run over a scripted transport */
    script_t sc = {SCSI_CHECK_CONDITION, {0}, 18, 0, 0, 0};
    memcpy(sc.sense, fixed, sizeof(fixed));
    si_error_t err = {0};
    scsi_dev_t *d = scsi_dev_new("drive0 (iscsi://127.0.0.1:1/iqn.x/1)", &script_transport, &sc,
                                 &err);
    scsi_set_trace(d, trace, NULL);
    scsi_cmd_t c;
    uint8_t buf[512];
    scsi_cdb_read6(&c, buf, sizeof(buf));
    scsi_sense_t got;
    int rc = scsi_run(d, &c, NULL, &got, &err);
    ok(rc < 0 && errno == EIO && got.key == SCSI_KEY_MEDIUM_ERROR, "medium error fails with EIO");
    is_str(err.text, "drive0 (iscsi://127.0.0.1:1/iqn.x/1): READ(6): MEDIUM ERROR: unrecovered "
           "read error (asc 11h/00h)", "the message names device, command and condition");
    memcpy(sc.sense, ili, sizeof(ili));
    rc = scsi_run(d, &c, NULL, &got, &err);
    ok(rc < 0 && errno == 0 && got.ili, "a stream condition: -1 with errno 0 and the sense");
    sc.status = SCSI_GOOD;
    sc.transferred = 512;
    scsi_result_t res;
    ok(scsi_run(d, &c, &res, NULL, &err) == 0 && res.transferred == 512, "GOOD");
    sc.fail = 1;
    rc = scsi_run(d, &c, NULL, NULL, &err);
    ok(rc < 0 && errno == ETIMEDOUT && strstr(err.text, "READ(6): timed out"),
       "transport timeout: %s", err.text);
    is_int(scsi_dev_commands(d), 4, "commands counted");
    is_int(traced, 4, "every command traced");
    scsi_close(d);
    ok(scsi_open("tape0", &err) == NULL && errno == EINVAL, "a bad address: %s", err.text);
    ok(scsi_open("/nonexistent/sg9", &err) == NULL && strstr(err.text, "/nonexistent/sg9"),
       "a missing sg device: %s", err.text);
    return done_testing();
}
