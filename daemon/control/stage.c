#include "config.h"
#include "daemon/control/control.h"
#include "daemon/control/internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "catalog/requests.h"
#include "common/array.h"
#include "common/groups.h"
#include "common/text.h"
#include "daemon/control/identity.h"

/* ---- parsing ----------------------------------------------------------------- */

void control_stage_free(control_stage_t *st)
{
    if (!st)
        return;
    json_decref(st->root);
    free(st->datasets);
    free(st->files);
    free(st->manifest_storage);
    memset(st, 0, sizeof(*st));
}

/* The Tape REST API's absolute path "/bucket/key" names object bucket/key;
 * one leading '/' goes, so "//x" still fails the bucket check. */
static const char *object_path(const char *path)
{
    return path[0] == '/' ? path + 1 : path;
}

/* The members stagein reads from targetedMetadata for its own sitename. */
static const char *const site_fields[] = {"job", "priority", "deadline", "pin_lifetime",
                                          "submission", NULL};

/* A file entry's WLCG members: diskLifetime (the longest goes to
 * *disk_lifetime) and targetedMetadata, whose entry for sitename is merged
 * into the request's fields (root); other sites' entries are ignored. */
static int file_members(json_t *root, json_t *file, size_t i, const char *sitename,
                        int64_t *disk_lifetime, si_error_t *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(file, key, v) {
        if (strcmp(key, "path") == 0)
            continue;
        if (strcmp(key, "diskLifetime") == 0) {
            int64_t seconds;
            if (!json_is_string(v))
                return si_errprintf(err, "files[%zu].diskLifetime must be an ISO 8601 duration"
                                         " string (e.g. \"P1D\")", i);
            si_error_t why;
            if (si_parse_iso8601_duration(json_string_value(v), &seconds, &why) < 0)
                return si_errprintf(err, "files[%zu].diskLifetime: %s", i, why.text);
            if (seconds > *disk_lifetime)
                *disk_lifetime = seconds;
        } else if (strcmp(key, "targetedMetadata") == 0) {
            if (!json_is_object(v))
                return si_errprintf(err, "files[%zu].targetedMetadata must be an object", i);
            json_t *ours = json_object_get(v, sitename);
            if (!ours)
                continue;
            if (!json_is_object(ours))
                return si_errprintf(err, "files[%zu].targetedMetadata.%s must be an object", i,
                                    sitename);
            const char *name;
            json_t *value;
            json_object_foreach(ours, name, value) {
                if (!control_listed(site_fields, name))
                    return si_errprintf(err, "files[%zu].targetedMetadata.%s: unknown field"
                                             " '%.64s' (known: job, priority, deadline,"
                                             " pin_lifetime, submission)", i, sitename, name);
                json_t *have = json_object_get(root, name);
                if (have && !json_equal(have, value))
                    return si_errprintf(err, "files[%zu].targetedMetadata.%s.%s differs from"
                                             " the value given before", i, sitename, name);
                json_object_set(root, name, value);
            }
        } else {
            return si_errprintf(err, "files[%zu]: unknown field '%.64s' (known: path,"
                                     " diskLifetime, targetedMetadata)", i, key);
        }
    }
    return 0;
}

/* Strings of an array field, or the "path" member of its objects (the WLCG
 * shape: [{"path": "..."}]); appended to *list. With sitename (the files
 * field) the objects' WLCG members are read too. */
static int string_list(json_t *root, const char *name, const char *sitename,
                       int64_t *disk_lifetime, const char ***list, size_t *n, size_t *cap,
                       si_error_t *err)
{
    json_t *arr = json_object_get(root, name);
    if (!arr)
        return 0;
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return si_errprintf(err, "field '%s' must be a non-empty array", name);
    size_t count = json_array_size(arr);
    if (si_array_grow((void **)list, cap, *n + count, sizeof(**list)) < 0)
        return si_errprintf(err, "out of memory");
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        json_t *s = json_is_object(v) ? json_object_get(v, "path") : v;
        if (!json_is_string(s) || json_string_length(s) == 0)
            return si_errprintf(err, "%s[%zu] must be a non-empty string%s", name, i,
                                json_is_object(v) ? " in \"path\"" : "");
        if (strlen(json_string_value(s)) != json_string_length(s))
            return si_errprintf(err, "%s[%zu] contains a NUL character", name, i);
        if (json_is_object(v) && sitename &&
            file_members(root, v, i, sitename, disk_lifetime, err) < 0)
            return -1;
        /* files may be the spec's absolute paths; dataset names are names */
        (*list)[(*n)++] = sitename ? object_path(json_string_value(s)) : json_string_value(s);
    }
    return 0;
}

/* The "job" field: a positive integer or 1 to 64 characters (buf holds the
 * integer's text); *job NULL when absent or null. */
static int job_field(json_t *root, char *buf, size_t size, const char **job, si_error_t *err)
{
    json_t *v = json_object_get(root, "job");
    *job = NULL;
    if (json_is_integer(v) && json_integer_value(v) > 0) {
        snprintf(buf, size, "%lld", (long long)json_integer_value(v));
        *job = buf;
    } else if (json_is_string(v) && json_string_length(v) > 0 && json_string_length(v) <= 64 &&
               strlen(json_string_value(v)) == json_string_length(v)) {
        *job = json_string_value(v);
    } else if (v && !json_is_null(v)) {
        return si_errprintf(err, "field 'job' must be a job id (a positive integer or 1 to 64"
                                 " characters)");
    }
    return 0;
}

int control_parse_stage(const char *body, size_t len, int64_t pin_lifetime_max,
                        const char *sitename, control_stage_t *out, si_error_t *err)
{
    static const char *const known[] = {"datasets", "files", "manifest", "job", "priority",
                                        "deadline", "pin_lifetime", "uid", "gid",
                                        "submission", NULL};
    control_stage_t st;
    memset(&st, 0, sizeof(st));
    json_error_t jerr;
    st.root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!st.root)
        return si_errprintf(err, "malformed JSON at line %d, column %d: %s", jerr.line,
                            jerr.column, jerr.text);
    if (!json_is_object(st.root)) {
        si_errprintf(err, "the body must be a JSON object");
        goto error;
    }
    const char *key;
    json_t *v;
    json_object_foreach(st.root, key, v) {
        bool ok = false;
        for (size_t i = 0; known[i]; i++)
            ok = ok || strcmp(key, known[i]) == 0;
        if (!ok) {
            si_errprintf(err, "unknown field '%.64s' (known: datasets, files, manifest, job,"
                              " priority, deadline, pin_lifetime, uid, gid, submission)", key);
            goto error;
        }
    }
    int64_t disk_lifetime = 0;
    size_t cap_datasets = 0, cap_files = 0;
    if (string_list(st.root, "datasets", NULL, NULL, &st.datasets, &st.ndatasets, &cap_datasets,
                    err) < 0 ||
        string_list(st.root, "files", sitename, &disk_lifetime, &st.files, &st.nfiles, &cap_files,
                    err) < 0)
        goto error;
    json_t *manifest = json_object_get(st.root, "manifest");
    if (manifest) {
        if (!json_is_string(manifest)) {
            si_errprintf(err, "field 'manifest' must be a string (the manifest's text)");
            goto error;
        }
        char **lines = NULL;
        size_t nlines = 0;
        if (requests_manifest_lines(json_string_value(manifest), json_string_length(manifest),
                                    &lines, &nlines, &st.manifest_storage, err) < 0)
            goto error;
        if (si_array_grow((void **)&st.files, &cap_files, st.nfiles + nlines,
                          sizeof(*st.files)) < 0) {
            free(lines);
            si_errprintf(err, "out of memory");
            goto error;
        }
        for (size_t i = 0; i < nlines; i++)
            st.files[st.nfiles++] = lines[i];
        free(lines);
    }
    if (st.ndatasets + st.nfiles == 0) {
        si_errprintf(err, "the request names nothing to stage: give 'datasets', 'files' or"
                          " 'manifest'");
        goto error;
    }
    if (job_field(st.root, st.job_buf, sizeof(st.job_buf), &st.job, err) < 0)
        goto error;
    int64_t priority = 0, uid = -1, gid = -1;
    if (control_int_field(st.root, "priority", PRIORITY_MIN, PRIORITY_MAX, &priority, err) < 0 ||
        control_int_field(st.root, "deadline", 1, INT64_MAX, &st.deadline, err) < 0 ||
        control_int_field(st.root, "pin_lifetime", 1, pin_lifetime_max, &st.pin_lifetime,
                          err) < 0 ||
        control_int_field(st.root, "uid", 0, UINT32_MAX - 1, &uid, err) < 0 ||
        control_int_field(st.root, "gid", 0, UINT32_MAX - 1, &gid, err) < 0)
        goto error;
    st.priority = (int)priority;
    if (!st.pin_lifetime && disk_lifetime) {
        if (disk_lifetime > pin_lifetime_max) {
            si_errprintf(err, "diskLifetime of %lld s is longer than this site's maximum pin"
                              " lifetime of %lld s", (long long)disk_lifetime,
                         (long long)pin_lifetime_max);
            goto error;
        }
        st.pin_lifetime = disk_lifetime;
    }
    json_t *sub = json_object_get(st.root, "submission");
    if (sub) {
        const char *t = json_string_value(sub);
        const char *colon = t ? strrchr(t, ':') : NULL;
        if (!t || json_string_length(sub) > SUBMISSION_MAX || strlen(t) != json_string_length(sub) ||
            !colon || colon == t || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
            !si_utf8_valid(t, strlen(t))) {
            si_errprintf(err, "field 'submission' must be \"HOST:SID\" (the submitting"
                              " process's host and session id), at most %d characters",
                         SUBMISSION_MAX);
            goto error;
        }
        st.submission = t;
    }
    if ((uid >= 0) != (gid >= 0)) {
        si_errprintf(err, "fields 'uid' and 'gid' go together (staging on behalf of a user)");
        goto error;
    }
    if (uid >= 0) {
        st.on_behalf = true;
        st.uid = (uid_t)uid;
        st.gid = (gid_t)gid;
    }
    *out = st;
    if (st.job == st.job_buf)
        out->job = out->job_buf;
    return 0;
error:
    control_stage_free(&st);
    return -1;
}


/* ---- stage requests: submit, status, bind, cancel, release, archiveinfo ---- */

static bool stage_scope_ok(http_request_t *req, const identity_t *who, const control_stage_t *st)
{
    char path[SI_KEY_MAX + 80];
    for (size_t i = 0; i < st->nfiles; i++) {
        snprintf(path, sizeof(path), "/%s", st->files[i]);
        if (!identity_allows(who, "storage.stage", path)) {
            http_respond_error(req, 403, "the token's scope does not allow staging %.1100s (it"
                                         " needs storage.stage:%.1100s or a directory above)",
                               path, path);
            return false;
        }
    }
    if (st->ndatasets && !identity_allows(who, "storage.stage", "/")) {
        http_respond_error(req, 403, "staging a dataset by name needs a token with the scope"
                                     " storage.stage:/ (name its files instead)");
        return false;
    }
    return true;
}

void control_on_stage(http_request_t *req, void *arg)
{
    control_t *c = arg;
    identity_t who;
    control_stage_t st;
    si_error_t err;
    size_t len;
    const char *body = http_request_body(req, &len);

    if (!control_authenticate(c, req, &who))
        return;
    pthread_mutex_lock(&c->lock);
    if (control_parse_stage(body, len, c->pin_max, c->sitename, &st, &err) < 0) {
        http_respond_error(req, 400, "%s", err.text);
        goto out;
    }
    if (!stage_scope_ok(req, &who, &st)) {
        control_stage_free(&st);
        goto out;
    }
    requests_spec_t spec = {
        .uid = who.uid, .gid = who.gid, .job_id = st.job, .priority = st.priority,
        .deadline = st.deadline, .pin_lifetime = st.pin_lifetime ? st.pin_lifetime : c->pin_default,
        .datasets = st.datasets, .ndatasets = st.ndatasets, .files = st.files, .nfiles = st.nfiles,
        .submission = st.submission, .max_bytes = c->cache_capacity,
        .max_user_bytes = c->max_user_pinned_bytes,
    };
    if (st.on_behalf) {
        if (who.uid != 0 && (st.uid != who.uid || st.gid != who.gid)) {
            http_respond_error(req, 403, "only root may stage on behalf of another user"
                                         " (uid %u asked for uid %u)",
                               (unsigned)who.uid, (unsigned)st.uid);
            control_stage_free(&st);
            goto out;
        }
        spec.uid = st.uid;
        spec.gid = st.gid;
    }
    gid_t groups[SI_GROUPS_MAX];
    si_groups_of(c->groups, spec.uid, spec.gid, groups, &spec.ngroups);
    spec.groups = groups;
    requests_created_t made;
    if (requests_create(c->requests, &spec, &made, &err) < 0) {
        control_respond_failure(c, req, errno, &err);
    } else {
        char location[80];
        snprintf(location, sizeof(location), "/api/v1/stage/%s", made.uuid);
        http_add_header(req, "Location", location);
        if (c->stage_hook)
            c->stage_hook(c->stage_hook_arg);
        si_log(c->log, SI_LOG_NOTICE, "request %s: uid %u job %s, %llu files, %llu bytes",
               made.uuid, (unsigned)spec.uid, spec.job_id ? spec.job_id : "-",
               (unsigned long long)made.files, (unsigned long long)made.bytes);
        http_respond_json(req, 201, json_pack("{s:s, s:I, s:I}", "requestId", made.uuid, "files",
                                              (json_int_t)made.files, "bytes",
                                              (json_int_t)made.bytes));
    }
    control_stage_free(&st);
out:
    pthread_mutex_unlock(&c->lock);
}

/* eta_s < 0: not known. */
json_t *control_status_json(const requests_status_t *st, double eta_s)
{
    json_t *files = json_array();
    double started = 0;            /* the request's: when its first file started */
    for (size_t i = 0; i < st->nitems; i++) {
        const requests_item_t *it = &st->items[i];
        /* onDisk: recalled and still pinned for this request */
        bool on_disk = strcmp(it->state, "COMPLETED") == 0 && it->pinned &&
                       strcmp(st->state, "RELEASED") != 0;
        json_t *f = json_pack("{s:s+++, s:s, s:b, s:I, s:I}", "path", "/", it->bucket, "/",
                              it->key, "state", it->state, "onDisk", on_disk, "size",
                              (json_int_t)it->size, "bytesDone", (json_int_t)it->bytes_done);
        if (it->error)
            json_object_set_new(f, "error", json_string(it->error));
        /* the Tape REST API's per-file times, unix seconds */
        if (it->started > 0)
            json_object_set_new(f, "startedAt", json_integer((json_int_t)it->started));
        if (it->finished > 0)
            json_object_set_new(f, "finishedAt", json_integer((json_int_t)it->finished));
        if (it->started > 0 && (started == 0 || it->started < started))
            started = it->started;
        json_array_append_new(files, f);
    }
    json_t *j = json_pack(
        "{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:n}", "id",
        st->uuid, "state", st->state, "uid", (json_int_t)st->uid, "gid", (json_int_t)st->gid,
        "priority", (json_int_t)st->priority, "pinLifetime", (json_int_t)st->pin_lifetime,
        "createdAt", (json_int_t)st->created, "lastModified", st->updated, "filesTotal",
        (json_int_t)st->files_total, "filesCompleted", (json_int_t)st->files_completed,
        "filesFailed", (json_int_t)st->files_failed, "bytesTotal", (json_int_t)st->bytes_total,
        "bytesDone", (json_int_t)st->bytes_done, "queuePosition", (json_int_t)st->queue_position,
        "eta");
    if (eta_s >= 0) {
        json_object_set_new(j, "eta", json_real(eta_s));
        json_object_set_new(j, "etaAt", json_real((double)time(NULL) + eta_s));
    }
    json_object_set_new(j, "job", st->job_id ? json_string(st->job_id) : json_null());
    json_object_set_new(j, "expired", json_boolean(st->expired));
    json_object_set_new(j, "finishedAt", st->finished > 0 ? json_real(st->finished) : json_null());
    /* the Tape REST API's completedAt: when every file finished (unix seconds) */
    if (st->finished > 0)
        json_object_set_new(j, "completedAt", json_integer((json_int_t)st->finished));
    if (started > 0)
        json_object_set_new(j, "startedAt", json_integer((json_int_t)started));
    if (st->end_reason)
        json_object_set_new(j, "endReason", json_string(st->end_reason));
    json_object_set_new(j, "deadline", st->deadline ? json_integer(st->deadline) : json_null());
    if (st->error)
        json_object_set_new(j, "error", json_string(st->error));
    json_object_set_new(j, "files", files);
    return j;
}

void control_on_status(http_request_t *req, void *arg)
{
    control_t *c = arg;
    identity_t who;
    si_error_t err;
    requests_status_t *st = NULL;
    if (!control_authenticate(c, req, &who))
        return;
    pthread_mutex_lock(&c->lock);
    {
        double eta = -1;
        if (requests_get(c->requests, http_request_param(req, "id"), who.uid, &st, &err) < 0) {
            control_respond_failure(c, req, errno, &err);
        } else {
            bool active = strcmp(st->state, "SUBMITTED") == 0 || strcmp(st->state, "STARTED") == 0;
            if (active && c->eta_hook && c->eta_hook(c->eta_arg, st->id, &eta) != 1)
                eta = -1;
            else if (!active)
                eta = -1;
            http_respond_json(req, 200, control_status_json(st, eta));
        }
    }
    pthread_mutex_unlock(&c->lock);
    requests_status_free(st);
}

/* POST /api/v1/release/{id} {"job": ID}: that job (an epilog) no longer
 * holds the request; it is released when nothing else does. */
static void release_job_holder(http_request_t *req, control_t *c, const identity_t *who,
                               const char *id, const char *job)
{
    si_error_t err;
    bool released = false, array_left = false;
    char why[96];
    snprintf(why, sizeof(why), "job %s ended (its epilog released it)", job);
    if (requests_unhold(c->requests, id, who->uid, REQUESTS_HOLDER_JOB, job, why, &released,
                        &array_left, &err) < 0) {
        control_respond_failure(c, req, errno, &err);
        return;
    }
    si_log(c->log, SI_LOG_NOTICE, "request %s: job %s let go of it%s", id, job,
           released ? "; released" : array_left ? "; its array still holds it" : "");
    if (array_left && c->holder_hook)
        c->holder_hook(c->holder_arg);
    http_respond_json(req, 200, json_pack("{s:s, s:s, s:b}", "requestId", id, "job", job,
                                          "released", released));
}

/* The Tape REST API's {"paths": [...]} of a cancel or release: every path
 * must be a file of the request (else 400 and false). *objects (malloc'd)
 * the named files' objects, *whole whether they are all of the request's. */
static bool paths_of_request(http_request_t *req, control_t *c, const identity_t *who,
                             const char *id, json_t *paths, int64_t **objects, size_t *n,
                             bool *whole)
{
    si_error_t err;
    requests_status_t *st = NULL;
    *objects = NULL;
    *n = 0;
    if (requests_get(c->requests, id, who->uid, &st, &err) < 0) {
        control_respond_failure(c, req, errno, &err);
        return false;
    }
    bool *named = calloc(st->nitems + 1, sizeof(*named));
    int64_t *ids = calloc(st->nitems + 1, sizeof(*ids));
    bool ok = named && ids;
    size_t i;
    json_t *v;
    json_array_foreach(paths, i, v) {
        const char *p = json_string_value(v);
        size_t k = 0;
        if (!ok)
            break;
        for (p = p ? object_path(p) : NULL; p && k < st->nitems; k++) {
            const requests_item_t *it = &st->items[k];
            size_t blen = strlen(it->bucket);
            if (strncmp(p, it->bucket, blen) == 0 && p[blen] == '/' && strcmp(p + blen + 1, it->key) == 0)
                break;
        }
        if (!p || k == st->nitems) {
            http_respond_error(req, 400, "paths[%zu] %s%.1100s%s is not a file of request %s", i,
                               p ? "'" : "", p ? json_string_value(v) : "(not a string)",
                               p ? "'" : "", id);
            ok = false;
            break;
        }
        if (!named[k])
            ids[(*n)++] = st->items[k].object_id;
        named[k] = true;
    }
    if (!named || !ids)
        http_respond_error(req, 500, "out of memory");
    *whole = ok && *n == st->nitems;
    free(named);
    requests_status_free(st);
    if (ok)
        *objects = ids;
    else
        free(ids);
    return ok;
}

static void end_request(http_request_t *req, control_t *c, bool release)
{
    identity_t who;
    si_error_t err;
    const char *id = http_request_param(req, "id");
    size_t len = 0;
    const char *body = http_request_body(req, &len);
    json_t *root = NULL;
    char buf[32];
    const char *job = NULL;
    int64_t *objects = NULL;
    size_t nobjects = 0;
    if (!control_authenticate(c, req, &who))
        return;
    pthread_mutex_lock(&c->lock);
    if (len > 0) {
        json_error_t jerr;
        root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        json_t *paths = json_object_get(root, "paths");
        if (!root || !json_is_object(root) || json_object_size(root) > 1 ||
            (paths && (!json_is_array(paths) || json_array_size(paths) == 0)) ||
            (!paths && (!release || job_field(root, buf, sizeof(buf), &job, &err) < 0 ||
                        (json_object_size(root) == 1 && !job)))) {
            http_respond_error(req, 400, "the body must be empty, {}%s or {\"paths\": [\"/bucket/key\","
                                         " ...]}", release ? ", {\"job\": ID}" : "");
            goto out;
        }
        bool whole = true;
        if (paths && !paths_of_request(req, c, &who, id, paths, &objects, &nobjects, &whole))
            goto out;
        if (whole) {
            free(objects); /* all of them: the request as a whole */
            objects = NULL;
        }
    }
    if (job) {
        release_job_holder(req, c, &who, id, job);
        goto out;
    }
    if (objects) {
        if (requests_end_items(c->requests, id, who.uid, release, objects, nobjects, &err) < 0) {
            control_respond_failure(c, req, errno, &err);
            goto out;
        }
        si_log(c->log, SI_LOG_NOTICE, "request %s: %zu files %s by uid %u", id, nobjects,
               release ? "released" : "cancelled", (unsigned)who.uid);
        requests_status_t *st = NULL;
        const char *state = requests_get(c->requests, id, who.uid, &st, &err) == 0 ? st->state
                                                                                  : "?";
        http_respond_json(req, 200, json_pack("{s:s, s:s, s:I}", "requestId", id, "state", state,
                                              release ? "filesReleased" : "filesCancelled",
                                              (json_int_t)nobjects));
        requests_status_free(st);
        goto out;
    }
    int rc = release ? requests_release(c->requests, id, who.uid, &err)
                     : requests_cancel(c->requests, id, who.uid, &err);
    if (rc < 0) {
        control_respond_failure(c, req, errno, &err);
        goto out;
    }
    si_log(c->log, SI_LOG_NOTICE, "request %s %s by uid %u", id,
           release ? "released" : "cancelled", (unsigned)who.uid);
    http_respond_json(req, 200, json_pack("{s:s, s:s}", "requestId", id, "state",
                                          release ? "RELEASED" : "CANCELLED"));
out:
    pthread_mutex_unlock(&c->lock);
    json_decref(root);
    free(objects);
}

/* POST /api/v1/stage/{id}/job {"job": ID}: the job a request made at
 * submission became (the SPANK plugin's prolog tells, as root). */
void control_on_bind_job(http_request_t *req, void *arg)
{
    control_t *c = arg;
    identity_t who;
    si_error_t err;
    size_t len;
    const char *body = http_request_body(req, &len);
    const char *id = http_request_param(req, "id");
    json_t *root = NULL;
    if (!control_authenticate(c, req, &who))
        return;
    pthread_mutex_lock(&c->lock);
    json_error_t jerr;
    char buf[32], abuf[32];
    const char *job = NULL, *array = NULL;
    if (!(root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr))) {
        http_respond_error(req, 400, "malformed JSON at line %d, column %d: %s", jerr.line,
                           jerr.column, jerr.text);
        goto out;
    }
    json_t *array_v = json_object_get(root, "array");
    json_t *started_v = json_object_get(root, "started");
    json_t *array_only = json_pack("{s:O?}", "job", array_v);
    bool array_ok = !array_v || json_is_null(array_v) ||
                    (job_field(array_only, abuf, sizeof(abuf), &array, &err) == 0 && array);
    json_decref(array_only);
    if (!json_is_object(root) ||
        json_object_size(root) != 1 + (size_t)(array_v != NULL) + (size_t)(started_v != NULL) ||
        job_field(root, buf, sizeof(buf), &job, &err) < 0 || !job || !array_ok ||
        (started_v && !json_is_boolean(started_v))) {
        http_respond_error(req, 400, "the body must be {\"job\": ID}, with \"array\": ID and "
                                     "\"started\": true|false if need be; an ID is a positive "
                                     "integer or 1 to 64 characters");
        goto out;
    }
    bool started = !started_v || json_is_true(started_v);
    if (requests_bind_job(c->requests, id, who.uid, job, array, started, &err) < 0) {
        control_respond_failure(c, req, errno, &err);
        goto out;
    }
    si_log(c->log, SI_LOG_INFO, "request %s is job %s%s%s (uid %u)", id, job,
           array ? " of array " : "", array ? array : "", (unsigned)who.uid);
    http_respond_json(req, 200, json_pack("{s:s, s:s}", "requestId", id, "job", job));
out:
    pthread_mutex_unlock(&c->lock);
    json_decref(root);
}

void control_on_cancel(http_request_t *req, void *arg)
{
    end_request(req, arg, false);
}

void control_on_release(http_request_t *req, void *arg)
{
    end_request(req, arg, true);
}

/* DELETE /api/v1/stage/{id}: the Tape REST API's "cancel and forget":
 * unfinished files are cancelled and the pins given back (a release); the
 * request stays in the history (GET /api/v1/requests?all=1). */
void control_on_delete(http_request_t *req, void *arg)
{
    size_t len;
    http_request_body(req, &len);
    if (len) {
        http_respond_error(req, 400, "DELETE /api/v1/stage/{id} takes no body");
        return;
    }
    end_request(req, arg, true);
}

void control_on_archiveinfo(http_request_t *req, void *arg)
{
    control_t *c = arg;
    identity_t who;
    size_t len;
    const char *body = http_request_body(req, &len);
    json_error_t jerr;
    json_t *root = NULL;
    if (!control_authenticate(c, req, &who))
        return;
    pthread_mutex_lock(&c->lock);
    root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        http_respond_error(req, 400, "malformed JSON at line %d, column %d: %s", jerr.line,
                           jerr.column, jerr.text);
        goto out;
    }
    json_t *files = json_object_get(root, "paths");
    if (!files)
        files = json_object_get(root, "files"); /* stagein's name before the Tape REST API's */
    if (!json_is_object(root) || json_object_size(root) != 1 || !json_is_array(files) ||
        json_array_size(files) == 0) {
        http_respond_error(req, 400, "the body must be {\"paths\": [\"/bucket/key\", ...]}");
        goto out;
    }
    if (json_array_size(files) > ARCHIVEINFO_MAX) {
        http_respond_error(req, 400, "at most %d files per archiveinfo query", ARCHIVEINFO_MAX);
        goto out;
    }
    /* the caller may learn of what it may stage only */
    gid_t groups[SI_GROUPS_MAX];
    requests_caller_t caller = {.uid = who.uid, .gid = who.gid, .groups = groups};
    si_groups_of(c->groups, who.uid, who.gid, groups, &caller.ngroups);
    json_t *answer = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(files, i, v) {
        json_t *p = json_is_object(v) ? json_object_get(v, "path") : v;
        const char *given = json_string_value(p), *path = given ? object_path(given) : NULL;
        const char *slash = path ? strchr(path, '/') : NULL;
        char scoped[SI_KEY_MAX + 80];
        snprintf(scoped, sizeof(scoped), "/%s", path ? path : "");
        if (path && !identity_allows(&who, "storage.read", scoped) &&
            !identity_allows(&who, "storage.stage", scoped)) {
            json_array_append_new(answer, json_pack("{s:s, s:s}", "path", given, "error",
                                                    "the token's scope (storage.read or"
                                                    " storage.stage) does not cover this path"));
            continue;
        }
        if (!slash || slash == path || !slash[1]) {
            json_array_append_new(answer, json_pack("{s:s?, s:s}", "path", given, "error",
                                                    "not of the form /bucket/key"));
            continue;
        }
        char bucket[64];
        size_t blen = (size_t)(slash - path);
        snprintf(bucket, sizeof(bucket), "%.*s", (int)(blen < 63 ? blen : 63), path);
        requests_locality_t loc;
        uint64_t size;
        si_error_t err;
        if (blen > 63 || requests_locality(c->requests, &caller, bucket, slash + 1, &loc, &size,
                                           &err) < 0)
            json_array_append_new(answer, json_pack("{s:s, s:s}", "path", given, "error",
                                                    blen > 63 ? "bucket name too long" : err.text));
        else
            json_array_append_new(answer, json_pack("{s:s, s:s, s:I}", "path", given, "locality",
                                                    requests_locality_name(loc), "size",
                                                    (json_int_t)size));
    }
    http_respond_json(req, 200, answer);
out:
    pthread_mutex_unlock(&c->lock);
    json_decref(root);
}

