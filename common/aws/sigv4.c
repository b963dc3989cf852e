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

bool sigv4_lower_hex(const char *s, size_t len)
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
bool sigv4_access_key_valid(const char *s)
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

int sigv4_digits(const char *s, int n)
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
    int y = sigv4_digits(text, 4), mo = sigv4_digits(text + 4, 2), d = sigv4_digits(text + 6, 2);
    int h = sigv4_digits(text + 9, 2), mi = sigv4_digits(text + 11, 2);
    int s = sigv4_digits(text + 13, 2);
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
    if (strlen(date) != 8 || sigv4_digits(date, 8) < 0)
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
    /* puts, not printf: this runs for every signed request */
    si_strbuf_puts(b, key->date);
    si_strbuf_putc(b, '/');
    si_strbuf_puts(b, key->region);
    si_strbuf_putc(b, '/');
    si_strbuf_puts(b, key->service);
    si_strbuf_puts(b, "/" SCOPE_TERMINATOR);
}

char *sigv4_string_to_sign_md(const EVP_MD *md, const char *amz_date,
                              const si_sigv4_key_t *key, const char *canonical_request)
{
    char hash[SI_SIGV4_HEX_LEN + 1];
    si_strbuf_t b;
    si_strbuf_init(&b, 1024);
    si_strbuf_reserve(&b, 256); /* any scope of this server's: one allocation */
    sha256_hex_md(md, canonical_request, strlen(canonical_request), hash);
    si_strbuf_puts(&b, SI_SIGV4_ALGORITHM "\n");
    si_strbuf_puts(&b, amz_date);
    si_strbuf_putc(&b, '\n');
    append_scope(&b, key);
    si_strbuf_putc(&b, '\n');
    si_strbuf_puts(&b, hash);
    if (b.failed) {
        si_strbuf_free(&b);
        return NULL;
    }
    return si_strbuf_take(&b);
}

char *si_sigv4_string_to_sign(const char *amz_date, const si_sigv4_key_t *key,
                              const char *canonical_request)
{
    return sigv4_string_to_sign_md(NULL, amz_date, key, canonical_request);
}

void sigv4_signature_md(const EVP_MD *md, const si_sigv4_key_t *key,
                        const char *string_to_sign, char out[SI_SIGV4_HEX_LEN + 1])
{
    unsigned char mac[32];
    hmac_sha256_md(md, key->bytes, 32, string_to_sign, strlen(string_to_sign), mac);
    si_hex(mac, 32, out);
}

void si_sigv4_signature(const si_sigv4_key_t *key, const char *string_to_sign,
                        char out[SI_SIGV4_HEX_LEN + 1])
{
    sigv4_signature_md(NULL, key, string_to_sign, out);
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

/* Splits a SignedHeaders value; names must be lower-case tokens in strictly
 * ascending order (which also rules out duplicates). */
int sigv4_parse_signed_headers(const char *list, name_slice_t *names, size_t *count,
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

bool sigv4_name_is(const char *header, const char *name, size_t len)
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
            if (!sigv4_name_is(req->headers[h].name, names[i].name, names[i].len))
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
int sigv4_build_canonical(si_strbuf_t *b, const si_sigv4_request_t *req,
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
    if (sigv4_parse_signed_headers(signed_headers, names, &count, err) < 0 ||
        sigv4_build_canonical(&b, req, names, count, payload_hash, NULL, NULL, err) < 0) {
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
    if (!sigv4_access_key_valid(access_key)) {
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

const si_http_header_t *sigv4_find_header(const si_sigv4_request_t *req, const char *name,
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
    sigv4_find_header(req, "host", &count);
    if (count != 1)
        return si_errprintf(err, count ? "request has %d Host headers" : "request has no Host "
                            "header", count);
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
        if (presign && i == 1)
            continue; /* a presigned PUT may pin its body hash */
        sigv4_find_header(req, reserved[i], &count);
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

/* ---- payload hash markers ---------------------------------------------- */

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
    if (!sigv4_lower_hex(value, SI_SIGV4_HEX_LEN))
        return -1;
    *out = SI_SIGV4_PAYLOAD_SHA256;
    return 0;
}
