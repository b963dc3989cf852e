/* The SCSI command layer for tape libraries: one small interface (submit a
 * CDB with data in or out, get status and sense back, every command with a
 * timeout) over two transports, Linux SG_IO on /dev/sgN (sg.c) and iSCSI
 * through libiscsi (iscsi.c); the CDBs and response parsers of the media
 * changer (SMC-3) and drive (SSC-4) commands (cdb.c); sense data decoded
 * into messages naming the device, the command and the condition (sense.c).
 *
 * A device handle is used by one thread at a time (a drive or the changer
 * belongs to one worker); handles of different devices are independent. */
#ifndef STAGEIN_SCSI_H
#define STAGEIN_SCSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SCSI_CDB_MAX 16
#define SCSI_SENSE_MAX 96

typedef enum { SCSI_DIR_NONE, SCSI_DIR_IN, SCSI_DIR_OUT } scsi_dir_t;

/* SCSI status bytes */
#define SCSI_GOOD 0x00
#define SCSI_CHECK_CONDITION 0x02
#define SCSI_BUSY 0x08
#define SCSI_RESERVATION_CONFLICT 0x18

typedef struct {
    uint8_t cdb[SCSI_CDB_MAX];
    size_t cdb_len;
    scsi_dir_t dir;
    void *buf;                 /* data in or out; NULL with len 0 */
    size_t len;
    unsigned timeout_ms;       /* every command has one */
    const char *name;          /* "READ(6)": for messages and the trace */
} scsi_cmd_t;

typedef struct {
    int status;                /* SCSI status byte */
    size_t transferred;        /* data bytes moved (len less the residual) */
    uint8_t sense[SCSI_SENSE_MAX];
    size_t sense_len;
} scsi_result_t;

/* ---- sense data (sense.c) ----------------------------------------------------- */

enum {
    SCSI_KEY_NO_SENSE = 0x0, SCSI_KEY_RECOVERED = 0x1, SCSI_KEY_NOT_READY = 0x2,
    SCSI_KEY_MEDIUM_ERROR = 0x3, SCSI_KEY_HARDWARE_ERROR = 0x4,
    SCSI_KEY_ILLEGAL_REQUEST = 0x5, SCSI_KEY_UNIT_ATTENTION = 0x6,
    SCSI_KEY_DATA_PROTECT = 0x7, SCSI_KEY_BLANK_CHECK = 0x8, SCSI_KEY_ABORTED = 0xb,
    SCSI_KEY_VOLUME_OVERFLOW = 0xd,
};

typedef struct {
    bool valid;                /* a fixed or descriptor format was decoded */
    int key, asc, ascq;
    bool filemark, eom, ili;   /* the stream bits (fixed byte 2, or descriptor 04h) */
    bool info_valid;
    int64_t info;              /* INFORMATION: residue of READ/SPACE, signed */
} scsi_sense_t;

/* What a condition means for the caller (also the errno scsi_run sets). */
typedef enum {
    SCSI_COND_OK,
    SCSI_COND_RETRY,           /* UNIT ATTENTION, becoming ready, BUSY (EAGAIN) */
    SCSI_COND_NO_MEDIUM,       /* NOT READY, medium not present (ENOMEDIUM) */
    SCSI_COND_MEDIUM,          /* MEDIUM ERROR (EIO) */
    SCSI_COND_WRITE_PROTECT,   /* DATA PROTECT (EROFS) */
    SCSI_COND_END_OF_MEDIUM,   /* VOLUME OVERFLOW or EOM on write (ENOSPC) */
    SCSI_COND_BLANK,           /* BLANK CHECK: end of data (ENODATA) */
    SCSI_COND_UNSUPPORTED,     /* ILLEGAL REQUEST, invalid opcode or field (ENOTSUP) */
    SCSI_COND_ILLEGAL,         /* other ILLEGAL REQUEST (EINVAL) */
    SCSI_COND_DEVICE,          /* HARDWARE ERROR, transport failure, timeout (EHOSTDOWN) */
    SCSI_COND_OTHER,           /* anything else (EIO) */
} scsi_cond_t;

/* Fixed (70h/71h) and descriptor (72h/73h) formats; 0, or -1 when neither. */
int scsi_sense_parse(const uint8_t *sense, size_t len, scsi_sense_t *out);
const char *scsi_sense_key_name(int key);
/* The standard text of an additional sense code, or NULL when not in the table. */
const char *scsi_asc_text(int asc, int ascq);
/* "MEDIUM ERROR: unrecovered read error (asc 11h/00h)" into buf. */
void scsi_sense_describe(const scsi_sense_t *s, char *buf, size_t size);
scsi_cond_t scsi_condition(int status, const scsi_sense_t *s);
int scsi_cond_errno(scsi_cond_t c);

/* ---- devices --------------------------------------------------------------------- */

typedef struct {
    /* 0 with res filled (any SCSI status); -1 when the command did not
     * complete (transport failure, timeout: errno ETIMEDOUT), err says why. */
    int (*submit)(void *impl, const scsi_cmd_t *cmd, scsi_result_t *res, si_error_t *err);
    void (*close)(void *impl);
    /* Optional (NULL: one command at a time, as SG_IO here): start sends cmd
     * without waiting (0, or -1 when it could not be sent); reap waits for
     * one started command to end, puts its outcome into the res given to
     * start and its tag into *tag, and returns what submit would have. */
    int (*start)(void *impl, const scsi_cmd_t *cmd, scsi_result_t *res, void *tag,
                 si_error_t *err);
    int (*reap)(void *impl, void **tag, si_error_t *err);
    /* Optional: LOGICAL UNIT RESET (task management), NULL where none. */
    int (*reset)(void *impl, si_error_t *err);
} scsi_transport_t;

typedef struct scsi_dev scsi_dev_t;

/* Called after every command (for command logs: tests check the order of
 * MOVE MEDIUM and SPACE); res NULL when the transport failed. */
typedef void (*scsi_trace_fn)(void *arg, const char *device, const scsi_cmd_t *cmd,
                              const scsi_result_t *res, double seconds);

/* A device over a transport (takes impl; closes it on failure too). */
scsi_dev_t *scsi_dev_new(const char *name, const scsi_transport_t *t, void *impl,
                         si_error_t *err);
/* "/dev/sgN" (SG_IO) or "iscsi://HOST[:PORT]/IQN/LUN" (libiscsi, when built). */
scsi_dev_t *scsi_open(const char *address, si_error_t *err);
void scsi_close(scsi_dev_t *d);
const char *scsi_dev_name(const scsi_dev_t *d);
void scsi_set_trace(scsi_dev_t *d, scsi_trace_fn fn, void *arg);
/* Commands run on this device so far. */
uint64_t scsi_dev_commands(const scsi_dev_t *d);

/* Runs cmd. Anything but GOOD fails with err naming device, command and the
 * decoded condition, errno from scsi_cond_errno; *sense (may be NULL) gets
 * the decoded sense also on failure (filemark, ILI residue), *res too. */
int scsi_run(scsi_dev_t *d, const scsi_cmd_t *cmd, scsi_result_t *res, scsi_sense_t *sense,
             si_error_t *err);

/* ---- several commands in flight (queue depth) -------------------------------------- */

#define SCSI_QUEUE_MAX 16

/* How many commands scsi_start keeps in flight on this device: 1 where the
 * transport runs one at a time (the started commands then run in order on
 * the device's own thread, while the caller goes on). */
int scsi_queue_depth(const scsi_dev_t *d);
/* Commands started and not yet reaped. */
size_t scsi_in_flight(const scsi_dev_t *d);
/* Sends cmd (copied; its buffer must stay until reaped) without waiting
 * for it; tag comes back from scsi_reap. -1 (err) when it could not be
 * sent or SCSI_QUEUE_MAX are in flight already. The device runs the
 * commands in the order started (a tape drive has one head); the caller
 * that started several handles their outcomes in that order. scsi_run
 * refuses (EBUSY) while started commands are not reaped. */
int scsi_start(scsi_dev_t *d, const scsi_cmd_t *cmd, void *tag, si_error_t *err);
/* Waits for the oldest started command: *tag, and its outcome as scsi_run
 * gives it (res, sense, err, errno). */
int scsi_reap(scsi_dev_t *d, void **tag, scsi_result_t *res, scsi_sense_t *sense,
              si_error_t *err);

/* LOGICAL UNIT RESET of a unit that hangs (stagein-tape reset): every
 * initiator's next command then reports UNIT ATTENTION (29h). */
int scsi_reset(scsi_dev_t *d, si_error_t *err);

bool scsi_have_iscsi(void);

/* SG_IO (sg.c): the transport alone, for /dev/sgN. */
void *scsi_sg_open(const char *path, si_error_t *err);
extern const scsi_transport_t scsi_sg_transport;
/* libiscsi (iscsi.c) */
void *scsi_iscsi_open(const char *url, si_error_t *err);
extern const scsi_transport_t scsi_iscsi_transport;

/* ---- discovery (sg.c) --------------------------------------------------------------- */

typedef struct {
    char path[32];             /* /dev/sgN */
    int type;                  /* peripheral device type: 1 tape, 8 changer */
    char vendor[9], product[17], revision[5];
    char hctl[32];             /* host:channel:target:lun ("" unknown) */
    char serial[65];           /* unit serial number (VPD page 80h from sysfs), "" unknown */
    char kernel[32];           /* the upper driver's device: "nst0" (st), "sch0" (ch), "" */
    /* For a drive: the changer it belongs to, by index into the list: the
     * changer on the same host, channel and target (another LUN: most
     * libraries put the changer behind a drive's target), else the only
     * changer on the same host; -1 none (drives on targets of their own:
     * match them by serial, READ ELEMENT STATUS). */
    int changer;
} scsi_sg_entry_t;

/* The SCSI generic devices sysfs lists under root ("/sys/class/scsi_generic"
 * normally; tests pass a tree of their own), sorted by name: each
 * sgN/device/{type,vendor,model,rev,vpd_pg80}, the H:C:T:L the device link
 * names, the st or ch device beside it, and each drive's changer. */
int scsi_sg_list(const char *root, scsi_sg_entry_t **out, size_t *n, si_error_t *err);
/* The drives of the list that belong to changer index c (their indices into
 * idx, at most max): how many. */
size_t scsi_sg_drives_of(const scsi_sg_entry_t *e, size_t n, size_t c, size_t *idx, size_t max);

#endif
