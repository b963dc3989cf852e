#include "config.h"
#include "daemon/control/token.h"
#include "common/array.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>

#define FIELD_MAX 256

/* One key of an issuer (a JWKS gives several, told apart by "kid"). */
typedef struct {
    char issuer[FIELD_MAX];
    char kid[FIELD_MAX];           /* "": any token of the issuer may try it */
    EVP_PKEY *key;
    bool self;                     /* stageind's own: "sub" is "UID:GID" */
} issuer_t;

#define GROUP_PREFIX "group:"

typedef struct {
    char issuer[FIELD_MAX];
    char subject[FIELD_MAX];       /* or GROUP_PREFIX and a wlcg.groups entry */
    uid_t uid;
    gid_t gid;
} mapping_t;

struct token_verifier {
    issuer_t *issuers;
    size_t nissuers, cap_issuers;
    mapping_t *map;
    size_t nmap, cap_map;
    char audience[FIELD_MAX];
    int64_t skew_s;
};

/* Calls fn on each line's whitespace-separated fields ('#' comments, blank
 * lines skipped); errors name the file and line. */
static int each_line(const char *path, size_t nfields, int (*fn)(void *, char **, si_error_t *),
                     void *arg, si_error_t *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return si_errprintf(err, "cannot open %s: %s", path, strerror(errno));
    char line[2048];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *fields[8], *save = NULL;
        size_t n = 0;
        for (char *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save))
            if (n < 8)
                fields[n++] = t;
            else
                n = 9;
        if (n == 0)
            continue;
        si_error_t why;
        if (n != nfields || fn(arg, fields, &why) < 0) {
            if (n != nfields)
                si_errprintf(&why, "expected %zu fields", nfields);
            si_errprintf(err, "%s line %d: %s", path, lineno, why.text);
            rc = -1;
        }
    }
    fclose(f);
    return rc;
}

/* Takes key. */
static int add_key(token_verifier_t *v, const char *issuer, const char *kid, EVP_PKEY *key,
                   bool self, si_error_t *err)
{
    if (si_array_grow((void **)&v->issuers, &v->cap_issuers, v->nissuers + 1,
                      sizeof(*v->issuers)) < 0) {
        EVP_PKEY_free(key);
        return si_errprintf(err, "out of memory");
    }
    issuer_t *added = &v->issuers[v->nissuers++];
    snprintf(added->issuer, FIELD_MAX, "%s", issuer);
    snprintf(added->kid, FIELD_MAX, "%s", kid ? kid : "");
    added->self = self;
    added->key = key;
    return 0;
}

int token_verifier_trust_self(token_verifier_t *v, const char *issuer, EVP_PKEY *key,
                              si_error_t *err)
{
    if (strlen(issuer) >= FIELD_MAX)
        return si_errprintf(err, "issuer longer than %d characters", FIELD_MAX - 1);
    if (EVP_PKEY_up_ref(key) != 1)
        return si_errprintf(err, "cannot reference the signing key");
    return add_key(v, issuer, NULL, key, true, err);
}

static int b64url_decode(const char *in, size_t len, unsigned char **out, size_t *outlen);

/* A JWK's base64url member as a BIGNUM (NULL when missing or bad). */
static BIGNUM *jwk_bn(json_t *jwk, const char *name, size_t *len)
{
    const char *text = json_string_value(json_object_get(jwk, name));
    unsigned char *bytes;
    size_t n;
    if (!text || b64url_decode(text, strlen(text), &bytes, &n) < 0)
        return NULL;
    BIGNUM *bn = n ? BN_bin2bn(bytes, (int)n, NULL) : NULL;
    free(bytes);
    if (len)
        *len = n;
    return bn;
}

/* An RSA or EC P-256 public key from a JWK (RFC 7517, 7518); NULL with err. */
static EVP_PKEY *jwk_key(json_t *jwk, si_error_t *err)
{
    const char *kty = json_string_value(json_object_get(jwk, "kty"));
    const char *crv = json_string_value(json_object_get(jwk, "crv"));
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    OSSL_PARAM *params = NULL;
    BIGNUM *a = NULL, *b = NULL;
    EVP_PKEY *key = NULL;
    unsigned char point[65];
    size_t alen = 0, blen = 0;
    const char *type = NULL;
    if (!bld) {
        si_errprintf(err, "out of memory");
        goto out;
    }
    if (kty && strcmp(kty, "RSA") == 0) {
        type = "RSA";
        if (!(a = jwk_bn(jwk, "n", NULL)) || !(b = jwk_bn(jwk, "e", NULL))) {
            si_errprintf(err, "an RSA key needs base64url \"n\" and \"e\"");
            goto out;
        }
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, a);
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, b);
    } else if (kty && strcmp(kty, "EC") == 0 && crv && strcmp(crv, "P-256") == 0) {
        type = "EC";
        if (!(a = jwk_bn(jwk, "x", &alen)) || !(b = jwk_bn(jwk, "y", &blen)) || alen != 32 ||
            blen != 32) {
            si_errprintf(err, "a P-256 key needs \"x\" and \"y\" of 32 bytes each");
            goto out;
        }
        point[0] = 0x04; /* uncompressed: x then y */
        BN_bn2binpad(a, point + 1, 32);
        BN_bn2binpad(b, point + 33, 32);
        OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "P-256", 0);
        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point));
    } else {
        si_errprintf(err, "key type %.16s%s%.16s: only RSA (RS256) and EC P-256 (ES256)",
                     kty ? kty : "(none)", crv ? " " : "", crv ? crv : "");
        goto out;
    }
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (!(params = OSSL_PARAM_BLD_to_param(bld)) || !ctx || EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) {
        key = NULL;
        si_errprintf(err, "not a valid %s public key", type);
    }
    EVP_PKEY_CTX_free(ctx);
out:
    OSSL_PARAM_free(params);
    OSSL_PARAM_BLD_free(bld);
    BN_free(a);
    BN_free(b);
    return key;
}

/* A JWKS document ({"keys": [JWK, ...]}): every signing key of it, each
 * with its "kid"; keys marked for encryption ("use": "enc") are left out. */
static int add_jwks(token_verifier_t *v, const char *issuer, const char *path, si_error_t *err)
{
    json_error_t jerr;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    json_t *keys = json_object_get(doc, "keys");
    if (!json_is_array(keys)) {
        json_decref(doc);
        return si_errprintf(err, "%s is neither a PEM public key nor a JWKS ({\"keys\": [...]}):"
                                 " %s", path, doc ? "no \"keys\" array" : jerr.text);
    }
    size_t i, added = 0;
    json_t *jwk;
    int rc = 0;
    json_array_foreach(keys, i, jwk) {
        const char *use = json_string_value(json_object_get(jwk, "use"));
        const char *kid = json_string_value(json_object_get(jwk, "kid"));
        if (use && strcmp(use, "sig") != 0)
            continue;
        si_error_t why;
        EVP_PKEY *key = jwk_key(jwk, &why);
        if (!key || (kid && strlen(kid) >= FIELD_MAX)) {
            EVP_PKEY_free(key);
            rc = si_errprintf(err, "%s: keys[%zu]: %s", path, i,
                              key ? "kid longer than 255 characters" : why.text);
            break;
        }
        if ((rc = add_key(v, issuer, kid, key, false, err)) < 0)
            break;
        added++;
    }
    json_decref(doc);
    if (rc == 0 && added == 0)
        rc = si_errprintf(err, "%s: the JWKS holds no signing key", path);
    return rc;
}

/* "ISSUER KEYFILE": the file a PEM public key or a JWKS. */
static int add_issuer(void *arg, char **fields, si_error_t *err)
{
    token_verifier_t *v = arg;
    if (strlen(fields[0]) >= FIELD_MAX)
        return si_errprintf(err, "issuer longer than %d characters", FIELD_MAX - 1);
    FILE *f = fopen(fields[1], "r");
    if (!f)
        return si_errprintf(err, "cannot open the key %s: %s", fields[1], strerror(errno));
    int first = fgetc(f);
    while (first == ' ' || first == '\t' || first == '\n' || first == '\r')
        first = fgetc(f);
    if (first == '{') {
        fclose(f);
        return add_jwks(v, fields[0], fields[1], err);
    }
    rewind(f);
    EVP_PKEY *key = PEM_read_PUBKEY(f, NULL, NULL, NULL);
    fclose(f);
    if (!key)
        return si_errprintf(err, "%s is not a PEM public key", fields[1]);
    int type = EVP_PKEY_get_base_id(key);
    if (type != EVP_PKEY_RSA && type != EVP_PKEY_EC) {
        EVP_PKEY_free(key);
        return si_errprintf(err, "%s: only RSA (RS256) and EC P-256 (ES256) keys", fields[1]);
    }
    return add_key(v, fields[0], NULL, key, false, err);
}

static int add_mapping(void *arg, char **fields, si_error_t *err)
{
    token_verifier_t *v = arg;
    char *end;
    unsigned long uid = strtoul(fields[2], &end, 10), gid;
    if (*end || !isdigit((unsigned char)fields[2][0]) || uid >= UINT32_MAX)
        return si_errprintf(err, "uid '%.20s' is not a number", fields[2]);
    gid = strtoul(fields[3], &end, 10);
    if (*end || !isdigit((unsigned char)fields[3][0]) || gid >= UINT32_MAX)
        return si_errprintf(err, "gid '%.20s' is not a number", fields[3]);
    if (strlen(fields[0]) >= FIELD_MAX || strlen(fields[1]) >= FIELD_MAX)
        return si_errprintf(err, "issuer or subject longer than %d characters", FIELD_MAX - 1);
    if (si_array_grow((void **)&v->map, &v->cap_map, v->nmap + 1, sizeof(*v->map)) < 0)
        return si_errprintf(err, "out of memory");
    mapping_t *m = &v->map[v->nmap++];
    snprintf(m->issuer, FIELD_MAX, "%s", fields[0]);
    snprintf(m->subject, FIELD_MAX, "%s", fields[1]);
    m->uid = (uid_t)uid;
    m->gid = (gid_t)gid;
    return 0;
}

token_verifier_t *token_verifier_new(const token_opts_t *opts, si_error_t *err)
{
    token_verifier_t *v = calloc(1, sizeof(*v));
    if (!v) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    snprintf(v->audience, sizeof(v->audience), "%s", opts->audience ? opts->audience : "");
    v->skew_s = opts->skew_s;
    if (opts->issuers_file && *opts->issuers_file) {
        if (each_line(opts->issuers_file, 2, add_issuer, v, err) < 0 ||
            (opts->map_file && *opts->map_file &&
             each_line(opts->map_file, 4, add_mapping, v, err) < 0)) {
            token_verifier_free(v);
            return NULL;
        }
    }
    return v;
}

void token_verifier_free(token_verifier_t *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->nissuers; i++)
        EVP_PKEY_free(v->issuers[i].key);
    free(v->issuers);
    free(v->map);
    free(v);
}

bool token_verifier_enabled(const token_verifier_t *v)
{
    return v && v->nissuers > 0;
}

/* base64url without padding -> bytes; -1 on a character outside the alphabet. */
static int b64url_decode(const char *in, size_t len, unsigned char **out, size_t *outlen)
{
    if (len % 4 == 1)
        return -1;
    size_t padded = (len + 3) / 4 * 4;
    char *std = malloc(padded + 1);
    unsigned char *bytes = malloc(padded / 4 * 3 + 1);
    if (!std || !bytes) {
        free(std);
        free(bytes);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == '-')
            c = '+';
        else if (c == '_')
            c = '/';
        else if (!isalnum((unsigned char)c)) {
            free(std);
            free(bytes);
            return -1;
        }
        std[i] = c;
    }
    memset(std + len, '=', padded - len);
    std[padded] = '\0';
    int n = padded ? EVP_DecodeBlock(bytes, (unsigned char *)std, (int)padded) : 0;
    free(std);
    if (n < 0) {
        free(bytes);
        return -1;
    }
    *outlen = (size_t)n - (padded - len); /* EVP_DecodeBlock counts the padding */
    *out = bytes;
    return 0;
}

static json_t *b64url_json(const char *in, size_t len)
{
    unsigned char *bytes;
    size_t n;
    if (b64url_decode(in, len, &bytes, &n) < 0)
        return NULL;
    json_t *j = json_loadb((const char *)bytes, n, JSON_REJECT_DUPLICATES, NULL);
    free(bytes);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* ES256 signatures are r || s (32 bytes each); OpenSSL verifies DER. */
static unsigned char *es256_der(const unsigned char *sig, size_t len, size_t *derlen)
{
    if (len != 64)
        return NULL;
    ECDSA_SIG *s = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, 32, NULL), *ss = BN_bin2bn(sig + 32, 32, NULL);
    unsigned char *der = NULL;
    if (s && r && ss && ECDSA_SIG_set0(s, r, ss) == 1) {
        r = ss = NULL;
        int n = i2d_ECDSA_SIG(s, &der);
        *derlen = n > 0 ? (size_t)n : 0;
        if (n <= 0)
            der = NULL;
    }
    BN_free(r);
    BN_free(ss);
    ECDSA_SIG_free(s);
    return der;
}

static bool signature_ok(EVP_PKEY *key, const char *alg, const char *signed_part, size_t len,
                         const unsigned char *sig, size_t siglen)
{
    int type = EVP_PKEY_get_base_id(key);
    unsigned char *der = NULL;
    if (strcmp(alg, "RS256") == 0 && type != EVP_PKEY_RSA)
        return false;
    if (strcmp(alg, "ES256") == 0) {
        if (type != EVP_PKEY_EC || !(der = es256_der(sig, siglen, &siglen)))
            return false;
        sig = der;
    }
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
              EVP_DigestVerify(md, sig, siglen, (const unsigned char *)signed_part, len) == 1;
    EVP_MD_CTX_free(md);
    OPENSSL_free(der);
    return ok;
}

static bool audience_ok(const token_verifier_t *v, json_t *aud)
{
    if (json_is_string(aud)) {
        const char *a = json_string_value(aud);
        return strcmp(a, TOKEN_AUD_ANY) == 0 || (v->audience[0] && strcmp(a, v->audience) == 0);
    }
    size_t i;
    json_t *one;
    json_array_foreach(aud, i, one) if (audience_ok(v, one)) return true;
    return false;
}

int token_verify(const token_verifier_t *v, const char *jwt, time_t now, token_claims_t *out,
                 unsigned *status, si_error_t *err)
{
    *status = 401;
    size_t len = jwt ? strnlen(jwt, TOKEN_MAX + 1) : 0;
    if (len == 0)
        return si_errprintf(err, "empty bearer token");
    if (len > TOKEN_MAX)
        return si_errprintf(err, "the bearer token is longer than %d bytes", TOKEN_MAX);
    if (!token_verifier_enabled(v))
        return si_errprintf(err, "this stageind accepts no bearer tokens (no"
                                 " stageind.token_issuers configured)");
    const char *dot1 = strchr(jwt, '.'), *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
    if (!dot2 || strchr(dot2 + 1, '.'))
        return si_errprintf(err, "the bearer token is not a JWT (three base64url parts)");
    json_t *header = b64url_json(jwt, (size_t)(dot1 - jwt));
    json_t *claims = b64url_json(dot1 + 1, (size_t)(dot2 - dot1 - 1));
    unsigned char *sig = NULL;
    size_t siglen = 0;
    int rc = -1;
    if (!header || !claims) {
        si_errprintf(err, "the bearer token's %s is not base64url JSON",
                     header ? "payload" : "header");
        goto out;
    }
    const char *alg = json_string_value(json_object_get(header, "alg"));
    if (!alg || (strcmp(alg, "RS256") != 0 && strcmp(alg, "ES256") != 0)) {
        si_errprintf(err, "bearer token algorithm '%.16s' refused (RS256 or ES256 only)",
                     alg ? alg : "(none)");
        goto out;
    }
    const char *iss = json_string_value(json_object_get(claims, "iss"));
    const char *kid = json_string_value(json_object_get(header, "kid"));
    const issuer_t *issuer = NULL;
    bool known = false, decoded = b64url_decode(dot2 + 1, strlen(dot2 + 1), &sig, &siglen) == 0;
    /* the issuer's keys whose kid matches the token's (a key without one, any) */
    for (size_t i = 0; iss && i < v->nissuers && !issuer; i++) {
        const issuer_t *k = &v->issuers[i];
        if (strcmp(k->issuer, iss) != 0)
            continue;
        known = true;
        if ((!kid || !k->kid[0] || strcmp(k->kid, kid) == 0) && decoded &&
            signature_ok(k->key, alg, jwt, (size_t)(dot2 - jwt), sig, siglen))
            issuer = k;
    }
    if (!known) {
        si_errprintf(err, "bearer token issuer '%.128s' is not trusted here",
                     iss ? iss : "(none)");
        goto out;
    }
    if (!issuer) {
        si_errprintf(err, "the bearer token's signature does not verify with issuer %.128s's"
                          " key%s%.64s", iss, kid ? "s of kid " : "s", kid ? kid : "");
        goto out;
    }
    json_t *exp = json_object_get(claims, "exp"), *nbf = json_object_get(claims, "nbf");
    if (!json_is_integer(exp) && !json_is_real(exp)) {
        si_errprintf(err, "the bearer token has no expiry (exp)");
        goto out;
    }
    if (json_number_value(exp) + (double)v->skew_s < (double)now) {
        si_errprintf(err, "the bearer token expired %.0f s ago",
                     (double)now - json_number_value(exp));
        goto out;
    }
    if (nbf && (!json_is_number(nbf) || json_number_value(nbf) - (double)v->skew_s > (double)now)) {
        si_errprintf(err, "the bearer token is not valid yet (nbf)");
        goto out;
    }
    json_t *aud = json_object_get(claims, "aud");
    if (!aud || !audience_ok(v, aud)) {
        si_errprintf(err, "the bearer token is not meant for this service (aud must be '%s'%s%s)",
                     v->audience[0] ? v->audience : TOKEN_AUD_ANY, v->audience[0] ? " or " : "",
                     v->audience[0] ? TOKEN_AUD_ANY : "");
        goto out;
    }
    const char *sub = json_string_value(json_object_get(claims, "sub"));
    json_t *scope = json_object_get(claims, "scope");
    if (!sub || strlen(sub) >= sizeof(out->subject)) {
        si_errprintf(err, "the bearer token has no usable subject (sub)");
        goto out;
    }
    if (scope && (!json_is_string(scope) || json_string_length(scope) >= TOKEN_SCOPE_MAX)) {
        si_errprintf(err, "the bearer token's scope is not a string of at most %d bytes",
                     TOKEN_SCOPE_MAX - 1);
        goto out;
    }
    const mapping_t *m = NULL;
    mapping_t self;
    unsigned long long su, sg;
    char tail;
    if (issuer->self) {
        if (sscanf(sub, "%llu:%llu%c", &su, &sg, &tail) != 2 || su >= UINT32_MAX ||
            sg >= UINT32_MAX) {
            si_errprintf(err, "bearer token subject '%.64s' is not UID:GID", sub);
            goto out;
        }
        self.uid = (uid_t)su;
        self.gid = (gid_t)sg;
        m = &self;
    }
    /* a subject's own line (never a "group:" line, whatever the subject) */
    size_t plen = strlen(GROUP_PREFIX);
    for (size_t i = 0; i < v->nmap && !m; i++)
        if (strcmp(v->map[i].issuer, iss) == 0 && strcmp(v->map[i].subject, sub) == 0 &&
            strncmp(v->map[i].subject, GROUP_PREFIX, plen) != 0)
            m = &v->map[i];
    /* no line for the subject: the first "group:" line of one of its wlcg.groups */
    json_t *groups = json_object_get(claims, "wlcg.groups");
    for (size_t i = 0; i < v->nmap && !m && json_is_array(groups); i++) {
        const mapping_t *g = &v->map[i];
        size_t k;
        json_t *one;
        if (strcmp(g->issuer, iss) != 0 || strncmp(g->subject, GROUP_PREFIX, plen) != 0)
            continue;
        json_array_foreach(groups, k, one) {
            if (json_is_string(one) && strcmp(json_string_value(one), g->subject + plen) == 0) {
                m = g;
                break;
            }
        }
    }
    if (!m) {
        *status = 403;
        si_errprintf(err, "bearer token subject '%.64s' of issuer %.128s maps to no local user,"
                          " nor do its wlcg.groups (stageind.token_map)", sub, iss);
        goto out;
    }
    out->uid = m->uid;
    out->gid = m->gid;
    snprintf(out->subject, sizeof(out->subject), "%s", sub);
    snprintf(out->scope, sizeof(out->scope), "%s", scope ? json_string_value(scope) : "");
    rc = 0;
out:
    json_decref(header);
    json_decref(claims);
    free(sig);
    return rc;
}

bool token_scope_allows(const char *scope, const char *op, const char *path)
{
    size_t oplen = strlen(op);
    const char *p = scope;
    while (p && *p) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ");
        if (n > oplen + 1 && strncmp(p, op, oplen) == 0 && p[oplen] == ':' && p[oplen + 1] == '/') {
            const char *dir = p + oplen + 1;
            size_t dlen = n - oplen - 1;
            while (dlen > 1 && dir[dlen - 1] == '/')
                dlen--;
            if (dlen == 1 || (strncmp(path, dir, dlen) == 0 &&
                              (path[dlen] == '\0' || path[dlen] == '/')))
                return true;
        }
        p += n;
    }
    return false;
}

char *token_b64url_encode(const unsigned char *in, size_t len)
{
    char *out = malloc(len / 3 * 4 + 8);
    if (!out)
        return NULL;
    int n = EVP_EncodeBlock((unsigned char *)out, in, (int)len);
    while (n > 0 && out[n - 1] == '=')
        n--;
    out[n] = '\0';
    for (char *p = out; *p; p++)
        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    return out;
}

char *token_sign_es256(EVP_PKEY *key, const char *header, const char *claims, si_error_t *err)
{
    char *h = token_b64url_encode((const unsigned char *)header, strlen(header));
    char *c = token_b64url_encode((const unsigned char *)claims, strlen(claims));
    char *signing = NULL, *sig64 = NULL, *jwt = NULL;
    unsigned char der[128], raw[64];
    size_t derlen = sizeof(der);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    ECDSA_SIG *es = NULL;
    if (!h || !c || !md || asprintf(&signing, "%s.%s", h, c) < 0) {
        signing = NULL;
        si_errprintf(err, "out of memory");
        goto out;
    }
    const unsigned char *p = der;
    if (EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
        EVP_DigestSign(md, der, &derlen, (const unsigned char *)signing, strlen(signing)) != 1 ||
        !(es = d2i_ECDSA_SIG(NULL, &p, (long)derlen)) ||
        BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32) != 32 ||
        BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32) != 32) {
        si_errprintf(err, "cannot sign the token (is the key EC P-256?)");
        goto out;
    }
    if (!(sig64 = token_b64url_encode(raw, 64)) || asprintf(&jwt, "%s.%s", signing, sig64) < 0) {
        jwt = NULL;
        si_errprintf(err, "out of memory");
    }
out:
    ECDSA_SIG_free(es);
    EVP_MD_CTX_free(md);
    free(h);
    free(c);
    free(signing);
    free(sig64);
    return jwt;
}

char *token_sign(EVP_PKEY *key, const char *issuer, uid_t uid, gid_t gid, const char *scope,
                 int64_t lifetime_s, time_t now, si_error_t *err)
{
    char sub[48];
    snprintf(sub, sizeof(sub), "%u:%u", (unsigned)uid, (unsigned)gid);
    json_t *claims = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:s}", "iss", issuer, "sub", sub,
                               "aud", TOKEN_AUD_ANY, "iat", (json_int_t)now, "nbf",
                               (json_int_t)now, "exp", (json_int_t)(now + lifetime_s), "scope",
                               scope);
    char *payload = claims ? json_dumps(claims, JSON_COMPACT) : NULL;
    json_decref(claims);
    if (!payload) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    char *jwt = token_sign_es256(key, "{\"alg\":\"ES256\",\"typ\":\"JWT\"}", payload, err);
    free(payload);
    return jwt;
}

/* The key at path, or -1 (err set) when it is unreadable or not an EC key;
 * 0 when there is none. */
static int key_read(const char *path, EVP_PKEY **key, si_error_t *err)
{
    struct stat st;
    *key = NULL;
    if (stat(path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        return si_errprintf(err, "cannot read %s: %s", path, strerror(errno));
    }
    if (st.st_mode & 077)
        return si_errprintf(err, "%s is readable by others (mode %04o): the token signing key must"
                                 " be 0600", path, (unsigned)(st.st_mode & 07777));
    FILE *f = fopen(path, "r");
    *key = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
    if (f)
        fclose(f);
    if (!*key || EVP_PKEY_get_base_id(*key) != EVP_PKEY_EC) {
        EVP_PKEY_free(*key);
        *key = NULL;
        return si_errprintf(err, "%s is not an EC private key in PEM", path);
    }
    return 1;
}

/* A new key written whole to a temporary file, then linked to path: 1 made,
 * 0 another process made one first (several instances starting on one
 * shared key), -1 error. */
static int key_create(const char *path, EVP_PKEY **key, si_error_t *err)
{
    char tmp[PATH_MAX + 32];
    if (snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof(tmp))
        return si_errprintf(err, "%s: too long a path", path);
    if (!(*key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256")))
        return si_errprintf(err, "cannot make a token signing key");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    bool ok = f && PEM_write_PrivateKey(f, *key, NULL, NULL, 0, NULL, NULL) == 1;
    ok = f && fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
    if (f)
        fclose(f);
    else if (fd >= 0)
        close(fd);
    int rc = ok && link(tmp, path) == 0 ? 1 : ok && errno == EEXIST ? 0 : -1;
    if (rc < 0)
        si_errprintf(err, "cannot write the token signing key %s: %s", path, strerror(errno));
    unlink(tmp);
    if (rc <= 0) {
        EVP_PKEY_free(*key);
        *key = NULL;
    }
    return rc;
}

EVP_PKEY *token_key_load(const char *path, si_error_t *err)
{
    EVP_PKEY *key = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        int rc = key_read(path, &key, err);
        if (rc != 0)
            return rc > 0 ? key : NULL;
        if ((rc = key_create(path, &key, err)) != 0)
            return rc > 0 ? key : NULL;
    }
    si_errprintf(err, "%s: made and gone again at once", path);
    return NULL;
}

char *token_key_public_pem(EVP_PKEY *key, si_error_t *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    bool ok = mem && PEM_write_PUBKEY(mem, key) == 1;
    if (mem)
        fclose(mem);
    if (!ok) {
        free(text);
        si_errprintf(err, "cannot write the public key");
        return NULL;
    }
    return text;
}

/* ---- the gate ------------------------------------------------------------------- */

struct token_gate {
    pthread_rwlock_t lock;
    token_verifier_t *v;
};

token_gate_t *token_gate_new(void)
{
    token_gate_t *g = calloc(1, sizeof(*g));
    if (g && pthread_rwlock_init(&g->lock, NULL) != 0) {
        free(g);
        g = NULL;
    }
    return g;
}

void token_gate_free(token_gate_t *g)
{
    if (!g)
        return;
    token_verifier_free(g->v);
    pthread_rwlock_destroy(&g->lock);
    free(g);
}

void token_gate_set(token_gate_t *g, token_verifier_t *v)
{
    pthread_rwlock_wrlock(&g->lock);
    token_verifier_t *old = g->v;
    g->v = v;
    pthread_rwlock_unlock(&g->lock);
    token_verifier_free(old);
}

int token_gate_verify(token_gate_t *g, const char *jwt, time_t now, token_claims_t *out,
                      unsigned *status, si_error_t *err)
{
    if (!g)
        return token_verify(NULL, jwt, now, out, status, err);
    pthread_rwlock_rdlock(&g->lock);
    int rc = token_verify(g->v, jwt, now, out, status, err);
    pthread_rwlock_unlock(&g->lock);
    return rc;
}

const char *token_bearer_of(const char *authorization)
{
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return NULL;
    authorization += 7;
    while (*authorization == ' ')
        authorization++;
    return authorization;
}

int token_gate_read(token_gate_t *g, const char *jwt, const char *method, const char *path,
                    time_t now, token_claims_t *out, si_error_t *err)
{
    unsigned status;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return si_errprintf(err, "a bearer token may only read (GET or HEAD) on the S3"
                                 " endpoint, not %.16s; sign other requests (AWS Signature"
                                 " Version 4)", method);
    if (token_gate_verify(g, jwt, now, out, &status, err) < 0)
        return -1;
    if (!token_scope_allows(out->scope, "storage.read", path))
        return si_errprintf(err, "the token's scope does not allow reading %.1100s (it needs"
                                 " storage.read:%.1100s or a directory above)", path, path);
    return 0;
}
