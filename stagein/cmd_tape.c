/* stagein tape ...: the simulated library's volumes (doc/tape-format.md). */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text.h"
#include "daemon/simlib/engine.h"
#include "daemon/volume/tar.h"
#include "daemon/volume/volume.h"
#include "stagein/cli.h"

/* Options shared by the tape subcommands; each accepts those it lists. */
typedef struct {
    bool json;
    bool verify;
    bool clear;
    bool no_catalog;
    const char *volume_dir;
    const char *media;
    const char *capacity;
    const char *bucket;
    const char *unreadable;
    int copy;
    char **pos;                    /* the positional arguments */
    int npos;
    char dir_buf[4096];
} tape_opts_t;

enum { OPT_VOLUME_DIR = 256, OPT_MEDIA, OPT_CAPACITY, OPT_BUCKET, OPT_UNREADABLE, OPT_CLEAR,
       OPT_COPY, OPT_VERIFY, OPT_NO_CATALOG };

/* Parses the options named in `accepted` (long names, space separated) and
 * expects `min`..`max` positional arguments (o->pos). Returns -1 to go on,
 * else the exit status. */
static int tape_args(int argc, char **argv, const char *accepted, int min, int max,
                     const char *usage, tape_opts_t *o)
{
    static const struct option all[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {"volume-dir", required_argument, NULL, OPT_VOLUME_DIR},
        {"media", required_argument, NULL, OPT_MEDIA},
        {"capacity", required_argument, NULL, OPT_CAPACITY},
        {"bucket", required_argument, NULL, OPT_BUCKET},
        {"unreadable", required_argument, NULL, OPT_UNREADABLE},
        {"clear", no_argument, NULL, OPT_CLEAR},
        {"copy", required_argument, NULL, OPT_COPY},
        {"verify", no_argument, NULL, OPT_VERIFY},
        {"no-catalog", no_argument, NULL, OPT_NO_CATALOG},
        {NULL, 0, NULL, 0},
    };
    int opt, index;
    memset(o, 0, sizeof(*o));
    o->copy = 1;
    optind = 0; /* GNU getopt: 0 re-initialises its state */
    while ((opt = getopt_long(argc, argv, "h", all, &index)) != -1) {
        if (opt == 'h') {
            printf("usage: stagein tape %s %s\n", argv[0], usage);
            return 0;
        }
        if (opt == '?')
            goto usage;
        /* an option this subcommand does not take is a usage error */
        const char *name = all[index].name;
        const char *hit = strstr(accepted, name);
        size_t len = strlen(name);
        if (!hit || (hit != accepted && hit[-1] != ' ') || (hit[len] && hit[len] != ' ')) {
            fprintf(stderr, "stagein tape %s: option --%s does not apply here\n", argv[0],
                    name);
            goto usage;
        }
        switch (opt) {
        case 'j': o->json = true; break;
        case OPT_VOLUME_DIR: o->volume_dir = optarg; break;
        case OPT_MEDIA: o->media = optarg; break;
        case OPT_CAPACITY: o->capacity = optarg; break;
        case OPT_BUCKET: o->bucket = optarg; break;
        case OPT_UNREADABLE: o->unreadable = optarg; break;
        case OPT_CLEAR: o->clear = true; break;
        case OPT_VERIFY: o->verify = true; break;
        case OPT_NO_CATALOG: o->no_catalog = true; break;
        case OPT_COPY: {
            int64_t v;
            if (si_parse_i64(optarg, &v) < 0 || v < 1 || v > 100) {
                fprintf(stderr, "stagein tape %s: --copy '%s' must be a number 1..100\n",
                        argv[0], optarg);
                return 2;
            }
            o->copy = (int)v;
            break;
        }
        }
    }
    o->npos = argc - optind;
    o->pos = argv + optind;
    if (o->npos < min || o->npos > max)
        goto usage;
    return -1;
usage:
    fprintf(stderr, "usage: stagein tape %s %s\n", argv[0], usage);
    return 2;
}

/* --volume-dir, else library.volume_dir, else <state_dir>/volumes. */
static const char *tape_dir(cli_t *cli, tape_opts_t *o, si_error_t *err)
{
    if (o->volume_dir)
        return o->volume_dir;
    si_conf_t *conf = cli_conf(cli, err);
    if (!conf)
        return NULL;
    return tapevol_conf_dir(conf, o->dir_buf, sizeof(o->dir_buf));
}

/* The volume the first argument names, in the volume directory (tape_dir);
 * NULL with err set. */
static tapevol_t *tape_open(cli_t *cli, tape_opts_t *o, int flags, si_error_t *err)
{
    const char *dir = tape_dir(cli, o, err);
    return dir ? tapevol_open(dir, o->pos[0], flags, err) : NULL;
}

/* The configured simulated library (library.* settings). */
static int tape_library(cli_t *cli, simlib_config_t *lib, si_error_t *err)
{
    si_conf_t *conf = cli_conf(cli, err);
    return conf ? simlib_config_from_conf(conf, lib, err) : -1;
}

static char *regions_text(tapevol_t *vol, si_error_t *err)
{
    tapevol_region_t *r;
    size_t n;
    char *text = NULL;
    size_t len = 0;
    if (tapevol_faults(vol, &r, &n, err) < 0)
        return NULL;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        free(r);
        si_errprintf(err, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s%" PRIu64 ":%" PRIu64, i ? "," : "", r[i].start, r[i].length);
    fclose(out);
    free(r);
    return text;
}

/* ---- volumes ------------------------------------------------------------ */

static int tape_volumes(cli_t *cli, int argc, char **argv)
{
    static const si_column_t columns[] = {
        {"label", SI_COL_STR}, {"media", SI_COL_STR}, {"capacity", SI_COL_BYTES},
        {"used", SI_COL_BYTES}, {"files", SI_COL_INT}, {"unreadable", SI_COL_STR},
        {"status", SI_COL_STR},
    };
    tape_opts_t o;
    char **labels = NULL;
    size_t n = 0;
    si_error_t err;
    int rc = tape_args(argc, argv, "json volume-dir", 0, 0, "[--volume-dir DIR] [--json]", &o);
    if (rc >= 0)
        return rc;
    const char *dir = tape_dir(cli, &o, &err);
    if (!dir || tapevol_list(dir, &labels, &n, &err) < 0)
        return cli_fail(cli, "%s", err.text);
    si_table_t *t = SI_TABLE_NEW(columns);
    if (!t) {
        tapevol_labels_free(labels, n);
        return cli_fail(cli, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        tapevol_info_t info = {0};
        tapevol_t *vol = tapevol_open(dir, labels[i], TAPEVOL_RDONLY, &err);
        char *regions = vol ? regions_text(vol, &err) : NULL;
        if (vol)
            tapevol_label_fields(vol, &info);
        bool good = vol && regions && tapevol_info(vol, &info, &err) == 0;
        si_table_row(t);
        si_table_str(t, labels[i]);
        if (vol) {
            si_table_str(t, info.media);
            si_table_int(t, (int64_t)info.capacity);
        } else {
            si_table_null(t);
            si_table_null(t);
        }
        if (good) {
            si_table_int(t, (int64_t)info.used);
            si_table_int(t, info.files);
        } else {
            si_table_null(t);
            si_table_null(t);
        }
        si_table_str(t, regions && *regions ? regions : NULL);
        si_table_str(t, good ? "ok" : err.text);
        free(regions);
        tapevol_close(vol);
    }
    tapevol_labels_free(labels, n);
    return cli_print_table(cli, t, o.json);
}

/* ---- create --------------------------------------------------------------- */

static int tape_create(cli_t *cli, int argc, char **argv)
{
    tape_opts_t o;
    si_error_t err;
    int rc = tape_args(argc, argv, "volume-dir media capacity", 1, 1,
                       "LABEL [--media LTO-9] [--capacity BYTES] [--volume-dir DIR]", &o);
    if (rc >= 0)
        return rc;
    const char *media = o.media ? o.media : "LTO-9";
    uint64_t capacity = tapevol_media_capacity(media);
    if (o.capacity && si_parse_u64(o.capacity, &capacity) < 0)
        return cli_fail(cli, "--capacity '%s' is not a number of bytes", o.capacity);
    if (!capacity)
        return cli_fail(cli, "media '%s' has no default capacity: give --capacity BYTES", media);
    const char *dir = tape_dir(cli, &o, &err);
    if (!dir || tapevol_create(dir, o.pos[0], media, capacity, &err) < 0)
        return cli_fail(cli, "%s", err.text);
    char size[32];
    printf("created volume %s (%s, %s) in %s\n", o.pos[0], media,
           si_format_bytes(capacity, size, sizeof(size)), dir);
    return 0;
}

/* ---- write ----------------------------------------------------------------- */

/* The catalog is written when one was named (--catalog, STAGEIN_CATALOG,
 * catalog.path) or the default one exists: 1 or 0, -1 on a bad config. */
/* Whether the written files are recorded: always, unless --no-catalog;
 * a catalog that does not exist yet is an error (before anything is
 * written), not a write that silently records nothing. */
static int catalog_ready(cli_t *cli, si_error_t *err)
{
    const char *path = cli_catalog_path(cli, err);
    if (!path)
        return -1;
    if (access(path, F_OK) != 0)
        return si_errprintf(err, "no catalog at %s: create it with `stagein catalog init`"
                            " first (or write with --no-catalog)", path);
    return 0;
}

static int tape_write(cli_t *cli, int argc, char **argv)
{
    static const si_column_t columns[] = {
        {"file", SI_COL_INT}, {"bucket", SI_COL_STR}, {"key", SI_COL_STR},
        {"size", SI_COL_INT}, {"position", SI_COL_INT}, {"checksum", SI_COL_STR},
    };
    tape_opts_t o;
    si_error_t err;
    tapevol_member_t *members = NULL;
    tapevol_listing_t *written = NULL;
    tapevol_t *vol = NULL;
    catalog_t *cat = NULL;
    int rc = tape_args(argc, argv, "json volume-dir bucket copy no-catalog", 2, 1 << 20,
                       "LABEL --bucket BUCKET FILE... [--copy N] [--no-catalog] "
                       "[--volume-dir DIR] [--json]", &o);
    if (rc >= 0)
        return rc;
    if (!o.bucket) {
        fprintf(stderr, "stagein tape write: --bucket is required\n");
        return 2;
    }
    const char *dir = tape_dir(cli, &o, &err);
    if (!dir)
        return cli_fail(cli, "%s", err.text);
    size_t n = (size_t)o.npos - 1;
    members = calloc(n, sizeof(*members));
    if (!members)
        return cli_fail(cli, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *file = o.pos[i + 1];
        struct stat st;
        if (stat(file, &st) < 0) {
            rc = cli_fail(cli, "%s: %s", file, strerror(errno));
            goto out;
        }
        if (!S_ISREG(st.st_mode)) {
            rc = cli_fail(cli, "%s: not a regular file", file);
            goto out;
        }
        /* the key is the path as given, like a tar member name: leading
         * "/" and "./" dropped; ".." refused by the key check */
        const char *key = file;
        while (*key == '/' || (key[0] == '.' && key[1] == '/'))
            key += (*key == '/') ? 1 : 2;
        members[i] = (tapevol_member_t){.bucket = o.bucket, .key = key, .path = file,
                                        .fd = -1, .size = (uint64_t)st.st_size,
                                        .mtime = st.st_mtime > 0 ? st.st_mtime : 0};
    }
    bool record = !o.no_catalog;
    if (record && catalog_ready(cli, &err) < 0) {
        rc = cli_fail(cli, "%s", err.text);
        goto out;
    }
    if (record) {
        /* opened first: a catalog that cannot be written stops the write */
        cat = cli_open_catalog(cli, CATALOG_CREATE, &err);
        if (!cat) {
            rc = cli_fail(cli, "%s (or write with --no-catalog)", err.text);
            goto out;
        }
    }
    vol = tapevol_open(dir, o.pos[0], TAPEVOL_RDWR, &err);
    if (!vol || tapevol_append(vol, members, n, &written, &err) < 0) {
        rc = cli_fail(cli, "%s", err.text);
        goto out;
    }
    si_table_t *t = SI_TABLE_NEW(columns);
    for (size_t i = 0; t && i < written->nentries; i++) {
        const tapevol_entry_t *e = &written->entries[i];
        si_table_row(t);
        si_table_int(t, e->file_seq);
        si_table_str(t, e->bucket);
        si_table_str(t, e->key);
        si_table_int(t, (int64_t)e->size);
        si_table_int(t, (int64_t)e->position);
        si_table_str(t, e->checksum);
    }
    rc = cli_print_table(cli, t, o.json);
    if (cat) {
        tapevol_info_t info;
        tapevol_import_stats_t stats;
        if (tapevol_info(vol, &info, &err) < 0 ||
            tapevol_catalog_record(cat, &info, written, o.copy, &stats, &err) < 0) {
            rc = cli_fail(cli, "written to volume %s (archive file %" PRId64 ") but not "
                          "catalogued: %s; 'stagein tape import %s' records it", o.pos[0],
                          written->files[0].seq, err.text, o.pos[0]);
            goto out;
        }
        fprintf(stderr, "stagein: recorded %" PRIu64 " objects (copy %d) in %s\n",
                stats.recorded, o.copy, catalog_path(cat));
    }
out:
    catalog_close(cat);
    tapevol_listing_free(written);
    tapevol_close(vol);
    free(members);
    return rc;
}

/* ---- dump ------------------------------------------------------------------ */

static int tape_dump(cli_t *cli, int argc, char **argv)
{
    static const si_column_t columns[] = {
        {"file", SI_COL_INT}, {"start", SI_COL_INT}, {"end", SI_COL_INT},
        {"member", SI_COL_STR}, {"size", SI_COL_INT}, {"offset", SI_COL_INT},
        {"mtime", SI_COL_INT}, {"checksum", SI_COL_STR}, {"storage_class", SI_COL_STR},
        {"headers", SI_COL_STR},
    };
    tape_opts_t o;
    si_error_t err;
    tapevol_listing_t *l = NULL;
    int rc = tape_args(argc, argv, "json volume-dir verify", 1, 1,
                       "LABEL [--verify] [--volume-dir DIR] [--json]", &o);
    if (rc >= 0)
        return rc;
    tapevol_t *vol = tape_open(cli, &o, TAPEVOL_RDONLY, &err);
    if (!vol || tapevol_walk(vol, o.verify ? TAPEVOL_WALK_VERIFY : 0, &l, &err) < 0) {
        tapevol_close(vol);
        return cli_fail(cli, "%s", err.text);
    }
    si_table_t *t = SI_TABLE_NEW(columns);
    for (size_t f = 0; t && f < l->nfiles; f++) {
        const tapevol_file_t *file = &l->files[f];
        /* one row per member; an archive file without members still shows */
        for (size_t i = 0; i < (file->count ? file->count : 1); i++) {
            const tapevol_entry_t *e = file->count ? &l->entries[file->first + i] : NULL;
            si_table_row(t);
            si_table_int(t, file->seq);
            si_table_int(t, (int64_t)file->start);
            si_table_int(t, (int64_t)file->end);
            if (e) {
                char name[SI_BUCKET_MAX + SI_KEY_MAX + 2];
                snprintf(name, sizeof(name), "%s/%s", e->bucket, e->key);
                si_table_str(t, name);
                si_table_int(t, (int64_t)e->size);
                si_table_int(t, (int64_t)e->position);
                si_table_int(t, e->mtime);
                si_table_str(t, e->checksum[0] ? e->checksum : NULL);
                si_table_str(t, e->storage_class);
                /* as in the pax record: one line, newlines as \n */
                char *escaped = e->headers ? malloc(tar_pax_escape(NULL, e->headers) + 1) : NULL;
                if (escaped)
                    tar_pax_escape(escaped, e->headers);
                si_table_str(t, escaped);
                free(escaped);
            } else {
                for (int c = 0; c < 7; c++)
                    si_table_null(t);
            }
        }
    }
    rc = cli_print_table(cli, t, o.json);
    tapevol_listing_free(l);
    tapevol_close(vol);
    return rc;
}

/* ---- import ---------------------------------------------------------------- */

static int tape_import(cli_t *cli, int argc, char **argv)
{
    static const si_column_t columns[] = {
        {"volume", SI_COL_STR}, {"files", SI_COL_INT}, {"members", SI_COL_INT},
        {"recorded", SI_COL_INT}, {"new_objects", SI_COL_INT}, {"new_copies", SI_COL_INT},
        {"renumbered", SI_COL_INT},
    };
    tape_opts_t o;
    si_error_t err;
    tapevol_import_stats_t stats;
    int rc = tape_args(argc, argv, "json volume-dir copy verify", 1, 1,
                       "LABEL [--copy N] [--verify] [--volume-dir DIR] [--json]", &o);
    if (rc >= 0)
        return rc;
    tapevol_t *vol = tape_open(cli, &o, TAPEVOL_RDONLY, &err);
    catalog_t *cat = vol ? cli_open_catalog(cli, CATALOG_CREATE, &err) : NULL;
    if (!cat || tapevol_import(vol, cat, o.copy, o.verify ? TAPEVOL_WALK_VERIFY : 0, &stats,
                               &err) < 0) {
        catalog_close(cat);
        tapevol_close(vol);
        return cli_fail(cli, "%s", err.text);
    }
    si_table_t *t = SI_TABLE_NEW(columns);
    if (t) {
        si_table_row(t);
        si_table_str(t, o.pos[0]);
        si_table_int(t, stats.files);
        si_table_int(t, (int64_t)stats.members);
        si_table_int(t, (int64_t)stats.recorded);
        si_table_int(t, (int64_t)stats.new_objects);
        si_table_int(t, (int64_t)stats.new_copies);
        si_table_int(t, (int64_t)stats.renumbered);
    }
    rc = cli_print_table(cli, t, o.json);
    catalog_close(cat);
    tapevol_close(vol);
    return rc;
}

/* ---- fault ----------------------------------------------------------------- */

static int parse_region(const char *text, uint64_t *start, uint64_t *length)
{
    const char *colon = strchr(text, ':');
    char head[32];
    if (!colon || (size_t)(colon - text) >= sizeof(head))
        return -1;
    memcpy(head, text, (size_t)(colon - text));
    head[colon - text] = '\0';
    return si_parse_u64(head, start) < 0 || si_parse_u64(colon + 1, length) < 0 ? -1 : 0;
}

static int tape_fault(cli_t *cli, int argc, char **argv)
{
    static const si_column_t columns[] = {
        {"start", SI_COL_INT}, {"length", SI_COL_INT}, {"end", SI_COL_INT},
    };
    tape_opts_t o;
    si_error_t err;
    uint64_t start = 0, length = 0;
    int rc = tape_args(argc, argv, "json volume-dir unreadable clear", 1, 1,
                       "LABEL [--unreadable START:LENGTH | --clear] [--volume-dir DIR] [--json]",
                       &o);
    if (rc >= 0)
        return rc;
    if (o.clear && o.unreadable) {
        fprintf(stderr, "stagein tape fault: give --unreadable or --clear, not both\n");
        return 2;
    }
    if (o.unreadable && parse_region(o.unreadable, &start, &length) < 0)
        return cli_fail(cli, "--unreadable '%s' is not START:LENGTH in bytes", o.unreadable);
    tapevol_t *vol = tape_open(cli, &o, TAPEVOL_RDONLY, &err);
    tapevol_region_t *r = NULL;
    size_t n = 0;
    if (!vol || (o.unreadable && tapevol_fault_add(vol, start, length, &err) < 0) ||
        (o.clear && tapevol_fault_clear(vol, &err) < 0) ||
        tapevol_faults(vol, &r, &n, &err) < 0) {
        tapevol_close(vol);
        return cli_fail(cli, "%s", err.text);
    }
    si_table_t *t = SI_TABLE_NEW(columns);
    for (size_t i = 0; t && i < n; i++) {
        si_table_row(t);
        si_table_int(t, (int64_t)r[i].start);
        si_table_int(t, (int64_t)r[i].length);
        si_table_int(t, (int64_t)(r[i].start + r[i].length));
    }
    rc = cli_print_table(cli, t, o.json);
    free(r);
    tapevol_close(vol);
    return rc;
}

/* ---- drives and slots of the configured library ---------------------------- */

static int tape_drives(cli_t *cli, int argc, char **argv)
{
    static const si_column_t columns[] = {
        {"drive", SI_COL_INT}, {"profile", SI_COL_STR}, {"rate", SI_COL_BYTES},
        {"fault", SI_COL_STR},
    };
    tape_opts_t o;
    si_error_t err;
    int rc = tape_args(argc, argv, "json", 0, 0, "[--json]", &o);
    if (rc >= 0)
        return rc;
    simlib_config_t lib;
    if (tape_library(cli, &lib, &err) < 0)
        return cli_fail(cli, "%s", err.text);
    si_table_t *t = SI_TABLE_NEW(columns);
    for (int d = 0; t && d < lib.drives; d++) {
        char fault[64] = "";
        for (size_t i = 0; i < lib.nfaults; i++)
            if (lib.faults[i].kind == FAULT_DRIVE && lib.faults[i].index == d)
                snprintf(fault, sizeof(fault), "fails at %.0f s", lib.faults[i].at);
        si_table_row(t);
        si_table_int(t, d);
        si_table_str(t, lib.profile.name);
        si_table_int(t, (int64_t)lib.profile.rate);
        si_table_str(t, *fault ? fault : NULL);
    }
    rc = cli_print_table(cli, t, o.json);
    simlib_config_free(&lib);
    return rc;
}

static int tape_slots(cli_t *cli, int argc, char **argv)
{
    static const si_column_t columns[] = {{"slot", SI_COL_INT}, {"volume", SI_COL_STR}};
    tape_opts_t o;
    char **labels = NULL;
    size_t n = 0;
    si_error_t err;
    int rc = tape_args(argc, argv, "json volume-dir", 0, 0, "[--volume-dir DIR] [--json]", &o);
    if (rc >= 0)
        return rc;
    simlib_config_t lib;
    if (tape_library(cli, &lib, &err) < 0)
        return cli_fail(cli, "%s", err.text);
    simlib_config_free(&lib);
    const char *dir = tape_dir(cli, &o, &err);
    if (!dir || tapevol_list(dir, &labels, &n, &err) < 0)
        return cli_fail(cli, "%s", err.text);
    /* The simulated library keeps volumes in their sorted order, one a slot. */
    if (n > (size_t)lib.slots) {
        tapevol_labels_free(labels, n);
        return cli_fail(cli, "%zu volumes in %s do not fit in library.slots = %d", n, dir,
                        lib.slots);
    }
    si_table_t *t = SI_TABLE_NEW(columns);
    for (int s = 0; t && s < lib.slots; s++) {
        si_table_row(t);
        si_table_int(t, s);
        si_table_str(t, (size_t)s < n ? labels[s] : NULL);
    }
    tapevol_labels_free(labels, n);
    return cli_print_table(cli, t, o.json);
}

int cmd_tape(cli_t *cli, int argc, char **argv)
{
    umask(077); /* volumes are the service's state, not for other users to read */
    static const cli_command_t commands[] = {
        {"volumes", tape_volumes, "volumes: label, media, capacity, used, files, faults"},
        {"create", tape_create, "create a volume (label record)"},
        {"write", tape_write, "append one archive file of FILEs to a volume"},
        {"dump", tape_dump, "archive files and members, read from the volume itself"},
        {"import", tape_import, "rebuild the catalog entries of a volume from the volume"},
        {"fault", tape_fault, "set or clear unreadable regions of a volume"},
        {"drives", tape_drives, "drives of the configured library: profile, rate, faults"},
        {"slots", tape_slots, "slots of the configured library and the volume in each"},
        {NULL, NULL, NULL},
    };
    return cli_dispatch(cli, "tape", commands, argc - 1, argv + 1);
}
