/* Request headers the S3 server interprets (daemon/s3/proto.c): Range,
 * HTTP dates, If-Match / If-None-Match lists and the conditions together;
 * and SigV4's x-amz-date (common/aws/sigv4.c). */
#include "config.h"

#include "common/aws/sigv4.h"
#include "daemon/s3/proto.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The first 8 bytes (when there are 8) choose the object's size. */
    uint64_t object_size = 1000;
    if (size >= 8) {
        memcpy(&object_size, data, 8);
        data += 8;
        size -= 8;
    }
    char *s = fuzz_strndup(data, size);
    uint64_t start = 0, length = 0;
    s3_range_result_t r = s3_range_parse(s, object_size, &start, &length);
    if (r == S3_RANGE_OK && (length == 0 || start >= object_size || length > object_size - start))
        abort(); /* a served range lies inside the object */

    int64_t t;
    if (s3_parse_http_date(s, &t) == 0) {
        char back[32];
        s3_http_date(t, back);
        int64_t again;
        if (s3_parse_http_date(back, &again) < 0 || again != t)
            abort();
    }
    if (si_sigv4_parse_amz_date(s, &t) == 0) {
        char back[SI_SIGV4_AMZ_DATE_LEN + 1];
        si_sigv4_format_amz_date(t, back);
        if (strcmp(back, s) != 0)
            abort(); /* strict: one spelling per instant */
    }
    (void)s3_etag_list_matches(s, "\"d41d8cd98f00b204e9800998ecf8427e\"");
    s3_conditions_t c = {.if_match = s, .if_none_match = s, .if_modified_since = s,
                         .if_unmodified_since = s};
    (void)s3_conditions_eval(&c, "\"d41d8cd98f00b204e9800998ecf8427e\"", 1369353600);
    s3_conditions_t c2 = {.if_none_match = s, .if_modified_since = s};
    (void)s3_conditions_eval(&c2, "\"abc\"", 0);
    free(s);
    return 0;
}
