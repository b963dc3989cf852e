/* CDB builders and response parsers (cdb.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "daemon/scsi/cdb.h"

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put24(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 16);
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    put16(p, (uint16_t)(v >> 16));
    put16(p + 2, (uint16_t)v);
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static uint32_t get16(const uint8_t *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t get24(const uint8_t *p)
{
    return (uint32_t)p[0] << 16 | get16(p + 1);
}

static uint32_t get32(const uint8_t *p)
{
    return get16(p) << 16 | get16(p + 2);
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static void cmd_init(scsi_cmd_t *c, const char *name, size_t cdb_len, uint8_t opcode,
                     scsi_dir_t dir, void *buf, size_t len, unsigned timeout_ms)
{
    memset(c, 0, sizeof(*c));
    c->name = name;
    c->cdb_len = cdb_len;
    c->cdb[0] = opcode;
    c->dir = len ? dir : SCSI_DIR_NONE;
    c->buf = len ? buf : NULL;
    c->len = len;
    c->timeout_ms = timeout_ms;
}

/* Copies a fixed-width blank-padded ASCII field, trailing blanks and NULs cut. */
static void ascii_field(char *out, size_t size, const uint8_t *p, size_t len)
{
    size_t n = len < size - 1 ? len : size - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
    while (n > 0 && (out[n - 1] == ' ' || p[n - 1] == 0))
        n--;
    out[n] = '\0';
}

/* ---- both ---------------------------------------------------------------------------- */

void scsi_cdb_test_unit_ready(scsi_cmd_t *c)
{
    cmd_init(c, "TEST UNIT READY", 6, 0x00, SCSI_DIR_NONE, NULL, 0, SCSI_T_QUICK);
}

void scsi_cdb_inquiry(scsi_cmd_t *c, bool evpd, uint8_t page, void *buf, uint16_t len)
{
    cmd_init(c, "INQUIRY", 6, 0x12, SCSI_DIR_IN, buf, len, SCSI_T_QUICK);
    c->cdb[1] = evpd ? 1 : 0;
    c->cdb[2] = page;
    put16(&c->cdb[3], len);
}

int scsi_parse_inquiry(const uint8_t *d, size_t len, scsi_inquiry_t *out, si_error_t *err)
{
    memset(out, 0, sizeof(*out));
    if (len < 36)
        return si_errprintf(err, "INQUIRY data of %zu bytes (at least 36 expected)", len);
    out->type = d[0] & 0x1f;
    out->removable = d[1] & 0x80;
    out->cmdque = d[7] & 0x02;
    ascii_field(out->vendor, sizeof(out->vendor), d + 8, 8);
    ascii_field(out->product, sizeof(out->product), d + 16, 16);
    ascii_field(out->revision, sizeof(out->revision), d + 32, 4);
    return 0;
}

int scsi_parse_serial(const uint8_t *d, size_t len, char *out, size_t size, si_error_t *err)
{
    if (len < 4 || d[1] != 0x80 || 4 + (size_t)d[3] > len)
        return si_errprintf(err, "unit serial number page malformed (%zu bytes)", len);
    size_t n = d[3];
    const uint8_t *p = d + 4;
    while (n > 0 && *p == ' ')
        p++, n--;
    ascii_field(out, size, p, n);
    return 0;
}

/* ---- changer ---------------------------------------------------------------------------- */

void scsi_cdb_initialize_element_status(scsi_cmd_t *c)
{
    cmd_init(c, "INITIALIZE ELEMENT STATUS", 6, 0x07, SCSI_DIR_NONE, NULL, 0, SCSI_T_POSITION);
}

void scsi_cdb_read_element_status(scsi_cmd_t *c, int type, uint16_t start, uint16_t count,
                                  bool voltag, bool dvcid, void *buf, uint32_t len)
{
    cmd_init(c, "READ ELEMENT STATUS", 12, 0xb8, SCSI_DIR_IN, buf, len, SCSI_T_MOVE);
    c->cdb[1] = (uint8_t)((voltag ? 0x10 : 0) | (type & 0x0f));
    put16(&c->cdb[2], start);
    put16(&c->cdb[4], count);
    c->cdb[6] = dvcid ? 0x01 : 0;
    put24(&c->cdb[7], len);
}

void scsi_cdb_move_medium(scsi_cmd_t *c, uint16_t transport, uint16_t src, uint16_t dst)
{
    cmd_init(c, "MOVE MEDIUM", 12, 0xa5, SCSI_DIR_NONE, NULL, 0, SCSI_T_MOVE);
    put16(&c->cdb[2], transport);
    put16(&c->cdb[4], src);
    put16(&c->cdb[6], dst);
}

int scsi_parse_element_status(const uint8_t *d, size_t len, scsi_element_t **els, size_t *n,
                              si_error_t *err)
{
    if (len < 8)
        return si_errprintf(err, "READ ELEMENT STATUS data of %zu bytes (header is 8)", len);
    size_t end = 8 + (size_t)get24(d + 5);
    if (end > len)
        end = len; /* the report was cut by the allocation length */
    size_t cap = *n; /* *els may hold earlier calls' elements, in a block at least this long */
    size_t off = 8;
    while (off + 8 <= end) {
        const uint8_t *page = d + off;
        int type = page[0] & 0x0f;
        bool pvoltag = page[1] & 0x80, avoltag = page[1] & 0x40;
        size_t dlen = get16(page + 2);
        size_t pend = off + 8 + (size_t)get24(page + 5);
        if (dlen < 12)
            return si_errprintf(err, "element descriptor length %zu at offset %zu (at least 12)",
                                dlen, off);
        if (pend > end)
            pend = end;
        off += 8;
        /* a last descriptor cut short still counts when its fixed part is
         * there (tgt reports 8 bytes fewer than the descriptors take) */
        for (; off + 12 <= pend; off += dlen) {
            const uint8_t *e = d + off;
            size_t avail = off + dlen <= pend ? dlen : pend - off;
            if (si_array_grow((void **)els, &cap, *n + 1, sizeof(**els)) < 0)
                return si_errprintf(err, "out of memory");
            scsi_element_t *x = &(*els)[(*n)++];
            memset(x, 0, sizeof(*x));
            x->type = type;
            x->address = (uint16_t)get16(e);
            x->full = e[2] & 0x01;
            x->except = e[2] & 0x04;
            x->access = e[2] & 0x08;
            x->asc = e[4];
            x->ascq = e[5];
            x->source_valid = e[9] & 0x80;
            x->source = (uint16_t)get16(e + 10);
            size_t at = 12;
            if (pvoltag && at + 32 <= avail)
                ascii_field(x->barcode, sizeof(x->barcode), e + at, 32);
            at += pvoltag ? 36 : 0;
            at += avoltag ? 36 : 0;
            /* device identification (DVCID): code set, type, 1 reserved, length */
            if (at + 4 <= avail && e[at + 3] && at + 4 + e[at + 3] <= avail)
                ascii_field(x->ident, sizeof(x->ident), e + at + 4, e[at + 3]);
        }
        off = pend;
    }
    return 0;
}

/* ---- drive ------------------------------------------------------------------------------ */

void scsi_cdb_load_unload(scsi_cmd_t *c, bool load)
{
    cmd_init(c, load ? "LOAD" : "UNLOAD", 6, 0x1b, SCSI_DIR_NONE, NULL, 0, SCSI_T_LOAD);
    c->cdb[4] = load ? 0x01 : 0x00;
}

void scsi_cdb_rewind(scsi_cmd_t *c)
{
    cmd_init(c, "REWIND", 6, 0x01, SCSI_DIR_NONE, NULL, 0, SCSI_T_POSITION);
}

void scsi_cdb_read_position(scsi_cmd_t *c, int form, void *buf, uint16_t len)
{
    cmd_init(c, "READ POSITION", 10, 0x34, SCSI_DIR_IN, buf, len, SCSI_T_QUICK);
    c->cdb[1] = (uint8_t)(form & 0x1f);
    /* the allocation length field is for the extended form only */
}

void scsi_cdb_locate16(scsi_cmd_t *c, int dest_type, uint8_t partition, uint64_t id)
{
    cmd_init(c, "LOCATE(16)", 16, 0x92, SCSI_DIR_NONE, NULL, 0, SCSI_T_POSITION);
    c->cdb[1] = (uint8_t)((dest_type & 0x07) << 3);
    c->cdb[3] = partition;
    put64(&c->cdb[4], id);
}

void scsi_cdb_space6(scsi_cmd_t *c, int code, int32_t count)
{
    cmd_init(c, "SPACE(6)", 6, 0x11, SCSI_DIR_NONE, NULL, 0, SCSI_T_POSITION);
    c->cdb[1] = (uint8_t)(code & 0x0f);
    put24(&c->cdb[2], (uint32_t)count & 0xffffff);
}

void scsi_cdb_read6(scsi_cmd_t *c, void *buf, uint32_t len)
{
    cmd_init(c, "READ(6)", 6, 0x08, SCSI_DIR_IN, buf, len, SCSI_T_RW);
    put24(&c->cdb[2], len);
}

void scsi_cdb_write6(scsi_cmd_t *c, const void *buf, uint32_t len)
{
    cmd_init(c, "WRITE(6)", 6, 0x0a, SCSI_DIR_OUT, (void *)buf, len, SCSI_T_RW);
    put24(&c->cdb[2], len);
}

void scsi_cdb_write_filemarks6(scsi_cmd_t *c, uint32_t count)
{
    cmd_init(c, "WRITE FILEMARKS(6)", 6, 0x10, SCSI_DIR_NONE, NULL, 0, SCSI_T_RW);
    put24(&c->cdb[2], count);
}

void scsi_cdb_mode_sense6(scsi_cmd_t *c, uint8_t page, void *buf, uint8_t len)
{
    cmd_init(c, "MODE SENSE(6)", 6, 0x1a, SCSI_DIR_IN, buf, len, SCSI_T_QUICK);
    c->cdb[2] = page & 0x3f; /* current values */
    c->cdb[4] = len;
}

void scsi_cdb_mode_select6(scsi_cmd_t *c, const void *buf, uint8_t len)
{
    cmd_init(c, "MODE SELECT(6)", 6, 0x15, SCSI_DIR_OUT, (void *)buf, len, SCSI_T_QUICK);
    c->cdb[1] = 0x10; /* PF: pages in the standard format */
    c->cdb[4] = len;
}

void scsi_cdb_report_density(scsi_cmd_t *c, bool media, void *buf, uint16_t len)
{
    cmd_init(c, "REPORT DENSITY SUPPORT", 10, 0x44, SCSI_DIR_IN, buf, len, SCSI_T_QUICK);
    c->cdb[1] = media ? 0x01 : 0;
    put16(&c->cdb[7], len);
}

void scsi_cdb_generate_rao(scsi_cmd_t *c, const void *list, uint32_t len)
{
    cmd_init(c, "GENERATE RECOMMENDED ACCESS ORDER", 12, 0xa4, SCSI_DIR_OUT, (void *)list, len,
             SCSI_T_POSITION);
    c->cdb[1] = 0x1d;
    put32(&c->cdb[6], len);
}

void scsi_cdb_receive_rao(scsi_cmd_t *c, void *buf, uint32_t len)
{
    cmd_init(c, "RECEIVE RECOMMENDED ACCESS ORDER", 12, 0xa3, SCSI_DIR_IN, buf, len,
             SCSI_T_QUICK);
    c->cdb[1] = 0x1d;
    put32(&c->cdb[6], len);
}

int scsi_parse_position(int form, const uint8_t *d, size_t len, scsi_position_t *out,
                        si_error_t *err)
{
    memset(out, 0, sizeof(*out));
    if (form == SCSI_RP_LONG) {
        if (len < 32)
            return si_errprintf(err, "READ POSITION long form of %zu bytes (32 expected)", len);
        out->bop = d[0] & 0x80;
        out->eop = d[0] & 0x40;
        out->block_valid = !(d[0] & 0x08);  /* MPU: mark position unknown */
        out->file_valid = out->block_valid;
        out->partition = get32(d + 4);
        out->block = get64(d + 8);
        out->file = get64(d + 16);
        return 0;
    }
    if (len < 20)
        return si_errprintf(err, "READ POSITION short form of %zu bytes (20 expected)", len);
    out->bop = d[0] & 0x80;
    out->eop = d[0] & 0x40;
    out->block_valid = !(d[0] & 0x04);      /* BPU: block position unknown */
    out->partition = d[1];
    out->block = get32(d + 4);
    return 0;
}

int scsi_parse_mode_sense6(const uint8_t *d, size_t len, scsi_mode_t *out, si_error_t *err)
{
    memset(out, 0, sizeof(*out));
    if (len < 4)
        return si_errprintf(err, "MODE SENSE data of %zu bytes (header is 4)", len);
    size_t total = (size_t)d[0] + 1;
    if (total < len)
        len = total;
    out->write_protect = d[2] & 0x80;
    size_t bdlen = d[3];
    if (4 + bdlen > len)
        return si_errprintf(err, "MODE SENSE block descriptors (%zu bytes) pass its end", bdlen);
    if (bdlen >= 8) {
        out->density = d[4];
        out->block_length = get24(d + 9);
    }
    size_t off = 4 + bdlen;
    while (off + 2 <= len) {
        int page = d[off] & 0x3f;
        size_t plen = (size_t)d[off + 1] + 2;
        if (off + plen > len)
            return si_errprintf(err, "mode page %02Xh at offset %zu passes the data's end", page,
                                off);
        if (page == 0x0f && plen >= 4) {
            out->has_compression = true;
            out->compression = d[off + 2] & 0x80;
        }
        off += plen;
    }
    return 0;
}

size_t scsi_mode_select6_list(uint8_t *buf, uint32_t block_length, bool set_compression,
                              bool compression)
{
    memset(buf, 0, 28);
    buf[2] = 0x10;             /* buffered mode 1 */
    buf[3] = 8;                /* one block descriptor */
    put24(buf + 9, block_length);
    if (!set_compression)
        return 12;
    uint8_t *p = buf + 12;
    p[0] = 0x0f;
    p[1] = 14;
    p[2] = (uint8_t)(compression ? 0xc0 : 0x40); /* DCE, DCC */
    p[3] = 0x80;               /* DDE: decompress on read */
    put32(p + 4, compression ? 1 : 0);  /* compression algorithm */
    put32(p + 8, 1);           /* decompression algorithm */
    return 28;
}

int scsi_parse_density(const uint8_t *d, size_t len, scsi_density_t **out, size_t *n,
                       si_error_t *err)
{
    *out = NULL;
    *n = 0;
    if (len < 4)
        return si_errprintf(err, "REPORT DENSITY SUPPORT data of %zu bytes", len);
    size_t end = 2 + (size_t)get16(d);
    if (end > len)
        end = len;
    size_t cap = 0;
    for (size_t off = 4; off + 52 <= end; off += 52) {
        const uint8_t *p = d + off;
        if (si_array_grow((void **)out, &cap, *n + 1, sizeof(**out)) < 0) {
            free(*out);
            *out = NULL;
            return si_errprintf(err, "out of memory");
        }
        scsi_density_t *x = &(*out)[(*n)++];
        memset(x, 0, sizeof(*x));
        x->primary = p[0];
        x->secondary = p[1];
        x->writable = p[2] & 0x80;
        x->is_default = p[2] & 0x20;
        x->capacity_mb = get32(p + 12);
        ascii_field(x->name, sizeof(x->name), p + 24, 8);
        ascii_field(x->description, sizeof(x->description), p + 32, 20);
    }
    return 0;
}

#define UDS_LEN 32

size_t scsi_rao_list(uint8_t *buf, size_t size, const scsi_uds_t *uds, size_t n)
{
    size_t total = 8 + UDS_LEN * n;
    if (size < total)
        return 0;
    memset(buf, 0, total);
    put32(buf + 4, (uint32_t)(UDS_LEN * n));
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = buf + 8 + UDS_LEN * i;
        put16(p, UDS_LEN - 2);
        memcpy(p + 3, uds[i].name, strnlen(uds[i].name, 10));
        p[13] = uds[i].partition;
        put64(p + 14, uds[i].begin);
        put64(p + 22, uds[i].end);
    }
    return total;
}

int scsi_parse_rao(const uint8_t *d, size_t len, scsi_uds_t **out, size_t *n, si_error_t *err)
{
    *out = NULL;
    *n = 0;
    if (len < 8)
        return si_errprintf(err, "RECEIVE RAO data of %zu bytes (header is 8)", len);
    size_t end = 8 + (size_t)get32(d + 4);
    if (end > len)
        end = len;
    size_t off = 8, cap = 0;
    while (off + 2 <= end) {
        size_t dlen = get16(d + off) + 2;
        if (dlen < 30 || off + dlen > end) {
            free(*out);
            *out = NULL;
            *n = 0;
            return si_errprintf(err, "RAO descriptor of %zu bytes at offset %zu", dlen, off);
        }
        if (si_array_grow((void **)out, &cap, *n + 1, sizeof(**out)) < 0) {
            free(*out);
            *out = NULL;
            *n = 0;
            return si_errprintf(err, "out of memory");
        }
        scsi_uds_t *u = &(*out)[(*n)++];
        memset(u, 0, sizeof(*u));
        memcpy(u->name, d + off + 3, 10);
        u->partition = d[off + 13];
        u->begin = get64(d + off + 14);
        u->end = get64(d + off + 22);
        off += dlen;
    }
    return 0;
}
