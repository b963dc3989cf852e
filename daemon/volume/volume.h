/* The on-volume format of the simulated tape library.
 *
 * A volume is one image file, <dir>/<LABEL>.vol, holding the bytes written
 * to the tape as they would lie on it (doc/tape-format.md):
 *
 *     [label record][filemark 0][tar stream 1][filemark 1][tar stream 2]...
 *
 * Each archive file is a POSIX pax tar stream whose members are named
 * "bucket/key"; their sha256 is kept in the pax header (STAGEIN.checksum).
 * Records are 512 bytes; a position is a byte offset from BOT (offset 0).
 * Unreadable regions (fault injection) live in <dir>/<LABEL>.unreadable so
 * that every process that opens the volume sees the same faults. */
#ifndef STAGEIN_VOLUME_H
#define STAGEIN_VOLUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/checksum.h"
#include "common/conf.h"
#include "common/error.h"

typedef struct tapevol tapevol_t;
typedef struct catalog catalog_t;

#define TAPEVOL_FORMAT 1          /* format version written in the label */
#define TAPEVOL_RECORD 512        /* label, filemark and tar block size */
#define TAPEVOL_LABEL_MAX 32      /* [A-Z0-9_-]{1,32}, as in the catalog */
#define TAPEVOL_MEDIA_MAX 31      /* [A-Za-z0-9._-]{1,31} */
/* The first archive file starts after the label record and its filemark. */
#define TAPEVOL_FIRST_FILE_OFFSET (2 * TAPEVOL_RECORD)

/* library.volume_dir (the "library" group itself belongs to the simulator). */
extern const si_conf_key_t volume_conf_keys[];

/* library.volume_dir, else <state_dir>/volumes, else
 * LOCALSTATEDIR/lib/stagein/volumes; written into buf, which is returned. */
const char *tapevol_conf_dir(const si_conf_t *conf, char *buf, size_t size);

int tapevol_label_check(const char *label, si_error_t *err);
int tapevol_media_check(const char *media, si_error_t *err);
/* Native capacity in bytes of a known media type ("LTO-9", "LTO-10"), or 0. */
uint64_t tapevol_media_capacity(const char *media);

/* ---- volumes ----------------------------------------------------------- */

/* Writes a new volume holding only its label (and filemark 0), durably.
 * Creates dir if missing. Fails if the volume exists. */
int tapevol_create(const char *dir, const char *label, const char *media,
                   uint64_t capacity, si_error_t *err);

enum {
    TAPEVOL_RDONLY = 0,
    TAPEVOL_RDWR = 1 << 0,
};

/* Opens and checks the label record. */
tapevol_t *tapevol_open(const char *dir, const char *label, int flags, si_error_t *err);
void tapevol_close(tapevol_t *vol);

/* Labels of the volumes in dir (files named LABEL.vol), sorted. An absent
 * dir has no volumes. Free with tapevol_labels_free. */
int tapevol_list(const char *dir, char ***labels, size_t *count, si_error_t *err);
void tapevol_labels_free(char **labels, size_t count);

typedef struct {
    char label[TAPEVOL_LABEL_MAX + 1];
    char media[TAPEVOL_MEDIA_MAX + 1];
    int format;
    uint64_t capacity;   /* bytes */
    int64_t created;     /* unix seconds */
    uint64_t used;       /* bytes from BOT to end of data */
    int64_t files;       /* archive files (the label file not counted) */
} tapevol_info_t;

/* The label record (tape file 0) and a filemark record, as laid out in an
 * image; a real cartridge holds the label record as its first block (the
 * tape backend, daemon/archive/tape.c). */
void tapevol_label_format(unsigned char rec[TAPEVOL_RECORD], const char *label,
                          const char *media, uint64_t capacity, int64_t created);
int tapevol_label_parse(const unsigned char rec[TAPEVOL_RECORD], tapevol_info_t *info,
                        si_error_t *err);
void tapevol_filemark_format(unsigned char rec[TAPEVOL_RECORD], int64_t seq,
                             uint64_t start, uint64_t end);

/* Label fields and the current end of data; files comes from the last
 * filemark, so a volume whose end is not a filemark is reported corrupt. */
int tapevol_info(tapevol_t *vol, tapevol_info_t *info, si_error_t *err);
/* The label record's fields alone (used and files 0): no reads. */
void tapevol_label_fields(const tapevol_t *vol, tapevol_info_t *info);
const char *tapevol_label(const tapevol_t *vol);
const char *tapevol_path(const tapevol_t *vol);

typedef struct {
    int64_t files;        /* archive files left on the volume */
    uint64_t used;        /* end of data after recovery */
    uint64_t discarded;   /* bytes of an interrupted write that were cut */
} tapevol_recovery_t;

/* Makes a volume whose data does not end with a filemark appendable again:
 * the tail left by an interrupted append (data that stops inside an archive
 * file) is cut back to the end of the last complete archive file, as a
 * drive's next write would overwrite it. Anything else that is wrong with
 * the volume is an error and nothing is cut. Locks out concurrent appends;
 * needs TAPEVOL_RDWR. A volume that needs nothing reports discarded 0. */
int tapevol_recover(tapevol_t *vol, tapevol_recovery_t *rec, si_error_t *err);

/* ---- writing ----------------------------------------------------------- */

typedef struct {
    const char *bucket;
    const char *key;
    const char *path;      /* data source file, or NULL to read fd */
    int fd;                /* used when path is NULL; read from its offset */
    uint64_t size;         /* bytes to write; the source must hold exactly this (from offset) */
    int64_t mtime;         /* unix seconds, >= 0 */
    const char *checksum;  /* expected "sha256:hex", or NULL */
    /* What an S3 client stored with the object (catalog object_meta),
     * kept in the pax header (STAGEIN.headers, STAGEIN.storage_class) so
     * that an import restores it; NULL: none. */
    const char *headers;   /* "name: value\n" lines */
    const char *storage_class;
    uint64_t offset;       /* where path's bytes start (> 0: a range of a cache segment) */
} tapevol_member_t;

/* One member of an archive file, as written or as read back. */
typedef struct {
    char *bucket;
    char *key;
    int64_t file_seq;         /* archive file it belongs to */
    uint64_t header_offset;   /* first tar block of the member (its pax header) */
    uint64_t position;        /* data offset from BOT */
    uint64_t size;            /* data bytes */
    int64_t mtime;
    char checksum[SI_CHECKSUM_TEXT_MAX]; /* "" when the archive carries none */
    char *headers;            /* STAGEIN.headers, NULL when the member has none */
    char *storage_class;      /* STAGEIN.storage_class, NULL when none */
} tapevol_entry_t;

typedef struct {
    int64_t seq;        /* 1, 2, ...; `mt fsf SEQ` from BOT reaches it */
    uint64_t start;     /* first byte of the tar stream */
    uint64_t end;       /* first byte after it, where its filemark record lies */
    size_t first;       /* its members: entries[first .. first + count) */
    size_t count;
} tapevol_file_t;

/* The archive files and members of a volume, or of one append. */
typedef struct {
    size_t nfiles;
    tapevol_file_t *files;
    size_t nentries;
    tapevol_entry_t *entries;
} tapevol_listing_t;

void tapevol_listing_free(tapevol_listing_t *l);

/* Appends one archive file holding members[0..n) at the end of data, with
 * its filemark, and fsyncs before returning. Refuses (ENOSPC) a file that
 * would pass the capacity, bad names, duplicate names, a source of another
 * size and a checksum mismatch; on failure the volume is left unchanged.
 * *written (free with tapevol_listing_free) holds the file and each
 * member's position, in the order given. Needs TAPEVOL_RDWR. */
int tapevol_append(tapevol_t *vol, const tapevol_member_t *members, size_t n,
                   tapevol_listing_t **written, si_error_t *err);

/* Bytes an archive file of these members takes on the volume, filemark
 * included (what tapevol_append checks against the free space). */
uint64_t tapevol_archive_bytes(const tapevol_member_t *members, size_t n);

/* ---- reading ----------------------------------------------------------- */

/* Reads exactly len bytes at position pos. A read overlapping an unreadable
 * region fails with errno EIO; one past the end of data fails with EINVAL. */
int tapevol_read(tapevol_t *vol, uint64_t pos, void *buf, size_t len, si_error_t *err);

enum {
    TAPEVOL_WALK_VERIFY = 1 << 0, /* also re-read every member and check its sha256 */
};

/* Parses the whole volume from its own records and tar headers. Any
 * malformed, truncated or hostile structure is an error naming the offset. */
int tapevol_walk(tapevol_t *vol, int flags, tapevol_listing_t **listing, si_error_t *err);

/* ---- fault injection: unreadable regions ------------------------------- */

typedef struct {
    uint64_t start;
    uint64_t length;
} tapevol_region_t;

int tapevol_fault_add(tapevol_t *vol, uint64_t start, uint64_t length, si_error_t *err);
int tapevol_fault_clear(tapevol_t *vol, si_error_t *err);
/* The current regions (copied; free()). */
int tapevol_faults(tapevol_t *vol, tapevol_region_t **regions, size_t *count,
                   si_error_t *err);

/* ---- catalog ----------------------------------------------------------- */

/* Copy numbers an import tries for one object (tapevol_import_stats_t). */
#define TAPEVOL_IMPORT_COPIES 16

typedef struct {
    int64_t files;        /* archive files on the volume */
    uint64_t members;     /* members on the volume */
    uint64_t recorded;    /* objects recorded (a member written again later
                           * on the same volume counts once: its last copy) */
    uint64_t new_objects; /* of those, objects the catalog did not know */
    uint64_t new_copies;  /* tape copies the catalog did not know */
    uint64_t renumbered;  /* of those, recorded under the next free copy number:
                           * the one asked for held the same object elsewhere */
} tapevol_import_stats_t;

/* Records the volume, and every entry of listing as an object with a tape
 * copy (number copy) on it, in one catalog transaction: all or nothing.
 * An entry's headers and storage class go into the object's object_meta
 * when it has none there yet (what the catalog holds is never replaced).
 * Recording the same listing again changes nothing. stats may be NULL. */
int tapevol_catalog_record(catalog_t *cat, const tapevol_info_t *info,
                           const tapevol_listing_t *listing, int copy,
                           tapevol_import_stats_t *stats, si_error_t *err);

/* Rebuilds the catalog entries of a volume from the volume alone:
 * tapevol_walk, then tapevol_catalog_record. */
int tapevol_import(tapevol_t *vol, catalog_t *cat, int copy, int walk_flags,
                   tapevol_import_stats_t *stats, si_error_t *err);

#endif
