/* A growable byte string with a size limit and a sticky failure flag, so a
 * builder can append many pieces and check once at the end. */
#ifndef SI_STRBUF_H
#define SI_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *data;   /* always NUL-terminated once anything was appended */
    size_t len;
    size_t cap;
    size_t limit; /* appends that would grow len past this fail */
    bool failed;  /* an append failed (limit or memory); contents are incomplete */
} si_strbuf_t;

void si_strbuf_init(si_strbuf_t *b, size_t limit);
/* Room for extra more bytes (and the NUL) at once, so that a builder whose
 * size is known ahead allocates once instead of doubling up from 64: true,
 * or false with failed set (past the limit, or out of memory). */
bool si_strbuf_reserve(si_strbuf_t *b, size_t extra);
bool si_strbuf_append(si_strbuf_t *b, const void *data, size_t len);
bool si_strbuf_puts(si_strbuf_t *b, const char *s);
bool si_strbuf_putc(si_strbuf_t *b, char c);
bool si_strbuf_printf(si_strbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Empties the string, keeping its memory and limit, and clears failed. */
void si_strbuf_reset(si_strbuf_t *b);
/* "" when nothing was appended. */
const char *si_strbuf_str(const si_strbuf_t *b);
/* Hands the NUL-terminated contents to the caller (free()) and re-initialises. */
char *si_strbuf_take(si_strbuf_t *b);
void si_strbuf_free(si_strbuf_t *b);

#endif
