/* The second process of tests/gpu/run: attaches to a node agent that holds
 * a dataset in GPU memory (libstagein's public API), copies every object
 * back from the GPU, checks it against the SHA-256 the agent reports, and
 * prints one line of figures:
 *
 *   gpu_attach SOCKET
 *   -> "attached N objects, B bytes on GPU G in T s; checked in C s (X GB/s
 *       device to host)", exit 0; else the reason on stderr, exit 1.
 *
 * Built by tests/gpu/run against the --with-cuda build (cuda.h, libcuda). */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stagein/stagein.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cu_check(CUresult r, const char *what)
{
    const char *text = NULL;
    if (r == CUDA_SUCCESS)
        return 0;
    cuGetErrorString(r, &text);
    fprintf(stderr, "gpu_attach: %s: %s (CUDA error %d)\n", what, text ? text : "?", (int)r);
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gpu_attach SOCKET\n");
        return 2;
    }
    char errbuf[512] = "";
    stagein_attachment_t *a = NULL;
    double t0 = now_s();
    stagein_err_t rc = stagein_attach(argv[1], &a, errbuf, sizeof(errbuf));
    if (rc != STAGEIN_SUCCESS) {
        fprintf(stderr, "gpu_attach: %s: %s\n", argv[1], errbuf[0] ? errbuf : stagein_strerror(rc));
        return 1;
    }
    double attached = now_s() - t0;
    size_t n = stagein_attachment_count(a);
    uint64_t total = 0, largest = 0;
    int gpu = -1;
    for (size_t i = 0; i < n; i++) {
        const stagein_attached_t *o = stagein_attachment_get(a, i);
        total += o->size;
        largest = o->size > largest ? o->size : largest;
        if (o->gpu < 0) {
            fprintf(stderr, "gpu_attach: %s is in host memory, not on a GPU\n", o->path);
            return 1;
        }
        gpu = o->gpu;
    }
    /* stagein_attach made the device's primary context current here */
    CUcontext ctx = NULL;
    if (n == 0 || cu_check(cuCtxGetCurrent(&ctx), "no current CUDA context") < 0 || !ctx) {
        fprintf(stderr, "gpu_attach: nothing attached on a GPU (%zu objects)\n", n);
        return 1;
    }
    unsigned char *host = NULL;
    if (cu_check(cuMemAllocHost((void **)&host, largest ? largest : 1), "pinned host buffer") < 0)
        return 1;
    double t1 = now_s(), copy_s = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const stagein_attached_t *o = stagein_attachment_get(a, i);
        double c0 = now_s();
        if (cu_check(cuMemcpyDtoH(host, (CUdeviceptr)(uintptr_t)o->data, o->size),
                     "copy from the GPU") < 0)
            return 1;
        copy_s += now_s() - c0;
        /* the agent reports "sha256:<64 hex>"; stagein_verify hashes the
         * bytes given an ETag of the SHA-256 form (its first 32 hex + "-1") */
        char etag[40], sum[STAGEIN_CHECKSUM_MAX];
        if (strncmp(o->checksum, "sha256:", 7) != 0 || strlen(o->checksum) != 71) {
            fprintf(stderr, "gpu_attach: %s: checksum '%s' is not a SHA-256\n", o->path,
                    o->checksum);
            return 1;
        }
        snprintf(etag, sizeof(etag), "%.32s-1", o->checksum + 7);
        stagein_verify(host, o->size, etag, sum);
        if (strcmp(sum, o->checksum) != 0) {
            fprintf(stderr, "gpu_attach: %s: GPU bytes are %s, the agent said %s\n", o->path, sum,
                    o->checksum);
            bad++;
        }
    }
    double checked = now_s() - t1;
    cuMemFreeHost(host);
    stagein_detach(a);
    if (bad)
        return 1;
    printf("attached %zu objects, %llu bytes on GPU %d in %.3f s; checked in %.2f s"
           " (%.2f GB/s device to host)\n", n, (unsigned long long)total, gpu, attached, checked,
           copy_s > 0 ? (double)total / copy_s / 1e9 : 0.0);
    return 0;
}
