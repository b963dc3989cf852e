/* The S3 credentials file: one "ACCESS_KEY SECRET UID GID" per line, '#'
 * comment lines and blank lines ignored. The file must not be readable or
 * writable by group or others (0600 or stricter), or it is refused. */
#ifndef SI_S3SECRETS_H
#define SI_S3SECRETS_H

#include <stddef.h>

#include "common/error.h"
#include "common/sigv4.h"

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

#endif
