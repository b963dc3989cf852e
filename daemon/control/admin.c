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

#include "catalog/db.h"
#include "catalog/requests.h"
#include "common/groups.h"
#include "common/text.h"
#include "daemon/control/identity.h"

/* ---- discovery, queue, requests, metrics, credentials, tokens ------------------ */

json_t *control_discovery(const char *sitename, const char *authority)
{
    if (!authority || !*authority || strlen(authority) > 255 ||
        strspn(authority, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") !=
            strlen(authority))
        authority = "localhost";
    return json_pack("{s:s, s:s, s:[{s:s++, s:s, s:{}}]}", "sitename", sitename, "description",
                     "stagein: tape recall into a cluster's cache (WLCG Tape REST API v1 with"
                     " stagein's extensions)", "endpoints", "uri", "http://", authority,
                     "/api/v1", "version", "v1", "metadata");
}

/* GET /.well-known/wlcg-tape-rest-api: where the Tape REST API is, for
 * clients that found this host and port in a file URL. No identity needed.
 * The endpoint's URI uses the Host the client reached us by. */
void control_on_discovery(http_request_t *req, void *arg)
{
    control_t *c = arg;
    pthread_mutex_lock(&c->lock);
    json_t *doc = control_discovery(c->sitename, http_request_header(req, "Host"));
    pthread_mutex_unlock(&c->lock);
    http_respond_json(req, 200, doc);
}

/* A table as the JSON rows the CLI's --json prints. */
json_t *control_table_json(si_table_t *t)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    json_t *rows = NULL;
    if (mem) {
        si_table_print(t, mem, true);
        fclose(mem);
        rows = json_loads(text, 0, NULL);
    }
    free(text);
    return rows;
}

/* GET /api/v1/requests[?all=1][&limit=N]: the caller's requests, newest
 * first (root: everyone's); all=1 adds finished, released and expired ones. */
void control_on_requests(http_request_t *req, void *arg)
{
    control_t *c = arg;
    identity_t who;
    si_error_t err;
    const char *all = http_request_query(req, "all");
    const char *limit_text = http_request_query(req, "limit");
    int64_t limit = 1000;
    if (limit_text && (si_parse_i64(limit_text, &limit) < 0 || limit < 1 || limit > 100000)) {
        http_respond_error(req, 400, "limit=%.20s: expected 1 to 100000 requests", limit_text);
        return;
    }
    if (!control_authenticate(c, req, &who))
        return;
    pthread_mutex_lock(&c->lock);
    si_table_t *t = requests_list(c->requests, who.uid == 0 ? (uid_t)-1 : who.uid,
                                  !(all && strcmp(all, "0") != 0), (size_t)limit, &err);
    pthread_mutex_unlock(&c->lock);
    json_t *rows = t ? control_table_json(t) : NULL;
    si_table_free(t);
    if (!t)
        control_respond_failure(c, req, EIO, &err);
    else if (!rows)
        http_respond_error(req, 500, "cannot render the requests");
    else
        http_respond_json(req, 200, json_pack("{s:o}", "requests", rows));
}

void control_on_queue(http_request_t *req, void *arg)
{
    control_t *c = arg;
    identity_t who;
    si_error_t err;
    if (!control_authenticate(c, req, &who))
        return;
    pthread_mutex_lock(&c->lock);
    si_table_t *t = requests_queue(c->requests, &err);
    pthread_mutex_unlock(&c->lock);
    if (!t) {
        control_respond_failure(c, req, EIO, &err);
        return;
    }
    /* the shared table code renders JSON; reparse to embed it */
    json_t *rows = control_table_json(t);
    si_table_free(t);
    if (!rows)
        http_respond_error(req, 500, "cannot render the queue");
    else
        http_respond_json(req, 200, json_pack("{s:o}", "queue", rows));
}

static void gauge(FILE *out, const char *name, const char *help, uint64_t value)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n%s %llu\n", name, help, name, name,
            (unsigned long long)value);
}

static void counter(FILE *out, const char *name, const char *help, uint64_t value)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
            (unsigned long long)value);
}

/* The catalog connection's health, every connection of the process together
 * (db_health_t), whether or not the catalog answered this scrape. */
static void catalog_metrics(FILE *out, const db_health_state_t *hs)
{
    gauge(out, "stagein_catalog_up", "1 when the catalog's server answers, 0 in an outage.",
          hs->up);
    gauge(out, "stagein_catalog_down_since_seconds",
          "When the current catalog outage began (unix time; 0: none).",
          (uint64_t)hs->down_since);
    counter(out, "stagein_catalog_outages_total", "Catalog outages (a reconnect failed).",
            hs->outages);
    counter(out, "stagein_catalog_connections_lost_total",
            "Catalog connections found gone (server restart, crash, network).", hs->lost);
    counter(out, "stagein_catalog_reconnects_total", "Catalog connections made again.",
            hs->reconnects);
}

void control_on_metrics(http_request_t *req, void *arg)
{
    control_t *c = arg;
    requests_metrics_t m;
    si_error_t err;
    pthread_mutex_lock(&c->lock);
    /* the query also reconnects a connection that lost its server */
    int rc = requests_metrics(c->requests, &m, &err);
    bool reachable = db_available(catalog_driver(c->cat));
    control_metrics_fn hook = c->metrics_hook;
    void *hook_arg = c->metrics_arg;
    pthread_mutex_unlock(&c->lock);
    db_health_state_t health;
    db_health_get(db_health_of(catalog_driver(c->cat)), &health);
    if (rc < 0 && reachable) {
        http_respond_error(req, 500, "%s", err.text);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        http_respond_error(req, 500, "out of memory");
        return;
    }
    catalog_metrics(out, &health);
    if (rc < 0) /* the catalog's figures are unknown in an outage: left out */
        goto others;
    fprintf(out, "# HELP stagein_requests Stage requests by state.\n"
                 "# TYPE stagein_requests gauge\n");
    for (int i = 0; i < REQUESTS_NSTATES; i++)
        fprintf(out, "stagein_requests{state=\"%s\"} %llu\n", requests_state_names[i],
                (unsigned long long)m.by_state[i]);
    gauge(out, "stagein_queued_files", "Files waiting for or in recall.", m.queued_files);
    gauge(out, "stagein_queued_bytes", "Bytes waiting for or in recall.", m.queued_bytes);
    gauge(out, "stagein_recalling_files", "Files being recalled now.", m.started_files);
    gauge(out, "stagein_failed_files", "Request items that failed.", m.failed_files);
    gauge(out, "stagein_cache_objects", "Objects in the cache.", m.cache_objects);
    gauge(out, "stagein_cache_bytes", "Bytes in the cache.", m.cache_bytes);
    gauge(out, "stagein_cache_pinned_objects", "Cached objects pinned by a request.",
          m.cache_pinned_objects);
    gauge(out, "stagein_cache_pinned_bytes", "Bytes of pinned cached objects.",
          m.cache_pinned_bytes);
others:
    if (c->server) {
        http_stats_t hs;
        http_server_stats(c->server, &hs);
        fprintf(out, "# HELP stagein_http_responses_total Control API answers by status class.\n"
                     "# TYPE stagein_http_responses_total counter\n"
                     "stagein_http_responses_total{code=\"2xx\"} %llu\n"
                     "stagein_http_responses_total{code=\"3xx\"} %llu\n"
                     "stagein_http_responses_total{code=\"4xx\"} %llu\n"
                     "stagein_http_responses_total{code=\"5xx\"} %llu\n"
                     "# HELP stagein_http_body_too_large_total Requests refused for their body size.\n"
                     "# TYPE stagein_http_body_too_large_total counter\n"
                     "stagein_http_body_too_large_total %llu\n",
                (unsigned long long)hs.status_2xx, (unsigned long long)hs.status_3xx,
                (unsigned long long)hs.status_4xx, (unsigned long long)hs.status_5xx,
                (unsigned long long)hs.body_too_large);
    }
    fprintf(out, "# HELP stagein_start_time_seconds When stageind started (unix time).\n"
                 "# TYPE stagein_start_time_seconds gauge\nstagein_start_time_seconds %lld\n",
            (long long)c->started);
    if (hook)
        hook(out, hook_arg);
    fclose(out);
    http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}

/* An optional body that must be a JSON object of the fields known (a NULL
 * terminated list): true with *root (NULL for an empty body), or false after
 * answering 400 naming what was wrong. */
static bool object_body(http_request_t *req, const char *const *known, json_t **root)
{
    size_t len;
    const char *body = http_request_body(req, &len);
    *root = NULL;
    if (!len)
        return true;
    json_error_t jerr;
    if (!(*root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr))) {
        http_respond_error(req, 400, "malformed JSON at line %d, column %d: %s", jerr.line,
                           jerr.column, jerr.text);
        return false;
    }
    if (!json_is_object(*root)) {
        http_respond_error(req, 400, "the body must be a JSON object");
        return false;
    }
    const char *key;
    json_t *v;
    json_object_foreach(*root, key, v) {
        if (!control_listed(known, key)) {
            char names[256] = "";
            for (size_t i = 0; known[i]; i++)
                snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
                         i ? ", " : "", known[i]);
            http_respond_error(req, 400, "unknown field '%.64s' (known: %s)", key, names);
            return false;
        }
    }
    return true;
}

/* Short-lived S3 credentials for the caller (or, for root, for the user
 * named), so that a job's agent and tools reach the S3 endpoint with the
 * identity MUNGE gave them, and no long-term key. */
void control_on_credentials(http_request_t *req, void *arg)
{
    static const char *const known[] = {"lifetime", "uid", "gid", NULL};
    control_t *c = arg;
    identity_t who;
    json_t *root = NULL;
    si_error_t err;
    if (!control_authenticate(c, req, &who))
        return;
    pthread_mutex_lock(&c->lock);
    if (!c->sessions) {
        http_respond_error(req, 404, "this stageind serves no S3 endpoint (s3.enabled), so it "
                                     "hands out no S3 credentials");
        goto out;
    }
    int64_t lifetime = c->cred_default, uid = -1, gid = -1;
    if (!object_body(req, known, &root))
        goto out;
    if (root) {
        if (control_int_field(root, "lifetime", 60, c->cred_max, &lifetime, &err) < 0 ||
            control_int_field(root, "uid", 0, UINT32_MAX - 1, &uid, &err) < 0 ||
            control_int_field(root, "gid", 0, UINT32_MAX - 1, &gid, &err) < 0) {
            http_respond_error(req, 400, "%s", err.text);
            goto out;
        }
        if ((uid >= 0) != (gid >= 0)) {
            http_respond_error(req, 400, "fields 'uid' and 'gid' go together (credentials on "
                                         "behalf of a user)");
            goto out;
        }
    }
    if (uid < 0) {
        uid = who.uid;
        gid = who.gid;
    } else if (who.uid != 0 && ((uid_t)uid != who.uid || (gid_t)gid != who.gid)) {
        http_respond_error(req, 403, "only root may ask for another user's credentials (uid %u "
                                     "asked for uid %u)", (unsigned)who.uid, (unsigned)uid);
        goto out;
    }
    si_session_credential_t cred;
    int64_t expires = (int64_t)time(NULL) + lifetime;
    if (si_session_mint(c->sessions, (uint32_t)uid, (uint32_t)gid, expires, &cred, &err) < 0) {
        http_respond_error(req, 500, "%s", err.text);
        goto out;
    }
    char when[32];
    struct tm tm;
    time_t t = (time_t)expires;
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    si_log(c->log, SI_LOG_INFO, "S3 credentials %.16s... for uid %u until %s (asked by uid %u)",
           cred.access_key, (unsigned)uid, when, (unsigned)who.uid);
    http_respond_json(req, 201, json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:I, s:I}",
                                          "accessKeyId", cred.access_key,
                                          "secretAccessKey", cred.secret, "expiration", when,
                                          "expires", (json_int_t)expires, "s3Endpoint",
                                          c->s3_url, "region", c->s3_region,
                                          "uid", (json_int_t)uid, "gid", (json_int_t)gid));
    OPENSSL_cleanse(&cred, sizeof(cred));
out:
    pthread_mutex_unlock(&c->lock);
    json_decref(root);
}

/* The scope a caller asks for: WLCG storage.stage / storage.read scopes on
 * absolute paths without "." or ".." components, space separated. */
static int scope_check(const char *scope, si_error_t *err)
{
    if (!*scope || strlen(scope) >= TOKEN_SCOPE_MAX)
        return si_errprintf(err, "scope must be 1 to %d bytes", TOKEN_SCOPE_MAX - 1);
    char copy[TOKEN_SCOPE_MAX], *save = NULL;
    snprintf(copy, sizeof(copy), "%s", scope);
    for (char *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        char *path = strncmp(t, "storage.stage:/", 15) == 0  ? t + 14
                     : strncmp(t, "storage.read:/", 14) == 0 ? t + 13
                                                              : NULL;
        if (!path)
            return si_errprintf(err, "scope '%.64s' is not storage.stage:/PATH or"
                                     " storage.read:/PATH", t);
        size_t n = strlen(path);
        if (n > 1 && path[n - 1] == '/')
            path[--n] = '\0';
        si_error_t why;
        if (n > 1 && si_key_check(path + 1, n - 1, &why) < 0)
            return si_errprintf(err, "scope '%.64s': %s", t, why.text);
    }
    return 0;
}

/* POST /api/v1/token {"lifetime": S, "scope": "..."}: a bearer token
 * stageind signs for the caller, for sites without an identity provider.
 * MUNGE and peer credentials only: a token does not beget tokens. */
void control_on_token(http_request_t *req, void *arg)
{
    static const char *const known[] = {"lifetime", "scope", NULL};
    control_t *c = arg;
    identity_t who;
    json_t *root = NULL;
    si_error_t err;
    if (!control_authenticate(c, req, &who))
        return;
    pthread_mutex_lock(&c->lock);
    if (!c->token_key) {
        http_respond_error(req, 404, "this stageind signs no tokens");
        goto out;
    }
    if (strcmp(who.method, "bearer") == 0) {
        http_respond_error(req, 403, "a bearer token cannot ask for another token: use MUNGE"
                                     " or the Unix socket");
        goto out;
    }
    int64_t lifetime = c->cred_default;
    const char *scope = TOKEN_DEFAULT_SCOPE;
    if (!object_body(req, known, &root))
        goto out;
    if (root) {
        json_t *sv = json_object_get(root, "scope");
        if (control_int_field(root, "lifetime", 60, c->cred_max, &lifetime, &err) < 0 ||
            (sv && (!json_is_string(sv) ||
                    scope_check(json_string_value(sv), &err) < 0))) {
            http_respond_error(req, 400, "%s", sv && !json_is_string(sv)
                                                   ? "field 'scope' must be a string" : err.text);
            goto out;
        }
        if (sv)
            scope = json_string_value(sv);
    }
    time_t now = time(NULL);
    char *token = token_sign(c->token_key, CONTROL_TOKEN_ISSUER, who.uid, who.gid, scope,
                             lifetime, now, &err);
    if (!token) {
        http_respond_error(req, 500, "%s", err.text);
        goto out;
    }
    si_log(c->log, SI_LOG_INFO, "token for uid %u, %lld s, scope %s", (unsigned)who.uid,
           (long long)lifetime, scope);
    http_respond_json(req, 201, json_pack("{s:s, s:s, s:I, s:s, s:I, s:I}", "token", token,
                                          "issuer", CONTROL_TOKEN_ISSUER, "expires",
                                          (json_int_t)(now + lifetime), "scope", scope, "uid",
                                          (json_int_t)who.uid, "gid", (json_int_t)who.gid));
    OPENSSL_cleanse(token, strlen(token));
    free(token);
out:
    pthread_mutex_unlock(&c->lock);
    json_decref(root);
}

/* GET /api/v1/token/key: the public key stageind's tokens verify with. */
void control_on_token_key(http_request_t *req, void *arg)
{
    control_t *c = arg;
    if (!c->token_pub)
        http_respond_error(req, 404, "this stageind signs no tokens");
    else
        http_respond(req, 200, "application/x-pem-file", c->token_pub, strlen(c->token_pub));
}

