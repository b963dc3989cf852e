/* The tape backend's per-cartridge index, <state_dir>/tape/LABEL.index
 * ("file SEQ START END BLOCK_SIZE" per archive file, fsync'd before a
 * write is acknowledged), and the positions that follow from it. */
#include "config.h"

#include "daemon/archive/tape/state.h"

/* ---- per-cartridge index ------------------------------------------------------------------- */

static void index_path(const tape_t *t, const char *label, char *out, size_t size)
{
    snprintf(out, size, "%s/tape/%s.index", t->state_dir, label);
}

int tape_index_load(tape_t *t, tvol_t *v, si_error_t *err)
{
    char path[PATH_MAX];
    index_path(t, v->label, path, sizeof(path));
    FILE *f = fopen(path, "r");
    if (!f)
        return errno == ENOENT ? 0 : si_errprintf(err, "%s: %s", path, strerror(errno));
    char line[256];
    int lineno = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        int64_t seq;
        uint64_t start, end;
        uint32_t block;
        if (strncmp(line, "full", 4) == 0) {
            v->full = true;
            continue;
        }
        if (sscanf(line, "file %" SCNd64 " %" SCNu64 " %" SCNu64 " %" SCNu32, &seq, &start, &end,
                   &block) != 4 || seq != v->nfiles + 1 || end < start || block == 0) {
            fclose(f);
            return si_errprintf(err, "%s:%d: malformed (expected 'file %" PRId64
                                " START END BLOCK_SIZE')", path, lineno, v->nfiles + 1);
        }
        if (si_array_grow((void **)&v->files, &v->cap_files, (size_t)seq, sizeof(*v->files)) < 0) {
            fclose(f);
            return si_errprintf(err, "out of memory");
        }
        v->files[seq - 1] = (tfile_t){start, end, block};
        v->nfiles = seq;
    }
    fclose(f);
    return 0;
}

int tape_index_append(tape_t *t, const char *label, const char *line, si_error_t *err)
{
    char dir[PATH_MAX], path[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/tape", t->state_dir);
    mkdir(dir, 0700);
    index_path(t, label, path, sizeof(path));
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    size_t len = strlen(line);
    if (fd < 0 || write(fd, line, len) != (ssize_t)len || fsync(fd) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return si_errnoprintf(err, e, "%s: %s", path, strerror(e));
    }
    close(fd);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

/* Logical end of data: after the label (and its filemark), or the last file's filemark. */
uint64_t tape_vol_used(const tvol_t *v)
{
    return v->nfiles ? v->files[v->nfiles - 1].end + FM_BYTES : TAPEVOL_FIRST_FILE_OFFSET;
}

/* The logical object number of the first block of tape file seq (LOCATE):
 * every block and filemark before it. */
uint64_t tape_file_base(const tvol_t *v, int64_t seq)
{
    uint64_t n = 2; /* the label block and its filemark */
    for (int64_t i = 0; i + 1 < seq && i < v->nfiles; i++) {
        const tfile_t *f = &v->files[i];
        n += (f->end - f->start + f->block - 1) / f->block + 1;
    }
    return n;
}

/* ---- mounting ----------------------------------------------------------------------------- */

int tape_vol_index(const tape_t *t, const char *label)
{
    for (int v = 0; v < t->nvols; v++)
        if (strcmp(t->vols[v].label, label) == 0)
            return v;
    return -1;
}
