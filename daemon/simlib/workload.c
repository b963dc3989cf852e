/* The workload text format (doc/workload-format.md): one statement a line,
 * "#" comments, errors as FILE:LINE: message. */
#include "config.h"
#include "daemon/simlib/workload.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/array.h"

typedef struct {
    workload_t *w;
    const char *name;
    int line;
    si_error_t *err;
    size_t cap_files, cap_requests, cap_req_files;
    uint64_t *sorted_ids;     /* built at the first request */
    size_t *sorted_idx;
    bool files_closed;
    int last_volume;
} parser_t;

static int perr(parser_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser_t *p, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return si_errprintf(p->err, "%s:%d: %s", p->name, p->line, msg);
}

/* "key=value" -> value if the word has that key. */
static const char *kv(const char *word, const char *key)
{
    size_t n = strlen(key);
    return strncmp(word, key, n) == 0 && word[n] == '=' ? word + n + 1 : NULL;
}

static int parse_u64(parser_t *p, const char *s, const char *what, uint64_t *out)
{
    if (si_parse_u64(s, out) < 0)
        return perr(p, "%s: '%s' is not a non-negative integer", what, s);
    return 0;
}

/* A number >= 0 (seconds, metres). */
static int parse_seconds(parser_t *p, const char *s, const char *what, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v) || v < 0)
        return perr(p, "%s: '%s' is not a number >= 0", what, s);
    *out = v;
    return 0;
}

static int volume_index(parser_t *p, const char *label, size_t len)
{
    simlib_config_t *c = &p->w->lib;
    if (p->last_volume >= 0 && strlen(c->volumes[p->last_volume].label) == len &&
        strncmp(c->volumes[p->last_volume].label, label, len) == 0)
        return p->last_volume;
    for (int v = 0; v < c->nvolumes; v++)
        if (strlen(c->volumes[v].label) == len && strncmp(c->volumes[v].label, label, len) == 0)
            return p->last_volume = v;
    return -1;
}

static int st_library(parser_t *p, char **words, int n)
{
    simlib_config_t *c = &p->w->lib;
    for (int i = 1; i < n; i++) {
        const char *v;
        uint64_t x;
        if ((v = kv(words[i], "drives")) || (v = kv(words[i], "robots")) ||
            (v = kv(words[i], "slots"))) {
            if (parse_u64(p, v, words[i], &x) < 0)
                return -1;
            if (x < 1 || x > 100000)
                return perr(p, "%s: must be 1..100000", words[i]);
            if (words[i][0] == 'd')
                c->drives = (int)x;
            else if (words[i][0] == 'r')
                c->robots = (int)x;
            else
                c->slots = (int)x;
        } else if ((v = kv(words[i], "profile"))) {
            double error = c->profile.position_error_m;
            if (tape_profile_builtin(v, &c->profile, p->err) < 0)
                return perr(p, "%s", p->err->text);
            c->profile.position_error_m = error;
        } else if ((v = kv(words[i], "position_error_m"))) {
            double m;
            if (parse_seconds(p, v, "position_error_m", &m) < 0)
                return -1;
            c->profile.position_error_m = m;
        } else {
            return perr(p, "library: unknown setting '%s' (drives=, robots=, slots=, profile=, "
                        "position_error_m=)", words[i]);
        }
    }
    return 0;
}

static int st_volume(parser_t *p, char **words, int n)
{
    if (n != 3)
        return perr(p, "expected: volume LABEL fill=BYTES");
    const char *v = kv(words[2], "fill");
    uint64_t fill;
    if (!v)
        return perr(p, "expected: volume LABEL fill=BYTES");
    if (parse_u64(p, v, "fill", &fill) < 0)
        return -1;
    if (volume_index(p, words[1], strlen(words[1])) >= 0)
        return perr(p, "volume %s declared twice", words[1]);
    if (simlib_config_add_volume(&p->w->lib, words[1], fill, p->err) < 0)
        return perr(p, "%s", p->err->text);
    return 0;
}

static int st_file(parser_t *p, char **words, int n)
{
    workload_t *w = p->w;
    if (p->files_closed)
        return perr(p, "file lines must come before the first request");
    if (n < 4)
        return perr(p, "expected: file ID SIZE LABEL:OFFSET [LABEL:OFFSET ...]");
    if (n - 3 > SCHED_MAX_COPIES)
        return perr(p, "file %s: more than %d copies", words[1], SCHED_MAX_COPIES);
    sched_file_t f = {0};
    uint64_t size;
    if (parse_u64(p, words[1], "file id", &f.object) < 0 ||
        parse_u64(p, words[2], "file size", &size) < 0)
        return -1;
    for (int i = 3; i < n; i++) {
        char *colon = strrchr(words[i], ':');
        if (!colon)
            return perr(p, "file %s: copy '%s' is not LABEL:OFFSET", words[1], words[i]);
        int v = volume_index(p, words[i], (size_t)(colon - words[i]));
        if (v < 0)
            return perr(p, "file %s: volume '%.*s' is not declared", words[1],
                        (int)(colon - words[i]), words[i]);
        uint64_t off;
        if (parse_u64(p, colon + 1, "offset", &off) < 0)
            return -1;
        if (off + size > w->lib.volumes[v].used)
            return perr(p, "file %s: copy on %s ends at %llu, past the volume's fill %llu",
                        words[1], w->lib.volumes[v].label, (unsigned long long)(off + size),
                        (unsigned long long)w->lib.volumes[v].used);
        for (int c = 0; c < f.ncopies; c++)
            if (f.copies[c].volume == v)
                return perr(p, "file %s: two copies on volume %s", words[1],
                            w->lib.volumes[v].label);
        f.copies[f.ncopies++] = (sched_copy_t){v, off, size};
    }
    if (w->nfiles && f.object <= w->files[w->nfiles - 1].object) {
        /* Ids must grow: keeps lookups a binary search and catches duplicates. */
        return perr(p, "file %s: ids must be increasing (previous %llu)", words[1],
                    (unsigned long long)w->files[w->nfiles - 1].object);
    }
    if (si_array_grow((void **)&w->files, &p->cap_files, w->nfiles + 1, sizeof(sched_file_t)) < 0)
        return perr(p, "out of memory");
    w->files[w->nfiles++] = f;
    return 0;
}

static long find_file(const workload_t *w, uint64_t id)
{
    size_t b = 0, e = w->nfiles;
    while (b < e) {
        size_t m = b + (e - b) / 2;
        if (w->files[m].object < id)
            b = m + 1;
        else
            e = m;
    }
    return b < w->nfiles && w->files[b].object == id ? (long)b : -1;
}

static int add_req_file(parser_t *p, uint64_t id)
{
    workload_t *w = p->w;
    long idx = find_file(w, id);
    if (idx < 0)
        return perr(p, "request names file %llu, which is not declared",
                    (unsigned long long)id);
    if (si_array_grow((void **)&w->req_files, &p->cap_req_files, w->nreq_files + 1, sizeof(size_t)) < 0)
        return perr(p, "out of memory");
    w->req_files[w->nreq_files++] = (size_t)idx;
    return 0;
}

static int st_request(parser_t *p, char **words, int n)
{
    workload_t *w = p->w;
    p->files_closed = true;
    if (n < 3)
        return perr(p, "expected: request ID at=SECONDS [priority=N] [deadline=SECONDS] "
                    "files=ID,ID-ID,...");
    workload_request_t r = {0};
    if (parse_u64(p, words[1], "request id", &r.req.id) < 0)
        return -1;
    for (size_t i = 0; i < w->nrequests; i++)
        if (w->requests[i].req.id == r.req.id)
            return perr(p, "request %s declared twice", words[1]);
    r.first = w->nreq_files;
    bool have_at = false, have_files = false;
    for (int i = 2; i < n; i++) {
        const char *v;
        if ((v = kv(words[i], "at"))) {
            if (parse_seconds(p, v, "at", &r.at) < 0)
                return -1;
            have_at = true;
        } else if ((v = kv(words[i], "deadline"))) {
            if (parse_seconds(p, v, "deadline", &r.req.deadline) < 0)
                return -1;
        } else if ((v = kv(words[i], "priority"))) {
            char *end;
            errno = 0;
            long pr = strtol(v, &end, 10);
            if (!*v || *end || errno)
                return perr(p, "priority: '%s' is not an integer", v);
            if (pr < -1000 || pr > 1000)
                return perr(p, "priority: %s is outside -1000..1000", v);
            r.req.priority = (int)pr;
        } else if ((v = kv(words[i], "files"))) {
            have_files = true;
            char *list = (char *)v;
            for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
                char *dash = strchr(tok, '-');
                uint64_t a, b;
                if (dash) {
                    *dash = '\0';
                    if (parse_u64(p, tok, "file id", &a) < 0 ||
                        parse_u64(p, dash + 1, "file id", &b) < 0)
                        return -1;
                    if (b < a)
                        return perr(p, "file range %llu-%llu is empty", (unsigned long long)a,
                                    (unsigned long long)b);
                    if (b - a > 10000000)
                        return perr(p, "file range %llu-%llu is too long",
                                    (unsigned long long)a, (unsigned long long)b);
                    for (uint64_t id = a; id <= b; id++)
                        if (add_req_file(p, id) < 0)
                            return -1;
                } else {
                    if (parse_u64(p, tok, "file id", &a) < 0 || add_req_file(p, a) < 0)
                        return -1;
                }
            }
        } else {
            return perr(p, "request: unknown setting '%s' (at=, priority=, deadline=, files=)",
                        words[i]);
        }
    }
    if (!have_at || !have_files)
        return perr(p, "request %s needs at= and files=", words[1]);
    r.n = w->nreq_files - r.first;
    if (r.n == 0)
        return perr(p, "request %s names no files", words[1]);
    if (si_array_grow((void **)&w->requests, &p->cap_requests, w->nrequests + 1,
             sizeof(workload_request_t)) < 0)
        return perr(p, "out of memory");
    w->requests[w->nrequests++] = r;
    return 0;
}

static int st_fault(parser_t *p, char **words, int n)
{
    simlib_fault_t f = {0};
    f.volume = -1;
    bool kind = false, have_start = false, have_len = false;
    for (int i = 1; i < n; i++) {
        const char *v;
        uint64_t x;
        if ((v = kv(words[i], "drive")) || (v = kv(words[i], "robot"))) {
            if (parse_u64(p, v, words[i], &x) < 0)
                return -1;
            f.kind = words[i][0] == 'd' ? FAULT_DRIVE : FAULT_ROBOT;
            f.index = (int)x;
            kind = true;
        } else if ((v = kv(words[i], "at"))) {
            if (parse_seconds(p, v, "at", &f.at) < 0)
                return -1;
        } else if (strcmp(words[i], "region") == 0) {
            f.kind = FAULT_REGION;
            kind = true;
        } else if ((v = kv(words[i], "volume"))) {
            f.volume = volume_index(p, v, strlen(v));
            if (f.volume < 0)
                return perr(p, "fault: volume '%s' is not declared", v);
        } else if ((v = kv(words[i], "start"))) {
            if (parse_u64(p, v, "start", &f.start) < 0)
                return -1;
            have_start = true;
        } else if ((v = kv(words[i], "length"))) {
            if (parse_u64(p, v, "length", &f.length) < 0)
                return -1;
            have_len = true;
        } else {
            return perr(p, "fault: unknown setting '%s'", words[i]);
        }
    }
    if (!kind)
        return perr(p, "expected: fault drive=N at=T | fault robot=N at=T | "
                    "fault region volume=LABEL start=B length=B");
    if (f.kind == FAULT_REGION && (f.volume < 0 || !have_start || !have_len || f.length == 0))
        return perr(p, "fault region needs volume=, start= and length= (> 0)");
    if (simlib_config_add_fault(&p->w->lib, &f, p->err) < 0)
        return perr(p, "%s", p->err->text);
    return 0;
}

static int check_library(parser_t *p)
{
    workload_t *w = p->w;
    for (size_t i = 0; i < w->lib.nfaults; i++) {
        const simlib_fault_t *f = &w->lib.faults[i];
        if ((f->kind == FAULT_DRIVE && f->index >= w->lib.drives) ||
            (f->kind == FAULT_ROBOT && f->index >= w->lib.robots))
            return si_errprintf(p->err, "%s: fault on %s %d, but the library has %d", p->name,
                                f->kind == FAULT_DRIVE ? "drive" : "robot", f->index,
                                f->kind == FAULT_DRIVE ? w->lib.drives : w->lib.robots);
    }
    if (w->lib.nvolumes == 0 || w->nrequests == 0)
        return si_errprintf(p->err, "%s: a workload needs at least one volume and one request",
                            p->name);
    if (w->lib.slots < w->lib.nvolumes)
        w->lib.slots = w->lib.nvolumes;
    return 0;
}

int workload_parse(const char *text, const char *name, workload_t *w, si_error_t *err)
{
    memset(w, 0, sizeof(*w));
    simlib_config_default(&w->lib);
    snprintf(w->name, sizeof(w->name), "%s", name);
    parser_t p = {.w = w, .name = name, .err = err, .last_volume = -1};
    const char *s = text;
    char *line = NULL;
    size_t cap = 0;
    while (*s) {
        p.line++;
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        if (len + 1 > cap) {
            cap = len + 1;
            char *l = realloc(line, cap);
            if (!l) {
                perr(&p, "out of memory");
                goto error;
            }
            line = l;
        }
        memcpy(line, s, len);
        line[len] = '\0';
        s += len + (nl ? 1 : 0);
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *words[3 + SCHED_MAX_COPIES + 8];
        int n = 0;
        for (char *tok = strtok(line, " \t\r"); tok; tok = strtok(NULL, " \t\r")) {
            if (n == (int)(sizeof(words) / sizeof(words[0]))) {
                perr(&p, "too many words on one line");
                goto error;
            }
            words[n++] = tok;
        }
        if (n == 0)
            continue;
        /* strtok is re-entered by st_request's list parsing: words are
         * complete before that, so this is safe. */
        int rc;
        if (strcmp(words[0], "library") == 0)
            rc = st_library(&p, words, n);
        else if (strcmp(words[0], "volume") == 0)
            rc = st_volume(&p, words, n);
        else if (strcmp(words[0], "file") == 0)
            rc = st_file(&p, words, n);
        else if (strcmp(words[0], "request") == 0)
            rc = st_request(&p, words, n);
        else if (strcmp(words[0], "fault") == 0)
            rc = st_fault(&p, words, n);
        else
            rc = perr(&p, "unknown statement '%s' (library, volume, file, request, fault)",
                      words[0]);
        if (rc < 0)
            goto error;
    }
    if (check_library(&p) < 0)
        goto error;
    free(line);
    return 0;
error:
    free(line);
    workload_free(w);
    return -1;
}

int workload_load(const char *path, workload_t *w, si_error_t *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return si_errprintf(err, "%s: %s", path, strerror(errno));
    char *text = NULL;
    size_t len = 0, cap = 0;
    char buf[65536];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), f)) > 0) {
        if (si_array_grow((void **)&text, &cap, len + got + 1, 1) < 0) {
            free(text);
            fclose(f);
            return si_errprintf(err, "%s: out of memory", path);
        }
        memcpy(text + len, buf, got);
        len += got;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(text);
        return si_errprintf(err, "%s: read error", path);
    }
    if (!text)
        text = calloc(1, 1);
    else
        text[len] = '\0';
    if (memchr(text, '\0', len)) {
        free(text);
        return si_errprintf(err, "%s: not a text file (NUL byte)", path);
    }
    int rc = workload_parse(text, path, w, err);
    free(text);
    return rc;
}

void workload_free(workload_t *w)
{
    simlib_config_free(&w->lib);
    free(w->files);
    free(w->requests);
    free(w->req_files);
    memset(w, 0, sizeof(*w));
}

uint64_t workload_requested_bytes(const workload_t *w)
{
    uint8_t *seen = calloc(w->nfiles + 1, 1);
    uint64_t total = 0;
    if (!seen)
        return 0;
    for (size_t i = 0; i < w->nreq_files; i++) {
        size_t f = w->req_files[i];
        if (!seen[f]) {
            seen[f] = 1;
            total += w->files[f].copies[0].size;
        }
    }
    free(seen);
    return total;
}
