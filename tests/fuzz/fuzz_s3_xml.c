/* S3's XML bodies (common/xml.c): the requests the S3 server reads
 * (daemon/s3/proto.c: RestoreRequest, Delete, CompleteMultipartUpload), the
 * answers the s3 archive backend reads (common/aws/s3client.c: ListObjectsV2,
 * which catalog imports from an archive's listing, and single elements
 * such as an UploadId), and the bounded element reader itself. The first
 * byte chooses the parser. */
#include "config.h"

#include "common/aws/s3client.h"
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
    unsigned which = data[0] % 6;
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
    case 3: {
        si_s3_list_t l;
        if (si_s3_parse_list(body, len, &l, &err) == 0) {
            for (size_t i = 0; i < l.n; i++)
                if (!l.objects[i].key)
                    abort();
            if (l.truncated && !l.next_token)
                abort(); /* a truncated listing says where to go on */
            si_s3_list_free(&l);
        }
        break;
    }
    case 4: {
        char text[1024];
        if (si_s3_xml_text(body, len, "InitiateMultipartUploadResult/UploadId", text,
                           sizeof(text), &err) == 0 && strnlen(text, sizeof(text)) == sizeof(text))
            abort();
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
