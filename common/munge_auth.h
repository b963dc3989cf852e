/* MUNGE, the HPC sites' identity service: contexts on a given socket and
 * the client side's credential. Clients (the CLI, libstagein, the SPANK
 * plugin) encode a fresh credential for every request; stageind decodes it
 * (daemon/control/identity.h). */
#ifndef SI_MUNGE_H
#define SI_MUNGE_H

#include <munge.h>

#include "common/error.h"

/* The HTTP header that carries a credential to stageind. */
#define SI_MUNGE_HEADER "X-Stagein-Munge"

/* A context on munge_socket (NULL: libmunge's default socket). */
munge_ctx_t si_munge_context(const char *munge_socket, si_error_t *err);

/* A fresh credential for this process's uid/gid (malloc'd). */
char *si_munge_encode(const char *munge_socket, si_error_t *err);

#endif
