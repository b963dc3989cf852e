#include "config.h"
#include "common/aws/awschunked.h"

#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/amzchecksum.h"
#include "common/text.h"

#define TRAILER_SIGNATURE "x-amz-trailer-signature"
#define CHUNK_SIGNATURE ";chunk-signature="

static bool signed_mode(si_sigv4_payload_t p)
{
    return p == SI_SIGV4_PAYLOAD_STREAMING_SIGNED || p == SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER;
}

static bool trailer_mode(si_sigv4_payload_t p)
{
    return p == SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER ||
           p == SI_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER;
}

/* Checks the parts of a conf both directions need. */
static int conf_check(const si_awschunked_conf_t *conf, si_amz_checksum_alg_t *alg,
                      bool *have_trailer, si_error_t *err)
{
    if (!signed_mode(conf->payload) && conf->payload != SI_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER)
        return si_errprintf(err, "aws-chunked needs a STREAMING-* x-amz-content-sha256");
    if (signed_mode(conf->payload) &&
        (!conf->key || !conf->amz_date || !conf->seed_signature ||
         strlen(conf->seed_signature) != SI_SIGV4_HEX_LEN ||
         strlen(conf->amz_date) != SI_SIGV4_AMZ_DATE_LEN))
        return si_errprintf(err, "signed aws-chunked needs the signing key, x-amz-date and "
                            "the seed signature");
    *have_trailer = conf->trailer && *conf->trailer;
    if (!*have_trailer && trailer_mode(conf->payload))
        return si_errprintf(err, "a STREAMING-*-TRAILER body needs the x-amz-trailer header");
    if (*have_trailer) {
        if (!trailer_mode(conf->payload))
            return si_errprintf(err, "x-amz-trailer is set but x-amz-content-sha256 announces "
                                "no trailer");
        if (si_amz_checksum_alg_parse(conf->trailer, alg) < 0 ||
            strncasecmp(conf->trailer, "x-amz-checksum-", 15) != 0)
            return si_errprintf(err, "unsupported x-amz-trailer '%.64s' (supported: "
                                "x-amz-checksum-crc32, -crc32c, -sha1, -sha256)", conf->trailer);
    }
    return 0;
}

/* ---- decoder ------------------------------------------------------------ */

typedef enum {
    ST_SIZE_LINE,   /* reading "hex[;chunk-signature=...]\r\n" */
    ST_DATA,        /* passing chunk data through */
    ST_DATA_CR,     /* the CR after chunk data */
    ST_DATA_LF,
    ST_FINAL_CRLF,  /* signed, no trailer: the blank line after the last chunk */
    ST_TRAILER,     /* reading trailer lines */
    ST_DONE,
    ST_FAILED,
} state_t;

struct si_awschunked {
    si_awschunked_conf_t conf;
    si_sigv4_key_t key;
    char amz_date[SI_SIGV4_AMZ_DATE_LEN + 1];
    char previous[SI_SIGV4_HEX_LEN + 1]; /* signature the next one chains from */
    char chunk_sig[SI_SIGV4_HEX_LEN + 1];
    state_t state;
    char line[SI_AWSCHUNKED_LINE_MAX];
    size_t line_len;
    uint64_t remaining; /* data bytes left in this chunk */
    uint64_t chunks;
    uint64_t decoded;
    uint64_t max_chunk;
    EVP_MD_CTX *chunk_sha;   /* signed modes: sha256 of the current chunk */
    EVP_MD_CTX *trailer_sha; /* signed trailer: sha256 of "name:value\n" lines */
    bool have_trailer;
    si_amz_checksum_alg_t trailer_alg;
    si_amz_checksum_t *checksum;
    char trailer_value[SI_AMZ_CHECKSUM_B64_MAX];
    bool trailer_seen, trailer_sig_seen, blank_skipped;
    char trailer_sig[SI_SIGV4_HEX_LEN + 1];
};

si_awschunked_t *si_awschunked_new(const si_awschunked_conf_t *conf, si_error_t *err)
{
    si_awschunked_t *d = calloc(1, sizeof(*d));
    if (!d) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    if (conf_check(conf, &d->trailer_alg, &d->have_trailer, err) < 0)
        goto error;
    d->conf = *conf;
    d->conf.trailer = NULL; /* not kept: the caller's string may go away */
    d->max_chunk = conf->max_chunk ? conf->max_chunk : SI_AWSCHUNKED_DEFAULT_MAX_CHUNK;
    if (signed_mode(conf->payload)) {
        d->key = *conf->key;
        snprintf(d->amz_date, sizeof(d->amz_date), "%s", conf->amz_date);
        snprintf(d->previous, sizeof(d->previous), "%s", conf->seed_signature);
        d->chunk_sha = EVP_MD_CTX_new();
        d->trailer_sha = EVP_MD_CTX_new();
        if (!d->chunk_sha || !d->trailer_sha ||
            EVP_DigestInit_ex(d->trailer_sha, EVP_sha256(), NULL) != 1) {
            si_errprintf(err, "cannot initialise sha256");
            goto error;
        }
    }
    if (d->have_trailer && !(d->checksum = si_amz_checksum_new(d->trailer_alg, err)))
        goto error;
    d->state = ST_SIZE_LINE;
    return d;
error:
    si_awschunked_free(d);
    return NULL;
}

void si_awschunked_free(si_awschunked_t *d)
{
    if (!d)
        return;
    EVP_MD_CTX_free(d->chunk_sha);
    EVP_MD_CTX_free(d->trailer_sha);
    si_amz_checksum_free(d->checksum);
    OPENSSL_cleanse(&d->key, sizeof(d->key));
    free(d);
}

uint64_t si_awschunked_decoded(const si_awschunked_t *d)
{
    return d->decoded;
}

static int fail(si_awschunked_t *d, si_sigv4_status_t *status, si_sigv4_status_t code,
                si_error_t *err, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int fail(si_awschunked_t *d, si_sigv4_status_t *status, si_sigv4_status_t code,
                si_error_t *err, const char *fmt, ...)
{
    char text[sizeof(err->text)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    d->state = ST_FAILED;
    *status = code;
    return si_errprintf(err, "aws-chunked body: %s", text);
}

static bool lower_hex64(const char *s, size_t len)
{
    return len == SI_SIGV4_HEX_LEN && si_is_lower_hex(s, len);
}

static void verify_chunk_signature(si_awschunked_t *d, bool *good)
{
    unsigned char sha[32];
    char expect[SI_SIGV4_HEX_LEN + 1];
    EVP_DigestFinal_ex(d->chunk_sha, sha, NULL);
    si_sigv4_chunk_signature(&d->key, d->amz_date, d->previous, sha, expect);
    *good = CRYPTO_memcmp(expect, d->chunk_sig, SI_SIGV4_HEX_LEN) == 0;
    memcpy(d->previous, d->chunk_sig, sizeof(d->previous));
}

/* A complete chunk header line, CRLF stripped. */
static int size_line(si_awschunked_t *d, si_sigv4_status_t *status, si_error_t *err)
{
    const char *p = d->line;
    uint64_t size = 0;
    size_t ndigits = 0;
    while (si_hex_digit(*p) >= 0) {
        if (++ndigits > 16)
            return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                        "chunk %" PRIu64 " size has more than 16 hex digits", d->chunks + 1);
        size = size * 16 + (uint64_t)si_hex_digit(*p++);
    }
    if (ndigits == 0)
        return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                    "chunk %" PRIu64 " header '%.40s' does not start with a hex size",
                    d->chunks + 1, d->line);
    if (signed_mode(d->conf.payload)) {
        size_t n = strlen(CHUNK_SIGNATURE);
        if (strncmp(p, CHUNK_SIGNATURE, n) != 0 || !lower_hex64(p + n, strlen(p + n)))
            return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                        "chunk %" PRIu64 " header lacks ';chunk-signature=' and 64 lower-case "
                        "hex digits", d->chunks + 1);
        memcpy(d->chunk_sig, p + n, SI_SIGV4_HEX_LEN + 1);
        EVP_DigestInit_ex(d->chunk_sha, EVP_sha256(), NULL);
    } else if (*p != '\0') {
        return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                    "chunk %" PRIu64 " header has unexpected text after its size",
                    d->chunks + 1);
    }
    if (size > d->max_chunk)
        return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                    "chunk %" PRIu64 " of %" PRIu64 " bytes exceeds the %" PRIu64 "-byte limit",
                    d->chunks + 1, size, d->max_chunk);
    if (d->conf.decoded_length >= 0 && size > (uint64_t)d->conf.decoded_length - d->decoded)
        return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                    "chunks carry more than the %" PRId64 " bytes of "
                    "x-amz-decoded-content-length", d->conf.decoded_length);
    d->chunks++;
    d->remaining = size;
    if (size > 0) {
        d->state = ST_DATA;
        return 0;
    }
    /* the final, empty chunk */
    if (signed_mode(d->conf.payload)) {
        bool good;
        verify_chunk_signature(d, &good);
        if (!good)
            return fail(d, status, SI_SIGV4_SIGNATURE_MISMATCH, err,
                        "the signature of the final chunk does not match");
    }
    d->state = trailer_mode(d->conf.payload) ? ST_TRAILER : ST_FINAL_CRLF;
    return 0;
}

/* Checks the trailer block once it is complete. */
static int trailers_done(si_awschunked_t *d, si_sigv4_status_t *status, si_error_t *err)
{
    if (d->have_trailer && !d->trailer_seen)
        return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                    "the trailer %s announced in x-amz-trailer was not sent",
                    si_amz_checksum_header(d->trailer_alg));
    if (d->conf.payload == SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER) {
        unsigned char sha[32];
        char expect[SI_SIGV4_HEX_LEN + 1];
        if (!d->trailer_sig_seen)
            return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                        "the signed trailer lacks " TRAILER_SIGNATURE);
        EVP_DigestFinal_ex(d->trailer_sha, sha, NULL);
        si_sigv4_trailer_signature(&d->key, d->amz_date, d->previous, sha, expect);
        if (CRYPTO_memcmp(expect, d->trailer_sig, SI_SIGV4_HEX_LEN) != 0)
            return fail(d, status, SI_SIGV4_SIGNATURE_MISMATCH, err,
                        "the trailer signature does not match");
    }
    if (d->have_trailer) {
        char got[SI_AMZ_CHECKSUM_B64_MAX];
        si_amz_checksum_final(d->checksum, got);
        if (strcmp(got, d->trailer_value) != 0)
            return fail(d, status, SI_SIGV4_BAD_DIGEST, err,
                        "%s %s does not match the body's %s",
                        si_amz_checksum_header(d->trailer_alg), d->trailer_value, got);
    }
    d->state = ST_DONE;
    return 0;
}

/* One complete trailer line, CRLF stripped. */
static int trailer_line(si_awschunked_t *d, si_sigv4_status_t *status, si_error_t *err)
{
    if (d->line_len == 0) {
        bool any = d->trailer_seen || d->trailer_sig_seen;
        /* Some clients put a blank line between the final chunk and the
         * trailers; a blank line ends the body once trailers were read or
         * when none was announced. */
        if (!any && d->have_trailer && !d->blank_skipped) {
            d->blank_skipped = true;
            return 0;
        }
        return trailers_done(d, status, err);
    }
    char *colon = strchr(d->line, ':');
    if (!colon)
        return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                    "trailer line '%.40s' is not NAME:VALUE", d->line);
    *colon = '\0';
    char *value = colon + 1;
    while (*value == ' ' || *value == '\t')
        value++;
    size_t vlen = strlen(value);
    while (vlen && (value[vlen - 1] == ' ' || value[vlen - 1] == '\t'))
        value[--vlen] = '\0';
    for (char *c = d->line; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    if (strcmp(d->line, TRAILER_SIGNATURE) == 0) {
        if (d->conf.payload != SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER || d->trailer_sig_seen)
            return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                        "unexpected " TRAILER_SIGNATURE);
        if (!lower_hex64(value, vlen))
            return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                        TRAILER_SIGNATURE " is not 64 lower-case hex digits");
        memcpy(d->trailer_sig, value, SI_SIGV4_HEX_LEN + 1);
        d->trailer_sig_seen = true;
        return 0;
    }
    if (!d->have_trailer || strcmp(d->line, si_amz_checksum_header(d->trailer_alg)) != 0)
        return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                    "trailer '%.64s' was not announced in x-amz-trailer", d->line);
    if (d->trailer_seen || d->trailer_sig_seen)
        return fail(d, status, SI_SIGV4_MALFORMED_BODY, err, "trailer %s repeated or after "
                    "the trailer signature", d->line);
    if (vlen == 0 || vlen >= sizeof(d->trailer_value))
        return fail(d, status, SI_SIGV4_MALFORMED_BODY, err, "trailer %s has a bad value",
                    d->line);
    memcpy(d->trailer_value, value, vlen + 1);
    d->trailer_seen = true;
    if (d->trailer_sha) {
        EVP_DigestUpdate(d->trailer_sha, d->line, strlen(d->line));
        EVP_DigestUpdate(d->trailer_sha, ":", 1);
        EVP_DigestUpdate(d->trailer_sha, value, vlen);
        EVP_DigestUpdate(d->trailer_sha, "\n", 1);
    }
    return 0;
}

/* Gathers a CRLF-terminated line; returns 1 when one is complete. */
static int gather_line(si_awschunked_t *d, const unsigned char **p, const unsigned char *end,
                       si_sigv4_status_t *status, si_error_t *err)
{
    while (*p < end) {
        char c = (char)*(*p)++;
        if (c == '\n') {
            if (d->line_len == 0 || d->line[d->line_len - 1] != '\r')
                return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                            "a line ends in LF without CR");
            d->line[--d->line_len] = '\0';
            return 1;
        }
        if (c == '\0' || (d->line_len > 0 && d->line[d->line_len - 1] == '\r'))
            return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                        "a stray %s inside a chunk header or trailer line",
                        c == '\0' ? "NUL" : "CR");
        if (d->line_len + 1 >= sizeof(d->line))
            return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                        "a chunk header or trailer line is longer than %d bytes",
                        SI_AWSCHUNKED_LINE_MAX - 2);
        d->line[d->line_len++] = c;
    }
    return 0;
}

int si_awschunked_feed(si_awschunked_t *d, const void *data, size_t len,
                       si_awschunked_sink_fn sink, void *arg, si_sigv4_status_t *status,
                       si_error_t *err)
{
    const unsigned char *p = data, *end = p + len;
    *status = SI_SIGV4_OK;
    if (d->state == ST_FAILED)
        return fail(d, status, SI_SIGV4_MALFORMED_BODY, err, "decoding already failed");
    while (p < end) {
        switch (d->state) {
        case ST_SIZE_LINE:
        case ST_TRAILER: {
            int rc = gather_line(d, &p, end, status, err);
            if (rc < 0)
                return -1;
            if (rc == 0)
                break;
            rc = d->state == ST_SIZE_LINE ? size_line(d, status, err)
                                          : trailer_line(d, status, err);
            d->line_len = 0;
            if (rc < 0)
                return -1;
            break;
        }
        case ST_DATA: {
            size_t n = (size_t)((uint64_t)(end - p) < d->remaining ? (uint64_t)(end - p)
                                                                   : d->remaining);
            if (d->chunk_sha)
                EVP_DigestUpdate(d->chunk_sha, p, n);
            if (d->checksum)
                si_amz_checksum_update(d->checksum, p, n);
            if (sink && sink(arg, p, n) < 0)
                return fail(d, status, SI_SIGV4_INTERNAL, err, "the consumer stopped decoding");
            d->decoded += n;
            d->remaining -= n;
            p += n;
            if (d->remaining == 0)
                d->state = ST_DATA_CR;
            break;
        }
        case ST_DATA_CR:
        case ST_FINAL_CRLF:
            if (*p != '\r')
                return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                            "chunk %" PRIu64 " is longer than its declared size", d->chunks);
            p++;
            d->state = d->state == ST_DATA_CR ? ST_DATA_LF : ST_DONE;
            if (d->state == ST_DONE)
                d->line_len = 1; /* LF still owed */
            break;
        case ST_DATA_LF:
            if (*p++ != '\n')
                return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                            "chunk %" PRIu64 " data is not followed by CRLF", d->chunks);
            if (signed_mode(d->conf.payload)) {
                bool good;
                verify_chunk_signature(d, &good);
                if (!good)
                    return fail(d, status, SI_SIGV4_SIGNATURE_MISMATCH, err,
                                "the signature of chunk %" PRIu64 " does not match", d->chunks);
            }
            d->state = ST_SIZE_LINE;
            break;
        case ST_DONE:
            if (d->line_len == 1 && *p == '\n') {
                d->line_len = 0;
                p++;
                break;
            }
            return fail(d, status, SI_SIGV4_MALFORMED_BODY, err,
                        "data after the end of the body");
        case ST_FAILED:
            return fail(d, status, SI_SIGV4_MALFORMED_BODY, err, "decoding already failed");
        }
    }
    return 0;
}

int si_awschunked_finish(si_awschunked_t *d, si_sigv4_status_t *status, si_error_t *err)
{
    *status = SI_SIGV4_OK;
    /* a trailer block may end without its closing blank line */
    if (d->state == ST_TRAILER && d->line_len == 0 && (d->trailer_seen || !d->have_trailer) &&
        trailers_done(d, status, err) < 0)
        return -1;
    if (d->state == ST_FAILED)
        return fail(d, status, SI_SIGV4_MALFORMED_BODY, err, "decoding already failed");
    if (d->state != ST_DONE || d->line_len != 0)
        return fail(d, status, SI_SIGV4_INCOMPLETE_BODY, err,
                    "the body ended %s (after %" PRIu64 " payload bytes)",
                    d->state == ST_DATA ? "inside chunk data"
                    : d->state == ST_DATA_CR || d->state == ST_DATA_LF ? "before a chunk's CRLF"
                    : d->state == ST_FINAL_CRLF || d->state == ST_DONE ? "before the closing CRLF"
                    : d->state == ST_TRAILER ? "inside the trailers"
                                             : "before the final chunk",
                    d->decoded);
    if (d->conf.decoded_length >= 0 && d->decoded != (uint64_t)d->conf.decoded_length)
        return fail(d, status, SI_SIGV4_INCOMPLETE_BODY, err,
                    "%" PRIu64 " payload bytes, but x-amz-decoded-content-length is %" PRId64,
                    d->decoded, d->conf.decoded_length);
    return 0;
}

/* ---- encoder ------------------------------------------------------------ */

struct si_awschunked_enc {
    si_awschunked_conf_t conf;
    si_sigv4_key_t key;
    char amz_date[SI_SIGV4_AMZ_DATE_LEN + 1];
    char previous[SI_SIGV4_HEX_LEN + 1];
    bool have_trailer;
    si_amz_checksum_alg_t trailer_alg;
    si_amz_checksum_t *checksum;
};

si_awschunked_enc_t *si_awschunked_enc_new(const si_awschunked_conf_t *conf, si_error_t *err)
{
    si_awschunked_enc_t *e = calloc(1, sizeof(*e));
    if (!e) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    if (conf_check(conf, &e->trailer_alg, &e->have_trailer, err) < 0)
        goto error;
    e->conf = *conf;
    e->conf.trailer = NULL;
    if (signed_mode(conf->payload)) {
        e->key = *conf->key;
        snprintf(e->amz_date, sizeof(e->amz_date), "%s", conf->amz_date);
        snprintf(e->previous, sizeof(e->previous), "%s", conf->seed_signature);
    }
    if (e->have_trailer && !(e->checksum = si_amz_checksum_new(e->trailer_alg, err)))
        goto error;
    return e;
error:
    si_awschunked_enc_free(e);
    return NULL;
}

void si_awschunked_enc_free(si_awschunked_enc_t *e)
{
    if (!e)
        return;
    si_amz_checksum_free(e->checksum);
    OPENSSL_cleanse(&e->key, sizeof(e->key));
    free(e);
}

size_t si_awschunked_enc_header(si_awschunked_enc_t *e, const void *data, size_t len,
                                char line[SI_AWSCHUNKED_LINE_MAX])
{
    if (e->checksum)
        si_amz_checksum_update(e->checksum, data, len);
    if (!signed_mode(e->conf.payload))
        return (size_t)snprintf(line, SI_AWSCHUNKED_LINE_MAX, "%zx\r\n", len);
    unsigned char sha[32];
    char sig[SI_SIGV4_HEX_LEN + 1];
    EVP_Digest(data, len, sha, NULL, EVP_sha256(), NULL);
    si_sigv4_chunk_signature(&e->key, e->amz_date, e->previous, sha, sig);
    memcpy(e->previous, sig, sizeof(sig));
    return (size_t)snprintf(line, SI_AWSCHUNKED_LINE_MAX, "%zx" CHUNK_SIGNATURE "%s\r\n", len,
                            sig);
}

int si_awschunked_enc_chunk(si_awschunked_enc_t *e, const void *data, size_t len,
                            si_strbuf_t *out, si_error_t *err)
{
    char line[SI_AWSCHUNKED_LINE_MAX];
    if (len == 0)
        return si_errprintf(err, "an empty chunk would end the body; use "
                            "si_awschunked_enc_finish");
    size_t n = si_awschunked_enc_header(e, data, len, line);
    si_strbuf_append(out, line, n);
    si_strbuf_append(out, data, len);
    si_strbuf_append(out, "\r\n", 2);
    return out->failed ? si_errprintf(err, "encoded body does not fit its buffer") : 0;
}

int si_awschunked_enc_finish(si_awschunked_enc_t *e, si_strbuf_t *out, si_error_t *err)
{
    char line[SI_AWSCHUNKED_LINE_MAX];
    unsigned char sha[32];
    size_t n = si_awschunked_enc_header(e, "", 0, line);
    si_strbuf_append(out, line, n);
    if (e->have_trailer) {
        char value[SI_AMZ_CHECKSUM_B64_MAX];
        char trailer[128];
        si_amz_checksum_final(e->checksum, value);
        int tn = snprintf(trailer, sizeof(trailer), "%s:%s",
                          si_amz_checksum_header(e->trailer_alg), value);
        si_strbuf_append(out, trailer, (size_t)tn);
        si_strbuf_append(out, "\r\n", 2);
        if (e->conf.payload == SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER) {
            char sig[SI_SIGV4_HEX_LEN + 1];
            trailer[tn] = '\n';
            EVP_Digest(trailer, (size_t)tn + 1, sha, NULL, EVP_sha256(), NULL);
            si_sigv4_trailer_signature(&e->key, e->amz_date, e->previous, sha, sig);
            si_strbuf_printf(out, TRAILER_SIGNATURE ":%s\r\n", sig);
        }
    }
    si_strbuf_append(out, "\r\n", 2);
    return out->failed ? si_errprintf(err, "encoded body does not fit its buffer") : 0;
}

uint64_t si_awschunked_encoded_length(si_sigv4_payload_t payload, const char *trailer,
                                      uint64_t payload_len, uint64_t chunk_size)
{
    uint64_t sig = signed_mode(payload) ? strlen(CHUNK_SIGNATURE) + SI_SIGV4_HEX_LEN : 0;
    uint64_t full = chunk_size ? payload_len / chunk_size : 0;
    uint64_t rest = chunk_size ? payload_len % chunk_size : payload_len;
    uint64_t total = full * (si_digits(chunk_size, 16) + sig + 2 + chunk_size + 2);
    if (rest)
        total += si_digits(rest, 16) + sig + 2 + rest + 2;
    total += 1 + sig + 2; /* the final empty chunk */
    si_amz_checksum_alg_t alg;
    if (trailer && *trailer && si_amz_checksum_alg_parse(trailer, &alg) == 0) {
        static const uint64_t b64[] = {[SI_AMZ_CRC32] = 8, [SI_AMZ_CRC32C] = 8,
                                       [SI_AMZ_SHA1] = 28, [SI_AMZ_SHA256] = 44};
        total += strlen(si_amz_checksum_header(alg)) + 1 + b64[alg] + 2;
        if (payload == SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER)
            total += strlen(TRAILER_SIGNATURE) + 1 + SI_SIGV4_HEX_LEN + 2;
    }
    return total + 2;
}
