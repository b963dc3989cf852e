/* One S3 request: its headers and query as received, and the answers an
 * operation gives (S3 XML errors, XML bodies, empty answers, the headers
 * every answer carries) and the XML bodies it reads. Operations call these;
 * nothing here calls an operation. */
#include "config.h"
#include "daemon/s3/internal.h"

#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "common/uri.h"

#define XML_CONTENT_TYPE "application/xml"

/* ---- request helpers ---------------------------------------------------------- */

const char *s3_req_header(const s3_req_t *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++)
        if (strcasecmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

/* Decodes the query into r->params once ('+' is a space, as in
 * si_uri_query_get): every request looks up several parameters. -1 when out
 * of memory; a name that is not valid percent-encoding leaves no parameters. */
int s3_req_parse_query(s3_req_t *r)
{
    const char *p = r->query;
    size_t max = 1;
    for (const char *c = p; *c; c++)
        max += *c == '&';
    size_t len = strlen(p);
    r->params = calloc(max, sizeof(*r->params));
    si_strbuf_init(&r->query_text, 2 * len + 2 * max);
    /* decoding never lengthens: the text and a NUL after each name and
     * value fit at once (no query: nothing allocated) */
    if (!r->params || (len && !si_strbuf_reserve(&r->query_text, len + 2 * max)))
        return -1;
    si_strbuf_t *t = &r->query_text;
    si_uri_param_t u;
    while (si_uri_query_next(&p, &u)) {
        s3_query_param_t *q = &r->params[r->nparams];
        q->name = t->len;
        if (si_uri_decode(t, u.name, u.name_len, true, NULL) < 0) {
            r->nparams = 0;
            return t->failed ? -1 : 0;
        }
        si_strbuf_putc(t, '\0');
        q->value = t->len;
        q->value_ok = !u.value || si_uri_decode(t, u.value, u.value_len, true, NULL) == 0;
        if (!q->value_ok)
            t->len = q->value; /* what was decoded of it is dropped */
        q->value_len = t->len - q->value;
        si_strbuf_putc(t, '\0');
        if (t->failed)
            return -1;
        r->nparams++;
    }
    return 0;
}

int s3_req_query(const s3_req_t *r, const char *name, si_strbuf_t *value)
{
    const char *text = si_strbuf_str(&r->query_text);
    for (size_t i = 0; i < r->nparams; i++) {
        const s3_query_param_t *q = &r->params[i];
        if (strcmp(text + q->name, name) != 0)
            continue;
        /* the first one counts; a bad value or one too long for value: absent */
        if (!q->value_ok || (value && !si_strbuf_append(value, text + q->value, q->value_len)))
            return 0;
        return 1;
    }
    return 0;
}

bool s3_req_has_query(const s3_req_t *r, const char *name)
{
    return s3_req_query(r, name, NULL) == 1;
}

void s3_add_common_headers(s3_req_t *r, struct MHD_Response *resp)
{
    MHD_add_response_header(resp, "x-amz-request-id", r->id);
    MHD_add_response_header(resp, "Server", "stageind");
}

/* x-amz-rdma-reply: 501 and the reason, when the request asked for RDMA
 * and no 200 went on the answer. */
static void add_rdma_declined(s3_req_t *r, struct MHD_Response *resp)
{
    if (r->rdma_replied || !s3_req_header(r, S3_RDMA_TOKEN_HEADER))
        return;
    MHD_add_response_header(resp, "x-amz-rdma-reply", "501");
    if (r->rdma_declined[0])
        MHD_add_response_header(resp, "x-amz-rdma-reason", r->rdma_declined);
    size_t n = strlen(r->note);
    snprintf(r->note + n, sizeof(r->note) - n, " rdma=501 (%.80s)", r->rdma_declined);
}

void s3_req_cork(s3_req_t *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int on = 1;
    if (ci && ci->connect_fd > 0 && !r->corked_fd &&
        setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on)) == 0)
        r->corked_fd = ci->connect_fd;
}

void s3_req_uncork(s3_req_t *r)
{
    int off = 0;
    if (r->corked_fd)
        setsockopt(r->corked_fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
    r->corked_fd = 0;
}

void s3_respond(s3_req_t *r, unsigned status, struct MHD_Response *resp)
{
    if (r->responded) {
        MHD_destroy_response(resp);
        return;
    }
    s3_add_common_headers(r, resp);
    add_rdma_declined(r, resp);
    r->responded = true;
    r->status = status;
    if (r->suspended) { /* queued by the event thread once resumed */
        r->answer = resp;
        r->answer_status = status;
        return;
    }
    MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
}

void s3_respond_empty(s3_req_t *r, unsigned status)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    if (resp)
        s3_respond(r, status, resp);
}

/* region: also x-amz-bucket-region (an error to a request signed for
 * another region). */
static void respond_xml(s3_req_t *r, unsigned status, si_strbuf_t *xml, const char *region)
{
    if (xml->failed) {
        si_strbuf_free(xml);
        s3_respond_error(r, "InternalError", "out of memory building the response");
        return;
    }
    size_t len = xml->len;
    char *body = si_strbuf_take(xml);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body ? body : (void *)"",
                                        body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return;
    }
    MHD_add_response_header(resp, "Content-Type", XML_CONTENT_TYPE);
    if (region)
        MHD_add_response_header(resp, "x-amz-bucket-region", region);
    s3_respond(r, status, resp);
}

void s3_respond_xml(s3_req_t *r, unsigned status, si_strbuf_t *xml)
{
    respond_xml(r, status, xml, NULL);
}

/* The error answer; region: a request signed for another region, whose
 * answer names this server's (in <Region> and x-amz-bucket-region). */
void s3_respond_error_in(s3_req_t *r, const char *code, const char *message,
                         const char *region)
{
    unsigned status = (unsigned)s3_error_status(code);
    snprintf(r->note, sizeof(r->note), "%s: %.120s", code, message);
    bool head = strcmp(r->method, "HEAD") == 0;
    if (status == 304 || (head && !region)) {
        s3_respond_empty(r, status);
        return;
    }
    si_strbuf_t xml;
    si_strbuf_init(&xml, 16384);
    char *resource = NULL;
    size_t plen = strcspn(r->uri ? r->uri : "", "?");
    if (r->uri)
        resource = strndup(r->uri, plen);
    s3_error_xml(&xml, code, message[0] ? message : NULL, resource, r->id, region);
    free(resource);
    if (head)
        xml.len = 0; /* a HEAD answer has no body */
    respond_xml(r, status, &xml, region);
}

void s3_respond_error(s3_req_t *r, const char *code, const char *fmt, ...)
{
    char message[600] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(message, sizeof(message), fmt, ap);
        va_end(ap);
    }
    s3_respond_error_in(r, code, message, NULL);
}

int s3_req_part_number(s3_req_t *r)
{
    si_strbuf_t v;
    si_strbuf_init(&v, 32);
    long number = 0;
    if (s3_req_query(r, "partNumber", &v) == 1 && !v.failed) {
        char *end;
        number = strtol(si_strbuf_str(&v), &end, 10);
        if (*end || v.len == 0)
            number = 0;
    }
    si_strbuf_free(&v);
    if (number < 1 || number > S3_PARTS_MAX) {
        s3_respond_error(r, "InvalidArgument", "Part number must be an integer between 1 and"
                         " %d, inclusive", S3_PARTS_MAX);
        return 0;
    }
    return (int)number;
}

void s3_respond_internal(s3_req_t *r, const char *what, const char *detail)
{
    si_log(r->srv->log, SI_LOG_ERROR, "s3: request %s: %s %s/%s: %s: %s", r->id, r->method,
           r->bucket, r->key ? r->key : "", what, detail);
    s3_respond_error(r, "InternalError", "%s failed (request %s; the server's log says why)",
                     what, r->id);
}

char *s3_req_catalog_key(s3_req_t *r)
{
    size_t plen = strlen(r->map.prefix), klen = strlen(r->key);
    if (plen + klen > SI_KEY_MAX) {
        s3_respond_error(r, "KeyTooLongError", "the key is %zu bytes; at most %d are allowed%s",
                         klen, SI_KEY_MAX - (int)plen, plen ? " in this archive bucket" : "");
        return NULL;
    }
    char *k = malloc(plen + klen + 1);
    if (!k) {
        s3_respond_error(r, "InternalError", "out of memory");
        return NULL;
    }
    memcpy(k, r->map.prefix, plen);
    memcpy(k + plen, r->key, klen + 1);
    return k;
}

/* ---- bodies ------------------------------------------------------------------ */

/* An XML body over S3_XML_BODY_MAX is read to its end and dropped, then
 * refused: a client still sending when the answer and the close come would
 * see a reset, not the answer. A body declared (or grown) past
 * XML_DROP_MAX is refused at once. */
#define XML_DROP_MAX (16ull << 20)

static void respond_too_big(s3_req_t *r, uint64_t bytes)
{
    s3_respond_error(r, "MaxMessageLengthExceeded", "the XML body is %s%" PRIu64 " bytes,"
                     " more than the %u allowed", bytes > XML_DROP_MAX ? "over " : "", bytes,
                     S3_XML_BODY_MAX);
}

static int xml_data(s3_req_t *r, const char *data, size_t len)
{
    if (r->xml_dropped || !si_strbuf_append(&r->xml, data, len)) {
        r->xml_dropped += len;
        if (r->xml.len + r->xml_dropped > XML_DROP_MAX) {
            respond_too_big(r, r->xml.len + r->xml_dropped);
            return -1;
        }
    }
    return 0;
}

static void xml_end(s3_req_t *r)
{
    if (r->xml_dropped)
        respond_too_big(r, r->xml.len + r->xml_dropped);
    else
        r->xml_end(r);
}

static const s3_body_ops_t xml_ops = {.data = xml_data, .end = xml_end, .cleanup = NULL};

void s3_expect_xml_body(s3_req_t *r, void (*end)(s3_req_t *r))
{
    const char *cl = s3_req_header(r, "Content-Length");
    uint64_t declared = cl ? strtoull(cl, NULL, 10) : 0;
    if (declared > XML_DROP_MAX) {
        respond_too_big(r, declared);
        return;
    }
    si_strbuf_init(&r->xml, S3_XML_BODY_MAX);
    r->body = &xml_ops;
    r->xml_end = end;
}

void s3_req_free(s3_req_t *r)
{
    if (r->answer)
        MHD_destroy_response(r->answer);
    si_strbuf_free(&r->xml);
    si_strbuf_free(&r->query_text);
    free(r->params);
    if (r->headers != r->header_room)
        free(r->headers);
    free(r->key);
    free(r->uri); /* path_buf is in the same allocation */
    free(r);
}
