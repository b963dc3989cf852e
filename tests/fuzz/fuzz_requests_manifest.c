/* A stage request's manifest text (requests_manifest_lines in
 * catalog/requests.c), as the control API receives it. */
#include "config.h"

#include "catalog/requests.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char **lines = NULL, *storage = NULL;
    size_t nlines = 0;
    si_error_t err;

    if (requests_manifest_lines((const char *)data, size, &lines, &nlines, &storage, &err) == 0) {
        for (size_t i = 0; i < nlines; i++)
            if (!lines[i] || !lines[i][0] || lines[i][0] == '#' || strlen(lines[i]) > size ||
                strchr(lines[i], '\n'))
                abort(); /* one entry per line, no blank or comment line */
    }
    free(lines);
    free(storage);
    return 0;
}
