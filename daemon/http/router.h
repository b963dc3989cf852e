/* Routing by method and path pattern: "/api/v1/stage/{id}/cancel" matches
 * one path segment per "{name}" and captures it. Pure: no sockets. */
#ifndef STAGEIN_HTTP_ROUTER_H
#define STAGEIN_HTTP_ROUTER_H

#include <stddef.h>

#include "common/error.h"

#define HTTP_MAX_PARAMS 4
#define HTTP_PARAM_NAME_MAX 32
#define HTTP_PARAM_VALUE_MAX 256

typedef struct {
    size_t count;
    struct {
        char name[HTTP_PARAM_NAME_MAX];
        char value[HTTP_PARAM_VALUE_MAX];
    } param[HTTP_MAX_PARAMS];
} http_params_t;

typedef struct http_router http_router_t;

typedef enum {
    HTTP_ROUTE_FOUND,
    HTTP_ROUTE_NO_PATH,    /* no pattern matches the path: 404 */
    HTTP_ROUTE_NO_METHOD,  /* the path matches, not with this method: 405 */
} http_route_result_t;

http_router_t *http_router_new(void);
void http_router_free(http_router_t *r);

/* pattern: starts with '/', segments separated by '/', "{name}" captures a
 * whole segment. The same method + pattern twice is an error. */
int http_router_add(http_router_t *r, const char *method, const char *pattern,
                    void *target, si_error_t *err);

/* On HTTP_ROUTE_FOUND, *target and params are filled. On NO_METHOD, allow
 * receives the accepted methods ("GET, POST"). A captured segment longer
 * than HTTP_PARAM_VALUE_MAX does not match. */
http_route_result_t http_router_match(const http_router_t *r, const char *method,
                                      const char *path, void **target,
                                      http_params_t *params, char *allow, size_t allow_size);

const char *http_params_get(const http_params_t *params, const char *name);

#endif
