#include "config.h"
#include "daemon/ui/session.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "common/text.h"

typedef struct {
    char secret[UI_SECRET_LEN + 1];
    bool is_token;
    double expires;
    ui_user_t user;
} entry_t;

struct ui_sessions {
    pthread_mutex_t lock;
    double token_ttl, session_ttl;
    size_t max, count, per_user;
    entry_t *entries;
};

ui_sessions_t *ui_sessions_new(double token_ttl_s, double session_ttl_s, size_t max,
                               size_t per_user, si_error_t *err)
{
    ui_sessions_t *s = calloc(1, sizeof(*s));
    if (!s || max == 0 || !(s->entries = calloc(max, sizeof(*s->entries)))) {
        free(s);
        si_errprintf(err, max == 0 ? "at least one session" : "out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->lock, NULL);
    s->max = max;
    ui_sessions_set_limits(s, token_ttl_s, session_ttl_s, per_user);
    return s;
}

void ui_sessions_free(ui_sessions_t *s)
{
    if (!s)
        return;
    OPENSSL_cleanse(s->entries, s->max * sizeof(*s->entries));
    pthread_mutex_destroy(&s->lock);
    free(s->entries);
    free(s);
}

void ui_sessions_set_limits(ui_sessions_t *s, double token_ttl_s, double session_ttl_s,
                            size_t per_user)
{
    pthread_mutex_lock(&s->lock);
    s->token_ttl = token_ttl_s;
    s->session_ttl = session_ttl_s;
    s->per_user = per_user && per_user < s->max ? per_user : s->max;
    pthread_mutex_unlock(&s->lock);
}

static void drop(ui_sessions_t *s, size_t i)
{
    s->entries[i] = s->entries[--s->count];
    OPENSSL_cleanse(&s->entries[s->count], sizeof(s->entries[0]));
}

static void drop_expired(ui_sessions_t *s, double now)
{
    for (size_t i = 0; i < s->count;)
        if (s->entries[i].expires <= now)
            drop(s, i);
        else
            i++;
}

/* The entry that expires first (of uid, or of anyone when !of_uid); -1 if none. */
static ssize_t first_to_expire(const ui_sessions_t *s, bool of_uid, uid_t uid)
{
    ssize_t first = -1;
    for (size_t i = 0; i < s->count; i++)
        if ((!of_uid || s->entries[i].user.uid == uid) &&
            (first < 0 || s->entries[i].expires < s->entries[first].expires))
            first = (ssize_t)i;
    return first;
}

static size_t count_of(const ui_sessions_t *s, uid_t uid)
{
    size_t n = 0;
    for (size_t i = 0; i < s->count; i++)
        n += s->entries[i].user.uid == uid;
    return n;
}

/* A slot for uid's new entry: past its bound, its own entry that expires
 * first goes; else a free one, else anyone's that expires first. */
static entry_t *make_room(ui_sessions_t *s, uid_t uid, double now)
{
    drop_expired(s, now);
    while (count_of(s, uid) >= s->per_user)
        drop(s, (size_t)first_to_expire(s, true, uid));
    if (s->count == s->max)
        drop(s, (size_t)first_to_expire(s, false, 0));
    return &s->entries[s->count++];
}

size_t ui_sessions_count(ui_sessions_t *s, uid_t uid, double now)
{
    pthread_mutex_lock(&s->lock);
    drop_expired(s, now);
    size_t n = count_of(s, uid);
    pthread_mutex_unlock(&s->lock);
    return n;
}

static int add(ui_sessions_t *s, bool is_token, const ui_user_t *user, double now,
               char out[UI_SECRET_LEN + 1], si_error_t *err)
{
    unsigned char raw[UI_SECRET_LEN / 2];
    if (RAND_bytes(raw, sizeof(raw)) != 1)
        return si_errprintf(err, "no random bytes for a session secret");
    si_hex(raw, sizeof(raw), out);
    OPENSSL_cleanse(raw, sizeof(raw));
    pthread_mutex_lock(&s->lock);
    entry_t *e = make_room(s, user->uid, now);
    memcpy(e->secret, out, UI_SECRET_LEN + 1);
    e->is_token = is_token;
    e->expires = now + (is_token ? s->token_ttl : s->session_ttl);
    e->user = *user;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int ui_sessions_token(ui_sessions_t *s, const ui_user_t *user, double now,
                      char token[UI_SECRET_LEN + 1], si_error_t *err)
{
    return add(s, true, user, now, token, err);
}

/* The live entry of that kind with that secret (compared in constant time),
 * or -1; expired entries are dropped first. */
static ssize_t find(ui_sessions_t *s, const char *secret, bool is_token, double now)
{
    drop_expired(s, now);
    if (!secret || strlen(secret) != UI_SECRET_LEN)
        return -1;
    for (size_t i = 0; i < s->count; i++)
        if (s->entries[i].is_token == is_token &&
            CRYPTO_memcmp(s->entries[i].secret, secret, UI_SECRET_LEN) == 0)
            return (ssize_t)i;
    return -1;
}

int ui_sessions_redeem(ui_sessions_t *s, const char *token, double now,
                       char session[UI_SECRET_LEN + 1], ui_user_t *user, si_error_t *err)
{
    pthread_mutex_lock(&s->lock);
    ssize_t i = find(s, token, true, now);
    if (i >= 0) {
        *user = s->entries[i].user;
        drop(s, (size_t)i);
    }
    pthread_mutex_unlock(&s->lock);
    if (i < 0)
        return si_errprintf(err, "the login token is unknown, already used or expired: run "
                                 "`stagein ui` for a fresh link");
    return add(s, false, user, now, session, err);
}

bool ui_sessions_lookup(ui_sessions_t *s, const char *session, double now, ui_user_t *user)
{
    pthread_mutex_lock(&s->lock);
    ssize_t i = find(s, session, false, now);
    if (i >= 0)
        *user = s->entries[i].user;
    pthread_mutex_unlock(&s->lock);
    return i >= 0;
}
