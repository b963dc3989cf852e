/* Multipart uploads as files: one directory each under
 * <state_dir>/s3-multipart/<upload id>/ holding "upload" (owner, time,
 * bucket and key), "headers" (what the object will keep) and the parts,
 * "<5-digit number>-<hex md5>", each renamed into place whole, so a
 * restart keeps them. Used by UploadPart(Copy) and the multipart
 * operations. */
#include "config.h"
#include "daemon/s3/internal.h"
#include "common/array.h"
#include "common/text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define META_MAX (SI_KEY_MAX + SI_BUCKET_MAX + 128)

bool s3_mp_valid_id(const char *id)
{
    return strlen(id) == S3_UPLOAD_ID_LEN && si_is_lower_hex(id, S3_UPLOAD_ID_LEN);
}

void s3_mp_upload_free(s3_mp_upload_t *u)
{
    free(u->key);
    u->key = NULL;
}

/* Reads <dir>/upload: "uid gid initiated\nbucket\nkey" (the key is the rest
 * of the file, so any byte but NUL may be in it). */
int s3_mp_read(const char *multipart_dir, const char *id, s3_mp_upload_t *u)
{
    memset(u, 0, sizeof(*u));
    snprintf(u->id, sizeof(u->id), "%s", id);
    snprintf(u->dir, sizeof(u->dir), "%s/%s", multipart_dir, id);
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/" S3_MP_META_FILE, u->dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[META_MAX + 1];
    size_t len = 0;
    ssize_t n;
    while (len < META_MAX && (n = read(fd, buf + len, META_MAX - len)) > 0)
        len += (size_t)n;
    close(fd);
    buf[len] = '\0';
    unsigned long long uid, gid;
    long long initiated;
    int used = 0;
    if (sscanf(buf, "%llu %llu %lld\n%n", &uid, &gid, &initiated, &used) != 3 || used == 0)
        return -1;
    char *bucket = buf + used, *nl = strchr(bucket, '\n');
    if (!nl || (size_t)(nl - bucket) > SI_BUCKET_MAX)
        return -1;
    *nl = '\0';
    snprintf(u->bucket, sizeof(u->bucket), "%s", bucket);
    if (!(u->key = strndup(nl + 1, len - (size_t)(nl + 1 - buf))))
        return -1;
    u->uid = (uid_t)uid;
    u->gid = (gid_t)gid;
    u->initiated = initiated;
    return 0;
}

int s3_mp_find(s3_req_t *r, s3_mp_upload_t *out)
{
    si_strbuf_t id;
    si_strbuf_init(&id, 64);
    int has = s3_req_query(r, "uploadId", &id);
    bool ok = has == 1 && !id.failed && s3_mp_valid_id(si_strbuf_str(&id)) &&
              r->srv->multipart_dir[0] &&
              s3_mp_read(r->srv->multipart_dir, si_strbuf_str(&id), out) == 0;
    si_strbuf_free(&id);
    if (ok && strcmp(out->bucket, r->bucket) == 0 && strcmp(out->key, r->key) == 0 &&
        (r->who.uid == 0 || r->who.uid == out->uid))
        return 0;
    if (ok)
        s3_mp_upload_free(out);
    s3_respond_error(r, "NoSuchUpload", NULL);
    return -1;
}

void s3_mp_part_path(const s3_mp_upload_t *u, int number, const char *md5, char *out,
                     size_t size)
{
    snprintf(out, size, "%s/%05d-%s", u->dir, number, md5);
}

/* "<5 digits>-<32 hex>" */
static bool parse_part_name(const char *name, int *number, char md5[33])
{
    if (strlen(name) != 5 + 1 + 32 || name[5] != '-')
        return false;
    int n = 0;
    for (int i = 0; i < 5; i++) {
        if (name[i] < '0' || name[i] > '9')
            return false;
        n = n * 10 + (name[i] - '0');
    }
    if (!s3_mp_valid_id(name + 6) || n < 1 || n > S3_PARTS_MAX)
        return false;
    *number = n;
    memcpy(md5, name + 6, 33);
    return true;
}

void s3_mp_drop_other_parts(const s3_mp_upload_t *u, int number, const char *keep)
{
    DIR *d = opendir(u->dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int n;
        char md5[33];
        if (parse_part_name(e->d_name, &n, md5) && n == number && strcmp(md5, keep) != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

static int part_cmp(const void *a, const void *b)
{
    const s3_mp_part_t *x = a, *y = b;
    if (x->number != y->number)
        return x->number < y->number ? -1 : 1;
    return x->mtime < y->mtime ? 1 : x->mtime > y->mtime ? -1 : 0; /* newest first */
}

/* The parts of u by number (one per number: the newest). */
int s3_mp_list_parts(const s3_mp_upload_t *u, s3_mp_part_t **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(u->dir);
    if (!d)
        return -1;
    s3_mp_part_t *parts = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        s3_mp_part_t p;
        struct stat st;
        if (!parse_part_name(e->d_name, &p.number, p.md5) ||
            fstatat(dirfd(d), e->d_name, &st, 0) < 0)
            continue;
        p.size = (uint64_t)st.st_size;
        p.mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        if (si_array_grow((void **)&parts, &cap, n + 1, sizeof(*parts)) < 0) {
            free(parts);
            closedir(d);
            return -1;
        }
        parts[n++] = p;
    }
    closedir(d);
    if (n)
        qsort(parts, n, sizeof(*parts), part_cmp);
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || parts[w - 1].number != parts[i].number)
            parts[w++] = parts[i];
    *out = parts;
    *count = w;
    return 0;
}

bool s3_mp_exists(const s3_mp_upload_t *u)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/" S3_MP_META_FILE, u->dir);
    return access(path, F_OK) == 0;
}

/* The upload's file goes first: a part arriving meanwhile sees it gone. */
void s3_mp_remove(const s3_mp_upload_t *u)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/" S3_MP_META_FILE, u->dir);
    unlink(path);
    DIR *d = opendir(u->dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(u->dir);
}

/* Makes the part file tmp (open as fd, closed here) part number of the
 * upload in dir, under its MD5: 0, or -1 answered (404 NoSuchUpload when
 * the upload was aborted or completed meanwhile). */
int s3_mp_store_part(s3_req_t *r, const char *dir, const char *tmp, int fd, int number,
                      const char *md5_hex)
{
    s3_mp_upload_t u = {0};
    snprintf(u.dir, sizeof(u.dir), "%s", dir);
    char final[PATH_MAX + 64];
    s3_mp_part_path(&u, number, md5_hex, final, sizeof(final));
    int rc = fsync(fd);
    if (close(fd) < 0)
        rc = -1;
    if (rc == 0)
        rc = rename(tmp, final);
    int e = errno;
    if (rc < 0)
        unlink(tmp);
    /* an abort (or completion) may have removed the upload while the part
     * arrived: then the part belongs to no upload */
    if ((rc < 0 && e == ENOENT) || (rc == 0 && !s3_mp_exists(&u))) {
        if (rc == 0)
            unlink(final);
        s3_respond_error(r, "NoSuchUpload", "the upload was aborted or completed while part"
                         " %d arrived", number);
        return -1;
    }
    if (rc < 0) {
        char detail[PATH_MAX + 200];
        snprintf(detail, sizeof(detail), "%s: %s", final, strerror(e));
        s3_respond_internal(r, "storing the part", detail);
        return -1;
    }
    s3_mp_drop_other_parts(&u, number, md5_hex);
    return 0;
}

int s3_mp_part_create(s3_req_t *r, const s3_mp_upload_t *u, uint64_t size, char *tmp,
                      size_t tmp_size)
{
    if (size > S3_PART_MAX_SIZE) {
        s3_respond_error(r, "EntityTooLarge", "a part may be at most %llu bytes",
                         (unsigned long long)S3_PART_MAX_SIZE);
        return -1;
    }
    snprintf(tmp, tmp_size, "%s/.part-%s", u->dir, r->id);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) {
            s3_respond_error(r, "NoSuchUpload", NULL);
        } else {
            char detail[PATH_MAX + 200];
            snprintf(detail, sizeof(detail), "creating %s: %s", tmp, strerror(e));
            s3_respond_internal(r, "storing the part", detail);
        }
    }
    return fd;
}

/* The upload and part number an UploadPart(Copy) names, in a writable
 * bucket: the number (u to free), or 0 answered. */
int s3_mp_part_target(s3_req_t *r, s3_mp_upload_t *u)
{
    if (!s3_writable_bucket(r))
        return 0;
    int number = s3_req_part_number(r);
    if (!number || s3_mp_find(r, u) < 0)
        return 0;
    return number;
}

/* The upload's headers file (missing: an upload begun before they were
 * kept, with none). */
int s3_mp_read_headers(const s3_mp_upload_t *u, si_strbuf_t *out)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/" S3_MP_HEADERS_FILE, u->dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        si_strbuf_append(out, buf, (size_t)n);
    close(fd);
    return n < 0 || out->failed ? -1 : 0;
}
