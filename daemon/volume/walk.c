/* Walking a volume: its records and tar headers, parsed from the volume
 * itself and checked strictly, since a volume may come from anywhere. */
#include "config.h"
#include "daemon/volume/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/array.h"
#include "common/text.h"
#include "daemon/volume/tar.h"

/* Headers are read through a window, so a volume of small members costs
 * one read per window rather than two per member. */
#define WINDOW (64u << 10)
#define VERIFY_BLOCK (4u << 20)

typedef struct {
    tapevol_t *vol;
    uint64_t eod;
    unsigned char *buf;
    size_t cap;
    uint64_t off;
    size_t len;
    bool truncated;    /* a structure ran past the end of data */
} reader_t;

static const unsigned char *reader_get(reader_t *r, uint64_t at, size_t len, si_error_t *err)
{
    if (at >= r->off && at + len <= r->off + r->len)
        return r->buf + (at - r->off);
    if (at > r->eod || len > r->eod - at) {
        r->truncated = true;
        si_errprintf(err, "the volume ends at %" PRIu64 ", inside this structure "
                     "(truncated volume)", r->eod);
        return NULL;
    }
    size_t want = WINDOW;
    if (want < len)
        want = len;
    if (want > r->eod - at)
        want = (size_t)(r->eod - at);
    if (want > r->cap || !r->buf) {
        size_t cap = want > WINDOW ? want : WINDOW;
        unsigned char *grown = realloc(r->buf, cap);
        if (!grown) {
            si_errprintf(err, "out of memory");
            return NULL;
        }
        r->buf = grown;
        r->cap = cap;
    }
    r->len = 0;
    /* The wider window may reach into an unreadable region that the walk
     * itself never needs (member data); then read only what is needed. */
    if (tapevol_read(r->vol, at, r->buf, want, NULL) < 0 &&
        (want == len || tapevol_read(r->vol, at, r->buf, (want = len), err) < 0))
        return NULL;
    r->off = at;
    r->len = want;
    return r->buf;
}

static int listing_push_entry(tapevol_listing_t *l, size_t *cap, tapevol_entry_t *e)
{
    if (si_array_grow((void **)&l->entries, cap, l->nentries + 1, sizeof(*l->entries)) < 0)
        return -1;
    l->entries[l->nentries++] = *e;
    return 0;
}

static int listing_push_file(tapevol_listing_t *l, size_t *cap, const tapevol_file_t *f)
{
    if (si_array_grow((void **)&l->files, cap, l->nfiles + 1, sizeof(*l->files)) < 0)
        return -1;
    l->files[l->nfiles++] = *f;
    return 0;
}

/* Member name: bucket and key from the pax header, else "bucket/key" from
 * the path; either way validated, so no name can escape its bucket. */
static int member_name(const tar_pax_t *pax, const tar_header_t *h, tapevol_entry_t *e,
                       si_error_t *err)
{
    const char *path = pax->path ? pax->path : h->name;
    if (pax->bucket && pax->key) {
        size_t blen = strlen(pax->bucket);
        if (pax->path && (strncmp(path, pax->bucket, blen) != 0 || path[blen] != '/' ||
                          strcmp(path + blen + 1, pax->key) != 0))
            return si_errprintf(err, "path '%.200s' is not STAGEIN.bucket/STAGEIN.key", path);
        e->bucket = strdup(pax->bucket);
        e->key = strdup(pax->key);
    } else {
        const char *slash = strchr(path, '/');
        if (!slash)
            return si_errprintf(err, "name '%.200s' is not \"bucket/key\"", path);
        e->bucket = strndup(path, (size_t)(slash - path));
        e->key = strdup(slash + 1);
    }
    if (!e->bucket || !e->key)
        return si_errprintf(err, "out of memory");
    if (si_bucket_check(e->bucket, strlen(e->bucket), err) < 0 ||
        si_key_check(e->key, strlen(e->key), err) < 0)
        return si_errprefix(err, "member '%.200s'", path);
    if (e->key[strlen(e->key) - 1] == '/')
        return si_errprintf(err, "member '%.200s' is a prefix, not an object", path);
    return 0;
}

/* One member starting at *p; on return *p is past its data. */
static int walk_member(reader_t *r, uint64_t *p, tapevol_entry_t *e, si_error_t *err)
{
    tar_header_t h;
    tar_pax_t pax = {0};
    const unsigned char *block = reader_get(r, *p, TAR_BLOCK, err);
    int rc = -1;
    e->header_offset = *p;
    if (!block || tar_header_parse(block, &h, err) < 0)
        return -1;
    if (h.typeflag == 'x') {
        if (h.size > TAR_PAX_MAX)
            return si_errprintf(err, "pax extended header of %" PRIu64 " bytes (limit %d)",
                                h.size, TAR_PAX_MAX);
        const unsigned char *data = reader_get(r, *p + TAR_BLOCK, (size_t)h.size, err);
        if (!data || tar_pax_parse((const char *)data, (size_t)h.size, &pax, err) < 0)
            return -1;
        *p += TAR_BLOCK + tar_round_up(h.size);
        block = reader_get(r, *p, TAR_BLOCK, err);
        if (!block || tar_header_parse(block, &h, err) < 0) {
            si_errprefix(err, "header after the pax header at offset %" PRIu64, *p);
            goto out;
        }
    }
    if (h.typeflag != '0' && h.typeflag != '\0') {
        si_errprintf(err, "tar entry of type '%c' at offset %" PRIu64 ": only regular files "
                     "(and their pax headers) belong on a volume",
                     h.typeflag >= 0x20 && h.typeflag < 0x7f ? h.typeflag : '?', *p);
        goto out;
    }
    if (member_name(&pax, &h, e, err) < 0)
        goto out;
    e->size = pax.has_size ? pax.size : h.size;
    e->mtime = pax.has_mtime ? pax.mtime : h.mtime;
    memcpy(e->checksum, pax.checksum, sizeof(e->checksum));
    /* handed over: tar_pax_clear below must not free them */
    e->headers = pax.headers;
    e->storage_class = pax.storage_class;
    pax.headers = pax.storage_class = NULL;
    e->position = *p + TAR_BLOCK;
    if (e->position > r->eod || e->size > r->eod - e->position ||
        tar_round_up(e->size) > r->eod - e->position) {
        r->truncated = true;
        si_errprintf(err, "member %s/%s: %" PRIu64 " bytes of data at offset %" PRIu64
                     " pass the end of the volume at %" PRIu64 " (truncated volume)",
                     e->bucket, e->key, e->size, e->position, r->eod);
        goto out;
    }
    *p = e->position + tar_round_up(e->size);
    rc = 0;
out:
    tar_pax_clear(&pax);
    return rc;
}

static int expect_filemark(reader_t *r, uint64_t at, int64_t seq, uint64_t start,
                           si_error_t *err)
{
    int64_t got_seq;
    uint64_t got_start, got_end;
    const unsigned char *rec = reader_get(r, at, TAPEVOL_RECORD, err);
    if (!rec || tapevol_filemark_parse(rec, &got_seq, &got_start, &got_end, err) < 0)
        return si_errprefix(err, "filemark of file %" PRId64 " expected at offset %" PRIu64,
                            seq, at);
    if (got_seq != seq || got_start != start || got_end != at)
        return si_errprintf(err, "filemark at offset %" PRIu64 " says file %" PRId64 " [%"
                            PRIu64 ", %" PRIu64 "), expected file %" PRId64 " [%" PRIu64
                            ", %" PRIu64 ")", at, got_seq, got_start, got_end, seq, start, at);
    return 0;
}

static int verify_entry(tapevol_t *vol, const tapevol_entry_t *e, unsigned char *buf,
                        si_error_t *err)
{
    char got[SI_CHECKSUM_TEXT_MAX];
    const char *algo = strncmp(e->checksum, "md5:", 4) == 0 ? "md5" : "sha256";
    si_checksum_t *sum;
    if (!e->checksum[0])
        return 0; /* a foreign archive without checksums: nothing to compare */
    sum = si_checksum_new(algo, err);
    if (!sum)
        return -1;
    for (uint64_t done = 0; done < e->size;) {
        size_t n = e->size - done > VERIFY_BLOCK ? VERIFY_BLOCK : (size_t)(e->size - done);
        if (tapevol_read(vol, e->position + done, buf, n, err) < 0) {
            si_checksum_free(sum);
            return -1;
        }
        si_checksum_update(sum, buf, n);
        done += n;
    }
    si_checksum_final(sum, got);
    si_checksum_free(sum);
    if (strcmp(got, e->checksum) != 0)
        return si_errprintf(err, "member %s/%s at offset %" PRIu64 ": data has checksum %s, "
                            "the archive recorded %s", e->bucket, e->key, e->position, got,
                            e->checksum);
    return 0;
}

/* What a walk that failed got through: the end of the last archive file
 * whose filemark was read, and whether the failure was data that simply
 * stops (the trace of an interrupted write) rather than a bad structure. */
typedef struct {
    uint64_t complete_end;
    int64_t complete_files;
    bool truncated_tail;
} walk_stop_t;

/* The walk itself. With tail_partial, a volume whose size is not a whole
 * number of records is walked up to its last whole record (a write may
 * stop anywhere), so that the failure is reported as a truncated tail. */
static int walk(tapevol_t *vol, int flags, bool tail_partial, tapevol_listing_t **listing,
                walk_stop_t *stop, si_error_t *err)
{
    reader_t r = {.vol = vol};
    tapevol_listing_t *l = calloc(1, sizeof(*l));
    size_t ecap = 0, fcap = 0;
    unsigned char *vbuf = NULL;
    struct stat st;
    const char *label = vol->label.label;
    uint64_t p;

    *stop = (walk_stop_t){.complete_end = TAPEVOL_FIRST_FILE_OFFSET};
    if (!l)
        return si_errprintf(err, "out of memory");
    if (fstat(vol->fd, &st) < 0) {
        si_errprintf(err, "%s: %s", vol->path, strerror(errno));
        goto error;
    }
    r.eod = (uint64_t)st.st_size;
    if (tail_partial && r.eod % TAPEVOL_RECORD) {
        r.eod -= r.eod % TAPEVOL_RECORD;
        r.truncated = true;
    }
    if (r.eod < TAPEVOL_FIRST_FILE_OFFSET || r.eod % TAPEVOL_RECORD) {
        si_errprintf(err, "volume %s: end of data at %" PRIu64 " is not at a record boundary "
                     "after the label (truncated volume)", label, r.eod);
        goto error;
    }
    if (expect_filemark(&r, TAPEVOL_RECORD, 0, 0, err) < 0)
        goto volume_error;

    for (p = TAPEVOL_FIRST_FILE_OFFSET; p < r.eod;) {
        tapevol_file_t f = {.seq = (int64_t)l->nfiles + 1, .start = p, .first = l->nentries};
        for (;;) {
            const unsigned char *block = reader_get(&r, p, TAR_BLOCK, err);
            if (!block)
                goto file_error;
            if (tar_block_is_zero(block)) {
                block = reader_get(&r, p + TAR_BLOCK, TAR_BLOCK, err);
                if (!block)
                    goto file_error;
                if (!tar_block_is_zero(block)) {
                    si_errprintf(err, "a lone zero block at offset %" PRIu64
                                 " (the end of a tar stream is two)", p);
                    goto file_error;
                }
                p += 2 * TAR_BLOCK;
                break;
            }
            tapevol_entry_t e = {.file_seq = f.seq};
            if (walk_member(&r, &p, &e, err) < 0) {
                free(e.bucket);
                free(e.key);
                free(e.headers);
                free(e.storage_class);
                si_errprefix(err, "member %zu at offset %" PRIu64, l->nentries - f.first + 1,
                             e.header_offset);
                goto file_error;
            }
            if (listing_push_entry(l, &ecap, &e) < 0) {
                free(e.bucket);
                free(e.key);
                free(e.headers);
                free(e.storage_class);
                si_errprintf(err, "out of memory");
                goto error;
            }
        }
        f.end = p;
        f.count = l->nentries - f.first;
        if (expect_filemark(&r, p, f.seq, f.start, err) < 0)
            goto file_error;
        p += TAPEVOL_RECORD;
        stop->complete_end = p;
        stop->complete_files = f.seq;
        if (listing_push_file(l, &fcap, &f) < 0) {
            si_errprintf(err, "out of memory");
            goto error;
        }
        continue;
file_error:
        si_errprefix(err, "archive file %" PRId64 " (starting at offset %" PRIu64 ")", f.seq,
                     f.start);
        goto volume_error;
    }
    if (r.truncated) { /* a partial record after the last filemark */
        si_errprintf(err, "%" PRIu64 " bytes after the last filemark at offset %" PRIu64
                     " are not a whole record", (uint64_t)st.st_size - p, p);
        goto volume_error;
    }

    if (flags & TAPEVOL_WALK_VERIFY) {
        vbuf = malloc(VERIFY_BLOCK);
        if (!vbuf) {
            si_errprintf(err, "out of memory");
            goto error;
        }
        for (size_t i = 0; i < l->nentries; i++)
            if (verify_entry(vol, &l->entries[i], vbuf, err) < 0)
                goto volume_error;
    }
    free(vbuf);
    free(r.buf);
    *listing = l;
    return 0;
volume_error:
    si_errprefix(err, "volume %s", label);
    stop->truncated_tail = r.truncated;
error:
    free(vbuf);
    free(r.buf);
    tapevol_listing_free(l);
    return -1;
}

int tapevol_walk(tapevol_t *vol, int flags, tapevol_listing_t **listing, si_error_t *err)
{
    walk_stop_t stop;
    return walk(vol, flags, false, listing, &stop, err);
}

/* A drive writes from where it was positioned and the data beyond is gone:
 * an archive writer that restarts after a crash positions after the last
 * complete archive file and writes over whatever an interrupted write left
 * there. Cutting that tail is the same thing, done once, at start-up. */
int tapevol_recover(tapevol_t *vol, tapevol_recovery_t *rec, si_error_t *err)
{
    int64_t files;
    uint64_t eod;
    struct stat st;
    tapevol_listing_t *l = NULL;
    walk_stop_t stop;
    si_error_t why = {0};
    int rc = -1;

    *rec = (tapevol_recovery_t){0};
    if (!(vol->flags & TAPEVOL_RDWR))
        return si_errprintf(err, "volume %s is open read-only", vol->label.label);
    /* an append in progress in another process holds this lock: its tail
     * is not interrupted, only unfinished */
    if (flock(vol->fd, LOCK_EX) < 0)
        return si_errprintf(err, "cannot lock %s: %s", vol->path, strerror(errno));
    if (tapevol_tail(vol, &files, &eod, &why) == 0) {
        rec->files = files;
        rec->used = eod;
        rc = 0;
        goto out;
    }
    if (fstat(vol->fd, &st) < 0) {
        si_errprintf(err, "%s: %s", vol->path, strerror(errno));
        goto out;
    }
    if (walk(vol, 0, true, &l, &stop, &why) == 0) {
        /* the walk found a well-formed volume that the tail check did not:
         * nothing to cut, and nothing to trust either */
        si_errprintf(err, "volume %s: %s", vol->label.label, why.text);
        goto out;
    }
    if (!stop.truncated_tail) {
        si_errprintf(err, "%s: not the trace of an interrupted write, so nothing is cut "
                     "(see 'stagein tape dump %s')", why.text, vol->label.label);
        goto out;
    }
    if (ftruncate(vol->fd, (off_t)stop.complete_end) < 0 || fsync(vol->fd) < 0) {
        si_errprintf(err, "volume %s: cutting the interrupted write at offset %" PRIu64
                     ": %s", vol->label.label, stop.complete_end, strerror(errno));
        goto out;
    }
    rec->files = stop.complete_files;
    rec->used = stop.complete_end;
    rec->discarded = (uint64_t)st.st_size - stop.complete_end;
    rc = 0;
out:
    tapevol_listing_free(l);
    flock(vol->fd, LOCK_UN);
    return rc;
}
