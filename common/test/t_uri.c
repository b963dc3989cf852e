/* Percent-encoding as SigV4 and the S3 server use it. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "common/tap.h"
#include "common/uri.h"

static const char *decoded(si_strbuf_t *b, const char *s, bool plus, size_t limit, int *rc)
{
    si_error_t err;
    si_strbuf_free(b);
    si_strbuf_init(b, limit);
    *rc = si_uri_decode(b, s, strlen(s), plus, &err);
    return si_strbuf_str(b);
}

static const char *encoded(si_strbuf_t *b, const char *s, size_t len, bool keep_slash)
{
    si_strbuf_free(b);
    si_strbuf_init(b, 4096);
    si_uri_encode(b, s, len, keep_slash);
    return si_strbuf_str(b);
}

int main(void)
{
    si_strbuf_t b;
    si_strbuf_init(&b, 4096);
    int rc;

    is_str(decoded(&b, "plain-text_1.2~", false, 64, &rc), "plain-text_1.2~", "nothing to decode");
    is_str(decoded(&b, "a%2Fb%2fc", false, 64, &rc), "a/b/c", "escapes in either case");
    is_str(decoded(&b, "%41%42%43", false, 64, &rc), "ABC", "escapes only");
    is_str(decoded(&b, "x+y%20z", true, 64, &rc), "x y z", "'+' is a space in a query");
    is_str(decoded(&b, "x+y", false, 64, &rc), "x+y", "... and itself in a path");
    decoded(&b, "a%00b", false, 64, &rc);
    ok(rc == 0 && b.len == 3 && b.data[1] == '\0', "%%00 decodes to a NUL byte");
    decoded(&b, "abc%4", false, 64, &rc);
    is_int(rc, -1, "a truncated escape is refused");
    decoded(&b, "abc%zz", false, 64, &rc);
    is_int(rc, -1, "a non-hex escape is refused");
    decoded(&b, "abcdefgh", false, 7, &rc);
    ok(rc == -1 && b.failed, "decoded text over the limit is refused");
    ok(decoded(&b, "abcdefg", false, 7, &rc) && rc == 0 && b.len == 7, "... and at the limit taken");

    is_str(encoded(&b, "AZaz09-._~", 10, false), "AZaz09-._~", "unreserved characters kept");
    is_str(encoded(&b, "a b/c", 5, false), "a%20b%2Fc", "space and slash escaped");
    is_str(encoded(&b, "a b/c", 5, true), "a%20b/c", "slash kept in a path");
    is_str(encoded(&b, "\xc3\xa9\x01", 3, false), "%C3%A9%01", "bytes over 0x7f and controls, upper-case hex");
    is_str(encoded(&b, "x\0y", 3, false), "x%00y", "a NUL byte escaped");

    si_strbuf_t v;
    si_strbuf_init(&v, 64);
    is_int(si_uri_query_get("a=1&b=x%20y&a=2", "a", &v, NULL), 2, "a parameter seen twice");
    is_str(si_strbuf_str(&v), "1", "... its first value");
    si_strbuf_free(&v);
    is_int(si_uri_query_get("a=1&b=x%20y+z", "b", &v, NULL), 1, "an encoded value");
    is_str(si_strbuf_str(&v), "x y z", "... decoded");
    si_strbuf_free(&v);
    is_int(si_uri_query_get("uploads&x=1", "uploads", &v, NULL), 1, "a parameter without a value");
    is_int(si_uri_query_get("a%zz=1&b=2", "b", NULL, NULL), -1, "a malformed name fails the lookup");
    is_int(si_uri_query_get("X%2DAmz-Date=1&X-Amz-Date=2&X-Amz-Dat=3", "X-Amz-Date", &v, NULL), 2,
           "an encoded name and a plain one are the same parameter; a prefix is not");
    is_str(si_strbuf_str(&v), "1", "... the first one's value");
    si_strbuf_free(&v);
    ok(si_uri_plain("X-Amz-Date", 10) && si_uri_plain("", 0), "si_uri_plain: nothing to decode");
    ok(!si_uri_plain("a%2F", 4) && !si_uri_plain("a+b", 3), "si_uri_plain: an escape or a '+'");

    const char *cur = "&a=1&&uploads&b=&=x&";
    si_uri_param_t q;
    char seen[128] = "";
    while (si_uri_query_next(&cur, &q))
        snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "[%.*s%s%.*s]",
                 (int)q.name_len, q.name, q.value ? "=" : "", (int)q.value_len,
                 q.value ? q.value : "");
    is_str(seen, "[a=1][uploads][b=][=x]", "parameters walked, empty ones skipped");
    cur = NULL;
    ok(!si_uri_query_next(&cur, &q), "no query: no parameter");

    si_strbuf_free(&b);
    is_int(si_uri_canonical_query(&b, "b=2&a=x y&c", NULL, NULL), 0, "canonical query");
    is_str(si_strbuf_str(&b), "a=x%20y&b=2&c=", "... sorted, re-encoded, empty values");
    si_strbuf_free(&b);
    /* components already canonical are copied; every other form re-encoded */
    is_int(si_uri_canonical_query(&b, "X-Amz-Credential=AK%2F20261202%2Fus-east-1%2Fs3%2Faws4_request"
                                      "&X-Amz-Date=20261202T000000Z&A=%41%2f%7e+b%2B~", NULL, NULL),
           0, "canonical query of escapes");
    is_str(si_strbuf_str(&b), "A=A%2F~%20b%2B~&X-Amz-Credential=AK%2F20261202%2Fus-east-1%2Fs3%2F"
                              "aws4_request&X-Amz-Date=20261202T000000Z",
           "... upper-case escapes of reserved bytes kept; unreserved ones, lower case, '+' redone");
    si_strbuf_free(&b);
    is_int(si_uri_canonical_query(&b, "X-Amz-Signature=ab&X%2DAmz-Signature=cd&k=%00", "X-Amz-Signature",
                                  NULL), 0, "canonical query, one key dropped");
    is_str(si_strbuf_str(&b), "k=%00", "... also when its name is escaped");
    si_strbuf_free(&b);
    is_int(si_uri_canonical_query(&b, "a=%4", NULL, NULL), -1, "a truncated escape is refused");
    si_strbuf_free(&b);
    is_int(si_uri_canonical_path(&b, "/dir/a%20b/c+d", NULL), 0, "canonical path");
    is_str(si_strbuf_str(&b), "/dir/a%20b/c%2Bd", "... each segment re-encoded");
    si_strbuf_free(&b);
    return done_testing();
}
