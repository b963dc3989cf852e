/* The files of an SQLite catalog, for the tests and fuzz targets that start
 * again from an empty one (header only: no test library needed). */
#ifndef CATALOG_TEST_SQLITE_FILES_H
#define CATALOG_TEST_SQLITE_FILES_H

#include <limits.h>
#include <stdio.h>
#include <unistd.h>

/* Removes the catalog file at path and its side files: the WAL, its
 * shared-memory index and the generation file (catalog/db_generation.c). */
static inline void test_sqlite_files_remove(const char *path)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-gen"};
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        char file[PATH_MAX];
        snprintf(file, sizeof(file), "%s%s", path, suffixes[i]);
        unlink(file);
    }
}

#endif
