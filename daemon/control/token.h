/* Bearer tokens (JWT, the WLCG token profile) beside MUNGE: signatures
 * checked with OpenSSL (RS256, ES256) against the public keys of configured
 * issuers; iss, aud, exp and nbf (with skew) checked; the subject mapped to a
 * local uid/gid by a mapping file; WLCG scopes (storage.stage:/path,
 * storage.read:/path) limit what the token may do. */
#ifndef STAGEIN_CONTROL_TOKEN_H
#define STAGEIN_CONTROL_TOKEN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <openssl/evp.h>

#include "common/error.h"

#define TOKEN_MAX 8192                 /* longer Authorization values are refused */
#define TOKEN_SCOPE_MAX 2048
#define TOKEN_AUD_ANY "https://wlcg.cern.ch/jwt/v1/any"

typedef struct token_verifier token_verifier_t;

typedef struct {
    const char *issuers_file;  /* lines "ISSUER KEY-FILE", the file a PEM public key or a
                                  JWKS (keys told apart by "kid"); NULL or "": no tokens */
    const char *map_file;      /* lines "ISSUER SUBJECT UID GID", or "ISSUER group:GROUP
                                  UID GID" for tokens whose wlcg.groups name GROUP (the
                                  subject's own line first, then the first group line) */
    const char *audience;      /* accepted "aud" besides TOKEN_AUD_ANY */
    int64_t skew_s;            /* clock skew allowed on exp and nbf */
} token_opts_t;

typedef struct {
    uid_t uid;
    gid_t gid;
    char subject[128];
    char scope[TOKEN_SCOPE_MAX];   /* the "scope" claim, space separated */
} token_claims_t;

/* NULL with err on a bad file (named with its line); a verifier with no
 * issuers (refusing every token) when opts->issuers_file is empty. */
token_verifier_t *token_verifier_new(const token_opts_t *opts, si_error_t *err);
void token_verifier_free(token_verifier_t *v);
bool token_verifier_enabled(const token_verifier_t *v);

/* Verifies a compact JWT at time now: 0 with *out, or -1 with *status 401
 * (malformed, bad signature, unknown issuer, wrong audience, expired, not
 * yet valid) or 403 (valid but its subject maps to no local user). */
int token_verify(const token_verifier_t *v, const char *jwt, time_t now, token_claims_t *out,
                 unsigned *status, si_error_t *err);

/* The verifier in force, shared by the control API, the status page and the
 * S3 endpoint: checks take a read lock of the gate's own (never the
 * control's catalog lock), so concurrent callers verify in parallel; a
 * reload swaps the verifier under the write lock. */
typedef struct token_gate token_gate_t;

token_gate_t *token_gate_new(void);
void token_gate_free(token_gate_t *g);
/* Takes v (NULL: no tokens); the verifier it replaces is freed. */
void token_gate_set(token_gate_t *g, token_verifier_t *v);
/* token_verify with the verifier in force (g NULL: refuses every token). */
int token_gate_verify(token_gate_t *g, const char *jwt, time_t now, token_claims_t *out,
                      unsigned *status, si_error_t *err);

/* A bearer token reading over S3 (gfal2 downloading what it staged): the
 * method GET or HEAD, the token verified, its storage.read scope covering
 * path ("/bucket" or "/bucket/key"). 0 with *out; -1 with err (what was
 * wrong: the token, the method or the scope). */
int token_gate_read(token_gate_t *g, const char *jwt, const char *method, const char *path,
                    time_t now, token_claims_t *out, si_error_t *err);

/* "Bearer <token>" (an Authorization value) -> the token; NULL for other
 * schemes or none. */
const char *token_bearer_of(const char *authorization);

/* stageind's own issuer, for sites without an identity provider: tokens it
 * signs (token_sign) for callers MUNGE authenticated carry "sub": "UID:GID",
 * trusted because only stageind holds the key. The key is up-referenced. */
int token_verifier_trust_self(token_verifier_t *v, const char *issuer, EVP_PKEY *key,
                              si_error_t *err);

/* An ES256 token of issuer for uid:gid with scope, valid lifetime_s from
 * now (aud TOKEN_AUD_ANY); malloc'd, NULL with err. */
char *token_sign(EVP_PKEY *key, const char *issuer, uid_t uid, gid_t gid, const char *scope,
                 int64_t lifetime_s, time_t now, si_error_t *err);

/* base64url without padding (RFC 7515 section 2); NULL when out of memory. */
char *token_b64url_encode(const unsigned char *in, size_t len);

/* header.claims (JSON texts, taken as they are) signed ES256 with an EC
 * P-256 key: a compact JWT (malloc'd), NULL with err. */
char *token_sign_es256(EVP_PKEY *key, const char *header, const char *claims, si_error_t *err);

/* stageind's signing key: an EC P-256 private key in PEM at path, made
 * (mode 0600) when missing; a file readable by others is refused. */
EVP_PKEY *token_key_load(const char *path, si_error_t *err);
/* The public half as PEM text (malloc'd). */
char *token_key_public_pem(EVP_PKEY *key, si_error_t *err);

/* Whether a scope list grants op ("storage.stage", "storage.read") on the
 * absolute path ("/bucket/key"): a scope "op:/dir" covers /dir and what is
 * under it, on path component boundaries; "op:/" covers everything. */
bool token_scope_allows(const char *scope, const char *op, const char *path);

#endif
