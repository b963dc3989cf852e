#include "config.h"

#include <string.h>

#include "common/tap.h"
#include "daemon/http/router.h"

static int a, b, c, d;

int main(void)
{
    si_error_t err;
    http_router_t *r = http_router_new();
    http_params_t params;
    char allow[64];
    void *target;

    ok(http_router_add(r, "POST", "/api/v1/stage", &a, &err) == 0, "plain route added");
    ok(http_router_add(r, "GET", "/api/v1/stage/{id}", &b, &err) == 0, "capture route added");
    ok(http_router_add(r, "POST", "/api/v1/stage/{id}/cancel", &c, &err) == 0, "nested added");
    ok(http_router_add(r, "GET", "/metrics", &d, &err) == 0, "metrics added");
    ok(http_router_add(r, "GET", "/metrics", &d, &err) == -1 && strstr(err.text, "already"),
       "duplicate refused: %s", err.text);
    ok(http_router_add(r, "GET", "no-slash", &d, &err) == -1 && strstr(err.text, "bad pattern"),
       "pattern without leading slash refused: %s", err.text);
    ok(http_router_add(r, "GET", "/a//b", &d, &err) == -1, "empty segment refused");
    ok(http_router_add(r, "GET", "/a/x{id}", &d, &err) == -1, "partial capture refused");
    ok(http_router_add(r, "GET", "/a/{}", &d, &err) == -1, "unnamed capture refused");

    is_int(http_router_match(r, "POST", "/api/v1/stage", &target, &params, allow, sizeof(allow)),
           HTTP_ROUTE_FOUND, "exact path found");
    ok(target == &a && params.count == 0, "right target, no params");

    is_int(http_router_match(r, "GET", "/api/v1/stage/0d5e-77", &target, &params, allow,
                             sizeof(allow)),
           HTTP_ROUTE_FOUND, "capture path found");
    ok(target == &b, "capture target");
    is_str(http_params_get(&params, "id"), "0d5e-77", "segment captured");
    ok(http_params_get(&params, "nope") == NULL, "unknown param is NULL");

    is_int(http_router_match(r, "POST", "/api/v1/stage/xyz/cancel", &target, &params, allow,
                             sizeof(allow)),
           HTTP_ROUTE_FOUND, "nested capture found");
    ok(target == &c && strcmp(http_params_get(&params, "id"), "xyz") == 0, "nested captured");

    is_int(http_router_match(r, "DELETE", "/api/v1/stage/xyz", &target, &params, allow,
                             sizeof(allow)),
           HTTP_ROUTE_NO_METHOD, "known path, wrong method");
    is_str(allow, "GET", "Allow lists the accepted method");
    is_int(http_router_match(r, "GET", "/api/v1/stage", &target, &params, allow, sizeof(allow)),
           HTTP_ROUTE_NO_METHOD, "POST-only path with GET");
    is_str(allow, "POST", "Allow for the POST-only path");

    is_int(http_router_match(r, "GET", "/api/v1/stage/", &target, &params, allow, sizeof(allow)),
           HTTP_ROUTE_NO_PATH, "trailing slash does not match a capture");
    is_int(http_router_match(r, "GET", "/api/v1/stage/a/b", &target, &params, allow,
                             sizeof(allow)),
           HTTP_ROUTE_NO_PATH, "extra segment does not match");
    is_int(http_router_match(r, "GET", "/metrics/", &target, &params, allow, sizeof(allow)),
           HTTP_ROUTE_NO_PATH, "trailing slash on a plain path does not match");
    ok(http_router_add(r, "POST", "/api/v1/archiveinfo/", &a, &err) == 0,
       "pattern with a trailing slash added");
    is_int(http_router_match(r, "POST", "/api/v1/archiveinfo/", &target, &params, allow,
                             sizeof(allow)),
           HTTP_ROUTE_FOUND, "a trailing slash matches a pattern that has one");
    is_int(http_router_match(r, "POST", "/api/v1/archiveinfo", &target, &params, allow,
                             sizeof(allow)),
           HTTP_ROUTE_NO_PATH, "and not the path without it");
    is_int(http_router_match(r, "GET", "/", &target, &params, allow, sizeof(allow)),
           HTTP_ROUTE_NO_PATH, "root does not match");
    is_int(http_router_match(r, "GET", "", &target, &params, allow, sizeof(allow)),
           HTTP_ROUTE_NO_PATH, "empty path does not match");

    char longpath[600] = "/api/v1/stage/";
    memset(longpath + strlen(longpath), 'x', 400);
    is_int(http_router_match(r, "GET", longpath, &target, &params, allow, sizeof(allow)),
           HTTP_ROUTE_NO_PATH, "over-long captured segment does not match");

    http_router_free(r);
    return done_testing();
}
