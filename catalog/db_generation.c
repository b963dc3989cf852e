/* The catalog's change generation (SQLite): a 64-bit counter in a file beside
 * the catalog ("<catalog>-gen"), mapped shared by every process that opens
 * the catalog, bumped by every read-write connection after each of its
 * commits. A reader that remembers the generation it read before a query
 * knows its result is still exact while the generation has not moved, at
 * the price of one load from shared memory instead of a read transaction.
 *
 * The bump runs in SQLite's WAL hook, which SQLite calls once the commit is
 * in the WAL and its write lock released: a writer's statement returns only
 * after the bump, so anything asked after a write (the CLI's chmod, another
 * instance's PUT) sees a new generation. A bump between the commit and a
 * reader's load only costs the reader a query. Every writer opens the
 * catalog through db_open, so every commit of every process is counted; WAL
 * itself already requires all of them on one host, so the shared mapping
 * reaches them all. Setting a WAL hook replaces SQLite's automatic
 * checkpoint, which is done here the same way (passive, at SQLite's
 * default of 1000 pages). Like -wal and -shm, the file is never removed while
 * the catalog is open: a process that mapped it would no longer see the
 * commits counted in its replacement. */
#include "config.h"
#include "catalog/db_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* SQLite's default wal_autocheckpoint. */
#define WAL_CHECKPOINT_PAGES 1000

static int after_commit(void *arg, sqlite3 *sqlite, const char *schema, int wal_pages)
{
    db_t *db = arg;
    if (!db->generation_unseen)
        __atomic_add_fetch(db->generation, 1, __ATOMIC_SEQ_CST);
    if (wal_pages >= WAL_CHECKPOINT_PAGES)
        sqlite3_wal_checkpoint_v2(sqlite, schema, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
}

static bool in_wal_mode(db_t *db)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db->sqlite, "PRAGMA journal_mode", -1, &st, NULL) != SQLITE_OK)
        return false;
    bool wal = sqlite3_step(st) == SQLITE_ROW &&
               strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
    sqlite3_finalize(st);
    return wal;
}

int db_generation_open(db_t *db, si_error_t *err)
{
    const char *file = sqlite3_db_filename(db->sqlite, "main");
    if (!file || !*file)
        return 0; /* in memory: no other process to tell */
    char path[4096];
    if ((size_t)snprintf(path, sizeof(path), "%s-gen", file) >= sizeof(path))
        return 0;
    struct stat st;
    if (stat(file, &st) != 0)
        st.st_mode = 0644; /* not made yet: the umask decides, as for the catalog */
    int fd = open(path, (db->readonly ? O_RDONLY : O_RDWR | O_CREAT) | O_CLOEXEC,
                  st.st_mode & 0666);
    if (fd < 0) {
        if (db->readonly)
            return 0; /* no writer made it yet: no generation, nothing cached */
        si_errprintf(err, "catalog %s: its change generation %s: %s", file, path,
                     strerror(errno));
        return -1;
    }
    struct stat gst;
    int rc = fstat(fd, &gst);
    if (rc == 0 && gst.st_size < (off_t)sizeof(uint64_t) && !db->readonly)
        rc = ftruncate(fd, sizeof(uint64_t)); /* zero-extends: never loses a count */
    void *map = MAP_FAILED;
    if (rc == 0 && (db->readonly ? gst.st_size >= (off_t)sizeof(uint64_t) : true))
        map = mmap(NULL, sizeof(uint64_t), db->readonly ? PROT_READ : PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
    int saved = errno;
    close(fd);
    if (map == MAP_FAILED) {
        if (db->readonly)
            return 0;
        si_errprintf(err, "catalog %s: its change generation %s: %s", file, path,
                     strerror(saved));
        return -1;
    }
    db->generation = map;
    db->generation_exact = in_wal_mode(db);
    if (!db->readonly)
        sqlite3_wal_hook(db->sqlite, after_commit, db);
    return 0;
}

void db_generation_close(db_t *db)
{
    if (db->generation)
        munmap(db->generation, sizeof(uint64_t));
    db->generation = NULL;
}

bool db_generation(const db_t *db, uint64_t *out)
{
    if (!db->generation || !db->generation_exact)
        return false;
    *out = __atomic_load_n(db->generation, __ATOMIC_SEQ_CST);
    return true;
}

void db_generation_unseen(db_t *db, bool unseen)
{
    db->generation_unseen = unseen;
}
