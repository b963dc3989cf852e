/* aws-chunked bodies and their trailers (common/aws/awschunked.c), fed to the
 * decoder in slices as a socket would deliver them, in each streaming mode,
 * with the chain keyed like the unit tests (AWS's S3 example request).
 *
 * Input: byte 0 chooses the mode (bits 0-1), the trailer the request
 * announced (bits 2-4) and whether x-amz-decoded-content-length was sent
 * (bit 5); byte 1 is the slice size - 1; the rest is the body. With bit 6
 * of byte 0 set, the rest is a payload instead: the project's encoder
 * frames it in chunks of 16 * (byte 1 + 1) bytes (smaller ones cost a
 * signature each for little news) and the decoder must give it back
 * unchanged.
 * FUZZ_WRITE_SEEDS=DIR makes the target write valid bodies from the
 * project's encoder into DIR and exit (the corpus's seeds). */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include "common/aws/awschunked.h"
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

static int sink_copy(void *arg, const void *data, size_t len)
{
    return si_strbuf_append(arg, data, len) ? 0 : -1;
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
    /* round trips: a payload the encoder frames */
    static const uint8_t round_trips[] = {0x40, 0x45, 0x6a, 0x72};
    for (size_t i = 0; i < sizeof(round_trips); i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/seed-%03d", dir, n++);
        FILE *f = fopen(path, "wb");
        if (!f || fputc(round_trips[i], f) == EOF || fputc((int)(i * 40), f) == EOF ||
            fwrite(payload, 1, 200, f) != 200 || fclose(f) != 0)
            abort();
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

/* encode, then decode in one slice: the payload comes back. */
static void round_trip(si_awschunked_conf_t *conf, size_t chunk, const uint8_t *data, size_t size)
{
    si_error_t err;
    si_sigv4_status_t st;
    conf->decoded_length = (int64_t)size;
    si_awschunked_enc_t *e = si_awschunked_enc_new(conf, &err);
    if (!e)
        return; /* a trailer the encoder refuses */
    si_strbuf_t body, back;
    si_strbuf_init(&body, 1 << 24);
    si_strbuf_init(&back, 1 << 24);
    for (size_t off = 0; off < size; off += chunk)
        if (si_awschunked_enc_chunk(e, data + off, size - off < chunk ? size - off : chunk, &body,
                                    &err) < 0)
            abort();
    if (si_awschunked_enc_finish(e, &body, &err) < 0)
        abort();
    si_awschunked_enc_free(e);
    if (si_awschunked_encoded_length(conf->payload, conf->trailer, size, chunk) != body.len)
        abort(); /* the Content-Length a client announces is what it sends */
    si_awschunked_t *d = si_awschunked_new(conf, &err);
    if (!d)
        abort();
    if (si_awschunked_feed(d, body.data, body.len, sink_copy, &back, &st, &err) < 0 ||
        si_awschunked_finish(d, &st, &err) < 0) {
        fprintf(stderr, "round trip refused: %s\n", err.text);
        abort();
    }
    if (back.len != size || (size && memcmp(back.data, data, size) != 0))
        abort();
    si_awschunked_free(d);
    si_strbuf_free(&body);
    si_strbuf_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    if (data[0] & 0x40) {
        si_awschunked_conf_t conf = conf_of(data[0], 0);
        round_trip(&conf, ((size_t)data[1] + 1) * 16, data + 2, size - 2);
        return 0;
    }
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
