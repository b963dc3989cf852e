#include "config.h"
#include "common/groups.h"

#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define GROUPS_CACHE_USERS 256

typedef struct {
    uid_t uid;
    gid_t gid;
    double fetched;            /* 0: empty slot */
    gid_t *groups;
    size_t n;
} entry_t;

struct si_groups {
    pthread_mutex_t mu;
    double ttl_s;
    entry_t entries[GROUPS_CACHE_USERS];
};

si_groups_t *si_groups_new(double ttl_s)
{
    si_groups_t *g = calloc(1, sizeof(*g));
    if (g) {
        g->ttl_s = ttl_s;
        pthread_mutex_init(&g->mu, NULL);
    }
    return g;
}

void si_groups_free(si_groups_t *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < GROUPS_CACHE_USERS; i++)
        free(g->entries[i].groups);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static void resolve(entry_t *e)
{
    free(e->groups);
    e->groups = NULL;
    e->n = 0;
    struct passwd pw, *found = NULL;
    char buf[16384];
    gid_t *list = malloc(SI_GROUPS_MAX * sizeof(*list));
    int count = SI_GROUPS_MAX;
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

void si_groups_of(si_groups_t *g, uid_t uid, gid_t gid, gid_t list[SI_GROUPS_MAX], size_t *n)
{
    pthread_mutex_lock(&g->mu);
    double now = si_mono_now() + 1.0; /* never 0: 0 marks an empty slot */
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
    if (slot->groups) {
        *n = slot->n < SI_GROUPS_MAX ? slot->n : SI_GROUPS_MAX;
        memcpy(list, slot->groups, *n * sizeof(*list));
    } else { /* out of memory: the primary group alone */
        list[0] = gid;
        *n = 1;
    }
    pthread_mutex_unlock(&g->mu);
}

bool si_groups_format(const gid_t *list, size_t n, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(buf + len, size - len, "%s%u,", len ? "" : ",", (unsigned)list[i]);
        if (w < 0 || (size_t)w >= size - len) {
            buf[len] = '\0';
            return false;
        }
        len += (size_t)w;
    }
    return true;
}
