/* The tape backend against tgt's virtual tape library (Debian package tgt,
 * over libiscsi), side by side with the emulator's own limit: reading and
 * writing the cartridge's backing file directly.
 *   tape [--block BYTES] [--depth N] [--tgt-defaults] [--quick] [--json] [--dir DIR]
 * In one run, for 512 objects of 64 KiB and 512 MiB of 1 MiB and of 16 MiB
 * objects (--quick: 128, 32 and 4 objects; a recall's first object pays the
 * mount and positioning, which a set of 128 MiB did not amortize: its
 * figure is printed apart) (one aggregate per
 * size, 1 copy, 256 KiB blocks unless --block, archive.tape.queue_depth 4
 * unless --depth; the target's MaxRecvDataSegmentLength and FirstBurstLength
 * 256 KiB as the tests set them, tgt's own 8 KiB with --tgt-defaults):
 *   - push: archive_write of the set (pax stream in WRITE(6) blocks, a
 *     filemark, on which tgt fsyncs the cartridge file; the cartridge index
 *     fsync'd) against writing the same bytes to a file in the same
 *     directory in --block writes, each member's sha256 on the way as the
 *     push checks it ("wr+hash"; "write" without), and one fsync;
 *   - recall: archive_recall of the set in one batch, every object hashed
 *     and checked against its sha256 as the cache does, against reading
 *     the cartridge's backing file sequentially (1 MiB reads) with the same
 *     hashing (and plain, without: "raw");
 * MB/s (10^6 bytes), objects/s, SCSI commands per object, ratios; each
 * figure the median of 3 rounds, the direct and the backend run back to
 * back in each. The emulator and the daemon share this machine's CPUs:
 * compare ratios. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_opts.h"
#include "common/checksum.h"
#include "common/conf.h"
#include "daemon/archive/backend.h"
#include "daemon/archive/tape/drive.h"
#include "daemon/conf/schema.h"

#define PROG "tape"
/* the drive block size (archive.tape.block_size): --block BYTES */
static unsigned BLOCK = 256u << 10;
/* READ/WRITE(6)s in flight (archive.tape.queue_depth, and the bare loops'
 * second column): --depth N */
static int DEPTH = 4;
/* the target keeps tgt's own iSCSI segment sizes: --tgt-defaults */
static bool TGT_DEFAULTS;

typedef struct {
    const char *name;
    uint64_t size;
    size_t n;
} set_t;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t done, failed;
    double first_done; /* bench_mono_s() when the first object was committed */
} sink_t;

typedef struct {
    si_checksum_t *sum;
    char want[SI_CHECKSUM_TEXT_MAX];
    uint64_t bytes, size;
} session_t;

static char g_dir[PATH_MAX];
static pid_t g_tgtd;
static int g_control;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

static void cleanup(void)
{
    if (g_tgtd > 0) {
        sh("tgtadm -C %d --lld iscsi --op delete --mode target --tid 1 --force >/dev/null 2>&1; "
           "tgtadm -C %d --op delete --mode system >/dev/null 2>&1", g_control, g_control);
        for (int i = 0; i < 50 && waitpid(g_tgtd, NULL, WNOHANG) == 0; i++)
            usleep(100000);
        kill(g_tgtd, SIGTERM);
        waitpid(g_tgtd, NULL, 0);
        g_tgtd = 0;
    }
    if (g_dir[0] && !getenv("STAGEIN_BENCH_KEEP"))
        sh("rm -rf '%s'", g_dir);
}

static void die(const char *what, const char *why)
{
    cleanup();
    bench_die(PROG, what, why);
}

static int free_port(void)
{
    FILE *p = popen("python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0)); "
                    "print(s.getsockname()[1])'", "r");
    int port = 0;
    if (!p || fscanf(p, "%d", &port) != 1)
        die("free port", "python3 failed");
    pclose(p);
    return port;
}

/* tgtd with one drive (LUN 1) and a changer (LUN 2) holding 2 cartridges. */
static void vtl_start(const char *vtl, int port, int size_mb)
{
    if (sh("mkdir -p '%s' && dd if=/dev/zero of='%s/smc' bs=1k count=1 2>/dev/null && "
           "for b in B0000001 B0000002; do tgtimg --op new --device-type tape --barcode $b "
           "--size %d --type data --file '%s'/$b >/dev/null || exit 1; done",
           vtl, vtl, size_mb, vtl) != 0)
        die("tgtimg", "cannot create the cartridges (Debian package tgt)");
    g_control = port % 30000 + 1000;
    char portal[64], control[16];
    snprintf(portal, sizeof(portal), "portal=127.0.0.1:%d", port);
    snprintf(control, sizeof(control), "%d", g_control);
    if ((g_tgtd = fork()) == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execlp("tgtd", "tgtd", "-f", "-C", control, "--iscsi", portal, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 50; i++) {
        if (sh("tgtadm -C %d --op show --mode sys >/dev/null 2>&1", g_control) == 0)
            break;
        usleep(100000);
    }
    const char *A = "tgtadm -C %d --lld iscsi";
    char a[64];
    snprintf(a, sizeof(a), A, g_control);
    if (sh("%s --op new --mode target --tid 1 -T iqn.2026-12.org.stagein.bench:vtl && "
           "%s --mode logicalunit --op new --tid 1 --lun 1 -b '%s/B0000001' --device-type=tape && "
           "%s --mode logicalunit --op update --tid 1 --lun 1 --params online=0 && "
           "%s --mode logicalunit --op new --tid 1 --lun 2 -b '%s/smc' --device-type=changer && "
           "L='%s --mode logicalunit --op update --tid 1 --lun 2 --params' && "
           "$L media_home='%s' && $L element_type=4,start_address=1,quantity=1 && "
           "$L element_type=4,address=1,tid=1,lun=1 && "
           "$L element_type=1,start_address=90,quantity=1 && "
           "$L element_type=2,start_address=100,quantity=2 && "
           "$L element_type=2,address=100,barcode=B0000001,sides=1 && "
           "$L element_type=2,address=101,barcode=B0000002,sides=1 && "
           "%s --op bind --mode target --tid 1 -I ALL",
           a, a, vtl, a, a, vtl, a, vtl, a) != 0)
        die("tgtadm", "cannot set up the virtual library");
    /* the target's iSCSI segment sizes as the tests set them (tape-lib.sh):
     * tgt's own MaxRecvDataSegmentLength of 8 KiB cuts every WRITE into
     * 8 KiB Data-Out PDUs (tgtd reads each header and segment apart) */
    if (!TGT_DEFAULTS &&
        sh("T='%s --op update --mode target --tid 1 --name' && "
           "$T MaxRecvDataSegmentLength --value 262144 && $T FirstBurstLength --value 262144",
           a) != 0)
        die("tgtadm", "cannot set the target's iSCSI parameters");
}

static int sink_begin(void *arg, const archive_item_t *item, void **session, si_error_t *err)
{
    (void)arg;
    session_t *s = calloc(1, sizeof(*s));
    if (!s || !(s->sum = si_checksum_new("sha256", err))) {
        free(s);
        return si_errprintf(err, "out of memory");
    }
    snprintf(s->want, sizeof(s->want), "%s", item->checksum);
    s->size = item->size;
    *session = s;
    return 0;
}

static int sink_write(void *arg, void *session, const void *buf, size_t len, si_error_t *err)
{
    (void)arg, (void)err;
    session_t *s = session;
    si_checksum_update(s->sum, buf, len);
    s->bytes += len;
    return 0;
}

static int sink_commit(void *arg, void *session, si_error_t *err)
{
    sink_t *k = arg;
    session_t *s = session;
    pthread_mutex_lock(&k->mu);
    if (k->first_done == 0)
        k->first_done = bench_mono_s();
    pthread_mutex_unlock(&k->mu);
    char got[SI_CHECKSUM_TEXT_MAX];
    si_checksum_final(s->sum, got);
    si_checksum_free(s->sum);
    int rc = s->bytes == s->size && strcmp(got, s->want) == 0
                 ? 0 : si_errnoprintf(err, EBADMSG, "checksum mismatch");
    free(s);
    return rc;
}

static void sink_abort(void *arg, void *session)
{
    (void)arg;
    session_t *s = session;
    si_checksum_free(s->sum);
    free(s);
}

static void sink_done(void *arg, int64_t id, bool ok, const char *why)
{
    sink_t *k = arg;
    (void)id;
    pthread_mutex_lock(&k->mu);
    k->done++;
    if (!ok) {
        k->failed++;
        fprintf(stderr, "%s: recall failed: %s\n", PROG, why);
    }
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

static uint64_t scsi_commands(archive_backend_t *b)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    archive_metrics(b, f);
    fclose(f);
    const char *p = strstr(text, "\nstagein_scsi_commands_total ");
    uint64_t n = p ? strtoull(p + 29, NULL, 10) : 0;
    free(text);
    return n;
}

/* Writes the set's files (pseudo-random bytes) and their sha256. */
static void make_files(const set_t *s, const char *src, char (*sums)[SI_CHECKSUM_TEXT_MAX])
{
    unsigned char *buf = malloc(1 << 20);
    uint64_t x = 0x9e3779b97f4a7c15ULL ^ s->size;
    for (size_t i = 0; i < s->n; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s-%zu", src, s->name, i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        si_checksum_t *sum = si_checksum_new("sha256", NULL);
        if (fd < 0 || !buf || !sum)
            die(path, NULL);
        for (uint64_t left = s->size; left;) {
            size_t n = left < (1 << 20) ? (size_t)left : (1 << 20);
            for (size_t k = 0; k + 8 <= n; k += 8) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                memcpy(buf + k, &x, 8);
            }
            if (write(fd, buf, n) != (ssize_t)n)
                die(path, NULL);
            si_checksum_update(sum, buf, n);
            left -= n;
        }
        si_checksum_final(sum, sums[i]);
        si_checksum_free(sum);
        close(fd);
    }
    free(buf);
}

/* The push's reference: the same bytes written to one file in --block
 * writes, each member hashed on the way when `hash` (the push checks every
 * member's sha256 against the cache's), then one fsync: the durability
 * the push has too, since tgt fsyncs the cartridge's backing file on every
 * WRITE FILEMARKS (bs_ssc; seen with strace: one fsync per push, none
 * per WRITE) and the push ends with a synchronous filemark. The time up to
 * the fsync goes into *write_s (what a page-cache-only target would
 * allow), the whole into the result. */
static double direct_write(const set_t *s, const char *src, const char *out, bool hash,
                           double *write_s)
{
    unsigned char *buf = malloc(BLOCK);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!buf || fd < 0)
        die(out, NULL);
    double t0 = bench_mono_s();
    for (size_t i = 0; i < s->n; i++) {
        char path[PATH_MAX], sum_text[SI_CHECKSUM_TEXT_MAX];
        snprintf(path, sizeof(path), "%s/%s-%zu", src, s->name, i);
        int in = open(path, O_RDONLY);
        si_checksum_t *sum = hash ? si_checksum_new("sha256", NULL) : NULL;
        if (in < 0 || (hash && !sum))
            die(path, NULL);
        ssize_t n;
        while ((n = read(in, buf, BLOCK)) > 0) {
            if (sum)
                si_checksum_update(sum, buf, (size_t)n);
            if (write(fd, buf, (size_t)n) != n)
                die(out, NULL);
        }
        if (sum) {
            si_checksum_final(sum, sum_text);
            si_checksum_free(sum);
        }
        close(in);
    }
    *write_s = bench_mono_s() - t0;
    if (fsync(fd) < 0)
        die(out, "fsync");
    double t = bench_mono_s() - t0;
    close(fd);
    unlink(out);
    free(buf);
    return t;
}

/* The cartridge's backing file read sequentially (hashing it, or not). */
static double direct_read(const char *path, bool hash, uint64_t *bytes)
{
    unsigned char *buf = malloc(1 << 20);
    int fd = open(path, O_RDONLY);
    si_checksum_t *sum = hash ? si_checksum_new("sha256", NULL) : NULL;
    if (!buf || fd < 0)
        die(path, NULL);
    double t0 = bench_mono_s();
    ssize_t n;
    *bytes = 0;
    while ((n = read(fd, buf, 1 << 20)) > 0) {
        if (sum)
            si_checksum_update(sum, buf, (size_t)n);
        *bytes += (uint64_t)n;
    }
    double t = bench_mono_s() - t0;
    char out[SI_CHECKSUM_TEXT_MAX];
    if (sum) {
        si_checksum_final(sum, out);
        si_checksum_free(sum);
    }
    close(fd);
    free(buf);
    return t;
}

/* The emulator's own limit over iSCSI: the cartridge read from BOT to end
 * of data with bare READ(6)s, `depth` of them in flight, nothing hashed or
 * delivered (the backend is closed by then). */
static double iscsi_read_loop(const char *url, int depth, uint64_t *bytes)
{
    si_error_t err = {0};
    tape_drive_t d = {.retries = 30, .retry_ms = 100};
    if (!(d.dev = scsi_open(url, &err)) || tape_drive_ready(&d, &err) < 0 ||
        tape_drive_rewind(&d, &err) < 0)
        die("iSCSI read loop", err.text);
    size_t max = 2 * (size_t)BLOCK;
    unsigned char *bufs[SCSI_QUEUE_MAX];
    for (int i = 0; i < depth; i++)
        if (!(bufs[i] = malloc(max)))
            die("memory", NULL);
    size_t started = 0, reaped = 0;
    bool end = false;
    *bytes = 0;
    double t0 = bench_mono_s();
    while (!end || reaped < started) {
        while (!end && started - reaped < (size_t)depth) {
            if (tape_drive_read_start(&d, bufs[started % (size_t)depth], max, &err) < 0)
                die("iSCSI read loop", err.text);
            started++;
        }
        void *buf;
        size_t got;
        bool fm, eod;
        if (tape_drive_read_reap(&d, &buf, &got, &fm, &eod, &err) < 0)
            die("iSCSI read loop", err.text);
        reaped++;
        *bytes += got;
        end = end || eod;
    }
    double t = bench_mono_s() - t0;
    for (int i = 0; i < depth; i++)
        free(bufs[i]);
    scsi_close(d.dev);
    return t;
}

/* The same for writing: `bytes` from BOT in WRITE(6)s of --block bytes,
 * `depth` in flight, then a synchronous filemark (the data on the medium). */
static double iscsi_write_loop(const char *url, int depth, uint64_t bytes)
{
    si_error_t err = {0};
    tape_drive_t d = {.retries = 30, .retry_ms = 100};
    if (!(d.dev = scsi_open(url, &err)) || tape_drive_ready(&d, &err) < 0 ||
        tape_drive_rewind(&d, &err) < 0)
        die("iSCSI write loop", err.text);
    unsigned char *buf = calloc(1, BLOCK);
    if (!buf)
        die("memory", NULL);
    size_t blocks = (size_t)(bytes / BLOCK), started = 0, reaped = 0;
    double t0 = bench_mono_s();
    while (reaped < blocks) {
        while (started < blocks && started - reaped < (size_t)depth) {
            scsi_cmd_t c;
            scsi_cdb_write6(&c, buf, BLOCK);
            if (scsi_start(d.dev, &c, NULL, &err) < 0)
                die("iSCSI write loop", err.text);
            started++;
        }
        void *tag;
        if (scsi_reap(d.dev, &tag, NULL, NULL, &err) < 0)
            die("iSCSI write loop", err.text);
        reaped++;
    }
    if (tape_drive_write_filemark(&d, &err) < 0)
        die("iSCSI write loop", err.text);
    double t = bench_mono_s() - t0;
    free(buf);
    scsi_close(d.dev);
    return t;
}

#define REPS 3

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v)
{
    qsort(v, REPS, sizeof(*v), cmp_double);
    return v[REPS / 2];
}

typedef struct {
    double push_s, push_direct_s, push_raw_s, push_nosync_s, recall_s, recall_start_s, read_s,
        read_raw_s;
    uint64_t bytes, read_bytes, raw_bytes;
    double push_cmds, recall_cmds;
    double read_cpu, recall_cpu, recall_tgtd_cpu; /* CPU seconds per GB */
    double write_cpu, push_cpu, push_tgtd_cpu;
} result_t;

int main(int argc, char **argv)
{
    /* --block BYTES, --depth N, --tgt-defaults (before the common options) */
    for (;;) {
        if (argc >= 2 && strcmp(argv[1], "--tgt-defaults") == 0) {
            TGT_DEFAULTS = true;
            argv[1] = argv[0];
            argv++;
            argc--;
            continue;
        }
        if (argc < 3 || (strcmp(argv[1], "--block") != 0 && strcmp(argv[1], "--depth") != 0))
            break;
        if (strcmp(argv[1], "--block") == 0) {
            BLOCK = (unsigned)strtoul(argv[2], NULL, 10);
            if (BLOCK < 512 || BLOCK % 512 || BLOCK > (8u << 20)) {
                fprintf(stderr, "%s: --block: a multiple of 512 up to 8 MiB\n", PROG);
                return 2;
            }
        } else {
            DEPTH = atoi(argv[2]);
            if (DEPTH < 1 || DEPTH > SCSI_QUEUE_MAX) {
                fprintf(stderr, "%s: --depth: 1 to %d\n", PROG, SCSI_QUEUE_MAX);
                return 2;
            }
        }
        argv[2] = argv[0];
        argv += 2;
        argc -= 2;
    }
    const bench_opts_t o = bench_options(argc, argv);
    if (sh("command -v tgtd >/dev/null && command -v tgtadm >/dev/null && "
           "command -v tgtimg >/dev/null") != 0) {
        fprintf(stderr, "%s: tgtd, tgtadm and tgtimg are needed (Debian package tgt)\n", PROG);
        return 77;
    }
#ifndef HAVE_LIBISCSI
    fprintf(stderr, "%s: built without libiscsi (install libiscsi-dev, re-run configure)\n", PROG);
    return 77;
#endif
    set_t sets[] = {{"64k", 64 << 10, o.quick ? 128 : 512},
                    {"1m", 1 << 20, o.quick ? 32 : 512},
                    {"16m", 16 << 20, o.quick ? 4 : 32}};
    size_t nsets = sizeof(sets) / sizeof(sets[0]);
    uint64_t total = 0;
    for (size_t i = 0; i < nsets; i++)
        total += sets[i].size * sets[i].n;
    snprintf(g_dir, sizeof(g_dir), "%s/tape-bench.XXXXXX", o.dir);
    if (!mkdtemp(g_dir))
        bench_die(PROG, g_dir, NULL);
    char vtl[PATH_MAX], src[PATH_MAX], state[PATH_MAX], conf_text[4096], cart[PATH_MAX];
    snprintf(vtl, sizeof(vtl), "%s/vtl", g_dir);
    snprintf(src, sizeof(src), "%s/src", g_dir);
    snprintf(state, sizeof(state), "%s/state", g_dir);
    snprintf(cart, sizeof(cart), "%s/B0000001", vtl);
    mkdir(src, 0755);
    mkdir(state, 0755);
    int port = free_port();
    vtl_start(vtl, port, (int)(total / 1000000 * (REPS + 1) + 64));
    snprintf(conf_text, sizeof(conf_text),
             "archive: { backend = \"tape\"; tape: { changer = \"iscsi://127.0.0.1:%d/"
             "iqn.2026-12.org.stagein.bench:vtl/2\"; drives = ( { device = \"iscsi://127.0.0.1:%d/"
             "iqn.2026-12.org.stagein.bench:vtl/1\"; element = 1; } ); block_size = %u; "
             "queue_depth = %d; capacity = %" PRIu64 "; %s }; };\n",
             port, port, BLOCK, DEPTH, total * (REPS + 1) + (64 << 20),
             getenv("STAGEIN_BENCH_SCSI_LOG") ? getenv("STAGEIN_BENCH_SCSI_LOG") : "");
    si_error_t err = {0};
    si_conf_t *conf = si_conf_load_string(conf_text, stagein_conf_schemas(), &err);
    if (!conf)
        die("configuration", err.text);
    sink_t k = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};
    archive_backend_opts_t bo = {conf, state,
                                 {sink_begin, sink_write, sink_commit, sink_abort, NULL, sink_done,
                                  &k, NULL, NULL, NULL},
                                 NULL};
    archive_backend_t *b = archive_tape_new(&bo, &err);
    if (!b)
        die("tape backend", err.text);
    result_t res[3] = {{0}};
    for (size_t si = 0; si < nsets; si++) {
        const set_t *s = &sets[si];
        result_t *r = &res[si];
        char (*sums)[SI_CHECKSUM_TEXT_MAX] = calloc(s->n, sizeof(*sums));
        archive_member_t *m = calloc(s->n, sizeof(*m));
        archive_placement_t *p = calloc(s->n, sizeof(*p));
        archive_item_t *items = calloc(s->n, sizeof(*items));
        char (*keys)[32] = calloc(s->n, sizeof(*keys));
        char (*paths)[PATH_MAX] = calloc(s->n, sizeof(*paths));
        if (!sums || !m || !p || !items || !keys || !paths)
            die("memory", NULL);
        make_files(s, src, sums);
        for (size_t i = 0; i < s->n; i++) {
            snprintf(keys[i], sizeof(keys[i]), "%s-%zu", s->name, i);
            snprintf(paths[i], sizeof(paths[i]), "%s/%s", src, keys[i]);
            m[i] = (archive_member_t){.bucket = "bench", .key = keys[i], .path = paths[i],
                                      .size = s->size, .mtime = 1796000000,
                                      .checksum = sums[i]};
        }
        char out[PATH_MAX];
        snprintf(out, sizeof(out), "%s/direct.bin", g_dir);
        /* REPS rounds, each direct then backend back to back; medians */
        double pt[REPS], dt[REPS], wt[REPS], nt[REPS], rt[REPS], st[REPS], ht[REPS], rawt[REPS],
            hc[REPS], rc_self[REPS], rc_tgtd[REPS], wc[REPS], pc_self[REPS], pc_tgtd[REPS];
        uint64_t c0 = 0, c1 = 0;
        double gb = s->size * s->n / 1e9;
        for (int rep = 0; rep < REPS; rep++) {
            double ignored, u0 = bench_self_cpu_seconds();
            dt[rep] = direct_write(s, src, out, true, &nt[rep]);
            wc[rep] = (bench_self_cpu_seconds() - u0) / gb;
            wt[rep] = direct_write(s, src, out, false, &ignored);
            c0 = scsi_commands(b);
            u0 = bench_self_cpu_seconds();
            double g0 = bench_cpu_seconds((int)g_tgtd);
            double t0 = bench_mono_s();
            if (archive_write(b, m, s->n, 1, p, &err) < 0)
                die("push", err.text);
            pt[rep] = bench_mono_s() - t0;
            pc_self[rep] = (bench_self_cpu_seconds() - u0) / gb;
            pc_tgtd[rep] = (bench_cpu_seconds((int)g_tgtd) - g0) / gb;
            c1 = scsi_commands(b);
        }
        r->push_direct_s = median(dt);
        r->push_raw_s = median(wt);
        r->push_nosync_s = median(nt);
        r->push_s = median(pt);
        r->write_cpu = median(wc);
        r->push_cpu = median(pc_self);
        r->push_tgtd_cpu = median(pc_tgtd);
        r->push_cmds = (double)(c1 - c0) / (double)s->n;
        r->bytes = s->size * s->n;
        for (size_t i = 0; i < s->n; i++) {
            items[i] = (archive_item_t){.object_id = (int64_t)(si * 100000 + i + 1),
                                        .bucket = "bench", .key = keys[i], .size = s->size,
                                        .ncopies = 1};
            snprintf(items[i].checksum, sizeof(items[i].checksum), "%s", sums[i]);
            items[i].copies[0] = (archive_copy_t){1, "", p[i].file_seq, p[i].position, s->size};
            snprintf(items[i].copies[0].volume, sizeof(items[i].copies[0].volume), "%s",
                     p[i].volume);
        }
        for (int rep = 0; rep < REPS; rep++) {
            archive_batch_t batch = {si * REPS + (uint64_t)rep + 1, 0, 0};
            pthread_mutex_lock(&k.mu);
            k.done = 0;
            k.first_done = 0;
            pthread_mutex_unlock(&k.mu);
            /* the direct rate: the whole cartridge file, read just before */
            double u0 = bench_self_cpu_seconds();
            ht[rep] = direct_read(cart, true, &r->read_bytes);
            hc[rep] = (bench_self_cpu_seconds() - u0) / (r->read_bytes / 1e9);
            rawt[rep] = direct_read(cart, false, &r->raw_bytes);
            c1 = scsi_commands(b);
            u0 = bench_self_cpu_seconds();
            double g0 = bench_cpu_seconds((int)g_tgtd);
            double t0 = bench_mono_s();
            if (archive_recall(b, &batch, items, s->n, &err) < 0)
                die("recall", err.text);
            pthread_mutex_lock(&k.mu);
            while (k.done < s->n)
                pthread_cond_wait(&k.cv, &k.mu);
            pthread_mutex_unlock(&k.mu);
            rt[rep] = bench_mono_s() - t0;
            st[rep] = k.first_done - t0;
            rc_self[rep] = (bench_self_cpu_seconds() - u0) / (s->size * s->n / 1e9);
            rc_tgtd[rep] = (bench_cpu_seconds((int)g_tgtd) - g0) / (s->size * s->n / 1e9);
            r->recall_cmds = (double)(scsi_commands(b) - c1) / (double)s->n;
            if (k.failed)
                die("recall", "objects failed");
        }
        r->recall_s = median(rt);
        r->recall_start_s = median(st);
        r->read_s = median(ht);
        r->read_raw_s = median(rawt);
        r->read_cpu = median(hc);
        r->recall_cpu = median(rc_self);
        r->recall_tgtd_cpu = median(rc_tgtd);
        for (size_t i = 0; i < s->n; i++)
            unlink(paths[i]);
        free(sums), free(m), free(p), free(items), free(keys), free(paths);
    }
    archive_backend_free(b);
    si_conf_free(conf);
    /* the emulator alone, at queue depth 1 and DEPTH (the cartridge holds every round's push) */
    char drive_url[128];
    snprintf(drive_url, sizeof(drive_url), "iscsi://127.0.0.1:%d/iqn.2026-12.org.stagein.bench:"
             "vtl/1", port);
    uint64_t loop_bytes[2], cart_bytes, wbytes = sets[1].size * sets[1].n;
    double loop_s[2][REPS], cart_s[REPS], wloop_s[2][REPS];
    for (int rep = 0; rep < REPS; rep++) {
        cart_s[rep] = direct_read(cart, true, &cart_bytes);
        loop_s[0][rep] = iscsi_read_loop(drive_url, 1, &loop_bytes[0]);
        loop_s[1][rep] = iscsi_read_loop(drive_url, DEPTH, &loop_bytes[1]);
    }
    /* last: these write over the cartridge from BOT */
    for (int rep = 0; rep < REPS; rep++) {
        wloop_s[0][rep] = iscsi_write_loop(drive_url, 1, wbytes);
        wloop_s[1][rep] = iscsi_write_loop(drive_url, DEPTH, wbytes);
    }
    double loop_mbps[2] = {loop_bytes[0] / 1e6 / median(loop_s[0]),
                           loop_bytes[1] / 1e6 / median(loop_s[1])};
    double wloop_mbps[2] = {wbytes / 1e6 / median(wloop_s[0]), wbytes / 1e6 / median(wloop_s[1])};
    double cart_mbps = cart_bytes / 1e6 / median(cart_s);
    cleanup();
    if (o.json) {
        printf("{");
        for (size_t si = 0; si < nsets; si++) {
            const result_t *r = &res[si];
            const char *n = sets[si].name;
            double mb = (double)r->bytes / 1e6;
            printf("%s\"%s\": {\"objects\": %zu, \"push_mbps\": %.1f, \"push_direct_mbps\": %.1f, "
                   "\"push_ratio\": %.3f, \"push_direct_raw_mbps\": %.1f, \"push_ratio_raw\": %.3f, "
                   "\"push_direct_before_fsync_mbps\": %.1f, \"push_objects_per_s\": %.1f, "
                   "\"push_scsi_per_object\": %.2f, \"write_hash_cpu_s_per_gb\": %.3f, "
                   "\"push_cpu_s_per_gb\": %.3f, \"push_tgtd_cpu_s_per_gb\": %.3f, "
                   "\"recall_mbps\": %.1f, \"read_direct_mbps\": %.1f, \"read_raw_mbps\": "
                   "%.1f, \"recall_ratio\": %.3f, \"recall_ratio_raw\": %.3f, "
                   "\"recall_objects_per_s\": %.1f, \"recall_scsi_per_object\": %.2f, "
                   "\"read_hash_cpu_s_per_gb\": %.3f, \"recall_cpu_s_per_gb\": %.3f, "
                   "\"recall_tgtd_cpu_s_per_gb\": %.3f, \"recall_first_object_s\": %.4f}",
                   si ? ", " : "", n, sets[si].n, mb / r->push_s, mb / r->push_direct_s,
                   r->push_direct_s / r->push_s, mb / r->push_raw_s, r->push_raw_s / r->push_s,
                   mb / r->push_nosync_s, sets[si].n / r->push_s, r->push_cmds, r->write_cpu,
                   r->push_cpu, r->push_tgtd_cpu, mb / r->recall_s, r->read_bytes / 1e6 / r->read_s,
                   r->raw_bytes / 1e6 / r->read_raw_s,
                   (mb / r->recall_s) / (r->read_bytes / 1e6 / r->read_s),
                   (mb / r->recall_s) / (r->raw_bytes / 1e6 / r->read_raw_s),
                   sets[si].n / r->recall_s, r->recall_cmds, r->read_cpu, r->recall_cpu,
                   r->recall_tgtd_cpu, r->recall_start_s);
        }
        printf(", \"iscsi_read_qd1_mbps\": %.1f, \"iscsi_read_qd4_mbps\": %.1f, "
               "\"iscsi_write_qd1_mbps\": %.1f, \"iscsi_write_qd4_mbps\": %.1f, "
               "\"cartridge_read_hash_mbps\": %.1f}\n", loop_mbps[0], loop_mbps[1],
               wloop_mbps[0], wloop_mbps[1], cart_mbps);
        return 0;
    }
    printf("tape backend vs the cartridge's backing file (tgt over iSCSI, %u KiB blocks%s)\n",
           BLOCK >> 10, TGT_DEFAULTS ? ", tgt's default segment sizes" : "");
    printf("%-6s %7s | %9s %9s %9s %6s %8s %6s | %9s %9s %9s %6s %8s %6s\n", "size", "objects",
           "push MB/s", "wr+hash", "write", "ratio", "objs/s", "cmd/ob", "recall", "read+hash", "read raw",
           "ratio", "objs/s", "cmd/ob");
    for (size_t si = 0; si < nsets; si++) {
        const result_t *r = &res[si];
        double mb = (double)r->bytes / 1e6;
        double rd = r->read_bytes / 1e6 / r->read_s;
        printf("%-6s %7zu | %9.1f %9.1f %9.1f %6.2f %8.1f %6.2f | %9.1f %9.1f %9.1f %6.2f %8.1f "
               "%6.2f\n", sets[si].name, sets[si].n, mb / r->push_s, mb / r->push_direct_s,
               mb / r->push_raw_s, r->push_direct_s / r->push_s, sets[si].n / r->push_s, r->push_cmds,
               mb / r->recall_s, rd, r->raw_bytes / 1e6 / r->read_raw_s, (mb / r->recall_s) / rd,
               sets[si].n / r->recall_s, r->recall_cmds);
    }
    printf("recall CPU seconds per GB (wall-clock rates move with the machine's load; "
           "these hardly do), and the recall's first object (mount, positioning, first READs):\n"
           "%-6s %12s %12s %12s %12s\n", "size", "read+hash", "backend", "tgtd", "1st object");
    for (size_t si = 0; si < nsets; si++)
        printf("%-6s %12.3f %12.3f %12.3f %10.1fms\n", sets[si].name, res[si].read_cpu,
               res[si].recall_cpu, res[si].recall_tgtd_cpu, res[si].recall_start_s * 1e3);
    printf("push (wr+hash, write: the same bytes to a file, each member's sha256 on the way or "
           "not, one fsync: tgt fsyncs on WRITE FILEMARKS)\n%-6s %12s %12s %12s %14s\n", "size",
           "wr+hash CPU", "backend CPU", "tgtd CPU", "wr+hash fsync");
    for (size_t si = 0; si < nsets; si++)
        printf("%-6s %12.3f %12.3f %12.3f %13.0f%%\n", sets[si].name, res[si].write_cpu,
               res[si].push_cpu, res[si].push_tgtd_cpu,
               100 * (1 - res[si].push_nosync_s / res[si].push_direct_s));
    printf("emulator alone, bare commands over iSCSI (no hashing), 1 | %d in flight:\n"
           "  READ(6) of the whole cartridge (%.0f MB): %.1f | %.1f MB/s (its file read+hash "
           "%.1f MB/s)\n  WRITE(6) of %.0f MB from BOT and a filemark: %.1f | %.1f MB/s\n",
           DEPTH, loop_bytes[0] / 1e6, loop_mbps[0], loop_mbps[1], cart_mbps, wbytes / 1e6,
           wloop_mbps[0], wloop_mbps[1]);
    return 0;
}
