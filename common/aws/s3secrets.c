#include "config.h"
#include "common/aws/s3secrets.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/text.h"

typedef struct {
    char access_key[SI_SIGV4_ACCESS_KEY_MAX + 1];
    char secret[SI_SIGV4_SECRET_MAX + 1];
    uint32_t uid, gid;
    unsigned line;
} entry_t;

struct si_secrets {
    entry_t *entries; /* sorted by access key */
    size_t count;
};

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const entry_t *)a)->access_key, ((const entry_t *)b)->access_key);
}

static bool printable_token(const char *s, const char *forbidden)
{
    for (; *s; s++)
        if (*s <= ' ' || *s > '~' || strchr(forbidden, *s))
            return false;
    return true;
}

static int parse_id(const char *text, const char *what, uint32_t *out, si_error_t *err)
{
    uint64_t v;
    if (si_parse_u64(text, &v) < 0 || v >= UINT32_MAX)
        return si_errprintf(err, "%s '%.20s' is not a number below %u", what, text, UINT32_MAX);
    *out = (uint32_t)v;
    return 0;
}

/* One non-comment line into e; UID and GID may be left out when ids_optional
 * (a client's file: the key pair it signs with). */
static int parse_line(char *line, bool ids_optional, entry_t *e, si_error_t *err)
{
    char *save = NULL;
    char *field[5];
    size_t n = 0;
    for (char *tok = strtok_r(line, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        if (n == 4)
            return si_errprintf(err, "more than 4 fields (ACCESS_KEY SECRET UID GID)");
        field[n++] = tok;
    }
    if (n != 4 && !(ids_optional && n == 2))
        return si_errprintf(err, "%zu field%s, expected %s", n, n == 1 ? "" : "s",
                            ids_optional ? "2 or 4: ACCESS_KEY SECRET [UID GID]"
                                         : "4: ACCESS_KEY SECRET UID GID");
    size_t klen = strlen(field[0]), slen = strlen(field[1]);
    if (klen > SI_SIGV4_ACCESS_KEY_MAX || !printable_token(field[0], "/,="))
        return si_errprintf(err, "access key must be 1 to %d printable characters without "
                            "'/', ',' or '='", SI_SIGV4_ACCESS_KEY_MAX);
    if (slen > SI_SIGV4_SECRET_MAX || !printable_token(field[1], ""))
        return si_errprintf(err, "secret of '%s' must be 1 to %d printable characters",
                            field[0], SI_SIGV4_SECRET_MAX);
    if (n == 4 && (parse_id(field[2], "UID", &e->uid, err) < 0 ||
                   parse_id(field[3], "GID", &e->gid, err) < 0))
        return -1;
    memcpy(e->access_key, field[0], klen + 1);
    memcpy(e->secret, field[1], slen + 1);
    return 0;
}

static void wipe(entry_t *entries, size_t count)
{
    if (entries) {
        OPENSSL_cleanse(entries, count * sizeof(*entries));
        free(entries);
    }
}

static void forget_line(char *line, size_t cap)
{
    if (line) {
        OPENSSL_cleanse(line, cap);
        free(line);
    }
}

static si_secrets_t *load(const char *path, bool ids_optional, si_error_t *err)
{
    char *line = NULL;
    size_t line_cap = 0;
    entry_t *entries = NULL;
    size_t count = 0, cap = 0;
    unsigned lineno = 0;
    FILE *f = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        si_errprintf(err, "%s: cannot open the S3 secrets file: %s", path, strerror(errno));
        return NULL;
    }
    if (si_check_private(fd, path, "the S3 secrets", err) < 0) {
        close(fd);
        return NULL;
    }
    if (!(f = fdopen(fd, "r"))) {
        si_errprintf(err, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    ssize_t got;
    while ((got = getline(&line, &line_cap, f)) >= 0) {
        size_t len = (size_t)got;
        lineno++;
        if (len > SI_SECRETS_LINE_MAX) {
            si_errprintf(err, "%s:%u: line longer than %d bytes", path, lineno,
                         SI_SECRETS_LINE_MAX);
            goto error;
        }
        if (memchr(line, '\0', len)) {
            si_errprintf(err, "%s:%u: NUL byte in the line", path, lineno);
            goto error;
        }
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        const char *p = line + strspn(line, " \t");
        if (*p == '\0' || *p == '#')
            continue;
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            entry_t *n = calloc(ncap, sizeof(*n));
            if (!n) {
                si_errprintf(err, "%s: out of memory", path);
                goto error;
            }
            if (count)
                memcpy(n, entries, count * sizeof(*n));
            wipe(entries, count);
            entries = n;
            cap = ncap;
        }
        if (parse_line(line, ids_optional, &entries[count], err) < 0) {
            si_errprefix(err, "%s:%u", path, lineno);
            goto error;
        }
        entries[count++].line = lineno;
    }
    if (ferror(f)) {
        si_errprintf(err, "%s: read error", path);
        goto error;
    }
    forget_line(line, line_cap);
    line = NULL;
    fclose(f);
    f = NULL;
    if (count)
        qsort(entries, count, sizeof(*entries), entry_cmp);
    for (size_t i = 1; i < count; i++)
        if (strcmp(entries[i].access_key, entries[i - 1].access_key) == 0) {
            unsigned a = entries[i - 1].line, b = entries[i].line;
            si_errprintf(err, "%s:%u: access key '%s' repeats line %u", path, a > b ? a : b,
                         entries[i].access_key, a < b ? a : b);
            goto error;
        }
    si_secrets_t *s = calloc(1, sizeof(*s));
    if (!s) {
        si_errprintf(err, "%s: out of memory", path);
        goto error;
    }
    s->entries = entries;
    s->count = count;
    return s;
error:
    forget_line(line, line_cap);
    if (f)
        fclose(f);
    wipe(entries, cap);
    return NULL;
}

si_secrets_t *si_secrets_load(const char *path, si_error_t *err)
{
    return load(path, false, err);
}

int si_secrets_load_client(const char *path, si_secrets_client_t *out, si_error_t *err)
{
    si_secrets_t *s = load(path, true, err);
    if (!s)
        return -1;
    int rc = 0;
    if (s->count == 0) {
        rc = si_errprintf(err, "%s: no ACCESS_KEY SECRET line in the S3 credentials file", path);
    } else {
        const entry_t *first = &s->entries[0];
        for (size_t i = 1; i < s->count; i++)
            if (s->entries[i].line < first->line)
                first = &s->entries[i];
        memcpy(out->access_key, first->access_key, sizeof(out->access_key));
        memcpy(out->secret, first->secret, sizeof(out->secret));
    }
    si_secrets_free(s);
    return rc;
}

size_t si_secrets_count(const si_secrets_t *s)
{
    return s->count;
}

int si_secrets_lookup(void *secrets, const char *access_key, si_sigv4_credential_t *cred)
{
    const si_secrets_t *s = secrets;
    entry_t key;
    /* an empty file has no table at all (bsearch must not see NULL) */
    if (s->count == 0 || strlen(access_key) > SI_SIGV4_ACCESS_KEY_MAX)
        return -1;
    snprintf(key.access_key, sizeof(key.access_key), "%s", access_key);
    const entry_t *e = bsearch(&key, s->entries, s->count, sizeof(*e), entry_cmp);
    if (!e)
        return -1;
    memcpy(cred->secret, e->secret, sizeof(cred->secret));
    cred->uid = e->uid;
    cred->gid = e->gid;
    return 0;
}

void si_secrets_free(si_secrets_t *s)
{
    if (!s)
        return;
    wipe(s->entries, s->count);
    free(s);
}

/* ---- session credentials ---------------------------------------------------- */

#define SESSION_VERSION 1
/* version, uid, gid, expires, nonce, mac: 1 + 4 + 4 + 8 + 7 + 16 = 40 bytes,
 * 64 characters of base32 */
#define SESSION_RAW_LEN 40
#define SESSION_MAC_LEN 16
static const char base32_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

struct si_session_keys {
    unsigned char master[SI_SESSION_MASTER_LEN];
};

static void base32_encode(const unsigned char *in, size_t len, char *out)
{
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        acc = (acc << 8) | in[i];
        bits += 8;
        while (bits >= 5) {
            *out++ = base32_alphabet[(acc >> (bits - 5)) & 31];
            bits -= 5;
        }
    }
    if (bits)
        *out++ = base32_alphabet[(acc << (5 - bits)) & 31];
    *out = '\0';
}

/* Exactly len bytes from 8 * len / 5 characters; -1 on any other text. */
static int base32_decode(const char *in, unsigned char *out, size_t len)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (; *in; in++) {
        const char *p = strchr(base32_alphabet, *in);
        if (!p || n == len)
            return -1;
        acc = (acc << 5) | (uint32_t)(p - base32_alphabet);
        bits += 5;
        if (bits >= 8) {
            out[n++] = (unsigned char)(acc >> (bits - 8));
            bits -= 8;
        }
    }
    return n == len && (acc & ((1u << bits) - 1)) == 0 ? 0 : -1;
}

static void put_be(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

static uint64_t get_be(const unsigned char *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Domain-separated MACs: one for the access key, one for its secret. */
static void session_mac(const si_session_keys_t *k, const char *purpose, const void *data,
                        size_t len, unsigned char out[32])
{
    unsigned char msg[64 + SI_SESSION_ACCESS_KEY_LEN];
    size_t plen = strlen(purpose);
    memcpy(msg, purpose, plen);
    memcpy(msg + plen, data, len);
    si_hmac_sha256(k->master, sizeof(k->master), msg, plen + len, out);
    OPENSSL_cleanse(msg, sizeof(msg));
}

static void session_secret(const si_session_keys_t *k, const char *access_key,
                           char out[SI_SESSION_SECRET_LEN + 1])
{
    unsigned char mac[32];
    session_mac(k, "stagein-session-secret\n", access_key, strlen(access_key), mac);
    si_hex(mac, sizeof(mac), out);
    OPENSSL_cleanse(mac, sizeof(mac));
}

static int read_master(int fd, const char *path, unsigned char *master, si_error_t *err)
{
    struct stat st;
    if (si_check_private(fd, path, "the session key", err) < 0)
        return -1;
    if (fstat(fd, &st) < 0)
        return si_errprintf(err, "%s: %s", path, strerror(errno));
    if (st.st_size != SI_SESSION_MASTER_LEN)
        return si_errprintf(err, "%s: holds %jd bytes, not the %d of a session key (remove it "
                            "to make a new one: credentials handed out so far stop working)",
                            path, (intmax_t)st.st_size, SI_SESSION_MASTER_LEN);
    if (pread(fd, master, SI_SESSION_MASTER_LEN, 0) != SI_SESSION_MASTER_LEN)
        return si_errprintf(err, "%s: %s", path, strerror(errno));
    return 0;
}

/* A new master key, written under a temporary name and linked into place,
 * so that a crash leaves either no key or a whole one. */
static int create_master(const char *path, unsigned char *master, si_error_t *err)
{
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof(tmp), "%s.new.%ld", path, (long)getpid()) >= sizeof(tmp))
        return si_errprintf(err, "%s: path too long", path);
    if (RAND_bytes(master, SI_SESSION_MASTER_LEN) != 1)
        return si_errprintf(err, "%s: no random bytes for a session key", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return si_errprintf(err, "%s: %s", tmp, strerror(errno));
    bool ok = write(fd, master, SI_SESSION_MASTER_LEN) == SI_SESSION_MASTER_LEN &&
              fsync(fd) == 0;
    int saved = errno;
    close(fd);
    if (!ok || link(tmp, path) < 0) {
        if (ok)
            saved = errno;
        unlink(tmp);
        if (ok && saved == EEXIST)
            return 1; /* another process made one first: read that one */
        return si_errprintf(err, "%s: %s", path, strerror(saved));
    }
    unlink(tmp);
    return 0;
}

si_session_keys_t *si_session_keys_open(const char *path, si_error_t *err)
{
    si_session_keys_t *k = calloc(1, sizeof(*k));
    if (!k) {
        si_errprintf(err, "out of memory");
        return NULL;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
            int rc = read_master(fd, path, k->master, err);
            close(fd);
            if (rc < 0)
                break;
            return k;
        }
        if (errno != ENOENT) {
            si_errprintf(err, "%s: cannot open the session key: %s", path, strerror(errno));
            break;
        }
        int rc = create_master(path, k->master, err);
        if (rc == 0)
            return k;
        if (rc < 0)
            break;
    }
    si_session_keys_free(k);
    return NULL;
}

void si_session_keys_free(si_session_keys_t *k)
{
    if (k) {
        OPENSSL_cleanse(k, sizeof(*k));
        free(k);
    }
}

int si_session_mint(const si_session_keys_t *k, uint32_t uid, uint32_t gid, int64_t expires,
                    si_session_credential_t *out, si_error_t *err)
{
    unsigned char raw[SESSION_RAW_LEN], mac[32];
    size_t body = SESSION_RAW_LEN - SESSION_MAC_LEN;
    if (expires < 0)
        return si_errprintf(err, "a session credential cannot expire before 1970");
    raw[0] = SESSION_VERSION;
    put_be(raw + 1, uid, 4);
    put_be(raw + 5, gid, 4);
    put_be(raw + 9, (uint64_t)expires, 8);
    if (RAND_bytes(raw + 17, 7) != 1)
        return si_errprintf(err, "no random bytes for a session credential");
    session_mac(k, "stagein-session-key\n", raw, body, mac);
    memcpy(raw + body, mac, SESSION_MAC_LEN);
    memcpy(out->access_key, SI_SESSION_PREFIX, strlen(SI_SESSION_PREFIX));
    base32_encode(raw, sizeof(raw), out->access_key + strlen(SI_SESSION_PREFIX));
    session_secret(k, out->access_key, out->secret);
    out->uid = uid;
    out->gid = gid;
    out->expires = expires;
    return 0;
}

int si_session_check(const si_session_keys_t *k, const char *access_key, int64_t now,
                     si_sigv4_credential_t *cred)
{
    unsigned char raw[SESSION_RAW_LEN], mac[32];
    size_t body = SESSION_RAW_LEN - SESSION_MAC_LEN;
    size_t plen = strlen(SI_SESSION_PREFIX);
    if (!k || strlen(access_key) != SI_SESSION_ACCESS_KEY_LEN ||
        strncmp(access_key, SI_SESSION_PREFIX, plen) != 0 ||
        base32_decode(access_key + plen, raw, sizeof(raw)) < 0 || raw[0] != SESSION_VERSION)
        return -1;
    session_mac(k, "stagein-session-key\n", raw, body, mac);
    if (CRYPTO_memcmp(mac, raw + body, SESSION_MAC_LEN) != 0)
        return -1;
    if ((int64_t)get_be(raw + 9, 8) <= now)
        return -1;
    cred->uid = (uint32_t)get_be(raw + 1, 4);
    cred->gid = (uint32_t)get_be(raw + 5, 4);
    char secret[SI_SESSION_SECRET_LEN + 1];
    session_secret(k, access_key, secret);
    memcpy(cred->secret, secret, sizeof(secret));
    OPENSSL_cleanse(secret, sizeof(secret));
    return 0;
}

int si_session_lookup(void *keys, const char *access_key, si_sigv4_credential_t *cred)
{
    return si_session_check(keys, access_key, (int64_t)time(NULL), cred);
}
