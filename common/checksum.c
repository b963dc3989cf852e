#include "config.h"
#include "common/checksum.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/thread.h"

struct si_checksum {
    EVP_MD_CTX *ctx;
    char algorithm[8];
};

si_checksum_t *si_checksum_new(const char *algorithm, si_error_t *err)
{
    const EVP_MD *md;
    if (strcmp(algorithm, "sha256") == 0)
        md = EVP_sha256();
    else if (strcmp(algorithm, "md5") == 0)
        md = EVP_md5();
    else {
        si_errprintf(err, "unknown checksum algorithm '%s' (known: sha256, md5)", algorithm);
        return NULL;
    }
    si_checksum_t *c = calloc(1, sizeof(*c));
    if (!c || !(c->ctx = EVP_MD_CTX_new()) || EVP_DigestInit_ex(c->ctx, md, NULL) != 1) {
        si_checksum_free(c);
        si_errprintf(err, "cannot initialise %s digest", algorithm);
        return NULL;
    }
    snprintf(c->algorithm, sizeof(c->algorithm), "%s", algorithm);
    return c;
}

void si_checksum_update(si_checksum_t *c, const void *data, size_t len)
{
    EVP_DigestUpdate(c->ctx, data, len);
}

void si_checksum_final(si_checksum_t *c, char out[SI_CHECKSUM_TEXT_MAX])
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(c->ctx, digest, &len);
    size_t prefix = (size_t)snprintf(out, SI_CHECKSUM_TEXT_MAX, "%s:", c->algorithm);
    si_hex(digest, len, out + prefix);
}

void si_checksum_free(si_checksum_t *c)
{
    if (!c)
        return;
    EVP_MD_CTX_free(c->ctx);
    free(c);
}

bool si_checksum_text_valid(const char *text)
{
    size_t hexlen;
    const char *hex;
    if (strncmp(text, "sha256:", 7) == 0) {
        hex = text + 7;
        hexlen = 64;
    } else if (strncmp(text, "md5:", 4) == 0) {
        hex = text + 4;
        hexlen = 32;
    } else {
        return false;
    }
    return strlen(hex) == hexlen && si_is_lower_hex(hex, hexlen);
}

/* ---- on a thread of its own ------------------------------------------------- */

#define ASYNC_BUFFERS 4
#define ASYNC_BUFFER_SIZE (1u << 20)

struct si_checksum_async {
    si_checksum_t *sum;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    unsigned char *buf[ASYNC_BUFFERS];
    size_t len[ASYNC_BUFFERS];
    unsigned queue[ASYNC_BUFFERS], queue_head, queued; /* full, in order */
    unsigned spare[ASYNC_BUFFERS], spares;             /* empty */
    unsigned current;                                  /* being filled */
    bool threaded;                                     /* else hashed on submit */
    bool ending;                                       /* no more bytes */
    bool discard;
};

static void *async_main(void *arg)
{
    si_checksum_async_t *a = arg;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (!a->queued && !a->ending)
            pthread_cond_wait(&a->cv, &a->lock);
        if (!a->queued)
            break;
        unsigned i = a->queue[a->queue_head];
        a->queue_head = (a->queue_head + 1) % ASYNC_BUFFERS;
        a->queued--;
        bool discard = a->discard;
        pthread_mutex_unlock(&a->lock);
        if (!discard)
            si_checksum_update(a->sum, a->buf[i], a->len[i]);
        pthread_mutex_lock(&a->lock);
        a->spare[a->spares++] = i;
        pthread_cond_broadcast(&a->cv);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

si_checksum_async_t *si_checksum_async_new(const char *algorithm, si_error_t *err)
{
    si_checksum_async_t *a = calloc(1, sizeof(*a));
    if (!a) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    if (!(a->sum = si_checksum_new(algorithm, err))) {
        free(a);
        return NULL;
    }
    for (unsigned i = 0; i < ASYNC_BUFFERS; i++) {
        if (!(a->buf[i] = malloc(ASYNC_BUFFER_SIZE))) {
            for (unsigned j = 0; j < i; j++)
                free(a->buf[j]);
            si_checksum_free(a->sum);
            free(a);
            si_errprintf(err, "out of memory");
            return NULL;
        }
        if (i > 0)
            a->spare[a->spares++] = i;
    }
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->cv, NULL);
    /* without a thread of its own, submit hashes on the caller's */
    a->threaded = pthread_create(&a->thread, NULL, async_main, a) == 0;
    return a;
}

/* The current buffer to the thread (or hashed here without one); the next
 * spare one becomes current. */
static void async_submit(si_checksum_async_t *a)
{
    unsigned i = a->current;
    if (!a->threaded) {
        si_checksum_update(a->sum, a->buf[i], a->len[i]);
        a->len[i] = 0;
        return;
    }
    pthread_mutex_lock(&a->lock);
    a->queue[(a->queue_head + a->queued) % ASYNC_BUFFERS] = i;
    a->queued++;
    pthread_cond_broadcast(&a->cv);
    while (!a->spares)
        pthread_cond_wait(&a->cv, &a->lock);
    a->current = a->spare[--a->spares];
    pthread_mutex_unlock(&a->lock);
    a->len[a->current] = 0;
}

void si_checksum_async_update(si_checksum_async_t *a, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (len > 0) {
        size_t room = ASYNC_BUFFER_SIZE - a->len[a->current];
        size_t n = len < room ? len : room;
        memcpy(a->buf[a->current] + a->len[a->current], p, n);
        a->len[a->current] += n;
        p += n;
        len -= n;
        if (a->len[a->current] == ASYNC_BUFFER_SIZE)
            async_submit(a);
    }
}

static void async_end(si_checksum_async_t *a)
{
    if (a->len[a->current])
        async_submit(a);
    if (!a->threaded)
        return;
    si_thread_stop(a->thread, &a->lock, &a->cv, &a->ending);
    a->threaded = false;
}

void si_checksum_async_final(si_checksum_async_t *a, char out[SI_CHECKSUM_TEXT_MAX])
{
    async_end(a);
    si_checksum_final(a->sum, out);
}

void si_checksum_async_free(si_checksum_async_t *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->lock);
    a->discard = true;
    pthread_mutex_unlock(&a->lock);
    a->len[a->current] = 0;
    async_end(a);
    for (unsigned i = 0; i < ASYNC_BUFFERS; i++)
        free(a->buf[i]);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->cv);
    si_checksum_free(a->sum);
    free(a);
}
