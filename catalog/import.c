/* The format readers of tape positions (CSV, JSON lines; LTFS indexes in
 * ltfs.c) and dataset manifests, over the import machinery (importer.c).
 * Each import is one transaction: the first bad line rolls everything back. */
#include "config.h"
#include "catalog/internal.h"
#include "catalog/import.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/checksum.h"
#include "common/text.h"

#define COPY_MAX 255

static long read_line(import_t *im, FILE *in, si_error_t *err)
{
    if (!fgets(im->buf, IMPORT_LINE_MAX + 2, in)) {
        if (ferror(in))
            return import_fail(im, err, "read error: %s", strerror(errno)), -2;
        return -1;
    }
    im->line++;
    size_t len = strlen(im->buf);
    if (len == IMPORT_LINE_MAX + 1 && im->buf[len - 1] != '\n')
        return import_fail(im, err, "line is longer than %d bytes", IMPORT_LINE_MAX), -2;
    /* fgets stops at NUL silently; detect an embedded NUL by the line's end */
    if (len == 0 || (im->buf[len - 1] != '\n' && !feof(in)))
        return import_fail(im, err, "line contains a NUL byte"), -2;
    if (len && im->buf[len - 1] == '\n')
        im->buf[--len] = '\0';
    if (len && im->buf[len - 1] == '\r')
        im->buf[--len] = '\0';
    if (!si_utf8_valid(im->buf, len))
        return import_fail(im, err, "line is not valid UTF-8"), -2;
    return (long)len;
}

static bool blank_or_comment(const char *s)
{
    s += strspn(s, " \t");
    return *s == '\0' || *s == '#';
}

/* ---- CSV: bucket,key,size,volume,position,copy,checksum ---------------- */

#define CSV_FIELDS 7
static const char csv_header[] = "bucket,key,size,volume,position,copy,checksum";

/* Splits a line in place (RFC 4180 quoting: "a,b" and "" for a quote). */
static int csv_split(import_t *im, char *line, char **fields, int *nfields, si_error_t *err)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == CSV_FIELDS)
            return import_fail(im, err, "too many fields (want %d: %s)", CSV_FIELDS, csv_header);
        char *out = p;
        fields[n++] = p;
        if (*p == '"') {
            char *q = p + 1;
            for (;;) {
                if (*q == '\0')
                    return import_fail(im, err, "unterminated quoted field %d", n);
                if (*q == '"' && q[1] == '"') {
                    *out++ = '"';
                    q += 2;
                } else if (*q == '"') {
                    q++;
                    break;
                } else {
                    *out++ = *q++;
                }
            }
            if (*q != ',' && *q != '\0')
                return import_fail(im, err, "text after closing quote in field %d", n);
            char end = *q;
            *out = '\0';
            if (end == '\0')
                break;
            p = q + 1;
        } else {
            char *comma = strchr(p, ',');
            if (!comma)
                break;
            *comma = '\0';
            p = comma + 1;
        }
    }
    *nfields = n;
    return 0;
}

static int parse_u64_field(import_t *im, const char *what, const char *text, uint64_t *out,
                           si_error_t *err)
{
    if (si_parse_u64(text, out) < 0 || *out > (uint64_t)INT64_MAX)
        return import_fail(im, err, "%s '%.40s' is not a non-negative integer", what, text);
    return 0;
}

static int copy_number(import_t *im, uint64_t v, int *copy, si_error_t *err)
{
    if (v < 1 || v > COPY_MAX)
        return import_fail(im, err, "copy %llu must be between 1 and %d", (unsigned long long)v,
                           COPY_MAX);
    *copy = (int)v;
    return 0;
}

static int import_csv(import_t *im, FILE *in, si_error_t *err)
{
    long len;
    bool first = true;
    while ((len = read_line(im, in, err)) >= 0) {
        if (blank_or_comment(im->buf))
            continue;
        if (first && strcmp(im->buf, csv_header) == 0) {
            first = false;
            continue;
        }
        first = false;
        char *f[CSV_FIELDS];
        int n = 0;
        if (csv_split(im, im->buf, f, &n, err) < 0)
            return -1;
        if (n != CSV_FIELDS)
            return import_fail(im, err, "%d fields, want %d (%s)", n, CSV_FIELDS, csv_header);
        position_rec_t r = {.bucket = f[0], .key = f[1], .volume = f[3],
                            .checksum = *f[6] ? f[6] : NULL, .file_seq = -1};
        uint64_t copy;
        if (parse_u64_field(im, "size", f[2], &r.size, err) < 0 ||
            parse_u64_field(im, "position", f[4], &r.position, err) < 0 ||
            parse_u64_field(im, "copy", f[5], &copy, err) < 0 ||
            copy_number(im, copy, &r.copy, err) < 0)
            return -1;
        if (put_position(im, &r, err) < 0)
            return -1;
        im->stats->lines++;
    }
    return len == -1 ? 0 : -1;
}

/* ---- JSON lines ------------------------------------------------------- */

static int json_u64(import_t *im, json_t *obj, const char *name, bool required, uint64_t *out,
                    si_error_t *err)
{
    json_t *v = json_object_get(obj, name);
    if (!v) {
        if (required)
            return import_fail(im, err, "missing \"%s\"", name);
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return import_fail(im, err, "\"%s\" must be a non-negative integer", name);
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

static int json_str(import_t *im, json_t *obj, const char *name, bool required,
                    const char **out, si_error_t *err)
{
    json_t *v = json_object_get(obj, name);
    if (!v) {
        if (required)
            return import_fail(im, err, "missing \"%s\"", name);
        return 0;
    }
    if (!json_is_string(v))
        return import_fail(im, err, "\"%s\" must be a string", name);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return import_fail(im, err, "\"%s\" contains a NUL character", name);
    *out = json_string_value(v);
    return 0;
}

static int import_jsonl(import_t *im, FILE *in, si_error_t *err)
{
    static const char *const known[] = {"bucket", "key", "size", "volume", "position", "copy",
                                        "checksum", "file_seq", "mtime", "etag", NULL};
    long len;
    while ((len = read_line(im, in, err)) >= 0) {
        if (blank_or_comment(im->buf))
            continue;
        json_error_t jerr;
        json_t *obj = json_loadb(im->buf, (size_t)len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL,
                                 &jerr);
        if (!obj)
            return import_fail(im, err, "invalid JSON at column %d: %s", jerr.column, jerr.text);
        int rc = -1;
        position_rec_t r = {.copy = 1, .file_seq = -1};
        uint64_t copy = 1, file_seq = UINT64_MAX, mtime = 0;
        const char *name;
        json_t *value;
        if (!json_is_object(obj)) {
            import_fail(im, err, "each line must be a JSON object");
            goto done;
        }
        json_object_foreach(obj, name, value) {
            size_t i;
            for (i = 0; known[i] && strcmp(known[i], name) != 0; i++)
                ;
            if (!known[i]) {
                import_fail(im, err, "unknown member \"%.60s\"", name);
                goto done;
            }
        }
        if (json_str(im, obj, "bucket", true, &r.bucket, err) < 0 ||
            json_str(im, obj, "key", true, &r.key, err) < 0 ||
            json_u64(im, obj, "size", true, &r.size, err) < 0 ||
            json_str(im, obj, "volume", true, &r.volume, err) < 0 ||
            json_u64(im, obj, "position", true, &r.position, err) < 0 ||
            json_u64(im, obj, "copy", false, &copy, err) < 0 ||
            copy_number(im, copy, &r.copy, err) < 0 ||
            json_str(im, obj, "checksum", false, &r.checksum, err) < 0 ||
            json_u64(im, obj, "file_seq", false, &file_seq, err) < 0 ||
            json_u64(im, obj, "mtime", false, &mtime, err) < 0 ||
            json_str(im, obj, "etag", false, &r.etag, err) < 0)
            goto done;
        if (r.size > (uint64_t)INT64_MAX || r.position > (uint64_t)INT64_MAX) {
            import_fail(im, err, "size or position out of range");
            goto done;
        }
        r.file_seq = file_seq == UINT64_MAX ? -1 : (int64_t)file_seq;
        r.mtime = (int64_t)mtime;
        if (put_position(im, &r, err) < 0)
            goto done;
        im->stats->lines++;
        rc = 0;
    done:
        json_decref(obj);
        if (rc < 0)
            return -1;
    }
    return len == -1 ? 0 : -1;
}

static catalog_format_t guess_format(const char *name, FILE *in)
{
    const char *dot = strrchr(name, '.');
    if (dot && strcmp(dot, ".csv") == 0)
        return CATALOG_FORMAT_CSV;
    if (dot && (strcmp(dot, ".jsonl") == 0 || strcmp(dot, ".json") == 0 ||
                strcmp(dot, ".ndjson") == 0))
        return CATALOG_FORMAT_JSONL;
    if (dot && (strcmp(dot, ".xml") == 0 || strcmp(dot, ".schema") == 0))
        return CATALOG_FORMAT_LTFS;
    int c;
    while ((c = getc(in)) == ' ' || c == '\t' || c == '\n' || c == '\r')
        ;
    if (c != EOF)
        ungetc(c, in);
    return c == '{' ? CATALOG_FORMAT_JSONL : c == '<' ? CATALOG_FORMAT_LTFS : CATALOG_FORMAT_CSV;
}

int catalog_import_positions(catalog_t *cat, const char *name, FILE *in,
                             const catalog_positions_opts_t *opts,
                             catalog_import_stats_t *stats, si_error_t *err)
{
    catalog_format_t format = opts ? opts->format : CATALOG_FORMAT_AUTO;
    if (format == CATALOG_FORMAT_AUTO)
        format = guess_format(name, in);
    if (format == CATALOG_FORMAT_LTFS)
        return catalog_import_ltfs(cat, name, in, opts, stats, err);
    import_t im;
    if (import_begin(&im, cat, name, stats, err) < 0)
        return -1;
    int rc = format == CATALOG_FORMAT_CSV ? import_csv(&im, in, err) : import_jsonl(&im, in, err);
    return import_end(&im, rc, "import-positions", err);
}

/* ---- dataset manifests -------------------------------------------------- */

static int define_dataset(import_t *im, const catalog_dataset_attrs_t *a, int64_t *id,
                          si_error_t *err)
{
    db_stmt_t *s = catalog_prepare(im->cat, "SELECT id FROM datasets WHERE name = ?1", err);
    if (!s)
        return -1;
    db_bind_text(s, 1, a->name, -1);
    int rc = db_step(s);
    int64_t existing = rc == DB_ROW ? db_column_int64(s, 0) : 0;
    db_finalize(s);
    if (rc != DB_ROW && rc != DB_DONE)
        return catalog_sqlerr(im->cat, err, "looking up dataset");
    if (existing && !a->replace)
        return si_errprintf(err, "dataset '%s' already exists (use --replace to redefine it)",
                            a->name);
    /* the totals are recomputed when the import ends */
    const char *sql = existing
        ? "UPDATE datasets SET owner_uid = ?2, owner_gid = ?3, mode = ?4, description = ?5,"
          " stat_objects = NULL, stat_bytes = NULL, stat_volumes = NULL WHERE name = ?1"
        : "INSERT INTO datasets(name, owner_uid, owner_gid, mode, description, created)"
          " VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
    s = catalog_prepare(im->cat, sql, err);
    if (!s)
        return -1;
    db_bind_text(s, 1, a->name, -1);
    db_bind_int64(s, 2, a->owner_uid);
    db_bind_int64(s, 3, a->owner_gid);
    db_bind_int(s, 4, (int)(a->mode & 0777));
    if (a->description)
        db_bind_text(s, 5, a->description, -1);
    if (!existing)
        db_bind_int64(s, 6, time(NULL));
    rc = db_step(s);
    db_finalize(s);
    if (rc != DB_DONE)
        return catalog_sqlerr(im->cat, err, "defining dataset");
    *id = existing ? existing : db_last_insert_id(im->cat->db);
    if (existing) {
        s = catalog_prepare(im->cat, "DELETE FROM dataset_members WHERE dataset_id = ?1", err);
        if (!s)
            return -1;
        db_bind_int64(s, 1, existing);
        rc = db_step(s);
        db_finalize(s);
        if (rc != DB_DONE)
            return catalog_sqlerr(im->cat, err, "clearing dataset members");
    }
    return 0;
}

typedef struct {
    db_stmt_t *seen_insert, *seen_find, *add_key, *add_prefix, *add_bucket, *count_prefix;
} manifest_stmts_t;

static void manifest_stmts_free(manifest_stmts_t *m)
{
    db_finalize(m->seen_insert);
    db_finalize(m->seen_find);
    db_finalize(m->add_key);
    db_finalize(m->add_prefix);
    db_finalize(m->add_bucket);
    db_finalize(m->count_prefix);
}

static int manifest_stmts_init(catalog_t *cat, manifest_stmts_t *m, si_error_t *err)
{
    memset(m, 0, sizeof(*m));
    if (catalog_exec(cat, "CREATE TEMP TABLE IF NOT EXISTS manifest_lines"
                          "(entry TEXT PRIMARY KEY, line INTEGER NOT NULL);"
                          "DELETE FROM manifest_lines", err) < 0)
        return -1;
    if (!(m->seen_insert = catalog_prepare(cat, "INSERT OR IGNORE INTO manifest_lines"
                                                "(entry, line) VALUES (?1, ?2)", err)) ||
        !(m->seen_find = catalog_prepare(cat, "SELECT line FROM manifest_lines"
                                              " WHERE entry = ?1", err)) ||
        !(m->add_key = catalog_prepare(cat, "INSERT OR IGNORE INTO dataset_members"
                                            " SELECT ?1, id FROM objects"
                                            " WHERE bucket = ?2 AND key = ?3", err)) ||
        !(m->add_prefix = catalog_prepare(cat, "INSERT OR IGNORE INTO dataset_members"
                                               " SELECT ?1, id FROM objects WHERE bucket = ?2"
                                               " AND key >= ?3 AND key < ?4", err)) ||
        !(m->add_bucket = catalog_prepare(cat, "INSERT OR IGNORE INTO dataset_members"
                                               " SELECT ?1, id FROM objects WHERE bucket = ?2",
                                          err)) ||
        !(m->count_prefix = catalog_prepare(cat, "SELECT EXISTS (SELECT 1 FROM objects"
                                                 " WHERE bucket = ?1 AND key >= ?2"
                                                 " AND key < ?3)", err))) {
        manifest_stmts_free(m);
        return -1;
    }
    return 0;
}

static int step_done(catalog_t *cat, db_stmt_t *s, si_error_t *err)
{
    int rc = db_step(s);
    db_reset(s);
    return rc == DB_DONE ? 0 : catalog_sqlerr(cat, err, "adding dataset members");
}

static int manifest_line(import_t *im, manifest_stmts_t *m, int64_t dataset_id, char *entry,
                         si_error_t *err)
{
    si_error_t why;
    /* A repeated line is a mistake in the manifest, not a no-op. */
    db_bind_text(m->seen_insert, 1, entry, -1);
    db_bind_int64(m->seen_insert, 2, im->line);
    if (step_done(im->cat, m->seen_insert, err) < 0)
        return -1;
    if (db_changes(im->cat->db) == 0) {
        db_bind_text(m->seen_find, 1, entry, -1);
        long long first = db_step(m->seen_find) == DB_ROW
                              ? db_column_int64(m->seen_find, 0) : 0;
        db_reset(m->seen_find);
        return import_fail(im, err, "'%s' repeats line %lld", entry, first);
    }
    char *slash = strchr(entry, '/');
    if (!slash)
        return import_fail(im, err, "'%s' is not bucket/key or bucket/prefix/", entry);
    *slash = '\0';
    const char *bucket = entry, *key = slash + 1;
    size_t keylen = strlen(key);
    if (si_bucket_check(bucket, strlen(bucket), &why) < 0)
        return import_fail(im, err, "%s", why.text);
    db_t *db = im->cat->db;
    if (keylen == 0) { /* "bucket/": the whole bucket */
        db_bind_int64(m->add_bucket, 1, dataset_id);
        db_bind_text(m->add_bucket, 2, bucket, -1);
        if (step_done(im->cat, m->add_bucket, err) < 0)
            return -1;
        if (db_changes(db) == 0)
            return import_fail(im, err, "bucket '%s' has no catalogued objects", bucket);
        return 0;
    }
    if (si_key_check(key, keylen, &why) < 0)
        return import_fail(im, err, "%s", why.text);
    if (key[keylen - 1] != '/') {
        db_bind_int64(m->add_key, 1, dataset_id);
        db_bind_text(m->add_key, 2, bucket, -1);
        db_bind_text(m->add_key, 3, key, -1);
        if (step_done(im->cat, m->add_key, err) < 0)
            return -1;
        if (db_changes(db) == 0) {
            int64_t id;
            if (catalog_object_lookup(im->cat, bucket, key, &id, &why) < 0)
                return import_fail(im, err, "%s", why.text);
        }
        return 0;
    }
    /* Prefix: the key range [prefix, prefix with its last byte + 1). */
    char *upper = strdup(key);
    if (!upper)
        return si_errprintf(err, "out of memory");
    upper[keylen - 1]++;
    db_bind_int64(m->add_prefix, 1, dataset_id);
    db_bind_text(m->add_prefix, 2, bucket, -1);
    db_bind_text(m->add_prefix, 3, key, -1);
    db_bind_text(m->add_prefix, 4, upper, -1);
    int rc = step_done(im->cat, m->add_prefix, err);
    if (rc == 0 && db_changes(db) == 0) {
        db_bind_text(m->count_prefix, 1, bucket, -1);
        db_bind_text(m->count_prefix, 2, key, -1);
        db_bind_text(m->count_prefix, 3, upper, -1);
        bool any = db_step(m->count_prefix) == DB_ROW &&
                   db_column_int(m->count_prefix, 0);
        db_reset(m->count_prefix);
        if (!any)
            rc = import_fail(im, err, "prefix %s/%s matches no catalogued object", bucket, key);
    }
    free(upper);
    return rc;
}

int catalog_import_manifest(catalog_t *cat, const catalog_dataset_attrs_t *attrs,
                            const char *name, FILE *in, catalog_import_stats_t *stats,
                            si_error_t *err)
{
    if (si_dataset_check(attrs->name, err) < 0)
        return -1;
    if (attrs->mode > 0777)
        return si_errprintf(err, "dataset mode %o is not a permission mode (0 to 0777)",
                            attrs->mode);
    import_t im;
    if (import_begin(&im, cat, name, stats, err) < 0)
        return -1;
    manifest_stmts_t m;
    int64_t dataset_id = 0;
    int rc = -1;
    if (manifest_stmts_init(cat, &m, err) < 0)
        return import_end(&im, -1, NULL, err);
    if (define_dataset(&im, attrs, &dataset_id, err) < 0)
        goto done;
    long len;
    while ((len = read_line(&im, in, err)) >= 0) {
        char *entry = im.buf + strspn(im.buf, " \t");
        if (*entry == '\0' || *entry == '#')
            continue;
        char *end = entry + strlen(entry);
        while (end > entry && (end[-1] == ' ' || end[-1] == '\t'))
            *--end = '\0';
        if (manifest_line(&im, &m, dataset_id, entry, err) < 0)
            goto done;
        im.stats->lines++;
    }
    if (len != -1)
        goto done;
    db_stmt_t *s = catalog_prepare(cat, "SELECT COUNT(*) FROM dataset_members"
                                           " WHERE dataset_id = ?1", err);
    if (!s)
        goto done;
    db_bind_int64(s, 1, dataset_id);
    if (db_step(s) == DB_ROW)
        im.stats->members = (uint64_t)db_column_int64(s, 0);
    db_finalize(s);
    if (im.stats->members == 0) {
        si_errprintf(err, "%s: manifest names no objects", name);
        goto done;
    }
    rc = 0;
done:
    manifest_stmts_free(&m);
    return import_end(&im, rc, "import-manifest", err);
}
