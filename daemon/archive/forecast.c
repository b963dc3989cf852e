/* What backends that forecast by replaying their queue (sim, tape) share. */
#include "config.h"

#include "daemon/archive/backend.h"

archive_forecast_t *archive_forecast_add(archive_forecast_t *list, size_t *n, uint64_t batch,
                                         double eta_s)
{
    size_t k = 0;
    while (k < *n && list[k].batch != batch)
        k++;
    if (k == *n)
        list[(*n)++] = (archive_forecast_t){.batch = batch};
    if (eta_s > list[k].eta_s)
        list[k].eta_s = eta_s;
    return &list[k];
}
