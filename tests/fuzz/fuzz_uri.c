/* URI and query decoding (common/uri.c): what the S3 server and SigV4 do
 * with a request's raw path and query; encoding must decode back to the
 * input, and a canonical query must be its own canonical form. */
#include "config.h"

#include "common/uri.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_strndup(data, size);
    si_strbuf_t out;
    si_error_t err;

    si_strbuf_init(&out, 1 << 20);
    (void)si_uri_decode(&out, s, size, true, &err);
    si_strbuf_reset(&out);
    (void)si_uri_decode(&out, s, size, false, &err);
    si_strbuf_reset(&out);
    si_strbuf_t back;
    si_strbuf_init(&back, 1 << 20);
    if (si_uri_encode(&out, s, size, false)) {
        if (si_uri_decode(&back, out.data ? out.data : "", out.len, false, &err) < 0 ||
            back.len != size || (size && memcmp(back.data, s, size) != 0))
            abort(); /* decode(encode(s)) == s */
    }
    si_strbuf_reset(&out);
    (void)si_uri_canonical_path(&out, s, &err);
    si_strbuf_reset(&out);
    if (si_uri_canonical_query(&out, s, "X-Amz-Signature", &err) == 0) {
        si_strbuf_reset(&back);
        char *once = si_strbuf_take(&out);
        if (si_uri_canonical_query(&back, once, "X-Amz-Signature", &err) < 0 ||
            strcmp(si_strbuf_str(&back), once) != 0)
            abort(); /* canonical once is canonical */
        free(once);
    }
    si_strbuf_free(&back);
    si_strbuf_reset(&out);
    (void)si_uri_query_get(s, "delete", &out, &err);
    si_strbuf_reset(&out);
    (void)si_uri_query_get(s, "X-Amz-Credential", &out, &err);

    const char *cursor = s;
    si_uri_param_t param;
    size_t n = 0;
    while (si_uri_query_next(&cursor, &param)) {
        /* every parameter lies inside the query */
        if (param.name < s || param.name + param.name_len > s + size)
            abort();
        if (param.value && param.value + param.value_len > s + size)
            abort();
        if (++n > size + 1)
            abort(); /* the cursor must advance */
    }
    si_strbuf_free(&out);
    free(s);
    return 0;
}
