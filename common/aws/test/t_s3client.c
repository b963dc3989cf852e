/* The S3 client's pure parts: which answers are worth retrying, how they are
 * described, the backoff's bounds and jitter, ListObjectsV2 and other XML
 * bodies, bad endpoints. (Requests themselves run against real servers in
 * tests/0500-0510.) */
#include "config.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/s3client.h"
#include "common/tap.h"

static si_s3_response_t answer(long status, int cc, const char *code)
{
    si_s3_response_t r;
    memset(&r, 0, sizeof(r));
    r.status = status;
    r.curl_code = cc;
    snprintf(r.code, sizeof(r.code), "%s", code);
    return r;
}

int main(void)
{
    si_error_t err;
    si_s3_response_t r;

    r = answer(503, 0, "SlowDown");
    ok(si_s3_retryable(&r), "503 SlowDown: retry");
    r = answer(500, 0, "InternalError");
    ok(si_s3_retryable(&r), "500: retry");
    r = answer(400, 0, "RequestTimeout");
    ok(si_s3_retryable(&r), "400 RequestTimeout: retry");
    r = answer(0, CURLE_RECV_ERROR, "");
    ok(si_s3_retryable(&r), "connection reset: retry");
    r = answer(0, CURLE_OPERATION_TIMEDOUT, "");
    ok(si_s3_retryable(&r), "timed out: retry");
    r = answer(200, CURLE_PARTIAL_FILE, "");
    ok(si_s3_retryable(&r), "a body cut short: retry");
    r = answer(404, 0, "NoSuchKey");
    ok(!si_s3_retryable(&r), "404: no retry");
    r = answer(403, 0, "AccessDenied");
    ok(!si_s3_retryable(&r), "403: no retry");
    r = answer(200, CURLE_WRITE_ERROR, "");
    r.sink_failed = true;
    ok(!si_s3_retryable(&r), "a sink that refused the bytes: no retry");

    char text[300];
    r = answer(503, 0, "SlowDown");
    snprintf(r.message, sizeof(r.message), "Please reduce your request rate.");
    si_s3_describe(&r, text, sizeof(text));
    is_str(text, "HTTP 503 SlowDown: Please reduce your request rate.", "described");
    r = answer(0, CURLE_COULDNT_CONNECT, "");
    snprintf(r.curl_error, sizeof(r.curl_error), "Failed to connect to 127.0.0.1 port 9");
    si_s3_describe(&r, text, sizeof(text));
    is_str(text, "no answer: Failed to connect to 127.0.0.1 port 9", "no answer described");

    uint64_t rng = 42;
    bool bounded = true, varied = false;
    double first = si_s3_backoff(1, 0.1, 2.0, &rng);
    for (int a = 1; a <= 12; a++) {
        double cap = 0.1 * (1 << (a - 1));
        if (cap > 2.0)
            cap = 2.0;
        for (int k = 0; k < 20; k++) {
            double d = si_s3_backoff(a, 0.1, 2.0, &rng);
            bounded &= d >= cap / 2 && d <= cap;
            varied |= d != first;
        }
    }
    ok(bounded, "backoff within [cap/2, cap], cap doubling to the maximum");
    ok(varied, "with jitter");

    const char *list =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
        "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<Name>arch</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><IsTruncated>true</IsTruncated>"
        "<Contents><Key>p/a &amp; b</Key><LastModified>2024-03-01T10:20:30.000Z</LastModified>"
        "<ETag>&quot;0123456789abcdef0123456789abcdef&quot;</ETag><Size>1234</Size>"
        "<StorageClass>GLACIER</StorageClass></Contents>"
        "<Contents><Key>p/c</Key><Size>0</Size><ETag>\"x-2\"</ETag></Contents>"
        "<NextContinuationToken>tok/1+=</NextContinuationToken></ListBucketResult>";
    si_s3_list_t l;
    ok(si_s3_parse_list(list, strlen(list), &l, &err) == 0, "listing parsed");
    is_int(l.n, 2, "two objects");
    is_str(l.objects[0].key, "p/a & b", "key unescaped");
    is_int(l.objects[0].size, 1234, "size");
    is_str(l.objects[0].etag, "0123456789abcdef0123456789abcdef", "ETag without quotes");
    is_str(l.objects[0].storage_class, "GLACIER", "storage class");
    is_int(l.objects[0].mtime, 1709288430, "LastModified");
    is_str(l.objects[1].storage_class, "STANDARD", "no class given: STANDARD");
    ok(l.truncated && l.next_token && strcmp(l.next_token, "tok/1+=") == 0, "truncated, token");
    si_s3_list_free(&l);
    const char *cut = "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
    ok(si_s3_parse_list(cut, strlen(cut), &l, &err) < 0 && strstr(err.text, "Continuation"),
       "truncated without a token: %s", err.text);
    ok(si_s3_parse_list("<Error/>", 8, &l, &err) < 0, "not a listing: %s", err.text);

    char id[100];
    const char *init = "<InitiateMultipartUploadResult><Bucket>b</Bucket><UploadId>abc-1"
                       "</UploadId></InitiateMultipartUploadResult>";
    ok(si_s3_xml_text(init, strlen(init), "InitiateMultipartUploadResult/UploadId", id,
                      sizeof(id), &err) == 0 && strcmp(id, "abc-1") == 0, "UploadId read");
    ok(si_s3_xml_text(init, strlen(init), "InitiateMultipartUploadResult/Key", id, sizeof(id),
                      &err) < 0, "a missing element: %s", err.text);

    si_strbuf_t xml;
    si_strbuf_init(&xml, 4096);
    const char *etags[] = {"e1", "e2"};
    si_s3_complete_xml(&xml, etags, 2);
    ok(!xml.failed && strcmp(si_strbuf_str(&xml),
                             "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"e1"
                             "\"</ETag></Part><Part><PartNumber>2</PartNumber><ETag>\"e2\"</ETag>"
                             "</Part></CompleteMultipartUpload>") == 0,
       "CompleteMultipartUpload body: parts numbered from 1, ETags quoted");
    si_strbuf_free(&xml);

    si_s3_conf_t c = {"ftp://x", "us-east-1", "K", "S", 0, 0, 0, NULL};
    ok(!si_s3_new(&c, &err) && strstr(err.text, "expected http://"), "bad scheme: %s", err.text);
    c.endpoint = "http://h:1/path";
    ok(!si_s3_new(&c, &err) && strstr(err.text, "no path"), "a path: %s", err.text);
    c.endpoint = "http://127.0.0.1:9000/";
    si_s3_t *s = si_s3_new(&c, &err);
    ok(s && strcmp(si_s3_endpoint(s), "http://127.0.0.1:9000") == 0, "trailing '/' dropped");
    si_s3_free(s);
    return done_testing();
}
