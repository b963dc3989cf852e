/* Multipart uploads into archive buckets: CreateMultipartUpload,
 * CompleteMultipartUpload (parts checked, streamed in order through the
 * push path like a single PUT, ETag "<md5 of part md5s>-N"),
 * AbortMultipartUpload, ListParts and ListMultipartUploads. UploadPart is
 * in write.c (it shares PutObject's payload verification), UploadPartCopy
 * in copy.c; uploads in progress are files (upload.c). */
#include "config.h"
#include "daemon/s3/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "common/array.h"
#include "common/fileio.h"

static bool multipart_allowed(s3_req_t *r)
{
    if (!s3_writable_bucket(r))
        return false;
    if (!r->srv->multipart_dir[0]) {
        s3_respond_error(r, "NotImplemented", "multipart uploads need a state directory");
        return false;
    }
    return true;
}

/* ---- CreateMultipartUpload ----------------------------------------------------- */

void s3_create_multipart(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    if (!multipart_allowed(r))
        return;
    char *cat_key = s3_req_catalog_key(r);
    if (!cat_key)
        return;
    free(cat_key);
    unsigned char rnd[S3_UPLOAD_ID_LEN / 2];
    if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
        s3_respond_error(r, "InternalError", "no random bytes for an upload id");
        return;
    }
    char id[S3_UPLOAD_ID_LEN + 1];
    si_hex(rnd, sizeof(rnd), id);
    si_strbuf_t headers;
    si_strbuf_init(&headers, S3_META_HEADERS_MAX);
    char storage_class[S3_STORAGE_CLASS_MAX];
    if (s3_meta_from_request(r, &headers, storage_class) < 0) {
        si_strbuf_free(&headers);
        return;
    }
    char dir[PATH_MAX], tmp[PATH_MAX + 32], meta[PATH_MAX + 16], hpath[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s/%s", s->multipart_dir, id);
    snprintf(tmp, sizeof(tmp), "%s/." S3_MP_META_FILE ".tmp", dir);
    snprintf(meta, sizeof(meta), "%s/" S3_MP_META_FILE, dir);
    snprintf(hpath, sizeof(hpath), "%s/" S3_MP_HEADERS_FILE, dir);
    if ((mkdir(s->multipart_dir, 0700) < 0 && errno != EEXIST) || mkdir(dir, 0700) < 0) {
        char detail[PATH_MAX + 200];
        snprintf(detail, sizeof(detail), "creating %s: %s", dir, strerror(errno));
        si_strbuf_free(&headers);
        s3_respond_internal(r, "starting the upload", detail);
        return;
    }
    /* the headers first: an upload whose file exists has them */
    int fd = open(hpath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && si_write_all(fd, storage_class, strlen(storage_class)) == 0 &&
              si_write_all(fd, "\n", 1) == 0 &&
              si_write_all(fd, si_strbuf_str(&headers), headers.len) == 0 && fsync(fd) == 0;
    si_strbuf_free(&headers);
    if (fd >= 0)
        close(fd);
    if (ok)
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    char head[128];
    int hlen = snprintf(head, sizeof(head), "%llu %llu %lld\n", (unsigned long long)r->who.uid,
                        (unsigned long long)r->who.gid, (long long)time(NULL));
    ok = ok && fd >= 0 && si_write_all(fd, head, (size_t)hlen) == 0 &&
         si_write_all(fd, r->bucket, strlen(r->bucket)) == 0 &&
         si_write_all(fd, "\n", 1) == 0 && si_write_all(fd, r->key, strlen(r->key)) == 0 &&
         fsync(fd) == 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (!ok || rename(tmp, meta) < 0) {
        e = ok ? errno : e;
        unlink(tmp);
        unlink(hpath);
        rmdir(dir);
        char detail[PATH_MAX + 200];
        snprintf(detail, sizeof(detail), "writing %s: %s", meta, strerror(e));
        s3_respond_internal(r, "starting the upload", detail);
        return;
    }
    si_strbuf_t x;
    si_strbuf_init(&x, SI_KEY_MAX * 6 + 1024);
    si_strbuf_puts(&x, XML_DECL "<InitiateMultipartUploadResult xmlns=\"" S3_XMLNS "\">");
    s3_put_xml_text(&x, "Bucket", r->bucket);
    s3_put_xml_text(&x, "Key", r->key);
    s3_put_xml_text(&x, "UploadId", id);
    si_strbuf_puts(&x, "</InitiateMultipartUploadResult>");
    snprintf(r->note + strlen(r->note), sizeof(r->note) - strlen(r->note), " upload=%s", id);
    s3_respond_xml(r, 200, &x);
}

/* ---- CompleteMultipartUpload ----------------------------------------------------- */

static void upload_failed(s3_req_t *r, const char *what, const char *path)
{
    char detail[PATH_MAX + 200];
    snprintf(detail, sizeof(detail), "%s: %s", path, strerror(errno));
    s3_respond_internal(r, what, detail);
}

static void complete_end(s3_req_t *r)
{
    s3_mp_upload_t u;
    s3_complete_request_t c = {0};
    s3_mp_part_t *parts = NULL;
    size_t nparts = 0;
    int *fds = NULL;
    uint64_t *sizes = NULL;
    const char **md5s = NULL;
    size_t opened = 0;
    si_error_t err;
    const char *code = NULL;
    si_strbuf_t part_sizes, stored;
    si_strbuf_init(&part_sizes, (size_t)S3_PARTS_MAX * 12);
    si_strbuf_init(&stored, S3_META_HEADERS_MAX + S3_STORAGE_CLASS_MAX + 1);
    if (s3_mp_find(r, &u) < 0) {
        si_strbuf_free(&part_sizes);
        si_strbuf_free(&stored);
        return;
    }
    if (s3_parse_complete(si_strbuf_str(&r->xml), r->xml.len, &c, &code, &err) < 0) {
        s3_respond_error(r, code ? code : "MalformedXML", "%s", err.text);
        goto done;
    }
    if (c.nparts == 0) {
        s3_respond_error(r, "MalformedXML", "CompleteMultipartUpload names no part");
        goto done;
    }
    if (s3_mp_list_parts(&u, &parts, &nparts) < 0) {
        upload_failed(r, "reading the upload's parts", u.dir);
        goto done;
    }
    fds = calloc(c.nparts, sizeof(*fds));
    sizes = calloc(c.nparts, sizeof(*sizes));
    md5s = calloc(c.nparts, sizeof(*md5s));
    if (!fds || !sizes || !md5s) {
        s3_respond_error(r, "InternalError", "out of memory");
        goto done;
    }
    /* every part named exists with that ETag; all but the last >= 5 MiB */
    for (size_t i = 0; i < c.nparts; i++) {
        const s3_mp_part_t *p = NULL;
        for (size_t j = 0; j < nparts && !p; j++)
            if (parts[j].number == c.parts[i].number)
                p = &parts[j];
        if (!p || strcasecmp(p->md5, c.parts[i].etag) != 0) {
            s3_respond_error(r, "InvalidPart", "part %d %s", c.parts[i].number,
                             p ? "has another ETag" : "was not uploaded");
            goto done;
        }
        if (i + 1 < c.nparts && p->size < S3_PART_MIN_SIZE) {
            s3_respond_error(r, "EntityTooSmall", "part %d is %" PRIu64 " bytes; every part"
                             " but the last must be at least %u", p->number, p->size,
                             S3_PART_MIN_SIZE);
            goto done;
        }
        md5s[i] = p->md5;
        sizes[i] = p->size;
    }
    char etag[S3_ETAG_MAX];
    if (s3_multipart_etag(md5s, c.nparts, etag) < 0) {
        s3_respond_error(r, "InternalError", "a part's MD5 is not hex");
        goto done;
    }
    for (; opened < c.nparts; opened++) {
        char path[PATH_MAX + 64];
        s3_mp_part_path(&u, c.parts[opened].number, md5s[opened], path, sizeof(path));
        if ((fds[opened] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
            upload_failed(r, "reading a part", path);
            goto done;
        }
    }
    bool no_replace;
    char *cat_key = s3_req_catalog_key(r);
    if (!cat_key)
        goto done;
    int cond = s3_put_conditions(r, cat_key, &no_replace);
    free(cat_key);
    if (cond < 0)
        goto done;
    for (size_t i = 0; i < c.nparts; i++)
        si_strbuf_printf(&part_sizes, "%s%" PRIu64, i ? "," : "", sizes[i]);
    if (s3_mp_read_headers(&u, &stored) < 0) {
        upload_failed(r, "reading the upload's headers", u.dir);
        goto done;
    }
    const char *nl = strchr(si_strbuf_str(&stored), '\n');
    char storage_class[S3_STORAGE_CLASS_MAX] = "";
    if (nl)
        snprintf(storage_class, sizeof(storage_class), "%.*s",
                 (int)(nl - si_strbuf_str(&stored)), si_strbuf_str(&stored));
    s3_meta_t meta = {.headers = nl ? nl + 1 : "", .storage_class = storage_class,
                      .part_sizes = si_strbuf_str(&part_sizes)};
    /* the stored ETag goes without its quotes */
    char bare[S3_ETAG_MAX];
    snprintf(bare, sizeof(bare), "%.*s", (int)strlen(etag) - 2, etag + 1);
    char recorded[S3_ETAG_MAX];
    if (s3_push_from_files(r, fds, NULL, sizes, c.nparts, bare, &meta, no_replace, recorded,
                           sizeof(recorded)) < 0)
        goto done;
    s3_mp_remove(&u);
    si_strbuf_t x;
    si_strbuf_init(&x, SI_KEY_MAX * 12 + 1024);
    si_strbuf_puts(&x, XML_DECL "<CompleteMultipartUploadResult xmlns=\"" S3_XMLNS "\">");
    char location[SI_BUCKET_MAX + 2];
    snprintf(location, sizeof(location), "/%s", r->bucket);
    s3_put_xml_text(&x, "Location", location);
    s3_put_xml_text(&x, "Bucket", r->bucket);
    s3_put_xml_text(&x, "Key", r->key);
    s3_put_xml_text(&x, "ETag", etag);
    si_strbuf_puts(&x, "</CompleteMultipartUploadResult>");
    s3_respond_xml(r, 200, &x);
done:
    for (size_t i = 0; i < opened; i++)
        close(fds[i]);
    free(fds);
    free(sizes);
    free(md5s);
    free(parts);
    s3_complete_request_free(&c);
    s3_mp_upload_free(&u);
    si_strbuf_free(&part_sizes);
    si_strbuf_free(&stored);
}

void s3_complete_multipart(s3_req_t *r)
{
    if (!multipart_allowed(r))
        return;
    s3_mp_upload_t u;
    if (s3_mp_find(r, &u) < 0)
        return;
    s3_mp_upload_free(&u);
    s3_expect_xml_body(r, complete_end);
}

/* ---- AbortMultipartUpload ----------------------------------------------------------- */

void s3_abort_multipart(s3_req_t *r)
{
    if (!multipart_allowed(r))
        return;
    s3_mp_upload_t u;
    if (s3_mp_find(r, &u) < 0)
        return;
    s3_mp_remove(&u);
    s3_mp_upload_free(&u);
    s3_respond_empty(r, 204);
}

/* ---- ListParts -------------------------------------------------------------------- */

static long query_long(s3_req_t *r, const char *name, long dflt, long max)
{
    si_strbuf_t v;
    si_strbuf_init(&v, 32);
    long out = dflt;
    if (s3_req_query(r, name, &v) == 1 && !v.failed && v.len) {
        char *end;
        long n = strtol(si_strbuf_str(&v), &end, 10);
        if (*end == '\0' && n >= 0)
            out = n < max ? n : max;
    }
    si_strbuf_free(&v);
    return out;
}

static void put_owner(si_strbuf_t *x, const char *tag, uid_t uid)
{
    si_strbuf_printf(x, "<%s><ID>%llu</ID><DisplayName>uid %llu</DisplayName></%s>", tag,
                     (unsigned long long)uid, (unsigned long long)uid, tag);
}

void s3_list_parts(s3_req_t *r)
{
    if (!multipart_allowed(r))
        return;
    s3_mp_upload_t u;
    if (s3_mp_find(r, &u) < 0)
        return;
    s3_mp_part_t *parts;
    size_t n;
    if (s3_mp_list_parts(&u, &parts, &n) < 0) {
        upload_failed(r, "reading the upload's parts", u.dir);
        s3_mp_upload_free(&u);
        return;
    }
    long marker = query_long(r, "part-number-marker", 0, S3_PARTS_MAX);
    long max = query_long(r, "max-parts", 1000, 1000);
    si_strbuf_t x;
    si_strbuf_init(&x, RESPONSE_XML_MAX);
    si_strbuf_puts(&x, XML_DECL "<ListPartsResult xmlns=\"" S3_XMLNS "\">");
    s3_put_xml_text(&x, "Bucket", r->bucket);
    s3_put_xml_text(&x, "Key", r->key);
    s3_put_xml_text(&x, "UploadId", u.id);
    put_owner(&x, "Initiator", u.uid);
    put_owner(&x, "Owner", u.uid);
    si_strbuf_puts(&x, "<StorageClass>STANDARD</StorageClass>");
    si_strbuf_printf(&x, "<PartNumberMarker>%ld</PartNumberMarker><MaxParts>%ld</MaxParts>",
                     marker, max);
    long shown = 0, last = marker;
    bool truncated = false;
    for (size_t i = 0; i < n; i++) {
        if (parts[i].number <= marker)
            continue;
        if (shown == max) {
            truncated = true;
            break;
        }
        char when[32];
        s3_iso8601(parts[i].mtime / 1000000000, when);
        si_strbuf_printf(&x, "<Part><PartNumber>%d</PartNumber><LastModified>%s</LastModified>"
                         "<ETag>\"%s\"</ETag><Size>%" PRIu64 "</Size></Part>", parts[i].number,
                         when, parts[i].md5, parts[i].size);
        last = parts[i].number;
        shown++;
    }
    si_strbuf_printf(&x, "<NextPartNumberMarker>%ld</NextPartNumberMarker><IsTruncated>%s"
                     "</IsTruncated></ListPartsResult>", last, truncated ? "true" : "false");
    free(parts);
    s3_mp_upload_free(&u);
    s3_respond_xml(r, 200, &x);
}

/* ---- ListMultipartUploads -------------------------------------------------------------- */

/* S3's order: by key, then by initiation (the id breaks ties). */
static int upload_cmp(const void *a, const void *b)
{
    const s3_mp_upload_t *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    if (x->initiated != y->initiated)
        return x->initiated < y->initiated ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* Whether u comes after the key-marker / upload-id-marker position: keys
 * after the key marker; with an upload id marker, also the uploads of the
 * marker's key after that upload (all of them if it is no upload of it). */
static bool after_markers(const s3_mp_upload_t *u, const char *key_marker,
                          const s3_mp_upload_t *id_marker)
{
    int c = strcmp(u->key, key_marker);
    if (c != 0 || !id_marker)
        return c > 0;
    return upload_cmp(u, id_marker) > 0;
}

void s3_list_multipart_uploads(s3_req_t *r)
{
    s3_server_t *s = r->srv;
    if (!multipart_allowed(r))
        return;
    si_strbuf_t prefix, key_marker, id_marker;
    si_strbuf_init(&prefix, SI_KEY_MAX + 1);
    si_strbuf_init(&key_marker, SI_KEY_MAX + 1);
    si_strbuf_init(&id_marker, S3_UPLOAD_ID_LEN + 1);
    s3_req_query(r, "prefix", &prefix);
    s3_req_query(r, "key-marker", &key_marker);
    s3_req_query(r, "upload-id-marker", &id_marker);
    long max = query_long(r, "max-uploads", 1000, 1000);
    s3_mp_upload_t *ups = NULL;
    size_t n = 0, cap = 0;
    DIR *d = opendir(s->multipart_dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        s3_mp_upload_t u;
        if (!s3_mp_valid_id(e->d_name) || s3_mp_read(s->multipart_dir, e->d_name, &u) < 0)
            continue;
        if (strcmp(u.bucket, r->bucket) != 0 ||
            strncmp(u.key, si_strbuf_str(&prefix), prefix.len) != 0 ||
            (r->who.uid != 0 && r->who.uid != u.uid)) {
            s3_mp_upload_free(&u);
            continue;
        }
        if (si_array_grow((void **)&ups, &cap, n + 1, sizeof(*ups)) < 0) {
            s3_mp_upload_free(&u);
            break;
        }
        ups[n++] = u;
    }
    if (d)
        closedir(d);
    if (n)
        qsort(ups, n, sizeof(*ups), upload_cmp);
    /* the upload id marker, where it is one of the key marker's uploads */
    const s3_mp_upload_t *id_at = NULL;
    for (size_t i = 0; i < n && id_marker.len && !id_at; i++)
        if (strcmp(ups[i].key, si_strbuf_str(&key_marker)) == 0 &&
            strcmp(ups[i].id, si_strbuf_str(&id_marker)) == 0)
            id_at = &ups[i];
    size_t first = 0;
    while (first < n && (key_marker.len || id_marker.len) &&
           !after_markers(&ups[first], si_strbuf_str(&key_marker), id_marker.len ? id_at : NULL))
        first++;
    if (id_marker.len && !id_at) /* an unknown upload id: past all of that key's uploads */
        while (first < n && strcmp(ups[first].key, si_strbuf_str(&key_marker)) == 0)
            first++;
    size_t shown = n - first < (size_t)max ? n - first : (size_t)max;
    bool truncated = first + shown < n;
    si_strbuf_t x;
    si_strbuf_init(&x, RESPONSE_XML_MAX);
    si_strbuf_puts(&x, XML_DECL "<ListMultipartUploadsResult xmlns=\"" S3_XMLNS "\">");
    s3_put_xml_text(&x, "Bucket", r->bucket);
    s3_put_xml_text(&x, "KeyMarker", si_strbuf_str(&key_marker));
    s3_put_xml_text(&x, "UploadIdMarker", si_strbuf_str(&id_marker));
    if (truncated && shown) {
        s3_put_xml_text(&x, "NextKeyMarker", ups[first + shown - 1].key);
        s3_put_xml_text(&x, "NextUploadIdMarker", ups[first + shown - 1].id);
    }
    s3_put_xml_text(&x, "Prefix", si_strbuf_str(&prefix));
    si_strbuf_printf(&x, "<MaxUploads>%ld</MaxUploads><IsTruncated>%s</IsTruncated>", max,
                     truncated ? "true" : "false");
    for (size_t i = first; i < first + shown; i++) {
        char when[32];
        s3_iso8601(ups[i].initiated, when);
        si_strbuf_puts(&x, "<Upload>");
        s3_put_xml_text(&x, "Key", ups[i].key);
        s3_put_xml_text(&x, "UploadId", ups[i].id);
        put_owner(&x, "Initiator", ups[i].uid);
        put_owner(&x, "Owner", ups[i].uid);
        si_strbuf_printf(&x, "<StorageClass>STANDARD</StorageClass><Initiated>%s</Initiated>"
                         "</Upload>", when);
    }
    si_strbuf_puts(&x, "</ListMultipartUploadsResult>");
    for (size_t i = 0; i < n; i++)
        s3_mp_upload_free(&ups[i]);
    free(ups);
    si_strbuf_free(&prefix);
    si_strbuf_free(&key_marker);
    si_strbuf_free(&id_marker);
    s3_respond_xml(r, 200, &x);
}
