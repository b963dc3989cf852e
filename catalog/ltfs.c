/* Import of an SNIA LTFS index (XML): every file's extents give its logical
 * position on the data partition; directories become key prefixes. */
#include "config.h"
#include "catalog/import.h"

#include <expat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/text.h"

#define LTFS_DEPTH_MAX 64
#define LTFS_TEXT_MAX 4096
#define LTFS_PATH_MAX 2048
#define LTFS_DEFAULT_BLOCK 524288

typedef enum { EL_OTHER, EL_INDEX, EL_DIRECTORY, EL_FILE, EL_EXTENT } el_kind_t;

typedef struct {
    import_t im;
    XML_Parser parser;
    const catalog_positions_opts_t *opts;
    si_error_t *err;
    int failed;
    uint64_t block_size;

    el_kind_t stack[LTFS_DEPTH_MAX];
    int depth;
    char text[LTFS_TEXT_MAX + 1];
    size_t text_len;
    bool text_too_long;
    bool name_percent_encoded;

    /* directory path below the root, as key prefix components */
    char path[LTFS_PATH_MAX + 1];
    size_t path_len[LTFS_DEPTH_MAX];
    int dir_depth;             /* 0 outside the root directory */
    char volume[40];

    /* the file being read */
    char file_name[LTFS_TEXT_MAX + 1];
    uint64_t file_length;
    int64_t file_mtime;
    bool file_has_extent;
    uint64_t first_position;   /* the extent holding file offset 0 */
    uint64_t ext_fileoffset, ext_startblock, ext_byteoffset, ext_bytecount;
    char ext_partition[8];
} ltfs_t;

static void ltfs_fail(ltfs_t *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void ltfs_fail(ltfs_t *l, const char *fmt, ...)
{
    if (l->failed)
        return;
    char reason[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    l->im.line = (uint64_t)XML_GetCurrentLineNumber(l->parser);
    import_fail(&l->im, l->err, "%s", reason);
    l->failed = 1;
    XML_StopParser(l->parser, XML_FALSE);
}

static const char *current_text(ltfs_t *l)
{
    l->text[l->text_len] = '\0';
    return l->text;
}

static int parse_number(ltfs_t *l, const char *what, uint64_t *out)
{
    const char *t = current_text(l);
    t += strspn(t, " \t\r\n");
    char buf[32];
    size_t n = strcspn(t, " \t\r\n");
    if (n == 0 || n >= sizeof(buf)) {
        ltfs_fail(l, "<%s> is not a number", what);
        return -1;
    }
    memcpy(buf, t, n);
    buf[n] = '\0';
    if (si_parse_u64(buf, out) < 0 || *out > (uint64_t)INT64_MAX) {
        ltfs_fail(l, "<%s> '%s' is not a non-negative integer", what, buf);
        return -1;
    }
    return 0;
}

/* LTFS names may be percent-encoded (percentencoded="true"). */
static int decode_name(ltfs_t *l, char *out)
{
    const char *t = current_text(l);
    size_t o = 0;
    for (size_t i = 0; t[i]; i++) {
        if (l->name_percent_encoded && t[i] == '%') {
            unsigned v;
            if (!t[i + 1] || !t[i + 2] || sscanf(t + i + 1, "%2x", &v) != 1) {
                ltfs_fail(l, "bad percent-encoding in <name>");
                return -1;
            }
            out[o++] = (char)v;
            i += 2;
        } else {
            out[o++] = t[i];
        }
    }
    out[o] = '\0';
    if (o == 0 || strchr(out, '/') || memchr(out, '\0', o) != NULL) {
        ltfs_fail(l, "<name> '%s' is empty or contains '/' or NUL", out);
        return -1;
    }
    return 0;
}

static int64_t parse_time(const char *t)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *end = strptime(t, "%Y-%m-%dT%H:%M:%S", &tm);
    return end ? (int64_t)timegm(&tm) : 0;
}

static el_kind_t kind_of(const char *name)
{
    if (strcmp(name, "ltfsindex") == 0)
        return EL_INDEX;
    if (strcmp(name, "directory") == 0)
        return EL_DIRECTORY;
    if (strcmp(name, "file") == 0)
        return EL_FILE;
    if (strcmp(name, "extent") == 0)
        return EL_EXTENT;
    return EL_OTHER;
}

static void XMLCALL on_start(void *data, const XML_Char *name, const XML_Char **attrs)
{
    ltfs_t *l = data;
    if (l->depth == LTFS_DEPTH_MAX) {
        ltfs_fail(l, "elements nested deeper than %d levels", LTFS_DEPTH_MAX);
        return;
    }
    el_kind_t kind = kind_of(name);
    if (l->depth == 0 && kind != EL_INDEX) {
        ltfs_fail(l, "root element <%s> is not <ltfsindex>: not an LTFS index", name);
        return;
    }
    l->stack[l->depth++] = kind;
    l->text_len = 0;
    l->text_too_long = false;
    l->name_percent_encoded = false;
    for (int i = 0; attrs[i]; i += 2)
        if (strcmp(attrs[i], "percentencoded") == 0 && strcmp(attrs[i + 1], "true") == 0)
            l->name_percent_encoded = true;
    if (kind == EL_DIRECTORY) {
        if (l->dir_depth >= LTFS_DEPTH_MAX - 1) {
            ltfs_fail(l, "directories nested too deeply");
            return;
        }
        l->dir_depth++;
        l->path_len[l->dir_depth] = l->dir_depth > 1 ? l->path_len[l->dir_depth - 1] : 0;
    } else if (kind == EL_FILE) {
        l->file_name[0] = '\0';
        l->file_length = 0;
        l->file_mtime = 0;
        l->file_has_extent = false;
    } else if (kind == EL_EXTENT) {
        l->ext_fileoffset = l->ext_startblock = l->ext_byteoffset = l->ext_bytecount = 0;
        l->ext_partition[0] = '\0';
    }
}

static void XMLCALL on_text(void *data, const XML_Char *s, int len)
{
    ltfs_t *l = data;
    if (l->text_len + (size_t)len > LTFS_TEXT_MAX) {
        l->text_too_long = true;
        return;
    }
    memcpy(l->text + l->text_len, s, (size_t)len);
    l->text_len += (size_t)len;
}

static el_kind_t parent_kind(const ltfs_t *l)
{
    return l->depth >= 2 ? l->stack[l->depth - 2] : EL_OTHER;
}

static void directory_named(ltfs_t *l, const char *name)
{
    if (l->dir_depth == 1) { /* the root: named after the volume */
        snprintf(l->volume, sizeof(l->volume), "%s", name);
        return;
    }
    size_t at = l->path_len[l->dir_depth - 1];
    size_t n = strlen(name);
    if (at + n + 1 > LTFS_PATH_MAX) {
        ltfs_fail(l, "directory path longer than %d bytes", LTFS_PATH_MAX);
        return;
    }
    memcpy(l->path + at, name, n);
    l->path[at + n] = '/';
    l->path_len[l->dir_depth] = at + n + 1;
}

static void emit_file(ltfs_t *l)
{
    char key[LTFS_PATH_MAX + LTFS_TEXT_MAX + 2];
    const char *bucket = l->opts ? l->opts->bucket : NULL;
    const char *volume = l->opts && l->opts->volume ? l->opts->volume : l->volume;
    size_t plen = l->path_len[l->dir_depth];
    snprintf(key, sizeof(key), "%.*s%s", (int)plen, l->path, l->file_name);
    char *k = key;
    char bucket_buf[LTFS_TEXT_MAX + 1];
    if (!bucket) { /* first-level directories are buckets */
        char *slash = strchr(key, '/');
        if (!slash) {
            ltfs_fail(l, "file '%s' is at the index root: give a bucket (--bucket)", key);
            return;
        }
        snprintf(bucket_buf, sizeof(bucket_buf), "%.*s", (int)(slash - key), key);
        bucket = bucket_buf;
        k = slash + 1;
    }
    if (!*volume) {
        ltfs_fail(l, "the index names no volume: give one (--volume)");
        return;
    }
    if (!l->file_has_extent && l->file_length > 0) {
        ltfs_fail(l, "file '%s' has %llu bytes but no extent", key,
                  (unsigned long long)l->file_length);
        return;
    }
    position_rec_t r = {.bucket = bucket, .key = k, .volume = volume, .size = l->file_length,
                        .position = l->first_position, .copy = 1, .file_seq = -1,
                        .mtime = l->file_mtime};
    if (l->file_length == 0) {
        /* An empty file occupies no tape: catalogue the object only. */
        si_error_t why;
        int64_t id;
        catalog_object_t o = {.bucket = bucket, .key = k, .size = 0, .mtime = l->file_mtime};
        if (import_settle(&l->im, l->err) < 0) {
            l->failed = 1;
            XML_StopParser(l->parser, XML_FALSE);
            return;
        }
        int created = catalog_object_put(l->im.cat, &o, &id, &why);
        if (created < 0)
            ltfs_fail(l, "%s", why.text);
        else
            l->im.stats->objects += (uint64_t)created;
        return;
    }
    l->im.line = (uint64_t)XML_GetCurrentLineNumber(l->parser);
    if (put_position(&l->im, &r, l->err) < 0) {
        l->failed = 1;
        XML_StopParser(l->parser, XML_FALSE);
        return;
    }
    l->im.stats->lines++;
}

static void XMLCALL on_end(void *data, const XML_Char *name)
{
    ltfs_t *l = data;
    /* expat may still report the end of the element whose start failed */
    if (l->failed || l->depth == 0)
        return;
    el_kind_t kind = l->stack[l->depth - 1];
    el_kind_t parent = parent_kind(l);
    if (l->text_too_long) {
        ltfs_fail(l, "<%s> text longer than %d bytes", name, LTFS_TEXT_MAX);
        return;
    }
    if (strcmp(name, "name") == 0 && parent == EL_DIRECTORY) {
        char decoded[LTFS_TEXT_MAX + 1];
        if (decode_name(l, decoded) == 0)
            directory_named(l, decoded);
    } else if (strcmp(name, "name") == 0 && parent == EL_FILE) {
        decode_name(l, l->file_name);
    } else if (strcmp(name, "length") == 0 && parent == EL_FILE) {
        parse_number(l, "length", &l->file_length);
    } else if (strcmp(name, "modifytime") == 0 && parent == EL_FILE) {
        l->file_mtime = parse_time(current_text(l));
    } else if (parent == EL_EXTENT) {
        if (strcmp(name, "fileoffset") == 0)
            parse_number(l, name, &l->ext_fileoffset);
        else if (strcmp(name, "startblock") == 0)
            parse_number(l, name, &l->ext_startblock);
        else if (strcmp(name, "byteoffset") == 0)
            parse_number(l, name, &l->ext_byteoffset);
        else if (strcmp(name, "bytecount") == 0)
            parse_number(l, name, &l->ext_bytecount);
        else if (strcmp(name, "partition") == 0)
            snprintf(l->ext_partition, sizeof(l->ext_partition), "%s", current_text(l));
    } else if (kind == EL_EXTENT) {
        if (strcmp(l->ext_partition, "b") != 0) {
            ltfs_fail(l, "file '%s' has an extent on partition '%s': only the data "
                      "partition 'b' is supported", l->file_name, l->ext_partition);
        } else if (l->ext_fileoffset == 0) {
            if (l->ext_startblock > (uint64_t)INT64_MAX / l->block_size)
                ltfs_fail(l, "startblock %llu out of range",
                          (unsigned long long)l->ext_startblock);
            l->first_position = l->ext_startblock * l->block_size + l->ext_byteoffset;
            l->file_has_extent = true;
        }
    } else if (kind == EL_FILE) {
        if (!l->file_name[0])
            ltfs_fail(l, "<file> without <name>");
        else
            emit_file(l);
    } else if (kind == EL_DIRECTORY) {
        l->dir_depth--;
    }
    l->depth--;
    l->text_len = 0;
}

/* Entity declarations are how "billion laughs" and external entity attacks
 * start; an LTFS index never needs one. */
static void XMLCALL on_entity_decl(void *data, const XML_Char *name, int is_param,
                                   const XML_Char *value, int value_len, const XML_Char *base,
                                   const XML_Char *system_id, const XML_Char *public_id,
                                   const XML_Char *notation)
{
    (void)is_param, (void)value, (void)value_len, (void)base, (void)system_id,
        (void)public_id, (void)notation;
    ltfs_fail(data, "entity declaration '%s' is not allowed in an LTFS index", name);
}

int catalog_import_ltfs(catalog_t *cat, const char *name, FILE *in,
                        const catalog_positions_opts_t *opts, catalog_import_stats_t *stats,
                        si_error_t *err)
{
    ltfs_t *l = calloc(1, sizeof(*l));
    if (!l)
        return si_errprintf(err, "out of memory");
    l->opts = opts;
    l->err = err;
    l->block_size = opts && opts->block_size ? opts->block_size : LTFS_DEFAULT_BLOCK;
    if (import_begin(&l->im, cat, name, stats, err) < 0) {
        free(l);
        return -1;
    }
    int rc = -1;
    l->parser = XML_ParserCreate("UTF-8");
    if (!l->parser) {
        si_errprintf(err, "out of memory");
        goto done;
    }
    XML_SetUserData(l->parser, l);
    XML_SetElementHandler(l->parser, on_start, on_end);
    XML_SetCharacterDataHandler(l->parser, on_text);
    XML_SetEntityDeclHandler(l->parser, on_entity_decl);
    XML_SetParamEntityParsing(l->parser, XML_PARAM_ENTITY_PARSING_NEVER);
    char buf[65536];
    for (;;) {
        size_t n = fread(buf, 1, sizeof(buf), in);
        bool last = n < sizeof(buf);
        if (XML_Parse(l->parser, buf, (int)n, last) == XML_STATUS_ERROR) {
            if (!l->failed) {
                l->im.line = (uint64_t)XML_GetCurrentLineNumber(l->parser);
                import_fail(&l->im, err, "malformed XML: %s",
                            XML_ErrorString(XML_GetErrorCode(l->parser)));
            }
            goto done;
        }
        if (l->failed)
            goto done;
        if (last)
            break;
    }
    if (ferror(in)) {
        si_errprintf(err, "%s: read error", name);
        goto done;
    }
    rc = 0;
done:
    if (l->parser)
        XML_ParserFree(l->parser);
    rc = import_end(&l->im, rc, "import-ltfs", err);
    free(l);
    return rc;
}
