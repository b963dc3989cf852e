/* The standard recall workloads W1..W9 (doc/workload-format.md): seeded and
 * deterministic; --quick variants are scaled down. W1-W4 are the first set;
 * W5-W9 (and W6X) cover what real sites see beside them: contiguous
 * datasets, deadlines, few drives for many volumes, bimodal sizes and small
 * jobs beside a huge one. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/array.h"
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

/* The indexes 0..n-1 in a random order: files drawn without repeats. NULL
 * with g->err set. */
static size_t *shuffled_indexes(gen_t *g, size_t n)
{
    size_t *a = malloc((n + 1) * sizeof(size_t));
    if (!a) {
        si_errprintf(g->err, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = i;
    shuffle(&g->rng, a, n);
    return a;
}

/* The workload's library: drives, robots and n empty volumes PREFIX0001...,
 * a slot for each. */
static int gen_library(gen_t *g, int drives, int robots, int n, const char *prefix)
{
    g->w->lib.drives = drives;
    g->w->lib.robots = robots;
    g->w->lib.slots = n;
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
    if (si_array_grow((void **)&w->requests, &g->cap_requests, w->nrequests + 1,
                      sizeof(*w->requests)) < 0 ||
        si_array_grow((void **)&w->req_files, &g->cap_req_files, w->nreq_files + n,
                      sizeof(*w->req_files)) < 0)
        return si_errprintf(g->err, "out of memory");
    workload_request_t *rq = &w->requests[w->nrequests++];
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

/* Writes files[0..n) (copy 0) one after another on volume from offset pos, a
 * tar header between members, as one archive write lays them down; returns
 * the offset after the last. */
static uint64_t place_run(workload_t *w, int volume, const size_t *files, size_t n, uint64_t pos)
{
    for (size_t i = 0; i < n; i++) {
        sched_copy_t *c = &w->files[files[i]].copies[0];
        c->volume = volume;
        c->offset = pos;
        pos += c->size + HEADER_GAP;
    }
    return pos;
}

/* Request arrival times: n uniform in [0, span), sorted, the first at 0. */
static void arrivals(gen_t *g, double *at, size_t n, double span)
{
    for (size_t i = 0; i < n; i++)
        at[i] = i == 0 ? 0 : floor(runif(&g->rng) * span);
    qsort(at, n, sizeof(double), cmp_double);
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
    if (gen_library(g, quick ? 4 : 8, quick ? 1 : 2, nvol, "W1") < 0 || gen_files(g, nfiles) < 0)
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
    size_t *order = shuffled_indexes(g, nfiles);
    if (!order)
        return -1;
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
    if (gen_library(g, quick ? 4 : 8, quick ? 1 : 2, nvol, "W2") < 0)
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
    size_t cap_segs[64] = {0};
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
            if (si_array_grow((void **)&segs[v], &cap_segs[v], (size_t)nsegs[v] + 1,
                              sizeof(*segs[v])) < 0) {
                si_errprintf(g->err, "out of memory");
                goto out;
            }
            segs[v][nsegs[v]++] = (seg_t){d, j, ds_k[d]};
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
    arrivals(g, at, (size_t)njobs, 7200);
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
    if (gen_library(g, quick ? 2 : 4, 1, nvol, "W3") < 0 || gen_files(g, nfiles) < 0)
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
    if (gen_library(g, 1, 1, 1, "W4") < 0 || gen_files(g, nfiles) < 0)
        return -1;
    for (size_t i = 0; i < nfiles; i++) {
        w->files[i].ncopies = 1;
        w->files[i].copies[0] = (sched_copy_t){0, 0, log_uniform(&g->rng, 1.0 * MB, 4.0 * GB)};
    }
    if (place_all_uniform(g, 1.0, 1.0) < 0)
        return -1;
    size_t *list = shuffled_indexes(g, nfiles);
    if (!list)
        return -1;
    int rc = add_request(g, 1, 0, 0, 0, list, nfiles);
    free(list);
    return rc;
}

/* ---- W5-W9 ------------------------------------------------------------------ */

/* Room on a volume for other data: the fill is where its cursor ended, plus
 * a random share of what is left. */
static void finish_volume(gen_t *g, int v, uint64_t cursor)
{
    workload_t *w = g->w;
    double cap = w->lib.profile.capacity;
    if ((double)cursor > cap)
        cursor = (uint64_t)cap;
    w->lib.volumes[v].used = cursor + (uint64_t)(runif(&g->rng) * 0.5 * (cap - (double)cursor));
}

/* Files [first, first + n) of a dataset striped round-robin over the k
 * volumes vols[], each stripe one contiguous run appended at its volume's
 * cursor after a gap of other data (up to max_gap bytes). */
static void place_dataset(gen_t *g, size_t first, size_t n, const int *vols, int k,
                          uint64_t *cursor, double max_gap, size_t *scratch)
{
    for (int j = 0; j < k; j++) {
        size_t m = 0;
        for (size_t i = (size_t)j; i < n; i += (size_t)k)
            scratch[m++] = first + i;
        int v = vols[j];
        cursor[v] = place_run(g->w, v, scratch, m,
                              cursor[v] + (uint64_t)(runif(&g->rng) * max_gap));
    }
}

/* k distinct volumes out of nvol. */
static void pick_volumes(gen_t *g, int *vols, int k, int nvol)
{
    for (int j = 0; j < k; j++) {
        bool dup;
        do {
            vols[j] = (int)rrange(&g->rng, 0, (uint64_t)nvol - 1);
            dup = false;
            for (int x = 0; x < j; x++)
                dup |= vols[x] == vols[j];
        } while (dup);
    }
}

/* Appends file f to list[0..m) unless it is there (a file once per
 * request); returns the new length. */
static size_t add_unique(size_t *list, size_t m, size_t f)
{
    for (size_t x = 0; x < m; x++)
        if (list[x] == f)
            return m;
    list[m] = f;
    return m + 1;
}

/* Random background requests: n requests over span seconds, each for 1..max
 * files drawn from files [lo, hi). */
static int background_requests(gen_t *g, uint64_t *id, size_t n, double span, size_t lo,
                               size_t hi, size_t max, size_t *list)
{
    for (size_t r = 0; r < n; r++) {
        double at = floor(runif(&g->rng) * span);
        size_t m = (size_t)rrange(&g->rng, 1, max), u = 0;
        for (size_t i = 0; i < m; i++)
            u = add_unique(list, u, (size_t)rrange(&g->rng, lo, hi - 1));
        if (add_request(g, (*id)++, at, 0, 0, list, u) < 0)
            return -1;
    }
    return 0;
}

/* W5: one dataset written at once by three drives in parallel onto three
 * volumes, in name order: the first half of the names on volume 1, the next
 * 30% on volume 2, the rest on volume 3 (each part contiguous, after other
 * data); five jobs over an hour ask for overlapping ranges of names (20-60%
 * of the dataset); three other volumes carry small random requests meanwhile.
 * 2 drives. Does the volume holding most of the work wait while drives
 * remount small volumes? */
static int gen_w5(gen_t *g, bool quick)
{
    workload_t *w = g->w;
    size_t nds = quick ? 800 : 4000, nother = quick ? 600 : 3000;
    size_t nfiles = nds + nother;
    if (gen_library(g, 2, 1, 6, "W5") < 0 || gen_files(g, nfiles) < 0)
        return -1;
    size_t *list = malloc((nfiles + 1) * sizeof(size_t));
    size_t *files = malloc((nfiles + 1) * sizeof(size_t));
    int *copy = calloc(nfiles + 1, sizeof(int));
    double at[5];
    int rc = -1;
    if (!list || !files || !copy) {
        si_errprintf(g->err, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nfiles; i++) {
        w->files[i].ncopies = 1;
        w->files[i].copies[0].size = i < nds ? log_uniform(&g->rng, 100.0 * MB, 8.0 * GB)
                                             : log_uniform(&g->rng, 1.0 * MB, 4.0 * GB);
    }
    size_t cut[4] = {0, nds / 2, nds * 8 / 10, nds};
    for (int v = 0; v < 3; v++) {
        for (size_t i = cut[v]; i < cut[v + 1]; i++)
            list[i - cut[v]] = i;
        uint64_t start = (uint64_t)(runif(&g->rng) * 0.3 * w->lib.profile.capacity);
        finish_volume(g, v, place_run(w, v, list, cut[v + 1] - cut[v], start));
    }
    for (int v = 3; v < 6; v++) {
        size_t n = 0;
        for (size_t i = nds + (size_t)(v - 3); i < nfiles; i += 3)
            files[n++] = i;
        for (size_t i = 0; i < n; i++)
            w->files[files[i]].copies[0].volume = v;
        if (place_uniform(g, v, files, copy, n,
                          (uint64_t)((0.5 + 0.4 * runif(&g->rng)) * w->lib.profile.capacity)) < 0)
            goto out;
    }
    arrivals(g, at, 5, 3600);
    uint64_t id = 1;
    for (int j = 0; j < 5; j++) {
        size_t len = (size_t)((0.2 + 0.4 * runif(&g->rng)) * (double)nds);
        size_t from = (size_t)rrange(&g->rng, 0, nds - len);
        for (size_t i = 0; i < len; i++)
            list[i] = from + i;
        shuffle(&g->rng, list, len);
        if (add_request(g, id++, at[j], 0, 0, list, len) < 0)
            goto out;
    }
    if (background_requests(g, &id, quick ? 10 : 20, 3600, nds, nfiles, 5, list) < 0)
        goto out;
    rc = 0;
out:
    free(list);
    free(files);
    free(copy);
    return rc;
}

/* W6 (W6X): ten jobs with priorities and deadlines. Datasets of 100-3,000
 * files (log-uniform 10 MB-4 GB) striped over 1-3 of 12 volumes (contiguous
 * stripes among other data); arrivals over 2 h; three jobs have priority 1 or
 * 2. A job's deadline is its arrival plus slack x the time its own data and
 * the backlog ahead of it would take on the library's drives, estimated from
 * mounts, reads and a locate per stripe; slack 2.5 leaves EDF room (W6: it
 * meets every deadline on seeds 20260101-3), 0.7 cannot be met for every job
 * (W6X). 4 drives. */
static int gen_w6_slack(gen_t *g, bool quick, double slack)
{
    workload_t *w = g->w;
    const int njobs = 10, nvol = quick ? 8 : 12;
    const tape_profile_t *p = &w->lib.profile;
    if (gen_library(g, quick ? 2 : 4, 1, nvol, "W6") < 0)
        return -1;
    size_t ds_n[10], ds_first[10], nfiles = 0;
    for (int j = 0; j < njobs; j++) {
        ds_n[j] = (size_t)log_uniform(&g->rng, quick ? 50 : 100, quick ? 800 : 3000);
        ds_first[j] = nfiles;
        nfiles += ds_n[j];
    }
    if (gen_files(g, nfiles) < 0)
        return -1;
    uint64_t cursor[12];
    for (int v = 0; v < nvol; v++)
        cursor[v] = (uint64_t)(runif(&g->rng) * 0.2 * p->capacity);
    size_t *scratch = malloc((nfiles + 1) * sizeof(size_t));
    if (!scratch)
        return si_errprintf(g->err, "out of memory");
    double at[10], work[10], longest[10];
    arrivals(g, at, (size_t)njobs, 7200);
    for (int j = 0; j < njobs; j++) {
        int k = (int)rrange(&g->rng, 1, 3), vols[3];
        pick_volumes(g, vols, k, nvol);
        double bytes = 0;
        for (size_t i = 0; i < ds_n[j]; i++) {
            sched_file_t *f = &w->files[ds_first[j] + i];
            f->ncopies = 1;
            f->copies[0].size = log_uniform(&g->rng, 10.0 * MB, 4.0 * GB);
            bytes += (double)f->copies[0].size;
        }
        place_dataset(g, ds_first[j], ds_n[j], vols, k, cursor, 200.0 * GB, scratch);
        /* Per stripe: unmount + mount + one average locate + its reads. */
        double per_stripe = tape_unmount_time(p, (uint64_t)(p->capacity / 2)) +
                            tape_mount_time(p) + 45;
        work[j] = k * per_stripe + bytes / p->rate;
        longest[j] = per_stripe + bytes / k / p->rate;
    }
    for (int v = 0; v < nvol; v++)
        finish_volume(g, v, cursor[v]);
    /* Deadlines: the backlog (work not yet done by the drives at arrival)
     * plus the job's own work, spread on the drives, but never less than its
     * longest stripe. */
    double backlog = 0;
    int rc = -1;
    for (int j = 0; j < njobs; j++) {
        if (j > 0)
            backlog -= (at[j] - at[j - 1]) * w->lib.drives;
        if (backlog < 0)
            backlog = 0;
        backlog += work[j];
        double need = backlog / w->lib.drives;
        if (need < longest[j])
            need = longest[j];
        int priority = runif(&g->rng) < 0.3 ? (int)rrange(&g->rng, 1, 2) : 0;
        for (size_t i = 0; i < ds_n[j]; i++)
            scratch[i] = ds_first[j] + i;
        shuffle(&g->rng, scratch, ds_n[j]);
        /* at least half an hour: a drive may be busy with a long pass */
        double deadline = ceil(at[j] + fmax(slack * need, slack * 1800));
        if (add_request(g, (uint64_t)j + 1, at[j], priority, deadline, scratch, ds_n[j]) < 0)
            goto out;
    }
    rc = 0;
out:
    free(scratch);
    return rc;
}

static int gen_w6(gen_t *g, bool quick)
{
    return gen_w6_slack(g, quick, 2.5);
}

static int gen_w6x(gen_t *g, bool quick)
{
    return gen_w6_slack(g, quick, 0.7);
}

/* Draws a job's files from its volumes vols[0..k) into list; returns how
 * many. */
typedef size_t (*job_draw_t)(gen_t *g, const int *vols, int k, int nvol, size_t *list,
                             const void *arg);

/* njobs jobs arriving over span seconds, each on 1..kmax (<= 4) distinct
 * volumes of nvol, with up to maxfiles files drawn by draw. */
static int volume_jobs(gen_t *g, size_t njobs, double span, int kmax, int nvol,
                       size_t maxfiles, job_draw_t draw, const void *arg)
{
    size_t *list = malloc((maxfiles + 1) * sizeof(size_t));
    double *at = malloc((njobs + 1) * sizeof(double));
    int rc = -1;
    if (!list || !at) {
        si_errprintf(g->err, "out of memory");
        goto out;
    }
    arrivals(g, at, njobs, span);
    for (size_t j = 0; j < njobs; j++) {
        int k = (int)rrange(&g->rng, 1, (uint64_t)kmax), vols[4];
        pick_volumes(g, vols, k, nvol);
        size_t m = draw(g, vols, k, nvol, list, arg);
        if (add_request(g, j + 1, at[j], 0, 0, list, m) < 0)
            goto out;
    }
    rc = 0;
out:
    free(list);
    free(at);
    return rc;
}

/* W7's jobs: 5-100 files spread over the job's volumes (file i lies on
 * volume i % nvol). */
static size_t draw_w7(gen_t *g, const int *vols, int k, int nvol, size_t *list, const void *arg)
{
    size_t per_vol = *(const size_t *)arg / (size_t)nvol;
    size_t n = (size_t)rrange(&g->rng, 5, 100), m = 0;
    for (size_t i = 0; i < n; i++)
        m = add_unique(list, m, (size_t)vols[i % (size_t)k] +
                                    (size_t)nvol * (size_t)rrange(&g->rng, 0, per_vol - 1));
    return m;
}

/* W8's jobs: 10-200 small files and 0-3 big ones (file i lies on volume
 * i % nvol, row i / nvol; every 10th row is big). */
static size_t draw_w8(gen_t *g, const int *vols, int k, int nvol, size_t *list, const void *arg)
{
    size_t rows = *(const size_t *)arg / (size_t)nvol;
    size_t nsmall = (size_t)rrange(&g->rng, 10, 200), nbig = (size_t)rrange(&g->rng, 0, 3);
    size_t m = 0;
    for (size_t i = 0; i < nsmall + nbig; i++) {
        size_t row = (size_t)rrange(&g->rng, 0, rows / 10 - 1) * 10;
        row += i >= nsmall ? 9 : (size_t)rrange(&g->rng, 0, 8);
        m = add_unique(list, m, (size_t)vols[rrange(&g->rng, 0, (uint64_t)k - 1)] +
                                    (size_t)nvol * row);
    }
    return m;
}

/* W7: few drives, many volumes. 6,000 files (log-uniform 1 MB-4 GB)
 * uniformly placed on 60 volumes filled 50-100%; 150 jobs over 4 h, each for
 * 5-100 random files from 1-4 volumes. 2 drives, 1 robot. */
static int gen_w7(gen_t *g, bool quick)
{
    workload_t *w = g->w;
    size_t nfiles = quick ? 1500 : 6000, njobs = quick ? 40 : 150;
    int nvol = quick ? 30 : 60;
    if (gen_library(g, 2, 1, nvol, "W7") < 0 || gen_files(g, nfiles) < 0)
        return -1;
    for (size_t i = 0; i < nfiles; i++)
        w->files[i] = (sched_file_t){i + 1, 1,
                                     {{(int)(i % (size_t)nvol), 0,
                                       log_uniform(&g->rng, 1.0 * MB, 4.0 * GB)}}};
    if (place_all_uniform(g, 0.5, 1.0) < 0)
        return -1;
    return volume_jobs(g, njobs, 4 * 3600, 4, nvol, 100, draw_w7, &nfiles);
}

/* W8: bimodal sizes. 10,000 files, 90% of 10-100 MB and 10% of 20-50 GB,
 * uniformly placed over 20 volumes; 60 jobs over 3 h, each for 10-200 small
 * files and 0-3 big ones of 1-3 volumes. 4 drives. */
static int gen_w8(gen_t *g, bool quick)
{
    workload_t *w = g->w;
    size_t nfiles = quick ? 3000 : 10000, njobs = quick ? 20 : 60;
    int nvol = quick ? 8 : 20;
    if (gen_library(g, quick ? 2 : 4, 1, nvol, "W8") < 0 || gen_files(g, nfiles) < 0)
        return -1;
    /* file i lies on volume i % nvol, in row i / nvol; every 10th row is big */
    for (size_t i = 0; i < nfiles; i++) {
        bool big = (i / (size_t)nvol) % 10 == 9;
        w->files[i] = (sched_file_t){i + 1, 1,
                                     {{(int)(i % (size_t)nvol), 0,
                                       big ? rrange(&g->rng, 20 * GB, 50 * GB)
                                           : rrange(&g->rng, 10 * MB, 100 * MB)}}};
    }
    if (place_all_uniform(g, 0.3, 0.9) < 0)
        return -1;
    return volume_jobs(g, njobs, 3 * 3600, 3, nvol, 203, draw_w8, &nfiles);
}

/* W9: a burst of small jobs beside a huge one. One job at t = 0 for 30,000
 * files (log-uniform 1 MB-4 GB) uniformly placed over 6 volumes; then 300
 * jobs of 1-10 random files over the first 30 minutes, from the same 6
 * volumes and 6 others. 4 drives. Do the small ones wait behind it? */
static int gen_w9(gen_t *g, bool quick)
{
    workload_t *w = g->w;
    size_t nhuge = quick ? 6000 : 30000, nsmall_files = quick ? 1200 : 6000;
    size_t njobs = quick ? 60 : 300;
    int nvol = quick ? 6 : 12, nhv = nvol / 2;
    size_t nfiles = nhuge + nsmall_files;
    if (gen_library(g, quick ? 2 : 4, 1, nvol, "W9") < 0 || gen_files(g, nfiles) < 0)
        return -1;
    for (size_t i = 0; i < nfiles; i++) {
        int v = i < nhuge ? (int)(i % (size_t)nhv) : (int)((i - nhuge) % (size_t)nvol);
        w->files[i] = (sched_file_t){i + 1, 1,
                                     {{v, 0, log_uniform(&g->rng, 1.0 * MB, 4.0 * GB)}}};
    }
    if (place_all_uniform(g, 0.6, 1.0) < 0)
        return -1;
    size_t *list = shuffled_indexes(g, nhuge);
    if (!list)
        return -1;
    uint64_t id = 1;
    int rc = add_request(g, id++, 0, 0, 0, list, nhuge);
    if (rc == 0)
        rc = background_requests(g, &id, njobs, 1800, nhuge, nfiles, 10, list);
    free(list);
    return rc;
}

const char *const workload_standard[] = {"W1", "W2", "W3", "W4", "W5", "W6", "W6X",
                                         "W7", "W8", "W9", NULL};

bool workload_is_standard(const char *name)
{
    for (const char *const *n = workload_standard; *n; n++)
        if (strcasecmp(name, *n) == 0)
            return true;
    return false;
}

int workload_generate(const char *name, bool quick, uint64_t seed, workload_t *w,
                      si_error_t *err)
{
    /* The index in this table is part of the seed: W1-W4 keep theirs. */
    static const struct {
        const char *name;
        int (*gen)(gen_t *, bool);
    } table[] = {{"W1", gen_w1}, {"W2", gen_w2}, {"W3", gen_w3},  {"W4", gen_w4},
                 {"W5", gen_w5}, {"W6", gen_w6}, {"W6X", gen_w6x}, {"W7", gen_w7},
                 {"W8", gen_w8}, {"W9", gen_w9}};
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
    return si_errprintf(err, "unknown workload '%s' (W1..W9, W6X, or a file)", name);
}
