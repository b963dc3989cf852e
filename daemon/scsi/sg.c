/* The SG_IO transport (Linux SCSI generic, /dev/sgN) and sysfs discovery. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#ifdef __linux__
#include <scsi/sg.h>
#endif

#include "daemon/scsi/scsi.h"

typedef struct {
    int fd;
    char path[64];
} sg_t;

void *scsi_sg_open(const char *path, si_error_t *err)
{
#ifdef __linux__
    sg_t *s = calloc(1, sizeof(*s));
    if (!s) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    snprintf(s->path, sizeof(s->path), "%s", path);
    /* O_NONBLOCK: an open does not wait for a drive without a cartridge */
    s->fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    int version = 0;
    if (s->fd < 0) {
        si_errprintf(err, "%s: %s%s", path, strerror(errno),
                     errno == EACCES ? " (the daemon's user needs read and write access: "
                                       "see doc/admin-tape.md, permissions)" : "");
        free(s);
        return NULL;
    }
    if (ioctl(s->fd, SG_GET_VERSION_NUM, &version) < 0 || version < 30000) {
        si_errnoprintf(err, ENOTTY, "%s is not a SCSI generic device (/dev/sgN)", path);
        close(s->fd);
        free(s);
        return NULL;
    }
    int fl = fcntl(s->fd, F_GETFL);
    if (fl >= 0)
        fcntl(s->fd, F_SETFL, fl & ~O_NONBLOCK);
    return s;
#else
    si_errnoprintf(err, ENOTSUP, "%s: SG_IO needs Linux", path);
    return NULL;
#endif
}

static int sg_submit(void *impl, const scsi_cmd_t *cmd, scsi_result_t *res, si_error_t *err)
{
#ifdef __linux__
    sg_t *s = impl;
    struct sg_io_hdr h;
    memset(&h, 0, sizeof(h));
    h.interface_id = 'S';
    h.dxfer_direction = cmd->dir == SCSI_DIR_IN    ? SG_DXFER_FROM_DEV
                        : cmd->dir == SCSI_DIR_OUT ? SG_DXFER_TO_DEV
                                                   : SG_DXFER_NONE;
    h.cmd_len = (unsigned char)cmd->cdb_len;
    h.cmdp = (unsigned char *)cmd->cdb;
    h.dxferp = cmd->buf;
    h.dxfer_len = (unsigned)cmd->len;
    h.sbp = res->sense;
    h.mx_sb_len = sizeof(res->sense);
    h.timeout = cmd->timeout_ms;
    if (ioctl(s->fd, SG_IO, &h) < 0)
        return si_errprintf(err, "SG_IO: %s", strerror(errno));
    /* host 03h: DID_TIME_OUT; driver 06h: DRIVER_TIMEOUT */
    if (h.host_status == 0x03 || (h.driver_status & 0x0f) == 0x06)
        return si_errnoprintf(err, ETIMEDOUT, "timed out after %u ms", cmd->timeout_ms);
    if (h.host_status != 0)
        return si_errnoprintf(err, EHOSTDOWN, "host adapter status %02Xh", h.host_status);
    res->status = h.status & 0xff;
    res->sense_len = h.sb_len_wr;
    res->transferred = cmd->len > (size_t)h.resid && h.resid >= 0 ? cmd->len - (size_t)h.resid
                                                                   : h.resid ? 0 : cmd->len;
    return 0;
#else
    (void)impl, (void)cmd, (void)res;
    return si_errnoprintf(err, ENOTSUP, "SG_IO needs Linux");
#endif
}

static void sg_close(void *impl)
{
    sg_t *s = impl;
    if (!s)
        return;
    close(s->fd);
    free(s);
}

static int sg_reset(void *impl, si_error_t *err)
{
#ifdef __linux__
    sg_t *s = impl;
    int what = SG_SCSI_RESET_DEVICE;
    if (ioctl(s->fd, SG_SCSI_RESET, &what) < 0)
        return si_errprintf(err, "%s: SG_SCSI_RESET: %s", s->path, strerror(errno));
    return 0;
#else
    (void)impl;
    return si_errnoprintf(err, ENOTSUP, "SG_IO needs Linux");
#endif
}

const scsi_transport_t scsi_sg_transport = {sg_submit, sg_close, NULL, NULL, sg_reset};

/* One line of a sysfs attribute, trailing blanks cut. */
static void sysfs_read(const char *dir, const char *name, char *out, size_t size)
{
    char path[512];
    out[0] = '\0';
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(out, (int)size, f)) {
        size_t n = strlen(out);
        while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
            out[--n] = '\0';
    }
    fclose(f);
}

static int entry_cmp(const void *a, const void *b)
{
    const scsi_sg_entry_t *x = a, *y = b;
    size_t lx = strlen(x->path), ly = strlen(y->path);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x->path, y->path);
}

int scsi_sg_list(const char *root, scsi_sg_entry_t **out, size_t *n, si_error_t *err)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(root);
    if (!d) {
        if (errno == ENOENT)
            return 0; /* no sg driver loaded: no devices */
        return si_errprintf(err, "%s: %s", root, strerror(errno));
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "sg", 2) != 0 || strlen(e->d_name) > 16)
            continue;
        char dev[512], type[16];
        snprintf(dev, sizeof(dev), "%s/%s/device", root, e->d_name);
        sysfs_read(dev, "type", type, sizeof(type));
        if (!type[0])
            continue;
        scsi_sg_entry_t *grown = realloc(*out, (*n + 1) * sizeof(**out));
        if (!grown) {
            closedir(d);
            free(*out);
            *out = NULL;
            *n = 0;
            return si_errprintf(err, "out of memory");
        }
        *out = grown;
        scsi_sg_entry_t *x = &grown[(*n)++];
        memset(x, 0, sizeof(*x));
        snprintf(x->path, sizeof(x->path), "/dev/%s", e->d_name);
        x->type = atoi(type);
        sysfs_read(dev, "vendor", x->vendor, sizeof(x->vendor));
        sysfs_read(dev, "model", x->product, sizeof(x->product));
        sysfs_read(dev, "rev", x->revision, sizeof(x->revision));
    }
    closedir(d);
    qsort(*out, *n, sizeof(**out), entry_cmp);
    return 0;
}
