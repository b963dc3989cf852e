#include "config.h"
#include "common/groups.h"

#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GROUPS_CACHE_USERS 256
#define GROUPS_MAX 1024

typedef struct {
    uid_t uid;
    gid_t gid;
    double fetched;            /* 0: empty slot */
    gid_t *groups;
    size_t n;
} entry_t;

struct si_groups {
    double ttl_s;
    entry_t entries[GROUPS_CACHE_USERS];
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + 1.0;
}

si_groups_t *si_groups_new(double ttl_s)
{
    si_groups_t *g = calloc(1, sizeof(*g));
    if (g)
        g->ttl_s = ttl_s;
    return g;
}

void si_groups_free(si_groups_t *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < GROUPS_CACHE_USERS; i++)
        free(g->entries[i].groups);
    free(g);
}

static void resolve(entry_t *e)
{
    free(e->groups);
    e->groups = NULL;
    e->n = 0;
    struct passwd pw, *found = NULL;
    char buf[16384];
    gid_t *list = malloc(GROUPS_MAX * sizeof(*list));
    int count = GROUPS_MAX;
    if (list && getpwuid_r(e->uid, &pw, buf, sizeof(buf), &found) == 0 && found &&
        getgrouplist(found->pw_name, e->gid, list, &count) >= 0) {
        e->groups = list;
        e->n = (size_t)count;
        return;
    }
    /* unknown to NSS, or more groups than we look at: the primary one only */
    if (list) {
        list[0] = e->gid;
        e->groups = list;
        e->n = 1;
    }
}

void si_groups_of(si_groups_t *g, uid_t uid, gid_t gid, const gid_t **list, size_t *n)
{
    double now = mono_now();
    entry_t *slot = NULL, *oldest = &g->entries[0];
    for (size_t i = 0; i < GROUPS_CACHE_USERS; i++) {
        entry_t *e = &g->entries[i];
        if (e->fetched && e->uid == uid && e->gid == gid) {
            slot = e;
            break;
        }
        if (e->fetched < oldest->fetched)
            oldest = e;
    }
    if (!slot || now - slot->fetched > g->ttl_s) {
        if (!slot)
            slot = oldest;
        slot->uid = uid;
        slot->gid = gid;
        slot->fetched = now;
        resolve(slot);
    }
    *list = slot->groups;
    *n = slot->n;
    if (!slot->groups) { /* out of memory: the primary group alone */
        *list = &slot->gid;
        *n = 1;
    }
}
