/* stagein get: copy a dataset or one object from stageind's cache into
 * files (or GPU memory, checked and dropped) through libstagein, over HTTP
 * or RDMA, with a progress bar; stagein put: a file's bytes as an object. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stagein/cli.h"
#include "stagein/client.h"
#include "stagein/lib/gpu.h"
#include "stagein/stagein.h"

/* The control endpoint and MUNGE socket from the command line and the
 * configuration, as every client command resolves them. */
int cli_configure_library(cli_t *cli, stagein_t *h, const char *endpoint)
{
    si_error_t err;
    si_conf_t *conf = cli_conf(cli, &err);
    if (!conf)
        return cli_fail(cli, "%s", err.text);
    client_address_t addr;
    if (client_resolve_endpoint(endpoint, conf, &addr, &err) < 0)
        return cli_fail(cli, "%s", err.text);
    client_opts_t opts = {0};
    client_conf_opts(conf, &opts);
    if (stagein_set_option(h, STAGEIN_OPT_ENDPOINT, addr.text) != STAGEIN_SUCCESS ||
        (opts.munge_socket &&
         stagein_set_option(h, STAGEIN_OPT_MUNGE_SOCKET, opts.munge_socket) != STAGEIN_SUCCESS))
        return cli_fail(cli, "%s", stagein_last_error(h));
    return 0;
}

typedef struct {
    stagein_t *h;
    const char *path;
    uint64_t size;
    volatile int done;
    bool tty;
} bar_t;

static void *draw(void *arg)
{
    bar_t *b = arg;
    while (!b->done) {
        uint64_t got = stagein_read_progress(b->h);
        int width = 30, fill = b->size ? (int)(got * width / b->size) : width;
        fprintf(stderr, "\r%-40.40s [%.*s%*s] %5.1f%%", b->path, fill,
                "##############################", width - fill, "",
                b->size ? 100.0 * (double)got / (double)b->size : 100.0);
        usleep(200000);
    }
    return NULL;
}

static int make_parents(char *path)
{
    for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
        *p = '\0';
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc < 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

/* With --transport rdma: how the bytes came (" rdma=N http=M"), and on
 * stderr why some did not come by RDMA. */
static void transport_note(stagein_t *h, const char *path, bool rdma, char *out, size_t size)
{
    stagein_read_info_t info;
    out[0] = '\0';
    if (!rdma || stagein_read_info(h, &info) != STAGEIN_SUCCESS)
        return;
    snprintf(out, size, " rdma=%llu http=%llu", (unsigned long long)info.bytes_rdma,
             (unsigned long long)info.bytes_http);
    if (info.rdma_note[0])
        fprintf(stderr, "stagein: %s: over HTTP: %s\n", path, info.rdma_note);
}

/* One object into GPU memory, copied back and checked, then freed: the
 * path a job's data takes, without keeping it (the agent keeps it). */
static int get_gpu(cli_t *cli, stagein_t *h, const char *path, uint64_t size, const char *etag,
                   int gpu, bool rdma)
{
    si_error_t err;
    lib_cuda_t *cuda = NULL;
    lib_cuda_block_t block = {0};
    void *copy = NULL;
    int rc = 1;
    if (lib_cuda_open(gpu, &cuda, &err) < 0 ||
        lib_cuda_block_alloc(cuda, size ? size : 1, &block, &err) < 0) {
        cli_fail(cli, "%s: --gpu %d: %s", path, gpu, err.text);
        goto done;
    }
    uint64_t got = 0;
    if (stagein_read(h, path, (void *)(uintptr_t)block.ptr, size, gpu, &got) != STAGEIN_SUCCESS) {
        cli_fail(cli, "%s", stagein_last_error(h));
        goto done;
    }
    if (!(copy = malloc(size ? size : 1)) ||
        lib_cuda_copy_to_host(cuda, copy, block.ptr, size, &err) < 0) {
        cli_fail(cli, "%s: copying back from GPU %d: %s", path, gpu, copy ? err.text :
                 "out of memory");
        goto done;
    }
    char sum[STAGEIN_CHECKSUM_MAX], how[64];
    stagein_err_t e = stagein_verify(copy, size, etag, sum);
    if (e == STAGEIN_ERR_CHECKSUM) {
        cli_fail(cli, "%s: checksum mismatch in GPU memory (ETag %s, bytes %s)", path, etag, sum);
        goto done;
    }
    transport_note(h, path, rdma, how, sizeof(how));
    printf("gpu%d:%s %llu %s%s\n", gpu, path, (unsigned long long)size,
           e == STAGEIN_SUCCESS ? sum : "unverified", how);
    rc = 0;
done:
    free(copy);
    if (cuda)
        lib_cuda_block_free(cuda, &block);
    lib_cuda_close(cuda);
    return rc;
}

/* One object into DEST/bucket/key, or GPU memory with --gpu. */
static int get_one(cli_t *cli, stagein_t *h, const char *path, const char *dest, int gpu,
                   bool rdma)
{
    uint64_t size;
    char etag[STAGEIN_CHECKSUM_MAX];
    if (stagein_stat(h, path, &size, etag) != STAGEIN_SUCCESS)
        return cli_fail(cli, "%s", stagein_last_error(h));
    if (gpu >= 0)
        return get_gpu(cli, h, path, size, etag, gpu, rdma);
    char file[4096];
    int fd = -1, rc = 1;
    void *buf = NULL;
    if ((size_t)snprintf(file, sizeof(file), "%s/%s", dest, path) >= sizeof(file))
        return cli_fail(cli, "%s: destination path too long", path);
    if (make_parents(file) < 0 ||
        (fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0 ||
        ftruncate(fd, (off_t)size) < 0)
        return cli_fail(cli, "%s: %s", file, strerror(errno));
    if (size && (buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        cli_fail(cli, "%s: %s", file, strerror(errno));
        close(fd);
        return 1;
    }
    bar_t bar = {.h = h, .path = path, .size = size, .tty = isatty(2)};
    pthread_t t;
    bool drawing = bar.tty && pthread_create(&t, NULL, draw, &bar) == 0;
    uint64_t got = 0;
    stagein_err_t e = stagein_read(h, path, buf, size, -1, &got);
    bar.done = 1;
    if (drawing) {
        pthread_join(t, NULL);
        fprintf(stderr, "\r%-40.40s done%40s\n", path, "");
    }
    char sum[STAGEIN_CHECKSUM_MAX];
    if (e != STAGEIN_SUCCESS) {
        cli_fail(cli, "%s", stagein_last_error(h));
    } else if ((e = stagein_verify(size ? buf : "", size, etag, sum)) == STAGEIN_ERR_CHECKSUM) {
        cli_fail(cli, "%s: checksum mismatch (ETag %s, bytes %s)", path, etag, sum);
    } else {
        char how[64];
        transport_note(h, path, rdma, how, sizeof(how));
        printf("%s %llu %s%s\n", file, (unsigned long long)size,
               e == STAGEIN_SUCCESS ? sum : "unverified", how);
        rc = 0;
    }
    if (buf)
        munmap(buf, size);
    close(fd);
    if (rc)
        unlink(file);
    return rc;
}

/* A handle for get and put: the transport from the command line, else
 * $STAGEIN_TRANSPORT (read by stagein_open), else http; the endpoints. */
static int open_library(cli_t *cli, const char *transport, const char *endpoint,
                        stagein_t **out, bool *rdma)
{
    if (stagein_open(out) != STAGEIN_SUCCESS)
        return cli_fail(cli, "%s", *out ? stagein_last_error(*out) : "out of memory");
    if (!transport)
        transport = getenv("STAGEIN_TRANSPORT") && *getenv("STAGEIN_TRANSPORT")
                        ? getenv("STAGEIN_TRANSPORT") : "http";
    if (stagein_set_option(*out, STAGEIN_OPT_TRANSPORT, transport) != STAGEIN_SUCCESS)
        return cli_fail(cli, "--transport: %s", stagein_last_error(*out));
    *rdma = strcmp(transport, "rdma") == 0;
    /* the control API also hands out S3 credentials when none are set */
    return cli_configure_library(cli, *out, endpoint);
}

/* The options of get and put; put takes only --transport and --endpoint. */
typedef struct {
    const char *dest;
    int gpu;
    const char *transport;
    const char *endpoint;
} transfer_opts_t;

/* Parses get's options (put's when !get). Returns -1 to go on, else the
 * exit status. */
static int transfer_args(cli_t *cli, int argc, char **argv, bool get, const char *usage,
                         transfer_opts_t *o)
{
    static const struct option all[] = {
        {"dest", required_argument, NULL, 'd'},
        {"gpu", required_argument, NULL, 'g'},
        {"transport", required_argument, NULL, 't'},
        {"endpoint", required_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *shorts = "d:g:t:e:h";
    int opt;
    *o = (transfer_opts_t){.dest = ".", .gpu = -1};
    optind = 0; /* GNU getopt: 0 re-initialises its state */
    while ((opt = getopt_long(argc, argv, get ? shorts : shorts + 4, get ? all : all + 2,
                              NULL)) != -1) {
        switch (opt) {
        case 'd':
            o->dest = optarg;
            break;
        case 'g':
            o->gpu = atoi(optarg);
            if (o->gpu < 0 || strspn(optarg, "0123456789") != strlen(optarg))
                return cli_fail(cli, "--gpu '%s': expected a device number", optarg);
            break;
        case 't':
            o->transport = optarg;
            break;
        case 'e':
            o->endpoint = optarg;
            break;
        case 'h':
            printf("usage: %s\n", usage);
            return 0;
        default:
            return 2;
        }
    }
    return -1;
}

int cmd_get(cli_t *cli, int argc, char **argv)
{
    transfer_opts_t o;
    int rc = transfer_args(cli, argc, argv, true,
                           "stagein get DATASET|BUCKET/KEY [--dest DIR] [--gpu N]"
                           " [--transport rdma|http] [--endpoint URL]", &o);
    if (rc >= 0)
        return rc;
    if (optind != argc - 1)
        return cli_fail(cli, "get: name one dataset or bucket/key");
    const char *what = argv[optind];
    stagein_t *h = NULL;
    bool rdma;
    rc = 1;
    if (open_library(cli, o.transport, o.endpoint, &h, &rdma) != 0)
        goto done;
    if (strchr(what, '/')) {
        rc = get_one(cli, h, what, o.dest, o.gpu, rdma);
        goto done;
    }
    const char *datasets[] = {what, NULL};
    char id[STAGEIN_ID_MAX];
    stagein_object_t *list = NULL;
    size_t n = 0;
    if (stagein_request(h, datasets, NULL, id) != STAGEIN_SUCCESS ||
        stagein_wait(h, id, 0, NULL, NULL, NULL) != STAGEIN_SUCCESS ||
        stagein_request_objects(h, id, &list, &n) != STAGEIN_SUCCESS) {
        rc = cli_fail(cli, "%s: %s", what, stagein_last_error(h));
        goto done;
    }
    rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = get_one(cli, h, list[i].path, o.dest, o.gpu, rdma);
    stagein_objects_free(list, n);
done:
    stagein_close(h);
    return rc;
}

/* stagein put FILE BUCKET/KEY: the file's bytes as an object of a bucket
 * that takes PUTs (an archive bucket), over RDMA when asked and offered. */
int cmd_put(cli_t *cli, int argc, char **argv)
{
    transfer_opts_t o;
    int rc = transfer_args(cli, argc, argv, false,
                           "stagein put FILE BUCKET/KEY [--transport rdma|http] [--endpoint URL]",
                           &o);
    if (rc >= 0)
        return rc;
    if (optind != argc - 2 || !strchr(argv[optind + 1], '/')) {
        fprintf(stderr, "stagein: put: name one FILE and one BUCKET/KEY\n");
        return 2;
    }
    const char *file = argv[optind], *path = argv[optind + 1];
    struct stat st;
    void *buf = NULL;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    rc = 1;
    if (fd < 0)
        return cli_fail(cli, "put: %s: %s", file, strerror(errno));
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return cli_fail(cli, "put: %s: not a regular file", file);
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size && (buf = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
        close(fd);
        return cli_fail(cli, "put: %s: %s", file, strerror(errno));
    }
    stagein_t *h = NULL;
    bool rdma;
    char etag[STAGEIN_CHECKSUM_MAX], how[64];
    if (open_library(cli, o.transport, o.endpoint, &h, &rdma) != 0)
        goto done;
    if (stagein_write(h, path, size ? buf : "", size, etag) != STAGEIN_SUCCESS) {
        cli_fail(cli, "put %s: %s", path, stagein_last_error(h));
        goto done;
    }
    transport_note(h, path, rdma, how, sizeof(how));
    printf("%s %llu etag=%s%s\n", path, (unsigned long long)size, etag, how);
    rc = 0;
done:
    stagein_close(h);
    if (buf)
        munmap(buf, size);
    close(fd);
    return rc;
}
