#include "config.h"
#include "daemon/recall/eta.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"

struct eta {
    archive_backend_t *backend;
    double max_age_s;
    pthread_mutex_t mu;
    archive_forecast_t *list;
    size_t n;
    double made;               /* monotonic seconds; 0: never */
    bool unsupported;
};

eta_t *eta_new(archive_backend_t *backend, double max_age_s)
{
    eta_t *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->backend = backend;
    e->max_age_s = max_age_s;
    pthread_mutex_init(&e->mu, NULL);
    return e;
}

void eta_free(eta_t *e)
{
    if (!e)
        return;
    free(e->list);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

int eta_of(eta_t *e, uint64_t request_id, double *eta_s)
{
    if (!e)
        return 0;
    pthread_mutex_lock(&e->mu);
    double now = si_mono_now();
    if (!e->unsupported && (e->made == 0 || now - e->made > e->max_age_s)) {
        archive_forecast_t *list = NULL;
        size_t n = 0;
        si_error_t err;
        if (archive_forecast(e->backend, &list, &n, &err) == 0) {
            free(e->list);
            e->list = list;
            e->n = n;
        } else if (errno == ENOTSUP) {
            e->unsupported = true; /* the backend cannot say: never ask again */
        }
        e->made = si_mono_now();
    }
    double age = si_mono_now() - e->made;
    int found = 0;
    for (size_t i = 0; i < e->n && !found; i++)
        if (e->list[i].batch == request_id) {
            /* the forecast counts from when it was made */
            double left = e->list[i].eta_s - (age > 0 ? age : 0);
            *eta_s = left > 0 ? left : 0;
            found = 1;
        }
    pthread_mutex_unlock(&e->mu);
    return found;
}
