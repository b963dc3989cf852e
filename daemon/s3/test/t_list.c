/* ListObjects pagination over an in-memory sorted key set: prefix,
 * delimiter, markers, max-keys, continuation across pages, tokens. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/s3/list.h"

typedef struct {
    const char *const *keys; /* sorted */
    size_t n;
    int calls;
} keyset_t;

static int next_key(void *arg, const char *from, bool inclusive, s3_list_entry_t *out,
                    si_error_t *err)
{
    (void)err;
    keyset_t *ks = arg;
    ks->calls++;
    for (size_t i = 0; i < ks->n; i++) {
        int c = strcmp(ks->keys[i], from);
        if (c > 0 || (inclusive && c == 0)) {
            memset(out, 0, sizeof(*out));
            snprintf(out->key, sizeof(out->key), "%s", ks->keys[i]);
            out->size = strlen(ks->keys[i]);
            return 1;
        }
    }
    return 0;
}

/* "k1,k2|p1,p2" + "*" when truncated */
static char *render(const s3_list_result_t *r)
{
    static char buf[4096];
    buf[0] = '\0';
    for (size_t i = 0; i < r->nentries; i++)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? "," : "",
                 r->entries[i].key);
    strcat(buf, "|");
    for (size_t i = 0; i < r->nprefixes; i++)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? "," : "",
                 r->prefixes[i]);
    if (r->truncated)
        strcat(buf, "*");
    return buf;
}

static const char *const keys[] = {
    "a.txt", "dir/a", "dir/b", "dir/sub/c", "dir/sub/d", "dir2/x", "e", "photos/2020/1.jpg",
    "photos/2021/2.jpg", "z",
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const char *run(const char *prefix, const char *delim, const char *after, int max,
                       char **next)
{
    keyset_t ks = {keys, NKEYS, 0};
    s3_list_query_t q = {prefix, delim, after, max};
    s3_list_result_t r;
    si_error_t err;
    if (s3_list_run(&q, next_key, &ks, &r, &err) < 0)
        return "ERROR";
    const char *out = render(&r);
    if (next)
        *next = r.next ? strdup(r.next) : NULL;
    s3_list_result_free(&r);
    return out;
}

/* The listing page by page (max per page), each following the one before's
 * next marker until one is not truncated (at most 11): "[page][page]". */
static const char *run_pages(const char *prefix, const char *delim, int max)
{
    static char seen[1024];
    char *next = NULL;
    const char *after = NULL;
    int pages = 0;
    seen[0] = '\0';
    for (;;) {
        const char *page = run(prefix, delim, after, max, &next);
        snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "[%s]", page);
        pages++;
        free((char *)after);
        after = next;
        if (!strchr(page, '*') || pages > 10)
            break;
    }
    free((char *)after);
    return seen;
}

int main(void)
{
    is_str(run("", NULL, NULL, 1000, NULL),
           "a.txt,dir/a,dir/b,dir/sub/c,dir/sub/d,dir2/x,e,photos/2020/1.jpg,photos/2021/2.jpg,z|",
           "everything");
    is_str(run("", "/", NULL, 1000, NULL), "a.txt,e,z|dir/,dir2/,photos/", "top level with /");
    is_str(run("dir/", "/", NULL, 1000, NULL), "dir/a,dir/b|dir/sub/", "inside dir/");
    is_str(run("dir", NULL, NULL, 1000, NULL), "dir/a,dir/b,dir/sub/c,dir/sub/d,dir2/x|",
           "prefix without delimiter");
    is_str(run("photos/", "/", NULL, 1000, NULL), "|photos/2020/,photos/2021/",
           "only common prefixes");
    is_str(run("nothing", "/", NULL, 1000, NULL), "|", "prefix matching nothing");
    is_str(run("", NULL, "dir/sub/c", 1000, NULL),
           "dir/sub/d,dir2/x,e,photos/2020/1.jpg,photos/2021/2.jpg,z|", "marker is exclusive");
    is_str(run("dir/", NULL, "a", 1000, NULL), "dir/a,dir/b,dir/sub/c,dir/sub/d|",
           "marker before the prefix");
    is_str(run("", NULL, NULL, 0, NULL), "|", "max-keys 0");
    is_str(run("", "sub", NULL, 1000, NULL),
           "a.txt,dir/a,dir/b,dir2/x,e,photos/2020/1.jpg,photos/2021/2.jpg,z|dir/sub",
           "a multi-byte delimiter");

    /* pages of 2, following next, with the delimiter: every item exactly once */
    is_str(run_pages("", "/", 2), "[a.txt|dir/*][e|dir2/*][z|photos/]", "pages with delimiter");
    /* truncated only while something follows: the last page ends the listing */

    is_str(run_pages("dir", NULL, 3), "[dir/a,dir/b,dir/sub/c|*][dir/sub/d,dir2/x|]",
           "pages without delimiter");

    /* the cursor is asked once per item, not rescanned per page */
    keyset_t ks = {keys, NKEYS, 0};
    s3_list_query_t q = {"photos/", "/", NULL, 1000};
    s3_list_result_t r;
    si_error_t err;
    ok(s3_list_run(&q, next_key, &ks, &r, &err) == 0, "listing ran");
    is_int(ks.calls, 3, "common prefixes are skipped, not walked key by key");
    s3_list_result_free(&r);

    char out[64];
    ok(s3_list_successor("dir/", out, sizeof(out)) && strcmp(out, "dir0") == 0,
       "successor of dir/ is dir0");
    ok(s3_list_successor("a\xff", out, sizeof(out)) && strcmp(out, "b") == 0,
       "successor drops trailing 0xff");
    ok(!s3_list_successor("", out, sizeof(out)), "no successor of the empty string");

    char *t = s3_list_token_encode("dir/a b");
    char key[64];
    ok(t && strcmp(t, "6469722f612062") == 0, "token is hex");
    ok(s3_list_token_decode(t, key, sizeof(key), &err) == 0 && strcmp(key, "dir/a b") == 0,
       "token round trip");
    free(t);
    ok(s3_list_token_decode("zz", key, sizeof(key), &err) < 0, "bad token refused");
    ok(s3_list_token_decode("616", key, sizeof(key), &err) < 0, "odd token refused");
    ok(s3_list_token_decode("6100", key, sizeof(key), &err) < 0, "NUL in token refused");
    return done_testing();
}
