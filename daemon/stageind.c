/* stageind: the staging daemon. main() is a ladder: options, configuration,
 * log, detach, lock, catalog, recovery, cache and recall service, control
 * API, pid file, run, then teardown in reverse order. Signals only set
 * flags. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog/catalog.h"
#include "catalog/catalog_conf.h"
#include "catalog/db.h"
#include "catalog/instances.h"
#include "catalog/requests.h"
#include "common/clock.h"
#include "common/conf.h"
#include "common/log.h"
#include "daemon/recall/eta.h"
#include "daemon/recall/recall.h"
#include "daemon/cache/cache.h"
#include "daemon/control/control.h"
#include "daemon/http/server.h"
#include "daemon/jobs/jobs.h"
#include "daemon/push/push.h"
#include "daemon/ui/ui.h"
#include "daemon/s3/s3.h"
#include "daemon/process.h"
#include "daemon/conf/stageind_conf.h"
#include "daemon/conf/schema.h"

static volatile sig_atomic_t stop_requested;
static volatile sig_atomic_t reload_requested;

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void on_reload(int sig)
{
    (void)sig;
    reload_requested = 1;
}

typedef struct {
    const char *config_path;
    bool foreground;
    stageind_overrides_t over;
} options_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: stageind [OPTIONS]\n\n"
            "  -F, --foreground      stay in the foreground (log to stderr)\n"
            "  -c, --config=FILE     configuration file (default: $STAGEIN_CONF, then\n"
            "                        " SYSCONFDIR "/stagein/stagein.conf)\n"
            "  -d, --state-dir=DIR   state directory (catalog, socket, lock, pid file)\n"
            "  -p, --port=PORT       TCP port of the control API (0: any free port)\n"
            "  -b, --bind=ADDR       TCP address to listen on (default 127.0.0.1)\n"
            "  -S, --socket=PATH     Unix socket of the control API\n"
            "  -l, --log-file=FILE   log to FILE\n"
            "      --syslog          log to syslog\n"
            "  -v, --verbose         more log detail (repeat for more)\n"
            "  -V, --version         print the version\n"
            "  -h, --help            this help\n");
}

static int parse_options(int argc, char **argv, options_t *o)
{
    static const struct option longopts[] = {
        {"foreground", no_argument, NULL, 'F'}, {"config", required_argument, NULL, 'c'},
        {"state-dir", required_argument, NULL, 'd'}, {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, 'b'},  {"socket", required_argument, NULL, 'S'},
        {"log-file", required_argument, NULL, 'l'}, {"syslog", no_argument, NULL, 'Y'},
        {"verbose", no_argument, NULL, 'v'},     {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->over.port = -1;
    int c;
    while ((c = getopt_long(argc, argv, "Fc:d:p:b:S:l:vVh", longopts, NULL)) != -1) {
        switch (c) {
        case 'F': o->foreground = true; break;
        case 'c': o->config_path = optarg; break;
        case 'd': o->over.state_dir = optarg; break;
        case 'b': o->over.bind = optarg; break;
        case 'S': o->over.socket = optarg; break;
        case 'l': o->over.log_file = optarg; break;
        case 'Y': o->over.syslog = true; break;
        case 'v': o->over.verbose++; break;
        case 'p': {
            char *end;
            errno = 0;
            long port = strtol(optarg, &end, 10);
            if (errno || *end || port < 0 || port > 65535) {
                fprintf(stderr, "stageind: --port: '%s' is not a port number (0 to 65535)\n",
                        optarg);
                return 2;
            }
            o->over.port = (int)port;
            break;
        }
        case 'V': printf("stageind %s\n", PACKAGE_VERSION); return 0;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "stageind: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return -1;
}

static si_conf_t *load_conf(const char *explicit_path, si_error_t *err)
{
    bool must_exist;
    const char *path = si_conf_default_path(explicit_path, &must_exist);
    return si_conf_load(path, must_exist, stagein_conf_schemas(), err);
}

static si_log_opts_t log_opts(const stageind_settings_t *s, bool foreground)
{
    return (si_log_opts_t){
        .ident = "stageind", .level = s->log_level,
        .file = s->log_file[0] ? s->log_file : NULL,
        /* a detached daemon without a log file logs to syslog, not to a
         * terminal it no longer has */
        .syslog = s->syslog || (!foreground && !s->log_file[0]),
        /* in the foreground, whatever else is configured, stderr sees it too */
        .stderr_too = foreground && (s->log_file[0] || s->syslog),
    };
}

static control_opts_t control_opts(const stageind_settings_t *s, catalog_t *cat, si_log_t *log)
{
    return (control_opts_t){
        .cat = cat, .log = log, .munge_socket = s->munge_socket[0] ? s->munge_socket : NULL,
        .peercred = s->peercred, .pin_lifetime_default = s->pin_lifetime,
        .pin_lifetime_max = s->pin_lifetime_max,
        .credentials_lifetime_default = s->credentials_lifetime,
        .credentials_lifetime_max = s->credentials_lifetime_max,
        .sitename = s->sitename,
        .tokens = {.issuers_file = s->token_issuers, .map_file = s->token_map,
                   .audience = s->token_audience, .skew_s = s->token_skew},
        .token_key_path = s->token_key,
    };
}

/* HUP: reread the configuration; a bad file keeps the running settings. */
static void reload(const options_t *o, stageind_settings_t *cur, si_log_t *log, control_t *ctl,
                   catalog_t *cat, push_t *push, ui_t *ui)
{
    si_error_t err;
    stageind_settings_t next;
    push_conf_t pc;
    ui_conf_t uic;
    si_conf_t *conf = load_conf(o->config_path, &err);
    if (!conf || stageind_settings(conf, &o->over, &next, &err) < 0 ||
        push_conf_from(conf, &pc, &err) < 0 || ui_conf_from(conf, &uic, &err) < 0) {
        si_log(log, SI_LOG_ERROR, "reload: %s; keeping the running configuration", err.text);
        si_conf_free(conf);
        return;
    }
    si_conf_free(conf);
    si_log_opts_t lo = log_opts(&next, o->foreground);
    control_opts_t co = control_opts(&next, cat, log);
    if (si_log_reopen(log, &lo, &err) < 0 || control_reconfigure(ctl, &co, &err) < 0 ||
        ui_reconfigure(ui, &uic, next.munge_socket[0] ? next.munge_socket : NULL, next.peercred,
                       &err) < 0) {
        si_log(log, SI_LOG_ERROR, "reload: %s; keeping the running configuration", err.text);
        return;
    }
    push_reconfigure(push, &pc, next.munge_socket[0] ? next.munge_socket : NULL, next.peercred);
    if (next.port != cur->port || strcmp(next.bind, cur->bind) != 0 ||
        strcmp(next.socket, cur->socket) != 0 || strcmp(next.catalog, cur->catalog) != 0 ||
        next.body_limit != cur->body_limit || next.threads != cur->threads)
        si_log(log, SI_LOG_WARNING, "reload: listeners, body limit, threads and the catalog"
                                    " change only at restart");
    else
        si_log(log, SI_LOG_NOTICE, "reload: configuration reread (log level %s)",
               si_log_level_name(next.log_level));
    /* keep what the running listeners use; take the rest */
    next.port = cur->port;
    memcpy(next.bind, cur->bind, sizeof(next.bind));
    memcpy(next.socket, cur->socket, sizeof(next.socket));
    memcpy(next.catalog, cur->catalog, sizeof(next.catalog));
    *cur = next;
}

/* GET /metrics: the recall engine's, the push service's and the S3 server's figures. */
typedef struct {
    recall_service_t *recall;
    push_t *push;
    s3_server_t *s3;
} metrics_sources_t;

static void metrics(FILE *out, void *arg)
{
    metrics_sources_t *m = arg;
    recall_service_metrics(out, m->recall);
    push_metrics_text(out, m->push);
    s3_server_metrics(m->s3, out);
}

static void wake_jobs(void *arg)
{
    jobs_service_wake(arg);
}

/* a forecast is a full replay of the queue: at most one each second */
#define ETA_MAX_AGE_S 1.0

static int request_eta(void *arg, int64_t request_id, double *eta_s)
{
    return eta_of(arg, (uint64_t)request_id, eta_s);
}

static int install_signals(sigset_t *blocked, sigset_t *waiting, si_error_t *err)
{
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0)
        return si_errprintf(err, "sigaction: %s", strerror(errno));
    sa.sa_handler = on_reload;
    if (sigaction(SIGHUP, &sa, NULL) < 0)
        return si_errprintf(err, "sigaction: %s", strerror(errno));
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
    /* Blocked everywhere (server threads inherit the mask); the main thread
     * takes them only inside sigsuspend, so no signal is lost between a
     * check of the flags and the wait. */
    sigemptyset(blocked);
    sigaddset(blocked, SIGTERM);
    sigaddset(blocked, SIGINT);
    sigaddset(blocked, SIGHUP);
    if (sigprocmask(SIG_BLOCK, blocked, waiting) < 0)
        return si_errprintf(err, "sigprocmask: %s", strerror(errno));
    sigdelset(waiting, SIGTERM);
    sigdelset(waiting, SIGINT);
    sigdelset(waiting, SIGHUP);
    return 0;
}

int main(int argc, char **argv)
{
    options_t o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;

    si_error_t err = {{0}};
    si_conf_t *conf = NULL;
    si_log_t *log = NULL;
    int notify_fd = -1, lock_fd = -1;
    catalog_t *cat = NULL, *cache_cat = NULL;
    cache_t *cache = NULL;
    recall_service_t *recall = NULL;
    jobs_service_t *jobs = NULL;
    eta_t *eta = NULL;
    push_t *push = NULL;
    s3_server_t *s3 = NULL;
    metrics_sources_t metrics_sources = {0};
    si_session_keys_t *sessions = NULL;
    token_gate_t *tokens = NULL;  /* the bearer token verifier: control API and S3 reads */
    control_t *ctl = NULL;
    http_server_t *http = NULL;
    ui_t *ui = NULL;
    bool pid_written = false;
    bool registered = false;  /* this instance is in the catalog's registry */
    stageind_settings_t s;
    catalog_open_opts_t catalog_opts; /* how stageind and each module open the catalog */
    db_health_t *catalog_health = NULL; /* every connection's outages, for logs and metrics */
    sigset_t blocked, waiting;
    int status = 1;

    if (!(conf = load_conf(o.config_path, &err)) || stageind_settings(conf, &o.over, &s, &err) < 0 ||
        catalog_conf_opts(conf, s.catalog, 0, &catalog_opts, &err) < 0)
        goto early_error;
    si_log_opts_t lo = log_opts(&s, o.foreground);
    if (!(log = si_log_open(&lo, &err)))
        goto early_error;
    if (!(catalog_health = db_health_new(log, s.catalog))) {
        si_errprintf(&err, "out of memory");
        goto error;
    }
    catalog_opts.health = catalog_health;
    if (!o.foreground && process_daemonize(&notify_fd, &err) < 0)
        goto error;
    if (install_signals(&blocked, &waiting, &err) < 0)
        goto error;
    umask(077); /* state files are the service's own (also in the foreground) */
    if (process_mkdirs(s.state_dir, 0711, &err) < 0 ||
        process_private_state(s.state_dir, s.catalog, &err) < 0 ||
        process_lock(s.lock_file, &lock_fd, NULL, &err) < 0)
        goto error;
    catalog_open_opts_t create = catalog_opts;
    create.flags |= CATALOG_CREATE;
    if (!(cat = catalog_open_opts(&create, &err))) {
        si_errprefix(&err, "catalog");
        goto error;
    }
    /* This instance among those sharing the catalog: its leases from an
     * earlier life dropped, then the items no live instance recalls
     * (its own interrupted ones, a dead one's) queued again. */
    recall_instance_t inst = {.lease_s = s.lease_time, .heartbeat_s = s.heartbeat_interval,
                              .volumes_per_drive = s.shared ? s.volumes_per_drive : 0};
    snprintf(inst.name, sizeof(inst.name), "%s", s.instance);
    snprintf(inst.host, sizeof(inst.host), "%s", s.host);
    if (instance_register(cat, inst.name, inst.host, (long)getpid(), si_wall_now(), inst.lease_s,
                          &err) < 0)
        goto error;
    registered = true;
    int64_t requeued = instance_requeue_orphans(cat, si_wall_now(), &err);
    if (requeued < 0)
        goto error;
    si_log(log, SI_LOG_NOTICE, "catalog %s: instance %s, %lld interrupted items queued again",
           s.catalog, inst.name, (long long)requeued);

    /* The cache has a catalog connection of its own (cache.h). */
    cache_conf_t cc;
    if (cache_conf_from(conf, s.state_dir, &cc, &err) < 0)
        goto error;
    if (s.shared) {
        snprintf(cc.instance, sizeof(cc.instance), "%s", s.instance);
        cc.lease_s = s.lease_time;
        /* one token signing key for the site, beside the shared cache: a
         * token one instance hands out is good at every instance */
        if (snprintf(s.token_key, sizeof(s.token_key), "%s/token.key", cc.dir) >=
            (int)sizeof(s.token_key)) {
            si_errprintf(&err, "cache.dir '%s': too long a path", cc.dir);
            goto error;
        }
    }
    if (
        !(cache_cat = catalog_open_opts(&catalog_opts, &err)) ||
        !(cache = cache_open(&cc, cache_cat, &err)))
        goto error;
    recall_opts_t ro = {.conf = conf, .instance = &inst, .state_dir = s.state_dir,
                        .catalog = &catalog_opts,
                        .cache = cache, .log = log};
    if (!(recall = recall_service_start(&ro, &err)))
        goto error;
    push_opts_t po = {.catalog = &catalog_opts, .cache = cache, .cache_dir = cc.dir,
                      .backend = recall_service_backend(recall), .log = log,
                      .munge_socket = s.munge_socket[0] ? s.munge_socket : NULL,
                      .peercred = s.peercred,
                      .instance = s.shared ? s.instance : NULL, .lease_s = s.lease_time,
                      .volume_holds = recall_service_volume_holds(recall)};
    if (!(push = push_service_start(conf, &po, &err)))
        goto error;
    push_conf_t pushc;
    if (push_conf_from(conf, &pushc, &err) < 0)
        goto error;
    /* several instances: one session key and one multipart area for the
     * site, in the cache directory they share, so that credentials handed
     * out by one instance and uploads begun at one are good at any other */
    const char *shared_dir = s.shared ? cc.dir : NULL;
    char session_key[PATH_MAX + 32];
    snprintf(session_key, sizeof(session_key), "%s/s3-session.key",
             shared_dir ? shared_dir : s.state_dir);
    if (!(sessions = si_session_keys_open(session_key, &err)))
        goto error;
    if (!(tokens = token_gate_new())) {
        si_errprintf(&err, "out of memory");
        goto error;
    }
    s3_opts_t so = {.tokens = tokens, .catalog = &catalog_opts, .state_dir = s.state_dir,
                    .shared_dir = shared_dir, .cache = cache,
                    .push = push, .push_bucket = pushc.bucket, .sessions = sessions,
                    .pin_lifetime_max = s.pin_lifetime_max,
                    .sitename = s.sitename, .control_port = s.port > 0 ? s.port : 0,
                    .log = log, .staged = recall_service_kick, .staged_arg = recall};
    if (!(s3 = s3_service_start(conf, &so, &err)) && err.text[0])
        goto error;
    jobs_opts_t jo = {.catalog = &catalog_opts, .log = log};
    if (jobs_conf_from(conf, &jo.conf, &err) < 0 || !(jobs = jobs_service_start(&jo, &err)))
        goto error;
    ui_conf_t uic;
    if (ui_conf_from(conf, &uic, &err) < 0)
        goto error;
    /* conf is kept: catalog_opts' strings are its own (it is read again on HUP) */

    cache_usage_t cu;
    if (cache_usage(cache, &cu, &err) < 0)
        goto error;
    control_opts_t co = control_opts(&s, cat, log);
    co.token_gate = tokens;
    co.cache_capacity = cu.capacity;
    co.max_user_pinned_bytes = s.max_user_pinned_bytes < 0 ? cu.capacity
                                                           : (uint64_t)s.max_user_pinned_bytes;
    http_server_opts_t ho = {.body_limit = s.body_limit, .timeout_s = s.timeout_s,
                             .threads = s.threads, .name = "control", .log = log};
    if (!(ctl = control_new(&co, &err)) || !(http = http_server_new(&ho, &err)) ||
        control_routes(ctl, http, &err) < 0 || push_routes(push, http, &err) < 0)
        goto error;
    metrics_sources.recall = recall;
    metrics_sources.push = push;
    metrics_sources.s3 = s3;
    control_set_metrics_hook(ctl, metrics, &metrics_sources);
    control_set_holder_hook(ctl, wake_jobs, jobs);
    if (!(eta = eta_new(recall_service_backend(recall), ETA_MAX_AGE_S))) {
        si_errprintf(&err, "out of memory");
        goto error;
    }
    control_set_eta_hook(ctl, request_eta, eta);
    control_set_stage_hook(ctl, recall_service_kick, recall);
    ui_opts_t uo = {.catalog = &catalog_opts, .state_dir = s.state_dir, .log = log,
                    .munge_socket = s.munge_socket[0] ? s.munge_socket : NULL,
                    .peercred = s.peercred, .bind = s.bind, .cache_capacity = cu.capacity,
                    .high_watermark = cc.high_watermark, .low_watermark = cc.low_watermark,
                    .metrics = metrics, .metrics_arg = &metrics_sources, .eta = request_eta,
                    .eta_arg = eta, .push = push, .cache = cache};
    if (!(ui = ui_start(&uic, &uo, &err)) || ui_routes(ui, http, &err) < 0)
        goto error;
    if (s3) {
        char url[320];
        s3_server_url(s3, url, sizeof(url));
        control_s3_t cs3 = {.sessions = sessions, .url = url, .region = s3_server_region(s3)};
        if (control_set_s3(ctl, &cs3, &err) < 0)
            goto error;
    }
    if (s.port >= 0 && http_server_listen_tcp(http, s.bind, (uint16_t)s.port, &err) < 0)
        goto error;
    if (s.socket[0] && http_server_listen_unix(http, s.socket, s.socket_mode, &err) < 0)
        goto error;
    if (http_server_start(http, &err) < 0)
        goto error;
    if (process_write_pid(s.pid_file, &err) < 0)
        goto error;
    pid_written = true;
    si_log(log, SI_LOG_NOTICE, "stageind %s started: pid %ld, state %s, control API on %s:%u%s%s",
           PACKAGE_VERSION, (long)getpid(), s.state_dir, s.port >= 0 ? s.bind : "(no tcp)",
           (unsigned)http_server_port(http), s.socket[0] ? " and " : "", s.socket);
    process_started(notify_fd, NULL);
    notify_fd = -1;

    while (!stop_requested) {
        if (reload_requested) {
            reload_requested = 0;
            reload(&o, &s, log, ctl, cat, push, ui);
            continue;
        }
        sigsuspend(&waiting);
    }
    si_log(log, SI_LOG_NOTICE, "stopping (signal)");
    status = 0;

error:
    if (status != 0) {
        si_log(log, SI_LOG_ERROR, "%s", err.text);
        process_started(notify_fd, err.text);
    }
    http_server_free(http);   /* waits for running handlers */
    ui_stop(ui);              /* its sampler asks the engine, the S3 server and the ETA */
    eta_free(eta);            /* before the backend it asks */
    s3_server_stop(s3);       /* before the push and the cache it uses */
    control_free(ctl);
    token_gate_free(tokens);  /* after the S3 server and the control that check with it */
    jobs_service_stop(jobs);
    si_session_keys_free(sessions);
    push_close(push);           /* an archive write in flight is redone at start */
    recall_service_stop(recall); /* in-flight items stay STARTED: requeued at start */
    cache_close(cache);
    catalog_close(cache_cat);
    /* a clean stop: the others need not wait for the leases to lapse */
    if (registered && instance_unregister(cat, s.instance, &err) < 0)
        si_log(log, SI_LOG_WARNING, "instance %s: %s", s.instance, err.text);
    catalog_close(cat);
    db_health_free(catalog_health); /* after every connection that reports to it */
    si_conf_free(conf);
    if (pid_written)
        unlink(s.pid_file);
    process_unlock(lock_fd);
    if (status == 0)
        si_log(log, SI_LOG_NOTICE, "stopped");
    si_log_close(log);
    return status;

early_error:
    si_conf_free(conf);
    fprintf(stderr, "stageind: %s\n", err.text);
    return 1;
}
