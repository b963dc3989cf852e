/* Several stageind instances sharing one catalog: the registry of instances
 * (name, host, pid, heartbeat) and generic leases, (kind, name) claimed by one
 * instance until a time. A lease is claimed in one statement (an insert, or
 * the take-over of an expired or own lease), so of two instances racing for
 * it exactly one wins, on both engines. An instance renews all its leases
 * with its heartbeat; one whose heartbeat is older than the lease time is
 * dead and its leases are free to take.
 *
 * Times are wall-clock seconds (si_wall_now) passed by the caller: the
 * instances of a site keep their clocks in step (NTP), as the lease time
 * (seconds) is far longer than their skew. */
#ifndef STAGEIN_CATALOG_INSTANCES_H
#define STAGEIN_CATALOG_INSTANCES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "catalog/catalog.h"
#include "common/error.h"

/* The longest instance name (stageind.instance, checked by the daemon's
 * settings), lease kind and lease name. */
#define INSTANCE_NAME_MAX 64
#define LEASE_KIND_MAX 32
#define LEASE_NAME_MAX 256

/* Lease kinds the daemon uses. */
#define LEASE_OBJECT "object" /* name: the object id; held while it is recalled */
#define LEASE_VOLUME "volume" /* name: the volume label; held while queued or mounted */

typedef struct {
    char name[INSTANCE_NAME_MAX + 1];
    char host[256];
    long pid;
    double started, heartbeat;
} instance_info_t;

/* Registers (or re-registers) the instance. Refused (EEXIST) while another
 * process holds the name: its heartbeat is younger than lease_s and it is
 * not this host's process that is gone (a restart on the same host takes its
 * name back at once). The instance's leases from an earlier life are
 * dropped. */
int instance_register(catalog_t *cat, const char *name, const char *host, long pid, double now,
                      double lease_s, si_error_t *err);
/* The heartbeat: the instance's row and all its leases renewed in one
 * transaction (leases to now + lease_s). Returns -1 (ESTALE) when the row
 * is gone or belongs to another process now: the instance must stop taking
 * work. */
int instance_heartbeat(catalog_t *cat, const char *name, const char *host, long pid, double now,
                       double lease_s, si_error_t *err);
/* Removes the instance and its leases (a clean stop). */
int instance_unregister(catalog_t *cat, const char *name, si_error_t *err);
/* The instances, live and dead (heartbeat older than lease_s), by name;
 * *out malloc'd. dead_only: only those. */
int instance_list(catalog_t *cat, double now, double lease_s, bool dead_only,
                  instance_info_t **out, size_t *count, si_error_t *err);

/* Claims (kind, name) for instance until now + lease_s: 1 when it is the
 * instance's now (new, taken over after it expired, or already its own and
 * extended), 0 when another instance holds it, -1 on error. */
int lease_claim(catalog_t *cat, const char *kind, const char *name, const char *instance,
                double now, double lease_s, si_error_t *err);
/* Who holds (kind, name) now: 1 and the holder's name, 0 when nobody does
 * (none, or expired). */
int lease_holder(catalog_t *cat, const char *kind, const char *name, double now, char *holder,
                 size_t size, si_error_t *err);
/* Gives a lease back (only the instance's own). 1 released, 0 not held. */
int lease_release(catalog_t *cat, const char *kind, const char *name, const char *instance,
                  si_error_t *err);
/* The object leases (LEASE_OBJECT, named by the object id) of a batch, in
 * one statement each: claimed[k] as lease_claim's 1 for objects[k] (ids
 * may repeat: each occurrence is told). 0, or -1 on error (claimed all
 * false). Released: only the instance's own; the number released. */
int lease_claim_objects(catalog_t *cat, const int64_t *objects, size_t n, const char *instance,
                        double now, double lease_s, bool *claimed, si_error_t *err);
int64_t lease_release_objects(catalog_t *cat, const int64_t *objects, size_t n,
                              const char *instance, si_error_t *err);
/* Renews every lease of the instance (instance_heartbeat does it with the
 * heartbeat); the number renewed. */
int64_t lease_renew_all(catalog_t *cat, const char *instance, double now, double lease_s,
                        si_error_t *err);
/* Drops every lease of the instance; the number dropped. */
int64_t lease_release_all(catalog_t *cat, const char *instance, si_error_t *err);
/* Calls fn for each live lease of a kind held by instances other than
 * `instance` (NULL: all), until fn returns non-zero. */
int lease_each_held(catalog_t *cat, const char *kind, const char *instance, double now,
                    int (*fn)(const char *name, const char *holder, void *arg), void *arg,
                    si_error_t *err);

/* ---- the instance's volume leases, shared by its threads ----------------------------
 *
 * One table per instance of the volume leases it holds, for every thread
 * that puts a volume in one of its drives (the recall service's reads, the
 * push's archive writes): a volume is claimed in the catalog by its first
 * user and given back only once no thread uses it and the backend no longer
 * has it loaded, so that one thread's release never drops a lease another
 * still relies on. Each caller passes its own catalog connection. */
typedef struct volume_holds volume_holds_t;

/* A table for instance (copied) with leases of lease_s; NULL when out of
 * memory. */
volume_holds_t *volume_holds_new(const char *instance, double lease_s);
void volume_holds_free(volume_holds_t *vh);
/* One more user of the volume: 1 (claimed now, or held already by a user
 * of this instance; an idle one is claimed again, as its lease may have
 * lapsed), 0 another instance holds it, -1 error. */
int volume_hold(volume_holds_t *vh, catalog_t *cat, const char *label, double now,
                si_error_t *err);
/* One user fewer; mono_now: monotonic seconds, when it went idle. true
 * when that was its last user. */
bool volume_unhold(volume_holds_t *vh, const char *label, double mono_now);
/* Whether the instance holds the volume's lease. */
bool volume_holds_has(volume_holds_t *vh, const char *label);
/* Volumes held with at least one user; all volumes held. */
size_t volume_holds_busy(volume_holds_t *vh);
size_t volume_holds_count(volume_holds_t *vh);
/* Gives back the leases of the volumes without users for at least grace
 * seconds (monotonic) for which loaded(arg, label) is not 1 (NULL: none
 * is); loaded is called without the table's lock (it may take the
 * backend's). The number given back, -1 on the first error. */
int volume_holds_release_idle(volume_holds_t *vh, catalog_t *cat, double mono_now, double grace,
                              int (*loaded)(void *arg, const char *label), void *arg,
                              si_error_t *err);

/* The request items STARTED whose object is not being recalled under a
 * live object lease (its instance died, or it is this instance's own from
 * before a restart) are queued again; the number requeued. The site-wide
 * form of requests_recover, for a catalog that several instances share. */
int64_t instance_requeue_orphans(catalog_t *cat, double now, si_error_t *err);

#endif
