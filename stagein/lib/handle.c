/* The library handle: options from the environment or stagein_set_option,
 * error codes and their text. */
#include "config.h"
#include "stagein/lib/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stagein/client.h"

static const char *const error_text[STAGEIN_ERR_MAX_] = {
    [STAGEIN_SUCCESS] = "success",
    [STAGEIN_ERR_ARGUMENT] = "invalid argument",
    [STAGEIN_ERR_NOMEM] = "out of memory",
    [STAGEIN_ERR_CONFIG] = "not configured (endpoint or credentials missing)",
    [STAGEIN_ERR_CONNECT] = "cannot reach the server",
    [STAGEIN_ERR_SERVER] = "the server answered an error",
    [STAGEIN_ERR_NOT_FOUND] = "not found",
    [STAGEIN_ERR_DENIED] = "access denied",
    [STAGEIN_ERR_NOT_CACHED] = "object not in the cache (stage it first)",
    [STAGEIN_ERR_TOO_SMALL] = "buffer smaller than the object",
    [STAGEIN_ERR_CHECKSUM] = "checksum mismatch",
    [STAGEIN_ERR_TIMEOUT] = "timed out",
    [STAGEIN_ERR_FAILED] = "the stage request failed",
    [STAGEIN_ERR_UNSUPPORTED] = "not supported by this build",
    [STAGEIN_ERR_NO_DEVICE] = "no CUDA driver or no such GPU",
    [STAGEIN_ERR_PROTOCOL] = "protocol error",
    [STAGEIN_ERR_SYSTEM] = "system call failed",
};

const char *stagein_strerror(stagein_err_t code)
{
    if ((int)code < 0 || code >= STAGEIN_ERR_MAX_)
        return "unknown error code";
    return error_text[code];
}

stagein_err_t lib_fail(stagein_t *h, stagein_err_t code, const char *fmt, ...)
{
    if (h) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(h->error, sizeof(h->error), fmt, ap);
        va_end(ap);
    }
    return code;
}

stagein_err_t lib_fail_err(stagein_t *h, stagein_err_t code, const si_error_t *err)
{
    return lib_fail(h, code, "%s", err->text);
}

stagein_err_t lib_code_of_http(long status)
{
    switch (status) {
    case 0:
        return STAGEIN_ERR_CONNECT;
    case 400:
    case 405:
    case 413:
        return STAGEIN_ERR_ARGUMENT;
    case 401:
    case 403:
        return STAGEIN_ERR_DENIED;
    case 404:
        return STAGEIN_ERR_NOT_FOUND;
    default:
        return STAGEIN_ERR_SERVER;
    }
}

int lib_split_path(const char *path, char *bucket, size_t bucket_size, const char **key,
                   si_error_t *err)
{
    if (!path || !*path)
        return si_errprintf(err, "no object named: expected bucket/key");
    const char *slash = strchr(path, '/');
    if (!slash || slash == path || slash[1] == '\0')
        return si_errprintf(err, "'%s' is not of the form bucket/key", path);
    size_t len = (size_t)(slash - path);
    if (len >= bucket_size || len < 3)
        return si_errprintf(err, "bucket of '%s' is not 3..63 characters", path);
    memcpy(bucket, path, len);
    bucket[len] = '\0';
    *key = slash + 1;
    return 0;
}

static int replace(char **slot, const char *value)
{
    char *copy = NULL;
    if (value && !(copy = strdup(value)))
        return -1;
    free(*slot);
    *slot = copy;
    return 0;
}

/* The first line of a credentials file: "ACCESS_KEY SECRET [...]". */
static stagein_err_t read_credentials(stagein_t *h, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return lib_fail(h, STAGEIN_ERR_CONFIG, "cannot open credentials file %s: %s", path,
                        strerror(errno));
    char line[1024], key[SI_SIGV4_ACCESS_KEY_MAX + 1], secret[SI_SIGV4_SECRET_MAX + 1];
    int lineno = 0;
    stagein_err_t rc = lib_fail(h, STAGEIN_ERR_CONFIG, "%s: no \"ACCESS_KEY SECRET\" line", path);
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        const char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || *p == '\0')
            continue;
        if (sscanf(p, "%128s %128s", key, secret) != 2) {
            rc = lib_fail(h, STAGEIN_ERR_CONFIG, "%s:%d: expected \"ACCESS_KEY SECRET\"", path,
                          lineno);
            break;
        }
        if (replace(&h->access_key, key) < 0 || replace(&h->secret, secret) < 0)
            rc = lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
        else
            rc = STAGEIN_SUCCESS;
        break;
    }
    fclose(f);
    return rc;
}

static stagein_err_t set_number(stagein_t *h, const char *name, const char *value, long min,
                                long max, long *out)
{
    char *end;
    errno = 0;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || !*value || *end || errno || v < min || v > max)
        return lib_fail(h, STAGEIN_ERR_ARGUMENT, "%s '%s': expected a number %ld..%ld", name,
                        value ? value : "(null)", min, max);
    *out = v;
    return STAGEIN_SUCCESS;
}

stagein_err_t stagein_set_option(stagein_t *h, stagein_option_t option, const char *value)
{
    if (!h)
        return STAGEIN_ERR_ARGUMENT;
    h->error[0] = '\0';
    char **slot = NULL;
    switch (option) {
    case STAGEIN_OPT_ENDPOINT: {
        si_error_t err;
        if (!value || client_check_endpoints(value, &err) < 0)
            return lib_fail(h, STAGEIN_ERR_ARGUMENT, "control endpoint: %s",
                            value ? err.text : "none given");
        slot = &h->endpoint;
        break;
    }
    case STAGEIN_OPT_S3_ENDPOINT: {
        size_t scheme = !value ? 0 : strncmp(value, "http://", 7) == 0 ? 7
                                   : strncmp(value, "https://", 8) == 0 ? 8 : 0;
        if (!scheme || !value[scheme])
            return lib_fail(h, STAGEIN_ERR_ARGUMENT,
                            "S3 endpoint '%s': expected http://HOST:PORT or https://HOST:PORT",
                            value ? value : "(null)");
        h->server_provider_known = false;
        if (replace(&h->s3_endpoint, value) < 0)
            return lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
        size_t n = strlen(h->s3_endpoint);
        while (n > scheme && h->s3_endpoint[n - 1] == '/')
            h->s3_endpoint[--n] = '\0';
        si_s3_free(h->s3);   /* made again, for this endpoint, on next use */
        h->s3 = NULL;
        return STAGEIN_SUCCESS;
    }
    case STAGEIN_OPT_S3_CA_FILE:
        if (value && !*value)
            value = NULL;
        if (value && access(value, R_OK) < 0)
            return lib_fail(h, STAGEIN_ERR_ARGUMENT, "S3 CA file %s: %s", value,
                            strerror(errno));
        free(h->s3_ca_file);
        h->s3_ca_file = value ? strdup(value) : NULL;
        if (value && !h->s3_ca_file)
            return lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
        si_s3_free(h->s3);
        h->s3 = NULL;
        return STAGEIN_SUCCESS;
    case STAGEIN_OPT_S3_ACCESS_KEY:
    case STAGEIN_OPT_S3_SECRET:
        if (!value || !*value || strlen(value) > SI_SIGV4_SECRET_MAX)
            return lib_fail(h, STAGEIN_ERR_ARGUMENT, "S3 %s: expected 1..%d characters",
                            option == STAGEIN_OPT_S3_SECRET ? "secret" : "access key",
                            SI_SIGV4_SECRET_MAX);
        slot = option == STAGEIN_OPT_S3_SECRET ? &h->secret : &h->access_key;
        break;
    case STAGEIN_OPT_S3_CREDENTIALS_FILE:
        if (!value || !*value)
            return lib_fail(h, STAGEIN_ERR_ARGUMENT, "no credentials file named");
        return read_credentials(h, value);
    case STAGEIN_OPT_S3_REGION:
        if (!value || !*value || strlen(value) > SI_SIGV4_REGION_MAX)
            return lib_fail(h, STAGEIN_ERR_ARGUMENT, "S3 region: expected 1..%d characters",
                            SI_SIGV4_REGION_MAX);
        slot = &h->region;
        break;
    case STAGEIN_OPT_MUNGE_SOCKET:
        slot = &h->munge_socket;
        break;
    case STAGEIN_OPT_TRANSPORT:
        if (value && strcmp(value, "http") == 0)
            h->transport = LIB_TRANSPORT_HTTP;
        else if (value && strcmp(value, "rdma") == 0)
            h->transport = LIB_TRANSPORT_RDMA;
        else
            return lib_fail(h, STAGEIN_ERR_ARGUMENT, "transport '%s': expected http or rdma",
                            value ? value : "(null)");
        return STAGEIN_SUCCESS;
    case STAGEIN_OPT_PARALLEL: {
        long v;
        stagein_err_t rc = set_number(h, "parallel", value, 1, LIB_MAX_PARALLEL, &v);
        if (rc == STAGEIN_SUCCESS)
            h->parallel = (int)v;
        return rc;
    }
    case STAGEIN_OPT_RDMA_PROVIDER:
    case STAGEIN_OPT_RDMA_DOMAIN:
        if (value && strlen(value) > 63)
            return lib_fail(h, STAGEIN_ERR_ARGUMENT, "rdma %s '%.40s...': longer than 63"
                            " characters", option == STAGEIN_OPT_RDMA_DOMAIN ? "domain"
                                                                             : "provider", value);
        if (replace(option == STAGEIN_OPT_RDMA_DOMAIN ? &h->rdma_domain : &h->rdma_provider,
                    value && *value ? value : NULL) < 0)
            return lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
        lib_rdma_close(h);   /* opened again, as now configured, on next use */
        return STAGEIN_SUCCESS;
    case STAGEIN_OPT_CHUNK_SIZE: {
        long v;
        stagein_err_t rc = set_number(h, "chunk size", value, LIB_MIN_CHUNK, 1L << 30, &v);
        if (rc == STAGEIN_SUCCESS)
            h->chunk = (uint64_t)v;
        return rc;
    }
    default:
        return lib_fail(h, STAGEIN_ERR_ARGUMENT, "unknown option %d", (int)option);
    }
    if (replace(slot, value) < 0)
        return lib_fail(h, STAGEIN_ERR_NOMEM, "out of memory");
    /* Credentials changed: sign with the new ones. */
    si_s3_free(h->s3);
    h->s3 = NULL;
    return STAGEIN_SUCCESS;
}

/* Environment settings; a bad one fails stagein_open naming the variable. */
static stagein_err_t from_environment(stagein_t *h)
{
    static const struct {
        const char *name;
        stagein_option_t option;
    } vars[] = {
        {"STAGEIN_ENDPOINT", STAGEIN_OPT_ENDPOINT},
        {"STAGEIN_S3_ENDPOINT", STAGEIN_OPT_S3_ENDPOINT},
        {"STAGEIN_S3_CREDENTIALS", STAGEIN_OPT_S3_CREDENTIALS_FILE},
        {"STAGEIN_S3_ACCESS_KEY", STAGEIN_OPT_S3_ACCESS_KEY},
        {"STAGEIN_S3_SECRET", STAGEIN_OPT_S3_SECRET},
        {"STAGEIN_S3_REGION", STAGEIN_OPT_S3_REGION},
        {"STAGEIN_S3_CA_FILE", STAGEIN_OPT_S3_CA_FILE},
        {"STAGEIN_MUNGE_SOCKET", STAGEIN_OPT_MUNGE_SOCKET},
        {"STAGEIN_TRANSPORT", STAGEIN_OPT_TRANSPORT},
        {"STAGEIN_RDMA_PROVIDER", STAGEIN_OPT_RDMA_PROVIDER},
        {"STAGEIN_RDMA_DOMAIN", STAGEIN_OPT_RDMA_DOMAIN},
        {"STAGEIN_PARALLEL", STAGEIN_OPT_PARALLEL},
        {"STAGEIN_CHUNK_SIZE", STAGEIN_OPT_CHUNK_SIZE},
    };
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i].name);
        if (!v || !*v)
            continue;
        stagein_err_t rc = stagein_set_option(h, vars[i].option, v);
        if (rc != STAGEIN_SUCCESS) {
            char why[sizeof(h->error)];
            snprintf(why, sizeof(why), "%s", h->error);
            return lib_fail(h, rc, "$%s: %s", vars[i].name, why);
        }
    }
    return STAGEIN_SUCCESS;
}

stagein_err_t stagein_open(stagein_t **out)
{
    if (!out)
        return STAGEIN_ERR_ARGUMENT;
    stagein_t *h = calloc(1, sizeof(*h));
    if (!h)
        return STAGEIN_ERR_NOMEM;
    h->transport = LIB_TRANSPORT_HTTP;
    h->region = strdup(LIB_DEFAULT_REGION);
    if (!h->region) {
        free(h);
        return STAGEIN_ERR_NOMEM;
    }
    /* A bad variable still hands the handle out, so that the caller can
     * read which one in stagein_last_error() before closing it. */
    *out = h;
    return from_environment(h);
}

void stagein_close(stagein_t *h)
{
    if (!h)
        return;
    client_free(h->control);
    lib_rdma_close(h);
    free(h->rdma_provider);
    free(h->rdma_domain);
    si_s3_free(h->s3);
    free(h->endpoint);
    free(h->munge_socket);
    free(h->s3_endpoint);
    free(h->s3_ca_file);
    free(h->access_key);
    if (h->secret) {
        memset(h->secret, 0, strlen(h->secret));
        free(h->secret);
    }
    free(h->region);
    free(h);
}

const char *stagein_last_error(const stagein_t *h)
{
    return h ? h->error : "no handle";
}
