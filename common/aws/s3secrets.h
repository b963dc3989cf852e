/* The S3 credentials file: one "ACCESS_KEY SECRET UID GID" per line, '#'
 * comment lines and blank lines ignored. The file must not be readable or
 * writable by group or others (0600 or stricter), or it is refused. */
#ifndef SI_S3SECRETS_H
#define SI_S3SECRETS_H

#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/aws/sigv4.h"

#define SI_SECRETS_LINE_MAX 1024

typedef struct si_secrets si_secrets_t;

/* Errors name the file, and the line for bad content ("path:3: ..."). */
si_secrets_t *si_secrets_load(const char *path, si_error_t *err);

/* A client's key pair: the first entry of a file in the same format, whose
 * UID and GID may be left out ("ACCESS_KEY SECRET"), with the same mode check
 * and errors (the s3 archive backend signs its requests with it). */
typedef struct {
    char access_key[SI_SIGV4_ACCESS_KEY_MAX + 1];
    char secret[SI_SIGV4_SECRET_MAX + 1];
} si_secrets_client_t;
int si_secrets_load_client(const char *path, si_secrets_client_t *out, si_error_t *err);
size_t si_secrets_count(const si_secrets_t *s);
/* A si_sigv4_lookup_fn: pass the si_secrets_t as its argument. Read-only,
 * so safe from any number of threads. */
int si_secrets_lookup(void *secrets, const char *access_key, si_sigv4_credential_t *cred);
/* Wipes the secrets from memory. */
void si_secrets_free(si_secrets_t *s);

/* ---- session credentials ----------------------------------------------
 * Short-lived S3 credentials that stageind hands to a user it has already
 * authenticated (MUNGE on the control API), so that a job's processes need
 * no long-term key. They are stateless: the access key carries uid, gid and
 * expiry under a MAC, and the secret is derived from the access key, both
 * with a random master key that only the daemon reads (a 0600 file in its
 * state directory); so they survive restarts and nothing is stored per
 * credential. They cannot be revoked before they expire. */

#define SI_SESSION_PREFIX "STAGEIN"
#define SI_SESSION_ACCESS_KEY_LEN 71  /* "STAGEIN" + 64 base32 characters */
#define SI_SESSION_SECRET_LEN 64      /* hex */
#define SI_SESSION_MASTER_LEN 32

typedef struct si_session_keys si_session_keys_t;

/* The master key in path: read, or created (random, 0600) when absent. A
 * file readable by group or others, or of the wrong size, is refused. */
si_session_keys_t *si_session_keys_open(const char *path, si_error_t *err);
void si_session_keys_free(si_session_keys_t *k);

typedef struct {
    char access_key[SI_SESSION_ACCESS_KEY_LEN + 1];
    char secret[SI_SESSION_SECRET_LEN + 1];
    uint32_t uid, gid;
    int64_t expires;   /* unix seconds */
} si_session_credential_t;

/* A new credential for uid/gid that expires at `expires`. */
int si_session_mint(const si_session_keys_t *k, uint32_t uid, uint32_t gid, int64_t expires,
                    si_session_credential_t *out, si_error_t *err);
/* The credential behind an access key, checked at time now: 0 and *cred
 * filled, or -1 (not a session key of this master, altered, or expired). */
int si_session_check(const si_session_keys_t *k, const char *access_key, int64_t now,
                     si_sigv4_credential_t *cred);
/* A si_sigv4_lookup_fn over si_session_keys_t, at the current time. */
int si_session_lookup(void *keys, const char *access_key, si_sigv4_credential_t *cred);

#endif
