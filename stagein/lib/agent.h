/* The node agent (`stagein agent`): lands a request's or a dataset's
 * objects in memory it owns (memfd host buffers, or GPU memory through the
 * CUDA VMM API), verifies every checksum, and hands the memory to attaching
 * processes over a Unix socket (agent_proto.h) until stopped. */
#ifndef STAGEIN_LIB_AGENT_H
#define STAGEIN_LIB_AGENT_H

#include <signal.h>
#include <stdio.h>

#include "common/error.h"
#include "stagein/stagein.h"

typedef struct {
    stagein_t *h;              /* configured handle (control and S3) */
    const char *request;       /* a request id, or NULL */
    const char *dataset;       /* a dataset to request and wait for, or NULL */
    int gpu;                   /* -1: host memory */
    const char *socket_path;
    FILE *log;                 /* progress lines, or NULL */
} agent_opts_t;

/* Lands everything, then serves until *stop is set or a client asks to
 * stop; frees everything before returning. 0, or -1 with err. */
int agent_run(const agent_opts_t *o, volatile sig_atomic_t *stop, si_error_t *err);

#endif
