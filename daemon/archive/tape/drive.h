/* A tape drive and a media changer as the tape backend drives them: bounded
 * retries while a unit becomes ready, positioning by LOCATE(16) where the
 * drive has it (probed) else by SPACE over filemarks and blocks, variable
 * block reads and writes, the inventory and moves of the changer. The
 * position is tracked as (tape file, block within it): tape file 0 is the
 * label, archive file N is tape file N (doc/tape-format.md). */
#ifndef STAGEIN_ARCHIVE_TAPE_DRIVE_H
#define STAGEIN_ARCHIVE_TAPE_DRIVE_H

#include "daemon/scsi/cdb.h"

typedef struct {
    scsi_dev_t *dev;
    scsi_inquiry_t inquiry;
    char serial[65];
    bool can_locate;           /* LOCATE(16) and READ POSITION with block numbers work */
    bool can_rao;              /* RECEIVE RAO answered */
    bool probed;               /* can_locate and can_rao are known */
    bool pos_known;
    int64_t file;              /* tape file the head is in */
    uint64_t block;            /* blocks of it before the head */
    int retries;               /* bounded retries of UNIT ATTENTION / becoming ready */
    unsigned retry_ms;
    int queue_depth;           /* READs kept in flight where the drive queues (configured) */
    size_t read_len;           /* what the READs in flight ask for */
} tape_drive_t;

/* INQUIRY (and serial number); no medium needed. */
int tape_drive_identify(tape_drive_t *d, si_error_t *err);
/* TEST UNIT READY until ready, retrying UNIT ATTENTION and becoming ready
 * (d->retries times, d->retry_ms apart). */
int tape_drive_ready(tape_drive_t *d, si_error_t *err);
/* With a medium loaded: does the drive have LOCATE(16) and block positions?
 * (READ POSITION, then a LOCATE to where the head is.) Also probes RAO.
 * The head may move: the caller positions afterwards. */
void tape_drive_probe(tape_drive_t *d);
/* READ POSITION, long form: where the drive says its head is. */
int tape_drive_read_position(tape_drive_t *d, scsi_position_t *pos, si_error_t *err);
int tape_drive_rewind(tape_drive_t *d, si_error_t *err);
int tape_drive_unload(tape_drive_t *d, si_error_t *err);
/* Variable blocks; compression off when asked (MODE SELECT); *write_protect
 * from MODE SENSE. */
int tape_drive_setup(tape_drive_t *d, bool compression_off, bool *write_protect,
                     si_error_t *err);
/* Head to the first block of tape file `file`. */
int tape_drive_to_file(tape_drive_t *d, int64_t file, si_error_t *err);
/* Head to block `block` of tape file `file`; base is the logical object
 * number of the file's first block (used with LOCATE). */
int tape_drive_to_block(tape_drive_t *d, int64_t file, uint64_t block, uint64_t base,
                        si_error_t *err);
/* One block into buf (size max): *got bytes; *filemark when a filemark was
 * read instead (the head is then at the next file); *eod at end of data. */
int tape_drive_read_block(tape_drive_t *d, void *buf, size_t max, size_t *got, bool *filemark,
                          bool *eod, si_error_t *err);
/* READs in flight at once: queue_depth where the drive queues commands
 * (INQUIRY CmdQue) and the transport sends several (iSCSI), else 1. */
int tape_drive_depth(const tape_drive_t *d);
/* Starts the READ(6) of the next block into buf (size max, the same for
 * every READ in flight) without waiting; the head position moves as they
 * are reaped, oldest first, so nothing else may run on the drive between. */
int tape_drive_read_start(tape_drive_t *d, void *buf, size_t max, si_error_t *err);
/* The oldest READ started: *buf is its buffer, the rest as
 * tape_drive_read_block. *buf NULL (and -1) when none was in flight. */
int tape_drive_read_reap(tape_drive_t *d, void **buf, size_t *got, bool *filemark, bool *eod,
                         si_error_t *err);
/* errno ENOSPC at end of medium (the block may be written: early warning). */
int tape_drive_write_block(tape_drive_t *d, const void *buf, size_t len, si_error_t *err);
/* WRITE(6)s in flight, as the READs above: started without waiting, their
 * outcomes (ENOSPC at the early warning) reaped oldest first, *buf the
 * block's buffer (NULL, and -1, when none was in flight). */
int tape_drive_write_start(tape_drive_t *d, const void *buf, size_t len, si_error_t *err);
int tape_drive_write_reap(tape_drive_t *d, void **buf, si_error_t *err);
int tape_drive_write_filemark(tape_drive_t *d, si_error_t *err);
/* RAO of n segments (GENERATE then RECEIVE): out gets the drive's order. */
int tape_drive_rao(tape_drive_t *d, const scsi_uds_t *uds, size_t n, scsi_uds_t **out,
                   size_t *nout, si_error_t *err);

/* ---- the changer ------------------------------------------------------------------------ */

typedef struct {
    scsi_dev_t *dev;
    uint16_t transport;        /* the robot's element address */
    scsi_element_t *els;
    size_t nels;
} tape_changer_t;

/* READ ELEMENT STATUS of every type (barcodes, full, source): els. */
int tape_changer_inventory(tape_changer_t *c, si_error_t *err);
/* The element holding barcode, or NULL. */
const scsi_element_t *tape_changer_find(const tape_changer_t *c, const char *barcode);
const scsi_element_t *tape_changer_element(const tape_changer_t *c, uint16_t address);
/* Does a drive element's identifier (DVCID: vendor, product, serial, as
 * INQUIRY gives them) end in this serial number, as a whole word? */
bool tape_ident_names_serial(const char *ident, const char *serial);
/* The drive elements whose identifier names serial: how many (0 none, 1 the
 * one in *address, more: ambiguous). An identifier a report cut short is
 * left empty, never matched (tgt sends its last descriptor 8 bytes short). */
int tape_changer_match_serial(const tape_changer_t *c, const char *serial, uint16_t *address);
/* MOVE MEDIUM; a move that fails re-reads the inventory (never guessed). */
int tape_changer_move(tape_changer_t *c, uint16_t src, uint16_t dst, si_error_t *err);

/* ---- a cartridge's bytes as a volume image ---------------------------------------------- */

/* Reads the cartridge in d (from BOT, through every complete archive file,
 * to end of data) into DIR/LABEL.vol, the layout of the simulated volumes
 * (a filemark record in place of each filemark), so that `stagein tape
 * dump` and `stagein tape import --volume-dir DIR` work on a real
 * cartridge. An archive file cut short (no filemark before end of data) is
 * left out, as recovery would cut it. *label gets the label record's. */
int tape_read_image(tape_drive_t *d, const char *dir, size_t block_max,
                    char label[33], si_error_t *err);

#endif
