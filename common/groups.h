/* A user's groups as the system resolves them (NSS: files, LDAP, sssd), the
 * way Slurm does: the primary gid plus every supplementary group, cached
 * briefly so a burst of requests does not query the directory each time.
 * Thread safe. */
#ifndef SI_GROUPS_H
#define SI_GROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct si_groups si_groups_t;

/* ttl_s: how long an answer is kept. */
si_groups_t *si_groups_new(double ttl_s);
void si_groups_free(si_groups_t *g);

#define SI_GROUPS_MAX 256   /* groups looked at per user */

/* The groups of uid (gid its primary group), gid included, copied into
 * list[0..SI_GROUPS_MAX); *n how many. A uid unknown to NSS has only gid. */
void si_groups_of(si_groups_t *g, uid_t uid, gid_t gid, gid_t list[SI_GROUPS_MAX], size_t *n);

/* ",g1,g2,...," (what the catalog's permission rules match a dataset's
 * group in); "" for none. false when it did not fit (the groups past the
 * buffer are left out: fewer rights, never more). */
bool si_groups_format(const gid_t *list, size_t n, char *buf, size_t size);

#endif
