/* The smallest program built on libstagein.so (tests/bench/cli_start): opens
 * a handle and closes it, so its run time is the library's load and set-up. */
#include <stdio.h>

#include "stagein/stagein.h"

int main(void)
{
    stagein_t *h = NULL;
    stagein_err_t rc = stagein_open(&h);

    if (rc != STAGEIN_SUCCESS) {
        fprintf(stderr, "lib_start: stagein_open: %s\n", stagein_strerror(rc));
        return 1;
    }
    stagein_close(h);
    return 0;
}
