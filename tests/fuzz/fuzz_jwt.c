/* Bearer tokens (daemon/control/token.c): the JWT parser and checks. The
 * first byte picks what the rest is:
 *   'J'  a JWKS document, loaded as an issuer's key file;
 *   'S'  header JSON, '\n', claims JSON: signed here with the issuer's key,
 *        so that what follows the signature (exp, nbf, aud, sub, scope,
 *        wlcg.groups, the mapping) is reached, then verified;
 *   else the whole input as a compact token, which must never verify (no
 *        input can forge the issuer's signature).
 * Every accepted token maps to a configured uid, and its scope fits. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

#include "daemon/control/token.h"
#include "tests/fuzz/fuzz.h"

#define NOW 1800000000

static EVP_PKEY *key;
static token_verifier_t *verifier;
static char dir[64], issuers[96], map[96], jwks[96];

static void write_text(const char *path, const char *text)
{
    fuzz_write_file(path, (const uint8_t *)text, strlen(text));
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(dir, sizeof(dir), "/tmp/fuzz-jwt.%ld", (long)getpid());
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        abort();
    char pem[96];
    snprintf(pem, sizeof(pem), "%s/key.pem", dir);
    snprintf(issuers, sizeof(issuers), "%s/issuers", dir);
    snprintf(map, sizeof(map), "%s/map", dir);
    snprintf(jwks, sizeof(jwks), "%s/jwks.json", dir);
    key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    FILE *f = key ? fopen(pem, "w") : NULL;
    if (!f || PEM_write_PUBKEY(f, key) != 1 || fclose(f) != 0)
        abort();
    char text[256];
    snprintf(text, sizeof(text), "https://idp.test %s\nhttps://jwks.test %s\n", pem, jwks);
    write_text(issuers, text);
    write_text(map, "https://idp.test alice 1000 100\n"
                    "https://idp.test group:/atlas 2000 200\n"
                    "https://jwks.test alice 3000 300\n");
    write_text(jwks, "{\"keys\": [{\"kty\": \"EC\", \"crv\": \"P-256\", \"x\":"
                     " \"axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY\", \"y\":" /* P-256's G */
                     " \"T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU\", \"kid\": \"1\"}]}");
    token_opts_t o = {.issuers_file = issuers, .map_file = map, .audience = "https://s.test",
                      .skew_s = 30};
    si_error_t err;
    if (!(verifier = token_verifier_new(&o, &err))) {
        fprintf(stderr, "fuzz_jwt: %s\n", err.text);
        abort();
    }
    return 0;
}

static void check(const char *jwt, bool may_verify)
{
    token_claims_t c;
    unsigned status = 0;
    si_error_t err;
    if (token_verify(verifier, jwt, NOW, &c, &status, &err) == 0) {
        if (!may_verify)
            abort(); /* a forged signature verified */
        if (!((c.uid == 1000 && c.gid == 100) || (c.uid == 2000 && c.gid == 200) ||
              (c.uid == 3000 && c.gid == 300)))
            abort(); /* a uid the map does not name */
        if (strlen(c.scope) >= TOKEN_SCOPE_MAX || strlen(c.subject) >= sizeof(c.subject))
            abort();
        (void)token_scope_allows(c.scope, "storage.read", "/data/x");
        (void)token_scope_allows(c.scope, "storage.stage", "/");
    } else if (status != 401 && status != 403) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const uint8_t *p = data + 1, *end = data + size;
    if (data[0] == 'J') {
        fuzz_write_file(jwks, p, (size_t)(end - p));
        token_opts_t o = {.issuers_file = issuers, .map_file = map, .skew_s = 30};
        si_error_t err;
        token_verifier_t *v = token_verifier_new(&o, &err);
        token_verifier_free(v);
    } else if (data[0] == 'S') {
        char *header = fuzz_take_line(&p, end);
        char *claims = fuzz_strndup(p, (size_t)(end - p));
        if (strlen(header) < 4096 && strlen(claims) < 8192) {
            si_error_t err;
            char *jwt = token_sign_es256(key, header, claims, &err);
            if (!jwt)
                abort();
            check(jwt, true);
            free(jwt);
        }
        free(header);
        free(claims);
    } else {
        char *jwt = fuzz_strndup(data, size);
        check(jwt, false);
        (void)token_scope_allows(jwt, "storage.read", "/a/b");
        (void)token_bearer_of(jwt);
        free(jwt);
    }
    return 0;
}
