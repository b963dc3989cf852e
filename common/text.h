/* Validation and formatting of the strings that cross trust boundaries:
 * object keys, bucket names, numbers, byte counts. */
#ifndef SI_TEXT_H
#define SI_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SI_KEY_MAX 1024
#define SI_BUCKET_MIN 3
#define SI_BUCKET_MAX 63

bool si_utf8_valid(const char *s, size_t len);

/* An object key: 1..1024 bytes of valid UTF-8, no NUL, no control bytes,
 * no leading '/', no empty ("//") or "." / ".." path components, so no key
 * can name a path outside the directory it is stored under. */
int si_key_check(const char *key, size_t len, si_error_t *err);

/* An S3 bucket name: 3..63 of [a-z0-9.-], starting and ending alphanumeric. */
int si_bucket_check(const char *bucket, size_t len, si_error_t *err);

/* A dataset name: 1..128 of [A-Za-z0-9._-], not starting with '.' or '-'. */
int si_dataset_check(const char *name, si_error_t *err);

/* Strict decimal parses: the whole string, no sign, no overflow. */
int si_parse_u64(const char *s, uint64_t *out);
int si_parse_i64(const char *s, int64_t *out);
/* A permission mode in octal, "0" to "0777" ("640", "0640"): only octal
 * digits, no sign or space; -1 otherwise. */
int si_parse_mode(const char *s, unsigned *mode);

/* An ISO 8601 duration as the WLCG Tape REST API's diskLifetime: "P1D",
 * "PT12H", "P1DT2H30M", "PT90S", "P2W" (days of 24 h; no years or months,
 * whose length varies). Whole seconds, at least 1; -1 with the reason. */
int si_parse_iso8601_duration(const char *s, int64_t *seconds, si_error_t *err);

/* "12.3 GB" in powers of 1000 (tape vendors' and drives' units). */
char *si_format_bytes(uint64_t bytes, char *buf, size_t size);
/* "1h02m03s", "4.2s" */
char *si_format_duration(double seconds, char *buf, size_t size);

/* Lower-case hex of len bytes into out (2*len+1 bytes). */
void si_hex(const unsigned char *bytes, size_t len, char *out);

/* FNV-1a over len bytes, continuing from h (SI_FNV1A_START to begin): a
 * table slot's hash, not a checksum. */
#define SI_FNV1A_START 2166136261u
uint32_t si_fnv1a(uint32_t h, const void *bytes, size_t len);
/* The value of a hex digit (either case), or -1. */
int si_hex_digit(char c);
/* The bytes that the 2*len hex digits (either case) at hex stand for, into
 * out (len bytes). Returns 0, or -1 at a character that is not a hex digit
 * (out then partly written). */
int si_unhex(const char *hex, size_t len, unsigned char *out);
/* Whether the len bytes at s are all lower-case hex digits. */
bool si_is_lower_hex(const char *s, size_t len);
/* How many digits v has in base (2..36): 1 for 0. */
unsigned si_digits(uint64_t v, unsigned base);

#endif
