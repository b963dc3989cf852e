/* What an object keeps beside its bytes: the standard headers and
 * x-amz-meta-* of its PUT, CreateMultipartUpload or CopyObject (REPLACE),
 * gathered into "name: value" lines for the catalog (object_meta), and given
 * back on GET and HEAD. */
#include "config.h"
#include "daemon/s3/internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The standard headers S3 stores with an object. */
static const char *const stored_headers[] = {
    "Content-Type", "Cache-Control", "Content-Disposition", "Content-Encoding",
    "Content-Language", "Expires",
};
#define N_STORED (sizeof(stored_headers) / sizeof(stored_headers[0]))

/* Content-Encoding without "aws-chunked", which names the transfer's
 * framing, not the object's encoding (S3 drops it too). */
static void put_content_encoding(si_strbuf_t *out, const char *value)
{
    size_t start = out->len;
    si_strbuf_puts(out, "content-encoding: ");
    size_t body = out->len;
    for (const char *p = value; *p;) {
        size_t n = strcspn(p, ",");
        const char *t = p;
        size_t tn = n;
        while (tn && isspace((unsigned char)*t))
            t++, tn--;
        while (tn && isspace((unsigned char)t[tn - 1]))
            tn--;
        if (tn && !(tn == 11 && strncasecmp(t, "aws-chunked", 11) == 0)) {
            if (out->len > body)
                si_strbuf_putc(out, ',');
            si_strbuf_append(out, t, tn);
        }
        p += n + (p[n] == ',');
    }
    if (out->len == body)
        out->len = start; /* nothing left to store */
    else
        si_strbuf_putc(out, '\n');
    if (out->data)
        out->data[out->len] = '\0';
}

int s3_meta_from_request(s3_req_t *r, si_strbuf_t *headers, char storage_class[S3_STORAGE_CLASS_MAX])
{
    size_t user_bytes = 0;
    for (size_t i = 0; i < N_STORED; i++) {
        const char *v = s3_req_header(r, stored_headers[i]);
        if (!v || !*v)
            continue;
        if (strcasecmp(stored_headers[i], "Content-Encoding") == 0) {
            put_content_encoding(headers, v);
            continue;
        }
        for (const char *c = stored_headers[i]; *c; c++)
            si_strbuf_putc(headers, (char)tolower((unsigned char)*c));
        si_strbuf_printf(headers, ": %s\n", v);
    }
    for (size_t i = 0; i < r->nheaders; i++) {
        const char *name = r->headers[i].name, *v = r->headers[i].value;
        if (strncasecmp(name, "x-amz-meta-", 11) != 0 || !name[11])
            continue;
        user_bytes += strlen(name + 11) + strlen(v);
        for (const char *c = name; *c; c++)
            si_strbuf_putc(headers, (char)tolower((unsigned char)*c));
        si_strbuf_printf(headers, ": %s\n", v);
    }
    if (user_bytes > S3_USER_META_MAX) {
        s3_respond_error(r, "MetadataTooLarge", "the x-amz-meta-* headers are %zu bytes (names"
                         " and values); at most %u are allowed", user_bytes, S3_USER_META_MAX);
        return -1;
    }
    if (headers->failed || headers->len >= S3_META_HEADERS_MAX) {
        s3_respond_error(r, "MetadataTooLarge", "the stored headers are over %u bytes",
                         S3_META_HEADERS_MAX - 1);
        return -1;
    }
    storage_class[0] = '\0';
    const char *cls = s3_req_header(r, "x-amz-storage-class");
    if (cls && !s3_storage_class_known(cls)) {
        s3_respond_error(r, "InvalidStorageClass", "x-amz-storage-class '%.40s' is not a storage"
                         " class (STANDARD, GLACIER, DEEP_ARCHIVE, ...)", cls);
        return -1;
    }
    /* only the archive classes are kept: any other reads as STANDARD while
     * cached and as GLACIER once on tape only, which is what it then is */
    if (cls && s3_storage_class_archived(cls))
        snprintf(storage_class, S3_STORAGE_CLASS_MAX, "%s", cls);
    return 0;
}

void s3_meta_add_headers(struct MHD_Response *resp, const char *headers,
                         bool (*overridden)(const char *name, void *arg), void *arg)
{
    char name[S3_META_HEADERS_MAX], value[S3_META_HEADERS_MAX];
    for (const char *p = headers; *p;) {
        size_t line = strcspn(p, "\n");
        const char *colon = memchr(p, ':', line);
        if (colon && (size_t)(colon - p) < sizeof(name) && line - (size_t)(colon - p) >= 2) {
            snprintf(name, sizeof(name), "%.*s", (int)(colon - p), p);
            snprintf(value, sizeof(value), "%.*s", (int)(line - (size_t)(colon - p) - 2),
                     colon + 2);
            if (!overridden || !overridden(name, arg))
                MHD_add_response_header(resp, name, value);
        }
        p += line + (p[line] == '\n');
    }
}

bool s3_meta_has(const char *headers, const char *name)
{
    size_t nlen = strlen(name);
    for (const char *p = headers; *p;) {
        size_t line = strcspn(p, "\n");
        if (line > nlen && strncasecmp(p, name, nlen) == 0 && p[nlen] == ':')
            return true;
        p += line + (p[line] == '\n');
    }
    return false;
}
