/* The RDMA data path of the S3 server (doc/rdma.md): a GET that carries an
 * x-amz-rdma-token is answered by writing the bytes into the client's
 * registered memory (rdma_server_send_range, from a mapping of the cache
 * file) and an empty body with x-amz-rdma-reply: 200; when the server
 * declines, or the transfer fails, the normal body goes out with
 * x-amz-rdma-reply: 501, so the client has its bytes either way. A PUT or
 * UploadPart with a token and no body has its bytes read from the client
 * (rdma_server_recv) through the same checks as a body; declined, it is
 * answered 501 NotImplemented and the client sends the body. */
#include "config.h"
#include "daemon/s3/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int s3_rdma_open(s3_server_t *s, const rdma_config_t *cfg, si_error_t *err)
{
    if (!cfg->enabled)
        return 0;
    s->rdma = rdma_server_open(cfg, err);
    if (!s->rdma) {
        if (errno != ENODEV)
            return -1;
        /* No such fabric on this host: serve S3 without it (clients fall back). */
        si_log(s->log, SI_LOG_WARNING, "s3: RDMA data path off: %s", err->text);
        return 0;
    }
    si_log(s->log, SI_LOG_NOTICE, "s3: RDMA data path on (provider %s%s%s)",
           rdma_server_provider(s->rdma), cfg->domain[0] ? ", domain " : "", cfg->domain);
    return 0;
}

void s3_rdma_close(s3_server_t *s)
{
    rdma_server_close(s->rdma);
    s->rdma = NULL;
}

void s3_server_metrics(s3_server_t *s, FILE *out)
{
    if (s && s->rdma)
        rdma_server_metrics(s->rdma, out);
}

void s3_rdma_head(s3_req_t *r, struct MHD_Response *resp)
{
    if (r->srv->rdma && !r->anonymous)
        MHD_add_response_header(resp, "x-amz-rdma-provider", rdma_server_provider(r->srv->rdma));
}

static struct MHD_Response *decline(s3_req_t *r, const char *why)
{
    snprintf(r->rdma_declined, sizeof(r->rdma_declined), "%s", why);
    return NULL;
}

void s3_rdma_replied(s3_req_t *r, struct MHD_Response *resp, uint64_t moved)
{
    char bytes[24];
    snprintf(bytes, sizeof(bytes), "%" PRIu64, moved);
    MHD_add_response_header(resp, "x-amz-rdma-reply", "200");
    MHD_add_response_header(resp, "x-amz-rdma-bytes-transferred", bytes);
    r->rdma_replied = true;
    size_t n = strlen(r->note);
    snprintf(r->note + n, sizeof(r->note) - n, " rdma=%s", bytes);
}

/* Why a request may not name memory for the server to reach, or NULL. */
static const char *refusal(const s3_req_t *r)
{
    if (!r->srv->rdma)
        return "RDMA is not enabled on this server";
    /* The token says where to write: only a signed request may name it
     * (the verifier requires every x-amz-* header to be signed). */
    if (r->anonymous || r->auth.presigned)
        return "RDMA needs a request signed in its Authorization header";
    return NULL;
}

struct MHD_Response *s3_rdma_get(s3_req_t *r, int fd, const cache_place_t *place,
                                 uint64_t start, uint64_t length)
{
    const char *header = s3_req_header(r, S3_RDMA_TOKEN_HEADER);
    si_rdma_token_t token;
    si_error_t err;
    uint64_t moved = 0;

    if (!header)
        return NULL;
    const char *why = refusal(r);
    if (why)
        return decline(r, why);
    if (length == 0)
        return decline(r, "nothing to transfer");
    if (rdma_server_accept(r->srv->rdma, header, SI_RDMA_ACCESS_WRITE, length, &token, &err) < 0)
        return decline(r, err.text);
    if (rdma_server_send_range(r->srv->rdma, &token, fd, place->offset, place->size, start,
                               length, &moved, &err) < 0) {
        si_log(r->srv->log, SI_LOG_WARNING, "s3: GET %s/%s over RDMA: %s (answered over HTTP)",
               r->bucket, r->key, err.text);
        return decline(r, err.text);
    }
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"",
                                                                MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return decline(r, "out of memory");
    s3_rdma_replied(r, resp, moved);
    return resp;
}

void s3_rdma_put_failed(s3_req_t *r, const char *why)
{
    decline(r, why);
    s3_respond_error(r, "NotImplemented", "the body did not come by RDMA (%s): send it in the"
                     " request", why);
}

int s3_rdma_put_accept(s3_req_t *r, uint64_t body_length, si_rdma_token_t *token)
{
    const char *header = s3_req_header(r, S3_RDMA_TOKEN_HEADER);
    si_rdma_token_t t;
    si_error_t err;
    if (!header)
        return 0;
    if (body_length > 0) {
        decline(r, "the request has a body: the body was used");
        return 0;
    }
    const char *why = refusal(r);
    if (!why && r->auth.payload != SI_SIGV4_PAYLOAD_SHA256 &&
        r->auth.payload != SI_SIGV4_PAYLOAD_UNSIGNED)
        why = "an aws-chunked payload cannot come by RDMA";
    if (!why && (si_rdma_token_decode(header, &t, &err) < 0 ||
                 rdma_server_accept(r->srv->rdma, header, SI_RDMA_ACCESS_READ, t.len, token,
                                    &err) < 0))
        why = err.text;
    if (why) {
        s3_rdma_put_failed(r, why);
        return -1;
    }
    return 1;
}

int s3_rdma_put_receive(s3_req_t *r, const si_rdma_token_t *token, rdma_sink_fn sink,
                        void *arg, si_error_t *err)
{
    uint64_t moved = 0;
    if (rdma_server_recv(r->srv->rdma, token, token->len, sink, arg, &moved, err) < 0) {
        si_log(r->srv->log, SI_LOG_WARNING, "s3: %s %s/%s over RDMA: %s after %" PRIu64
               " bytes", r->method, r->bucket, r->key ? r->key : "", err->text, moved);
        return -1;
    }
    return 0;
}
