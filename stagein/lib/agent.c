#define _GNU_SOURCE
#include "config.h"
#include "stagein/lib/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "stagein/lib/agent_proto.h"
#include "stagein/lib/gpu.h"
#include "common/clock.h"

#define AGENT_POLL_MS 250
#define AGENT_REQUEST_WAIT_S 0   /* no limit: the job waits for its data */

typedef struct {
    char *path;
    uint64_t size;
    size_t mapped;
    char checksum[STAGEIN_CHECKSUM_MAX];
    int fd;                    /* memfd (host) */
    lib_cuda_block_t block;    /* GPU */
} held_t;

typedef struct {
    const agent_opts_t *o;
    held_t *objects;
    size_t count;
    lib_cuda_t *cuda;
    char *table;               /* the JSON answered to every attach */
    size_t table_len;
} agent_t;

static int fail_h(const agent_t *a, stagein_err_t rc, si_error_t *err)
{
    const char *text = stagein_last_error(a->o->h);
    return si_errprintf(err, "%s", *text ? text : stagein_strerror(rc));
}

/* Copies a GPU object back to host memory and checks it (the CUDA side has
 * no hashing of its own). */
static int verify_gpu(agent_t *a, held_t *o, const char *etag, si_error_t *err)
{
    void *copy = malloc(o->size ? o->size : 1);
    if (!copy)
        return si_errprintf(err, "%s: out of memory to verify it", o->path);
    int rc = lib_cuda_copy_to_host(a->cuda, copy, o->block.ptr, o->size, err);
    if (rc == 0) {
        stagein_err_t v = stagein_verify(copy, o->size, etag, o->checksum);
        if (v != STAGEIN_SUCCESS)
            rc = si_errprintf(err, "%s: %s (ETag %s, bytes %s)", o->path, stagein_strerror(v),
                              etag, o->checksum);
    }
    free(copy);
    return rc;
}

/* One object read and waiting to be checked (by a thread of its own,
 * while the next object is read: hashing is as slow as the transfer). */
typedef struct {
    agent_t *a;
    held_t *o;
    char etag[STAGEIN_CHECKSUM_MAX];
    void *map;                 /* host: the memfd mapped read-write; NULL for GPU */
    pthread_t thread;
    bool running;
    int result;
    si_error_t err;
} check_t;

/* Reads o into memory of its own; c is ready to be checked. */
static int land(agent_t *a, held_t *o, check_t *c, si_error_t *err)
{
    uint64_t size = 0;
    memset(c, 0, sizeof(*c));
    c->a = a;
    c->o = o;
    stagein_err_t rc = stagein_stat(a->o->h, o->path, &size, c->etag);
    if (rc != STAGEIN_SUCCESS)
        return fail_h(a, rc, err);
    o->size = size;
    if (a->o->gpu >= 0) {
        if (lib_cuda_block_alloc(a->cuda, size, &o->block, err) < 0)
            return -1;
        o->mapped = o->block.size;
        rc = stagein_read(a->o->h, o->path, (void *)(uintptr_t)o->block.ptr, size, a->o->gpu,
                          &size);
        return rc == STAGEIN_SUCCESS ? 0 : fail_h(a, rc, err);
    }
    o->fd = memfd_create(o->path, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (o->fd < 0 || ftruncate(o->fd, (off_t)size) < 0)
        return si_errnoprintf(err, errno, "%s: cannot make a memfd of %llu bytes: %s", o->path,
                              (unsigned long long)size, strerror(errno));
    o->mapped = size;
    if (size == 0)
        return 0;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, o->fd, 0);
    if (p == MAP_FAILED)
        return si_errnoprintf(err, errno, "%s: cannot map its memfd: %s", o->path,
                              strerror(errno));
    c->map = p;
    rc = stagein_read(a->o->h, o->path, p, size, -1, &size);
    if (rc != STAGEIN_SUCCESS) {
        munmap(p, o->size);
        c->map = NULL;
        return fail_h(a, rc, err);
    }
    return 0;
}

/* Checks a landed object against its ETag; host memory is then sealed. */
static void *check(void *arg)
{
    check_t *c = arg;
    held_t *o = c->o;
    c->result = 0;
    if (c->a->o->gpu >= 0) {
        c->result = verify_gpu(c->a, o, c->etag, &c->err);
        return NULL;
    }
    stagein_err_t v = stagein_verify(c->map ? c->map : "", o->size, c->etag, o->checksum);
    if (v != STAGEIN_SUCCESS)
        c->result = si_errprintf(&c->err, "%s: %s (ETag %s, bytes %s)", o->path,
                                 stagein_strerror(v), c->etag, o->checksum);
    if (c->map)
        munmap(c->map, o->size);
    c->map = NULL;
    /* attachers map it read-only; seal it so that nobody can change it */
    if (c->result == 0)
        fcntl(o->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    return NULL;
}

/* Waits for the check in flight, if any; -1 with err when it failed. */
static int check_wait(check_t *c, si_error_t *err)
{
    if (!c->running)
        return 0;
    pthread_join(c->thread, NULL);
    c->running = false;
    if (c->result < 0) {
        *err = c->err;
        return -1;
    }
    return 0;
}

static int check_start(check_t *c, check_t *pending, si_error_t *err)
{
    *pending = *c;
    if (pthread_create(&pending->thread, NULL, check, pending) != 0) {
        check(pending);       /* no thread: check it here */
        if (pending->result < 0) {
            *err = pending->err;
            return -1;
        }
        return 0;
    }
    pending->running = true;
    return 0;
}

static void release_all(agent_t *a)
{
    for (size_t i = 0; i < a->count; i++) {
        held_t *o = &a->objects[i];
        if (o->fd > 0)
            close(o->fd);
        if (a->cuda)
            lib_cuda_block_free(a->cuda, &o->block);
        free(o->path);
    }
    free(a->objects);
    free(a->table);
    lib_cuda_close(a->cuda);
    a->objects = NULL;
    a->count = 0;
}

static int make_table(agent_t *a, si_error_t *err)
{
    json_t *root = json_object(), *list = json_array();
    if (!root || !list || json_object_set_new(root, "objects", list) < 0)
        goto nomem;
    for (size_t i = 0; i < a->count; i++) {
        held_t *o = &a->objects[i];
        json_t *e = json_pack("{s:s,s:I,s:I,s:s,s:i}", "path", o->path, "size",
                              (json_int_t)o->size, "mapped", (json_int_t)o->mapped,
                              "checksum", o->checksum, "gpu", a->o->gpu);
        if (!e || json_array_append_new(list, e) < 0)
            goto nomem;
    }
    a->table = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!a->table)
        return si_errprintf(err, "out of memory");
    a->table_len = strlen(a->table);
    return 0;
nomem:
    json_decref(root);
    return si_errprintf(err, "out of memory");
}

static int send_fds(int sock, const int *fds, size_t n)
{
    char byte = 'F';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int) * AGENT_FDS_PER_MESSAGE)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof(control));
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* One attach: the table, then the descriptors in batches. A client that
 * dies half-way costs nothing: the sent descriptors die with it. */
static void serve_attach(agent_t *a, int sock)
{
    uint32_t len = (uint32_t)a->table_len;
    if (send(sock, &len, sizeof(len), MSG_NOSIGNAL) != sizeof(len) ||
        send(sock, a->table, a->table_len, MSG_NOSIGNAL) != (ssize_t)a->table_len)
        return;
    for (size_t i = 0; i < a->count; i += AGENT_FDS_PER_MESSAGE) {
        size_t n = a->count - i < AGENT_FDS_PER_MESSAGE ? a->count - i : AGENT_FDS_PER_MESSAGE;
        int fds[AGENT_FDS_PER_MESSAGE];
        size_t made = 0;
        bool ok = true;
        for (; made < n && ok; made++) {
            si_error_t err;
            if (a->o->gpu >= 0)
                ok = lib_cuda_block_export(a->cuda, &a->objects[i + made].block, &fds[made],
                                           &err) == 0;
            else
                fds[made] = a->objects[i + made].fd;
            if (!ok && a->o->log)
                fprintf(a->o->log, "agent: %s\n", err.text);
        }
        if (ok)
            ok = send_fds(sock, fds, n) == 0;
        if (a->o->gpu >= 0)   /* exported descriptors are ours to close */
            for (size_t k = 0; k < made - (ok ? 0 : 1); k++)
                close(fds[k]);
        if (!ok)
            return;
    }
}

static int listen_on(const char *path, si_error_t *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return si_errprintf(err, "socket path %s is longer than %zu bytes", path,
                            sizeof(sa.sun_path) - 1);
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return si_errnoprintf(err, errno, "socket: %s", strerror(errno));
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path);   /* a previous agent's, dead: nobody answers on it */
    mode_t old = umask(0077);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    umask(old);
    if (rc < 0 || listen(fd, 64) < 0) {
        si_errnoprintf(err, errno, "cannot serve %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int serve(agent_t *a, volatile sig_atomic_t *stop, si_error_t *err)
{
    int lfd = listen_on(a->o->socket_path, err);
    if (lfd < 0)
        return -1;
    if (a->o->log) {
        fprintf(a->o->log, "agent: serving %s\n", a->o->socket_path);
        fflush(a->o->log);
    }
    bool stopping = false;
    while (!*stop && !stopping) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        if (poll(&p, 1, AGENT_POLL_MS) <= 0)
            continue;
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        struct timeval tv = {.tv_sec = AGENT_IO_TIMEOUT_S};
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        char line[AGENT_LINE_MAX] = "";
        ssize_t n = recv(c, line, sizeof(line) - 1, 0);
        if (n > 0 && strncmp(line, "attach\n", 7) == 0) {
            serve_attach(a, c);
        } else if (n > 0 && strncmp(line, "stop\n", 5) == 0) {
            send(c, "ok\n", 3, MSG_NOSIGNAL);
            stopping = true;
        }
        close(c);
    }
    close(lfd);
    unlink(a->o->socket_path);
    return 0;
}

static int objects_of(agent_t *a, si_error_t *err)
{
    char id[STAGEIN_ID_MAX];
    const char *request = a->o->request;
    stagein_t *h = a->o->h;
    stagein_err_t rc;
    if (!request) {
        const char *datasets[] = {a->o->dataset, NULL};
        if ((rc = stagein_request(h, datasets, NULL, id)) != STAGEIN_SUCCESS)
            return fail_h(a, rc, err);
        request = id;
        if (a->o->log) {
            fprintf(a->o->log, "agent: dataset %s staged by request %s\n", a->o->dataset, id);
            fflush(a->o->log);
        }
    }
    if ((rc = stagein_wait(h, request, AGENT_REQUEST_WAIT_S, NULL, NULL, NULL)) != STAGEIN_SUCCESS)
        return fail_h(a, rc, err);
    stagein_object_t *list;
    size_t n;
    if ((rc = stagein_request_objects(h, request, &list, &n)) != STAGEIN_SUCCESS)
        return fail_h(a, rc, err);
    a->objects = calloc(n + 1, sizeof(*a->objects));
    if (!a->objects) {
        stagein_objects_free(list, n);
        return si_errprintf(err, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        a->objects[i].path = list[i].path;   /* taken over */
        a->objects[i].fd = -1;
        list[i].path = NULL;
    }
    a->count = n;
    stagein_objects_free(list, n);
    return 0;
}

int agent_run(const agent_opts_t *o, volatile sig_atomic_t *stop, si_error_t *err)
{
    agent_t a = {.o = o};
    int rc = -1;
    if (!o->socket_path || !*o->socket_path)
        return si_errprintf(err, "no socket path given (--socket)");
    if (!!o->request == !!o->dataset)
        return si_errprintf(err, "name either a request or a dataset");
    if (o->gpu >= 0 && lib_cuda_open(o->gpu, &a.cuda, err) < 0)
        return -1;
    if (objects_of(&a, err) < 0)
        goto done;
    double start = si_mono_now();
    uint64_t total = 0;
    check_t landed, pending = {0};
    for (size_t i = 0; i < a.count; i++) {
        si_error_t ignored;
        if (*stop) {
            si_errprintf(err, "stopped while landing the data");
            check_wait(&pending, &ignored);
            goto done;
        }
        if (land(&a, &a.objects[i], &landed, err) < 0) {
            check_wait(&pending, &ignored);
            goto done;
        }
        /* object i is checked while object i+1 is read */
        if (check_wait(&pending, err) < 0 || check_start(&landed, &pending, err) < 0) {
            check_wait(&pending, &ignored);
            goto done;
        }
        total += a.objects[i].size;
    }
    if (check_wait(&pending, err) < 0)
        goto done;
    double took = si_mono_now() - start;
    if (o->log) {
        fprintf(o->log, "agent: %zu objects, %llu bytes resident in %s memory in %.2f s"
                " (%.2f GB/s), checksums verified\n", a.count, (unsigned long long)total,
                o->gpu >= 0 ? "GPU" : "host", took, took > 0 ? total / took / 1e9 : 0.0);
        fflush(o->log);
    }
    if (make_table(&a, err) < 0)
        goto done;
    rc = serve(&a, stop, err);
done:
    release_all(&a);
    return rc;
}
