/* The S3 credentials file (common/aws/s3secrets.c), loaded both as the
 * server's table and as a client's key pair from a 0600 file. */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include "common/aws/s3secrets.h"
#include "tests/fuzz/fuzz.h"

static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(path, sizeof(path), "/tmp/fuzz-s3secrets.%ld", (long)getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    si_error_t err;
    fuzz_write_file(path, data, size);

    si_secrets_t *s = si_secrets_load(path, &err);
    if (getenv("FUZZ_VERBOSE")) /* why a seed loads or not */
        fprintf(stderr, "load: %s\n", s ? "OK" : err.text);
    if (s) {
        si_sigv4_credential_t cred;
        (void)si_secrets_count(s);
        (void)si_secrets_lookup(s, "AKIAIOSFODNN7EXAMPLE", &cred);
        (void)si_secrets_lookup(s, "", &cred);
        si_secrets_free(s);
    }
    si_secrets_client_t client;
    (void)si_secrets_load_client(path, &client, &err);
    unlink(path);
    return 0;
}
