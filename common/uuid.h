/* Random (version 4) UUIDs, the ids of requests and pushes. */
#ifndef SI_UUID_H
#define SI_UUID_H

#define SI_UUID_LEN 36 /* 8-4-4-4-12 hex digits and dashes, without the NUL */

/* Writes a new random UUID and its NUL into out. */
void si_uuid4(char out[SI_UUID_LEN + 1]);

#endif
