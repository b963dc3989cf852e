/* aws-chunked bodies and their trailers (common/awschunked.c), fed to the
 * decoder in slices as a socket would deliver them, in each streaming mode,
 * with the chain keyed like the unit tests (AWS's S3 example request).
 *
 * Input: byte 0 chooses the mode (bits 0-1), the trailer the request
 * announced (bits 2-4) and whether x-amz-decoded-content-length was sent
 * (bit 5); byte 1 is the slice size - 1; the rest is the body.
 * FUZZ_WRITE_SEEDS=DIR makes the target write valid bodies from the
 * project's encoder into DIR and exit (the corpus's seeds). */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include "common/awschunked.h"
#include "tests/fuzz/fuzz.h"

#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define DATE "20130524T000000Z"
#define SEED "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"

static const si_sigv4_payload_t modes[] = {
    SI_SIGV4_PAYLOAD_STREAMING_SIGNED,
    SI_SIGV4_PAYLOAD_STREAMING_SIGNED_TRAILER,
    SI_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER,
    SI_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER,
};
static const char *const trailers[] = {
    NULL, "x-amz-checksum-crc32", "x-amz-checksum-crc32c", "x-amz-checksum-sha1",
    "x-amz-checksum-sha256", "x-amz-checksum-crc64nvme", "X-Amz-Checksum-CRC32C", "",
};
static si_sigv4_key_t key;

typedef struct {
    uint64_t bytes;
} sink_count_t;

static int sink(void *arg, const void *data, size_t len)
{
    sink_count_t *c = arg;
    if (len && !data)
        abort();
    c->bytes += len;
    return 0;
}

static si_awschunked_conf_t conf_of(uint8_t choice, int64_t payload_len)
{
    si_awschunked_conf_t conf = {
        .payload = modes[choice & 3],
        .trailer = trailers[(choice >> 2) & 7],
        .decoded_length = (choice & 0x20) ? payload_len : -1,
        .max_chunk = 1 << 20,
    };
    if (conf.payload != SI_SIGV4_PAYLOAD_STREAMING_UNSIGNED_TRAILER) {
        conf.key = &key;
        conf.amz_date = DATE;
        conf.seed_signature = SEED;
    }
    return conf;
}

/* Valid bodies in each mode and trailer, chunked in several sizes. */
static void write_seeds(const char *dir)
{
    static const size_t lengths[] = {0, 1, 100, 3000};
    static const size_t chunks[] = {64, 1024};
    char payload[3000];
    int n = 0;
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (char)('a' + i % 26);
    for (unsigned choice = 0; choice < 64; choice++) {
        unsigned t = (choice >> 2) & 7;
        if ((choice & 3) == 3 || t >= 6 || ((choice & 3) == 2 && t == 0))
            continue; /* the same as another choice, or refused by _new */
        for (size_t l = 0; l < sizeof(lengths) / sizeof(lengths[0]); l++)
            for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
                si_error_t err;
                si_awschunked_conf_t conf = conf_of((uint8_t)choice, (int64_t)lengths[l]);
                si_awschunked_enc_t *e = si_awschunked_enc_new(&conf, &err);
                if (!e)
                    continue;
                si_strbuf_t out;
                si_strbuf_init(&out, 1 << 20);
                si_strbuf_putc(&out, (char)choice);
                si_strbuf_putc(&out, (char)(l * 37 + c * 11));
                for (size_t off = 0; off < lengths[l]; off += chunks[c]) {
                    size_t len = lengths[l] - off < chunks[c] ? lengths[l] - off : chunks[c];
                    si_awschunked_enc_chunk(e, payload + off, len, &out, &err);
                }
                si_awschunked_enc_finish(e, &out, &err);
                si_awschunked_enc_free(e);
                char path[4096];
                snprintf(path, sizeof(path), "%s/seed-%03d", dir, n++);
                FILE *f = fopen(path, "wb");
                if (!f || fwrite(out.data, 1, out.len, f) != out.len || fclose(f) != 0)
                    abort();
                si_strbuf_free(&out);
            }
    }
    printf("%d seeds written to %s\n", n, dir);
    exit(0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    si_error_t err;
    if (si_sigv4_derive_key(SECRET, "20130524", "us-east-1", "s3", &key, &err) < 0)
        abort();
    const char *dir = getenv("FUZZ_WRITE_SEEDS");
    if (dir)
        write_seeds(dir);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    si_awschunked_conf_t conf = conf_of(data[0], (int64_t)(size / 2));
    size_t slice = (size_t)data[1] + 1;
    data += 2;
    size -= 2;

    si_error_t err;
    si_sigv4_status_t st;
    si_awschunked_t *d = si_awschunked_new(&conf, &err);
    if (!d)
        return 0;
    sink_count_t count = {0};
    int rc = 0;
    for (size_t off = 0; off < size && rc == 0; off += slice) {
        size_t n = size - off < slice ? size - off : slice;
        rc = si_awschunked_feed(d, data + off, n, sink, &count, &st, &err);
    }
    if (rc == 0 && si_awschunked_finish(d, &st, &err) == 0) {
        if (count.bytes != si_awschunked_decoded(d) || count.bytes > size)
            abort();
        if (conf.decoded_length >= 0 && count.bytes != (uint64_t)conf.decoded_length)
            abort(); /* the declared length is enforced */
    }
    si_awschunked_free(d);
    return 0;
}
