/* Appending an archive file: one pax tar stream and its filemark at the end
 * of data, written in large blocks, hashed on the way, fsync'd. */
#include "config.h"
#include "daemon/volume/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/text.h"
#include "daemon/volume/tar.h"

/* Large enough that the drive-like stream of writes is a few syscalls per
 * GB; small enough to be harmless in a daemon. */
#define WRITE_BLOCK (4u << 20)

/* The pax header fields of a tapevol_member_t *m. */
#define TAR_PAX_MEMBER(m)                                                                  \
    {(m)->bucket, (m)->key, (m)->size, (m)->mtime, (m)->headers, (m)->storage_class}

typedef struct {
    int fd;
    unsigned char *buf;
    size_t used;
    uint64_t buf_off;  /* volume offset of buf[0] */
} writer_t;

static int writer_flush(writer_t *w)
{
    size_t done = 0;
    while (done < w->used) {
        ssize_t n = pwrite(w->fd, w->buf + done, w->used - done, (off_t)(w->buf_off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        done += (size_t)n;
    }
    w->buf_off += w->used;
    w->used = 0;
    return 0;
}

static int writer_put(writer_t *w, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len) {
        if (w->used == WRITE_BLOCK && writer_flush(w) < 0)
            return -1;
        size_t n = WRITE_BLOCK - w->used;
        if (n > len)
            n = len;
        if (p)
            memcpy(w->buf + w->used, p, n);
        else
            memset(w->buf + w->used, 0, n);
        w->used += n;
        if (p)
            p += n;
        len -= n;
    }
    return 0;
}

/* Overwrites bytes already written at volume offset off: the part already
 * flushed on the volume, the rest in the buffer. */
static int writer_patch(writer_t *w, uint64_t off, const void *data, size_t len)
{
    const unsigned char *p = data;
    if (off < w->buf_off) {
        size_t flushed = off + len <= w->buf_off ? len : (size_t)(w->buf_off - off);
        size_t done = 0;
        while (done < flushed) {
            ssize_t n = pwrite(w->fd, p + done, flushed - done, (off_t)(off + done));
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0)
                return -1;
            done += (size_t)n;
        }
        p += flushed;
        off += flushed;
        len -= flushed;
    }
    memcpy(w->buf + (off - w->buf_off), p, len);
    return 0;
}

uint64_t tapevol_archive_bytes(const tapevol_member_t *members, size_t n)
{
    uint64_t total = 2 * TAR_BLOCK + TAPEVOL_RECORD; /* end of archive, filemark */
    for (size_t i = 0; i < n; i++)
        total += tar_member_bytes(&(tar_pax_member_t)TAR_PAX_MEMBER(&members[i]));
    return total;
}

void tapevol_listing_free(tapevol_listing_t *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->nentries; i++) {
        free(l->entries[i].bucket);
        free(l->entries[i].key);
        free(l->entries[i].headers);
        free(l->entries[i].storage_class);
    }
    free(l->entries);
    free(l->files);
    free(l);
}

static int compare_names(const void *a, const void *b)
{
    const tapevol_member_t *x = *(const tapevol_member_t *const *)a;
    const tapevol_member_t *y = *(const tapevol_member_t *const *)b;
    int c = strcmp(x->bucket, y->bucket);
    return c ? c : strcmp(x->key, y->key);
}

static int check_members(const tapevol_member_t *m, size_t n, si_error_t *err)
{
    const tapevol_member_t **sorted = NULL;
    if (n == 0)
        return si_errprintf(err, "an archive file needs at least one member");
    for (size_t i = 0; i < n; i++) {
        if (!m[i].bucket || !m[i].key)
            return si_errprintf(err, "member %zu: no bucket or key", i + 1);
        if (si_bucket_check(m[i].bucket, strlen(m[i].bucket), err) < 0 ||
            si_key_check(m[i].key, strlen(m[i].key), err) < 0)
            return si_errprefix(err, "member %zu", i + 1);
        if (m[i].key[strlen(m[i].key) - 1] == '/')
            return si_errprintf(err, "member %zu: key '%s' ends with '/' (a prefix, not an "
                                "object)", i + 1, m[i].key);
        if (m[i].mtime < 0)
            return si_errprintf(err, "member %s/%s: negative mtime", m[i].bucket, m[i].key);
        if (m[i].checksum && (!si_checksum_text_valid(m[i].checksum) ||
                              strncmp(m[i].checksum, "sha256:", 7) != 0))
            return si_errprintf(err, "member %s/%s: expected checksum '%s' is not "
                                "\"sha256:<64 hex>\"", m[i].bucket, m[i].key, m[i].checksum);
        size_t plen = tar_pax_records_len(&(tar_pax_member_t)TAR_PAX_MEMBER(&m[i]));
        if (plen > TAR_PAX_MAX)
            return si_errprintf(err, "member %s/%s: its pax header would take %zu bytes "
                                "(headers %zu bytes; limit %d)", m[i].bucket, m[i].key, plen,
                                m[i].headers ? strlen(m[i].headers) : (size_t)0, TAR_PAX_MAX);
        if (!m[i].path && m[i].fd < 0)
            return si_errprintf(err, "member %s/%s: no data source", m[i].bucket, m[i].key);
    }
    sorted = malloc(n * sizeof(*sorted));
    if (!sorted)
        return si_errprintf(err, "out of memory");
    for (size_t i = 0; i < n; i++)
        sorted[i] = &m[i];
    qsort(sorted, n, sizeof(*sorted), compare_names);
    for (size_t i = 1; i < n; i++) {
        if (compare_names(&sorted[i - 1], &sorted[i]) == 0) {
            si_errprintf(err, "member %s/%s appears twice in one archive file",
                         sorted[i]->bucket, sorted[i]->key);
            free(sorted);
            return -1;
        }
    }
    free(sorted);
    return 0;
}

static tapevol_listing_t *listing_new(const tapevol_member_t *m, size_t n)
{
    tapevol_listing_t *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->files = calloc(1, sizeof(*l->files));
    l->entries = calloc(n, sizeof(*l->entries));
    if (!l->files || !l->entries)
        goto error;
    l->nfiles = 1;
    for (size_t i = 0; i < n; i++) {
        l->entries[i].bucket = strdup(m[i].bucket);
        l->entries[i].key = strdup(m[i].key);
        l->nentries = i + 1;
        if (!l->entries[i].bucket || !l->entries[i].key)
            goto error;
    }
    l->files[0].count = n;
    return l;
error:
    tapevol_listing_free(l);
    return NULL;
}

/* Streams one member's data from fd through the writer, hashing it. */
static int copy_data(writer_t *w, int fd, const tapevol_member_t *m, si_checksum_t *sum,
                     si_error_t *err)
{
    uint64_t left = m->size;
    while (left) {
        if (w->used == WRITE_BLOCK && writer_flush(w) < 0)
            return si_errprintf(err, "write: %s", strerror(errno));
        size_t want = WRITE_BLOCK - w->used;
        if (want > left)
            want = (size_t)left;
        ssize_t n = read(fd, w->buf + w->used, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return si_errprintf(err, "member %s/%s: read %s: %s", m->bucket, m->key,
                                m->path ? m->path : "source", strerror(errno));
        if (n == 0)
            return si_errprintf(err, "member %s/%s: source %s ended after %" PRIu64 " of %"
                                PRIu64 " bytes", m->bucket, m->key,
                                m->path ? m->path : "fd", m->size - left, m->size);
        si_checksum_update(sum, w->buf + w->used, (size_t)n);
        w->used += (size_t)n;
        left -= (uint64_t)n;
    }
    return 0;
}

static int write_member(writer_t *w, int fd, const tapevol_member_t *m, tapevol_entry_t *e,
                        si_error_t *err)
{
    unsigned char block[TAR_BLOCK];
    tar_pax_member_t pm = TAR_PAX_MEMBER(m);
    size_t plen = tar_pax_records_len(&pm);
    char *pax = malloc(plen);
    si_checksum_t *sum = NULL;
    size_t checksum_at = 0;
    int rc = -1;
    if (!pax) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    tar_pax_records(pax, plen, &pm, &checksum_at);

    char name[SI_BUCKET_MAX + SI_KEY_MAX + 2];
    snprintf(name, sizeof(name), "%s/%s", m->bucket, m->key);
    const char *base = strrchr(m->key, '/');
    char xname[100];
    snprintf(xname, sizeof(xname), "PaxHeaders/%.80s", base ? base + 1 : m->key);

    e->header_offset = w->buf_off + w->used;
    tar_header(block, xname, 'x', plen, m->mtime);
    uint64_t checksum_off = e->header_offset + TAR_BLOCK + checksum_at;
    if (writer_put(w, block, TAR_BLOCK) < 0 || writer_put(w, pax, plen) < 0 ||
        writer_put(w, NULL, tar_round_up(plen) - plen) < 0)
        goto write_error;
    tar_header(block, name, '0', m->size, m->mtime);
    if (writer_put(w, block, TAR_BLOCK) < 0)
        goto write_error;
    e->position = w->buf_off + w->used;
    e->size = m->size;
    e->mtime = m->mtime;

    sum = si_checksum_new("sha256", err);
    if (!sum || copy_data(w, fd, m, sum, err) < 0)
        goto out;
    si_checksum_final(sum, e->checksum);
    if (m->checksum && strcmp(m->checksum, e->checksum) != 0) {
        si_errprintf(err, "member %s/%s: data has checksum %s, expected %s", m->bucket,
                     m->key, e->checksum, m->checksum);
        goto out;
    }
    if (writer_patch(w, checksum_off, e->checksum, TAR_CHECKSUM_LEN) < 0 ||
        writer_put(w, NULL, tar_round_up(m->size) - m->size) < 0)
        goto write_error;
    rc = 0;
    goto out;
write_error:
    si_errprintf(err, "write: %s", strerror(errno));
out:
    si_checksum_free(sum);
    free(pax);
    return rc;
}

/* A path source must exist and hold the stated size (exactly, or from its
 * offset on: si_open_range; a pipe's is checked by reading). With fd !=
 * NULL the file stays open for reading, at the member's first byte. */
static int check_source(const tapevol_member_t *m, int *fd, si_error_t *err)
{
    int f = si_open_range(m->path, m->offset, m->size, err);
    if (f < 0)
        return si_errprefix(err, "member %s/%s", m->bucket, m->key);
    if (fd)
        *fd = f;
    else
        close(f);
    return 0;
}

int tapevol_append(tapevol_t *vol, const tapevol_member_t *members, size_t n,
                   tapevol_listing_t **written, si_error_t *err)
{
    tapevol_listing_t *l = NULL;
    writer_t w = {.fd = vol->fd};
    bool locked = false, wrote = false;
    uint64_t eod = 0;
    int64_t last_seq;
    int saved_errno;

    if (!(vol->flags & TAPEVOL_RDWR))
        return si_errprintf(err, "volume %s is open read-only", vol->label.label);
    if (check_members(members, n, err) < 0)
        return -1;
    l = listing_new(members, n);
    w.buf = malloc(WRITE_BLOCK);
    if (!l || !w.buf) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    /* every source checked before anything is written; each is opened
     * again only while it is copied, so any number of members works */
    for (size_t i = 0; i < n; i++)
        if (members[i].path && check_source(&members[i], NULL, err) < 0)
            goto error;

    /* one writer at a time: the daemon and the CLI may both append */
    if (flock(vol->fd, LOCK_EX) < 0) {
        si_errprintf(err, "cannot lock %s: %s", vol->path, strerror(errno));
        goto error;
    }
    locked = true;
    if (tapevol_tail(vol, &last_seq, &eod, err) < 0)
        goto error;
    uint64_t need = tapevol_archive_bytes(members, n);
    if (need > vol->label.capacity || eod > vol->label.capacity - need) {
        errno = ENOSPC;
        si_errprintf(err, "volume %s is full: an archive file of %" PRIu64 " bytes does not "
                     "fit (%" PRIu64 " of %" PRIu64 " bytes used)", vol->label.label, need,
                     eod, vol->label.capacity);
        goto error;
    }

    tapevol_file_t *f = &l->files[0];
    f->seq = last_seq + 1;
    f->start = eod;
    w.buf_off = eod;
    wrote = true;
    for (size_t i = 0; i < n; i++) {
        const tapevol_member_t *m = &members[i];
        l->entries[i].file_seq = f->seq;
        int fd = m->fd;
        if (m->path && check_source(m, &fd, err) < 0)
            goto error;
        int written_ok = write_member(&w, fd, m, &l->entries[i], err);
        if (m->path)
            close(fd);
        if (written_ok < 0)
            goto error;
    }
    unsigned char mark[TAPEVOL_RECORD];
    if (writer_put(&w, NULL, 2 * TAR_BLOCK) < 0)
        goto write_error;
    f->end = w.buf_off + w.used;
    tapevol_filemark_format(mark, f->seq, f->start, f->end);
    if (writer_put(&w, mark, sizeof(mark)) < 0 || writer_flush(&w) < 0)
        goto write_error;
    if (fsync(vol->fd) < 0)
        goto write_error;
    flock(vol->fd, LOCK_UN);
    free(w.buf);
    *written = l;
    return 0;

write_error:
    si_errprintf(err, "volume %s: write: %s", vol->label.label, strerror(errno));
error:
    saved_errno = errno;
    /* nothing of a failed append stays on the volume */
    if (wrote && ftruncate(vol->fd, (off_t)eod) == 0)
        fsync(vol->fd);
    if (locked)
        flock(vol->fd, LOCK_UN);
    free(w.buf);
    tapevol_listing_free(l);
    errno = saved_errno;
    return -1;
}
