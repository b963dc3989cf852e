/* libstagein's argument checks, options, error strings, ETag verification
 * and attach errors; no server needed. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/tap.h"
#include "stagein/stagein.h"

int main(void)
{
    /* every code has its own text, and unknown codes are said to be unknown */
    for (int c = 0; c < STAGEIN_ERR_MAX_; c++) {
        ok(stagein_strerror((stagein_err_t)c) && *stagein_strerror((stagein_err_t)c),
           "code %d has a text", c);
        for (int d = 0; d < c; d++)
            if (strcmp(stagein_strerror((stagein_err_t)c), stagein_strerror((stagein_err_t)d)) == 0)
                ok(0, "codes %d and %d share a text", c, d);
    }
    is_str(stagein_strerror(STAGEIN_ERR_MAX_), "unknown error code", "past the last code");
    is_str(stagein_strerror((stagein_err_t)-1), "unknown error code", "negative code");

    unsetenv("STAGEIN_ENDPOINT");
    unsetenv("STAGEIN_S3_ENDPOINT");
    unsetenv("STAGEIN_S3_ACCESS_KEY");
    unsetenv("STAGEIN_S3_SECRET");
    unsetenv("STAGEIN_S3_CREDENTIALS");
    stagein_t *h = NULL;
    is_int(stagein_open(NULL), STAGEIN_ERR_ARGUMENT, "open without a place for the handle");
    is_int(stagein_open(&h), STAGEIN_SUCCESS, "open from an empty environment");
    is_str(stagein_last_error(h), "", "no error yet");

    /* options */
    is_int(stagein_set_option(h, STAGEIN_OPT_ENDPOINT, "ftp://x"), STAGEIN_ERR_ARGUMENT,
           "a control endpoint of another scheme");
    ok(strstr(stagein_last_error(h), "ftp://x") != NULL, "the error names it: %s",
       stagein_last_error(h));
    stagein_t *several = NULL;
    stagein_open(&several);
    is_int(stagein_set_option(several, STAGEIN_OPT_ENDPOINT, "unix:/a.sock,http://s2:8470"),
           STAGEIN_SUCCESS, "several control endpoints, ',' between");
    is_int(stagein_set_option(several, STAGEIN_OPT_ENDPOINT, "unix:/a.sock,,http://s2:8470"),
           STAGEIN_ERR_ARGUMENT, "an empty one in the list: %s", stagein_last_error(several));
    stagein_close(several);
    is_int(stagein_set_option(h, STAGEIN_OPT_S3_ENDPOINT, "ftp://x"), STAGEIN_ERR_ARGUMENT,
           "an S3 endpoint neither http:// nor https://");
    is_int(stagein_set_option(h, STAGEIN_OPT_S3_ENDPOINT, "https://x:9443/"), STAGEIN_SUCCESS,
           "an https S3 endpoint");
    is_int(stagein_set_option(h, STAGEIN_OPT_S3_CA_FILE, "/etc/ssl/certs/ca-certificates.crt"),
           STAGEIN_SUCCESS, "a CA file for it");
    is_int(stagein_set_option(h, STAGEIN_OPT_PARALLEL, "0"), STAGEIN_ERR_ARGUMENT, "parallel 0");
    is_int(stagein_set_option(h, STAGEIN_OPT_PARALLEL, "65"), STAGEIN_ERR_ARGUMENT, "parallel 65");
    is_int(stagein_set_option(h, STAGEIN_OPT_PARALLEL, "4x"), STAGEIN_ERR_ARGUMENT, "parallel 4x");
    is_int(stagein_set_option(h, STAGEIN_OPT_PARALLEL, "4"), STAGEIN_SUCCESS, "parallel 4");
    is_int(stagein_set_option(h, STAGEIN_OPT_CHUNK_SIZE, "1000"), STAGEIN_ERR_ARGUMENT,
           "a chunk below 64 KiB");
    is_int(stagein_set_option(h, STAGEIN_OPT_TRANSPORT, "udp"), STAGEIN_ERR_ARGUMENT,
           "an unknown transport");
    is_int(stagein_set_option(h, (stagein_option_t)999, "x"), STAGEIN_ERR_ARGUMENT,
           "an unknown option");
    is_int(stagein_set_option(h, STAGEIN_OPT_S3_CREDENTIALS_FILE, "/nonexistent/creds"),
           STAGEIN_ERR_CONFIG, "a missing credentials file");
    ok(strstr(stagein_last_error(h), "/nonexistent/creds") != NULL, "the error names the file");

    /* calls that need configuration say which */
    char id[STAGEIN_ID_MAX];
    const char *ds[] = {"alpha", NULL};
    is_int(stagein_request(h, NULL, NULL, id), STAGEIN_ERR_ARGUMENT, "a request naming nothing");
    is_int(stagein_request(h, ds, NULL, id), STAGEIN_ERR_CONFIG, "a request with no endpoint");
    ok(strstr(stagein_last_error(h), "STAGEIN_ENDPOINT") != NULL, "names $STAGEIN_ENDPOINT");
    stagein_status_t st;
    is_int(stagein_status(h, "../etc", &st), STAGEIN_ERR_ARGUMENT, "a request id with a path");
    is_int(stagein_release(h, ""), STAGEIN_ERR_ARGUMENT, "an empty request id");
    uint64_t size;
    is_int(stagein_stat(h, "bucket/key", &size, NULL), STAGEIN_ERR_CONFIG, "stat with no S3 endpoint");
    is_int(stagein_set_option(h, STAGEIN_OPT_S3_ENDPOINT, "http://127.0.0.1:1/"), STAGEIN_SUCCESS,
           "an S3 endpoint");
    is_int(stagein_stat(h, "bucket/key", &size, NULL), STAGEIN_ERR_CONFIG, "stat with no credentials");
    ok(strstr(stagein_last_error(h), "STAGEIN_S3_ACCESS_KEY") != NULL, "names the variables");
    is_int(stagein_set_option(h, STAGEIN_OPT_S3_ACCESS_KEY, "AK"), STAGEIN_SUCCESS, "access key");
    is_int(stagein_set_option(h, STAGEIN_OPT_S3_SECRET, "SECRET"), STAGEIN_SUCCESS, "secret");
    is_int(stagein_stat(h, "nobucket", &size, NULL), STAGEIN_ERR_ARGUMENT, "a path without a key");
    is_int(stagein_stat(h, "bucket/key", &size, NULL), STAGEIN_ERR_CONNECT,
           "nothing listens on port 1");
    char buf[16] = {0};
    is_int(stagein_read(h, "bucket/key", NULL, 10, -1, &size), STAGEIN_ERR_ARGUMENT,
           "a NULL buffer with a capacity");
    is_int(stagein_write(h, "bucket/key", NULL, 10, NULL), STAGEIN_ERR_ARGUMENT,
           "a write of 10 bytes from NULL");
    is_int(stagein_write(h, "nobucket", buf, sizeof(buf), NULL), STAGEIN_ERR_ARGUMENT,
           "a write to a path without a key");
    is_int(stagein_write(h, "bucket/key", buf, sizeof(buf), NULL), STAGEIN_ERR_CONNECT,
           "a write when nothing listens");
    is_int(stagein_set_option(h, STAGEIN_OPT_TRANSPORT, "rdma"), STAGEIN_SUCCESS, "rdma chosen");
    is_int(stagein_read(h, "bucket/key", buf, sizeof(buf), -1, &size), STAGEIN_ERR_CONNECT,
           "an rdma read still asks the server first (HEAD): nothing listens");
    char longname[80];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    is_int(stagein_set_option(h, STAGEIN_OPT_RDMA_PROVIDER, longname), STAGEIN_ERR_ARGUMENT,
           "an rdma provider name of 79 characters");
    is_int(stagein_set_option(h, STAGEIN_OPT_RDMA_PROVIDER, "shm"), STAGEIN_SUCCESS,
           "rdma provider shm");
    is_int(stagein_set_option(h, STAGEIN_OPT_RDMA_PROVIDER, NULL), STAGEIN_SUCCESS,
           "rdma provider back to the server's");
    is_int(stagein_set_option(h, STAGEIN_OPT_RDMA_DOMAIN, "lo"), STAGEIN_SUCCESS, "rdma domain");
    stagein_read_info_t info;
    is_int(stagein_read_info(h, &info), STAGEIN_SUCCESS, "read info");
    ok(info.bytes_rdma == 0 && info.bytes_http == 0, "no bytes moved by the failed read");
    is_int(stagein_read_info(NULL, &info), STAGEIN_ERR_ARGUMENT, "read info of no handle");
    stagein_close(h);

    /* a bad transport in the environment names the variable */
    setenv("STAGEIN_TRANSPORT", "carrier-pigeon", 1);
    is_int(stagein_open(&h), STAGEIN_ERR_ARGUMENT, "open with $STAGEIN_TRANSPORT=carrier-pigeon");
    ok(strstr(stagein_last_error(h), "STAGEIN_TRANSPORT") != NULL, "the error names it: %s",
       stagein_last_error(h));
    stagein_close(h);
    unsetenv("STAGEIN_TRANSPORT");

    /* ETag verification as stageind makes ETags */
    char sum[STAGEIN_CHECKSUM_MAX];
    /* md5("abc") and sha256("abc") */
    is_int(stagein_verify("abc", 3, "900150983cd24fb0d6963f7d28e17f72", sum), STAGEIN_SUCCESS,
           "an MD5 ETag matches");
    is_str(sum, "md5:900150983cd24fb0d6963f7d28e17f72", "md5 checksum text");
    is_int(stagein_verify("abd", 3, "900150983cd24fb0d6963f7d28e17f72", sum), STAGEIN_ERR_CHECKSUM,
           "other bytes do not");
    is_int(stagein_verify("abc", 3, "ba7816bf8f01cfea414140de5dae2223-1", sum), STAGEIN_SUCCESS,
           "a SHA-256 head ETag matches");
    is_str(sum, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
           "the full sha256 is returned");
    is_int(stagein_verify("abc", 3, "xyz", sum), STAGEIN_ERR_UNSUPPORTED, "an ETag of no known form");

    /* attach errors */
    stagein_attachment_t *a = NULL;
    char errbuf[256] = "";
    is_int(stagein_attach("/nonexistent/agent.sock", &a, errbuf, sizeof(errbuf)),
           STAGEIN_ERR_CONNECT, "attach where no agent serves");
    ok(strstr(errbuf, "/nonexistent/agent.sock") != NULL, "the error names the socket: %s", errbuf);
    is_int(stagein_attach("", &a, errbuf, sizeof(errbuf)), STAGEIN_ERR_ARGUMENT, "an empty path");
    is_int(stagein_attach("/x", NULL, errbuf, sizeof(errbuf)), STAGEIN_ERR_ARGUMENT, "no out");
    ok(a == NULL, "nothing attached");
    is_int(stagein_attachment_count(NULL), 0, "count of nothing");
    ok(stagein_attachment_get(NULL, 0) == NULL, "get from nothing");
    stagein_detach(NULL);
    return done_testing();
}
