#include "config.h"
#include "stagein/client.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "common/strbuf.h"
#include "common/munge_auth.h"
#include "daemon/conf/stageind_conf.h"

/* Answers larger than this are refused: the largest is a request's per-file
 * status, a few hundred bytes per file. */
#define CLIENT_ANSWER_LIMIT (256u << 20)

struct client {
    CURL *curl;
    client_endpoint_t ep;
    char *endpoint;      /* as given, for messages */
    char *source;
    char *munge_socket;  /* NULL: libmunge's default */
    long timeout_s;
    char curl_error[CURL_ERROR_SIZE];
};

int client_parse_endpoint(const char *text, client_endpoint_t *out, si_error_t *err)
{
    client_endpoint_t ep;
    memset(&ep, 0, sizeof(ep));
    if (strncmp(text, "unix:", 5) == 0) {
        const char *path = text + 5;
        if (!*path)
            return si_errprintf(err, "endpoint '%s' names no socket path", text);
        if (strlen(path) >= sizeof(ep.unix_path))
            return si_errprintf(err, "socket path of endpoint '%.60s...' is longer than %d bytes",
                                text, CLIENT_UNIX_PATH_MAX - 1);
        strcpy(ep.unix_path, path);
        strcpy(ep.base_url, "http://localhost");
    } else if (strncmp(text, "http://", 7) == 0 || strncmp(text, "https://", 8) == 0) {
        const char *host = strchr(text, ':') + 3;
        size_t len = strlen(text);
        while (len > 0 && text[len - 1] == '/')
            len--;
        if (*host == '\0' || *host == '/' || (size_t)(host - text) >= len)
            return si_errprintf(err, "endpoint '%s' names no host", text);
        if (strcspn(text, " \t\r\n") != strlen(text))
            return si_errprintf(err, "endpoint '%s' contains white space", text);
        if (len >= sizeof(ep.base_url))
            return si_errprintf(err, "endpoint '%.60s...' is too long", text);
        memcpy(ep.base_url, text, len);
    } else {
        return si_errprintf(err, "bad endpoint '%s': expected http://HOST:PORT or unix:PATH",
                            text);
    }
    *out = ep;
    return 0;
}

/* stageind's own address from its settings: its socket, else its TCP port
 * (a wildcard bind address is reached through loopback). */
static int daemon_address(const si_conf_t *conf, char *buf, size_t size, si_error_t *err)
{
    stageind_overrides_t none = {.port = -1};
    stageind_settings_t *s = malloc(sizeof(*s));
    if (!s)
        return si_errprintf(err, "out of memory");
    int rc = stageind_settings(conf, &none, s, err);
    if (rc < 0)
        goto done;
    if (s->socket[0]) {
        snprintf(buf, size, "unix:%s", s->socket);
    } else if (s->port > 0) {
        const char *host = s->bind;
        if (strcmp(host, "0.0.0.0") == 0)
            host = "127.0.0.1";
        else if (strcmp(host, "::") == 0)
            host = "::1";
        snprintf(buf, size, strchr(host, ':') ? "http://[%s]:%d" : "http://%s:%d", host,
                 s->port);
    } else {
        rc = si_errprintf(err, "stageind is configured with no Unix socket and no fixed port:"
                               " set client.endpoint, $STAGEIN_ENDPOINT or --endpoint");
    }
done:
    free(s);
    return rc;
}

int client_resolve_endpoint(const char *option, const si_conf_t *conf, client_address_t *out,
                            si_error_t *err)
{
    client_address_t a;
    const char *env = getenv("STAGEIN_ENDPOINT");
    const char *configured = si_conf_string(conf, "client.endpoint", NULL);
    const char *text = NULL;
    if (option) {
        text = option;
        a.source = "--endpoint";
    } else if (env && *env) {
        text = env;
        a.source = "$STAGEIN_ENDPOINT";
    } else if (configured) {
        text = configured;
        a.source = "client.endpoint";
    } else {
        if (daemon_address(conf, a.text, sizeof(a.text), err) < 0)
            return -1;
        a.source = "stageind's settings";
    }
    if (text && (size_t)snprintf(a.text, sizeof(a.text), "%s", text) >= sizeof(a.text))
        return si_errprintf(err, "endpoint from %s is too long", a.source);
    client_endpoint_t ep;
    if (client_parse_endpoint(a.text, &ep, err) < 0)
        return si_errprefix(err, "%s", a.source);
    *out = a;
    return 0;
}

void client_conf_opts(const si_conf_t *conf, client_opts_t *opts)
{
    const char *munge = si_conf_string(conf, "client.munge_socket", NULL);
    if (!munge)
        munge = si_conf_string(conf, "stageind.munge_socket", NULL);
    opts->munge_socket = munge;
    opts->timeout_s = (long)si_conf_int(conf, "client.timeout", CLIENT_DEFAULT_TIMEOUT);
}

client_t *client_new(const client_opts_t *opts, si_error_t *err)
{
    client_t *c = calloc(1, sizeof(*c));
    if (!c) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    if (client_parse_endpoint(opts->endpoint, &c->ep, err) < 0) {
        si_errprefix(err, "%s", opts->source ? opts->source : "endpoint");
        goto error;
    }
    c->endpoint = strdup(opts->endpoint);
    c->source = strdup(opts->source ? opts->source : "the command line");
    if (opts->munge_socket && *opts->munge_socket)
        c->munge_socket = strdup(opts->munge_socket);
    if (!c->endpoint || !c->source || (opts->munge_socket && *opts->munge_socket && !c->munge_socket)) {
        si_errprintf(err, "out of memory");
        goto error;
    }
    c->timeout_s = opts->timeout_s;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        si_errprintf(err, "cannot initialise libcurl");
        goto error;
    }
    c->curl = curl_easy_init();
    if (!c->curl) {
        curl_global_cleanup();
        si_errprintf(err, "cannot initialise libcurl");
        goto error;
    }
    return c;
error:
    free(c->endpoint);
    free(c->source);
    free(c->munge_socket);
    free(c);
    return NULL;
}

void client_free(client_t *c)
{
    if (!c)
        return;
    curl_easy_cleanup(c->curl);
    curl_global_cleanup();
    free(c->endpoint);
    free(c->source);
    free(c->munge_socket);
    free(c);
}

void client_reply_free(client_reply_t *reply)
{
    free(reply->body);
    json_decref(reply->json);
    memset(reply, 0, sizeof(*reply));
}

void client_answer_error(long status, const char *body, const json_t *json, si_error_t *err)
{
    /* problem+json's detail; "error" from a stageind before the Tape REST API */
    const char *text = NULL;
    if (json_is_object(json) && !(text = json_string_value(json_object_get(json, "detail"))))
        text = json_string_value(json_object_get(json, "error"));
    if (text) {
        si_errprintf(err, "%s", text);
        return;
    }
    size_t line = body ? strcspn(body, "\r\n") : 0;
    si_errprintf(err, "stageind answered HTTP %ld%s%.*s", status, line ? ": " : "",
                 (int)(line > 200 ? 200 : line), body ? body : "");
}

static size_t collect(char *data, size_t size, size_t n, void *arg)
{
    si_strbuf_t *b = arg;
    return si_strbuf_append(b, data, size * n) ? size * n : 0;
}

static bool add_header(struct curl_slist **list, const char *line)
{
    struct curl_slist *longer = curl_slist_append(*list, line);
    if (longer)
        *list = longer;
    return longer != NULL;
}

/* Why no answer came, in the user's terms. */
static void transport_error(const client_t *c, CURLcode rc, si_error_t *err)
{
    long os_errno = 0;
    curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
    const char *why = c->curl_error[0] ? c->curl_error : curl_easy_strerror(rc);
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        si_errprintf(err, "cannot connect to stageind at %s (from %s): %s; is stageind running?",
                     c->endpoint, c->source,
                     os_errno ? strerror((int)os_errno) : curl_easy_strerror(rc));
        break;
    case CURLE_OPERATION_TIMEDOUT:
        si_errprintf(err, "stageind at %s did not answer within %ld s", c->endpoint,
                     c->timeout_s);
        break;
    case CURLE_WRITE_ERROR:
        si_errprintf(err, "the answer of stageind at %s is larger than %u MiB", c->endpoint,
                     CLIENT_ANSWER_LIMIT >> 20);
        break;
    default:
        si_errprintf(err, "stageind at %s (from %s): %s", c->endpoint, c->source, why);
        break;
    }
}

int client_send(client_t *c, const client_request_t *rq, client_reply_t *reply,
                si_error_t *err)
{
    CURL *h = c->curl;
    struct curl_slist *headers = NULL;
    char *credential = NULL;
    si_strbuf_t answer;
    si_strbuf_init(&answer, CLIENT_ANSWER_LIMIT);
    memset(reply, 0, sizeof(*reply));
    snprintf(reply->request, sizeof(reply->request), "%s %s", rq->method, rq->path);
    int rc = -1;

    if (!rq->anonymous) {
        si_error_t why;
        credential = si_munge_encode(c->munge_socket, &why);
        /* On the Unix socket stageind can take the caller from SO_PEERCRED. */
        if (!credential && !c->ep.unix_path[0]) {
            si_errprintf(err, "%s (needed for stageind at %s)", why.text, c->endpoint);
            goto done;
        }
    }
    bool added = true;
    if (credential) {
        char *field = NULL;
        added = asprintf(&field, "%s: %s", SI_MUNGE_HEADER, credential) >= 0 &&
                add_header(&headers, field);
        free(field);
    }
    if (rq->json_body)
        added = added && add_header(&headers, "Content-Type: application/json");
    else if (rq->upload)
        added = added && add_header(&headers, "Content-Type: application/octet-stream");
    for (const char *const *more = rq->headers; more && *more && added; more++)
        added = add_header(&headers, *more);
    /* no 100-continue round trip: stageind reads or refuses the body at once */
    if (!added || !add_header(&headers, "Expect:")) {
        si_errprintf(err, "out of memory");
        goto done;
    }

    char url[sizeof(c->ep.base_url) + 2048];
    if ((size_t)snprintf(url, sizeof(url), "%s%s", c->ep.base_url, rq->path) >= sizeof(url)) {
        si_errprintf(err, "request path too long");
        goto done;
    }
    curl_easy_reset(h);
    c->curl_error[0] = '\0';
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->curl_error);
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (c->ep.unix_path[0])
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->ep.unix_path);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, c->timeout_s);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &answer);
    if (rq->upload) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READDATA, rq->upload);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->upload_size);
    } else if (rq->json_body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->json_body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(rq->json_body));
    } else if (strcmp(rq->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    if (strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "POST") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);

    CURLcode crc = curl_easy_perform(h);
    if (crc != CURLE_OK) {
        transport_error(c, crc, err);
        goto done;
    }
    if (answer.failed) {
        si_errprintf(err, "out of memory reading the answer of stageind");
        goto done;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &reply->status);
    reply->len = answer.len;
    reply->body = si_strbuf_take(&answer);
    if (!reply->body)
        reply->body = strdup("");
    if (!reply->body) {
        si_errprintf(err, "out of memory");
        goto done;
    }
    reply->json = json_loadb(reply->body, reply->len, 0, NULL);
    if (reply->status < 200 || reply->status > 299) {
        client_answer_error(reply->status, reply->body, reply->json, err);
        goto done;
    }
    rc = 0;
done:
    curl_slist_free_all(headers);
    free(credential);
    si_strbuf_free(&answer);
    return rc;
}

char *client_escape(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(3 * strlen(s) + 1);
    if (!out)
        return NULL;
    char *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}
