/* The control API's stage body (control_parse_stage in
 * daemon/control/control.c): JSON with datasets, files (the Tape REST API's
 * objects with diskLifetime and targetedMetadata too), a manifest, job,
 * priority, deadline, pin lifetime, submission and uid/gid. */
#include "config.h"

#include "daemon/control/control.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    control_stage_t st;
    si_error_t err;

    memset(&st, 0, sizeof(st));
    if (control_parse_stage((const char *)data, size, 7 * 86400, "stagein", &st, &err) == 0) {
        for (size_t i = 0; i < st.ndatasets; i++)
            if (!st.datasets[i])
                abort();
        for (size_t i = 0; i < st.nfiles; i++)
            if (!st.files[i])
                abort();
        if (st.pin_lifetime < 0 || st.pin_lifetime > 7 * 86400)
            abort();
    }
    control_stage_free(&st);
    return 0;
}
