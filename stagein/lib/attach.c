/* stagein_attach: the client side of the node agent's socket. Receives the
 * agent's table and descriptors and maps every object read-only (host
 * memory) or imports it into this process's CUDA context (GPU memory). */
#include "config.h"
#include "stagein/stagein.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "stagein/lib/agent_proto.h"
#include "stagein/lib/gpu.h"

typedef struct {
    stagein_attached_t pub;
    size_t mapped;
    lib_cuda_block_t block;   /* GPU memory */
} attached_t;

struct stagein_attachment {
    attached_t *objects;
    size_t count;
    lib_cuda_t *cuda;
    json_t *table;            /* owns the path and checksum strings */
};

static stagein_err_t fail(char *errbuf, size_t errlen, stagein_err_t code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static stagein_err_t fail(char *errbuf, size_t errlen, stagein_err_t code, const char *fmt, ...)
{
    if (errbuf && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errbuf, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

static int connect_agent(const char *path, const char *line, char *errbuf, size_t errlen,
                         stagein_err_t *code)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!path || !*path || strlen(path) >= sizeof(sa.sun_path)) {
        *code = fail(errbuf, errlen, STAGEIN_ERR_ARGUMENT, "agent socket path '%s' is %s",
                     path ? path : "(null)", path && *path ? "too long" : "empty");
        return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = AGENT_IO_TIMEOUT_S};
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        *code = fail(errbuf, errlen, STAGEIN_ERR_CONNECT, "cannot reach the agent at %s: %s",
                     path, strerror(errno));
        goto error;
    }
    size_t len = strlen(line);
    if (send(fd, line, len, MSG_NOSIGNAL) != (ssize_t)len) {
        *code = fail(errbuf, errlen, STAGEIN_ERR_CONNECT, "agent at %s: %s", path,
                     strerror(errno));
        goto error;
    }
    return fd;
error:
    if (fd >= 0)
        close(fd);
    return -1;
}

static int read_full(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = recv(fd, (char *)buf + got, len - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ECONNRESET;
            return -1;
        }
        got += (size_t)n;
    }
    return 0;
}

/* Receives up to want descriptors into fds; returns how many came, -1. */
static int receive_fds(int sock, int *fds, size_t want)
{
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        char buf[CMSG_SPACE(sizeof(int) * AGENT_FDS_PER_MESSAGE)];
        struct cmsghdr align;
    } control;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                         .msg_controllen = sizeof(control.buf)};
    ssize_t n;
    do {
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n <= 0)
        return -1;
    int got = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *in = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < k; i++) {
            if ((size_t)got < want)
                fds[got++] = in[i];
            else
                close(in[i]);   /* more than announced: never leak them */
        }
    }
    return got;
}

void stagein_detach(stagein_attachment_t *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->count; i++) {
        attached_t *o = &a->objects[i];
        if (o->pub.gpu >= 0)
            lib_cuda_block_free(a->cuda, &o->block);
        else if (o->mapped)
            munmap((void *)o->pub.data, o->mapped);
    }
    lib_cuda_close(a->cuda);
    json_decref(a->table);
    free(a->objects);
    free(a);
}

/* Maps object i of a from fd (consumed). */
static stagein_err_t map_object(stagein_attachment_t *a, size_t i, int fd, char *errbuf,
                                size_t errlen)
{
    attached_t *o = &a->objects[i];
    stagein_err_t rc = STAGEIN_SUCCESS;
    si_error_t err;
    if (o->pub.gpu >= 0) {
        if (!a->cuda && lib_cuda_open(o->pub.gpu, &a->cuda, &err) < 0)
            rc = fail(errbuf, errlen, lib_cuda_built() ? STAGEIN_ERR_NO_DEVICE
                                                       : STAGEIN_ERR_UNSUPPORTED, "%s", err.text);
        else if (lib_cuda_block_import(a->cuda, fd, o->mapped, &o->block, &err) < 0)
            rc = fail(errbuf, errlen, STAGEIN_ERR_NO_DEVICE, "%s: %s", o->pub.path, err.text);
        else
            o->pub.data = (const void *)(uintptr_t)o->block.ptr;
    } else if (o->mapped == 0) {
        o->pub.data = "";
    } else {
        void *p = mmap(NULL, o->mapped, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            rc = fail(errbuf, errlen, STAGEIN_ERR_SYSTEM, "cannot map %s: %s", o->pub.path,
                      strerror(errno));
        else
            o->pub.data = p;
    }
    if (rc != STAGEIN_SUCCESS)
        o->mapped = 0;   /* nothing to undo for this one */
    close(fd);
    return rc;
}

static stagein_err_t parse_table(stagein_attachment_t *a, const char *text, size_t len,
                                 char *errbuf, size_t errlen)
{
    json_error_t jerr;
    a->table = json_loadb(text, len, 0, &jerr);
    json_t *objects = json_object_get(a->table, "objects");
    if (!json_is_array(objects))
        return fail(errbuf, errlen, STAGEIN_ERR_PROTOCOL, "the agent's table is not valid: %s",
                    a->table ? "no objects" : jerr.text);
    a->objects = calloc(json_array_size(objects) + 1, sizeof(*a->objects));
    if (!a->objects)
        return fail(errbuf, errlen, STAGEIN_ERR_NOMEM, "out of memory");
    size_t i;
    json_t *o;
    json_array_foreach(objects, i, o) {
        attached_t *d = &a->objects[i];
        json_t *size = json_object_get(o, "size"), *mapped = json_object_get(o, "mapped");
        d->pub.path = json_string_value(json_object_get(o, "path"));
        d->pub.checksum = json_string_value(json_object_get(o, "checksum"));
        d->pub.gpu = (int)json_integer_value(json_object_get(o, "gpu"));
        if (!d->pub.path || !d->pub.checksum || !json_is_integer(size) ||
            !json_is_integer(mapped) || json_integer_value(size) < 0 ||
            json_integer_value(mapped) < json_integer_value(size))
            return fail(errbuf, errlen, STAGEIN_ERR_PROTOCOL,
                        "the agent's table entry %zu is not valid", i);
        d->pub.size = (uint64_t)json_integer_value(size);
        d->mapped = (size_t)json_integer_value(mapped);
    }
    a->count = json_array_size(objects);
    return STAGEIN_SUCCESS;
}

stagein_err_t stagein_attach(const char *socket_path, stagein_attachment_t **out, char *errbuf,
                             size_t errlen)
{
    if (!out)
        return fail(errbuf, errlen, STAGEIN_ERR_ARGUMENT, "nowhere to put the attachment");
    stagein_err_t rc = STAGEIN_SUCCESS;
    int sock = connect_agent(socket_path, "attach\n", errbuf, errlen, &rc);
    if (sock < 0)
        return rc;
    stagein_attachment_t *a = calloc(1, sizeof(*a));
    char *text = NULL;
    int *fds = NULL;
    size_t nfds = 0, mapped = 0;
    uint32_t len;
    if (!a) {
        rc = fail(errbuf, errlen, STAGEIN_ERR_NOMEM, "out of memory");
        goto error;
    }
    if (read_full(sock, &len, sizeof(len)) < 0 || len > AGENT_TABLE_MAX ||
        !(text = malloc(len + 1)) || read_full(sock, text, len) < 0) {
        rc = fail(errbuf, errlen, STAGEIN_ERR_PROTOCOL, "agent at %s: no table (%s)",
                  socket_path, len > AGENT_TABLE_MAX ? "too large" : strerror(errno));
        goto error;
    }
    if ((rc = parse_table(a, text, len, errbuf, errlen)) != STAGEIN_SUCCESS)
        goto error;
    if (!(fds = calloc(a->count + 1, sizeof(int)))) {
        rc = fail(errbuf, errlen, STAGEIN_ERR_NOMEM, "out of memory");
        goto error;
    }
    while (nfds < a->count) {
        int got = receive_fds(sock, fds + nfds, a->count - nfds);
        if (got <= 0) {
            rc = fail(errbuf, errlen, STAGEIN_ERR_PROTOCOL,
                      "agent at %s: %zu of %zu descriptors came", socket_path, nfds, a->count);
            goto error;
        }
        nfds += (size_t)got;
    }
    for (; mapped < a->count; mapped++)
        if ((rc = map_object(a, mapped, fds[mapped], errbuf, errlen)) != STAGEIN_SUCCESS) {
            mapped++;
            goto error;
        }
    free(fds);
    free(text);
    close(sock);
    *out = a;
    return STAGEIN_SUCCESS;
error:
    for (size_t i = mapped; i < nfds; i++)
        close(fds[i]);
    if (a)
        a->count = mapped;
    stagein_detach(a);
    free(fds);
    free(text);
    close(sock);
    return rc;
}

size_t stagein_attachment_count(const stagein_attachment_t *a)
{
    return a ? a->count : 0;
}

const stagein_attached_t *stagein_attachment_get(const stagein_attachment_t *a, size_t i)
{
    return a && i < a->count ? &a->objects[i].pub : NULL;
}

const stagein_attached_t *stagein_attachment_find(const stagein_attachment_t *a,
                                                  const char *path)
{
    for (size_t i = 0; a && path && i < a->count; i++)
        if (strcmp(a->objects[i].pub.path, path) == 0)
            return &a->objects[i].pub;
    return NULL;
}

stagein_err_t stagein_agent_stop(const char *socket_path, char *errbuf, size_t errlen)
{
    stagein_err_t rc = STAGEIN_SUCCESS;
    int sock = connect_agent(socket_path, "stop\n", errbuf, errlen, &rc);
    if (sock < 0)
        return rc;
    char answer[8] = "";
    if (read_full(sock, answer, 3) < 0 || strncmp(answer, "ok\n", 3) != 0)
        rc = fail(errbuf, errlen, STAGEIN_ERR_PROTOCOL, "agent at %s did not confirm the stop",
                  socket_path);
    close(sock);
    return rc;
}
