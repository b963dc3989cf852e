#include "config.h"
#include "common/aws/sigv4.h"

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

#define CANONICAL_MAX (1024 * 1024) /* bytes of a canonical request */
#define SCOPE_TERMINATOR "aws4_request"

/* ---- primitives --------------------------------------------------------- */

/* md: a SHA-256 fetched once (EVP_MD_fetch), which spares OpenSSL 3 the
 * implicit fetch EVP_sha256() costs on every use; NULL: EVP_sha256(). */
static void sha256_md(const EVP_MD *md, const void *data, size_t len, unsigned char out[32])
{
    EVP_Digest(data, len, out, NULL, md ? md : EVP_sha256(), NULL);
}

static void sha256_hex_md(const EVP_MD *md, const void *data, size_t len,
                          char out[SI_SIGV4_HEX_LEN + 1])
{
    unsigned char digest[32];
    sha256_md(md, data, len, digest);
    si_hex(digest, 32, out);
}

/* HMAC (RFC 2104) over two digests: OpenSSL 3's HMAC() fetches the MAC and
 * the digest on each call, which costs more than hashing a whole request. */
static void hmac_sha256_md(const EVP_MD *md, const void *key, size_t keylen, const void *msg,
                           size_t len, unsigned char out[32])
{
    enum { BLOCK = 64 };
    unsigned char k[BLOCK] = {0}, pad[BLOCK], inner[32];
    if (keylen > BLOCK)
        sha256_md(md, key, keylen, k);
    else if (keylen)
        memcpy(k, key, keylen);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx != NULL;
    for (int i = 0; i < BLOCK; i++)
        pad[i] = k[i] ^ 0x36;
    ok = ok && EVP_DigestInit_ex(ctx, md ? md : EVP_sha256(), NULL) == 1 &&
         EVP_DigestUpdate(ctx, pad, BLOCK) == 1 && EVP_DigestUpdate(ctx, msg, len) == 1 &&
         EVP_DigestFinal_ex(ctx, inner, NULL) == 1;
    for (int i = 0; i < BLOCK; i++)
        pad[i] = k[i] ^ 0x5c;
    ok = ok && EVP_DigestInit_ex(ctx, md ? md : EVP_sha256(), NULL) == 1 &&
         EVP_DigestUpdate(ctx, pad, BLOCK) == 1 && EVP_DigestUpdate(ctx, inner, 32) == 1 &&
         EVP_DigestFinal_ex(ctx, out, NULL) == 1;
    EVP_MD_CTX_free(ctx);
    if (!ok)
        memset(out, 0, 32); /* matches no signature */
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(pad, sizeof(pad));
    OPENSSL_cleanse(inner, sizeof(inner));
}

void si_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t len,
                    unsigned char out[32])
{
    hmac_sha256_md(NULL, key, keylen, msg, len, out);
}

static bool lower_hex(const char *s, size_t len)
{
    return strlen(s) == len && si_is_lower_hex(s, len);
}

/* Region and service names: short, [a-z0-9-]. */
static bool scope_name_valid(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    return true;
}

/* Access keys go into "Credential=KEY/date/...": printable, no '/', ',' or space. */
static bool access_key_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > SI_SIGV4_ACCESS_KEY_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] > '~' || s[i] == '/' || s[i] == ',' || s[i] == '=')
            return false;
    return true;
}

static bool header_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c);
}

/* ---- dates -------------------------------------------------------------- */

static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int digits(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

int si_sigv4_parse_amz_date(const char *text, int64_t *out)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (strlen(text) != SI_SIGV4_AMZ_DATE_LEN || text[8] != 'T' || text[15] != 'Z')
        return -1;
    int y = digits(text, 4), mo = digits(text + 4, 2), d = digits(text + 6, 2);
    int h = digits(text + 9, 2), mi = digits(text + 11, 2), s = digits(text + 13, 2);
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || h < 0 || h > 23 ||
        mi < 0 || mi > 59 || s < 0 || s > 59)
        return -1;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (mo == 2 && d == 29 && !leap)
        return -1;
    *out = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
    return 0;
}

void si_sigv4_format_amz_date(int64_t t, char out[SI_SIGV4_AMZ_DATE_LEN + 1])
{
    int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400;
    int64_t secs = t - days * 86400;
    /* civil_from_days */
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    y += m <= 2;
    snprintf(out, SI_SIGV4_AMZ_DATE_LEN + 1, "%04d%02d%02dT%02d%02d%02dZ", (int)y, (int)m,
             (int)d, (int)(secs / 3600), (int)(secs / 60 % 60), (int)(secs % 60));
}

/* ---- keys and signatures ------------------------------------------------ */

int si_sigv4_derive_key(const char *secret, const char *date, const char *region,
                        const char *service, si_sigv4_key_t *key, si_error_t *err)
{
    char kdate_key[4 + SI_SIGV4_SECRET_MAX + 1];
    unsigned char k[32];
    size_t slen = strlen(secret);
    if (slen == 0 || slen > SI_SIGV4_SECRET_MAX)
        return si_errprintf(err, "secret key must be 1 to %d bytes", SI_SIGV4_SECRET_MAX);
    if (strlen(date) != 8 || digits(date, 8) < 0)
        return si_errprintf(err, "scope date '%s' is not YYYYMMDD", date);
    if (!scope_name_valid(region, SI_SIGV4_REGION_MAX))
        return si_errprintf(err, "region '%s' is not 1 to %d of [a-z0-9-]", region,
                            SI_SIGV4_REGION_MAX);
    if (!scope_name_valid(service, SI_SIGV4_SERVICE_MAX))
        return si_errprintf(err, "service '%s' is not 1 to %d of [a-z0-9-]", service,
                            SI_SIGV4_SERVICE_MAX);
    memcpy(kdate_key, "AWS4", 4);
    memcpy(kdate_key + 4, secret, slen);
    si_hmac_sha256(kdate_key, 4 + slen, date, 8, k);
    OPENSSL_cleanse(kdate_key, sizeof(kdate_key));
    si_hmac_sha256(k, 32, region, strlen(region), k);
    si_hmac_sha256(k, 32, service, strlen(service), k);
    si_hmac_sha256(k, 32, SCOPE_TERMINATOR, strlen(SCOPE_TERMINATOR), key->bytes);
    OPENSSL_cleanse(k, sizeof(k));
    snprintf(key->date, sizeof(key->date), "%s", date);
    snprintf(key->region, sizeof(key->region), "%s", region);
    snprintf(key->service, sizeof(key->service), "%s", service);
    return 0;
}

bool si_sigv4_key_matches(const si_sigv4_key_t *key, const char *date, const char *region,
                          const char *service)
{
    return strcmp(key->date, date) == 0 && strcmp(key->region, region) == 0 &&
           strcmp(key->service, service) == 0;
}

static void append_scope(si_strbuf_t *b, const si_sigv4_key_t *key)
{
    si_strbuf_printf(b, "%s/%s/%s/" SCOPE_TERMINATOR, key->date, key->region, key->service);
}

static char *string_to_sign_md(const EVP_MD *md, const char *amz_date,
                               const si_sigv4_key_t *key, const char *canonical_request)
{
    char hash[SI_SIGV4_HEX_LEN + 1];
    si_strbuf_t b;
    si_strbuf_init(&b, 1024);
    sha256_hex_md(md, canonical_request, strlen(canonical_request), hash);
    si_strbuf_printf(&b, SI_SIGV4_ALGORITHM "\n%s\n", amz_date);
    append_scope(&b, key);
    si_strbuf_printf(&b, "\n%s", hash);
    if (b.failed) {
        si_strbuf_free(&b);
        return NULL;
    }
    return si_strbuf_take(&b);
}

char *si_sigv4_string_to_sign(const char *amz_date, const si_sigv4_key_t *key,
                              const char *canonical_request)
{
    return string_to_sign_md(NULL, amz_date, key, canonical_request);
}

static void signature_md(const EVP_MD *md, const si_sigv4_key_t *key,
                         const char *string_to_sign, char out[SI_SIGV4_HEX_LEN + 1])
{
    unsigned char mac[32];
    hmac_sha256_md(md, key->bytes, 32, string_to_sign, strlen(string_to_sign), mac);
    si_hex(mac, 32, out);
}

void si_sigv4_signature(const si_sigv4_key_t *key, const char *string_to_sign,
                        char out[SI_SIGV4_HEX_LEN + 1])
{
    signature_md(NULL, key, string_to_sign, out);
}

/* The chunk and trailer strings to sign are short and fixed in shape, so
 * they are built on the stack: these run once per 64 KiB of upload. */
static void chained_signature(const si_sigv4_key_t *key, const char *algorithm,
                              const char *amz_date, const char *previous,
                              const char *extra_line, const unsigned char sha[32],
                              char out[SI_SIGV4_HEX_LEN + 1])
{
    char hex[SI_SIGV4_HEX_LEN + 1];
    char sts[512];
    si_hex(sha, 32, hex);
    int n = snprintf(sts, sizeof(sts), "%s\n%s\n%s/%s/%s/" SCOPE_TERMINATOR "\n%s\n%s%s",
                     algorithm, amz_date, key->date, key->region, key->service, previous,
                     extra_line, hex);
    unsigned char mac[32];
    si_hmac_sha256(key->bytes, 32, sts, (size_t)n < sizeof(sts) ? (size_t)n : sizeof(sts) - 1,
                mac);
    si_hex(mac, 32, out);
}

void si_sigv4_chunk_signature(const si_sigv4_key_t *key, const char *amz_date,
                              const char *previous, const unsigned char data_sha256[32],
                              char out[SI_SIGV4_HEX_LEN + 1])
{
    chained_signature(key, "AWS4-HMAC-SHA256-PAYLOAD", amz_date, previous,
                      SI_SIGV4_EMPTY_SHA256 "\n", data_sha256, out);
}

void si_sigv4_trailer_signature(const si_sigv4_key_t *key, const char *amz_date,
                                const char *previous, const unsigned char trailer_sha256[32],
                                char out[SI_SIGV4_HEX_LEN + 1])
{
    chained_signature(key, "AWS4-HMAC-SHA256-TRAILER", amz_date, previous, "", trailer_sha256,
                      out);
}

/* ---- canonical request -------------------------------------------------- */

typedef struct {
    const char *name; /* lower-case, not NUL-terminated */
    size_t len;
} name_slice_t;

/* Splits a SignedHeaders value; names must be lower-case tokens in strictly
 * ascending order (which also rules out duplicates). */
static int parse_signed_headers(const char *list, name_slice_t *names, size_t *count,
                                si_error_t *err)
{
    size_t n = 0;
    const char *p = list;
    if (*p == '\0')
        return si_errprintf(err, "SignedHeaders is empty");
    for (;;) {
        const char *semi = strchr(p, ';');
        size_t len = semi ? (size_t)(semi - p) : strlen(p);
        if (len == 0)
            return si_errprintf(err, "SignedHeaders has an empty name");
        for (size_t i = 0; i < len; i++)
            if (!header_name_char(p[i]))
                return si_errprintf(err, "SignedHeaders name '%.*s' is not a lower-case "
                                    "header name", (int)(len > 64 ? 64 : len), p);
        if (n == SI_SIGV4_SIGNED_HEADERS_MAX)
            return si_errprintf(err, "SignedHeaders lists more than %d names",
                                SI_SIGV4_SIGNED_HEADERS_MAX);
        if (n > 0) {
            size_t pl = names[n - 1].len;
            int c = memcmp(names[n - 1].name, p, pl < len ? pl : len);
            if (c > 0 || (c == 0 && pl >= len))
                return si_errprintf(err, "SignedHeaders is not sorted or repeats '%.*s'",
                                    (int)(len > 64 ? 64 : len), p);
        }
        names[n].name = p;
        names[n].len = len;
        n++;
        if (!semi)
            break;
        p = semi + 1;
    }
    *count = n;
    return 0;
}

static bool name_is(const char *header, const char *name, size_t len)
{
    return strlen(header) == len && strncasecmp(header, name, len) == 0;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Trimmed, with runs of whitespace collapsed to one space. */
static void append_header_value(si_strbuf_t *b, const char *v)
{
    while (is_space(*v))
        v++;
    bool pending_space = false;
    for (; *v; v++) {
        if (is_space(*v)) {
            pending_space = true;
            continue;
        }
        if (pending_space)
            si_strbuf_putc(b, ' ');
        pending_space = false;
        si_strbuf_putc(b, *v);
    }
}

/* Returns the index of the first signed name with no header, or -1. */
static int append_canonical_headers(si_strbuf_t *b, const si_sigv4_request_t *req,
                                    const name_slice_t *names, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        bool found = false;
        si_strbuf_append(b, names[i].name, names[i].len);
        si_strbuf_putc(b, ':');
        for (size_t h = 0; h < req->nheaders; h++) {
            if (!name_is(req->headers[h].name, names[i].name, names[i].len))
                continue;
            if (found)
                si_strbuf_putc(b, ',');
            append_header_value(b, req->headers[h].value ? req->headers[h].value : "");
            found = true;
        }
        if (!found)
            return (int)i;
        si_strbuf_putc(b, '\n');
    }
    return -1;
}

/* Builds the canonical request into b. On a signed header that the request
 * lacks, *missing (when given) receives its index. */
static int build_canonical(si_strbuf_t *b, const si_sigv4_request_t *req,
                           const name_slice_t *names, size_t count, const char *payload_hash,
                           const char *skip_query_key, int *missing, si_error_t *err)
{
    if (!req->method || !*req->method)
        return si_errprintf(err, "request has no method");
    si_strbuf_puts(b, req->method);
    si_strbuf_putc(b, '\n');
    if (si_uri_canonical_path(b, req->path ? req->path : "", err) < 0)
        return -1;
    si_strbuf_putc(b, '\n');
    if (si_uri_canonical_query(b, req->query, skip_query_key, err) < 0)
        return -1;
    si_strbuf_putc(b, '\n');
    int gap = append_canonical_headers(b, req, names, count);
    if (gap >= 0) {
        if (missing)
            *missing = gap;
        return si_errprintf(err, "signed header '%.*s' is not in the request",
                            (int)names[gap].len, names[gap].name);
    }
    si_strbuf_putc(b, '\n');
    for (size_t i = 0; i < count; i++) {
        if (i)
            si_strbuf_putc(b, ';');
        si_strbuf_append(b, names[i].name, names[i].len);
    }
    si_strbuf_putc(b, '\n');
    si_strbuf_puts(b, payload_hash);
    if (b->failed)
        return si_errprintf(err, "canonical request is longer than %d bytes", CANONICAL_MAX);
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every header name of req, lower-cased, sorted, without repeats, joined by ';'. */
static char *all_header_names(const si_sigv4_request_t *req, si_error_t *err)
{
    char **names = calloc(req->nheaders ? req->nheaders : 1, sizeof(*names));
    si_strbuf_t b;
    si_strbuf_init(&b, SI_SIGV4_AUTHORIZATION_MAX);
    size_t n = 0;
    if (!names) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < req->nheaders; i++) {
        const char *h = req->headers[i].name;
        size_t len = h ? strlen(h) : 0;
        char *lower = len ? malloc(len + 1) : NULL;
        if (!lower) {
            si_errprintf(err, len ? "out of memory" : "a header has no name");
            goto error;
        }
        for (size_t k = 0; k <= len; k++)
            lower[k] = (char)tolower((unsigned char)h[k]);
        names[n++] = lower;
        for (size_t k = 0; k < len; k++)
            if (!header_name_char(lower[k])) {
                si_errprintf(err, "header name '%s' is not a valid token", h);
                goto error;
            }
    }
    qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (i && strcmp(names[i], names[i - 1]) == 0)
            continue;
        if (b.len)
            si_strbuf_putc(&b, ';');
        si_strbuf_puts(&b, names[i]);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (b.failed || b.len == 0) {
        si_strbuf_free(&b);
        si_errprintf(err, b.len ? "signed header names are too long" : "request has no headers");
        return NULL;
    }
    return si_strbuf_take(&b);
error:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    si_strbuf_free(&b);
    return NULL;
}

char *si_sigv4_canonical_request(const si_sigv4_request_t *req, const char *signed_headers,
                                 const char *payload_hash, char **signed_out,
                                 si_error_t *err)
{
    name_slice_t names[SI_SIGV4_SIGNED_HEADERS_MAX];
    size_t count = 0;
    char *owned = NULL;
    si_strbuf_t b;
    si_strbuf_init(&b, CANONICAL_MAX);
    if (!signed_headers) {
        if (!(owned = all_header_names(req, err)))
            return NULL;
        signed_headers = owned;
    }
    if (parse_signed_headers(signed_headers, names, &count, err) < 0 ||
        build_canonical(&b, req, names, count, payload_hash, NULL, NULL, err) < 0) {
        free(owned);
        si_strbuf_free(&b);
        return NULL;
    }
    if (signed_out)
        *signed_out = owned ? owned : strdup(signed_headers);
    else
        free(owned);
    return si_strbuf_take(&b);
}

/* ---- signing ------------------------------------------------------------ */

struct si_sigv4_signer {
    char access_key[SI_SIGV4_ACCESS_KEY_MAX + 1];
    char secret[SI_SIGV4_SECRET_MAX + 1];
    char region[SI_SIGV4_REGION_MAX + 1];
    char service[SI_SIGV4_SERVICE_MAX + 1];
    pthread_mutex_t lock; /* guards key */
    si_sigv4_key_t key;
    bool have_key;
};

si_sigv4_signer_t *si_sigv4_signer_new(const char *access_key, const char *secret,
                                       const char *region, const char *service,
                                       si_error_t *err)
{
    if (!access_key_valid(access_key)) {
        si_errprintf(err, "access key must be 1 to %d printable characters without '/', ',' "
                     "'=' or spaces", SI_SIGV4_ACCESS_KEY_MAX);
        return NULL;
    }
    size_t slen = strlen(secret);
    if (slen == 0 || slen > SI_SIGV4_SECRET_MAX) {
        si_errprintf(err, "secret key must be 1 to %d bytes", SI_SIGV4_SECRET_MAX);
        return NULL;
    }
    if (!scope_name_valid(region, SI_SIGV4_REGION_MAX)) {
        si_errprintf(err, "region '%s' is not 1 to %d of [a-z0-9-]", region,
                     SI_SIGV4_REGION_MAX);
        return NULL;
    }
    if (!scope_name_valid(service, SI_SIGV4_SERVICE_MAX)) {
        si_errprintf(err, "service '%s' is not 1 to %d of [a-z0-9-]", service,
                     SI_SIGV4_SERVICE_MAX);
        return NULL;
    }
    si_sigv4_signer_t *s = calloc(1, sizeof(*s));
    if (!s) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    snprintf(s->access_key, sizeof(s->access_key), "%s", access_key);
    memcpy(s->secret, secret, slen + 1);
    snprintf(s->region, sizeof(s->region), "%s", region);
    snprintf(s->service, sizeof(s->service), "%s", service);
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

void si_sigv4_signer_free(si_sigv4_signer_t *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->lock);
    OPENSSL_cleanse(s, sizeof(*s));
    free(s);
}

static void signer_key(si_sigv4_signer_t *s, const char *date, si_sigv4_key_t *out)
{
    pthread_mutex_lock(&s->lock);
    if (!s->have_key || !si_sigv4_key_matches(&s->key, date, s->region, s->service)) {
        /* inputs were validated in si_sigv4_signer_new, so this cannot fail */
        si_sigv4_derive_key(s->secret, date, s->region, s->service, &s->key, NULL);
        s->have_key = true;
    }
    *out = s->key;
    pthread_mutex_unlock(&s->lock);
}

static const si_http_header_t *find_header(const si_sigv4_request_t *req, const char *name,
                                           int *count)
{
    const si_http_header_t *first = NULL;
    *count = 0;
    for (size_t i = 0; i < req->nheaders; i++)
        if (req->headers[i].name && strcasecmp(req->headers[i].name, name) == 0) {
            if (!first)
                first = &req->headers[i];
            (*count)++;
        }
    return first;
}

static bool payload_hash_valid(const char *h)
{
    si_sigv4_payload_t p;
    return si_sigv4_payload_parse(h, &p) == 0;
}

/* Signs req with extra headers appended, over every header. */
static int sign_all(si_sigv4_signer_t *s, const si_sigv4_request_t *req,
                    const si_http_header_t *extra, size_t nextra, const char *amz_date,
                    const char *payload_hash, const char *query, char **signed_out,
                    char sig[SI_SIGV4_HEX_LEN + 1], si_error_t *err)
{
    si_http_header_t *all = calloc(req->nheaders + nextra + 1, sizeof(*all));
    if (!all)
        return si_errprintf(err, "out of memory");
    if (req->nheaders)
        memcpy(all, req->headers, req->nheaders * sizeof(*all));
    if (nextra)
        memcpy(all + req->nheaders, extra, nextra * sizeof(*all));
    si_sigv4_request_t full = *req;
    full.headers = all;
    full.nheaders = req->nheaders + nextra;
    full.query = query;
    char *creq = si_sigv4_canonical_request(&full, NULL, payload_hash, signed_out, err);
    free(all);
    if (!creq)
        return -1;
    char date[9];
    memcpy(date, amz_date, 8);
    date[8] = '\0';
    si_sigv4_key_t key;
    signer_key(s, date, &key);
    char *sts = si_sigv4_string_to_sign(amz_date, &key, creq);
    free(creq);
    if (!sts) {
        free(*signed_out);
        *signed_out = NULL;
        OPENSSL_cleanse(&key, sizeof(key));
        return si_errprintf(err, "out of memory");
    }
    si_sigv4_signature(&key, sts, sig);
    OPENSSL_cleanse(&key, sizeof(key));
    free(sts);
    return 0;
}

static int check_signable(const si_sigv4_request_t *req, bool presign, si_error_t *err)
{
    static const char *reserved[] = {"x-amz-date", "x-amz-content-sha256", "authorization"};
    int count;
    find_header(req, "host", &count);
    if (count != 1)
        return si_errprintf(err, count ? "request has %d Host headers" : "request has no Host "
                            "header", count);
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
        if (presign && i == 1)
            continue; /* a presigned PUT may pin its body hash */
        find_header(req, reserved[i], &count);
        if (count)
            return si_errprintf(err, "%s is set by the signer, not by the caller", reserved[i]);
    }
    if (req->payload_hash && !payload_hash_valid(req->payload_hash))
        return si_errprintf(err, "payload hash '%.80s' is neither 64 lower-case hex digits nor "
                            "an UNSIGNED/STREAMING marker", req->payload_hash);
    return 0;
}

int si_sigv4_sign(si_sigv4_signer_t *s, const si_sigv4_request_t *req, int64_t now,
                  si_sigv4_signed_t *out, si_error_t *err)
{
    si_sigv4_signed_t res;
    char *signed_headers = NULL;
    memset(&res, 0, sizeof(res));
    if (check_signable(req, false, err) < 0)
        return -1;
    const char *payload = req->payload_hash ? req->payload_hash : SI_SIGV4_UNSIGNED_PAYLOAD;
    si_sigv4_format_amz_date(now, res.amz_date);
    si_http_header_t extra[2] = {{"x-amz-date", res.amz_date}, {"x-amz-content-sha256", payload}};
    bool s3 = strcmp(s->service, "s3") == 0;
    if (s3)
        snprintf(res.content_sha256, sizeof(res.content_sha256), "%s", payload);
    if (sign_all(s, req, extra, s3 ? 2 : 1, res.amz_date, payload, req->query,
                 &signed_headers, res.signature, err) < 0)
        return -1;
    int n = snprintf(res.authorization, sizeof(res.authorization),
                     SI_SIGV4_ALGORITHM " Credential=%s/%.8s/%s/%s/" SCOPE_TERMINATOR
                     ", SignedHeaders=%s, Signature=%s",
                     s->access_key, res.amz_date, s->region, s->service, signed_headers,
                     res.signature);
    free(signed_headers);
    if (n < 0 || (size_t)n >= sizeof(res.authorization))
        return si_errprintf(err, "Authorization value would exceed %d bytes",
                            SI_SIGV4_AUTHORIZATION_MAX);
    *out = res;
    return 0;
}

char *si_sigv4_presign(si_sigv4_signer_t *s, const si_sigv4_request_t *req, int64_t now,
                       int64_t expires_s, si_error_t *err)
{
    char amz_date[SI_SIGV4_AMZ_DATE_LEN + 1];
    char sig[SI_SIGV4_HEX_LEN + 1];
    char *signed_headers = NULL;
    si_strbuf_t q, cred, out;
    if (expires_s < 1 || expires_s > SI_SIGV4_PRESIGN_MAX_S) {
        si_errprintf(err, "presigned URL lifetime %lld s is outside 1..%d s",
                     (long long)expires_s, SI_SIGV4_PRESIGN_MAX_S);
        return NULL;
    }
    if (check_signable(req, true, err) < 0)
        return NULL;
    if (req->query && strstr(req->query, "X-Amz-")) {
        si_errprintf(err, "query already carries X-Amz- parameters");
        return NULL;
    }
    si_sigv4_format_amz_date(now, amz_date);
    signed_headers = all_header_names(req, err);
    if (!signed_headers)
        return NULL;
    si_strbuf_init(&q, 64 * 1024);
    si_strbuf_init(&cred, 1024);
    si_strbuf_init(&out, 128 * 1024);
    si_strbuf_printf(&cred, "%s/%.8s/%s/%s/" SCOPE_TERMINATOR, s->access_key, amz_date,
                     s->region, s->service);
    if (req->query && *req->query)
        si_strbuf_printf(&q, "%s&", req->query);
    si_strbuf_puts(&q, "X-Amz-Algorithm=" SI_SIGV4_ALGORITHM "&X-Amz-Credential=");
    si_uri_encode(&q, si_strbuf_str(&cred), cred.len, false);
    si_strbuf_printf(&q, "&X-Amz-Date=%s&X-Amz-Expires=%lld&X-Amz-SignedHeaders=", amz_date,
                     (long long)expires_s);
    si_uri_encode(&q, signed_headers, strlen(signed_headers), false);
    free(signed_headers);
    signed_headers = NULL;
    if (q.failed) {
        si_errprintf(err, "presigned query is too long");
        goto error;
    }
    const char *payload = req->payload_hash ? req->payload_hash : SI_SIGV4_UNSIGNED_PAYLOAD;
    if (sign_all(s, req, NULL, 0, amz_date, payload, si_strbuf_str(&q), &signed_headers, sig,
                 err) < 0)
        goto error;
    free(signed_headers);
    if (si_uri_canonical_query(&out, si_strbuf_str(&q), NULL, err) < 0)
        goto error;
    si_strbuf_printf(&out, "&X-Amz-Signature=%s", sig);
    if (out.failed) {
        si_errprintf(err, "presigned query is too long");
        goto error;
    }
    si_strbuf_free(&q);
    si_strbuf_free(&cred);
    return si_strbuf_take(&out);
error:
    si_strbuf_free(&q);
    si_strbuf_free(&cred);
    si_strbuf_free(&out);
    return NULL;
}

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

int si_sigv4_payload_parse(const char *value, si_sigv4_payload_t *out)
{
    static const struct {
        const char *text;
        si_sigv4_payload_t payload;
    } markers[] = {
        {SI_SIGV4_UNSIGNED_PAYLOAD, SI_SIGV4_PAYLOAD_UNSIGNED},
        {SI_SIGV4_STREAMING_SIGNED, SI_SIGV4_PAYLOAD_STREAMING_SIGNED},
        {SI_SIGV4_STREAMING_SIGNED_TRAILER, SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER},
        {SI_SIGV4_STREAMING_UNSIGNED_TRAILER, SI_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER},
    };
    for (size_t i = 0; i < sizeof(markers) / sizeof(markers[0]); i++)
        if (strcmp(value, markers[i].text) == 0) {
            *out = markers[i].payload;
            return 0;
        }
    if (!lower_hex(value, SI_SIGV4_HEX_LEN))
        return -1;
    *out = SI_SIGV4_PAYLOAD_SHA256;
    return 0;
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
    if (!access_key_valid(pa->access_key))
        return si_errprintf(err, "Credential access key has characters not allowed in a key");
    if (lens[1] != 8 || digits(parts[1], 8) < 0)
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
    if (!lower_hex(pa->signature, SI_SIGV4_HEX_LEN))
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
        /* longer names are none of ours; a malformed one was refused before */
        si_strbuf_reset(&name);
        if (si_uri_decode(&name, u.name, u.name_len, true, NULL) < 0)
            continue;
        for (int i = 0; i < PQ_N; i++) {
            presigned_param_t *q = &params[i];
            if (strcmp(si_strbuf_str(&name), q->name) != 0)
                continue;
            if (q->count++ == 0 && u.value) {
                si_strbuf_init(&value, q->size - 1);
                if (si_uri_decode(&value, u.value, u.value_len, true, &q->why) < 0)
                    q->bad = true;
                else
                    snprintf(q->out, q->size, "%s", si_strbuf_str(&value));
                si_strbuf_free(&value);
            }
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
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)access_key; *p; p++)
        h = (h ^ *p) * 16777619u;
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
            signed_one = name_is(name, names[i].name, names[i].len);
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

    *status = SI_SIGV4_INVALID_ARGUMENT;
    const si_http_header_t *authz = find_header(req, "authorization", &n_authz);
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
        const si_http_header_t *date = find_header(req, "x-amz-date", &n_date);
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
    if (parse_signed_headers(pa.signed_headers, names, &count, err) < 0)
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
        const si_http_header_t *sha = find_header(req, "x-amz-content-sha256", &n_sha);
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
    if (build_canonical(&creq, req, names, count, payload_hash,
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
    sts = string_to_sign_md(md, pa.amz_date, &res.key, si_strbuf_str(&creq));
    if (!sts) {
        *status = SI_SIGV4_INTERNAL;
        si_errprintf(err, "out of memory");
        goto error;
    }
    signature_md(md, &res.key, sts, res.signature);
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
    if (!lower_hex(expected_hex, SI_SIGV4_HEX_LEN)) {
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
