#include "config.h"
#include "daemon/http/router.h"

#include "common/array.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SEGMENTS 16

typedef struct {
    char method[16];
    char pattern[256];
    void *target;
} route_t;

struct http_router {
    route_t *routes;
    size_t count, capacity;
};

http_router_t *http_router_new(void)
{
    return calloc(1, sizeof(http_router_t));
}

void http_router_free(http_router_t *r)
{
    if (!r)
        return;
    free(r->routes);
    free(r);
}

static bool valid_pattern(const char *p)
{
    if (p[0] != '/')
        return false;
    size_t segments = 0;
    for (const char *s = p + 1; *s;) {
        const char *end = strchr(s, '/');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == 0)
            return false;
        if (s[0] == '{' || memchr(s, '{', len) || memchr(s, '}', len)) {
            /* a capture is a whole segment: "{name}" */
            if (s[0] != '{' || s[len - 1] != '}' || len < 3 || len - 2 >= HTTP_PARAM_NAME_MAX)
                return false;
        }
        if (++segments > MAX_SEGMENTS)
            return false;
        s += len;
        if (*s == '/')
            s++;
    }
    return true;
}

int http_router_add(http_router_t *r, const char *method, const char *pattern,
                    void *target, si_error_t *err)
{
    if (!method || !*method || strlen(method) >= sizeof(r->routes[0].method))
        return si_errprintf(err, "route %s: bad method", pattern ? pattern : "(null)");
    if (!pattern || strlen(pattern) >= sizeof(r->routes[0].pattern) || !valid_pattern(pattern))
        return si_errprintf(err, "route %s %s: bad pattern (segments like /a/{name}/b)",
                            method, pattern ? pattern : "(null)");
    for (size_t i = 0; i < r->count; i++)
        if (strcmp(r->routes[i].method, method) == 0 && strcmp(r->routes[i].pattern, pattern) == 0)
            return si_errprintf(err, "route %s %s is already registered", method, pattern);
    if (si_array_grow((void **)&r->routes, &r->capacity, r->count + 1, sizeof(*r->routes)) < 0)
        return si_errprintf(err, "out of memory");
    route_t *route = &r->routes[r->count++];
    snprintf(route->method, sizeof(route->method), "%s", method);
    snprintf(route->pattern, sizeof(route->pattern), "%s", pattern);
    route->target = target;
    return 0;
}

/* Walks pattern and path segment by segment; captures into params. */
static bool match_path(const char *pattern, const char *path, http_params_t *params)
{
    params->count = 0;
    const char *p = pattern, *s = path;
    if (*p != '/' || *s != '/')
        return false;
    p++;
    s++;
    while (*p || *s) {
        const char *pend = strchr(p, '/');
        const char *send = strchr(s, '/');
        size_t plen = pend ? (size_t)(pend - p) : strlen(p);
        size_t slen = send ? (size_t)(send - s) : strlen(s);
        if (plen == 0 || slen == 0)
            return false;
        if (p[0] == '{') {
            if (params->count == HTTP_MAX_PARAMS || slen >= HTTP_PARAM_VALUE_MAX)
                return false;
            size_t n = params->count++;
            snprintf(params->param[n].name, sizeof(params->param[n].name), "%.*s",
                     (int)(plen - 2), p + 1);
            memcpy(params->param[n].value, s, slen);
            params->param[n].value[slen] = '\0';
        } else if (plen != slen || memcmp(p, s, plen) != 0) {
            return false;
        }
        p += plen;
        s += slen;
        /* both continue, or both end: "/a/b" never matches "/a/b/" */
        if ((*p == '/') != (*s == '/'))
            return false;
        if (*p == '/') {
            p++;
            s++;
            /* a pattern ending in '/' matches a path ending in '/' only */
            if (!*p || !*s)
                return !*p && !*s;
        }
    }
    return true;
}

http_route_result_t http_router_match(const http_router_t *r, const char *method,
                                      const char *path, void **target,
                                      http_params_t *params, char *allow, size_t allow_size)
{
    http_params_t scratch;
    bool path_seen = false;
    if (allow && allow_size)
        allow[0] = '\0';
    for (size_t i = 0; i < r->count; i++) {
        const route_t *route = &r->routes[i];
        if (!match_path(route->pattern, path, &scratch))
            continue;
        if (strcmp(route->method, method) == 0) {
            *target = route->target;
            *params = scratch;
            return HTTP_ROUTE_FOUND;
        }
        if (allow && allow_size) {
            size_t used = strlen(allow);
            snprintf(allow + used, allow_size - used, "%s%s", path_seen ? ", " : "",
                     route->method);
        }
        path_seen = true;
    }
    return path_seen ? HTTP_ROUTE_NO_METHOD : HTTP_ROUTE_NO_PATH;
}

const char *http_params_get(const http_params_t *params, const char *name)
{
    for (size_t i = 0; i < params->count; i++)
        if (strcmp(params->param[i].name, name) == 0)
            return params->param[i].value;
    return NULL;
}
