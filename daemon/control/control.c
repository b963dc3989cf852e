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
#include "common/groups.h"
#include "common/text.h"
#include "daemon/control/identity.h"

/* ---- lifecycle ---------------------------------------------------------------- */

static int apply_opts(control_t *c, const control_opts_t *opts, si_error_t *err)
{
    if (opts->pin_lifetime_default <= 0 || opts->pin_lifetime_max < opts->pin_lifetime_default)
        return si_errprintf(err, "pin lifetime: default %lld s must be positive and at most the"
                                 " maximum %lld s",
                            (long long)opts->pin_lifetime_default,
                            (long long)opts->pin_lifetime_max);
    const char *site = opts->sitename && *opts->sitename ? opts->sitename : "stagein";
    if (strlen(site) > 64 || !si_utf8_valid(site, strlen(site)))
        return si_errprintf(err, "sitename '%.64s...' must be 1 to 64 characters of UTF-8", site);
    token_verifier_t *tokens = token_verifier_new(&opts->tokens, err);
    if (!tokens)
        return -1;
    if (c->token_key &&
        token_verifier_trust_self(tokens, CONTROL_TOKEN_ISSUER, c->token_key, err) < 0) {
        token_verifier_free(tokens);
        return -1;
    }
    char *sock = NULL, *sitename = strdup(site);
    if ((opts->munge_socket && !(sock = strdup(opts->munge_socket))) || !sitename) {
        free(sock);
        free(sitename);
        token_verifier_free(tokens);
        return si_errprintf(err, "out of memory");
    }
    pthread_mutex_lock(&c->settings);
    free(c->munge_socket);
    c->munge_socket = sock;
    c->peercred = opts->peercred;
    pthread_mutex_unlock(&c->settings);
    token_gate_set(c->gate, tokens);
    free(c->sitename);
    c->sitename = sitename;
    c->pin_default = opts->pin_lifetime_default;
    c->pin_max = opts->pin_lifetime_max;
    c->cache_capacity = opts->cache_capacity;
    c->max_user_pinned_bytes = opts->max_user_pinned_bytes;
    c->cred_default = opts->credentials_lifetime_default;
    c->cred_max = opts->credentials_lifetime_max;
    if (c->cred_default <= 0 || c->cred_max < c->cred_default) {
        /* tests and embedders that leave them out get the daemon's defaults */
        c->cred_default = 12 * 3600;
        c->cred_max = c->cred_max >= c->cred_default ? c->cred_max : 7 * 86400;
    }
    c->log = opts->log;
    return 0;
}

control_t *control_new(const control_opts_t *opts, si_error_t *err)
{
    control_t *c = calloc(1, sizeof(*c));
    if (!c) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    if (opts->token_key_path && (!(c->token_key = token_key_load(opts->token_key_path, err)) ||
                                 !(c->token_pub = token_key_public_pem(c->token_key, err)))) {
        EVP_PKEY_free(c->token_key);
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->settings, NULL);
    c->gate = opts->token_gate;
    if (!c->gate && (c->own_gate = true) && !(c->gate = token_gate_new()))
        si_errprintf(err, "out of memory");
    if (!c->gate || apply_opts(c, opts, err) < 0 || !(c->groups = si_groups_new(GROUPS_TTL_S)) ||
        !(c->requests = requests_open(opts->cat, err))) {
        if (c->gate && !c->groups)
            si_errprintf(err, "out of memory");
        si_groups_free(c->groups);
        free(c->munge_socket);
        free(c->sitename);
        if (c->own_gate)
            token_gate_free(c->gate);
        pthread_mutex_destroy(&c->settings);
        EVP_PKEY_free(c->token_key);
        free(c->token_pub);
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    c->cat = opts->cat;
    c->started = time(NULL);
    return c;
}

int control_reconfigure(control_t *c, const control_opts_t *opts, si_error_t *err)
{
    pthread_mutex_lock(&c->lock);
    int rc = apply_opts(c, opts, err);
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void control_set_stage_hook(control_t *c, void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&c->lock);
    c->stage_hook = fn;
    c->stage_hook_arg = arg;
    pthread_mutex_unlock(&c->lock);
}

void control_set_metrics_hook(control_t *c, control_metrics_fn fn, void *arg)
{
    pthread_mutex_lock(&c->lock);
    c->metrics_hook = fn;
    c->metrics_arg = arg;
    pthread_mutex_unlock(&c->lock);
}

void control_set_holder_hook(control_t *c, control_holder_fn fn, void *arg)
{
    pthread_mutex_lock(&c->lock);
    c->holder_hook = fn;
    c->holder_arg = arg;
    pthread_mutex_unlock(&c->lock);
}

void control_set_eta_hook(control_t *c, control_eta_fn fn, void *arg)
{
    pthread_mutex_lock(&c->lock);
    c->eta_hook = fn;
    c->eta_arg = arg;
    pthread_mutex_unlock(&c->lock);
}

int control_set_s3(control_t *c, const control_s3_t *s3, si_error_t *err)
{
    char *url = strdup(s3->url), *region = strdup(s3->region);
    if (!url || !region) {
        free(url);
        free(region);
        return si_errprintf(err, "out of memory");
    }
    pthread_mutex_lock(&c->lock);
    free(c->s3_url);
    free(c->s3_region);
    c->s3_url = url;
    c->s3_region = region;
    c->sessions = s3->sessions;
    pthread_mutex_unlock(&c->lock);
    return 0;
}

void control_free(control_t *c)
{
    if (!c)
        return;
    requests_close(c->requests);
    si_groups_free(c->groups);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->settings);
    free(c->munge_socket);
    free(c->s3_url);
    free(c->s3_region);
    free(c->sitename);
    if (c->own_gate)
        token_gate_free(c->gate);
    EVP_PKEY_free(c->token_key);
    free(c->token_pub);
    free(c);
}

int control_routes(control_t *c, http_server_t *server, si_error_t *err)
{
    static const struct {
        const char *method, *pattern;
        http_handler_fn fn;
    } routes[] = {
        {"GET", CONTROL_DISCOVERY_PATH, control_on_discovery},
        {"POST", "/api/v1/stage", control_on_stage},
        {"POST", "/api/v1/stage/", control_on_stage},
        {"GET", "/api/v1/stage/{id}", control_on_status},
        {"DELETE", "/api/v1/stage/{id}", control_on_delete},
        {"POST", "/api/v1/stage/{id}/cancel", control_on_cancel},
        {"POST", "/api/v1/stage/{id}/job", control_on_bind_job},
        {"POST", "/api/v1/release/{id}", control_on_release},
        {"POST", "/api/v1/archiveinfo", control_on_archiveinfo},
        {"POST", "/api/v1/archiveinfo/", control_on_archiveinfo},
        {"GET", "/api/v1/queue", control_on_queue},
        {"GET", "/api/v1/requests", control_on_requests},
        {"POST", "/api/v1/credentials", control_on_credentials},
        {"POST", "/api/v1/token", control_on_token},
        {"GET", "/api/v1/token/key", control_on_token_key},
        {"GET", "/metrics", control_on_metrics},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (http_server_route(server, routes[i].method, routes[i].pattern, routes[i].fn, c, err) < 0)
            return -1;
    c->server = server;
    return 0;
}
