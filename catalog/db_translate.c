/* SQLite's spelling of the catalog's SQL, translated once for PostgreSQL
 * (statements at prepare, the schema's DDL). Pure text work, in a file of
 * its own: both db.c and the PostgreSQL engine call it, and it calls
 * neither. */
#include "config.h"
#include "catalog/db.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"

/* ---- SQLite's spelling, translated for PostgreSQL --------------------- */

typedef struct {
    char *buf;
    size_t len, cap;
    bool failed;
} sbuf_t;

static void sb_add(sbuf_t *b, const char *p, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *nb = realloc(b->buf, cap);
        if (!nb) {
            b->failed = true;
            return;
        }
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, p, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

static void sb_str(sbuf_t *b, const char *s)
{
    sb_add(b, s, strlen(s));
}

static bool word_at(const char *p, const char *start, const char *word)
{
    size_t n = strlen(word);
    if (strncasecmp(p, word, n) != 0)
        return false;
    if (p > start && (isalnum((unsigned char)p[-1]) || p[-1] == '_' || p[-1] == '.'))
        return false;
    return !(isalnum((unsigned char)p[n]) || p[n] == '_');
}

/* Copies a quoted literal or identifier starting at p; returns past it. */
static const char *copy_quoted(sbuf_t *b, const char *p)
{
    char q = *p;
    const char *start = p++;
    while (*p) {
        if (*p == q) {
            if (p[1] == q) {
                p += 2;
                continue;
            }
            p++;
            break;
        }
        p++;
    }
    sb_add(b, start, (size_t)(p - start));
    return p;
}

char *db_translate_to_pg(const char *sql, int *nparams, char ***names_out)
{
    sbuf_t b = {0};
    char **names = NULL;
    size_t names_cap = 0;
    int max = 0;
    bool or_ignore = false;
    /* parentheses open since a json_each( (0: none), whose list is a
     * bigint[] here (db_bind_int64_list) */
    int list_depth = 0;
    const char *p = sql;
    while (*p) {
        if (*p == '\'' || *p == '"') {
            p = copy_quoted(&b, p);
        } else if (list_depth == 0 && word_at(p, sql, "json_each") && p[9] == '(') {
            sb_str(&b, "unnest(CAST(");
            p += 10;
            list_depth = 1;
        } else if (list_depth > 0 && (*p == '(' || *p == ')')) {
            list_depth += *p == '(' ? 1 : -1;
            sb_str(&b, list_depth ? (*p == '(' ? "(" : ")") : " AS bigint[])) AS value");
            p++;
        } else if (p[0] == '-' && p[1] == '-') {
            const char *e = strchr(p, '\n');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            sb_add(&b, p, n);
            p += n;
        } else if (p[0] == ':' && p[1] == ':') {
            sb_add(&b, p, 2); /* a PostgreSQL cast in PostgreSQL-only SQL */
            p += 2;
        } else if (*p == '?' || ((*p == ':' || *p == '@') &&
                                 (isalpha((unsigned char)p[1]) || p[1] == '_'))) {
            int n;
            const char *name = NULL, *name_end = NULL;
            if (*p == '?') {
                p++;
                if (isdigit((unsigned char)*p))
                    n = (int)strtol(p, (char **)&p, 10);
                else
                    n = max + 1;
            } else {
                name = p;
                name_end = p + 1;
                while (isalnum((unsigned char)*name_end) || *name_end == '_')
                    name_end++;
                size_t len = (size_t)(name_end - name);
                n = max + 1;
                for (int i = 0; i < max; i++)
                    if (names[i] && strlen(names[i]) == len && strncmp(names[i], name, len) == 0)
                        n = i + 1;
                p = name_end;
            }
            if (n > max) {
                if (si_array_grow((void **)&names, &names_cap, (size_t)n, sizeof(*names)) < 0) {
                    b.failed = true;
                    break;
                }
                for (int i = max; i < n; i++)
                    names[i] = NULL;
                max = n;
            }
            if (name && !names[n - 1] &&
                !(names[n - 1] = strndup(name, (size_t)(name_end - name)))) {
                b.failed = true;
                break;
            }
            char num[16];
            snprintf(num, sizeof(num), "$%d", n);
            sb_str(&b, num);
        } else if (word_at(p, sql, "INSERT") && strncasecmp(p, "INSERT OR IGNORE", 16) == 0) {
            sb_str(&b, "INSERT");
            p += 16;
            or_ignore = true;
        } else if (word_at(p, sql, "IS NOT") && p[6] == ' ' &&
                   (p[7] == '?' || p[7] == ':' || p[7] == '@')) {
            /* SQLite's "x IS NOT ?" compares NULLs as values */
            sb_str(&b, "IS DISTINCT FROM ");
            p += 7;
        } else if (word_at(p, sql, "CROSS JOIN")) {
            /* SQLite's "CROSS JOIN ... ON" fixes its join order; PostgreSQL
             * plans the order itself and takes no ON after CROSS JOIN. */
            sb_str(&b, "JOIN");
            p += 10;
        } else if (word_at(p, sql, "temp") && p[4] == '.') {
            sb_str(&b, "pg_temp.");
            p += 5;
        } else {
            sb_add(&b, p, 1);
            p++;
        }
    }
    if (or_ignore && !b.failed) {
        /* ON CONFLICT goes before a RETURNING clause, else at the end. */
        char *ret = NULL;
        for (char *q = b.buf; (q = strcasestr(q, "RETURNING")); q++)
            if (word_at(q, b.buf, "RETURNING"))
                ret = q;
        if (ret) {
            size_t at = (size_t)(ret - b.buf);
            char *tail = strdup(ret);
            if (!tail) {
                b.failed = true;
            } else {
                b.len = at;
                sb_str(&b, "ON CONFLICT DO NOTHING ");
                sb_str(&b, tail);
                free(tail);
            }
        } else {
            while (b.len && (b.buf[b.len - 1] == ';' || isspace((unsigned char)b.buf[b.len - 1])))
                b.buf[--b.len] = '\0';
            sb_str(&b, " ON CONFLICT DO NOTHING");
        }
    }
    if (b.failed || !b.buf) {
        free(b.buf);
        for (int i = 0; i < max; i++)
            free(names[i]);
        free(names);
        return b.failed ? NULL : strdup("");
    }
    *nparams = max;
    if (names_out) {
        *names_out = names;
    } else {
        for (int i = 0; i < max; i++)
            free(names[i]);
        free(names);
    }
    return b.buf;
}

char *db_translate_ddl_to_pg(const char *ddl)
{
    sbuf_t b = {0};
    const char *p = ddl;
    while (*p) {
        if (*p == '\'' || *p == '"') {
            p = copy_quoted(&b, p);
        } else if (word_at(p, ddl, "id INTEGER PRIMARY KEY")) {
            sb_str(&b, "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY");
            p += strlen("id INTEGER PRIMARY KEY");
            /* an identity never hands out an id again, as AUTOINCREMENT */
            if (*p == ' ' && word_at(p + 1, p, "AUTOINCREMENT"))
                p += strlen(" AUTOINCREMENT");
        } else if (word_at(p, ddl, "INTEGER")) {
            sb_str(&b, "BIGINT");
            p += 7;
        } else if (word_at(p, ddl, "TEXT")) {
            /* byte order, as SQLite compares (S3 lists keys in it), and
             * whatever the server's default collation */
            sb_str(&b, "TEXT COLLATE \"C\"");
            p += 4;
        } else if (word_at(p, ddl, "REAL")) {
            sb_str(&b, "DOUBLE PRECISION");
            p += 4;
        } else if (word_at(p, ddl, "WITHOUT ROWID")) {
            p += strlen("WITHOUT ROWID");
        } else {
            sb_add(&b, p, 1);
            p++;
        }
    }
    if (b.failed) {
        free(b.buf);
        return NULL;
    }
    return b.buf ? b.buf : strdup("");
}
