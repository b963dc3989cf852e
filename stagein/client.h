/* The control API client: HTTP calls to stageind over its Unix socket or TCP
 * (libcurl), each with a fresh MUNGE credential, answers as JSON. Errors
 * from the daemon are returned as the daemon phrased them. */
#ifndef STAGEIN_CLIENT_H
#define STAGEIN_CLIENT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "common/conf.h"
#include "common/error.h"

#define CLIENT_DEFAULT_TIMEOUT 30   /* seconds per call */
#define CLIENT_DEFAULT_CONNECT_TIMEOUT 5 /* seconds to connect, before the next endpoint */
#define CLIENT_UNIX_PATH_MAX 108    /* sun_path, NUL included */
#define CLIENT_ENDPOINT_TEXT_MAX 600 /* one endpoint as written, NUL included */
#define CLIENT_ENDPOINTS_MAX 16     /* in one list */
#define CLIENT_ENDPOINTS_TEXT_MAX 4096 /* a list as written, NUL included */

/* Where stageind listens: a Unix socket ("unix:PATH") or a base URL. */
typedef struct {
    char unix_path[CLIENT_UNIX_PATH_MAX]; /* "" for TCP */
    char base_url[512];                   /* "http://localhost" on the socket */
    char text[CLIENT_ENDPOINT_TEXT_MAX];  /* as written, for messages */
} client_endpoint_t;

int client_parse_endpoint(const char *text, client_endpoint_t *out, si_error_t *err);

/* Several stageind instances of one site, tried in order until one
 * connects: "E1,E2,..." (white space around each ignored), each as
 * client_parse_endpoint() takes it; 1..CLIENT_ENDPOINTS_MAX, none twice. */
typedef struct {
    client_endpoint_t at[CLIENT_ENDPOINTS_MAX];
    size_t n;
} client_endpoint_list_t;

int client_parse_endpoints(const char *text, client_endpoint_list_t *out, si_error_t *err);
/* Whether text is such a list (the list itself not kept). */
int client_check_endpoints(const char *text, si_error_t *err);

/* The endpoints to use and where they came from, first match wins: option
 * (--endpoint), $STAGEIN_ENDPOINT, client.endpoints or client.endpoint
 * (both set and different: refused), then stageind's own settings (its
 * Unix socket, else its TCP address). text is a list as
 * client_parse_endpoints() takes it. */
typedef struct {
    char text[CLIENT_ENDPOINTS_TEXT_MAX];
    const char *source;   /* "--endpoint", "$STAGEIN_ENDPOINT", ... */
} client_address_t;

int client_resolve_endpoint(const char *option, const si_conf_t *conf, client_address_t *out,
                            si_error_t *err);

typedef struct {
    const char *endpoint;      /* as resolved: one endpoint or a list */
    const char *source;        /* where it came from, for connection errors */
    const char *munge_socket;  /* NULL or "": libmunge's default */
    long timeout_s;            /* per call, 0: none */
    long connect_timeout_s;    /* per endpoint tried, 0: CLIENT_DEFAULT_CONNECT_TIMEOUT */
} client_opts_t;

/* The client options from the configuration: client.munge_socket (else
 * stageind.munge_socket), client.timeout and client.connect_timeout. */
void client_conf_opts(const si_conf_t *conf, client_opts_t *opts);

typedef struct client client_t;

client_t *client_new(const client_opts_t *opts, si_error_t *err);
void client_free(client_t *c);

typedef struct {
    const char *method;        /* "GET", "POST" */
    const char *path;          /* "/api/v1/...", query included */
    const char *json_body;     /* NULL: none (or the upload) */
    FILE *upload;              /* streamed as the body, upload_size bytes */
    int64_t upload_size;
    bool anonymous;            /* no credential (GET /metrics) */
    const char *const *headers; /* more "Name: value" lines, NULL-terminated */
    /* With an upload: its bytes hashed (sha256) as they are read, the hash
     * written to upload_sum (SI_CHECKSUM_TEXT_MAX bytes) and sent after the
     * body in this trailer field; the body then goes chunked (its size in
     * a header of the caller's). NULL: none. */
    const char *upload_sum_trailer;
    char *upload_sum;
} client_request_t;

typedef struct {
    long status;               /* HTTP status; 0 when no answer came */
    char *body;                /* as received, NUL-terminated ("" when empty) */
    size_t len;
    json_t *json;              /* the body parsed, when it is JSON */
    char request[160];         /* "METHOD PATH" of the call, for messages */
} client_reply_t;

/* 0 when the daemon answered 2xx. -1 otherwise, with err holding the
 * daemon's "error" text as is, or why no answer came (connection, timeout,
 * credential). reply is filled as far as the call got; free it either way.
 *
 * With several endpoints, the one that last answered is tried first, then
 * the others in order, on connection errors only: refused, unreachable, no
 * socket, no connection within the connect timeout (nothing was sent, so
 * any request may go on), and for a GET a connection that broke before any
 * byte of the answer. A POST that reached an endpoint is never sent again:
 * stageind may have accepted it (a stage request carries no client-made id
 * that would let stageind see it twice). When every endpoint failed, err
 * names each with its reason. */
int client_send(client_t *c, const client_request_t *rq, client_reply_t *reply,
                si_error_t *err);
void client_reply_free(client_reply_t *reply);

/* The error text of an answer that is not 2xx: the daemon's JSON "error"
 * member, else the status and the start of the body. */
void client_answer_error(long status, const char *body, const json_t *json, si_error_t *err);

/* s percent-encoded for a URL path segment or query value (RFC 3986:
 * everything but unreserved characters); malloc'd, NULL without memory. */
char *client_escape(const char *s);

#endif
