/* Volumes: the label record, filemark records, opening, listing and reads. */
#include "config.h"
#include "daemon/volume/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/fileio.h"
#include "common/text.h"
#include "daemon/tape/model.h"

#define LABEL_MAGIC "STAGEIN-VOLUME"
#define FILEMARK_MAGIC "STAGEIN-FILEMARK"

const si_conf_key_t volume_conf_keys[] = {
    {"library.volume_dir", SI_CONF_STRING, 0, 0, NULL},
    SI_CONF_KEYS_END,
};

const char *tapevol_conf_dir(const si_conf_t *conf, char *buf, size_t size)
{
    return si_conf_state_path(conf, "library.volume_dir", "volumes", buf, size);
}

int tapevol_label_check(const char *label, si_error_t *err)
{
    size_t len = strlen(label);
    if (len == 0 || len > TAPEVOL_LABEL_MAX)
        return si_errprintf(err, "volume label '%.40s' must be 1 to %d characters", label,
                            TAPEVOL_LABEL_MAX);
    for (size_t i = 0; i < len; i++) {
        char c = label[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return si_errprintf(err, "volume label '%s' has invalid character at offset %zu "
                                "(allowed: A-Z 0-9 _ -)", label, i);
    }
    return 0;
}

int tapevol_media_check(const char *media, si_error_t *err)
{
    size_t len = strlen(media);
    if (len == 0 || len > TAPEVOL_MEDIA_MAX)
        return si_errprintf(err, "media type '%.40s' must be 1 to %d characters", media,
                            TAPEVOL_MEDIA_MAX);
    for (size_t i = 0; i < len; i++) {
        char c = media[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return si_errprintf(err, "media type '%s' has invalid character at offset %zu "
                                "(allowed: A-Z a-z 0-9 . _ -)", media, i);
    }
    return 0;
}

uint64_t tapevol_media_capacity(const char *media)
{
    /* the tape model's profile of the same name: "LTO-9" is "lto9" */
    char name[16];
    size_t n = 0;
    tape_profile_t profile;
    for (const char *c = media; *c && n + 1 < sizeof(name); c++)
        if (*c != '-')
            name[n++] = (char)((*c >= 'A' && *c <= 'Z') ? *c - 'A' + 'a' : *c);
    name[n] = '\0';
    if (tape_profile_builtin(name, &profile, NULL) < 0)
        return 0;
    return (uint64_t)profile.capacity;
}

/* ---- records: a magic line, then "key value" lines, NUL padding ------- */

#define RECORD_FIELDS_MAX 8

typedef struct {
    size_t n;
    const char *key[RECORD_FIELDS_MAX];
    size_t klen[RECORD_FIELDS_MAX];
    const char *value[RECORD_FIELDS_MAX];
    size_t vlen[RECORD_FIELDS_MAX];
} record_fields_t;

static int record_split(const unsigned char rec[TAPEVOL_RECORD], const char *magic,
                        record_fields_t *f, si_error_t *err)
{
    const char *p = (const char *)rec;
    const char *end = memchr(p, '\0', TAPEVOL_RECORD);
    size_t mlen = strlen(magic);
    if (!end)
        return si_errprintf(err, "record is not NUL-terminated");
    for (const char *z = end; z < p + TAPEVOL_RECORD; z++)
        if (*z)
            return si_errprintf(err, "record has bytes after its end");
    if ((size_t)(end - p) <= mlen || memcmp(p, magic, mlen) != 0 || p[mlen] != '\n')
        return si_errprintf(err, "no %s record here", magic);
    f->n = 0;
    for (p += mlen + 1; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *sp = nl ? memchr(p, ' ', (size_t)(nl - p)) : NULL;
        if (!nl || !sp || sp == p || sp + 1 == nl)
            return si_errprintf(err, "%s record: malformed line at byte %td", magic,
                                p - (const char *)rec);
        if (f->n == RECORD_FIELDS_MAX)
            return si_errprintf(err, "%s record: too many lines", magic);
        f->key[f->n] = p;
        f->klen[f->n] = (size_t)(sp - p);
        f->value[f->n] = sp + 1;
        f->vlen[f->n] = (size_t)(nl - sp - 1);
        f->n++;
        p = nl + 1;
    }
    return 0;
}

/* Copies field key into out (size bytes); err when missing or too long. */
static int record_get(const record_fields_t *f, const char *magic, const char *key,
                      char *out, size_t size, si_error_t *err)
{
    for (size_t i = 0; i < f->n; i++) {
        if (f->klen[i] != strlen(key) || memcmp(f->key[i], key, f->klen[i]) != 0)
            continue;
        if (f->vlen[i] >= size)
            return si_errprintf(err, "%s record: '%s' is too long", magic, key);
        memcpy(out, f->value[i], f->vlen[i]);
        out[f->vlen[i]] = '\0';
        return 0;
    }
    return si_errprintf(err, "%s record: no '%s' line", magic, key);
}

static int record_get_u64(const record_fields_t *f, const char *magic, const char *key,
                          uint64_t *out, si_error_t *err)
{
    char buf[32];
    if (record_get(f, magic, key, buf, sizeof(buf), err) < 0)
        return -1;
    if (si_parse_u64(buf, out) < 0)
        return si_errprintf(err, "%s record: '%s' is not a number: '%s'", magic, key, buf);
    return 0;
}

void tapevol_label_format(unsigned char rec[TAPEVOL_RECORD], const char *label,
                          const char *media, uint64_t capacity, int64_t created)
{
    memset(rec, 0, TAPEVOL_RECORD);
    snprintf((char *)rec, TAPEVOL_RECORD,
             LABEL_MAGIC "\nformat %d\nlabel %s\nmedia %s\ncapacity %" PRIu64
             "\ncreated %" PRId64 "\n",
             TAPEVOL_FORMAT, label, media, capacity, created);
}

int tapevol_label_parse(const unsigned char rec[TAPEVOL_RECORD], tapevol_info_t *info,
                        si_error_t *err)
{
    record_fields_t f;
    uint64_t format, capacity, created;
    memset(info, 0, sizeof(*info));
    if (record_split(rec, LABEL_MAGIC, &f, err) < 0 ||
        record_get_u64(&f, LABEL_MAGIC, "format", &format, err) < 0)
        return -1;
    if (format != TAPEVOL_FORMAT)
        return si_errprintf(err, "volume format %" PRIu64 " is not supported (this stagein "
                            "reads format %d)", format, TAPEVOL_FORMAT);
    if (record_get(&f, LABEL_MAGIC, "label", info->label, sizeof(info->label), err) < 0 ||
        tapevol_label_check(info->label, err) < 0 ||
        record_get(&f, LABEL_MAGIC, "media", info->media, sizeof(info->media), err) < 0 ||
        tapevol_media_check(info->media, err) < 0 ||
        record_get_u64(&f, LABEL_MAGIC, "capacity", &capacity, err) < 0 ||
        record_get_u64(&f, LABEL_MAGIC, "created", &created, err) < 0)
        return -1;
    if (capacity < TAPEVOL_FIRST_FILE_OFFSET || created > INT64_MAX)
        return si_errprintf(err, "volume label record has impossible values");
    info->format = (int)format;
    info->capacity = capacity;
    info->created = (int64_t)created;
    return 0;
}

void tapevol_filemark_format(unsigned char rec[TAPEVOL_RECORD], int64_t seq,
                             uint64_t start, uint64_t end)
{
    memset(rec, 0, TAPEVOL_RECORD);
    snprintf((char *)rec, TAPEVOL_RECORD,
             FILEMARK_MAGIC "\nfile %" PRId64 "\nstart %" PRIu64 "\nend %" PRIu64 "\n", seq,
             start, end);
}

int tapevol_filemark_parse(const unsigned char rec[TAPEVOL_RECORD], int64_t *seq,
                           uint64_t *start, uint64_t *end, si_error_t *err)
{
    record_fields_t f;
    uint64_t file;
    if (record_split(rec, FILEMARK_MAGIC, &f, err) < 0 ||
        record_get_u64(&f, FILEMARK_MAGIC, "file", &file, err) < 0 ||
        record_get_u64(&f, FILEMARK_MAGIC, "start", start, err) < 0 ||
        record_get_u64(&f, FILEMARK_MAGIC, "end", end, err) < 0)
        return -1;
    if (file > INT64_MAX || *start > *end)
        return si_errprintf(err, "filemark record has impossible values");
    *seq = (int64_t)file;
    return 0;
}

/* ---- create, open, list ------------------------------------------------ */

static char *path_join(const char *dir, const char *label, const char *suffix)
{
    size_t len = strlen(dir) + strlen(label) + strlen(suffix) + 2;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s/%s%s", dir, label, suffix);
    return p;
}

/* mkdir -p */
static int make_dirs(const char *dir, si_error_t *err)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
        return si_errprintf(err, "volume directory name is too long");
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
            return si_errprintf(err, "cannot create directory %s: %s", path, strerror(errno));
        *p = c;
        if (!c)
            break;
    }
    /* the volumes hold every user's bytes: the service's alone */
    if (chmod(dir, 0700) < 0)
        return si_errprintf(err, "cannot make %s private: %s", dir, strerror(errno));
    return 0;
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int tapevol_create(const char *dir, const char *label, const char *media,
                   uint64_t capacity, si_error_t *err)
{
    unsigned char rec[2 * TAPEVOL_RECORD];
    char *path = NULL, *tmp = NULL;
    int fd = -1;

    if (tapevol_label_check(label, err) < 0 || tapevol_media_check(media, err) < 0)
        return -1;
    if (capacity < TAPEVOL_FIRST_FILE_OFFSET + 3 * TAPEVOL_RECORD)
        return si_errprintf(err, "capacity %" PRIu64 " bytes is too small for a volume "
                            "(minimum %d)", capacity, TAPEVOL_FIRST_FILE_OFFSET +
                            3 * TAPEVOL_RECORD);
    if (make_dirs(dir, err) < 0)
        return -1;
    path = path_join(dir, label, ".vol");
    tmp = path_join(dir, label, ".vol.new");
    if (!path || !tmp) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    tapevol_label_format(rec, label, media, capacity, (int64_t)time(NULL));
    tapevol_filemark_format(rec + TAPEVOL_RECORD, 0, 0, TAPEVOL_RECORD);
    /* Written aside and linked into place: the volume appears whole or not
     * at all, and an existing volume is never overwritten. */
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        si_errprintf(err, "cannot create %s: %s", tmp, strerror(errno));
        goto error;
    }
    if (si_pwrite_all(fd, rec, sizeof(rec), 0) < 0 || fsync(fd) < 0) {
        si_errprintf(err, "cannot write %s: %s", tmp, strerror(errno));
        goto error;
    }
    if (link(tmp, path) < 0) {
        if (errno == EEXIST)
            si_errprintf(err, "volume %s already exists (%s)", label, path);
        else
            si_errprintf(err, "cannot create %s: %s", path, strerror(errno));
        goto error;
    }
    close(fd);
    unlink(tmp);
    fsync_dir(dir);
    free(path);
    free(tmp);
    return 0;
error:
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    free(path);
    free(tmp);
    return -1;
}

tapevol_t *tapevol_open(const char *dir, const char *label, int flags, si_error_t *err)
{
    unsigned char rec[TAPEVOL_RECORD];
    tapevol_t *vol = NULL;

    if (tapevol_label_check(label, err) < 0)
        return NULL;
    vol = calloc(1, sizeof(*vol));
    if (!vol) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    vol->fd = -1;
    vol->flags = flags;
    pthread_mutex_init(&vol->faults_lock, NULL);
    vol->path = path_join(dir, label, ".vol");
    vol->faults_path = path_join(dir, label, ".unreadable");
    if (!vol->path || !vol->faults_path) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    vol->fd = open(vol->path, ((flags & TAPEVOL_RDWR) ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (vol->fd < 0) {
        if (errno == ENOENT)
            si_errprintf(err, "no volume %s in %s", label, dir);
        else
            si_errprintf(err, "cannot open %s: %s", vol->path, strerror(errno));
        goto error;
    }
    ssize_t n = pread(vol->fd, rec, sizeof(rec), 0);
    if (n != (ssize_t)sizeof(rec)) {
        si_errprintf(err, "%s: %s", vol->path,
                     n < 0 ? strerror(errno) : "too short for a volume label record");
        goto error;
    }
    if (tapevol_label_parse(rec, &vol->label, err) < 0) {
        si_errprefix(err, "%s: bad volume label at offset 0", vol->path);
        goto error;
    }
    if (strcmp(vol->label.label, label) != 0) {
        si_errprintf(err, "%s: holds volume '%s', not '%s'", vol->path, vol->label.label,
                     label);
        goto error;
    }
    return vol;
error:
    tapevol_close(vol);
    return NULL;
}

void tapevol_close(tapevol_t *vol)
{
    if (!vol)
        return;
    if (vol->fd >= 0)
        close(vol->fd);
    pthread_mutex_destroy(&vol->faults_lock);
    free(vol->path);
    free(vol->faults_path);
    free(vol->regions);
    free(vol);
}

void tapevol_label_fields(const tapevol_t *vol, tapevol_info_t *info)
{
    *info = vol->label;
    info->used = 0;
    info->files = 0;
}

const char *tapevol_label(const tapevol_t *vol)
{
    return vol->label.label;
}

const char *tapevol_path(const tapevol_t *vol)
{
    return vol->path;
}

static int compare_labels(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void tapevol_labels_free(char **labels, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free(labels[i]);
    free(labels);
}

int tapevol_list(const char *dir, char ***labels, size_t *count, si_error_t *err)
{
    char **out = NULL;
    size_t n = 0, cap = 0;
    DIR *d = opendir(dir);
    *labels = NULL;
    *count = 0;
    if (!d) {
        if (errno == ENOENT)
            return 0;
        return si_errprintf(err, "cannot read volume directory %s: %s", dir, strerror(errno));
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len <= 4 || strcmp(e->d_name + len - 4, ".vol") != 0)
            continue;
        char *label = strndup(e->d_name, len - 4);
        if (!label)
            goto oom;
        if (tapevol_label_check(label, NULL) < 0) {
            free(label); /* not a volume this tool could have written */
            continue;
        }
        if (si_array_grow((void **)&out, &cap, n + 1, sizeof(*out)) < 0) {
            free(label);
            goto oom;
        }
        out[n++] = label;
    }
    closedir(d);
    if (n)
        qsort(out, n, sizeof(*out), compare_labels);
    *labels = out;
    *count = n;
    return 0;
oom:
    closedir(d);
    tapevol_labels_free(out, n);
    return si_errprintf(err, "out of memory");
}

/* ---- end of data --------------------------------------------------------- */

int tapevol_tail(tapevol_t *vol, int64_t *files, uint64_t *eod, si_error_t *err)
{
    struct stat st;
    unsigned char rec[TAPEVOL_RECORD];
    uint64_t start, end;
    if (fstat(vol->fd, &st) < 0)
        return si_errprintf(err, "%s: %s", vol->path, strerror(errno));
    *eod = (uint64_t)st.st_size;
    if (*eod < TAPEVOL_FIRST_FILE_OFFSET || *eod % TAPEVOL_RECORD != 0)
        return si_errprintf(err, "volume %s: end of data at %" PRIu64 " is not at a record "
                            "boundary: truncated or corrupt (see 'stagein tape dump %s')",
                            vol->label.label, *eod, vol->label.label);
    uint64_t at = *eod - TAPEVOL_RECORD;
    if (pread(vol->fd, rec, sizeof(rec), (off_t)at) != (ssize_t)sizeof(rec))
        return si_errprintf(err, "%s: read at %" PRIu64 ": %s", vol->path, at,
                            strerror(errno));
    if (tapevol_filemark_parse(rec, files, &start, &end, err) < 0 || end != at)
        return si_errprintf(err, "volume %s: no filemark closes the data at offset %" PRIu64
                            ": an interrupted write or a corrupt volume (see 'stagein tape "
                            "dump %s')", vol->label.label, at, vol->label.label);
    return 0;
}

int tapevol_info(tapevol_t *vol, tapevol_info_t *info, si_error_t *err)
{
    tapevol_info_t out = vol->label;
    if (tapevol_tail(vol, &out.files, &out.used, err) < 0)
        return -1;
    *info = out;
    return 0;
}

/* ---- reads ----------------------------------------------------------------- */

int tapevol_read(tapevol_t *vol, uint64_t pos, void *buf, size_t len, si_error_t *err)
{
    tapevol_region_t hit;
    if (len == 0)
        return 0;
    if (pos + len < pos) {
        errno = EINVAL;
        return si_errprintf(err, "volume %s: read at %" PRIu64 " overflows", vol->label.label,
                            pos);
    }
    int overlap = tapevol_faults_overlap(vol, pos, len, &hit, err);
    if (overlap < 0)
        return -1;
    if (overlap) {
        si_errprintf(err, "volume %s: read of %zu bytes at %" PRIu64 " overlaps the "
                     "unreadable region %" PRIu64 ":%" PRIu64 ": %s", vol->label.label,
                     len, pos, hit.start, hit.length, strerror(EIO));
        errno = EIO;
        return -1;
    }
    char *p = buf;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(vol->fd, p + done, len - done, (off_t)(pos + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return si_errprintf(err, "volume %s: read at %" PRIu64 ": %s", vol->label.label,
                                pos + done, strerror(errno));
        if (n == 0) {
            si_errprintf(err, "volume %s: read of %zu bytes at %" PRIu64 " passes the end "
                         "of data at %" PRIu64, vol->label.label, len, pos, pos + done);
            errno = EINVAL;
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}
