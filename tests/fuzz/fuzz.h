/* What every libFuzzer target of tests/fuzz shares (doc/fuzzing.md). */
#ifndef STAGEIN_FUZZ_H
#define STAGEIN_FUZZ_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The input as a NUL-terminated string (it may hold NULs of its own); free(). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Splits off the text up to the next '\n' of [*p, end) as a fresh
 * NUL-terminated string (free()); *p moves past the '\n'. */
static inline char *fuzz_take_line(const uint8_t **p, const uint8_t *end)
{
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    const uint8_t *stop = nl ? nl : end;
    char *s = fuzz_strndup(*p, (size_t)(stop - *p));
    *p = nl ? nl + 1 : end;
    return s;
}

/* Replaces path's contents with the input (a 0600 file, as the secrets
 * file must be); aborts on failure, which is the harness's, not a finding. */
static inline void fuzz_write_file(const char *path, const uint8_t *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size) || close(fd) < 0)
        abort();
}

#endif
