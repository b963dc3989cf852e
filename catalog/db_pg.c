/* The catalog driver's PostgreSQL engine (libpq): statements translated and
 * prepared on the server once, values sent as text with the bound types. */
#include "config.h"
#include "catalog/db_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PG_BOOL 16
#define PG_INT8 20
#define PG_INT2 21
#define PG_INT4 23
#define PG_OID 26
#define PG_FLOAT4 700
#define PG_FLOAT8 701
#define PG_NUMERIC 1700
#define PG_TEXT 25

static void mark_lost(db_t *db);
static void note_unavailable(db_t *db, const char *what);

static void note_result_error(db_t *db, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : NULL;
    if (!msg || !*msg)
        msg = PQerrorMessage(db->pg);
    snprintf(db->errmsg, sizeof(db->errmsg), "%s", msg);
    size_t n = strlen(db->errmsg);
    while (n && (db->errmsg[n - 1] == '\n' || db->errmsg[n - 1] == ' '))
        db->errmsg[--n] = '\0';
    if (!state)
        db->errclass = DB_ERR_OTHER;
    else if (strcmp(state, "23505") == 0)
        db->errclass = DB_ERR_UNIQUE;
    else if (strncmp(state, "23", 2) == 0)
        db->errclass = DB_ERR_CONSTRAINT;
    else if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
             strcmp(state, "55P03") == 0)
        db->errclass = DB_ERR_BUSY;
    else if (strcmp(state, "25006") == 0)
        db->errclass = DB_ERR_READONLY;
    else
        db->errclass = DB_ERR_OTHER;
    /* the server went away (a restart, a crash, a network cut): libpq says
     * so by the connection's status, the server by 57P01-57P03 */
    if (PQstatus(db->pg) == CONNECTION_BAD || (state && strncmp(state, "57P0", 4) == 0)) {
        mark_lost(db);
        /* said as every later statement of the outage says it: since when,
         * and to retry */
        char why[DB_ERRMSG_MAX - 64];
        db->errmsg[strcspn(db->errmsg, "\n")] = '\0';
        snprintf(why, sizeof(why), "connection lost%s: %s",
                 db->in_transaction ? ", its transaction rolled back" : "", db->errmsg);
        note_unavailable(db, why);
    }
}

/* ---- reconnecting ------------------------------------------------------- */

#define RECONNECT_FIRST_MS 100
#define RECONNECT_MAX_MS 5000
#define RECONNECT_WAIT_MS 3000 /* the longest one attempt holds its caller */

static void mark_lost(db_t *db)
{
    if (db->pg_lost)
        return;
    __atomic_store_n(&db->pg_lost, true, __ATOMIC_RELAXED); /* db_available reads it */
    db->pg_lost_in_transaction = db->in_transaction;
    db->pg_backoff_ms = 0; /* the first attempt at once */
    clock_gettime(CLOCK_MONOTONIC, &db->pg_next_try);
    char why[256];
    snprintf(why, sizeof(why), "%s", PQerrorMessage(db->pg));
    why[strcspn(why, "\n")] = '\0';
    db_health_lost(db->health, why);
}

/* The statement at hand fails with DB_ERR_UNAVAILABLE and this reason. */
static void note_unavailable(db_t *db, const char *what)
{
    db_health_state_t hs;
    db_health_get(db->health, &hs);
    char since[40] = "";
    if (!hs.up) {
        struct tm tm;
        gmtime_r(&hs.down_since, &tm);
        strftime(since, sizeof(since), " since %Y-%m-%dT%H:%M:%SZ", &tm);
    }
    snprintf(db->errmsg, sizeof(db->errmsg), "catalog %s unreachable%s (%s): retry later",
             db->target, since, what);
    db->errclass = DB_ERR_UNAVAILABLE;
    errno = EAGAIN; /* callers that answer by errno say 503: retry */
}

/* What every session needs, at connect and at each reconnect. */
static int session_setup(db_t *db, si_error_t *err)
{
    /* Quiet NOTICEs (IF NOT EXISTS and the like) instead of stderr. */
    PQsetNoticeProcessor(db->pg, NULL, NULL);
    if (db_pg_exec(db, "SET client_min_messages = warning", err) < 0)
        return -1;
    if (db->readonly && db_pg_exec(db, "SET default_transaction_read_only = on", err) < 0)
        return -1;
    return 0;
}

static bool before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static long ms_between(const struct timespec *a, const struct timespec *b)
{
    return (b->tv_sec - a->tv_sec) * 1000L + (b->tv_nsec - a->tv_nsec) / 1000000L;
}

/* libpq's reset (the same parameters, the password file's as read at open)
 * without blocking longer than RECONNECT_WAIT_MS: a server host that does
 * not answer (a network cut) would hold the caller for connect_timeout. */
static bool reset_within(db_t *db, char *why, size_t size)
{
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    if (!PQresetStart(db->pg)) {
        snprintf(why, size, "%s", PQerrorMessage(db->pg));
        return false;
    }
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED) {
            snprintf(why, size, "%s", PQerrorMessage(db->pg));
            return false;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left = RECONNECT_WAIT_MS - ms_between(&start, &now);
        struct pollfd p = {.fd = PQsocket(db->pg),
                           .events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT};
        int ready = left > 0 ? poll(&p, 1, (int)left) : 0;
        if (ready == 0) {
            snprintf(why, size, "no answer within %d s", RECONNECT_WAIT_MS / 1000);
            return false;
        }
        if (ready < 0 && errno != EINTR) {
            snprintf(why, size, "poll: %s", strerror(errno));
            return false;
        }
        st = PQresetPoll(db->pg);
    }
    return true;
}

/* One attempt, unless the backoff says not yet. */
static bool reconnect(db_t *db)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (before(&now, &db->pg_next_try)) {
        note_unavailable(db, "waiting to reconnect");
        return false;
    }
    char why[256];
    si_error_t err;
    if (reset_within(db, why, sizeof(why))) {
        /* before session_setup, which runs statements */
        __atomic_store_n(&db->pg_lost, false, __ATOMIC_RELAXED);
        db->pg_generation++;
        if (session_setup(db, &err) == 0) {
            db_health_reconnected(db->health);
            return true;
        }
        __atomic_store_n(&db->pg_lost, true, __ATOMIC_RELAXED);
        snprintf(why, sizeof(why), "%s", err.text);
    }
    why[strcspn(why, "\n")] = '\0';
    db->pg_backoff_ms = db->pg_backoff_ms ? db->pg_backoff_ms * 2 : RECONNECT_FIRST_MS;
    if (db->pg_backoff_ms > RECONNECT_MAX_MS)
        db->pg_backoff_ms = RECONNECT_MAX_MS;
    db->pg_next_try = now;
    db->pg_next_try.tv_sec += db->pg_backoff_ms / 1000;
    db->pg_next_try.tv_nsec += (db->pg_backoff_ms % 1000) * 1000000L;
    if (db->pg_next_try.tv_nsec >= 1000000000L) {
        db->pg_next_try.tv_sec++;
        db->pg_next_try.tv_nsec -= 1000000000L;
    }
    db_health_reconnect_failed(db->health, why);
    note_unavailable(db, why);
    return false;
}

/* An idle session gets nothing from its server but its end (a FATAL
 * message, then EOF, often in two reads): a poll that finds nothing to read
 * is the common case, one system call. */
static bool idle_connection_gone(db_t *db)
{
    struct pollfd p = {.fd = PQsocket(db->pg), .events = POLLIN};
    for (int reads = 0; reads < 4; reads++) {
        if (p.fd < 0 || PQstatus(db->pg) == CONNECTION_BAD)
            return true;
        if (poll(&p, 1, 0) <= 0)
            return false;
        if (!PQconsumeInput(db->pg))
            return true;
    }
    return PQstatus(db->pg) == CONNECTION_BAD;
}

/* Whether a statement may be sent now. An idle connection learns of a
 * server restart only by reading, so it reads what is pending first
 * (idle_connection_gone): a statement outside a transaction then goes to a
 * new connection instead of failing on the dead one. Inside a transaction a
 * lost connection fails every statement until the caller rolls back. */
static bool pg_ready(db_t *db)
{
    if (db->pg_lost_in_transaction) {
        note_unavailable(db, "the connection was lost inside this transaction, which the "
                             "server rolled back");
        return false;
    }
    if (!db->pg_lost && !db->in_transaction && idle_connection_gone(db))
        mark_lost(db);
    return !db->pg_lost || reconnect(db);
}

void db_pg_transaction_ended(db_t *db)
{
    db->pg_lost_in_transaction = false;
}

/* The password: the first line of a file only its owner can read. */
static int read_password_file(const char *path, char *buf, size_t size, si_error_t *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return si_errprintf(err, "catalog.password_file %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return si_errprintf(err, "catalog.password_file %s: not a regular file", path);
    }
    if (st.st_mode & 077) {
        close(fd);
        return si_errprintf(err, "catalog.password_file %s: mode %04o lets others read it; "
                            "chmod 600 it", path, (unsigned)(st.st_mode & 07777));
    }
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0)
        return si_errprintf(err, "catalog.password_file %s: %s", path, strerror(errno));
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    if (!*buf)
        return si_errprintf(err, "catalog.password_file %s: empty", path);
    return 0;
}

/* "scheme://user:password@..." carries a password: refused, so that it never
 * sits in a command line or a world-readable configuration. */
static bool url_has_password(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *end = p + strcspn(p, "/?");
    const char *at = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@')
            at = q;
    if (at && memchr(p, ':', (size_t)(at - p)))
        return true;
    return strstr(url, "password=") != NULL;
}

db_t *db_pg_open(db_t *db, const char *url, int flags, const char *password_file,
                 si_error_t *err)
{
    (void)flags;
    char password[512] = "";
    if (url_has_password(url)) {
        si_errprintf(err, "catalog.url %s holds a password: put it in catalog.password_file "
                     "(mode 0600) or libpq's ~/.pgpass instead", url);
        goto error;
    }
    if (password_file && read_password_file(password_file, password, sizeof(password), err) < 0)
        goto error;
    /* libpq skips a NULL value: no password file, libpq's own sources */
    const char *keys[] = {"dbname", "password", "application_name", "connect_timeout", NULL};
    const char *values[] = {url, password_file ? password : NULL, "stagein", "10", NULL};
    db->pg = PQconnectdbParams(keys, values, 1);
    explicit_bzero(password, sizeof(password));
    if (!db->pg || PQstatus(db->pg) != CONNECTION_OK) {
        char msg[DB_ERRMSG_MAX];
        snprintf(msg, sizeof(msg), "%s", db->pg ? PQerrorMessage(db->pg) : "out of memory");
        msg[strcspn(msg, "\n")] = '\0';
        si_errprintf(err, "catalog.url %s: cannot connect: %s", url, msg);
        goto error;
    }
    if (session_setup(db, err) < 0)
        goto error;
    return db;
error:
    return NULL; /* db_open closes what was opened */
}

void db_pg_close(db_t *db)
{
    if (db->pg)
        PQfinish(db->pg);
    db->pg = NULL;
}

db_stmt_t *db_pg_prepare(db_t *db, const char *sql, si_error_t *err)
{
    db_stmt_t *s = calloc(1, sizeof(*s));
    if (!s || !(s->pg_sql = db_translate_to_pg(sql, &s->nparams, &s->param_names)))
        goto oom;
    s->db = db;
    int n = s->nparams ? s->nparams : 1;
    if (!(s->types = calloc((size_t)n, sizeof(*s->types))) ||
        !(s->prepared_types = calloc((size_t)n, sizeof(*s->prepared_types))) ||
        !(s->values = calloc((size_t)n, sizeof(*s->values))) ||
        !(s->numbers = calloc((size_t)n, sizeof(*s->numbers))) ||
        !(s->copies = calloc((size_t)n, sizeof(*s->copies))) ||
        !(s->is_copy = calloc((size_t)n, sizeof(*s->is_copy))))
        goto oom;
    s->row = -1;
    return s;
oom:
    if (s) {
        s->db = db;
        db_pg_finalize(s);
    }
    si_errprintf(err, "out of memory");
    return NULL;
}

static void deallocate(db_stmt_t *s)
{
    /* a statement of an earlier connection is gone with it */
    if (!s->name[0] || !s->db->pg || s->db->pg_lost || s->generation != s->db->pg_generation) {
        s->name[0] = '\0';
        return;
    }
    char sql[64];
    snprintf(sql, sizeof(sql), "DEALLOCATE %s", s->name);
    PQclear(PQexec(s->db->pg, sql));
    s->name[0] = '\0';
}

void db_pg_finalize(db_stmt_t *s)
{
    db_pg_reset(s);
    /* An aborted transaction refuses DEALLOCATE too; the names are unique
     * per connection, so a leftover costs only server memory. */
    if (PQtransactionStatus(s->db->pg) != PQTRANS_INERROR)
        deallocate(s);
    for (int i = 0; i < s->nparams; i++) {
        free(s->copies ? s->copies[i] : NULL);
        if (s->param_names)
            free(s->param_names[i]);
    }
    PQclear(s->description);
    free(s->param_names);
    free(s->copies);
    free(s->numbers);
    free(s->is_copy);
    free(s->values);
    free(s->prepared_types);
    free(s->types);
    free(s->pg_sql);
    free(s);
}

void db_pg_reset(db_stmt_t *s)
{
    if (s->result)
        PQclear(s->result);
    s->result = NULL;
    s->executed = false;
    s->row = -1;
    s->nrows = 0;
}

void db_pg_clear_bindings(db_stmt_t *s)
{
    for (int i = 0; i < s->nparams; i++) {
        s->values[i] = NULL;
        s->types[i] = 0;
    }
}

int db_pg_bind_index(db_stmt_t *s, const char *name)
{
    for (int i = 0; i < s->nparams; i++)
        if (s->param_names[i] && strcmp(s->param_names[i], name) == 0)
            return i + 1;
    return 0;
}

void db_pg_bind(db_stmt_t *s, int i, Oid type, const char *text, int len)
{
    if (i < 1 || i > s->nparams)
        return;
    i--;
    s->types[i] = type;
    if (!text || len < 0) {
        s->values[i] = text;
        return;
    }
    /* Text with a length: libpq wants it NUL-terminated. */
    char *copy = realloc(s->copies[i], (size_t)len + 1);
    if (!copy) {
        s->values[i] = NULL;
        return;
    }
    memcpy(copy, text, (size_t)len);
    copy[len] = '\0';
    s->copies[i] = copy;
    s->values[i] = copy;
}

void db_pg_bind_number(db_stmt_t *s, int i, Oid type, const char *fmt, ...)
{
    if (i < 1 || i > s->nparams)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->numbers[i - 1], sizeof(s->numbers[i - 1]), fmt, ap);
    va_end(ap);
    s->types[i - 1] = type;
    s->values[i - 1] = s->numbers[i - 1];
}

/* Prepared on first use with the bound types (the server infers the rest,
 * text included, from the context); prepared again if a later run binds a
 * parameter of another type. */
static int ensure_prepared(db_stmt_t *s)
{
    db_t *db = s->db;
    if (!pg_ready(db))
        return -1;
    if (s->name[0] && s->generation != db->pg_generation) {
        s->name[0] = '\0'; /* prepared on a connection that is gone */
        PQclear(s->description);
        s->description = NULL;
    }
    if (s->name[0]) {
        bool same = true;
        for (int i = 0; i < s->nparams; i++)
            if (s->types[i] && s->types[i] != s->prepared_types[i])
                same = false;
        if (same)
            return 0;
        deallocate(s);
        PQclear(s->description);
        s->description = NULL;
    }
    snprintf(s->name, sizeof(s->name), "si%u", ++db->pg_next_name);
    for (int i = 0; i < s->nparams; i++)
        s->prepared_types[i] = s->types[i];
    /* A parameter left NULL in "?1 IS NULL OR col = ?1" has no type the
     * server can settle on: guess an integer, and text if that fails. */
    int guessed = -1;
    for (int tries = 0; tries <= 2 * s->nparams; tries++) {
        PGresult *res = PQprepare(db->pg, s->name, s->pg_sql, s->nparams, s->prepared_types);
        if (PQresultStatus(res) == PGRES_COMMAND_OK) {
            PQclear(res);
            s->generation = db->pg_generation;
            return 0;
        }
        note_result_error(db, res);
        const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        bool untyped = state && (strcmp(state, "42P08") == 0 || strcmp(state, "42P18") == 0);
        PQclear(res);
        const char *at = strstr(db->errmsg, "parameter $");
        int n = at ? atoi(at + 11) : 0;
        if (untyped && n >= 1 && n <= s->nparams && s->prepared_types[n - 1] == 0) {
            s->prepared_types[n - 1] = PG_INT8;
            guessed = n - 1;
        } else if (guessed >= 0 && s->prepared_types[guessed] == PG_INT8) {
            s->prepared_types[guessed] = PG_TEXT;
            guessed = -1;
        } else {
            break;
        }
    }
    s->name[0] = '\0';
    return -1;
}

int db_pg_prepare_now(db_stmt_t *s, si_error_t *err)
{
    if (ensure_prepared(s) == 0)
        return 0;
    if (strstr(s->db->errmsg, "multiple commands"))
        return si_errprintf(err, "SQL: give one statement (%s)", s->db->errmsg);
    return si_errprintf(err, "SQL: %s", s->db->errmsg);
}

int db_pg_step(db_stmt_t *s)
{
    db_t *db = s->db;
    if (!s->executed) {
        if (ensure_prepared(s) < 0)
            return DB_ERROR;
        s->executed = true;
        s->result = PQexecPrepared(db->pg, s->name, s->nparams, s->values, NULL, NULL, 0);
        ExecStatusType st = PQresultStatus(s->result);
        if (st == PGRES_TUPLES_OK) {
            s->nrows = PQntuples(s->result);
            db->pg_changes = strtoll(PQcmdTuples(s->result), NULL, 10);
        } else if (st == PGRES_COMMAND_OK) {
            s->nrows = 0;
            db->pg_changes = strtoll(PQcmdTuples(s->result), NULL, 10);
        } else {
            note_result_error(db, s->result);
            PQclear(s->result);
            s->result = NULL;
            return DB_ERROR;
        }
        s->row = -1;
    }
    if (s->row + 1 < s->nrows) {
        s->row++;
        return DB_ROW;
    }
    s->row = s->nrows;
    return DB_DONE;
}

static bool has_value(db_stmt_t *s, int i)
{
    return s->result && s->row >= 0 && s->row < s->nrows && i >= 0 && i < PQnfields(s->result) &&
           !PQgetisnull(s->result, s->row, i);
}

/* The result's columns, or before a step (as SQLite answers) the prepared
 * statement's. */
static const PGresult *columns_of(db_stmt_t *s)
{
    if (s->result)
        return s->result;
    if (!s->description && ensure_prepared(s) == 0) {
        s->description = PQdescribePrepared(s->db->pg, s->name);
        if (PQresultStatus(s->description) != PGRES_COMMAND_OK) {
            PQclear(s->description);
            s->description = NULL;
        }
    }
    return s->description;
}

int db_pg_column_count(db_stmt_t *s)
{
    const PGresult *r = columns_of(s);
    return r ? PQnfields(r) : 0;
}

const char *db_pg_column_name(db_stmt_t *s, int i)
{
    const PGresult *r = columns_of(s);
    return r && i >= 0 && i < PQnfields(r) ? PQfname(r, i) : NULL;
}

db_type_t db_pg_column_type(db_stmt_t *s, int i)
{
    if (!has_value(s, i))
        return DB_NULL;
    switch (PQftype(s->result, i)) {
    case PG_BOOL:
    case PG_INT2:
    case PG_INT4:
    case PG_INT8:
    case PG_OID:
        return DB_INTEGER;
    case PG_FLOAT4:
    case PG_FLOAT8:
        return DB_FLOAT;
    case PG_NUMERIC: {
        /* sum() of integers is numeric: an integer when it has no point. */
        const char *t = PQgetvalue(s->result, s->row, i);
        return strpbrk(t, ".eE") ? DB_FLOAT : DB_INTEGER;
    }
    default:
        return DB_TEXT;
    }
}

const char *db_pg_column_text(db_stmt_t *s, int i)
{
    if (!has_value(s, i))
        return NULL;
    const char *t = PQgetvalue(s->result, s->row, i);
    if (PQftype(s->result, i) == PG_BOOL) /* as SQLite's 1 and 0 */
        return t[0] == 't' ? "1" : "0";
    return t;
}

int db_pg_column_bytes(db_stmt_t *s, int i)
{
    if (!has_value(s, i))
        return 0;
    if (PQftype(s->result, i) == PG_BOOL)
        return 1;
    return PQgetlength(s->result, s->row, i);
}

int64_t db_pg_last_insert_id(db_t *db)
{
    if (db->pg_lost)
        return 0;
    PGresult *res = PQexec(db->pg, "SELECT lastval()");
    int64_t id = 0;
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
        id = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    return id;
}

int db_pg_exec(db_t *db, const char *sql, si_error_t *err)
{
    if (!pg_ready(db))
        return si_errprintf(err, "%s", db->errmsg);
    PGresult *res = PQexec(db->pg, sql);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
        note_result_error(db, res);
        PQclear(res);
        return si_errprintf(err, "catalog %s: %s", db->target, db->errmsg);
    }
    db->pg_changes = strtoll(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return 0;
}

int db_pg_copy_send(db_t *db, const char *sql, const char *data, size_t len, si_error_t *err)
{
    if (!pg_ready(db))
        return si_errprintf(err, "%s", db->errmsg);
    PGresult *res = PQexec(db->pg, sql);
    if (PQresultStatus(res) != PGRES_COPY_IN) {
        note_result_error(db, res);
        PQclear(res);
        return si_errprintf(err, "catalog %s: %s", db->target, db->errmsg);
    }
    PQclear(res);
    int sent = 1;
    for (size_t off = 0; off < len && sent == 1;) {
        size_t n = len - off < (1u << 20) ? len - off : (1u << 20);
        sent = PQputCopyData(db->pg, data + off, (int)n);
        off += n;
    }
    PQputCopyEnd(db->pg, sent == 1 ? NULL : "stagein: sending the rows failed");
    db->pg_copy_failed = sent != 1;
    if (db->pg_copy_failed)
        note_result_error(db, NULL);
    return 0;
}

int db_pg_copy_wait(db_t *db, si_error_t *err)
{
    int rc = db->pg_copy_failed ? -1 : 0;
    PGresult *res;
    while ((res = PQgetResult(db->pg))) {
        if (PQresultStatus(res) == PGRES_COMMAND_OK) {
            db->pg_changes = strtoll(PQcmdTuples(res), NULL, 10);
        } else if (rc == 0) {
            note_result_error(db, res);
            rc = -1;
        }
        PQclear(res);
    }
    db->pg_copy_failed = false;
    return rc < 0 ? si_errprintf(err, "catalog %s: %s", db->target, db->errmsg) : 0;
}
