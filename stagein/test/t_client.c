/* The control API client without a daemon: endpoints and where they come
 * from, options from the configuration, escaping, the daemon's error text,
 * and connection errors against an address where nothing listens. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/tap.h"
#include "stagein/client.h"
#include "daemon/conf/schema.h"

static void test_parse(void)
{
    client_endpoint_t ep;
    si_error_t err;
    ok(client_parse_endpoint("unix:/run/stagein/stageind.sock", &ep, &err) == 0 &&
           strcmp(ep.unix_path, "/run/stagein/stageind.sock") == 0 &&
           strcmp(ep.base_url, "http://localhost") == 0,
       "unix:PATH: the socket, requests to http://localhost");
    ok(client_parse_endpoint("http://127.0.0.1:8470/", &ep, &err) == 0 && ep.unix_path[0] == 0 &&
           strcmp(ep.base_url, "http://127.0.0.1:8470") == 0,
       "http URL, trailing slash dropped");
    ok(client_parse_endpoint("https://[::1]:8470", &ep, &err) == 0 &&
           strcmp(ep.base_url, "https://[::1]:8470") == 0,
       "https and IPv6");
    memset(&ep, 'x', sizeof(ep));
    ok(client_parse_endpoint("unix:", &ep, &err) < 0 && strstr(err.text, "names no socket path") &&
           ep.unix_path[0] == 'x',
       "unix: without a path refused, nothing written: %s", err.text);
    ok(client_parse_endpoint("localhost:8470", &ep, &err) < 0 &&
           strstr(err.text, "bad endpoint 'localhost:8470': expected http://HOST:PORT or unix:PATH"),
       "no scheme: %s", err.text);
    ok(client_parse_endpoint("http://", &ep, &err) < 0 && strstr(err.text, "names no host"),
       "no host: %s", err.text);
    ok(client_parse_endpoint("http:///x", &ep, &err) < 0 && strstr(err.text, "names no host"),
       "empty host: %s", err.text);
    ok(client_parse_endpoint("http://a b", &ep, &err) < 0 && strstr(err.text, "white space"),
       "white space: %s", err.text);
    char long_path[200] = "unix:/";
    memset(long_path + 6, 'a', 150);
    long_path[156] = '\0';
    ok(client_parse_endpoint(long_path, &ep, &err) < 0 && strstr(err.text, "longer than 107"),
       "socket path over sun_path: %s", err.text);
}

static void test_parse_list(void)
{
    client_endpoint_list_t *l = malloc(sizeof(*l));
    si_error_t err;
    ok(client_parse_endpoints("unix:/a.sock, http://127.0.0.1:8470/ ,https://[::1]:1", l, &err) ==
               0 && l->n == 3 && strcmp(l->at[0].unix_path, "/a.sock") == 0 &&
           strcmp(l->at[1].base_url, "http://127.0.0.1:8470") == 0 &&
           strcmp(l->at[1].text, "http://127.0.0.1:8470/") == 0 &&
           strcmp(l->at[2].base_url, "https://[::1]:1") == 0,
       "a list: in order, white space around each dropped, each as written");
    ok(client_parse_endpoints("unix:/one.sock", l, &err) == 0 && l->n == 1 &&
           strcmp(l->at[0].text, "unix:/one.sock") == 0,
       "one endpoint is a list of one");
    l->n = 99;
    ok(client_parse_endpoints("unix:/a.sock,,unix:/b.sock", l, &err) < 0 &&
           strstr(err.text, "endpoint 2 of 'unix:/a.sock,,unix:/b.sock' is empty") && l->n == 99,
       "an empty entry refused, nothing written: %s", err.text);
    ok(client_parse_endpoints("unix:/a.sock,", l, &err) < 0 && strstr(err.text, "endpoint 2 of"),
       "a trailing ',': %s", err.text);
    ok(client_parse_endpoints(" ", l, &err) < 0 && strstr(err.text, "no endpoint given"),
       "nothing: %s", err.text);
    ok(client_parse_endpoints("unix:/a.sock,stage02:8470", l, &err) < 0 &&
           strstr(err.text, "endpoint 2 of 2: bad endpoint 'stage02:8470'"),
       "a bad entry named by its place: %s", err.text);
    ok(client_parse_endpoints("http://h:1,unix:/a.sock,http://h:1/", l, &err) < 0 &&
           strstr(err.text, "names http://h:1/ twice (endpoints 1 and 3)"),
       "the same endpoint twice: %s", err.text);
    char many[40 * (CLIENT_ENDPOINTS_MAX + 1)] = "";
    for (int i = 0; i <= CLIENT_ENDPOINTS_MAX; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%shttp://h:%d", i ? "," : "",
                 i + 1);
    ok(client_parse_endpoints(many, l, &err) < 0 && strstr(err.text, "at most 16"),
       "more than %d: %s", CLIENT_ENDPOINTS_MAX, err.text);
    ok(client_check_endpoints("unix:/a.sock,http://h:1", &err) == 0 &&
           client_check_endpoints("unix:/a.sock,ftp://h", &err) < 0,
       "client_check_endpoints: the same rules");
    free(l);
}

static si_conf_t *conf_of(const char *text)
{
    si_error_t err;
    si_conf_t *c = si_conf_load_string(text, stagein_conf_schemas(), &err);
    if (!c)
        diag("configuration refused: %s", err.text);
    return c;
}

static void resolve_is(const char *desc, const char *option, const char *conf_text,
                       const char *want, const char *want_source)
{
    si_conf_t *conf = conf_of(conf_text);
    client_address_t a;
    si_error_t err = {{0}};
    int rc = conf ? client_resolve_endpoint(option, conf, &a, &err) : -1;
    if (!ok(rc == 0 && strcmp(a.text, want) == 0 && strcmp(a.source, want_source) == 0, "%s",
            desc))
        diag("got rc %d '%s' from %s (%s)", rc, rc == 0 ? a.text : "", rc == 0 ? a.source : "",
             err.text);
    si_conf_free(conf);
}

static void resolve_fails(const char *desc, const char *option, const char *conf_text,
                          const char *want)
{
    si_conf_t *conf = conf_of(conf_text);
    client_address_t a;
    si_error_t err = {{0}};
    int rc = conf ? client_resolve_endpoint(option, conf, &a, &err) : 0;
    ok(rc < 0 && strstr(err.text, want), "%s: %s", desc, err.text);
    si_conf_free(conf);
}

static void test_resolve(void)
{
    unsetenv("STAGEIN_ENDPOINT");
    resolve_is("default: stageind's socket in its state directory", NULL,
               "state_dir = \"/srv/stagein\";", "unix:/srv/stagein/stageind.sock",
               "stageind's settings");
    resolve_is("stageind.socket", NULL, "stageind: { socket = \"/run/s.sock\"; };",
               "unix:/run/s.sock", "stageind's settings");
    resolve_is("no socket: stageind's TCP port, wildcard bind through loopback", NULL,
               "stageind: { socket = \"\"; port = 9000; bind = \"0.0.0.0\"; };",
               "http://127.0.0.1:9000", "stageind's settings");
    resolve_is("IPv6 bind address in brackets", NULL,
               "stageind: { socket = \"\"; bind = \"::1\"; };", "http://[::1]:8470",
               "stageind's settings");
    resolve_fails("no socket and any free port: nothing to guess", NULL,
                  "stageind: { socket = \"\"; port = 0; };", "set client.endpoint");
    resolve_is("client.endpoint over stageind's settings", NULL,
               "client: { endpoint = \"http://stage01:8470\"; };", "http://stage01:8470",
               "client.endpoint");
    setenv("STAGEIN_ENDPOINT", "unix:/tmp/env.sock", 1);
    resolve_is("$STAGEIN_ENDPOINT over the configuration", NULL,
               "client: { endpoint = \"http://stage01:8470\"; };", "unix:/tmp/env.sock",
               "$STAGEIN_ENDPOINT");
    resolve_is("--endpoint over everything", "http://10.0.0.1:1",
               "client: { endpoint = \"http://stage01:8470\"; };", "http://10.0.0.1:1",
               "--endpoint");
    setenv("STAGEIN_ENDPOINT", "", 1);
    resolve_is("an empty $STAGEIN_ENDPOINT is unset", NULL,
               "client: { endpoint = \"unix:/c.sock\"; };", "unix:/c.sock", "client.endpoint");
    setenv("STAGEIN_ENDPOINT", "stage01", 1);
    resolve_fails("a bad endpoint names where it came from", NULL, "",
                  "$STAGEIN_ENDPOINT: bad endpoint 'stage01'");
    unsetenv("STAGEIN_ENDPOINT");
    resolve_fails("a bad client.endpoint", NULL, "client: { endpoint = \"ftp://x\"; };",
                  "client.endpoint: bad endpoint 'ftp://x'");

    resolve_is("client.endpoints: a list, joined", NULL,
               "client: { endpoints = [\"unix:/a.sock\", \"http://stage02:8470\"]; };",
               "unix:/a.sock,http://stage02:8470", "client.endpoints");
    resolve_is("client.endpoint may hold a ',' list", NULL,
               "client: { endpoint = \"unix:/a.sock, http://stage02:8470\"; };",
               "unix:/a.sock, http://stage02:8470", "client.endpoint");
    resolve_is("both keys, the same endpoints: accepted", NULL,
               "client: { endpoint = \"unix:/a.sock,http://s:1\";"
               " endpoints = [\"unix:/a.sock\", \"http://s:1/\"]; };",
               "unix:/a.sock,http://s:1/", "client.endpoints");
    resolve_fails("both keys, different endpoints: refused", NULL,
                  "client: { endpoint = \"unix:/a.sock\";\n"
                  " endpoints = [\"unix:/a.sock\", \"http://s:1\"]; };",
                  "(string):2: setting 'client.endpoints' = \"unix:/a.sock,http://s:1\" disagrees"
                  " with client.endpoint = \"unix:/a.sock\": set only one");
    resolve_fails("the conflict is refused even under --endpoint", "unix:/x.sock",
                  "client: { endpoint = \"unix:/a.sock\"; endpoints = [\"unix:/b.sock\"]; };",
                  "disagrees");
    resolve_fails("a bad element named with its place", NULL,
                  "client: {\n endpoints = [\"unix:/a.sock\", \"stage02\"]; };",
                  "(string):2: setting 'client.endpoints' element 2: bad endpoint 'stage02'");
    resolve_fails("an element holding a list", NULL,
                  "client: { endpoints = [\"unix:/a.sock,unix:/b.sock\"]; };",
                  "element 1 ('unix:/a.sock,unix:/b.sock') holds several endpoints");
    resolve_fails("an empty list", NULL, "client: { endpoints = []; };",
                  "setting 'client.endpoints' is empty");
    resolve_is("--endpoint takes a list too", "unix:/a.sock,unix:/b.sock",
               "client: { endpoints = [\"http://s:1\"]; };", "unix:/a.sock,unix:/b.sock",
               "--endpoint");
    setenv("STAGEIN_ENDPOINT", "unix:/a.sock,unix:/a.sock", 1);
    resolve_fails("$STAGEIN_ENDPOINT's list checked", NULL, "",
                  "$STAGEIN_ENDPOINT: endpoint list names unix:/a.sock twice");
    unsetenv("STAGEIN_ENDPOINT");

    si_error_t err;
    ok(si_conf_load_string("client: { timeout = 0; };", stagein_conf_schemas(), &err) == NULL &&
           strstr(err.text, "client.timeout"),
       "client.timeout is range-checked: %s", err.text);
    ok(si_conf_load_string("client: { endpiont = \"x\"; };", stagein_conf_schemas(), &err) ==
               NULL && strstr(err.text, "client.endpiont"),
       "unknown client keys refused: %s", err.text);
}

static void test_conf_opts(void)
{
    si_conf_t *conf = conf_of("stageind: { munge_socket = \"/m/daemon\"; };");
    client_opts_t o = {0};
    client_conf_opts(conf, &o);
    is_str(o.munge_socket, "/m/daemon", "munge socket from stageind's settings");
    is_int(o.timeout_s, CLIENT_DEFAULT_TIMEOUT, "default timeout");
    si_conf_free(conf);
    conf = conf_of("stageind: { munge_socket = \"/m/daemon\"; };"
                   "client: { munge_socket = \"/m/client\"; timeout = 5; };");
    client_conf_opts(conf, &o);
    is_str(o.munge_socket, "/m/client", "client.munge_socket first");
    is_int(o.timeout_s, 5, "client.timeout");
    is_int(o.connect_timeout_s, CLIENT_DEFAULT_CONNECT_TIMEOUT, "default connect timeout");
    si_conf_free(conf);
    conf = conf_of("client: { connect_timeout = 2; };");
    client_conf_opts(conf, &o);
    is_int(o.connect_timeout_s, 2, "client.connect_timeout");
    si_conf_free(conf);
    conf = conf_of("");
    client_conf_opts(conf, &o);
    ok(o.munge_socket == NULL, "no munge socket configured: libmunge's default");
    si_conf_free(conf);
}

static void test_escape(void)
{
    char *e = client_escape("a b/c&d=\xc3\xa9~x_y.z-1");
    is_str(e, "a%20b%2Fc%26d%3D%C3%A9~x_y.z-1", "percent-encoding keeps only unreserved");
    free(e);
    e = client_escape("");
    is_str(e, "", "empty");
    free(e);
}

static void test_answer_error(void)
{
    si_error_t err;
    json_t *j = json_loads("{\"error\": \"unknown dataset 'nope'\"}", 0, NULL);
    client_answer_error(404, "", j, &err);
    is_str(err.text, "unknown dataset 'nope'", "the daemon's error text as it is");
    json_decref(j);
    client_answer_error(502, "<html>Bad gateway</html>\nmore", NULL, &err);
    is_str(err.text, "stageind answered HTTP 502: <html>Bad gateway</html>",
           "not JSON: status and the first line");
    client_answer_error(500, "", NULL, &err);
    is_str(err.text, "stageind answered HTTP 500", "empty body: the status");
    j = json_loads("{\"error\": 3}", 0, NULL);
    client_answer_error(400, "{\"error\": 3}", j, &err);
    is_str(err.text, "stageind answered HTTP 400: {\"error\": 3}", "error member not a string");
    json_decref(j);
}

/* A TCP port nobody listens on: bound, then closed. */
static int closed_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) < 0) {
        if (s >= 0)
            close(s);
        return -1;
    }
    close(s);
    return ntohs(a.sin_port);
}

static void test_connection_errors(void)
{
    si_error_t err;
    char endpoint[64];
    int port = closed_port();
    snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", port);
    client_opts_t o = {.endpoint = endpoint, .source = "--endpoint", .timeout_s = 5};
    client_t *c = client_new(&o, &err);
    ok(c != NULL, "client for a TCP endpoint");
    client_request_t get = {.method = "GET", .path = "/metrics", .anonymous = true};
    client_reply_t r;
    char want[160];
    snprintf(want, sizeof(want), "cannot connect to stageind at %s (from --endpoint): Connection refused",
             endpoint);
    ok(c && port > 0 && client_send(c, &get, &r, &err) < 0 && strstr(err.text, want) &&
           r.status == 0 && r.body == NULL,
       "nothing listening: %s", err.text);
    client_reply_free(&r);
    client_free(c);

    o.endpoint = "unix:/nonexistent/stageind.sock";
    o.source = "client.endpoint";
    c = client_new(&o, &err);
    client_request_t stage = {.method = "POST", .path = "/api/v1/stage", .json_body = "{}"};
    ok(c && client_send(c, &stage, &r, &err) < 0 &&
           strstr(err.text, "cannot connect to stageind at unix:/nonexistent/stageind.sock (from"
                            " client.endpoint): No such file or directory"),
       "no socket: %s", err.text);
    client_reply_free(&r);
    client_free(c);

    /* every endpoint failing: one message naming each with its reason */
    char list[200];
    snprintf(list, sizeof(list), "unix:/nonexistent/a.sock,http://127.0.0.1:%d", port);
    o.endpoint = list;
    o.source = "client.endpoints";
    c = client_new(&o, &err);
    char want_all[300];
    snprintf(want_all, sizeof(want_all),
             "cannot connect to stageind at any of the 2 endpoints from client.endpoints:"
             " unix:/nonexistent/a.sock: No such file or directory;"
             " http://127.0.0.1:%d: Connection refused;"
             " is stageind running on one of them? (check client.endpoints)", port);
    client_request_t post = {.method = "POST", .path = "/api/v1/stage", .json_body = "{}",
                             .anonymous = true};
    ok(c && client_send(c, &post, &r, &err) < 0 && strcmp(err.text, want_all) == 0 &&
           r.status == 0,
       "all endpoints failing: %s", err.text);
    client_reply_free(&r);
    ok(c && client_send(c, &get, &r, &err) < 0 && strcmp(err.text, want_all) == 0,
       "and again on the next call (each is tried again)");
    client_reply_free(&r);
    client_free(c);

    o.endpoint = "gopher://x";
    o.source = "$STAGEIN_ENDPOINT";
    ok(client_new(&o, &err) == NULL && strstr(err.text, "$STAGEIN_ENDPOINT: bad endpoint"),
       "client_new checks the endpoint: %s", err.text);
}

int main(void)
{
    test_parse();
    test_parse_list();
    test_resolve();
    test_conf_opts();
    test_escape();
    test_answer_error();
    test_connection_errors();
    return done_testing();
}
