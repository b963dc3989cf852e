/* Unreadable regions of a volume (fault injection), kept in a text file next
 * to the image: "START LENGTH" per line, '#' comments. The file is replaced
 * atomically and re-read whenever it changes, so the daemon and the CLI see
 * the same regions. */
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

#include "common/array.h"
#include "common/text.h"

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

static int parse_regions(const char *path, FILE *in, tapevol_region_t **out, size_t *count,
                         si_error_t *err)
{
    tapevol_region_t *r = NULL;
    size_t n = 0, cap = 0;
    char line[256];
    int lineno = 0;
    while (fgets(line, sizeof(line), in)) {
        lineno++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\n')
            line[--len] = '\0';
        else if (!feof(in)) {
            si_errprintf(err, "%s:%d: line too long", path, lineno);
            goto error;
        }
        if (len == 0 || line[0] == '#')
            continue;
        char *sp = strchr(line, ' ');
        uint64_t start, length;
        if (!sp) {
            si_errprintf(err, "%s:%d: expected 'START LENGTH'", path, lineno);
            goto error;
        }
        *sp = '\0';
        if (si_parse_u64(line, &start) < 0 || si_parse_u64(sp + 1, &length) < 0 ||
            length == 0 || start + length < start) {
            si_errprintf(err, "%s:%d: expected 'START LENGTH' as byte counts, LENGTH > 0",
                         path, lineno);
            goto error;
        }
        if (si_array_grow((void **)&r, &cap, n + 1, sizeof(*r)) < 0) {
            si_errprintf(err, "out of memory");
            goto error;
        }
        r[n].start = start;
        r[n].length = length;
        n++;
    }
    if (ferror(in)) {
        si_errprintf(err, "%s: %s", path, strerror(errno));
        goto error;
    }
    *out = r;
    *count = n;
    return 0;
error:
    free(r);
    return -1;
}

/* Call with faults_lock held. */
static int reload(tapevol_t *vol, si_error_t *err)
{
    struct stat st;
    if (stat(vol->faults_path, &st) < 0) {
        if (errno != ENOENT)
            return si_errprintf(err, "%s: %s", vol->faults_path, strerror(errno));
        free(vol->regions);
        vol->regions = NULL;
        vol->nregions = 0;
        vol->faults_exist = false;
        vol->faults_loaded = true;
        return 0;
    }
    if (vol->faults_loaded && vol->faults_exist && same_file(&st, &vol->faults_stat))
        return 0;
    FILE *in = fopen(vol->faults_path, "re");
    if (!in)
        return si_errprintf(err, "%s: %s", vol->faults_path, strerror(errno));
    tapevol_region_t *regions = NULL;
    size_t n = 0;
    /* stat the open file: what was parsed is what is remembered */
    int rc = fstat(fileno(in), &st);
    if (rc == 0)
        rc = parse_regions(vol->faults_path, in, &regions, &n, err);
    else
        si_errprintf(err, "%s: %s", vol->faults_path, strerror(errno));
    fclose(in);
    if (rc < 0)
        return -1;
    free(vol->regions);
    vol->regions = regions;
    vol->nregions = n;
    vol->faults_stat = st;
    vol->faults_exist = true;
    vol->faults_loaded = true;
    return 0;
}

int tapevol_faults(tapevol_t *vol, tapevol_region_t **regions, size_t *count,
                   si_error_t *err)
{
    int rc = -1;
    pthread_mutex_lock(&vol->faults_lock);
    if (reload(vol, err) < 0)
        goto out;
    *regions = NULL;
    *count = vol->nregions;
    if (vol->nregions) {
        *regions = malloc(vol->nregions * sizeof(**regions));
        if (!*regions) {
            si_errprintf(err, "out of memory");
            goto out;
        }
        memcpy(*regions, vol->regions, vol->nregions * sizeof(**regions));
    }
    rc = 0;
out:
    pthread_mutex_unlock(&vol->faults_lock);
    return rc;
}

int tapevol_faults_overlap(tapevol_t *vol, uint64_t pos, uint64_t len,
                           tapevol_region_t *hit, si_error_t *err)
{
    int rc = -1;
    pthread_mutex_lock(&vol->faults_lock);
    if (reload(vol, err) < 0)
        goto out;
    rc = 0;
    for (size_t i = 0; i < vol->nregions; i++) {
        const tapevol_region_t *r = &vol->regions[i];
        if (pos < r->start + r->length && r->start < pos + len) {
            *hit = *r;
            rc = 1;
            break;
        }
    }
out:
    pthread_mutex_unlock(&vol->faults_lock);
    return rc;
}

static int write_regions(tapevol_t *vol, const tapevol_region_t *r, size_t n, si_error_t *err)
{
    size_t len = strlen(vol->faults_path) + 5;
    char *tmp = malloc(len);
    FILE *out = NULL;
    if (!tmp)
        return si_errprintf(err, "out of memory");
    snprintf(tmp, len, "%s.new", vol->faults_path);
    out = fopen(tmp, "we");
    if (!out) {
        si_errprintf(err, "cannot create %s: %s", tmp, strerror(errno));
        goto error;
    }
    fprintf(out, "# unreadable regions of volume %s: START LENGTH (bytes from BOT)\n",
            vol->label.label);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%" PRIu64 " %" PRIu64 "\n", r[i].start, r[i].length);
    if (fflush(out) != 0 || fsync(fileno(out)) < 0 || ferror(out)) {
        si_errprintf(err, "cannot write %s: %s", tmp, strerror(errno));
        goto error;
    }
    if (fclose(out) != 0) {
        out = NULL;
        si_errprintf(err, "cannot write %s: %s", tmp, strerror(errno));
        goto error;
    }
    out = NULL;
    if (rename(tmp, vol->faults_path) < 0) {
        si_errprintf(err, "cannot replace %s: %s", vol->faults_path, strerror(errno));
        goto error;
    }
    free(tmp);
    return 0;
error:
    if (out)
        fclose(out);
    unlink(tmp);
    free(tmp);
    return -1;
}

int tapevol_fault_add(tapevol_t *vol, uint64_t start, uint64_t length, si_error_t *err)
{
    tapevol_region_t *r = NULL;
    size_t n = 0;
    int rc = -1;
    if (length == 0 || start + length < start)
        return si_errprintf(err, "unreadable region %" PRIu64 ":%" PRIu64 ": LENGTH must be "
                            "positive and START + LENGTH must not overflow", start, length);
    /* the volume's lock serialises editors of the region file */
    if (flock(vol->fd, LOCK_EX) < 0)
        return si_errprintf(err, "cannot lock %s: %s", vol->path, strerror(errno));
    if (tapevol_faults(vol, &r, &n, err) < 0)
        goto out;
    size_t cap = n; /* tapevol_faults' copy holds exactly n */
    if (si_array_grow((void **)&r, &cap, n + 1, sizeof(*r)) < 0) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    r[n].start = start;
    r[n].length = length;
    rc = write_regions(vol, r, n + 1, err);
out:
    free(r);
    flock(vol->fd, LOCK_UN);
    return rc;
}

int tapevol_fault_clear(tapevol_t *vol, si_error_t *err)
{
    int rc = 0;
    if (flock(vol->fd, LOCK_EX) < 0)
        return si_errprintf(err, "cannot lock %s: %s", vol->path, strerror(errno));
    if (unlink(vol->faults_path) < 0 && errno != ENOENT)
        rc = si_errprintf(err, "cannot remove %s: %s", vol->faults_path, strerror(errno));
    flock(vol->fd, LOCK_UN);
    return rc;
}
