#include "config.h"
#include "common/aws/sigv4.h"
#include "common/aws/sigv4_internal.h"

#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/strbuf.h"
#include "common/text.h"
#include "common/uri.h"

/* ---- verification ------------------------------------------------------- */

const char *si_sigv4_status_code(si_sigv4_status_t status)
{
    switch (status) {
    case SI_SIGV4_OK: return "OK";
    case SI_SIGV4_NO_CREDENTIALS: return "AccessDenied";
    case SI_SIGV4_SIGNATURE_MISMATCH: return "SignatureDoesNotMatch";
    case SI_SIGV4_ACCESS_DENIED: return "AccessDenied";
    case SI_SIGV4_HEADER_MALFORMED: return "AuthorizationHeaderMalformed";
    case SI_SIGV4_QUERY_MALFORMED: return "AuthorizationQueryParametersError";
    case SI_SIGV4_TIME_SKEWED: return "RequestTimeTooSkewed";
    case SI_SIGV4_EXPIRED: return "AccessDenied";
    case SI_SIGV4_UNKNOWN_ACCESS_KEY: return "InvalidAccessKeyId";
    case SI_SIGV4_UNSUPPORTED: return "InvalidRequest";
    case SI_SIGV4_INVALID_ARGUMENT: return "InvalidArgument";
    case SI_SIGV4_MISSING_CONTENT_SHA256: return "InvalidRequest";
    case SI_SIGV4_CONTENT_SHA256_MISMATCH: return "XAmzContentSHA256Mismatch";
    case SI_SIGV4_BAD_DIGEST: return "BadDigest";
    case SI_SIGV4_INCOMPLETE_BODY: return "IncompleteBody";
    case SI_SIGV4_MALFORMED_BODY: return "InvalidRequest";
    case SI_SIGV4_INTERNAL: return "InternalError";
    }
    return "InternalError";
}

int si_sigv4_status_http(si_sigv4_status_t status)
{
    switch (status) {
    case SI_SIGV4_OK: return 200;
    case SI_SIGV4_NO_CREDENTIALS:
    case SI_SIGV4_SIGNATURE_MISMATCH:
    case SI_SIGV4_ACCESS_DENIED:
    case SI_SIGV4_TIME_SKEWED:
    case SI_SIGV4_EXPIRED:
    case SI_SIGV4_UNKNOWN_ACCESS_KEY: return 403;
    case SI_SIGV4_HEADER_MALFORMED:
    case SI_SIGV4_QUERY_MALFORMED:
    case SI_SIGV4_UNSUPPORTED:
    case SI_SIGV4_INVALID_ARGUMENT:
    case SI_SIGV4_MISSING_CONTENT_SHA256:
    case SI_SIGV4_CONTENT_SHA256_MISMATCH:
    case SI_SIGV4_BAD_DIGEST:
    case SI_SIGV4_INCOMPLETE_BODY:
    case SI_SIGV4_MALFORMED_BODY: return 400;
    case SI_SIGV4_INTERNAL: return 500;
    }
    return 500;
}

/* What either mechanism carries, once parsed. */
typedef struct {
    bool presigned;
    char access_key[SI_SIGV4_ACCESS_KEY_MAX + 1];
    char date[9];
    char region[SI_SIGV4_REGION_MAX + 1];
    char service[SI_SIGV4_SERVICE_MAX + 1];
    char signed_headers[SI_SIGV4_AUTHORIZATION_MAX];
    char signature[SI_SIGV4_HEX_LEN + 1];
    char amz_date[SI_SIGV4_AMZ_DATE_LEN + 1];
    int64_t expires;
} parsed_auth_t;

/* "AKID/20150830/us-east-1/service/aws4_request" */
static int parse_credential(const char *text, size_t len, parsed_auth_t *pa, si_error_t *err)
{
    const char *parts[5];
    size_t lens[5];
    size_t n = 0;
    const char *p = text, *end = text + len;
    while (n < 5) {
        /* the fifth part runs to the end, so a sixth shows up as a '/' in it */
        const char *slash = n < 4 ? memchr(p, '/', (size_t)(end - p)) : NULL;
        parts[n] = p;
        lens[n] = slash ? (size_t)(slash - p) : (size_t)(end - p);
        n++;
        if (!slash)
            break;
        p = slash + 1;
    }
    if (n != 5 || memchr(parts[4], '/', lens[4]))
        return si_errprintf(err, "Credential must be ACCESS_KEY/YYYYMMDD/REGION/SERVICE/"
                            "aws4_request");
    if (lens[0] == 0 || lens[0] > SI_SIGV4_ACCESS_KEY_MAX)
        return si_errprintf(err, "Credential access key must be 1 to %d characters",
                            SI_SIGV4_ACCESS_KEY_MAX);
    memcpy(pa->access_key, parts[0], lens[0]);
    pa->access_key[lens[0]] = '\0';
    if (!sigv4_access_key_valid(pa->access_key))
        return si_errprintf(err, "Credential access key has characters not allowed in a key");
    if (lens[1] != 8 || sigv4_digits(parts[1], 8) < 0)
        return si_errprintf(err, "Credential date '%.*s' is not YYYYMMDD",
                            (int)(lens[1] > 16 ? 16 : lens[1]), parts[1]);
    memcpy(pa->date, parts[1], 8);
    pa->date[8] = '\0';
    if (lens[2] == 0 || lens[2] > SI_SIGV4_REGION_MAX || lens[3] == 0 ||
        lens[3] > SI_SIGV4_SERVICE_MAX)
        return si_errprintf(err, "Credential region or service is empty or too long");
    memcpy(pa->region, parts[2], lens[2]);
    pa->region[lens[2]] = '\0';
    memcpy(pa->service, parts[3], lens[3]);
    pa->service[lens[3]] = '\0';
    if (lens[4] != strlen(SCOPE_TERMINATOR) || memcmp(parts[4], SCOPE_TERMINATOR, lens[4]))
        return si_errprintf(err, "Credential should be scoped with a valid terminator: '"
                            SCOPE_TERMINATOR "', not '%.*s'",
                            (int)(lens[4] > 32 ? 32 : lens[4]), parts[4]);
    return 0;
}

static int parse_signature(const char *text, size_t len, parsed_auth_t *pa, si_error_t *err)
{
    if (len != SI_SIGV4_HEX_LEN)
        return si_errprintf(err, "Signature must be %d lower-case hex digits, not %zu "
                            "characters", SI_SIGV4_HEX_LEN, len);
    memcpy(pa->signature, text, len);
    pa->signature[len] = '\0';
    if (!sigv4_lower_hex(pa->signature, SI_SIGV4_HEX_LEN))
        return si_errprintf(err, "Signature must be %d lower-case hex digits",
                            SI_SIGV4_HEX_LEN);
    return 0;
}

static int copy_signed_headers(const char *text, size_t len, parsed_auth_t *pa,
                               si_error_t *err)
{
    if (len >= sizeof(pa->signed_headers))
        return si_errprintf(err, "SignedHeaders is longer than %zu bytes",
                            sizeof(pa->signed_headers) - 1);
    memcpy(pa->signed_headers, text, len);
    pa->signed_headers[len] = '\0';
    return 0;
}

/* "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=..." in any
 * component order, with or without spaces after the commas. */
static int parse_authorization(const char *value, parsed_auth_t *pa, si_sigv4_status_t *status,
                               si_error_t *err)
{
    size_t alg_len = strlen(SI_SIGV4_ALGORITHM);
    *status = SI_SIGV4_HEADER_MALFORMED;
    if (strlen(value) > SI_SIGV4_AUTHORIZATION_MAX)
        return si_errprintf(err, "Authorization header is %zu bytes, longer than %d",
                            strlen(value), SI_SIGV4_AUTHORIZATION_MAX);
    if (strncmp(value, "AWS ", 4) == 0) {
        *status = SI_SIGV4_UNSUPPORTED;
        return si_errprintf(err, "Signature Version 2 is not supported; please use "
                            SI_SIGV4_ALGORITHM);
    }
    if (strncmp(value, SI_SIGV4_ALGORITHM, alg_len) != 0 ||
        (value[alg_len] != ' ' && value[alg_len] != '\t')) {
        *status = SI_SIGV4_UNSUPPORTED;
        return si_errprintf(err, "the authorization mechanism '%.32s' is not supported; please "
                            "use " SI_SIGV4_ALGORITHM, value);
    }
    bool have_cred = false, have_signed = false, have_sig = false;
    const char *p = value + alg_len;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0')
            break;
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *vend = end;
        while (vend > p && (vend[-1] == ' ' || vend[-1] == '\t'))
            vend--;
        const char *eq = memchr(p, '=', (size_t)(vend - p));
        if (!eq)
            return si_errprintf(err, "Authorization component '%.*s' is not NAME=VALUE",
                                (int)((vend - p) > 32 ? 32 : (vend - p)), p);
        size_t nlen = (size_t)(eq - p);
        const char *v = eq + 1;
        size_t vlen = (size_t)(vend - v);
        bool *seen;
        int rc;
        if (nlen == 10 && memcmp(p, "Credential", 10) == 0) {
            seen = &have_cred;
            rc = *seen ? 0 : parse_credential(v, vlen, pa, err);
        } else if (nlen == 13 && memcmp(p, "SignedHeaders", 13) == 0) {
            seen = &have_signed;
            rc = *seen ? 0 : copy_signed_headers(v, vlen, pa, err);
        } else if (nlen == 9 && memcmp(p, "Signature", 9) == 0) {
            seen = &have_sig;
            rc = *seen ? 0 : parse_signature(v, vlen, pa, err);
        } else {
            return si_errprintf(err, "unknown Authorization component '%.*s'",
                                (int)(nlen > 32 ? 32 : nlen), p);
        }
        if (*seen)
            return si_errprintf(err, "Authorization repeats %.*s", (int)nlen, p);
        if (rc < 0)
            return -1;
        *seen = true;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (!have_cred || !have_signed || !have_sig)
        return si_errprintf(err, "Authorization lacks %s", !have_cred ? "Credential"
                            : !have_signed ? "SignedHeaders" : "Signature");
    return 0;
}

/* The X-Amz-* parameters of a presigned query, collected in one pass over
 * it (they are looked up together, on every presigned request). */
enum { PQ_ALGORITHM, PQ_CREDENTIAL, PQ_DATE, PQ_EXPIRES, PQ_SIGNED_HEADERS, PQ_SIGNATURE,
       PQ_N };

typedef struct {
    const char *name;
    char *out;
    size_t size;
    int count;
    bool bad;               /* the first value is not valid or too long: why */
    si_error_t why;
} presigned_param_t;

static int presigned_params(const char *query, presigned_param_t *params, si_error_t *err)
{
    si_strbuf_t name, value;
    si_strbuf_init(&name, 64);
    const char *p = query;
    si_uri_param_t u;
    while (si_uri_query_next(&p, &u)) {
        /* a name with nothing to decode is compared as it is; longer names
         * are none of ours; a malformed one was refused before */
        bool plain = si_uri_plain(u.name, u.name_len);
        if (!plain) {
            si_strbuf_reset(&name);
            if (si_uri_decode(&name, u.name, u.name_len, true, NULL) < 0)
                continue;
        }
        for (int i = 0; i < PQ_N; i++) {
            presigned_param_t *q = &params[i];
            if (plain ? strlen(q->name) != u.name_len || memcmp(u.name, q->name, u.name_len) != 0
                      : strcmp(si_strbuf_str(&name), q->name) != 0)
                continue;
            if (q->count++ > 0 || !u.value)
                break; /* the first value counts */
            if (u.value_len < q->size && si_uri_plain(u.value, u.value_len)) {
                memcpy(q->out, u.value, u.value_len); /* decodes to itself */
                q->out[u.value_len] = '\0';
                break;
            }
            si_strbuf_init(&value, q->size - 1);
            if (si_uri_decode(&value, u.value, u.value_len, true, &q->why) < 0)
                q->bad = true;
            else /* at most size - 1 bytes: the buffer's limit */
                memcpy(q->out, si_strbuf_str(&value), value.len + 1);
            si_strbuf_free(&value);
            break;
        }
    }
    si_strbuf_free(&name);
    for (int i = 0; i < PQ_N; i++) {
        const presigned_param_t *q = &params[i];
        if (q->bad) {
            if (err)
                *err = q->why;
            return si_errprefix(err, "query parameter %s", q->name);
        }
        if (q->count != 1)
            return si_errprintf(err, q->count ? "query repeats %s" : "query lacks %s", q->name);
    }
    return 0;
}

static int parse_presigned(const char *query, parsed_auth_t *pa, si_error_t *err)
{
    char algorithm[64] = "", credential[SI_SIGV4_ACCESS_KEY_MAX + 128] = "", expires[32] = "";
    char signature[SI_SIGV4_HEX_LEN + 8] = "";
    pa->presigned = true;
    presigned_param_t params[PQ_N] = {
        [PQ_ALGORITHM] = {"X-Amz-Algorithm", algorithm, sizeof(algorithm)},
        [PQ_CREDENTIAL] = {"X-Amz-Credential", credential, sizeof(credential)},
        [PQ_DATE] = {"X-Amz-Date", pa->amz_date, sizeof(pa->amz_date)},
        [PQ_EXPIRES] = {"X-Amz-Expires", expires, sizeof(expires)},
        [PQ_SIGNED_HEADERS] = {"X-Amz-SignedHeaders", pa->signed_headers,
                               sizeof(pa->signed_headers)},
        [PQ_SIGNATURE] = {"X-Amz-Signature", signature, sizeof(signature)},
    };
    if (presigned_params(query, params, err) < 0)
        return -1;
    if (strcmp(algorithm, SI_SIGV4_ALGORITHM) != 0)
        return si_errprintf(err, "X-Amz-Algorithm only supports \"" SI_SIGV4_ALGORITHM "\"");
    if (parse_credential(credential, strlen(credential), pa, err) < 0)
        return si_errprefix(err, "X-Amz-Credential");
    uint64_t e;
    if (si_parse_u64(expires, &e) < 0 || e < 1 || e > SI_SIGV4_PRESIGN_MAX_S)
        return si_errprintf(err, "X-Amz-Expires must be 1 to %d seconds, not '%.20s'",
                            SI_SIGV4_PRESIGN_MAX_S, expires);
    pa->expires = (int64_t)e;
    if (parse_signature(signature, strlen(signature), pa, err) < 0)
        return si_errprefix(err, "X-Amz-Signature");
    return 0;
}

/* ---- derived keys, cached ---------------------------------------------- */

#define KEY_CACHE_SLOTS 64 /* access keys in use at once, each in its slot by hash */

typedef struct {
    pthread_mutex_t mu;
    bool used;
    char access_key[SI_SIGV4_ACCESS_KEY_MAX + 1];
    char secret[SI_SIGV4_SECRET_MAX + 1]; /* zero-padded, compared whole */
    si_sigv4_key_t key;
} key_slot_t;

struct si_sigv4_key_cache {
    key_slot_t slot[KEY_CACHE_SLOTS];
    EVP_MD *sha256;                       /* fetched once; NULL: EVP_sha256() */
};

si_sigv4_key_cache_t *si_sigv4_key_cache_new(si_error_t *err)
{
    si_sigv4_key_cache_t *c = calloc(1, sizeof(*c));
    if (!c) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < KEY_CACHE_SLOTS; i++)
        pthread_mutex_init(&c->slot[i].mu, NULL);
    c->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
    return c;
}

void si_sigv4_key_cache_free(si_sigv4_key_cache_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < KEY_CACHE_SLOTS; i++)
        pthread_mutex_destroy(&c->slot[i].mu);
    EVP_MD_free(c->sha256);
    OPENSSL_cleanse(c, sizeof(*c));
    free(c);
}

static key_slot_t *key_slot(si_sigv4_key_cache_t *c, const char *access_key)
{
    uint32_t h = si_fnv1a(SI_FNV1A_START, access_key, strlen(access_key));
    return &c->slot[h % KEY_CACHE_SLOTS];
}

/* si_sigv4_derive_key through the cache, when there is one. */
static int derive_key_cached(si_sigv4_key_cache_t *c, const char *access_key,
                             const char *secret, const char *date, const char *region,
                             const char *service, si_sigv4_key_t *key, si_error_t *err)
{
    if (!c)
        return si_sigv4_derive_key(secret, date, region, service, key, err);
    char padded[SI_SIGV4_SECRET_MAX + 1] = "";
    size_t slen = strlen(secret);
    if (slen > SI_SIGV4_SECRET_MAX)
        return si_sigv4_derive_key(secret, date, region, service, key, err); /* its error */
    memcpy(padded, secret, slen);
    key_slot_t *s = key_slot(c, access_key);
    pthread_mutex_lock(&s->mu);
    bool hit = s->used && strcmp(s->access_key, access_key) == 0 &&
               CRYPTO_memcmp(s->secret, padded, sizeof(padded)) == 0 &&
               si_sigv4_key_matches(&s->key, date, region, service);
    if (hit)
        *key = s->key;
    pthread_mutex_unlock(&s->mu);
    if (hit) {
        OPENSSL_cleanse(padded, sizeof(padded));
        return 0;
    }
    int rc = si_sigv4_derive_key(secret, date, region, service, key, err);
    if (rc == 0 && strlen(access_key) <= SI_SIGV4_ACCESS_KEY_MAX) {
        pthread_mutex_lock(&s->mu);
        s->used = true;
        snprintf(s->access_key, sizeof(s->access_key), "%s", access_key);
        memcpy(s->secret, padded, sizeof(padded));
        s->key = *key;
        pthread_mutex_unlock(&s->mu);
    }
    OPENSSL_cleanse(padded, sizeof(padded));
    return rc;
}

/* S3 requires every x-amz-* header of a header-signed request to be signed. */
static int check_amz_headers_signed(const si_sigv4_request_t *req, const name_slice_t *names,
                                    size_t count, si_error_t *err)
{
    for (size_t h = 0; h < req->nheaders; h++) {
        const char *name = req->headers[h].name;
        if (!name || strncasecmp(name, "x-amz-", 6) != 0)
            continue;
        bool signed_one = false;
        for (size_t i = 0; i < count && !signed_one; i++)
            signed_one = sigv4_name_is(name, names[i].name, names[i].len);
        if (!signed_one)
            return si_errprintf(err, "There were headers present in the request which were not "
                                "signed: %.64s", name);
    }
    return 0;
}

int si_sigv4_verify(const si_sigv4_verifier_conf_t *conf, const si_sigv4_request_t *req,
                    int64_t now, si_sigv4_auth_t *auth, si_sigv4_status_t *status,
                    si_error_t *err)
{
    return si_sigv4_verify_region(conf, req, now, auth, status, NULL, err);
}

int si_sigv4_verify_region(const si_sigv4_verifier_conf_t *conf, const si_sigv4_request_t *req,
                           int64_t now, si_sigv4_auth_t *auth, si_sigv4_status_t *status,
                           bool *wrong_region, si_error_t *err)
{
    parsed_auth_t pa;
    si_sigv4_credential_t cred;
    si_sigv4_auth_t res;
    name_slice_t names[SI_SIGV4_SIGNED_HEADERS_MAX];
    size_t count = 0;
    si_strbuf_t creq;
    char *sts = NULL;
    int n_authz, n_date, n_sha;
    si_sigv4_status_t malformed;
    memset(&pa, 0, sizeof(pa));
    memset(&res, 0, sizeof(res));
    memset(&cred, 0, sizeof(cred));
    si_strbuf_init(&creq, CANONICAL_MAX);
    /* the canonical request, mostly the query and the path: one allocation */
    size_t creq_guess = 512 + strlen(req->query ? req->query : "") +
                        strlen(req->path ? req->path : "");
    if (creq_guess < CANONICAL_MAX)
        si_strbuf_reserve(&creq, creq_guess);

    *status = SI_SIGV4_INVALID_ARGUMENT;
    const si_http_header_t *authz = sigv4_find_header(req, "authorization", &n_authz);
    int n_alg = si_uri_query_get(req->query, "X-Amz-Algorithm", NULL, err);
    if (n_alg < 0)
        goto error;
    if (n_authz > 1) {
        si_errprintf(err, "request has %d Authorization headers", n_authz);
        goto error;
    }
    if (authz && n_alg) {
        si_errprintf(err, "Only one auth mechanism allowed; only the X-Amz-Algorithm query "
                     "parameter or the Authorization header should be specified");
        goto error;
    }
    if (!authz && !n_alg) {
        *status = SI_SIGV4_NO_CREDENTIALS;
        si_errprintf(err, "the request is not signed (anonymous access)");
        goto error;
    }

    if (authz) {
        malformed = SI_SIGV4_HEADER_MALFORMED;
        if (parse_authorization(authz->value ? authz->value : "", &pa, status, err) < 0)
            goto error;
        const si_http_header_t *date = sigv4_find_header(req, "x-amz-date", &n_date);
        if (n_date > 1) {
            *status = SI_SIGV4_INVALID_ARGUMENT;
            si_errprintf(err, "request has %d x-amz-date headers", n_date);
            goto error;
        }
        int64_t t;
        if (!date || !date->value || si_sigv4_parse_amz_date(date->value, &t) < 0) {
            *status = SI_SIGV4_ACCESS_DENIED;
            si_errprintf(err, "AWS authentication requires a valid Date or x-amz-date header "
                         "(x-amz-date %s)", date ? "is not YYYYMMDDTHHMMSSZ" : "is missing");
            goto error;
        }
        snprintf(pa.amz_date, sizeof(pa.amz_date), "%s", date->value);
    } else {
        malformed = SI_SIGV4_QUERY_MALFORMED;
        *status = malformed;
        if (parse_presigned(req->query, &pa, err) < 0)
            goto error;
        int64_t t;
        if (si_sigv4_parse_amz_date(pa.amz_date, &t) < 0) {
            si_errprintf(err, "X-Amz-Date must be in the ISO8601 Long Format "
                         "\"yyyyMMdd'T'HHmmss'Z'\"");
            goto error;
        }
    }

    /* the scope must be this server's, and the day of the request */
    *status = malformed;
    if (strncmp(pa.date, pa.amz_date, 8) != 0) {
        si_errprintf(err, "Invalid credential date \"%s\": it is not the date of %s (%s)",
                     pa.date, pa.presigned ? "X-Amz-Date" : "x-amz-date", pa.amz_date);
        goto error;
    }
    if (strcmp(pa.region, conf->region) != 0) {
        if (wrong_region)
            *wrong_region = true;
        si_errprintf(err, "the region '%s' is wrong; expecting '%s'", pa.region, conf->region);
        goto error;
    }
    if (strcmp(pa.service, conf->service) != 0) {
        si_errprintf(err, "Credential should be scoped to correct service: '%s', not '%s'",
                     conf->service, pa.service);
        goto error;
    }
    if (sigv4_parse_signed_headers(pa.signed_headers, names, &count, err) < 0)
        goto error;
    bool host_signed = false;
    for (size_t i = 0; i < count; i++)
        host_signed |= names[i].len == 4 && memcmp(names[i].name, "host", 4) == 0;
    if (!host_signed) {
        si_errprintf(err, "SignedHeaders must include host");
        goto error;
    }
    if (!pa.presigned && !conf->allow_unsigned_amz_headers &&
        check_amz_headers_signed(req, names, count, err) < 0) {
        *status = SI_SIGV4_ACCESS_DENIED;
        goto error;
    }

    /* who */
    if (!conf->lookup || conf->lookup(conf->lookup_arg, pa.access_key, &cred) < 0) {
        *status = SI_SIGV4_UNKNOWN_ACCESS_KEY;
        si_errprintf(err, "The AWS Access Key Id '%s' you provided does not exist in our "
                     "records", pa.access_key);
        goto error;
    }

    /* when */
    int64_t t = 0;
    si_sigv4_parse_amz_date(pa.amz_date, &t);
    int64_t skew = conf->max_skew_s > 0 ? conf->max_skew_s : SI_SIGV4_DEFAULT_SKEW_S;
    if (pa.presigned) {
        if (t - now > skew) {
            *status = SI_SIGV4_ACCESS_DENIED;
            si_errprintf(err, "Request is not valid yet: X-Amz-Date %s is %lld s ahead of the "
                         "server's clock", pa.amz_date, (long long)(t - now));
            goto error;
        }
        if (now > t + pa.expires) {
            *status = SI_SIGV4_EXPIRED;
            si_errprintf(err, "Request has expired: signed at %s for %lld s, %lld s ago",
                         pa.amz_date, (long long)pa.expires, (long long)(now - t));
            goto error;
        }
    } else if (t - now > skew || now - t > skew) {
        *status = SI_SIGV4_TIME_SKEWED;
        si_errprintf(err, "The difference between the request time (%s) and the server's time "
                     "is %lld s, more than the %lld s allowed", pa.amz_date,
                     (long long)(t > now ? t - now : now - t), (long long)skew);
        goto error;
    }

    /* what the body must prove */
    const char *payload_hash = req->payload_hash;
    if (!payload_hash) {
        const si_http_header_t *sha = sigv4_find_header(req, "x-amz-content-sha256", &n_sha);
        if (n_sha > 1) {
            *status = SI_SIGV4_INVALID_ARGUMENT;
            si_errprintf(err, "request has %d x-amz-content-sha256 headers", n_sha);
            goto error;
        }
        if (sha)
            payload_hash = sha->value ? sha->value : "";
        else if (pa.presigned)
            payload_hash = SI_SIGV4_UNSIGNED_PAYLOAD;
        else {
            *status = SI_SIGV4_MISSING_CONTENT_SHA256;
            si_errprintf(err, "Missing required header for this request: x-amz-content-sha256");
            goto error;
        }
    }
    if (si_sigv4_payload_parse(payload_hash, &res.payload) < 0) {
        *status = SI_SIGV4_INVALID_ARGUMENT;
        si_errprintf(err, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a STREAMING-* value "
                     "or a valid sha256 value (64 lower-case hex digits)");
        goto error;
    }
    if (pa.presigned && res.payload != SI_SIGV4_PAYLOAD_SHA256 &&
        res.payload != SI_SIGV4_PAYLOAD_UNSIGNED) {
        *status = SI_SIGV4_INVALID_ARGUMENT;
        si_errprintf(err, "a presigned request cannot use %s", payload_hash);
        goto error;
    }

    /* the signature itself */
    int missing = -1;
    if (sigv4_build_canonical(&creq, req, names, count, payload_hash,
                              pa.presigned ? "X-Amz-Signature" : NULL, &missing, err) < 0) {
        *status = missing >= 0 ? malformed : SI_SIGV4_INVALID_ARGUMENT;
        goto error;
    }
    if (derive_key_cached(conf->key_cache, pa.access_key, cred.secret, pa.date, pa.region,
                          pa.service, &res.key, err) < 0) {
        *status = SI_SIGV4_INTERNAL;
        si_errprefix(err, "credentials of '%s'", pa.access_key);
        goto error;
    }
    const EVP_MD *md = conf->key_cache ? conf->key_cache->sha256 : NULL;
    sts = sigv4_string_to_sign_md(md, pa.amz_date, &res.key, si_strbuf_str(&creq));
    if (!sts) {
        *status = SI_SIGV4_INTERNAL;
        si_errprintf(err, "out of memory");
        goto error;
    }
    sigv4_signature_md(md, &res.key, sts, res.signature);
    if (CRYPTO_memcmp(res.signature, pa.signature, SI_SIGV4_HEX_LEN) != 0) {
        *status = SI_SIGV4_SIGNATURE_MISMATCH;
        si_errprintf(err, "The request signature we calculated does not match the signature "
                     "you provided. Check your key and signing method.");
        goto error;
    }

    snprintf(res.access_key, sizeof(res.access_key), "%s", pa.access_key);
    res.uid = cred.uid;
    res.gid = cred.gid;
    res.presigned = pa.presigned;
    if (res.payload == SI_SIGV4_PAYLOAD_SHA256)
        snprintf(res.payload_sha256, sizeof(res.payload_sha256), "%s", payload_hash);
    snprintf(res.amz_date, sizeof(res.amz_date), "%s", pa.amz_date);
    *auth = res;
    *status = SI_SIGV4_OK;
    OPENSSL_cleanse(&cred, sizeof(cred));
    OPENSSL_cleanse(&res, sizeof(res));
    free(sts);
    si_strbuf_free(&creq);
    return 0;

error:
    OPENSSL_cleanse(&cred, sizeof(cred));
    OPENSSL_cleanse(&res, sizeof(res));
    free(sts);
    si_strbuf_free(&creq);
    return -1;
}

/* ---- body hash check ---------------------------------------------------- */

struct si_sigv4_body_check {
    EVP_MD_CTX *ctx;
    char expected[SI_SIGV4_HEX_LEN + 1];
};

si_sigv4_body_check_t *si_sigv4_body_check_new(const char *expected_hex, si_error_t *err)
{
    if (!sigv4_lower_hex(expected_hex, SI_SIGV4_HEX_LEN)) {
        si_errprintf(err, "expected body hash is not %d lower-case hex digits",
                     SI_SIGV4_HEX_LEN);
        return NULL;
    }
    si_sigv4_body_check_t *c = calloc(1, sizeof(*c));
    if (!c || !(c->ctx = EVP_MD_CTX_new()) || EVP_DigestInit_ex(c->ctx, EVP_sha256(), NULL) != 1) {
        si_sigv4_body_check_free(c);
        si_errprintf(err, "cannot initialise sha256");
        return NULL;
    }
    memcpy(c->expected, expected_hex, SI_SIGV4_HEX_LEN + 1);
    return c;
}

void si_sigv4_body_check_update(si_sigv4_body_check_t *c, const void *data, size_t len)
{
    EVP_DigestUpdate(c->ctx, data, len);
}

int si_sigv4_body_check_finish(si_sigv4_body_check_t *c, si_sigv4_status_t *status,
                               si_error_t *err)
{
    unsigned char digest[32];
    char hex[SI_SIGV4_HEX_LEN + 1];
    EVP_DigestFinal_ex(c->ctx, digest, NULL);
    si_hex(digest, 32, hex);
    if (CRYPTO_memcmp(hex, c->expected, SI_SIGV4_HEX_LEN) != 0) {
        *status = SI_SIGV4_CONTENT_SHA256_MISMATCH;
        return si_errprintf(err, "The provided 'x-amz-content-sha256' header does not match "
                            "what was computed (body sha256 %s)", hex);
    }
    *status = SI_SIGV4_OK;
    return 0;
}

void si_sigv4_body_check_free(si_sigv4_body_check_t *c)
{
    if (!c)
        return;
    EVP_MD_CTX_free(c->ctx);
    free(c);
}
