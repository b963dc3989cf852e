/* The tape backend's drive operations over a scripted transport: the
 * capability probe, positioning by LOCATE(16) where the drive has it and by
 * SPACE otherwise (forward from the head, from BOT when behind), variable
 * block reads (short blocks, filemarks), end of medium on write, RAO. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/archive/tape/drive.h"

typedef struct {
    bool has_locate;           /* answers READ POSITION with a block, accepts LOCATE */
    char log[4096];            /* the commands, "NAME args;" */
    uint8_t sense[18];         /* the next READ/WRITE answers CHECK CONDITION with it */
    bool sense_once;
    size_t block_len;          /* bytes a READ returns */
} drive_sim_t;

static int sim_submit(void *impl, const scsi_cmd_t *c, scsi_result_t *res, si_error_t *err)
{
    drive_sim_t *s = impl;
    (void)err;
    char args[64] = "";
    const uint8_t *b = c->cdb;
    res->status = SCSI_GOOD;
    res->transferred = c->len;
    switch (b[0]) {
    case 0x11: {
        int32_t n = (int32_t)((uint32_t)b[2] << 16 | (uint32_t)b[3] << 8 | b[4]);
        if (n & 0x800000)
            n -= 0x1000000;
        snprintf(args, sizeof(args), " %s %d", (b[1] & 7) == 1 ? "fm" : "blk", n);
        break;
    }
    case 0x92: {
        uint64_t id = 0;
        for (int i = 4; i < 12; i++)
            id = id << 8 | b[i];
        snprintf(args, sizeof(args), " %llu", (unsigned long long)id);
        if (!s->has_locate)
            goto illegal;
        break;
    }
    case 0x34:
        memset(c->buf, 0, c->len);
        if (!s->has_locate)
            ((uint8_t *)c->buf)[0] = 0x08; /* MPU: no position */
        else
            ((uint8_t *)c->buf)[15] = 7;   /* block 7 */
        break;
    case 0xa3:
        if (!s->has_locate)
            goto illegal;
        if (c->len >= 8 + 64) {
            /* the drive's order: the second segment first */
            scsi_uds_t order[2] = {{"two", 0, 500, 599}, {"one", 0, 100, 199}};
            scsi_rao_list(c->buf, c->len, order, 2);
            res->transferred = 8 + 64;
        }
        break;
    case 0xa4:
        if (!s->has_locate)
            goto illegal;
        break;
    case 0x08:
    case 0x0a:
        snprintf(args, sizeof(args), " %zu", c->len);
        if (s->sense_once) {
            s->sense_once = false;
            res->status = SCSI_CHECK_CONDITION;
            memcpy(res->sense, s->sense, sizeof(s->sense));
            res->sense_len = sizeof(s->sense);
        } else if (b[0] == 0x08 && s->block_len < c->len) {
            /* a short block, as a drive reports it: ILI with the residue */
            uint32_t resid = (uint32_t)(c->len - s->block_len);
            uint8_t sn[18] = {0xf0, 0, 0x20, (uint8_t)(resid >> 24), (uint8_t)(resid >> 16),
                              (uint8_t)(resid >> 8), (uint8_t)resid, 10};
            res->status = SCSI_CHECK_CONDITION;
            memcpy(res->sense, sn, sizeof(sn));
            res->sense_len = sizeof(sn);
            res->transferred = s->block_len;
        }
        break;
    }
    size_t n = strlen(s->log);
    snprintf(s->log + n, sizeof(s->log) - n, "%s%s;", c->name, args);
    return 0;
illegal:;
    uint8_t sn[18] = {0x70, 0, 0x05, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x20, 0x00};
    res->status = SCSI_CHECK_CONDITION;
    memcpy(res->sense, sn, sizeof(sn));
    res->sense_len = sizeof(sn);
    n = strlen(s->log);
    snprintf(s->log + n, sizeof(s->log) - n, "%s%s!;", c->name, args);
    return 0;
}

static void sim_close(void *impl)
{
    (void)impl;
}

static const scsi_transport_t sim_transport = {sim_submit, sim_close, NULL, NULL, NULL};

static tape_drive_t drive(drive_sim_t *s)
{
    tape_drive_t d = {.retries = 2, .retry_ms = 1};
    d.dev = scsi_dev_new("drive0", &sim_transport, s, NULL);
    return d;
}

/* The commands a move to (file, block) sent (base: the file's first logical
 * object, as tape_drive_to_block takes it). */
static const char *commands_to(drive_sim_t *s, tape_drive_t *d, int64_t file, uint64_t block,
                               uint64_t base)
{
    si_error_t err;
    s->log[0] = '\0';
    tape_drive_to_block(d, file, block, base, &err);
    return s->log;
}

/* The next READ or WRITE answers CHECK CONDITION with this sense. */
static void check_condition_once(drive_sim_t *s, const uint8_t sense[18])
{
    memcpy(s->sense, sense, sizeof(s->sense));
    s->sense_once = true;
}

/* A drive element descriptor as tgt 1.0.85 sends it with VOLTAG and DVCID:
 * 12 bytes, an empty primary volume tag (36), the identifier (4 + 34:
 * vendor, product, serial). */
static size_t tgt_drive_descriptor(uint8_t *e, uint16_t address, const char *serial)
{
    memset(e, 0, 86);
    e[0] = (uint8_t)(address >> 8), e[1] = (uint8_t)address;
    memset(e + 12, ' ', 32);
    e[48] = 0x02, e[49] = 0x01, e[51] = 34;
    char id[35];
    snprintf(id, sizeof(id), "IET     VIRTUAL-TAPE    %-10s", serial);
    memcpy(e + 52, id, 34);
    return 86;
}

static void test_serial_mapping(void)
{
    ok(tape_ident_names_serial("IET     VIRTUAL-TAPE    beaf11    ", "beaf11"),
       "an identifier ending in the serial (trailing blanks) names it");
    ok(tape_ident_names_serial("IBM     ULT3580-TD9     1068001234", "1068001234"),
       "an LTO drive's identifier");
    ok(!tape_ident_names_serial("IET     VIRTUAL-TAPE    beaf11", "af11"),
       "a serial that is only the tail of another does not match");
    ok(!tape_ident_names_serial("IET     VIRTUAL-TAPE    beaf11", "") &&
           !tape_ident_names_serial("", "beaf11"), "an empty serial or identifier never matches");

    /* a recorded-format report of 2 drives at elements 1 and 2, cut 8 bytes
     * short as tgt sends it: the second identifier is lost */
    uint8_t r[8 + 8 + 2 * 86];
    memset(r, 0, sizeof(r));
    r[1] = 1, r[3] = 2, r[7] = (uint8_t)(8 + 2 * 86);
    r[8] = SCSI_ELEM_DRIVE, r[9] = 0x80, r[11] = 86, r[15] = 2 * 86;
    tgt_drive_descriptor(r + 16, 1, "beaf11");
    tgt_drive_descriptor(r + 16 + 86, 2, "beaf21");
    tape_changer_t c = {0};
    si_error_t err = {0};
    ok(scsi_parse_element_status(r, sizeof(r) - 8, &c.els, &c.nels, &err) == 0 && c.nels == 2,
       "tgt's report of 2 drives parsed");
    is_str(c.els[0].ident, "IET     VIRTUAL-TAPE    beaf11", "the first drive's identifier");
    is_str(c.els[1].ident, "", "the last one, cut short, has none (never a partial one)");
    uint16_t address = 0;
    ok(tape_changer_match_serial(&c, "beaf11", &address) == 1 && address == 1,
       "serial beaf11 is drive element 1");
    ok(tape_changer_match_serial(&c, "beaf21", &address) == 0,
       "serial beaf21: no element (its identifier was cut): the element must be configured");
    free(c.els);
    c.els = NULL, c.nels = 0;
    ok(scsi_parse_element_status(r, sizeof(r), &c.els, &c.nels, &err) == 0 &&
           tape_changer_match_serial(&c, "beaf21", &address) == 1 && address == 2,
       "the whole report: serial beaf21 is drive element 2");
    tgt_drive_descriptor(r + 16 + 86, 2, "beaf11");
    free(c.els);
    c.els = NULL, c.nels = 0;
    scsi_parse_element_status(r, sizeof(r), &c.els, &c.nels, &err);
    is_int(tape_changer_match_serial(&c, "beaf11", &address), 2,
           "two elements naming one serial: ambiguous");
    free(c.els);
}

int main(void)
{
    test_serial_mapping();
    uint8_t buf[4096];
    size_t got;
    bool fm, eod;
    si_error_t err = {0};

    /* a drive without LOCATE (as tgt): SPACE */
    drive_sim_t s = {.block_len = 1024};
    tape_drive_t d = drive(&s);
    tape_drive_probe(&d);
    ok(!d.can_locate && !d.can_rao && d.probed, "probe: no block position, no RAO");
    s.log[0] = '\0';
    ok(tape_drive_to_block(&d, 3, 5, 100, &err) == 0, "to file 3 block 5");
    is_str(s.log, "REWIND;SPACE(6) fm 3;SPACE(6) blk 5;",
           "unknown head: rewind, space 3 filemarks, 5 blocks");
    is_str(commands_to(&s, &d, 3, 9, 100), "SPACE(6) blk 4;",
           "forward in the same file: 4 blocks only");
    is_str(commands_to(&s, &d, 5, 0, 100), "SPACE(6) fm 2;", "a later file: 2 filemarks");
    is_str(commands_to(&s, &d, 5, 0, 100), "", "already there: no command");
    is_str(commands_to(&s, &d, 4, 1, 100), "REWIND;SPACE(6) fm 4;SPACE(6) blk 1;",
           "behind the head: from BOT");

    /* reads: a short block (ILI), a filemark */
    ok(tape_drive_read_block(&d, buf, sizeof(buf), &got, &fm, &eod, &err) == 0 && got == 1024 &&
           !fm && !eod && d.file == 4 && d.block == 2,
       "a 1024-byte block read with a 4 KiB buffer");
    const uint8_t fmsense[18] = {0xf0, 0, 0x80, 0, 0, 0x10, 0, 10, 0, 0, 0, 0, 0x00, 0x01};
    check_condition_once(&s, fmsense);
    ok(tape_drive_read_block(&d, buf, sizeof(buf), &got, &fm, &eod, &err) == 0 && fm &&
           got == 0 && d.file == 5 && d.block == 0, "a filemark: the head is in the next file");
    const uint8_t blank[18] = {0x70, 0, 0x08, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x00, 0x05};
    check_condition_once(&s, blank);
    ok(tape_drive_read_block(&d, buf, sizeof(buf), &got, &fm, &eod, &err) == 0 && eod,
       "BLANK CHECK: end of data");
    const uint8_t medium[18] = {0xf0, 0, 0x03, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x11, 0x00};
    check_condition_once(&s, medium);
    ok(tape_drive_read_block(&d, buf, sizeof(buf), &got, &fm, &eod, &err) < 0 && errno == EIO &&
           strstr(err.text, "drive0: READ(6): MEDIUM ERROR"), "medium error: %s", err.text);
    const uint8_t eom[18] = {0xf0, 0, 0x40, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x00, 0x02};
    check_condition_once(&s, eom);
    ok(tape_drive_write_block(&d, buf, 512, &err) < 0 && errno == ENOSPC,
       "end of medium early warning on write: ENOSPC");

    /* READs in flight: how many, and the position as they are reaped */
    d.queue_depth = 4;
    is_int(tape_drive_depth(&d), 1, "CmdQue 0: one READ in flight whatever is configured");
    d.inquiry.cmdque = true;
    is_int(tape_drive_depth(&d), 1, "CmdQue 1 over a transport that sends one at a time: 1");
    tape_drive_to_block(&d, 2, 0, 0, &err);
    uint8_t bufs[2][4096];
    void *which;
    ok(tape_drive_read_start(&d, bufs[0], sizeof(bufs[0]), &err) == 0 &&
           tape_drive_read_start(&d, bufs[1], sizeof(bufs[1]), &err) == 0,
       "two READs started");
    ok(tape_drive_read_reap(&d, &which, &got, &fm, &eod, &err) == 0 && which == bufs[0] &&
           got == 1024 && d.file == 2 && d.block == 1, "the first: its buffer, block 0 read");
    ok(tape_drive_read_reap(&d, &which, &got, &fm, &eod, &err) == 0 && which == bufs[1] &&
           !fm && d.block == 2, "the second: block 1");
    check_condition_once(&s, fmsense);
    ok(tape_drive_read_start(&d, bufs[0], sizeof(bufs[0]), &err) == 0 &&
           tape_drive_read_reap(&d, &which, &got, &fm, &eod, &err) == 0 && which == bufs[0] && fm &&
           d.file == 3 && d.block == 0, "the third met a filemark: the head is in the next file");
    ok(tape_drive_read_reap(&d, &which, &got, &fm, &eod, &err) < 0 && which == NULL &&
           !d.pos_known, "a reap with none in flight fails, the position no longer trusted");
    scsi_close(d.dev);

    /* a drive with LOCATE(16) and RAO */
    drive_sim_t l = {.has_locate = true, .block_len = 4096};
    d = drive(&l);
    tape_drive_probe(&d);
    ok(d.can_locate && d.can_rao, "probe: LOCATE(16) to the reported block works, RAO answers");
    ok(strstr(l.log, "READ POSITION;LOCATE(16) 7;") != NULL,
       "the probe locates to where the head is");
    is_str(commands_to(&l, &d, 3, 5, 100), "LOCATE(16) 105;",
           "to file 3 block 5: LOCATE(16) to logical object 100 + 5");
    is_str(commands_to(&l, &d, 2, 0, 40), "LOCATE(16) 40;", "behind: LOCATE as well, no rewind");
    scsi_uds_t uds[2] = {{"one", 0, 100, 199}, {"two", 0, 500, 599}}, *order = NULL;
    size_t n = 0;
    ok(tape_drive_rao(&d, uds, 2, &order, &n, &err) == 0 && n == 2 &&
           strcmp(order[0].name, "two") == 0 && order[0].begin == 500,
       "RAO: GENERATE then RECEIVE, the drive's order parsed");
    free(order);
    scsi_close(d.dev);
    return done_testing();
}
