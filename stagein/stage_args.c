#include "config.h"
#include "stagein/stage_args.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strbuf.h"
#include "common/text.h"

/* A manifest is sent whole in the request body; stageind's own body limit
 * (1 MiB by default) is the real bound, this one only stops runaway input. */
#define MANIFEST_LIMIT (64u << 20)

static int64_t unit_seconds(char unit)
{
    switch (unit) {
    case 's':
        return 1;
    case 'm':
        return 60;
    case 'h':
        return 3600;
    case 'd':
        return 86400;
    case 'w':
        return 7 * 86400;
    default:
        return 0;
    }
}

int stage_parse_duration(const char *text, int64_t *seconds, si_error_t *err)
{
    const char *p = text;
    int64_t total = 0;
    if (!*p)
        goto error;
    while (*p) {
        if (!isdigit((unsigned char)*p))
            goto error;
        errno = 0;
        char *end;
        unsigned long long n = strtoull(p, &end, 10);
        int64_t unit = 1;
        if (*end) {
            unit = unit_seconds(*end);
            if (!unit)
                goto error;
            end++;
        } else if (p != text) {
            goto error;   /* "1h30": the last number needs its unit */
        }
        if (errno || n > (unsigned long long)(INT64_MAX / unit) ||
            total > INT64_MAX - (int64_t)n * unit)
            return si_errprintf(err, "duration '%s' is too large", text);
        total += (int64_t)n * unit;
        p = end;
    }
    if (total <= 0)
        return si_errprintf(err, "duration '%s' must be more than zero", text);
    *seconds = total;
    return 0;
error:
    return si_errprintf(err, "bad duration '%s' (examples: 90, 90s, 15m, 2h, 1d, 1h30m)", text);
}

/* "YYYY-MM-DD[ T]HH:MM[:SS][Z]" */
static int parse_date(const char *text, int64_t *out)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *p = strptime(text, "%Y-%m-%d", &tm);
    if (!p || (*p != 'T' && *p != ' '))
        return -1;
    const char *q = strptime(p + 1, "%H:%M:%S", &tm);
    if (!q)
        q = strptime(p + 1, "%H:%M", &tm);
    if (!q)
        return -1;
    bool utc = *q == 'Z';
    if (q[utc ? 1 : 0] != '\0')
        return -1;
    int mday = tm.tm_mday, mon = tm.tm_mon;
    tm.tm_isdst = -1;
    time_t t = utc ? timegm(&tm) : mktime(&tm);
    /* mktime normalises 2026-02-30 into March: refuse what it had to fix */
    if (t == (time_t)-1 || tm.tm_mday != mday || tm.tm_mon != mon)
        return -1;
    *out = (int64_t)t;
    return 0;
}

int stage_parse_deadline(const char *text, time_t now, int64_t *deadline, si_error_t *err)
{
    int64_t when;
    if (text[0] == '+') {
        int64_t d;
        if (stage_parse_duration(text + 1, &d, err) < 0)
            return si_errprefix(err, "deadline '%s'", text);
        if (d > INT64_MAX - (int64_t)now)
            return si_errprintf(err, "deadline '%s' is too far away", text);
        when = (int64_t)now + d;
    } else if (text[0] == '@' || (text[0] && strspn(text, "0123456789") == strlen(text))) {
        const char *digits = text + (text[0] == '@');
        char *end;
        errno = 0;
        long long v = strtoll(digits, &end, 10);
        if (!isdigit((unsigned char)*digits) || *end || errno)
            return si_errprintf(err, "bad deadline '%s': unix seconds must be digits", text);
        when = v;
    } else if (parse_date(text, &when) < 0) {
        return si_errprintf(err, "bad deadline '%s' (examples: +2h, 2026-03-01T08:00,"
                                 " 2026-03-01 08:00:00Z, @1795965067)", text);
    }
    if (when < (int64_t)now)
        return si_errprintf(err, "deadline '%s' is in the past", text);
    *deadline = when;
    return 0;
}

int stage_parse_priority(const char *text, int *priority, si_error_t *err)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (!*text || *end || errno || isspace((unsigned char)*text))
        return si_errprintf(err, "bad priority '%s': an integer from -1000 to 1000", text);
    if (v < -1000 || v > 1000)
        return si_errprintf(err, "priority %ld is out of range (-1000 to 1000)", v);
    *priority = (int)v;
    return 0;
}

static json_t *string_array(const char *const *items, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        if (json_array_append_new(a, json_string(items[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

int stage_parse_user(const char *text, int64_t *uid, int64_t *gid, si_error_t *err)
{
    const char *colon = strchr(text, ':');
    char uid_text[16];
    uint64_t u, g;
    size_t n = colon ? (size_t)(colon - text) : 0;
    if (!colon || n == 0 || n >= sizeof(uid_text))
        return si_errprintf(err, "'%.40s' is not UID:GID", text);
    memcpy(uid_text, text, n);
    uid_text[n] = '\0';
    if (si_parse_u64(uid_text, &u) < 0 || si_parse_u64(colon + 1, &g) < 0 ||
        u >= UINT32_MAX || g >= UINT32_MAX)
        return si_errprintf(err, "'%.40s' is not UID:GID (numbers below %u)", text, UINT32_MAX);
    *uid = (int64_t)u;
    *gid = (int64_t)g;
    return 0;
}

json_t *stage_request_body(const stage_opts_t *o, si_error_t *err)
{
    if (o->ndatasets == 0 && o->nfiles == 0 && !o->manifest) {
        si_errprintf(err, "nothing to stage: name a DATASET, --file BUCKET/KEY or --manifest FILE");
        return NULL;
    }
    json_t *body = json_object();
    bool built = body != NULL;
    if (built && o->ndatasets)
        built = json_object_set_new(body, "datasets", string_array(o->datasets, o->ndatasets)) == 0;
    if (built && o->nfiles)
        built = json_object_set_new(body, "files", string_array(o->files, o->nfiles)) == 0;
    if (built && o->manifest)
        built = json_object_set_new(body, "manifest", json_string(o->manifest)) == 0;
    if (built && o->job)
        built = json_object_set_new(body, "job", json_string(o->job)) == 0;
    if (built && o->has_priority)
        built = json_object_set_new(body, "priority", json_integer(o->priority)) == 0;
    if (built && o->deadline)
        built = json_object_set_new(body, "deadline", json_integer(o->deadline)) == 0;
    if (built && o->pin_lifetime)
        built = json_object_set_new(body, "pin_lifetime", json_integer(o->pin_lifetime)) == 0;
    if (built && o->for_user)
        built = json_object_set_new(body, "uid", json_integer(o->uid)) == 0 &&
                json_object_set_new(body, "gid", json_integer(o->gid)) == 0;
    if (!built) {
        /* json_string() refuses text that is not UTF-8 */
        si_errprintf(err, "cannot build the request: a name is not valid UTF-8");
        json_decref(body);
        return NULL;
    }
    return body;
}

char *stage_read_manifest(const char *path, si_error_t *err)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (!f) {
        si_errprintf(err, "manifest %s: %s", path, strerror(errno));
        return NULL;
    }
    si_strbuf_t text;
    si_strbuf_init(&text, MANIFEST_LIMIT);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        if (!si_strbuf_append(&text, buf, n))
            break;
    bool read_error = ferror(f);
    if (f != stdin)
        fclose(f);
    if (read_error || text.failed) {
        if (read_error)
            si_errprintf(err, "manifest %s: read error", path);
        else
            si_errprintf(err, "manifest %s is larger than %u MiB", path, MANIFEST_LIMIT >> 20);
        si_strbuf_free(&text);
        return NULL;
    }
    if (strlen(si_strbuf_str(&text)) != text.len) {
        si_strbuf_free(&text);
        si_errprintf(err, "manifest %s contains a NUL byte: not a text file", path);
        return NULL;
    }
    char *out = si_strbuf_take(&text);
    if (!out && !(out = strdup("")))
        si_errprintf(err, "out of memory");
    return out;
}
