/* Sense data: decoding, the standard texts of the conditions a tape library
 * reports, and what each means for the caller. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon/scsi/scsi.h"

int scsi_sense_parse(const uint8_t *s, size_t len, scsi_sense_t *out)
{
    memset(out, 0, sizeof(*out));
    if (len < 2)
        return -1;
    int code = s[0] & 0x7f;
    if (code == 0x70 || code == 0x71) {
        if (len < 3)
            return -1;
        out->valid = true;
        out->key = s[2] & 0x0f;
        out->filemark = s[2] & 0x80;
        out->eom = s[2] & 0x40;
        out->ili = s[2] & 0x20;
        if (len >= 7 && (s[0] & 0x80)) {
            out->info_valid = true;
            out->info = (int32_t)((uint32_t)s[3] << 24 | (uint32_t)s[4] << 16 |
                                  (uint32_t)s[5] << 8 | s[6]);
        }
        if (len >= 14) {
            out->asc = s[12];
            out->ascq = s[13];
        }
        return 0;
    }
    if (code == 0x72 || code == 0x73) {
        if (len < 4)
            return -1;
        out->valid = true;
        out->key = s[1] & 0x0f;
        out->asc = s[2];
        out->ascq = s[3];
        size_t end = len >= 8 ? 8 + (size_t)s[7] : len;
        if (end > len)
            end = len;
        for (size_t off = 8; off + 2 <= end;) {
            const uint8_t *d = s + off;
            size_t dlen = (size_t)d[1] + 2;
            if (off + dlen > end)
                break;
            if (d[0] == 0x00 && dlen >= 12 && (d[2] & 0x80)) {
                int64_t v = 0;
                for (int i = 4; i < 12; i++)
                    v = (int64_t)((uint64_t)v << 8 | d[i]);
                out->info_valid = true;
                out->info = v;
            } else if (d[0] == 0x04 && dlen >= 4) {
                out->filemark = d[3] & 0x80;
                out->eom = d[3] & 0x40;
                out->ili = d[3] & 0x20;
            }
            off += dlen;
        }
        return 0;
    }
    return -1;
}

const char *scsi_sense_key_name(int key)
{
    static const char *const names[16] = {
        "NO SENSE", "RECOVERED ERROR", "NOT READY", "MEDIUM ERROR", "HARDWARE ERROR",
        "ILLEGAL REQUEST", "UNIT ATTENTION", "DATA PROTECT", "BLANK CHECK", "VENDOR SPECIFIC",
        "COPY ABORTED", "ABORTED COMMAND", "RESERVED", "VOLUME OVERFLOW", "MISCOMPARE",
        "COMPLETED",
    };
    return names[key & 0x0f];
}

static const struct {
    uint8_t asc, ascq;
    const char *text;
} asc_table[] = {
    {0x00, 0x00, "no additional sense information"},
    {0x00, 0x01, "filemark detected"},
    {0x00, 0x02, "end-of-partition/medium detected"},
    {0x00, 0x04, "beginning-of-partition/medium detected"},
    {0x00, 0x05, "end-of-data detected"},
    {0x04, 0x00, "logical unit not ready, cause not reportable"},
    {0x04, 0x01, "logical unit is in process of becoming ready"},
    {0x04, 0x02, "logical unit not ready, initializing command required"},
    {0x04, 0x03, "logical unit not ready, manual intervention required"},
    {0x04, 0x12, "logical unit not ready, offline"},
    {0x08, 0x00, "logical unit communication failure"},
    {0x0c, 0x00, "write error"},
    {0x11, 0x00, "unrecovered read error"},
    {0x14, 0x00, "recorded entity not found"},
    {0x14, 0x01, "record not found"},
    {0x14, 0x03, "end-of-data not found"},
    {0x15, 0x00, "random positioning error"},
    {0x1a, 0x00, "parameter list length error"},
    {0x20, 0x00, "invalid command operation code"},
    {0x21, 0x01, "invalid element address"},
    {0x24, 0x00, "invalid field in cdb"},
    {0x25, 0x00, "logical unit not supported"},
    {0x26, 0x00, "invalid field in parameter list"},
    {0x27, 0x00, "write protected"},
    {0x28, 0x00, "not ready to ready change, medium may have changed"},
    {0x28, 0x01, "import or export element accessed"},
    {0x29, 0x00, "power on, reset, or bus device reset occurred"},
    {0x2a, 0x01, "mode parameters changed"},
    {0x30, 0x00, "incompatible medium installed"},
    {0x30, 0x01, "cannot read medium, unknown format"},
    {0x30, 0x02, "cannot read medium, incompatible format"},
    {0x31, 0x00, "medium format corrupted"},
    {0x3a, 0x00, "medium not present"},
    {0x3b, 0x00, "sequential positioning error"},
    {0x3b, 0x0d, "medium destination element full"},
    {0x3b, 0x0e, "medium source element empty"},
    {0x3b, 0x11, "medium magazine not accessible"},
    {0x3f, 0x01, "microcode has been changed"},
    {0x44, 0x00, "internal target failure"},
    {0x50, 0x00, "write append error"},
    {0x53, 0x00, "media load or eject failed"},
    {0x53, 0x02, "medium removal prevented"},
};

const char *scsi_asc_text(int asc, int ascq)
{
    for (size_t i = 0; i < sizeof(asc_table) / sizeof(asc_table[0]); i++)
        if (asc_table[i].asc == asc && asc_table[i].ascq == ascq)
            return asc_table[i].text;
    return NULL;
}

void scsi_sense_describe(const scsi_sense_t *s, char *buf, size_t size)
{
    if (!s->valid) {
        snprintf(buf, size, "no sense data");
        return;
    }
    const char *text = scsi_asc_text(s->asc, s->ascq);
    int n = snprintf(buf, size, "%s: %s (asc %02Xh/%02Xh)", scsi_sense_key_name(s->key),
                     text ? text : "unknown condition", s->asc, s->ascq);
    if (n > 0 && (size_t)n < size && (s->filemark || s->eom || s->ili))
        snprintf(buf + n, size - (size_t)n, "%s%s%s", s->filemark ? ", filemark" : "",
                 s->eom ? ", end of medium" : "", s->ili ? ", incorrect length" : "");
}

scsi_cond_t scsi_condition(int status, const scsi_sense_t *s)
{
    if (status == SCSI_GOOD)
        return SCSI_COND_OK;
    if (status == SCSI_BUSY)
        return SCSI_COND_RETRY;
    if (status != SCSI_CHECK_CONDITION || !s->valid)
        return SCSI_COND_OTHER;
    switch (s->key) {
    case SCSI_KEY_NO_SENSE:
    case SCSI_KEY_RECOVERED:
        /* a stream condition (filemark, EOM, ILI) alone */
        return s->eom ? SCSI_COND_END_OF_MEDIUM : SCSI_COND_OK;
    case SCSI_KEY_NOT_READY:
        if (s->asc == 0x3a)
            return SCSI_COND_NO_MEDIUM;
        if (s->asc == 0x04 && (s->ascq == 0x01 || s->ascq == 0x00))
            return SCSI_COND_RETRY;
        return SCSI_COND_DEVICE;
    case SCSI_KEY_UNIT_ATTENTION:
        return SCSI_COND_RETRY;
    case SCSI_KEY_MEDIUM_ERROR:
        return SCSI_COND_MEDIUM;
    case SCSI_KEY_HARDWARE_ERROR:
        return SCSI_COND_DEVICE;
    case SCSI_KEY_DATA_PROTECT:
        return SCSI_COND_WRITE_PROTECT;
    case SCSI_KEY_VOLUME_OVERFLOW:
        return SCSI_COND_END_OF_MEDIUM;
    case SCSI_KEY_BLANK_CHECK:
        return SCSI_COND_BLANK;
    case SCSI_KEY_ILLEGAL_REQUEST:
        return s->asc == 0x20 || s->asc == 0x24 ? SCSI_COND_UNSUPPORTED : SCSI_COND_ILLEGAL;
    case SCSI_KEY_ABORTED:
        return SCSI_COND_RETRY;
    default:
        return SCSI_COND_OTHER;
    }
}

int scsi_cond_errno(scsi_cond_t c)
{
    switch (c) {
    case SCSI_COND_OK:
        return 0;
    case SCSI_COND_RETRY:
        return EAGAIN;
    case SCSI_COND_NO_MEDIUM:
        return ENOMEDIUM;
    case SCSI_COND_MEDIUM:
        return EIO;
    case SCSI_COND_WRITE_PROTECT:
        return EROFS;
    case SCSI_COND_END_OF_MEDIUM:
        return ENOSPC;
    case SCSI_COND_BLANK:
        return ENODATA;
    case SCSI_COND_UNSUPPORTED:
        return ENOTSUP;
    case SCSI_COND_ILLEGAL:
        return EINVAL;
    case SCSI_COND_DEVICE:
        return EHOSTDOWN;
    default:
        return EIO;
    }
}
