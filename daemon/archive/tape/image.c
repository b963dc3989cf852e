/* A cartridge read into a volume image (drive.h: tape_read_image). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "daemon/archive/tape/drive.h"
#include "daemon/volume/volume.h"

static int put_at(int fd, const void *buf, size_t len, uint64_t off, si_error_t *err)
{
    if (si_pwrite_all(fd, buf, len, off) < 0)
        return si_errprintf(err, "image write: %s", strerror(errno));
    return 0;
}

int tape_read_image(tape_drive_t *d, const char *dir, size_t block_max, char label[33],
                    si_error_t *err)
{
    unsigned char *buf = malloc(block_max);
    char tmp[PATH_MAX], path[PATH_MAX];
    int fd = -1, rc = -1;
    if (!buf)
        return si_errprintf(err, "out of memory");
    size_t got;
    bool fm, eod;
    tapevol_info_t info;
    if (tape_drive_rewind(d, err) < 0 ||
        tape_drive_read_block(d, buf, block_max, &got, &fm, &eod, err) < 0)
        goto out;
    if (eod || fm || got != TAPEVOL_RECORD || tapevol_label_parse(buf, &info, err) < 0) {
        si_errprintf(err, "%s: the cartridge's first block is not a stagein label record%s",
                     scsi_dev_name(d->dev), eod ? " (blank cartridge)" : "");
        goto out;
    }
    snprintf(label, 33, "%s", info.label);
    snprintf(path, sizeof(path), "%s/%s.vol", dir, info.label);
    snprintf(tmp, sizeof(tmp), "%s/.%s.vol.tmp", dir, info.label);
    mkdir(dir, 0755);
    if ((fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
        si_errprintf(err, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    unsigned char rec[TAPEVOL_RECORD];
    if (put_at(fd, buf, TAPEVOL_RECORD, 0, err) < 0)
        goto out;
    /* the label file ends with its filemark */
    if (tape_drive_read_block(d, buf, block_max, &got, &fm, &eod, err) < 0)
        goto out;
    if (!fm) {
        si_errprintf(err, "%s: tape file 0 holds more than the label record",
                     scsi_dev_name(d->dev));
        goto out;
    }
    tapevol_filemark_format(rec, 0, 0, TAPEVOL_RECORD);
    if (put_at(fd, rec, sizeof(rec), TAPEVOL_RECORD, err) < 0)
        goto out;
    uint64_t complete = TAPEVOL_FIRST_FILE_OFFSET, off = complete;
    for (int64_t seq = 1;; seq++) {
        uint64_t start = off;
        for (;;) {
            if (tape_drive_read_block(d, buf, block_max, &got, &fm, &eod, err) < 0)
                goto out;
            if (fm || eod)
                break;
            if (got % TAPEVOL_RECORD) {
                si_errprintf(err, "%s: archive file %" PRId64 " has a block of %zu bytes (not a "
                             "multiple of 512)", scsi_dev_name(d->dev), seq, got);
                goto out;
            }
            if (put_at(fd, buf, got, off, err) < 0)
                goto out;
            off += got;
        }
        if (eod)
            break; /* end of data; what follows the last filemark was cut short */
        tapevol_filemark_format(rec, seq, start, off);
        if (put_at(fd, rec, sizeof(rec), off, err) < 0)
            goto out;
        off += TAPEVOL_RECORD;
        complete = off;
    }
    if (ftruncate(fd, (off_t)complete) < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
        si_errprintf(err, "%s: %s", path, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    if (rc < 0 && fd >= 0)
        unlink(tmp);
    free(buf);
    return rc;
}
