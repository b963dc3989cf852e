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

#include "common/array.h"
#include "daemon/scsi/cdb.h"

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

/* The unit serial number from the binary VPD page 80h sysfs keeps
 * (vpd_pg80, kernels from 4.13); "" when absent or malformed. */
static void sysfs_serial(const char *dir, char *out, size_t size)
{
    char path[512];
    uint8_t page[255];
    out[0] = '\0';
    snprintf(path, sizeof(path), "%s/vpd_pg80", dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    size_t len = fread(page, 1, sizeof(page), f);
    fclose(f);
    if (scsi_parse_serial(page, len, out, size, NULL) < 0)
        out[0] = '\0';
}

/* The name of the one entry of dir/sub ("nst0" under scsi_tape; "sch0"
 * under scsi_changer), preferring the non-rewinding st device. */
static void sysfs_kernel_name(const char *dir, const char *sub, char *out, size_t size)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && strlen(e->d_name) < size &&
            (!out[0] || (strncmp(e->d_name, "nst", 3) == 0 && !strchr(e->d_name + 3, 'a') &&
                         !strchr(e->d_name + 3, 'l') && !strchr(e->d_name + 3, 'm'))))
            snprintf(out, size, "%s", e->d_name);
    closedir(d);
}

/* H:C:T:L from the device link's target ("../../../0:0:2:0"). */
static void sysfs_hctl(const char *dev, char *out, size_t size)
{
    char link[512];
    out[0] = '\0';
    ssize_t n = readlink(dev, link, sizeof(link) - 1);
    if (n <= 0)
        return;
    link[n] = '\0';
    const char *base = strrchr(link, '/');
    base = base ? base + 1 : link;
    unsigned h, c, t, l;
    char end;
    if (sscanf(base, "%u:%u:%u:%u%c", &h, &c, &t, &l, &end) == 4)
        snprintf(out, size, "%s", base);
}

/* Do two H:C:T:Ls agree in their first `fields` fields (1: host; 3: host,
 * channel, target)? */
static bool hctl_prefix_equal(const char *a, const char *b, int fields)
{
    size_t i = 0;
    int seen = 0;
    while (a[i] && a[i] == b[i]) {
        if (a[i] == ':' && ++seen == fields)
            return true;
        i++;
    }
    return false;
}

static void relate(scsi_sg_entry_t *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        e[i].changer = -1;
        if (e[i].type != 1 || !e[i].hctl[0])
            continue;
        int same_target = -1, same_host = -1, on_host = 0;
        for (size_t k = 0; k < n; k++) {
            if (e[k].type != 8 || !e[k].hctl[0])
                continue;
            if (hctl_prefix_equal(e[i].hctl, e[k].hctl, 3) && same_target < 0)
                same_target = (int)k;
            if (hctl_prefix_equal(e[i].hctl, e[k].hctl, 1)) {
                same_host = (int)k;
                on_host++;
            }
        }
        e[i].changer = same_target >= 0 ? same_target : on_host == 1 ? same_host : -1;
    }
}

size_t scsi_sg_drives_of(const scsi_sg_entry_t *e, size_t n, size_t c, size_t *idx, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k < max; i++)
        if (e[i].type == 1 && e[i].changer == (int)c)
            idx[k++] = i;
    return k;
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
    size_t cap = 0;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "sg", 2) != 0 || strlen(e->d_name) > 16)
            continue;
        char dev[512], type[16];
        snprintf(dev, sizeof(dev), "%s/%s/device", root, e->d_name);
        sysfs_read(dev, "type", type, sizeof(type));
        if (!type[0])
            continue;
        if (si_array_grow((void **)out, &cap, *n + 1, sizeof(**out)) < 0) {
            closedir(d);
            free(*out);
            *out = NULL;
            *n = 0;
            return si_errprintf(err, "out of memory");
        }
        scsi_sg_entry_t *x = &(*out)[(*n)++];
        memset(x, 0, sizeof(*x));
        snprintf(x->path, sizeof(x->path), "/dev/%s", e->d_name);
        x->type = atoi(type);
        sysfs_read(dev, "vendor", x->vendor, sizeof(x->vendor));
        sysfs_read(dev, "model", x->product, sizeof(x->product));
        sysfs_read(dev, "rev", x->revision, sizeof(x->revision));
        sysfs_serial(dev, x->serial, sizeof(x->serial));
        sysfs_hctl(dev, x->hctl, sizeof(x->hctl));
        sysfs_kernel_name(dev, x->type == 1 ? "scsi_tape" : "scsi_changer", x->kernel,
                          sizeof(x->kernel));
    }
    closedir(d);
    qsort(*out, *n, sizeof(**out), entry_cmp);
    relate(*out, *n);
    return 0;
}
