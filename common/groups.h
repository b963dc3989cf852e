/* A user's groups as the system resolves them (NSS: files, LDAP, sssd), the
 * way Slurm does: the primary gid plus every supplementary group, cached
 * briefly so a burst of requests does not query the directory each time.
 * Not thread safe: one caller at a time (the control API's lock). */
#ifndef SI_GROUPS_H
#define SI_GROUPS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct si_groups si_groups_t;

/* ttl_s: how long an answer is kept. */
si_groups_t *si_groups_new(double ttl_s);
void si_groups_free(si_groups_t *g);

/* The groups of uid (gid its primary group), gid included; *list points
 * into the cache until the next call. A uid unknown to NSS has only gid. */
void si_groups_of(si_groups_t *g, uid_t uid, gid_t gid, const gid_t **list, size_t *n);

#endif
