/* S3 protocol helpers: error table, XML escaping and error bodies, dates,
 * Range, conditional requests, ETags, and the XML request bodies. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "daemon/s3/proto.h"

static void test_errors(void)
{
    is_int(s3_error_status("NoSuchKey"), 404, "NoSuchKey is 404");
    is_int(s3_error_status("NoSuchBucket"), 404, "NoSuchBucket is 404");
    is_int(s3_error_status("AccessDenied"), 403, "AccessDenied is 403");
    is_int(s3_error_status("InvalidObjectState"), 403, "InvalidObjectState is 403");
    is_int(s3_error_status("SignatureDoesNotMatch"), 403, "SignatureDoesNotMatch is 403");
    is_int(s3_error_status("InvalidRange"), 416, "InvalidRange is 416");
    is_int(s3_error_status("PreconditionFailed"), 412, "PreconditionFailed is 412");
    is_int(s3_error_status("NotImplemented"), 501, "NotImplemented is 501");
    is_int(s3_error_status("SlowDown"), 503, "SlowDown is 503");
    is_int(s3_error_status("MalformedXML"), 400, "MalformedXML is 400");
    is_int(s3_error_status("InvalidPartOrder"), 400, "InvalidPartOrder is 400");
    is_int(s3_error_status("EntityTooSmall"), 400, "EntityTooSmall is 400");
    is_int(s3_error_status("RequestTimeTooSkewed"), 403, "RequestTimeTooSkewed is 403");
    is_int(s3_error_status("NoSuchThing"), 500, "an unknown code is 500");

    si_strbuf_t x;
    si_strbuf_init(&x, 4096);
    ok(s3_error_xml(&x, "NoSuchKey", "no <key> & \"so\" on", "/b/k'1", "0001", NULL), "error body built");
    is_str(si_strbuf_str(&x),
           "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
           "<Message>no &lt;key&gt; &amp; &quot;so&quot; on</Message>"
           "<Resource>/b/k&apos;1</Resource><RequestId>0001</RequestId></Error>",
           "error body escaped");
    si_strbuf_reset(&x);
    s3_error_xml(&x, "AccessDenied", NULL, NULL, NULL, NULL);
    ok(strstr(si_strbuf_str(&x), "<Message>Access Denied</Message>") != NULL,
       "standard message when none is given");
    si_strbuf_reset(&x);
    s3_xml_escape(&x, "a\x01" "b\tc", 5);
    is_str(si_strbuf_str(&x), "a&#x1;b\tc", "control bytes become references, tab stays");
    si_strbuf_free(&x);
}

static void test_dates(void)
{
    char d[32];
    s3_http_date(1445412480, d);
    is_str(d, "Wed, 21 Oct 2015 07:28:00 GMT", "HTTP date");
    s3_http_date(0, d);
    is_str(d, "Thu, 01 Jan 1970 00:00:00 GMT", "HTTP date of the epoch");
    s3_http_date(1709251199, d);
    is_str(d, "Thu, 29 Feb 2024 23:59:59 GMT", "HTTP date: a leap day's last second");
    s3_http_date(253402300800LL, d);
    is_str(d, "Sat, 01 Jan 10000 00:00:00 GMT", "HTTP date past year 9999");
    s3_iso8601(1255369830, d);
    is_str(d, "2009-10-12T17:50:30.000Z", "ISO 8601 date");
    int64_t t = 0;
    ok(s3_parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT", &t) == 0 && t == 1445412480,
       "IMF-fixdate parsed");
    ok(s3_parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", &t) == 0 && t == 784111777,
       "RFC 850 date parsed");
    ok(s3_parse_http_date("Sun Nov  6 08:49:37 1994", &t) == 0 && t == 784111777,
       "asctime date parsed");
    ok(s3_parse_http_date("yesterday", &t) < 0, "garbage refused");
    ok(s3_parse_http_date("Wed, 21 Foo 2015 07:28:00 GMT", &t) < 0, "bad month refused");
    ok(s3_parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT x", &t) < 0, "trailing text refused");
}

static void test_range(void)
{
    uint64_t s = 0, n = 0;
    is_int(s3_range_parse(NULL, 100, &s, &n), S3_RANGE_NONE, "no header");
    ok(s3_range_parse("bytes=0-9", 100, &s, &n) == S3_RANGE_OK && s == 0 && n == 10, "0-9");
    ok(s3_range_parse("bytes=90-", 100, &s, &n) == S3_RANGE_OK && s == 90 && n == 10, "90-");
    ok(s3_range_parse("bytes=-10", 100, &s, &n) == S3_RANGE_OK && s == 90 && n == 10, "-10");
    ok(s3_range_parse("bytes=-500", 100, &s, &n) == S3_RANGE_OK && s == 0 && n == 100,
       "suffix longer than the object: all of it");
    ok(s3_range_parse("bytes=50-500", 100, &s, &n) == S3_RANGE_OK && s == 50 && n == 50,
       "end past the object is clamped");
    is_int(s3_range_parse("bytes=100-", 100, &s, &n), S3_RANGE_UNSATISFIABLE,
           "start at the size: 416");
    is_int(s3_range_parse("bytes=200-300", 100, &s, &n), S3_RANGE_UNSATISFIABLE,
           "start past the size: 416");
    is_int(s3_range_parse("bytes=-0", 100, &s, &n), S3_RANGE_UNSATISFIABLE, "empty suffix: 416");
    is_int(s3_range_parse("bytes=0-", 0, &s, &n), S3_RANGE_UNSATISFIABLE, "empty object: 416");
    is_int(s3_range_parse("bytes=9-3", 100, &s, &n), S3_RANGE_NONE, "reversed: ignored");
    is_int(s3_range_parse("bytes=0-1,5-6", 100, &s, &n), S3_RANGE_NONE, "several: ignored");
    is_int(s3_range_parse("items=0-1", 100, &s, &n), S3_RANGE_NONE, "other unit: ignored");
    is_int(s3_range_parse("bytes=a-b", 100, &s, &n), S3_RANGE_NONE, "not numbers: ignored");
    is_int(s3_range_parse("bytes=-", 100, &s, &n), S3_RANGE_NONE, "no numbers: ignored");
    is_int(s3_range_parse("bytes=99999999999999999999-", 100, &s, &n), S3_RANGE_NONE,
           "overflow: ignored");
    ok(s3_range_parse("bytes=99-99", 100, &s, &n) == S3_RANGE_OK && s == 99 && n == 1,
       "the last byte");
}

static void test_conditions(void)
{
    const char *etag = "\"abc\"";
    int64_t mtime = 1445412480; /* Wed, 21 Oct 2015 07:28:00 GMT */
    s3_conditions_t c = {0};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_PROCEED, "no conditions");
    c = (s3_conditions_t){.if_match = "\"abc\""};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_PROCEED, "If-Match hit");
    c = (s3_conditions_t){.if_match = "\"x\", \"abc\""};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_PROCEED, "If-Match list hit");
    c = (s3_conditions_t){.if_match = "abc"};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_PROCEED, "If-Match without quotes");
    c = (s3_conditions_t){.if_match = "\"zzz\""};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_FAILED, "If-Match miss: 412");
    c = (s3_conditions_t){.if_match = "*"};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_PROCEED, "If-Match *");
    c = (s3_conditions_t){.if_none_match = "\"abc\""};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_NOT_MODIFIED, "If-None-Match hit: 304");
    c = (s3_conditions_t){.if_none_match = "W/\"abc\""};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_NOT_MODIFIED, "weak tag compared");
    c = (s3_conditions_t){.if_none_match = "\"zzz\""};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_PROCEED, "If-None-Match miss");
    c = (s3_conditions_t){.if_modified_since = "Wed, 21 Oct 2015 07:28:00 GMT"};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_NOT_MODIFIED,
           "If-Modified-Since at mtime: 304");
    c = (s3_conditions_t){.if_modified_since = "Wed, 21 Oct 2015 07:27:59 GMT"};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_PROCEED,
           "If-Modified-Since before mtime: proceed");
    c = (s3_conditions_t){.if_unmodified_since = "Wed, 21 Oct 2015 07:27:59 GMT"};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_FAILED,
           "If-Unmodified-Since before mtime: 412");
    c = (s3_conditions_t){.if_unmodified_since = "Wed, 21 Oct 2015 07:28:00 GMT"};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_PROCEED,
           "If-Unmodified-Since at mtime: proceed");
    c = (s3_conditions_t){.if_match = "\"abc\"",
                          .if_unmodified_since = "Wed, 21 Oct 2015 07:27:59 GMT"};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_PROCEED,
           "If-Match true overrides If-Unmodified-Since false (S3)");
    c = (s3_conditions_t){.if_none_match = "\"zzz\"",
                          .if_modified_since = "Wed, 21 Oct 2015 07:28:00 GMT"};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_PROCEED,
           "If-None-Match false overrides If-Modified-Since (S3)");
    c = (s3_conditions_t){.if_modified_since = "not a date"};
    is_int(s3_conditions_eval(&c, etag, mtime), S3_COND_PROCEED, "a bad date is ignored");
}

static void test_etags(void)
{
    char e[S3_ETAG_MAX];
    s3_etag_of("\"0123\"", NULL, 1, 2, e);
    is_str(e, "\"0123\"", "stored etag kept, quoted once");
    s3_etag_of("0123", NULL, 1, 2, e);
    is_str(e, "\"0123\"", "stored etag quoted");
    s3_etag_of(NULL, "md5:d41d8cd98f00b204e9800998ecf8427e", 1, 0, e);
    is_str(e, "\"d41d8cd98f00b204e9800998ecf8427e\"", "md5 checksum is the etag");
    s3_etag_of(NULL, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
               1, 0, e);
    is_str(e, "\"e3b0c44298fc1c149afbf4c8996fb924-1\"", "sha256-derived etag is not an md5");
    s3_etag_of(NULL, NULL, 42, 7, e);
    is_str(e, "\"000000000000002a0000000000000007-1\"", "id/size etag without checksum");

    /* MD5 of the binary MD5s of "a" and "b" (computed independently with
     * printf + xxd + md5sum). */
    const char *parts[] = {"0cc175b9c0f1b6a831c399e269772661",
                           "92eb5ffee6ae2fec3ad71c777531578f"};
    ok(s3_multipart_etag(parts, 2, e) == 0, "multipart etag computed");
    is_str(e, "\"96e024ba2074fe77e8e965ba43a704be-2\"", "multipart etag value");
    const char *bad[] = {"xyz"};
    ok(s3_multipart_etag(bad, 1, e) < 0, "a bad part md5 is refused");
}

static void test_restore_xml(void)
{
    s3_restore_request_t r;
    si_error_t err;
    const char *b = "<RestoreRequest xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                    "<Days>3</Days><GlacierJobParameters><Tier>Expedited</Tier>"
                    "</GlacierJobParameters></RestoreRequest>";
    ok(s3_parse_restore(b, strlen(b), &r, &err) == 0, "restore parsed");
    is_int(r.days, 3, "days");
    is_int(r.tier, S3_TIER_EXPEDITED, "tier");
    ok(s3_tier_priority(S3_TIER_EXPEDITED) > s3_tier_priority(S3_TIER_STANDARD) &&
       s3_tier_priority(S3_TIER_STANDARD) > s3_tier_priority(S3_TIER_BULK),
       "Expedited > Standard > Bulk");
    ok(s3_parse_restore("", 0, &r, &err) == 0 && r.days == 0 && r.tier == S3_TIER_STANDARD,
       "empty body: defaults");
    b = "<RestoreRequest><Days>1</Days><Tier>Bulk</Tier></RestoreRequest>";
    ok(s3_parse_restore(b, strlen(b), &r, &err) == 0 && r.tier == S3_TIER_BULK,
       "Tier directly under RestoreRequest");
    b = "<RestoreRequest><Days>-1</Days></RestoreRequest>";
    ok(s3_parse_restore(b, strlen(b), &r, &err) < 0 && strstr(err.text, "Days"),
       "negative days refused: %s", err.text);
    b = "<RestoreRequest><Tier>Fast</Tier></RestoreRequest>";
    ok(s3_parse_restore(b, strlen(b), &r, &err) < 0 && strstr(err.text, "Tier"),
       "unknown tier refused: %s", err.text);
    b = "<Other/>";
    ok(s3_parse_restore(b, strlen(b), &r, &err) < 0 && strstr(err.text, "root"),
       "wrong root refused: %s", err.text);
    b = "<RestoreRequest><Days>1</Days>";
    ok(s3_parse_restore(b, strlen(b), &r, &err) < 0, "unterminated refused: %s", err.text);
}

static void test_delete_xml(void)
{
    s3_delete_request_t d;
    si_error_t err;
    const char *b = "<?xml version=\"1.0\"?><Delete><Quiet>true</Quiet>"
                    "<Object><Key>a&amp;b</Key></Object><Object><Key>c/d</Key></Object></Delete>";
    ok(s3_parse_delete(b, strlen(b), &d, &err) == 0, "delete parsed");
    ok(d.nkeys == 2 && strcmp(d.keys[0], "a&b") == 0 && strcmp(d.keys[1], "c/d") == 0,
       "keys decoded");
    ok(d.quiet, "quiet");
    s3_delete_request_free(&d);
    b = "<Delete></Delete>";
    ok(s3_parse_delete(b, strlen(b), &d, &err) < 0, "no keys refused: %s", err.text);
}

static void test_complete_xml(void)
{
    s3_complete_request_t c;
    si_error_t err;
    const char *code;
    const char *b = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
                    "<ETag>\"aa\"</ETag></Part><Part><ETag>bb</ETag><PartNumber>3</PartNumber>"
                    "</Part></CompleteMultipartUpload>";
    ok(s3_parse_complete(b, strlen(b), &c, &code, &err) == 0, "complete parsed");
    ok(c.nparts == 2 && c.parts[0].number == 1 && strcmp(c.parts[0].etag, "aa") == 0 &&
       c.parts[1].number == 3 && strcmp(c.parts[1].etag, "bb") == 0, "parts, quotes removed");
    s3_complete_request_free(&c);
    b = "<CompleteMultipartUpload><Part><PartNumber>2</PartNumber><ETag>a</ETag></Part>"
        "<Part><PartNumber>1</PartNumber><ETag>b</ETag></Part></CompleteMultipartUpload>";
    ok(s3_parse_complete(b, strlen(b), &c, &code, &err) < 0 &&
       strcmp(code, "InvalidPartOrder") == 0, "out of order: InvalidPartOrder (%s)", err.text);
    b = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part>"
        "</CompleteMultipartUpload>";
    ok(s3_parse_complete(b, strlen(b), &c, &code, &err) < 0 && strcmp(code, "MalformedXML") == 0,
       "part without etag: MalformedXML (%s)", err.text);
    b = "<CompleteMultipartUpload><Part>";
    ok(s3_parse_complete(b, strlen(b), &c, &code, &err) < 0 && strcmp(code, "MalformedXML") == 0,
       "truncated: MalformedXML (%s)", err.text);
    b = "<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>a</ETag></Part>"
        "</CompleteMultipartUpload>";
    ok(s3_parse_complete(b, strlen(b), &c, &code, &err) < 0, "part 0 refused (%s)", err.text);
    /* an entity expansion bomb stays bounded: expat refuses or the text limit trips */
    char *bomb = malloc(S3_XML_BODY_MAX + 2);
    memset(bomb, ' ', S3_XML_BODY_MAX + 1);
    bomb[S3_XML_BODY_MAX + 1] = '\0';
    ok(s3_parse_complete(bomb, S3_XML_BODY_MAX + 1, &c, &code, &err) < 0,
       "a body over the bound is refused (%s)", err.text);
    free(bomb);
    char deep[512] = "<CompleteMultipartUpload>";
    for (int i = 0; i < 20; i++)
        strcat(deep, "<a>");
    ok(s3_parse_complete(deep, strlen(deep), &c, &code, &err) < 0 && strstr(err.text, "deeper"),
       "nesting bounded (%s)", err.text);
}

static void test_classes_and_parts(void)
{
    ok(s3_storage_class_known("GLACIER") && s3_storage_class_known("STANDARD_IA"),
       "GLACIER and STANDARD_IA are storage classes");
    ok(!s3_storage_class_known("FOO") && !s3_storage_class_known("glacier"),
       "FOO and glacier (lower case) are not");
    ok(s3_storage_class_archived("DEEP_ARCHIVE") && !s3_storage_class_archived("STANDARD"),
       "DEEP_ARCHIVE is archived, STANDARD is not");
    is_int(s3_error_status("InvalidPartNumber"), 416, "InvalidPartNumber is 416");
    is_int(s3_error_status("MetadataTooLarge"), 400, "MetadataTooLarge is 400");
    uint64_t start = 9, length = 9;
    long count = 0;
    is_int(s3_part_range("5,5,3", 2, &start, &length, &count), 1, "part 2 of 3");
    ok(start == 5 && length == 5 && count == 3, "part 2: bytes 5..9 of 3 parts");
    is_int(s3_part_range("5,5,3", 3, &start, &length, &count), 1, "part 3 of 3");
    ok(start == 10 && length == 3, "part 3: bytes 10..12");
    is_int(s3_part_range("5,5,3", 4, &start, &length, &count), 0, "part 4 of 3: past the last");
    is_int(s3_part_range("5,x", 1, &start, &length, &count), -1, "a bad list: -1");
    is_int(s3_part_range("", 1, &start, &length, &count), -1, "an empty list: -1");
}

int main(void)
{
    test_classes_and_parts();
    test_errors();
    test_dates();
    test_range();
    test_conditions();
    test_etags();
    test_restore_xml();
    test_delete_xml();
    test_complete_xml();
    return done_testing();
}
