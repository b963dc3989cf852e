/* Drive and changer operations of the tape backend (drive.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/archive/tape/drive.h"

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A command, retried while the unit says so (UNIT ATTENTION after a load or
 * reset, NOT READY becoming ready, BUSY), at most d->retries times. */
static int run_retry(tape_drive_t *d, const scsi_cmd_t *c, scsi_result_t *res,
                     scsi_sense_t *sense, si_error_t *err)
{
    for (int i = 0;; i++) {
        int rc = scsi_run(d->dev, c, res, sense, err);
        if (rc == 0 || errno != EAGAIN || i >= d->retries)
            return rc;
        sleep_ms(d->retry_ms);
    }
}

int tape_drive_identify(tape_drive_t *d, si_error_t *err)
{
    uint8_t buf[255];
    scsi_cmd_t c;
    scsi_result_t res;
    scsi_cdb_inquiry(&c, false, 0, buf, sizeof(buf));
    if (run_retry(d, &c, &res, NULL, err) < 0 ||
        scsi_parse_inquiry(buf, res.transferred, &d->inquiry, err) < 0)
        return -1;
    d->serial[0] = '\0';
    scsi_cdb_inquiry(&c, true, 0x80, buf, sizeof(buf));
    if (run_retry(d, &c, &res, NULL, NULL) == 0)
        scsi_parse_serial(buf, res.transferred, d->serial, sizeof(d->serial), NULL);
    return 0;
}

int tape_drive_ready(tape_drive_t *d, si_error_t *err)
{
    scsi_cmd_t c;
    scsi_cdb_test_unit_ready(&c);
    return run_retry(d, &c, NULL, NULL, err);
}

int tape_drive_read_position(tape_drive_t *d, scsi_position_t *pos, si_error_t *err)
{
    uint8_t buf[32];
    scsi_cmd_t c;
    scsi_result_t res;
    scsi_cdb_read_position(&c, SCSI_RP_LONG, buf, sizeof(buf));
    if (scsi_run(d->dev, &c, &res, NULL, err) < 0 ||
        scsi_parse_position(SCSI_RP_LONG, buf, res.transferred, pos, err) < 0)
        return -1;
    return 0;
}

void tape_drive_probe(tape_drive_t *d)
{
    uint8_t buf[8];
    scsi_cmd_t c;
    scsi_position_t pos;
    d->can_locate = false;
    if (tape_drive_read_position(d, &pos, NULL) == 0 && pos.block_valid) {
        scsi_cdb_locate16(&c, SCSI_LOCATE_OBJECT, (uint8_t)pos.partition, pos.block);
        d->can_locate = scsi_run(d->dev, &c, NULL, NULL, NULL) == 0;
    }
    scsi_cdb_receive_rao(&c, buf, 8);
    d->can_rao = scsi_run(d->dev, &c, NULL, NULL, NULL) == 0;
    d->probed = true;
}

int tape_drive_rewind(tape_drive_t *d, si_error_t *err)
{
    scsi_cmd_t c;
    scsi_cdb_rewind(&c);
    d->pos_known = false;
    if (run_retry(d, &c, NULL, NULL, err) < 0)
        return -1;
    d->pos_known = true;
    d->file = 0;
    d->block = 0;
    return 0;
}

int tape_drive_unload(tape_drive_t *d, si_error_t *err)
{
    scsi_cmd_t c;
    scsi_cdb_load_unload(&c, false);
    d->pos_known = false;
    return run_retry(d, &c, NULL, NULL, err);
}

int tape_drive_setup(tape_drive_t *d, bool compression_off, bool *write_protect,
                     si_error_t *err)
{
    uint8_t buf[64], list[28];
    scsi_cmd_t c;
    scsi_result_t res;
    scsi_mode_t m;
    scsi_cdb_mode_sense6(&c, compression_off ? 0x0f : 0, buf, sizeof(buf));
    if (run_retry(d, &c, &res, NULL, err) < 0 && compression_off) {
        /* no compression page: the block descriptor alone */
        compression_off = false;
        scsi_cdb_mode_sense6(&c, 0, buf, sizeof(buf));
        if (run_retry(d, &c, &res, NULL, err) < 0)
            return -1;
    } else if (res.status != SCSI_GOOD) {
        return -1;
    }
    if (scsi_parse_mode_sense6(buf, res.transferred, &m, err) < 0)
        return si_errprefix(err, "%s: MODE SENSE(6)", scsi_dev_name(d->dev));
    *write_protect = m.write_protect;
    if (m.block_length == 0 && !(compression_off && m.has_compression && m.compression))
        return 0;
    size_t n = scsi_mode_select6_list(list, 0, compression_off && m.has_compression, false);
    scsi_cdb_mode_select6(&c, list, (uint8_t)n);
    return run_retry(d, &c, NULL, NULL, err);
}

static int space(tape_drive_t *d, int code, int32_t count, scsi_sense_t *sense, si_error_t *err)
{
    scsi_cmd_t c;
    scsi_cdb_space6(&c, code, count);
    return run_retry(d, &c, NULL, sense, err);
}

int tape_drive_to_file(tape_drive_t *d, int64_t file, si_error_t *err)
{
    return tape_drive_to_block(d, file, 0, 0, err);
}

int tape_drive_to_block(tape_drive_t *d, int64_t file, uint64_t block, uint64_t base,
                        si_error_t *err)
{
    if (d->pos_known && d->file == file && d->block == block)
        return 0; /* reading on: no positioning at all */
    if (d->can_locate) {
        scsi_cmd_t c;
        scsi_cdb_locate16(&c, SCSI_LOCATE_OBJECT, 0, base + block);
        d->pos_known = false;
        if (run_retry(d, &c, NULL, NULL, err) < 0)
            return -1;
    } else {
        /* SPACE: forward from where the head is when the target lies ahead,
         * else from BOT (a rewind is the one backward move every drive has) */
        bool ahead = d->pos_known && (d->file < file || (d->file == file && d->block <= block));
        if (!ahead && tape_drive_rewind(d, err) < 0)
            return -1;
        d->pos_known = false;
        if (d->file < file) {
            if (space(d, SCSI_SPACE_FILEMARKS, (int32_t)(file - d->file), NULL, err) < 0)
                return si_errprefix(err, "to tape file %lld", (long long)file);
            d->block = 0;
        }
        if (block > d->block && space(d, SCSI_SPACE_BLOCKS, (int32_t)(block - d->block), NULL,
                                      err) < 0)
            return si_errprefix(err, "to block %llu of tape file %lld",
                                (unsigned long long)block, (long long)file);
    }
    d->pos_known = true;
    d->file = file;
    d->block = block;
    return 0;
}

/* A READ(6)'s outcome (rc from scsi_run or scsi_reap) into the position. */
static int read_outcome(tape_drive_t *d, int rc, const scsi_result_t *res,
                        const scsi_sense_t *sense, size_t max, size_t *got, bool *filemark,
                        bool *eod, si_error_t *err)
{
    *got = 0;
    *filemark = *eod = false;
    if (rc == 0) {
        *got = res->transferred;
        d->block++;
        return 0;
    }
    if (errno == ENODATA || (sense->valid && sense->key == SCSI_KEY_BLANK_CHECK)) {
        *eod = true;
        return 0;
    }
    if (errno != 0)
        return -1; /* a real error: err says which */
    if (sense->filemark) {
        *filemark = true;
        d->file++;
        d->block = 0;
        return 0;
    }
    if (sense->ili && sense->info_valid && sense->info >= 0 && (size_t)sense->info <= max) {
        *got = max - (size_t)sense->info;
        d->block++;
        return 0;
    }
    if (sense->ili && sense->info < 0)
        return si_errnoprintf(err, EOVERFLOW, "%s: READ(6): a block of %lld bytes is larger "
                              "than %zu (archive.tape.block_size)", scsi_dev_name(d->dev),
                              (long long)((long long)max - sense->info), max);
    if (sense->eom) {
        *eod = true;
        return 0;
    }
    return si_errnoprintf(err, EIO, "%s: READ(6): unexpected condition", scsi_dev_name(d->dev));
}

int tape_drive_read_block(tape_drive_t *d, void *buf, size_t max, size_t *got, bool *filemark,
                          bool *eod, si_error_t *err)
{
    scsi_cmd_t c;
    scsi_result_t res;
    scsi_sense_t sense;
    scsi_cdb_read6(&c, buf, (uint32_t)max);
    int rc = scsi_run(d->dev, &c, &res, &sense, err);
    return read_outcome(d, rc, &res, &sense, max, got, filemark, eod, err);
}

int tape_drive_depth(const tape_drive_t *d)
{
    int depth = d->queue_depth > 0 ? d->queue_depth : 1;
    if (!d->inquiry.cmdque)
        return 1; /* commands one at a time: the drive queues none */
    if (depth > scsi_queue_depth(d->dev))
        depth = scsi_queue_depth(d->dev);
    return depth;
}

int tape_drive_read_start(tape_drive_t *d, void *buf, size_t max, si_error_t *err)
{
    scsi_cmd_t c;
    scsi_cdb_read6(&c, buf, (uint32_t)max);
    d->read_len = max;
    return scsi_start(d->dev, &c, buf, err);
}

int tape_drive_read_reap(tape_drive_t *d, void **buf, size_t *got, bool *filemark, bool *eod,
                         si_error_t *err)
{
    scsi_result_t res;
    scsi_sense_t sense;
    int rc = scsi_reap(d->dev, buf, &res, &sense, err);
    if (!*buf) {
        d->pos_known = false;
        return -1; /* nothing was in flight */
    }
    return read_outcome(d, rc, &res, &sense, d->read_len, got, filemark, eod, err);
}

/* A WRITE(6)'s outcome (rc from scsi_run or scsi_reap) into the position. */
static int write_outcome(tape_drive_t *d, int rc, const scsi_sense_t *sense)
{
    if (rc == 0) {
        d->block++;
        return 0;
    }
    if (errno == 0 && sense->eom) {
        /* early warning: the block is written, the medium is nearly full */
        d->block++;
        errno = ENOSPC;
        return -1;
    }
    d->pos_known = false;
    return -1;
}

int tape_drive_write_block(tape_drive_t *d, const void *buf, size_t len, si_error_t *err)
{
    scsi_cmd_t c;
    scsi_sense_t sense;
    scsi_cdb_write6(&c, buf, (uint32_t)len);
    return write_outcome(d, scsi_run(d->dev, &c, NULL, &sense, err), &sense);
}

int tape_drive_write_start(tape_drive_t *d, const void *buf, size_t len, si_error_t *err)
{
    scsi_cmd_t c;
    scsi_cdb_write6(&c, buf, (uint32_t)len);
    return scsi_start(d->dev, &c, (void *)buf, err);
}

int tape_drive_write_reap(tape_drive_t *d, void **buf, si_error_t *err)
{
    scsi_sense_t sense;
    int rc = scsi_reap(d->dev, buf, NULL, &sense, err);
    if (!*buf) {
        d->pos_known = false;
        return -1;
    }
    return write_outcome(d, rc, &sense);
}

int tape_drive_write_filemark(tape_drive_t *d, si_error_t *err)
{
    scsi_cmd_t c;
    scsi_sense_t sense;
    scsi_cdb_write_filemarks6(&c, 1);
    int rc = scsi_run(d->dev, &c, NULL, &sense, err);
    if (rc < 0 && !(errno == 0 && sense.eom)) {
        d->pos_known = false;
        return -1;
    }
    d->file++;
    d->block = 0;
    return 0;
}

int tape_drive_rao(tape_drive_t *d, const scsi_uds_t *uds, size_t n, scsi_uds_t **out,
                   size_t *nout, si_error_t *err)
{
    size_t len = 8 + 32 * n;
    uint8_t *buf = malloc(len);
    if (!buf)
        return si_errprintf(err, "out of memory");
    scsi_cmd_t c;
    scsi_result_t res;
    int rc = -1;
    scsi_rao_list(buf, len, uds, n);
    scsi_cdb_generate_rao(&c, buf, (uint32_t)len);
    if (scsi_run(d->dev, &c, NULL, NULL, err) == 0) {
        scsi_cdb_receive_rao(&c, buf, (uint32_t)len);
        if (scsi_run(d->dev, &c, &res, NULL, err) == 0)
            rc = scsi_parse_rao(buf, res.transferred, out, nout, err);
    }
    free(buf);
    return rc;
}

/* ---- changer ---------------------------------------------------------------------------- */

/* Drive elements are asked for their identifiers (DVCID) as well: the
 * device serial numbers the configured drives are matched with. */

int tape_changer_inventory(tape_changer_t *c, si_error_t *err)
{
    size_t len = 1 << 16;
    uint8_t *buf = malloc(len);
    scsi_element_t *els = NULL;
    size_t n = 0;
    if (!buf)
        return si_errprintf(err, "out of memory");
    static const int types[] = {SCSI_ELEM_TRANSPORT, SCSI_ELEM_DRIVE, SCSI_ELEM_SLOT,
                                SCSI_ELEM_PORT};
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        scsi_cmd_t cmd;
        scsi_result_t res;
        scsi_cdb_read_element_status(&cmd, types[t], 0, 0xffff, types[t] != SCSI_ELEM_TRANSPORT,
                                     types[t] == SCSI_ELEM_DRIVE, buf, (uint32_t)len);
        if (scsi_run(c->dev, &cmd, &res, NULL, err) < 0) {
            if (types[t] == SCSI_ELEM_PORT || types[t] == SCSI_ELEM_TRANSPORT)
                continue; /* a library without import/export ports, or silent about its robot */
            goto fail;
        }
        if (scsi_parse_element_status(buf, res.transferred, &els, &n, err) < 0) {
            si_errprefix(err, "%s: READ ELEMENT STATUS", scsi_dev_name(c->dev));
            goto fail;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (els[i].type == SCSI_ELEM_TRANSPORT) {
            c->transport = els[i].address;
            break;
        }
    free(c->els);
    c->els = els;
    c->nels = n;
    free(buf);
    return 0;
fail:
    free(els);
    free(buf);
    return -1;
}

const scsi_element_t *tape_changer_find(const tape_changer_t *c, const char *barcode)
{
    for (size_t i = 0; i < c->nels; i++)
        if (c->els[i].full && strcmp(c->els[i].barcode, barcode) == 0)
            return &c->els[i];
    return NULL;
}

bool tape_ident_names_serial(const char *ident, const char *serial)
{
    size_t il = strlen(ident), sl = strlen(serial);
    while (il > 0 && ident[il - 1] == ' ')
        il--;
    if (sl == 0 || il < sl || strncmp(ident + il - sl, serial, sl) != 0)
        return false;
    /* the whole last word: serial 123 does not name ...0123 */
    return il == sl || ident[il - sl - 1] == ' ';
}

int tape_changer_match_serial(const tape_changer_t *c, const char *serial, uint16_t *address)
{
    int found = 0;
    for (size_t i = 0; i < c->nels; i++)
        if (c->els[i].type == SCSI_ELEM_DRIVE && tape_ident_names_serial(c->els[i].ident, serial)) {
            *address = c->els[i].address;
            found++;
        }
    return found;
}

const scsi_element_t *tape_changer_element(const tape_changer_t *c, uint16_t address)
{
    for (size_t i = 0; i < c->nels; i++)
        if (c->els[i].address == address)
            return &c->els[i];
    return NULL;
}

int tape_changer_move(tape_changer_t *c, uint16_t src, uint16_t dst, si_error_t *err)
{
    scsi_cmd_t cmd;
    scsi_cdb_move_medium(&cmd, c->transport, src, dst);
    int rc = scsi_run(c->dev, &cmd, NULL, NULL, err);
    int saved = errno;
    si_error_t ierr = {0};
    if (tape_changer_inventory(c, &ierr) < 0 && rc == 0) {
        if (err)
            *err = ierr;
        return -1;
    }
    errno = saved;
    return rc;
}
