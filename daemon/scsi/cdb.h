/* CDBs of the changer (SMC-3) and drive (SSC-4) commands the tape backend
 * uses, and parsers of their responses. Pure functions over bytes: the unit
 * tests check every CDB byte and parse recorded responses, including the
 * commands the emulator used by the system tests lacks (LOCATE, READ
 * POSITION with a block position, RAO). Multi-byte fields are big-endian. */
#ifndef STAGEIN_SCSI_CDB_H
#define STAGEIN_SCSI_CDB_H

#include "daemon/scsi/scsi.h"

/* Default timeouts (ms): an LTO drive's worst case with margin (a locate
 * end to end is minutes; a changer move with retries a few minutes). */
#define SCSI_T_QUICK 30000u
#define SCSI_T_MOVE 600000u
#define SCSI_T_LOAD 900000u
#define SCSI_T_POSITION 3600000u
#define SCSI_T_RW 900000u

/* ---- both ------------------------------------------------------------------------------ */
void scsi_cdb_test_unit_ready(scsi_cmd_t *c);
void scsi_cdb_inquiry(scsi_cmd_t *c, bool evpd, uint8_t page, void *buf, uint16_t len);

typedef struct {
    int type;                  /* peripheral device type (1 tape, 8 changer) */
    bool removable;
    bool cmdque;               /* queues commands (byte 7 CmdQue) */
    char vendor[9], product[17], revision[5]; /* trailing blanks cut */
} scsi_inquiry_t;
int scsi_parse_inquiry(const uint8_t *d, size_t len, scsi_inquiry_t *out, si_error_t *err);
/* VPD page 80h: the unit serial number, blanks cut. */
int scsi_parse_serial(const uint8_t *d, size_t len, char *out, size_t size, si_error_t *err);

/* ---- changer (SMC-3) --------------------------------------------------------------------- */
enum { SCSI_ELEM_ALL = 0, SCSI_ELEM_TRANSPORT = 1, SCSI_ELEM_SLOT = 2, SCSI_ELEM_PORT = 3,
       SCSI_ELEM_DRIVE = 4 };

void scsi_cdb_initialize_element_status(scsi_cmd_t *c);
void scsi_cdb_read_element_status(scsi_cmd_t *c, int type, uint16_t start, uint16_t count,
                                  bool voltag, bool dvcid, void *buf, uint32_t len);
void scsi_cdb_move_medium(scsi_cmd_t *c, uint16_t transport, uint16_t src, uint16_t dst);

typedef struct {
    int type;                  /* SCSI_ELEM_* */
    uint16_t address;
    bool full, except, access;
    int asc, ascq;             /* why, when except */
    bool source_valid;
    uint16_t source;           /* where the medium came from */
    char barcode[33];          /* primary volume tag, blanks cut; "" none */
    char ident[65];            /* drive identifier (DVCID), "" none */
} scsi_element_t;

/* Appends the descriptors of a READ ELEMENT STATUS response to *els (grown
 * with realloc); malformed lengths are an error naming the offset. */
int scsi_parse_element_status(const uint8_t *d, size_t len, scsi_element_t **els, size_t *n,
                              si_error_t *err);

/* ---- drive (SSC-4) ------------------------------------------------------------------------ */
void scsi_cdb_load_unload(scsi_cmd_t *c, bool load);
void scsi_cdb_rewind(scsi_cmd_t *c);
enum { SCSI_RP_SHORT = 0x00, SCSI_RP_LONG = 0x06 };
void scsi_cdb_read_position(scsi_cmd_t *c, int form, void *buf, uint16_t len);
enum { SCSI_LOCATE_OBJECT = 0, SCSI_LOCATE_FILE = 1, SCSI_LOCATE_EOD = 3 };
void scsi_cdb_locate16(scsi_cmd_t *c, int dest_type, uint8_t partition, uint64_t id);
enum { SCSI_SPACE_BLOCKS = 0, SCSI_SPACE_FILEMARKS = 1, SCSI_SPACE_EOD = 3 };
/* count is signed (negative: towards BOT), 24 bits. */
void scsi_cdb_space6(scsi_cmd_t *c, int code, int32_t count);
/* Variable-block transfers of one block of len bytes (< 16 MiB). */
void scsi_cdb_read6(scsi_cmd_t *c, void *buf, uint32_t len);
void scsi_cdb_write6(scsi_cmd_t *c, const void *buf, uint32_t len);
void scsi_cdb_write_filemarks6(scsi_cmd_t *c, uint32_t count);
void scsi_cdb_mode_sense6(scsi_cmd_t *c, uint8_t page, void *buf, uint8_t len);
void scsi_cdb_mode_select6(scsi_cmd_t *c, const void *buf, uint8_t len);
void scsi_cdb_report_density(scsi_cmd_t *c, bool media, void *buf, uint16_t len);
/* Recommended Access Order (MAINTENANCE OUT/IN, service action 1Dh). */
void scsi_cdb_generate_rao(scsi_cmd_t *c, const void *list, uint32_t len);
void scsi_cdb_receive_rao(scsi_cmd_t *c, void *buf, uint32_t len);

typedef struct {
    bool bop, eop;             /* beginning / end of partition */
    bool block_valid;          /* short: !BPU; long: !MPU */
    uint32_t partition;
    uint64_t block;            /* logical object (block) number */
    bool file_valid;           /* long form only */
    uint64_t file;             /* logical file (filemark count from BOP) */
} scsi_position_t;
int scsi_parse_position(int form, const uint8_t *d, size_t len, scsi_position_t *out,
                        si_error_t *err);

typedef struct {
    bool write_protect;        /* device-specific parameter bit 7 */
    uint8_t density;
    uint32_t block_length;     /* 0: variable */
    bool has_compression;      /* the data compression page was returned */
    bool compression;          /* DCE */
} scsi_mode_t;
/* MODE SENSE(6) with page 0Fh (data compression) or without a page. */
int scsi_parse_mode_sense6(const uint8_t *d, size_t len, scsi_mode_t *out, si_error_t *err);
/* MODE SELECT(6) parameter list: the block descriptor (block_length, 0
 * variable) and, when set_compression, page 0Fh with DCE = compression.
 * Returns the list's length (buf >= 28 bytes). */
size_t scsi_mode_select6_list(uint8_t *buf, uint32_t block_length, bool set_compression,
                              bool compression);

typedef struct {
    uint8_t primary, secondary;
    bool writable, is_default;
    uint32_t capacity_mb;      /* 10^6 bytes */
    char name[9];              /* "U-832" */
    char description[21];
} scsi_density_t;
int scsi_parse_density(const uint8_t *d, size_t len, scsi_density_t **out, size_t *n,
                       si_error_t *err);

/* One user data segment of a RAO list. */
typedef struct {
    char name[11];             /* the caller's id, up to 10 bytes */
    uint8_t partition;
    uint64_t begin, end;       /* logical objects */
} scsi_uds_t;
/* A GENERATE RAO parameter list for n segments into buf (8 + 32 n bytes). */
size_t scsi_rao_list(uint8_t *buf, size_t size, const scsi_uds_t *uds, size_t n);
/* RECEIVE RAO data: the segments in the recommended order. */
int scsi_parse_rao(const uint8_t *d, size_t len, scsi_uds_t **out, size_t *n, si_error_t *err);

#endif
