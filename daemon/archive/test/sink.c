#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/checksum.h"
#include "daemon/archive/test/sink.h"

typedef struct {
    test_sink_t *s;
    int64_t id;
    unsigned char *buf;
    uint64_t at, size;
    char expected[SI_CHECKSUM_TEXT_MAX];
} session_t;

void test_sink_init(test_sink_t *s)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
}

void test_sink_reset(test_sink_t *s)
{
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i <= TEST_SINK_MAX; i++) {
        free(s->got[i]);
        s->got[i] = NULL;
        s->begins[i] = s->ok[i] = s->failed[i] = 0;
        s->why[i][0] = '\0';
    }
    s->nbegun = s->done = s->fd_writes = s->open = s->max_open = s->hold_open = 0;
    s->commits_refused = s->landed = 0;
    s->rooms = false;
    pthread_mutex_unlock(&s->mu);
}

void test_sink_free(test_sink_t *s)
{
    test_sink_reset(s);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
}

static int s_begin(void *arg, const archive_item_t *item, void **session, si_error_t *err)
{
    test_sink_t *s = arg;
    if (item->object_id < 1 || item->object_id > TEST_SINK_MAX)
        return si_errprintf(err, "object id %lld out of the test's range",
                            (long long)item->object_id);
    session_t *ss = calloc(1, sizeof(*ss));
    if (!ss || !(ss->buf = malloc(item->size ? item->size : 1))) {
        free(ss);
        return si_errprintf(err, "out of memory");
    }
    ss->s = s;
    ss->id = item->object_id;
    ss->size = item->size;
    snprintf(ss->expected, sizeof(ss->expected), "%s", item->checksum);
    pthread_mutex_lock(&s->mu);
    if (s->begins[ss->id]++ == 0 && s->nbegun < TEST_SINK_MAX)
        s->first_begun[s->nbegun++] = ss->id;
    if (++s->open > s->max_open)
        s->max_open = s->open;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    *session = ss;
    return 0;
}

/* With hold_open, a session's first bytes wait until that many sessions
 * have been open at once (or 5 s passed): what a test of parallel copies
 * needs. */
static void hold(test_sink_t *s, const session_t *ss)
{
    if (ss->at > 0)
        return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&s->mu);
    while (s->hold_open > 0 && s->max_open < s->hold_open &&
           pthread_cond_timedwait(&s->cv, &s->mu, &until) == 0)
        ;
    pthread_mutex_unlock(&s->mu);
}

static void session_ended(test_sink_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->open--;
    pthread_mutex_unlock(&s->mu);
}

static int s_write(void *arg, void *session, const void *buf, size_t len, si_error_t *err)
{
    session_t *ss = session;
    hold(arg, ss);
    if (ss->at + len > ss->size)
        return si_errnoprintf(err, EBADMSG, "more bytes than the object's %llu",
                              (unsigned long long)ss->size);
    memcpy(ss->buf + ss->at, buf, len);
    ss->at += len;
    return 0;
}

static int s_write_fd(void *arg, void *session, int fd, uint64_t off, uint64_t len,
                      si_error_t *err)
{
    session_t *ss = session;
    test_sink_t *s = arg;
    hold(s, ss);
    pthread_mutex_lock(&s->mu);
    s->fd_writes++;
    pthread_mutex_unlock(&s->mu);
    if (ss->at + len > ss->size)
        return si_errnoprintf(err, EBADMSG, "more bytes than the object's size");
    ssize_t n = pread(fd, ss->buf + ss->at, (size_t)len, (off_t)off);
    if (n != (ssize_t)len)
        return si_errnoprintf(err, EBADMSG, "the file ended early");
    ss->at += len;
    return 0;
}

static void *s_room(void *arg, void *session, size_t *len)
{
    test_sink_t *s = arg;
    session_t *ss = session;
    pthread_mutex_lock(&s->mu);
    bool rooms = s->rooms;
    pthread_mutex_unlock(&s->mu);
    *len = rooms ? (size_t)(ss->size - ss->at) : 0;
    return rooms ? ss->buf + ss->at : NULL;
}

static int s_landed(void *arg, void *session, size_t len, si_error_t *err)
{
    test_sink_t *s = arg;
    session_t *ss = session;
    hold(s, ss);
    if (ss->at + len > ss->size)
        return si_errnoprintf(err, EBADMSG, "more bytes than the object's size");
    pthread_mutex_lock(&s->mu);
    s->landed++;
    pthread_mutex_unlock(&s->mu);
    ss->at += len;
    return 0;
}

static int s_commit(void *arg, void *session, si_error_t *err)
{
    test_sink_t *s = arg;
    session_t *ss = session;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    bool refuse = s->commits_refused > 0;
    if (refuse)
        s->commits_refused--;
    pthread_mutex_unlock(&s->mu);
    if (refuse) {
        rc = si_errnoprintf(err, EBADMSG, "checksum mismatch (test)");
    } else if (ss->at != ss->size) {
        rc = si_errnoprintf(err, EBADMSG, "size mismatch: expected %llu, received %llu",
                            (unsigned long long)ss->size, (unsigned long long)ss->at);
    } else if (ss->expected[0]) {
        char algo[8] = "";
        memcpy(algo, ss->expected, (size_t)(strchr(ss->expected, ':') - ss->expected));
        si_checksum_t *c = si_checksum_new(algo, NULL);
        char got[SI_CHECKSUM_TEXT_MAX];
        si_checksum_update(c, ss->buf, ss->size);
        si_checksum_final(c, got);
        si_checksum_free(c);
        if (strcmp(got, ss->expected) != 0)
            rc = si_errnoprintf(err, EBADMSG, "checksum mismatch: expected %s, got %s",
                                ss->expected, got);
    }
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        free(s->got[ss->id]);
        s->got[ss->id] = ss->buf;
        s->size[ss->id] = ss->size;
        pthread_mutex_unlock(&s->mu);
    } else {
        free(ss->buf);
    }
    free(ss);
    session_ended(s);
    return rc;
}

static void s_abort(void *arg, void *session)
{
    session_t *ss = session;
    free(ss->buf);
    free(ss);
    session_ended(arg);
}

static void s_done(void *arg, int64_t id, bool okay, const char *why)
{
    test_sink_t *s = arg;
    pthread_mutex_lock(&s->mu);
    if (id >= 1 && id <= TEST_SINK_MAX) {
        if (okay)
            s->ok[id]++;
        else
            s->failed[id]++;
        snprintf(s->why[id], sizeof(s->why[id]), "%s", why ? why : "");
    }
    s->done++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

archive_recall_cb_t test_sink_callbacks(test_sink_t *s, bool with_fd)
{
    archive_recall_cb_t cb = {s_begin, s_write, s_commit, s_abort, NULL, s_done, s,
                              with_fd ? s_write_fd : NULL, s_room, s_landed};
    return cb;
}

bool test_sink_wait(test_sink_t *s, int n, double timeout_s)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)timeout_s;
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    while (s->done < n && rc == 0)
        rc = pthread_cond_timedwait(&s->cv, &s->mu, &until);
    bool reached = s->done >= n;
    pthread_mutex_unlock(&s->mu);
    return reached;
}
