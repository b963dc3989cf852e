/* Bearer tokens: RS256 and ES256 tokens signed here with keys made here,
 * verified against an issuers file and a mapping file; every refusal
 * (expired, not yet valid, wrong audience, unknown issuer, bad signature,
 * alg none, malformed, huge, unmapped subject) and the WLCG scope rules. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "common/tap.h"
#include "daemon/control/token.h"

/* A compact JWT of header (kid NULL: none) and claims signed with key
 * (NULL: no signature). */
static char *sign_kid(EVP_PKEY *key, const char *alg, const char *kid, const char *claims)
{
    char header[160];
    snprintf(header, sizeof(header), "{\"alg\":\"%s\",\"typ\":\"JWT\"%s%s%s}", alg,
             kid ? ",\"kid\":\"" : "", kid ? kid : "", kid ? "\"" : "");
    char *h = token_b64url_encode((const unsigned char *)header, strlen(header));
    char *c = token_b64url_encode((const unsigned char *)claims, strlen(claims));
    size_t len = strlen(h) + strlen(c) + 1;
    char *signing = malloc(len + 1);
    snprintf(signing, len + 1, "%s.%s", h, c);
    unsigned char sig[512], raw[64];
    size_t siglen = sizeof(sig);
    char *s = strdup("");
    if (key) {
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key);
        EVP_DigestSign(md, sig, &siglen, (unsigned char *)signing, len);
        EVP_MD_CTX_free(md);
        if (strcmp(alg, "ES256") == 0) { /* DER -> r || s */
            const unsigned char *p = sig;
            ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)siglen);
            BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32);
            BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32);
            ECDSA_SIG_free(es);
            memcpy(sig, raw, 64);
            siglen = 64;
        }
        free(s);
        s = token_b64url_encode(sig, siglen);
    }
    char *jwt = malloc(len + strlen(s) + 2);
    sprintf(jwt, "%s.%s", signing, s);
    free(h);
    free(c);
    free(signing);
    free(s);
    return jwt;
}

static char *sign(EVP_PKEY *key, const char *alg, const char *claims)
{
    return sign_kid(key, alg, NULL, claims);
}

/* A BIGNUM parameter of key, base64url (padded to width bytes when width). */
static char *param64(EVP_PKEY *key, const char *name, int width)
{
    BIGNUM *bn = NULL;
    unsigned char buf[512];
    EVP_PKEY_get_bn_param(key, name, &bn);
    int n = width ? BN_bn2binpad(bn, buf, width) : BN_bn2bin(bn, buf);
    BN_free(bn);
    return token_b64url_encode(buf, (size_t)n);
}

/* A JWKS of an RSA key (kid "r1"), an EC key (kid "e1") and an encryption
 * key that must be left out. */
static void write_jwks(EVP_PKEY *rsa, EVP_PKEY *ec, const char *path)
{
    char *n = param64(rsa, OSSL_PKEY_PARAM_RSA_N, 0), *e = param64(rsa, OSSL_PKEY_PARAM_RSA_E, 0);
    char *x = param64(ec, OSSL_PKEY_PARAM_EC_PUB_X, 32), *y = param64(ec, OSSL_PKEY_PARAM_EC_PUB_Y, 32);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"keys\": [{\"kty\":\"RSA\",\"kid\":\"r1\",\"use\":\"sig\",\"n\":\"%s\","
               "\"e\":\"%s\"}, {\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"e1\",\"x\":\"%s\","
               "\"y\":\"%s\"}, {\"kty\":\"RSA\",\"use\":\"enc\",\"n\":\"AQAB\",\"e\":\"AQAB\"}]}\n",
            n, e, x, y);
    fclose(f);
    free(n);
    free(e);
    free(x);
    free(y);
}

static void write_pub(EVP_PKEY *key, const char *path)
{
    FILE *f = fopen(path, "w");
    PEM_write_PUBKEY(f, key);
    fclose(f);
}

static char *claims(const char *iss, const char *sub, const char *aud, long exp, long nbf,
                    const char *scope)
{
    char *buf = malloc(1024);
    snprintf(buf, 1024,
             "{\"iss\":\"%s\",\"sub\":\"%s\",\"aud\":\"%s\",\"exp\":%ld,\"nbf\":%ld,"
             "\"scope\":\"%s\"}", iss, sub, aud, exp, nbf, scope);
    return buf;
}

int main(void)
{
    char dir[] = "/tmp/t_token.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char rsa_pub[128], ec_pub[128], issuers[128], map[128];
    snprintf(rsa_pub, sizeof(rsa_pub), "%s/rsa.pem", dir);
    snprintf(ec_pub, sizeof(ec_pub), "%s/ec.pem", dir);
    snprintf(issuers, sizeof(issuers), "%s/issuers", dir);
    snprintf(map, sizeof(map), "%s/map", dir);
    EVP_PKEY *rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    EVP_PKEY *other = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
    write_pub(rsa, rsa_pub);
    write_pub(ec, ec_pub);
    FILE *f = fopen(issuers, "w");
    fprintf(f, "# issuer key\nhttps://idp.test %s\nhttps://ec.test %s\n", rsa_pub, ec_pub);
    fclose(f);
    f = fopen(map, "w");
    fprintf(f, "https://idp.test alice 1000 100\nhttps://ec.test bob 1001 100\n");
    fclose(f);

    si_error_t err;
    token_opts_t o = {.issuers_file = issuers, .map_file = map, .audience = "stagein-test",
                      .skew_s = 30};
    token_verifier_t *v = token_verifier_new(&o, &err);
    ok(v && token_verifier_enabled(v), "verifier loads 2 issuers and the map");
    time_t now = time(NULL);
    token_claims_t c;
    unsigned status;
    char *cl = claims("https://idp.test", "alice", "stagein-test", now + 600, now - 10,
                      "storage.stage:/data storage.read:/");
    char *t = sign(rsa, "RS256", cl);
    ok(token_verify(v, t, now, &c, &status, &err) == 0 && c.uid == 1000 && c.gid == 100,
       "RS256 token verifies and maps to uid 1000");
    is_str(c.scope, "storage.stage:/data storage.read:/", "scope kept");
    free(t);
    free(cl);

    cl = claims("https://ec.test", "bob", TOKEN_AUD_ANY, now + 600, now, "storage.stage:/");
    t = sign(ec, "ES256", cl);
    ok(token_verify(v, t, now, &c, &status, &err) == 0 && c.uid == 1001,
       "ES256 token with the WLCG any audience verifies");
    /* a flipped signature byte */
    t[strlen(t) - 3] = t[strlen(t) - 3] == 'A' ? 'B' : 'A';
    ok(token_verify(v, t, now, &c, &status, &err) < 0 && status == 401,
       "ES256 bad signature: %s", err.text);
    free(t);
    free(cl);

    struct {
        const char *what, *iss, *sub, *aud;
        long exp, nbf;
        EVP_PKEY *key;
        const char *alg;
        unsigned status;
    } bad[] = {
        {"expired", "https://idp.test", "alice", "stagein-test", now - 100, now - 200, rsa,
         "RS256", 401},
        {"not yet valid", "https://idp.test", "alice", "stagein-test", now + 900, now + 300, rsa,
         "RS256", 401},
        {"wrong audience", "https://idp.test", "alice", "elsewhere", now + 600, now, rsa, "RS256",
         401},
        {"unknown issuer", "https://evil.test", "alice", "stagein-test", now + 600, now, rsa,
         "RS256", 401},
        {"signed by another key", "https://idp.test", "alice", "stagein-test", now + 600, now,
         other, "RS256", 401},
        {"alg none", "https://idp.test", "alice", "stagein-test", now + 600, now, NULL, "none",
         401},
        {"RS256 claimed with the EC issuer", "https://ec.test", "bob", "stagein-test", now + 600,
         now, ec, "RS256", 401},
        {"unmapped subject", "https://idp.test", "mallory", "stagein-test", now + 600, now, rsa,
         "RS256", 403},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cl = claims(bad[i].iss, bad[i].sub, bad[i].aud, bad[i].exp, bad[i].nbf, "storage.stage:/");
        t = sign(bad[i].key, bad[i].alg, cl);
        ok(token_verify(v, t, now, &c, &status, &err) < 0 && status == bad[i].status,
           "%s refused with %u: %s", bad[i].what, status, err.text);
        free(t);
        free(cl);
    }
    cl = claims("https://idp.test", "alice", "stagein-test", now - 10, now - 100, "");
    t = sign(rsa, "RS256", cl);
    ok(token_verify(v, t, now, &c, &status, &err) == 0, "expired 10 s ago passes with 30 s skew");
    free(t);
    free(cl);

    static const char *const malformed[] = {"", "abc", "a.b", "a.b.c.d", "!!!.###.$$$",
                                            "eyJhbGciOiJSUzI1NiJ9.e30.", NULL};
    for (size_t i = 0; malformed[i]; i++)
        ok(token_verify(v, malformed[i], now, &c, &status, &err) < 0 && status == 401,
           "malformed '%s' refused: %s", malformed[i], err.text);
    char *huge = malloc(TOKEN_MAX + 100);
    memset(huge, 'A', TOKEN_MAX + 99);
    huge[TOKEN_MAX + 99] = '\0';
    ok(token_verify(v, huge, now, &c, &status, &err) < 0 && strstr(err.text, "longer"),
       "huge token refused: %s", err.text);
    free(huge);

    ok(token_scope_allows("storage.stage:/data", "storage.stage", "/data/a/b"), "under the dir");
    ok(token_scope_allows("storage.stage:/data/", "storage.stage", "/data"), "the dir itself");
    ok(!token_scope_allows("storage.stage:/data", "storage.stage", "/database/x"),
       "no prefix match across a component");
    ok(!token_scope_allows("storage.read:/", "storage.stage", "/data/x"), "read is not stage");
    ok(token_scope_allows("openid storage.stage:/", "storage.stage", "/x/y"), "/ covers all");
    ok(!token_scope_allows("storage.stagexyz:/", "storage.stage", "/x"), "scope name exact");
    ok(!token_scope_allows("", "storage.stage", "/x"), "empty scope grants nothing");

    f = fopen(map, "w");
    fprintf(f, "https://idp.test alice notanumber 100\n");
    fclose(f);
    token_verifier_t *bad_map = token_verifier_new(&o, &err);
    ok(!bad_map && strstr(err.text, "line 1"), "bad map line named: %s", err.text);
    token_verifier_t *none = token_verifier_new(&(token_opts_t){0}, &err);
    ok(none && !token_verifier_enabled(none), "no issuers file: tokens disabled");
    ok(token_verify(none, "a.b.c", now, &c, &status, &err) < 0 && status == 401,
       "disabled verifier refuses: %s", err.text);
    token_verifier_free(none);

    /* stageind's own tokens: signed here, "sub" UID:GID trusted for its issuer only */
    char keyfile[160];
    snprintf(keyfile, sizeof(keyfile), "%s/token.key", dir);
    EVP_PKEY *self = token_key_load(keyfile, &err);
    ok(self != NULL, "signing key made: %s", self ? "" : err.text);
    struct stat st;
    ok(stat(keyfile, &st) == 0 && (st.st_mode & 0777) == 0600, "signing key file is 0600");
    EVP_PKEY *again = token_key_load(keyfile, &err);
    ok(again && EVP_PKEY_eq(self, again) == 1, "loaded again: the same key");
    EVP_PKEY_free(again);
    chmod(keyfile, 0644);
    ok(!token_key_load(keyfile, &err) && strstr(err.text, "0600"), "a key readable by others"
       " refused: %s", err.text);
    chmod(keyfile, 0600);
    /* instances sharing one key start at once: 8 processes load a key not
     * made yet; every one ends with the one key linked in place */
    char shared[160];
    snprintf(shared, sizeof(shared), "%s/shared.key", dir);
    int failed = 0;
    pid_t kids[8];
    for (int i = 0; i < 8; i++)
        if ((kids[i] = fork()) == 0) {
            EVP_PKEY *k = token_key_load(shared, &err);
            char *pem = k ? token_key_public_pem(k, &err) : NULL;
            char out[200];
            snprintf(out, sizeof(out), "%s/pub.%d", dir, i);
            FILE *pub = pem ? fopen(out, "w") : NULL;
            if (pub)
                fputs(pem, pub), fclose(pub);
            _exit(pub ? 0 : 1);
        }
    for (int i = 0; i < 8; i++) {
        int ws = 0;
        waitpid(kids[i], &ws, 0);
        failed += !WIFEXITED(ws) || WEXITSTATUS(ws) != 0;
    }
    EVP_PKEY *sk = token_key_load(shared, &err);
    char *spem = sk ? token_key_public_pem(sk, &err) : NULL;
    int same = 0;
    for (int i = 0; i < 8 && spem; i++) {
        char in[200], got[1024] = "";
        snprintf(in, sizeof(in), "%s/pub.%d", dir, i);
        FILE *g = fopen(in, "r");
        size_t n = g ? fread(got, 1, sizeof(got) - 1, g) : 0;
        if (g)
            fclose(g);
        got[n] = '\0';
        same += strcmp(got, spem) == 0;
        unlink(in);
    }
    ok(failed == 0 && same == 8, "8 processes making one key at once: all have the same key (%d of 8)",
       same);
    free(spem);
    EVP_PKEY_free(sk);
    unlink(shared);
    f = fopen(map, "w");
    fprintf(f, "https://idp.test alice 1000 100\n");
    fclose(f);
    token_verifier_t *own = token_verifier_new(&o, &err);
    ok(own && token_verifier_trust_self(own, "stageind", self, &err) == 0, "own issuer trusted");
    t = token_sign(self, "stageind", 1234, 567, "storage.stage:/x", 600, now, &err);
    ok(t && token_verify(own, t, now, &c, &status, &err) == 0 && c.uid == 1234 && c.gid == 567,
       "own token verifies as uid 1234 gid 567");
    is_str(c.scope, "storage.stage:/x", "own token's scope");
    ok(token_verify(own, t, now + 700, &c, &status, &err) < 0 && strstr(err.text, "expired"),
       "own token expires: %s", err.text);
    free(t);
    cl = claims("https://idp.test", "1234:567", "stagein-test", now + 600, now, "");
    t = sign(rsa, "RS256", cl);
    ok(token_verify(own, t, now, &c, &status, &err) < 0 && status == 403,
       "UID:GID subjects are trusted from stageind's own issuer only: %s", err.text);
    free(t);
    free(cl);
    char *pem = token_key_public_pem(self, &err);
    ok(pem && strstr(pem, "BEGIN PUBLIC KEY"), "public key as PEM");
    free(pem);
    token_verifier_free(own);

    /* a JWKS for an issuer: keys told apart by kid */
    char jwks[160];
    snprintf(jwks, sizeof(jwks), "%s/jwks.json", dir);
    write_jwks(rsa, ec, jwks);
    f = fopen(issuers, "w");
    fprintf(f, "https://jwks.test %s\n", jwks);
    fclose(f);
    f = fopen(map, "w");
    fprintf(f, "https://jwks.test carol 1002 100\n"
               "https://jwks.test group:/atlas/production 2000 200\n"
               "https://jwks.test group:/atlas 2001 201\n");
    fclose(f);
    token_verifier_t *jv = token_verifier_new(&o, &err);
    ok(jv != NULL, "a JWKS issuer loads: %s", jv ? "" : err.text);
    cl = claims("https://jwks.test", "carol", TOKEN_AUD_ANY, now + 600, now, "storage.read:/");
    t = sign_kid(rsa, "RS256", "r1", cl);
    ok(jv && token_verify(jv, t, now, &c, &status, &err) == 0 && c.uid == 1002,
       "RS256 token of the JWKS's kid r1 verifies");
    free(t);
    t = sign_kid(ec, "ES256", "e1", cl);
    ok(jv && token_verify(jv, t, now, &c, &status, &err) == 0 && c.uid == 1002,
       "ES256 token of the JWKS's kid e1 verifies");
    free(t);
    t = sign(ec, "ES256", cl);
    ok(jv && token_verify(jv, t, now, &c, &status, &err) == 0, "a token without kid tries"
       " every key of its issuer");
    free(t);
    t = sign_kid(rsa, "RS256", "e1", cl);
    ok(jv && token_verify(jv, t, now, &c, &status, &err) < 0 && status == 401 &&
       strstr(err.text, "kid e1"), "a token signed by another kid's key: %s", err.text);
    free(t);
    t = sign(other, "RS256", cl);
    ok(jv && token_verify(jv, t, now, &c, &status, &err) < 0 && status == 401,
       "a key not in the JWKS: %s", err.text);
    free(t);
    free(cl);
    /* wlcg.groups: a subject without its own line maps by its first listed group line */
    const char *grouped[][3] = {
        {"dave", "[\"/cms\", \"/atlas\", \"/atlas/production\"]", "2000"},
        {"erin", "[\"/atlas\"]", "2001"},
        {"carol", "[\"/atlas\"]", "1002"},
        {"frank", "[\"/cms\"]", "403"},
        {"group:/atlas", "[]", "403"},
        {"gina", "\"/atlas\"", "403"},
    };
    for (size_t i = 0; i < sizeof(grouped) / sizeof(grouped[0]); i++) {
        char buf[512];
        snprintf(buf, sizeof(buf), "{\"iss\":\"https://jwks.test\",\"sub\":\"%s\",\"aud\":\"%s\","
                 "\"exp\":%ld,\"wlcg.groups\":%s}", grouped[i][0], TOKEN_AUD_ANY,
                 (long)now + 600, grouped[i][1]);
        t = sign_kid(rsa, "RS256", "r1", buf);
        int rc = jv ? token_verify(jv, t, now, &c, &status, &err) : -1;
        char got[16];
        snprintf(got, sizeof(got), "%u", rc == 0 ? (unsigned)c.uid : status);
        is_str(got, grouped[i][2], "sub %s with wlcg.groups %s", grouped[i][0], grouped[i][1]);
        free(t);
    }
    token_verifier_free(jv);
    static const char *bad_jwks[][2] = {
        {"{\"keys\": []}", "no signing key"},
        {"{\"keys\": [{\"kty\":\"oct\",\"k\":\"AAAA\"}]}", "only RSA"},
        {"{\"keys\": [{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAA\",\"y\":\"AAAA\"}]}",
         "32 bytes"},
        {"{\"keys\": [{\"kty\":\"RSA\",\"n\":\"!!\"}]}", "\"n\" and \"e\""},
        {"{\"nokeys\": 1}", "no \"keys\" array"},
        {"{broken", "neither a PEM"},
    };
    for (size_t i = 0; i < sizeof(bad_jwks) / sizeof(bad_jwks[0]); i++) {
        f = fopen(jwks, "w");
        fputs(bad_jwks[i][0], f);
        fclose(f);
        token_verifier_t *refused = token_verifier_new(&o, &err);
        ok(!refused && strstr(err.text, bad_jwks[i][1]) && strstr(err.text, "line 1"),
           "bad JWKS %s refused: %s", bad_jwks[i][0], err.text);
        token_verifier_free(refused);
    }
    unlink(jwks);

    /* the gate: what the S3 endpoint checks a bearer read with */
    token_gate_t *gate = token_gate_new();
    cl = claims("https://idp.test", "alice", "stagein-test", now + 600, now, "storage.read:/real");
    t = sign(rsa, "RS256", cl);
    ok(token_gate_read(gate, t, "GET", "/real/x", now, &c, &err) < 0 &&
       strstr(err.text, "no bearer tokens"), "a gate without a verifier refuses: %s", err.text);
    f = fopen(issuers, "w");
    fprintf(f, "https://idp.test %s\n", rsa_pub);
    fclose(f);
    f = fopen(map, "w");
    fprintf(f, "https://idp.test alice 1000 100\n");
    fclose(f);
    token_gate_set(gate, token_verifier_new(&o, &err));
    ok(token_gate_read(gate, t, "GET", "/real/x", now, &c, &err) == 0 && c.uid == 1000,
       "GET under the storage.read scope");
    ok(token_gate_read(gate, t, "HEAD", "/real", now, &c, &err) == 0, "HEAD of the scope's"
       " directory");
    ok(token_gate_read(gate, t, "GET", "/realm/x", now, &c, &err) < 0 &&
       strstr(err.text, "storage.read:/realm/x"), "a path beside the scope: %s", err.text);
    ok(token_gate_read(gate, t, "PUT", "/real/x", now, &c, &err) < 0 &&
       strstr(err.text, "only read"), "a write: %s", err.text);
    ok(token_gate_read(gate, t, "GET", "/real/x", now + 3600, &c, &err) < 0 &&
       strstr(err.text, "expired"), "an expired token: %s", err.text);
    free(t);
    free(cl);
    cl = claims("https://idp.test", "alice", "stagein-test", now + 600, now, "storage.stage:/");
    t = sign(rsa, "RS256", cl);
    ok(token_gate_read(gate, t, "GET", "/real/x", now, &c, &err) < 0, "a stage scope does not"
       " read: %s", err.text);
    free(t);
    free(cl);
    ok(strcmp(token_bearer_of("Bearer  abc") ?: "", "abc") == 0 && token_bearer_of("bearer x") &&
       !token_bearer_of("AWS4-HMAC-SHA256 Credential=x") && !token_bearer_of(NULL),
       "Bearer scheme told from others");
    token_gate_free(gate);
    EVP_PKEY_free(self);
    unlink(keyfile);
    token_verifier_free(v);
    EVP_PKEY_free(rsa);
    EVP_PKEY_free(ec);
    EVP_PKEY_free(other);
    unlink(rsa_pub);
    unlink(ec_pub);
    unlink(issuers);
    unlink(map);
    rmdir(dir);
    return done_testing();
}
