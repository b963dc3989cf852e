/* S3's XML request bodies (daemon/s3/proto.c over common/xml.c):
 * RestoreRequest, Delete and CompleteMultipartUpload, and the bounded
 * element reader itself. The first byte chooses the parser. */
#include "config.h"

#include "common/xml.h"
#include "daemon/s3/proto.h"
#include "tests/fuzz/fuzz.h"

static int count_element(si_xml_ctx_t *x, const char *path, const char *text, size_t len)
{
    size_t *n = x->arg;
    if (!path || (len && !text))
        abort();
    (*n)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned which = data[0] % 4;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    si_error_t err;

    switch (which) {
    case 0: {
        s3_restore_request_t r;
        if (s3_parse_restore(body, len, &r, &err) == 0 && r.days < 0)
            abort();
        break;
    }
    case 1: {
        s3_delete_request_t d;
        memset(&d, 0, sizeof(d));
        if (s3_parse_delete(body, len, &d, &err) == 0) {
            if (d.nkeys > S3_DELETE_MAX)
                abort();
            for (size_t i = 0; i < d.nkeys; i++)
                if (!d.keys[i])
                    abort();
            s3_delete_request_free(&d);
        }
        break;
    }
    case 2: {
        s3_complete_request_t c;
        const char *code = NULL;
        memset(&c, 0, sizeof(c));
        if (s3_parse_complete(body, len, &c, &code, &err) == 0) {
            if (c.nparts > S3_PARTS_MAX)
                abort();
            for (size_t i = 1; i < c.nparts; i++)
                if (c.parts[i].number <= c.parts[i - 1].number)
                    abort(); /* strictly ascending, or InvalidPartOrder */
            s3_complete_request_free(&c);
        }
        break;
    }
    default: {
        size_t n = 0;
        const char *code = NULL;
        (void)si_xml_parse(body, len, S3_XML_BODY_MAX, "Delete", count_element, &n, &code, &err);
        break;
    }
    }
    return 0;
}
