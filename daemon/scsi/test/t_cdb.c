/* The CDB bytes of every changer and drive command, and parsers over
 * recorded responses (including LOCATE/READ POSITION/RAO, which the
 * emulator of the system tests lacks). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/scsi/cdb.h"

static bool cdb_is(const scsi_cmd_t *c, const uint8_t *want, size_t n)
{
    return c->cdb_len == n && memcmp(c->cdb, want, n) == 0;
}

static void test_cdbs(void)
{
    scsi_cmd_t c;
    uint8_t buf[256];
    scsi_cdb_test_unit_ready(&c);
    ok(cdb_is(&c, (uint8_t[]){0, 0, 0, 0, 0, 0}, 6) && c.dir == SCSI_DIR_NONE &&
           c.timeout_ms > 0, "TEST UNIT READY");
    scsi_cdb_inquiry(&c, true, 0x80, buf, 0x104);
    ok(cdb_is(&c, (uint8_t[]){0x12, 1, 0x80, 0x01, 0x04, 0}, 6) && c.dir == SCSI_DIR_IN &&
           c.len == 0x104, "INQUIRY VPD 80h, 260 bytes");
    scsi_cdb_initialize_element_status(&c);
    ok(cdb_is(&c, (uint8_t[]){0x07, 0, 0, 0, 0, 0}, 6), "INITIALIZE ELEMENT STATUS");
    scsi_cdb_read_element_status(&c, SCSI_ELEM_SLOT, 0x1000, 40, true, false, buf, 0x12345);
    ok(cdb_is(&c, (uint8_t[]){0xb8, 0x12, 0x10, 0x00, 0, 40, 0, 0x01, 0x23, 0x45, 0, 0}, 12),
       "READ ELEMENT STATUS slots, VOLTAG, allocation 24 bits");
    scsi_cdb_read_element_status(&c, SCSI_ELEM_DRIVE, 1, 2, false, true, buf, 64);
    is_int(c.cdb[1], 0x04, "drive elements without VOLTAG");
    is_int(c.cdb[6], 0x01, "DVCID");
    scsi_cdb_move_medium(&c, 0, 0x0400, 0x0001);
    ok(cdb_is(&c, (uint8_t[]){0xa5, 0, 0, 0, 0x04, 0x00, 0, 0x01, 0, 0, 0, 0}, 12),
       "MOVE MEDIUM transport 0, slot 400h -> drive 1");
    scsi_cdb_load_unload(&c, true);
    ok(cdb_is(&c, (uint8_t[]){0x1b, 0, 0, 0, 1, 0}, 6), "LOAD");
    scsi_cdb_load_unload(&c, false);
    ok(cdb_is(&c, (uint8_t[]){0x1b, 0, 0, 0, 0, 0}, 6), "UNLOAD");
    scsi_cdb_rewind(&c);
    ok(cdb_is(&c, (uint8_t[]){0x01, 0, 0, 0, 0, 0}, 6), "REWIND");
    scsi_cdb_read_position(&c, SCSI_RP_LONG, buf, 32);
    ok(cdb_is(&c, (uint8_t[]){0x34, 0x06, 0, 0, 0, 0, 0, 0, 0, 0}, 10) && c.len == 32,
       "READ POSITION long form");
    scsi_cdb_read_position(&c, SCSI_RP_SHORT, buf, 20);
    is_int(c.cdb[1], 0, "READ POSITION short form");
    scsi_cdb_locate16(&c, SCSI_LOCATE_OBJECT, 0, UINT64_C(0x0102030405060708));
    ok(cdb_is(&c, (uint8_t[]){0x92, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0}, 16),
       "LOCATE(16) to a logical object");
    scsi_cdb_locate16(&c, SCSI_LOCATE_FILE, 1, 7);
    ok(c.cdb[1] == 0x08 && c.cdb[3] == 1 && c.cdb[11] == 7, "LOCATE(16) to a file, partition 1");
    scsi_cdb_space6(&c, SCSI_SPACE_FILEMARKS, 3);
    ok(cdb_is(&c, (uint8_t[]){0x11, 1, 0, 0, 3, 0}, 6), "SPACE 3 filemarks");
    scsi_cdb_space6(&c, SCSI_SPACE_BLOCKS, -2);
    ok(cdb_is(&c, (uint8_t[]){0x11, 0, 0xff, 0xff, 0xfe, 0}, 6),
       "SPACE -2 blocks (24-bit two's complement)");
    scsi_cdb_space6(&c, SCSI_SPACE_EOD, 0);
    is_int(c.cdb[1], 3, "SPACE to end of data");
    scsi_cdb_read6(&c, buf, 0x040000);
    ok(cdb_is(&c, (uint8_t[]){0x08, 0, 0x04, 0, 0, 0}, 6) && c.dir == SCSI_DIR_IN,
       "READ(6) one variable block of 256 KiB");
    scsi_cdb_write6(&c, buf, 0x0a0000);
    ok(cdb_is(&c, (uint8_t[]){0x0a, 0, 0x0a, 0, 0, 0}, 6) && c.dir == SCSI_DIR_OUT,
       "WRITE(6) variable");
    scsi_cdb_write_filemarks6(&c, 1);
    ok(cdb_is(&c, (uint8_t[]){0x10, 0, 0, 0, 1, 0}, 6), "WRITE FILEMARKS 1 (synchronous)");
    scsi_cdb_mode_sense6(&c, 0x0f, buf, 255);
    ok(cdb_is(&c, (uint8_t[]){0x1a, 0, 0x0f, 0, 255, 0}, 6), "MODE SENSE(6) page 0Fh");
    scsi_cdb_mode_select6(&c, buf, 28);
    ok(cdb_is(&c, (uint8_t[]){0x15, 0x10, 0, 0, 28, 0}, 6) && c.dir == SCSI_DIR_OUT,
       "MODE SELECT(6) PF");
    scsi_cdb_report_density(&c, true, buf, 0x1000);
    ok(cdb_is(&c, (uint8_t[]){0x44, 1, 0, 0, 0, 0, 0, 0x10, 0, 0}, 10),
       "REPORT DENSITY SUPPORT of the medium");
    scsi_cdb_generate_rao(&c, buf, 72);
    ok(cdb_is(&c, (uint8_t[]){0xa4, 0x1d, 0, 0, 0, 0, 0, 0, 0, 72, 0, 0}, 12) &&
           c.dir == SCSI_DIR_OUT, "GENERATE RAO: MAINTENANCE OUT, service action 1Dh");
    scsi_cdb_receive_rao(&c, buf, 0x10000);
    ok(cdb_is(&c, (uint8_t[]){0xa3, 0x1d, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}, 12) &&
           c.dir == SCSI_DIR_IN, "RECEIVE RAO: MAINTENANCE IN, service action 1Dh");
}

static void test_inquiry(void)
{
    /* as tgt answers for a tape LUN */
    uint8_t d[36] = {0x01, 0x80, 0x05, 0x02, 31};
    memcpy(d + 8, "IBM     ULT3580-TD9     0001", 28);
    scsi_inquiry_t q;
    ok(scsi_parse_inquiry(d, sizeof(d), &q, NULL) == 0, "INQUIRY parsed");
    ok(q.type == 1 && q.removable, "sequential-access, removable");
    ok(!q.cmdque, "CmdQue 0: commands one at a time");
    d[7] = 0x02;
    scsi_parse_inquiry(d, sizeof(d), &q, NULL);
    ok(q.cmdque, "CmdQue 1 (byte 7 bit 1, as tgt sets it): the drive queues commands");
    is_str(q.vendor, "IBM", "vendor, blanks cut");
    is_str(q.product, "ULT3580-TD9", "product");
    is_str(q.revision, "0001", "revision");
    ok(scsi_parse_inquiry(d, 20, &q, NULL) < 0, "short INQUIRY refused");
    uint8_t sn[] = {0x01, 0x80, 0, 10, ' ', ' ', '1', '0', '7', '8', '0', '1', ' ', ' '};
    char serial[32];
    ok(scsi_parse_serial(sn, sizeof(sn), serial, sizeof(serial), NULL) == 0 &&
           strcmp(serial, "107801") == 0, "serial number page: %s", serial);
}

/* A READ ELEMENT STATUS response: 2 drives (one full, from slot 4), 2 slots
 * (one full with a barcode, one empty), as a changer with VOLTAG answers. */
static size_t element_status(uint8_t *d)
{
    memset(d, 0, 512);
    size_t off = 8;
    const size_t dl = 12 + 36;
    /* drives */
    uint8_t *p = d + off;
    p[0] = SCSI_ELEM_DRIVE;
    p[1] = 0x80;
    p[3] = (uint8_t)dl;
    p[7] = (uint8_t)(2 * dl);
    uint8_t *e = p + 8;
    e[1] = 1;
    e[2] = 0x09;         /* full, access */
    e[9] = 0x80;
    e[11] = 4;           /* source slot 4 */
    memcpy(e + 12, "T0000001                        ", 32);
    e += dl;
    e[1] = 2;
    e[2] = 0x0c;         /* except, access: empty */
    e[4] = 0x3a;
    off += 8 + 2 * dl;
    /* slots */
    p = d + off;
    p[0] = SCSI_ELEM_SLOT;
    p[1] = 0x80;
    p[3] = (uint8_t)dl;
    p[7] = (uint8_t)(2 * dl);
    e = p + 8;
    e[1] = 4;
    e[2] = 0x08;         /* empty: its cartridge is in drive 1 */
    e += dl;
    e[1] = 5;
    e[2] = 0x09;
    memcpy(e + 12, "T0000002", 8);
    off += 8 + 2 * dl;
    d[1] = 1;
    d[3] = 4;
    d[5] = (uint8_t)((off - 8) >> 16);
    d[6] = (uint8_t)((off - 8) >> 8);
    d[7] = (uint8_t)(off - 8);
    return off;
}

static void test_elements(void)
{
    uint8_t d[512];
    size_t len = element_status(d);
    scsi_element_t *els = NULL;
    size_t n = 0;
    ok(scsi_parse_element_status(d, len, &els, &n, NULL) == 0 && n == 4, "4 elements");
    if (n == 4) {
        ok(els[0].type == SCSI_ELEM_DRIVE && els[0].address == 1 && els[0].full &&
               els[0].source_valid && els[0].source == 4, "drive 1 full, from slot 4");
        is_str(els[0].barcode, "T0000001", "its barcode");
        ok(!els[1].full && els[1].except && els[1].asc == 0x3a, "drive 2 empty, asc 3Ah");
        ok(els[2].type == SCSI_ELEM_SLOT && els[2].address == 4 && !els[2].full, "slot 4 empty");
        ok(els[3].full && strcmp(els[3].barcode, "T0000002") == 0, "slot 5 holds T0000002");
    } else {
        skip(5, "not parsed");
    }
    free(els);
    els = NULL;
    n = 0;
    ok(scsi_parse_element_status(d, 40, &els, &n, NULL) == 0 && n == 1 && els[0].barcode[0] == 0,
       "a report cut by the allocation length: the fixed part of the descriptor, no barcode");
    free(els);
    els = NULL;
    n = 0;
    ok(scsi_parse_element_status(d, len - 4, &els, &n, NULL) == 0 && n == 4 &&
           strcmp(els[3].barcode, "T0000002") == 0,
       "a last descriptor short of its reserved tail (as tgt sends it) keeps its barcode");
    free(els);
    d[8 + 3] = 4; /* descriptor length 4 */
    els = NULL;
    n = 0;
    si_error_t err = {0};
    ok(scsi_parse_element_status(d, len, &els, &n, &err) < 0 && strstr(err.text, "length 4"),
       "a malformed descriptor length is refused: %s", err.text);
    free(els);
}

static void test_position(void)
{
    uint8_t s[20] = {0x80, 0, 0, 0, 0, 0, 0x12, 0x34};
    scsi_position_t p;
    ok(scsi_parse_position(SCSI_RP_SHORT, s, sizeof(s), &p, NULL) == 0 && p.bop &&
           p.block_valid && p.block == 0x1234, "short form: block 1234h at BOP");
    s[0] = 0x04; /* BPU, as tgt answers */
    ok(scsi_parse_position(SCSI_RP_SHORT, s, sizeof(s), &p, NULL) == 0 && !p.block_valid,
       "short form: block position unknown");
    uint8_t l[32] = {0};
    l[7] = 1;
    l[14] = 0x10;        /* block 1000h */
    l[23] = 5;           /* file 5 */
    ok(scsi_parse_position(SCSI_RP_LONG, l, sizeof(l), &p, NULL) == 0 && p.partition == 1 &&
           p.block == 0x1000 && p.file_valid && p.file == 5, "long form: partition, block, file");
    l[0] = 0x08;
    scsi_parse_position(SCSI_RP_LONG, l, sizeof(l), &p, NULL);
    ok(!p.block_valid, "long form MPU");
    ok(scsi_parse_position(SCSI_RP_LONG, l, 20, &p, NULL) < 0, "short long form refused");
}

static void test_mode(void)
{
    uint8_t list[28];
    size_t n = scsi_mode_select6_list(list, 0, true, false);
    ok(n == 28 && list[3] == 8 && list[9] == 0 && list[11] == 0 && list[12] == 0x0f &&
           list[13] == 14 && list[14] == 0x40,
       "MODE SELECT list: variable blocks, compression off");
    is_int(scsi_mode_select6_list(list, 262144, false, false), 12, "block descriptor only");
    ok(list[9] == 0x04 && list[10] == 0 && list[11] == 0, "block length 256 KiB");
    /* a MODE SENSE answer: write protected, density 60h (LTO-9), variable, page 0Fh DCE */
    uint8_t d[28] = {27, 0, 0x90, 8, 0x60, 0, 0, 0, 0, 0, 0, 0, 0x0f, 14, 0xc0, 0x80};
    scsi_mode_t m;
    ok(scsi_parse_mode_sense6(d, sizeof(d), &m, NULL) == 0 && m.write_protect &&
           m.density == 0x60 && m.block_length == 0 && m.has_compression && m.compression,
       "MODE SENSE: WP, density, variable blocks, compression on");
    d[3] = 40;
    ok(scsi_parse_mode_sense6(d, sizeof(d), &m, NULL) < 0,
       "block descriptors past the end refused");
}

static void test_density(void)
{
    uint8_t d[4 + 2 * 52] = {0, 2 + 2 * 52};
    uint8_t *p = d + 4;
    p[0] = p[1] = 0x60;
    p[2] = 0xa0;         /* WRTOK, DEFLT */
    p[12] = 0x01, p[13] = 0x12, p[14] = 0xa8, p[15] = 0x80; /* 18,000,000 MB */
    memcpy(p + 24, "LTO-9   ", 8);
    memcpy(p + 32, "Ultrium 9 18TB      ", 20);
    p += 52;
    p[0] = 0x5e;
    memcpy(p + 24, "LTO-8   ", 8);
    scsi_density_t *ds;
    size_t n;
    ok(scsi_parse_density(d, sizeof(d), &ds, &n, NULL) == 0 && n == 2, "2 densities");
    if (n == 2) {
        ok(ds[0].primary == 0x60 && ds[0].writable && ds[0].is_default &&
               ds[0].capacity_mb == 18000000, "LTO-9: writable default, 18 TB");
        is_str(ds[0].name, "LTO-9", "density name");
        ok(ds[1].primary == 0x5e && !ds[1].writable, "LTO-8 read only");
    } else {
        skip(3, "not parsed");
    }
    free(ds);
}

static void test_rao(void)
{
    scsi_uds_t in[3] = {{"obj1", 0, 100, 199}, {"obj2", 0, 5000, 5099}, {"obj3", 0, 20, 29}};
    uint8_t list[8 + 3 * 32];
    size_t n = scsi_rao_list(list, sizeof(list), in, 3);
    ok(n == sizeof(list) && list[7] == 96 && list[8 + 1] == 30 &&
           memcmp(list + 8 + 3, "obj1", 4) == 0 &&
           list[8 + 21] == 100 && list[8 + 29] == 199, "GENERATE RAO list: header, first UDS");
    ok(scsi_rao_list(list, 50, in, 3) == 0, "a list that does not fit is not built");
    /* a recorded RECEIVE RAO answer: the drive recommends 3, 1, 2 */
    uint8_t d[8 + 3 * 32];
    scsi_uds_t order[3] = {in[2], in[0], in[1]};
    scsi_rao_list(d, sizeof(d), order, 3);
    scsi_uds_t *got;
    size_t k;
    ok(scsi_parse_rao(d, sizeof(d), &got, &k, NULL) == 0 && k == 3, "RECEIVE RAO: 3 segments");
    if (k == 3)
        ok(strcmp(got[0].name, "obj3") == 0 && got[0].begin == 20 && got[0].end == 29 &&
               strcmp(got[2].name, "obj2") == 0, "in the drive's order");
    else
        skip(1, "not parsed");
    free(got);
    d[9] = 4;
    ok(scsi_parse_rao(d, sizeof(d), &got, &k, NULL) < 0, "a short descriptor is refused");
}

int main(void)
{
    test_cdbs();
    test_inquiry();
    test_elements();
    test_position();
    test_mode();
    test_density();
    test_rao();
    return done_testing();
}
