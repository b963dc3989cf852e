#include "config.h"
#include "common/munge_auth.h"

#include <stdlib.h>

munge_ctx_t si_munge_context(const char *munge_socket, si_error_t *err)
{
    munge_ctx_t ctx = munge_ctx_create();
    if (!ctx) {
        si_errprintf(err, "cannot create a MUNGE context (out of memory)");
        return NULL;
    }
    if (munge_socket && munge_ctx_set(ctx, MUNGE_OPT_SOCKET, munge_socket) != EMUNGE_SUCCESS) {
        si_errprintf(err, "cannot use MUNGE socket %s: %s", munge_socket, munge_ctx_strerror(ctx));
        munge_ctx_destroy(ctx);
        return NULL;
    }
    return ctx;
}

char *si_munge_encode(const char *munge_socket, si_error_t *err)
{
    munge_ctx_t ctx = si_munge_context(munge_socket, err);
    if (!ctx)
        return NULL;
    char *cred = NULL;
    munge_err_t e = munge_encode(&cred, ctx, NULL, 0);
    if (e != EMUNGE_SUCCESS) {
        const char *why = munge_ctx_strerror(ctx);
        si_errprintf(err, "cannot get a MUNGE credential%s%s: %s", munge_socket ? " from " : "",
                     munge_socket ? munge_socket : "", why ? why : munge_strerror(e));
        free(cred);
        cred = NULL;
    }
    munge_ctx_destroy(ctx);
    return cred;
}
