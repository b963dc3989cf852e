/* The client side of tests/bench/rdma: reads objects into this process's
 * memory as an application would (libstagein's public API only), or copies
 * the same bytes with memcpy or process_vm_writev for the baselines, and
 * prints one JSON line per run. The script starts stageind and stages the
 * objects; this program only reads.
 *
 *   rdma_read get [--threads N] [--reps N] [--chunk BYTES] [--parallel N] BUCKET/KEY...
 *       transport and provider from the environment (STAGEIN_TRANSPORT,
 *       STAGEIN_RDMA_PROVIDER, STAGEIN_RDMA_DOMAIN, STAGEIN_S3_*)
 *   rdma_read memcpy [--reps N] FILE...     from a mapping of the files
 *   rdma_read cma [--reps N] FILE...        a child process that maps the
 *       files writes them into this process (process_vm_writev)
 *   rdma_read attach SOCKET [--wait SECONDS]   until an agent attaches
 *
 * Every run reads once untimed (connections, page cache), then --reps
 * times timed, then checks the bytes (ETag for get, the files otherwise). */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stagein/stagein.h"

typedef struct {
    const char *name;       /* BUCKET/KEY or a file */
    uint64_t size;
    char etag[STAGEIN_CHECKSUM_MAX];
    unsigned char *dst;     /* its place in the destination buffer */
    const unsigned char *src; /* memcpy, cma: the file mapped */
} item_t;

typedef struct {
    item_t *items;
    size_t count;
    uint64_t total;
    unsigned char *buf;
    int threads, reps;
    const char *chunk, *parallel; /* libstagein options, NULL: its defaults */
} run_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "rdma_read: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* One destination buffer for all items, touched so that no run pays for
 * its page faults. */
static void place(run_t *r)
{
    r->total = 0;
    for (size_t i = 0; i < r->count; i++)
        r->total += r->items[i].size;
    r->buf = mmap(NULL, r->total ? r->total : 1, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r->buf == MAP_FAILED)
        die("cannot map %llu bytes of destination", (unsigned long long)r->total);
    memset(r->buf, 0, r->total);
    uint64_t off = 0;
    for (size_t i = 0; i < r->count; i++) {
        r->items[i].dst = r->buf + off;
        off += r->items[i].size;
    }
}

static void print_result(const char *mode, const run_t *r, double secs, double cpu,
                         const stagein_read_info_t *info, const char *extra)
{
    double bytes = (double)r->total * r->reps;
    printf("{\"mode\":\"%s\",\"objects\":%zu,\"bytes\":%.0f,\"seconds\":%.6f,\"gbps\":%.4f,"
           "\"cpu_s\":%.4f,\"reps\":%d,\"threads\":%d", mode, r->count, bytes, secs,
           secs > 0 ? bytes / secs / 1e9 : 0.0, cpu, r->reps, r->threads);
    if (info) {
        printf(",\"rdma_bytes\":%llu,\"http_bytes\":%llu,\"provider\":\"%s\",\"note\":\"",
               (unsigned long long)info->bytes_rdma, (unsigned long long)info->bytes_http,
               info->provider);
        for (const char *p = info->rdma_note; *p; p++)
            if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20)
                putchar(*p);
        putchar('"');
    }
    printf("%s}\n", extra ? extra : "");
}

/* ---- get: through libstagein ------------------------------------------- */

typedef struct {
    run_t *r;
    int index;
    stagein_t *h;
    stagein_read_info_t info;   /* summed over this thread's reads */
    char error[600];
} reader_t;

static stagein_t *open_handle(const run_t *r, char *error, size_t size)
{
    stagein_t *h = NULL;
    if (stagein_open(&h) != STAGEIN_SUCCESS ||
        (r->chunk && stagein_set_option(h, STAGEIN_OPT_CHUNK_SIZE, r->chunk) != STAGEIN_SUCCESS) ||
        (r->parallel && stagein_set_option(h, STAGEIN_OPT_PARALLEL, r->parallel) !=
                            STAGEIN_SUCCESS)) {
        snprintf(error, size, "%s", h ? stagein_last_error(h) : "out of memory");
        stagein_close(h);
        return NULL;
    }
    return h;
}

/* Reads every threads-th item, starting at index. */
static void *reader(void *arg)
{
    reader_t *t = arg;
    run_t *r = t->r;
    memset(&t->info, 0, sizeof(t->info));
    for (size_t i = (size_t)t->index; i < r->count && !t->error[0]; i += (size_t)r->threads) {
        item_t *it = &r->items[i];
        uint64_t got = 0;
        stagein_read_info_t one;
        if (stagein_read(t->h, it->name, it->dst, it->size, -1, &got) != STAGEIN_SUCCESS ||
            got != it->size) {
            snprintf(t->error, sizeof(t->error), "%s: %s", it->name, stagein_last_error(t->h));
            break;
        }
        stagein_read_info(t->h, &one);
        t->info.bytes_rdma += one.bytes_rdma;
        t->info.bytes_http += one.bytes_http;
        snprintf(t->info.provider, sizeof(t->info.provider), "%s", one.provider);
        if (one.rdma_note[0] && !t->info.rdma_note[0])
            snprintf(t->info.rdma_note, sizeof(t->info.rdma_note), "%s", one.rdma_note);
    }
    return NULL;
}

/* One pass over all items by the reader threads; info of the pass. */
static void pass(run_t *r, reader_t *readers, stagein_read_info_t *info)
{
    pthread_t th[64];
    for (int i = 0; i < r->threads; i++)
        pthread_create(&th[i], NULL, reader, &readers[i]);
    memset(info, 0, sizeof(*info));
    for (int i = 0; i < r->threads; i++) {
        pthread_join(th[i], NULL);
        if (readers[i].error[0])
            die("%s", readers[i].error);
        info->bytes_rdma += readers[i].info.bytes_rdma;
        info->bytes_http += readers[i].info.bytes_http;
        snprintf(info->provider, sizeof(info->provider), "%s", readers[i].info.provider);
        if (readers[i].info.rdma_note[0] && !info->rdma_note[0])
            snprintf(info->rdma_note, sizeof(info->rdma_note), "%s", readers[i].info.rdma_note);
    }
}

static int run_get(run_t *r)
{
    reader_t readers[64];
    char error[600] = "";
    if (r->threads < 1 || r->threads > 64)
        die("--threads: 1..64");
    for (int i = 0; i < r->threads; i++) {
        readers[i] = (reader_t){.r = r, .index = i};
        if (!(readers[i].h = open_handle(r, error, sizeof(error))))
            die("%s", error);
    }
    for (size_t i = 0; i < r->count; i++)
        if (stagein_stat(readers[0].h, r->items[i].name, &r->items[i].size,
                         r->items[i].etag) != STAGEIN_SUCCESS)
            die("%s: %s", r->items[i].name, stagein_last_error(readers[0].h));
    place(r);
    stagein_read_info_t info;
    pass(r, readers, &info); /* untimed: connections, fabric endpoints */
    double c0 = cpu_s(), t0 = now_s();
    stagein_read_info_t sum = {0};
    for (int rep = 0; rep < r->reps; rep++) {
        pass(r, readers, &info);
        sum.bytes_rdma += info.bytes_rdma;
        sum.bytes_http += info.bytes_http;
        snprintf(sum.provider, sizeof(sum.provider), "%s", info.provider);
        if (info.rdma_note[0] && !sum.rdma_note[0])
            snprintf(sum.rdma_note, sizeof(sum.rdma_note), "%s", info.rdma_note);
    }
    double secs = now_s() - t0, cpu = cpu_s() - c0;
    for (size_t i = 0; i < r->count; i++) {
        char sum_text[STAGEIN_CHECKSUM_MAX];
        if (stagein_verify(r->items[i].dst, r->items[i].size, r->items[i].etag, sum_text) ==
            STAGEIN_ERR_CHECKSUM)
            die("%s: the bytes read do not match its ETag (%s)", r->items[i].name, sum_text);
    }
    print_result("get", r, secs, cpu, &sum, ",\"verified\":true");
    for (int i = 0; i < r->threads; i++)
        stagein_close(readers[i].h);
    return 0;
}

/* ---- baselines: memcpy and process_vm_writev of the same files --------- */

static void map_files(run_t *r)
{
    for (size_t i = 0; i < r->count; i++) {
        item_t *it = &r->items[i];
        int fd = open(it->name, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
            die("%s: %s", it->name, strerror(errno));
        it->size = (uint64_t)st.st_size;
        it->src = mmap(NULL, it->size ? it->size : 1, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
        if (it->src == MAP_FAILED)
            die("%s: mmap: %s", it->name, strerror(errno));
        close(fd);
    }
}

static void check_copy(const run_t *r)
{
    for (size_t i = 0; i < r->count; i++)
        if (memcmp(r->items[i].dst, r->items[i].src, r->items[i].size) != 0)
            die("%s: the copy differs from the file", r->items[i].name);
}

static void copy_all(const run_t *r)
{
    for (size_t i = 0; i < r->count; i++)
        memcpy(r->items[i].dst, r->items[i].src, r->items[i].size);
}

static int run_memcpy(run_t *r)
{
    map_files(r);
    place(r);
    copy_all(r);
    double c0 = cpu_s(), t0 = now_s();
    for (int rep = 0; rep < r->reps; rep++)
        copy_all(r);
    double secs = now_s() - t0, cpu = cpu_s() - c0;
    check_copy(r);
    print_result("memcpy", r, secs, cpu, NULL, NULL);
    return 0;
}

#define CMA_PIECE (64u << 20) /* bytes per process_vm_writev */

/* The writer: this process's mapping of the files into the parent's buffer. */
static int cma_write_all(const run_t *r, pid_t to)
{
    for (size_t i = 0; i < r->count; i++) {
        const item_t *it = &r->items[i];
        for (uint64_t off = 0; off < it->size;) {
            size_t n = it->size - off < CMA_PIECE ? (size_t)(it->size - off) : CMA_PIECE;
            struct iovec local = {.iov_base = (void *)(it->src + off), .iov_len = n};
            struct iovec remote = {.iov_base = it->dst + off, .iov_len = n};
            ssize_t w = process_vm_writev(to, &local, 1, &remote, 1, 0);
            if (w <= 0)
                return -1;
            off += (uint64_t)w;
        }
    }
    return 0;
}

static int run_cma(run_t *r)
{
    int go[2], result[2];
    map_files(r);
    place(r); /* before the fork: the child knows where the buffer is */
    if (pipe(go) < 0 || pipe(result) < 0)
        die("pipe: %s", strerror(errno));
    pid_t parent = getpid(), child = fork();
    if (child < 0)
        die("fork: %s", strerror(errno));
    if (child == 0) {
        char c;
        double out[3] = {0, 0, -1};
        close(go[1]);
        close(result[0]);
        if (read(go[0], &c, 1) == 1 && cma_write_all(r, parent) == 0) {
            double c0 = cpu_s(), t0 = now_s();
            int rc = 0;
            for (int rep = 0; rep < r->reps && rc == 0; rep++)
                rc = cma_write_all(r, parent);
            out[0] = now_s() - t0;
            out[1] = cpu_s() - c0;
            out[2] = rc == 0 ? 0 : errno;
        } else {
            out[2] = errno ? errno : EIO;
        }
        _exit(write(result[1], out, sizeof(out)) == (ssize_t)sizeof(out) ? 0 : 1);
    }
    close(go[0]);
    close(result[1]);
    double out[3];
    if (write(go[1], "g", 1) != 1 || read(result[0], out, sizeof(out)) != (ssize_t)sizeof(out))
        die("the writer process failed");
    waitpid(child, NULL, 0);
    if (out[2] != 0)
        die("process_vm_writev: %s", strerror((int)out[2]));
    check_copy(r);
    print_result("cma", r, out[0], out[1], NULL, NULL);
    return 0;
}

/* ---- attach: wait for an agent, map everything ------------------------- */

static int run_attach(const char *socket_path, double wait_s)
{
    double t0 = now_s();
    stagein_attachment_t *a = NULL;
    char errbuf[512] = "";
    while (stagein_attach(socket_path, &a, errbuf, sizeof(errbuf)) != STAGEIN_SUCCESS) {
        if (now_s() - t0 > wait_s)
            die("no agent attached at %s: %s", socket_path, errbuf);
        usleep(20000);
    }
    size_t n = stagein_attachment_count(a);
    uint64_t bytes = 0, touched = 0;
    for (size_t i = 0; i < n; i++) {
        const stagein_attached_t *o = stagein_attachment_get(a, i);
        bytes += o->size;
        /* read one byte per page: the mapping is really there */
        if (o->gpu < 0)
            for (uint64_t off = 0; off < o->size; off += 4096)
                touched += ((const unsigned char *)o->data)[off];
    }
    printf("{\"mode\":\"attach\",\"objects\":%zu,\"bytes\":%llu,\"waited_s\":%.3f,"
           "\"touched\":%llu}\n", n, (unsigned long long)bytes, now_s() - t0,
           (unsigned long long)touched);
    stagein_detach(a);
    return n > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    static const struct option options[] = {
        {"threads", required_argument, NULL, 't'},
        {"reps", required_argument, NULL, 'r'},
        {"wait", required_argument, NULL, 'w'},
        {"chunk", required_argument, NULL, 'c'},
        {"parallel", required_argument, NULL, 'p'},
        {NULL, 0, NULL, 0},
    };
    run_t r = {.threads = 1, .reps = 3};
    double wait_s = 600;
    int opt;
    if (argc < 2)
        die("usage: rdma_read get|memcpy|cma|attach [--threads N] [--reps N] ITEM...");
    const char *mode = argv[1];
    optind = 2;
    while ((opt = getopt_long(argc, argv, "t:r:w:c:p:", options, NULL)) != -1) {
        if (opt == 'c')
            r.chunk = optarg;
        else if (opt == 'p')
            r.parallel = optarg;
        else if (opt == 't')
            r.threads = atoi(optarg);
        else if (opt == 'r')
            r.reps = atoi(optarg);
        else if (opt == 'w')
            wait_s = atof(optarg);
        else
            return 2;
    }
    if (optind >= argc || r.reps < 1)
        die("%s: name what to read (and --reps >= 1)", mode);
    if (strcmp(mode, "attach") == 0)
        return run_attach(argv[optind], wait_s);
    r.count = (size_t)(argc - optind);
    r.items = calloc(r.count, sizeof(*r.items));
    for (size_t i = 0; i < r.count; i++)
        r.items[i].name = argv[optind + (int)i];
    if (strcmp(mode, "get") == 0)
        return run_get(&r);
    if (strcmp(mode, "memcpy") == 0)
        return run_memcpy(&r);
    if (strcmp(mode, "cma") == 0)
        return run_cma(&r);
    die("unknown mode '%s'", mode);
}
