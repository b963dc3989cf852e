/* The catalog server's reachability, shared by a process's connections
 * (db.h): what they saw, and one log line when an outage begins and one when
 * it ends. Reported to by the engines; calls nothing of theirs. */
#include "config.h"
#include "catalog/db_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct db_health {
    pthread_mutex_t lock;
    si_log_t *log;
    char *target;
    db_health_state_t state;
};

db_health_t *db_health_new(si_log_t *log, const char *target)
{
    db_health_t *h = calloc(1, sizeof(*h));
    if (!h || !(h->target = strdup(target ? target : "catalog"))) {
        free(h);
        return NULL;
    }
    pthread_mutex_init(&h->lock, NULL);
    h->log = log;
    h->state.up = true;
    return h;
}

void db_health_free(db_health_t *h)
{
    if (!h)
        return;
    pthread_mutex_destroy(&h->lock);
    free(h->target);
    free(h);
}

void db_health_get(db_health_t *h, db_health_state_t *out)
{
    pthread_mutex_lock(&h->lock);
    *out = h->state;
    pthread_mutex_unlock(&h->lock);
}

void db_health_lost(db_health_t *h, const char *why)
{
    pthread_mutex_lock(&h->lock);
    h->state.lost++;
    snprintf(h->state.error, sizeof(h->state.error), "%s", why);
    pthread_mutex_unlock(&h->lock);
}

/* Logged once an outage: when the first reconnect fails, not when each
 * connection finds out (a restart that the first attempt rides over is no
 * outage, only a reconnect). */
void db_health_reconnect_failed(db_health_t *h, const char *why)
{
    pthread_mutex_lock(&h->lock);
    snprintf(h->state.error, sizeof(h->state.error), "%s", why);
    bool began = h->state.up;
    if (began) {
        h->state.up = false;
        h->state.down_since = time(NULL);
        h->state.outages++;
    }
    pthread_mutex_unlock(&h->lock);
    if (began && h->log)
        si_log(h->log, SI_LOG_ERROR, "catalog %s unreachable: %s; reconnecting (every 0.1 to "
               "5 s), catalog work refused until then", h->target, why);
}

void db_health_reconnected(db_health_t *h)
{
    pthread_mutex_lock(&h->lock);
    h->state.reconnects++;
    bool ended = !h->state.up;
    time_t since = h->state.down_since, now = time(NULL);
    if (ended) {
        h->state.up = true;
        h->state.down_since = 0;
        h->state.last_outage_end = now;
    }
    pthread_mutex_unlock(&h->lock);
    if (ended && h->log)
        si_log(h->log, SI_LOG_NOTICE, "catalog %s reachable again after %lld s", h->target,
               (long long)(now - since));
}
