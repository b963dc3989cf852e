/* The standard recall workloads W1..W4 (issue 3, doc/workload-format.md):
 * seeded and deterministic; --quick variants are scaled down. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "daemon/simlib/workload.h"

#define MB 1000000ULL
#define GB 1000000000ULL
#define HEADER_GAP 1024    /* pax header blocks between consecutive members */

typedef struct {
    uint64_t s;
} rng_t;

static uint64_t rnext(rng_t *r)
{
    /* splitmix64: small, fast, and the same sequence on every platform. */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static double runif(rng_t *r)
{
    return (double)(rnext(r) >> 11) / 9007199254740992.0;
}

static uint64_t rrange(rng_t *r, uint64_t lo, uint64_t hi) /* [lo, hi] */
{
    return lo + rnext(r) % (hi - lo + 1);
}

static uint64_t log_uniform(rng_t *r, double lo, double hi)
{
    return (uint64_t)(lo * exp(runif(r) * log(hi / lo)));
}

static void shuffle(rng_t *r, size_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(rnext(r) % i);
        size_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    workload_t *w;
    rng_t rng;
    size_t cap_requests, cap_req_files;
    si_error_t *err;
} gen_t;

static int gen_volumes(gen_t *g, int n, const char *prefix)
{
    for (int v = 0; v < n; v++) {
        char label[16];
        snprintf(label, sizeof(label), "%s%04d", prefix, v + 1);
        if (simlib_config_add_volume(&g->w->lib, label, 0, g->err) < 0)
            return -1;
    }
    return 0;
}

static int gen_files(gen_t *g, size_t n)
{
    g->w->files = calloc(n + 1, sizeof(sched_file_t));
    if (!g->w->files)
        return si_errprintf(g->err, "out of memory");
    g->w->nfiles = n;
    for (size_t i = 0; i < n; i++)
        g->w->files[i].object = i + 1;
    return 0;
}

/* Places the given copies (file index, copy number) uniformly at random,
 * without overlap, on a volume filled to fill bytes: the free space is cut
 * at uniform points between the files, taken in random order. */
static int place_uniform(gen_t *g, int volume, size_t *files, int *copy, size_t n,
                         uint64_t fill)
{
    workload_t *w = g->w;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += w->files[files[i]].copies[copy[i]].size;
    if (total > fill)
        fill = total;
    uint64_t *cuts = malloc((n + 1) * sizeof(uint64_t));
    size_t *order = malloc((n + 1) * sizeof(size_t));
    if (!cuts || !order) {
        free(cuts);
        free(order);
        return si_errprintf(g->err, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        cuts[i] = (uint64_t)(runif(&g->rng) * (double)(fill - total));
        order[i] = i;
    }
    qsort(cuts, n, sizeof(uint64_t), cmp_u64);
    shuffle(&g->rng, order, n);
    uint64_t before = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        sched_copy_t *c = &w->files[files[i]].copies[copy[i]];
        c->volume = volume;
        c->offset = cuts[k] + before;
        before += c->size;
    }
    w->lib.volumes[volume].used = fill;
    free(cuts);
    free(order);
    return 0;
}

static int add_request(gen_t *g, uint64_t id, double at, int priority, double deadline,
                       const size_t *files, size_t n)
{
    workload_t *w = g->w;
    workload_request_t *rq;
    if (w->nrequests + 1 > g->cap_requests) {
        g->cap_requests = g->cap_requests ? g->cap_requests * 2 : 64;
        rq = realloc(w->requests, g->cap_requests * sizeof(*rq));
        if (!rq)
            return si_errprintf(g->err, "out of memory");
        w->requests = rq;
    }
    if (w->nreq_files + n > g->cap_req_files) {
        size_t c = g->cap_req_files ? g->cap_req_files : 1024;
        while (c < w->nreq_files + n)
            c *= 2;
        size_t *f = realloc(w->req_files, c * sizeof(size_t));
        if (!f)
            return si_errprintf(g->err, "out of memory");
        w->req_files = f;
        g->cap_req_files = c;
    }
    rq = &w->requests[w->nrequests++];
    memset(rq, 0, sizeof(*rq));
    rq->req.id = id;
    rq->req.priority = priority;
    rq->req.deadline = deadline;
    rq->at = at;
    rq->first = w->nreq_files;
    rq->n = n;
    memcpy(&w->req_files[w->nreq_files], files, n * sizeof(size_t));
    w->nreq_files += n;
    return 0;
}

/* Lays out per-volume copy lists and places them uniformly. */
static int place_all_uniform(gen_t *g, double fill_lo, double fill_hi)
{
    workload_t *w = g->w;
    int nv = w->lib.nvolumes;
    size_t *files = malloc((w->nfiles * SCHED_MAX_COPIES + 1) * sizeof(size_t));
    int *copy = malloc((w->nfiles * SCHED_MAX_COPIES + 1) * sizeof(int));
    int rc = -1;
    if (!files || !copy) {
        si_errprintf(g->err, "out of memory");
        goto out;
    }
    for (int v = 0; v < nv; v++) {
        size_t n = 0;
        for (size_t i = 0; i < w->nfiles; i++)
            for (int c = 0; c < w->files[i].ncopies; c++)
                if (w->files[i].copies[c].volume == v) {
                    files[n] = i;
                    copy[n++] = c;
                }
        double frac = fill_lo + (fill_hi - fill_lo) * runif(&g->rng);
        if (place_uniform(g, v, files, copy, n, (uint64_t)(frac * w->lib.profile.capacity)) < 0)
            goto out;
    }
    rc = 0;
out:
    free(files);
    free(copy);
    return rc;
}

/* W1: random recall. Files log-uniform 1 MB-4 GB over the volumes, 20% with
 * a second copy elsewhere; requests of 1..100 random files, all at t = 0. */
static int gen_w1(gen_t *g, bool quick)
{
    workload_t *w = g->w;
    size_t nfiles = quick ? 4000 : 20000;
    int nvol = quick ? 10 : 40;
    w->lib.drives = quick ? 4 : 8;
    w->lib.robots = quick ? 1 : 2;
    w->lib.slots = nvol;
    if (gen_volumes(g, nvol, "W1") < 0 || gen_files(g, nfiles) < 0)
        return -1;
    for (size_t i = 0; i < nfiles; i++) {
        sched_file_t *f = &w->files[i];
        uint64_t size = log_uniform(&g->rng, 1.0 * MB, 4.0 * GB);
        f->ncopies = runif(&g->rng) < 0.2 ? 2 : 1;
        f->copies[0] = (sched_copy_t){(int)rrange(&g->rng, 0, (uint64_t)nvol - 1), 0, size};
        if (f->ncopies == 2) {
            int other = (int)rrange(&g->rng, 0, (uint64_t)nvol - 2);
            if (other >= f->copies[0].volume)
                other++;
            f->copies[1] = (sched_copy_t){other, 0, size};
        }
    }
    if (place_all_uniform(g, 0.5, 1.0) < 0)
        return -1;
    size_t *order = malloc(nfiles * sizeof(size_t));
    if (!order)
        return si_errprintf(g->err, "out of memory");
    for (size_t i = 0; i < nfiles; i++)
        order[i] = i;
    shuffle(&g->rng, order, nfiles);
    uint64_t id = 1;
    for (size_t k = 0; k < nfiles;) {
        size_t n = (size_t)rrange(&g->rng, 1, 100);
        if (n > nfiles - k)
            n = nfiles - k;
        if (add_request(g, id++, 0, 0, 0, order + k, n) < 0) {
            free(order);
            return -1;
        }
        k += n;
    }
    free(order);
    return 0;
}

/* W2: job mix. Datasets of 500-5,000 files (log-uniform 1 MB-4 GB) striped
 * round-robin over 5-15 volumes, each stripe contiguous on its volume among
 * other data; 12 jobs over 2 h: 9 ask for one dataset each, 3 for halves of
 * two datasets already asked for (overlap). Files listed in name order,
 * which is not tape order. Two jobs have priority 1 and a deadline. */
static int gen_w2(gen_t *g, bool quick)
{
    workload_t *w = g->w;
    const int ndatasets = 9, njobs = 12;
    int nvol = quick ? 12 : 30;
    w->lib.drives = quick ? 4 : 8;
    w->lib.robots = quick ? 1 : 2;
    w->lib.slots = nvol;
    if (gen_volumes(g, nvol, "W2") < 0)
        return -1;
    size_t ds_n[9], ds_first[9], nfiles = 0;
    int ds_k[9];
    for (int d = 0; d < ndatasets; d++) {
        ds_n[d] = quick ? (size_t)rrange(&g->rng, 100, 1000) : (size_t)rrange(&g->rng, 500, 5000);
        ds_k[d] = quick ? (int)rrange(&g->rng, 2, 5) : (int)rrange(&g->rng, 5, 15);
        ds_first[d] = nfiles;
        nfiles += ds_n[d];
    }
    if (gen_files(g, nfiles) < 0)
        return -1;
    /* Stripes: dataset d, stripe j goes to a distinct random volume. */
    typedef struct {
        int dataset, stripe, k;
    } seg_t;
    seg_t *segs[64] = {0};
    int nsegs[64] = {0};
    int rc = -1;
    for (int d = 0; d < ndatasets; d++) {
        int vols[15];
        for (int j = 0; j < ds_k[d]; j++) {
            int v;
            bool dup;
            do {
                v = (int)rrange(&g->rng, 0, (uint64_t)nvol - 1);
                dup = false;
                for (int x = 0; x < j; x++)
                    dup |= vols[x] == v;
            } while (dup);
            vols[j] = v;
            seg_t *s = realloc(segs[v], (size_t)(nsegs[v] + 1) * sizeof(seg_t));
            if (!s) {
                si_errprintf(g->err, "out of memory");
                goto out;
            }
            segs[v] = s;
            s[nsegs[v]++] = (seg_t){d, j, ds_k[d]};
        }
        for (size_t i = 0; i < ds_n[d]; i++) {
            sched_file_t *f = &w->files[ds_first[d] + i];
            f->ncopies = 1;
            f->copies[0] = (sched_copy_t){vols[i % (size_t)ds_k[d]], 0,
                                          log_uniform(&g->rng, 1.0 * MB, 4.0 * GB)};
        }
    }
    /* Each volume: its stripes in random order, other data between them. */
    for (int v = 0; v < nvol; v++) {
        uint64_t total = 0;
        for (int s = 0; s < nsegs[v]; s++) {
            const seg_t *sg = &segs[v][s];
            for (size_t i = (size_t)sg->stripe; i < ds_n[sg->dataset]; i += (size_t)sg->k)
                total += w->files[ds_first[sg->dataset] + i].copies[0].size + HEADER_GAP;
        }
        double cap = w->lib.profile.capacity;
        uint64_t fill = (uint64_t)((0.4 + 0.5 * runif(&g->rng)) * cap);
        if (fill < total)
            fill = total;
        uint64_t free_bytes = fill - total;
        uint64_t *cuts = malloc((size_t)(nsegs[v] + 1) * sizeof(uint64_t));
        if (!cuts) {
            si_errprintf(g->err, "out of memory");
            goto out;
        }
        for (int s = 0; s < nsegs[v]; s++)
            cuts[s] = (uint64_t)(runif(&g->rng) * (double)free_bytes);
        qsort(cuts, (size_t)nsegs[v], sizeof(uint64_t), cmp_u64);
        uint64_t before = 0;
        for (int s = 0; s < nsegs[v]; s++) {
            const seg_t *sg = &segs[v][s];
            uint64_t pos = cuts[s] + before;
            for (size_t i = (size_t)sg->stripe; i < ds_n[sg->dataset]; i += (size_t)sg->k) {
                sched_copy_t *c = &w->files[ds_first[sg->dataset] + i].copies[0];
                c->offset = pos;
                pos += c->size + HEADER_GAP;
                before += c->size + HEADER_GAP;
            }
        }
        free(cuts);
        w->lib.volumes[v].used = fill;
    }
    /* Jobs: arrivals over 2 h, the first at 0. */
    double at[12];
    at[0] = 0;
    for (int j = 1; j < njobs; j++)
        at[j] = floor(runif(&g->rng) * 7200);
    qsort(at + 1, (size_t)njobs - 1, sizeof(double), cmp_double);
    size_t *list = malloc((nfiles + 1) * sizeof(size_t));
    if (!list) {
        si_errprintf(g->err, "out of memory");
        goto out;
    }
    for (int j = 0; j < njobs; j++) {
        size_t n = 0;
        if (j < ndatasets) {
            for (size_t i = 0; i < ds_n[j]; i++)
                list[n++] = ds_first[j] + i;
        } else {
            /* Half of two earlier datasets: overlaps with their jobs. */
            int a = (int)rrange(&g->rng, 0, (uint64_t)ndatasets - 1);
            int b = (a + 1 + (int)rrange(&g->rng, 0, (uint64_t)ndatasets - 2)) % ndatasets;
            int pair[2] = {a, b};
            for (int x = 0; x < 2; x++)
                for (size_t i = 0; i < ds_n[pair[x]]; i++)
                    if (runif(&g->rng) < 0.5)
                        list[n++] = ds_first[pair[x]] + i;
        }
        shuffle(&g->rng, list, n);  /* name order, unrelated to tape order */
        bool urgent = j == 5 || j == 10;
        if (add_request(g, (uint64_t)j + 1, at[j], urgent ? 1 : 0,
                        urgent ? at[j] + 4 * 3600 : 0, list, n) < 0) {
            free(list);
            goto out;
        }
    }
    free(list);
    rc = 0;
out:
    for (int v = 0; v < nvol; v++)
        free(segs[v]);
    return rc;
}

/* W3: small files. 1,000,000 files of 64 KB-1 MB (log-uniform) written in id
 * order into aggregates, 100,000 per volume, contiguous but for their tar
 * headers; directories of 5,000 consecutive files; 200 requests over the
 * first hour, each for a random half of one directory. */
static int gen_w3(gen_t *g, bool quick)
{
    workload_t *w = g->w;
    int nvol = quick ? 5 : 10;
    size_t per_vol = quick ? 20000 : 100000;
    size_t dir = quick ? 2500 : 5000;
    size_t nreq = quick ? 40 : 200;
    size_t nfiles = per_vol * (size_t)nvol;
    w->lib.drives = quick ? 2 : 4;
    w->lib.robots = 1;
    w->lib.slots = nvol;
    if (gen_volumes(g, nvol, "W3") < 0 || gen_files(g, nfiles) < 0)
        return -1;
    for (int v = 0; v < nvol; v++) {
        uint64_t pos = (uint64_t)(runif(&g->rng) * 0.5 * w->lib.profile.capacity);
        for (size_t i = 0; i < per_vol; i++) {
            sched_file_t *f = &w->files[(size_t)v * per_vol + i];
            f->ncopies = 1;
            f->copies[0] = (sched_copy_t){v, pos, log_uniform(&g->rng, 65536, 1048576)};
            pos += f->copies[0].size + HEADER_GAP;
        }
        uint64_t rest = (uint64_t)(runif(&g->rng) * (w->lib.profile.capacity - (double)pos));
        w->lib.volumes[v].used = pos + rest;
    }
    double *at = malloc(nreq * sizeof(double));
    size_t *list = malloc(dir * sizeof(size_t));
    int rc = -1;
    if (!at || !list) {
        si_errprintf(g->err, "out of memory");
        goto out;
    }
    for (size_t r = 0; r < nreq; r++)
        at[r] = floor(runif(&g->rng) * 3600);
    qsort(at, nreq, sizeof(double), cmp_double);
    size_t ndirs = nfiles / dir;
    for (size_t r = 0; r < nreq; r++) {
        size_t d = (size_t)rrange(&g->rng, 0, ndirs - 1), n = 0;
        for (size_t i = 0; i < dir; i++)
            if (runif(&g->rng) < 0.5)
                list[n++] = d * dir + i;
        shuffle(&g->rng, list, n);
        if (add_request(g, r + 1, at[r], 0, 0, list, n) < 0)
            goto out;
    }
    rc = 0;
out:
    free(at);
    free(list);
    return rc;
}

/* W4: one full volume, 2,000 files (log-uniform 1 MB-4 GB) placed uniformly,
 * one drive, head at BOT after the mount, one request for all of them. */
static int gen_w4(gen_t *g, bool quick)
{
    workload_t *w = g->w;
    size_t nfiles = quick ? 1000 : 2000;
    w->lib.drives = 1;
    w->lib.robots = 1;
    w->lib.slots = 1;
    if (gen_volumes(g, 1, "W4") < 0 || gen_files(g, nfiles) < 0)
        return -1;
    for (size_t i = 0; i < nfiles; i++) {
        w->files[i].ncopies = 1;
        w->files[i].copies[0] = (sched_copy_t){0, 0, log_uniform(&g->rng, 1.0 * MB, 4.0 * GB)};
    }
    if (place_all_uniform(g, 1.0, 1.0) < 0)
        return -1;
    size_t *list = malloc(nfiles * sizeof(size_t));
    if (!list)
        return si_errprintf(g->err, "out of memory");
    for (size_t i = 0; i < nfiles; i++)
        list[i] = i;
    shuffle(&g->rng, list, nfiles);
    int rc = add_request(g, 1, 0, 0, 0, list, nfiles);
    free(list);
    return rc;
}

int workload_generate(const char *name, bool quick, uint64_t seed, workload_t *w,
                      si_error_t *err)
{
    static const struct {
        const char *name;
        int (*gen)(gen_t *, bool);
    } table[] = {{"W1", gen_w1}, {"W2", gen_w2}, {"W3", gen_w3}, {"W4", gen_w4}};
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strcasecmp(name, table[i].name) != 0)
            continue;
        memset(w, 0, sizeof(*w));
        simlib_config_default(&w->lib);
        snprintf(w->name, sizeof(w->name), "%s", table[i].name);
        gen_t g = {.w = w, .rng = {seed * 0x9e3779b97f4a7c15ULL + i + 1}, .err = err};
        if (table[i].gen(&g, quick) < 0) {
            workload_free(w);
            return -1;
        }
        return 0;
    }
    return si_errprintf(err, "unknown workload '%s' (W1, W2, W3, W4, or a file)", name);
}
