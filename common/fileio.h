/* File-to-file copies and hashing of file ranges: the one implementation of
 * copy_file_range with its fallback (the cache writer, the hsm backend). */
#ifndef SI_FILEIO_H
#define SI_FILEIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/checksum.h"
#include "common/error.h"

/* Copies len bytes of in_fd from in_off to out_fd at out_off, in the kernel
 * (copy_file_range: no user-space copy, a reflink where the file system can)
 * or, where it refuses (another file system type, a pipe), through a bounce
 * buffer with pread/pwrite. Neither file's own offset moves. Returns the
 * bytes copied, fewer than len only when the input ended first, or -1 with
 * errno and err (which names neither file: the caller adds that). */
int64_t si_copy_range(int in_fd, uint64_t in_off, int out_fd, uint64_t out_off, uint64_t len,
                      si_error_t *err);

/* Feeds bytes [off, off + len) of fd into c, reading through buf. -1 with
 * errno (EIO for a file shorter than that) and err. */
int si_checksum_fd(si_checksum_t *c, int fd, uint64_t off, uint64_t len, void *buf,
                   size_t bufsize, si_error_t *err);

/* Opens path read-only for size bytes from offset, positioned there: a
 * file of its own (offset 0) must hold exactly size bytes, a range of a
 * larger file (offset > 0: a cache segment) at least offset + size; a file
 * that is not regular (a pipe) is left to its reader. The descriptor, or
 * -1 with errno and err naming path and what did not fit. */
int si_open_range(const char *path, uint64_t offset, uint64_t size, si_error_t *err);

/* 0 when fd (opened from path) is a regular file that only its owner may
 * read or write; else -1 with err naming the file, what it holds (e.g.
 * "the S3 secrets"), its mode and the fix. */
int si_check_private(int fd, const char *path, const char *what, si_error_t *err);

/* Writes all len bytes of data to fd (at off with si_pwrite_all, the file's
 * offset unmoved), resuming after signals and short writes. 0, or -1 with
 * errno. */
int si_write_all(int fd, const void *data, size_t len);
int si_pwrite_all(int fd, const void *data, size_t len, uint64_t off);

/* A whole small file (at most max bytes), NUL-terminated, malloc'd; *len
 * its length. With secret, a file that group or others may read or write
 * is refused, naming the mode and the fix. err names the file. */
char *si_read_file(const char *path, size_t max, bool secret, size_t *len, si_error_t *err);

#endif
