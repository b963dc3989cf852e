/* A recall sink for the backends' unit tests: each object's bytes in
 * memory, size and checksum verified at commit as the cache does (EBADMSG
 * on a mismatch), outcomes and the order of first begins recorded. */
#ifndef STAGEIN_ARCHIVE_TEST_SINK_H
#define STAGEIN_ARCHIVE_TEST_SINK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/archive/backend.h"

#define TEST_SINK_MAX 64

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t size[TEST_SINK_MAX + 1];
    unsigned char *got[TEST_SINK_MAX + 1];     /* the committed bytes */
    int begins[TEST_SINK_MAX + 1], ok[TEST_SINK_MAX + 1], failed[TEST_SINK_MAX + 1];
    char why[TEST_SINK_MAX + 1][600];
    int64_t first_begun[TEST_SINK_MAX];        /* object ids in the order they began */
    int nbegun;
    int done;
    int fd_writes;                             /* write_fd calls */
    int open, max_open;                        /* sessions begun, not yet ended */
    int hold_open;  /* > 0: a session's first bytes wait (5 s at most) until max_open reaches it */
    int commits_refused;  /* commits still to refuse with EBADMSG, as a checksum mismatch */
    bool rooms;           /* offers each session's memory to the backend (room) */
    int landed;           /* landed calls: bytes read straight into that memory */
} test_sink_t;

void test_sink_init(test_sink_t *s);
void test_sink_reset(test_sink_t *s);
void test_sink_free(test_sink_t *s);
/* The callbacks; with_fd adds write_fd. */
archive_recall_cb_t test_sink_callbacks(test_sink_t *s, bool with_fd);
/* Waits until n outcomes were reported (false after timeout_s). */
bool test_sink_wait(test_sink_t *s, int n, double timeout_s);

#endif
