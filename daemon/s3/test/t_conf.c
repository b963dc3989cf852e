/* The "s3" group of stagein.conf: defaults survive when a setting is absent
 * (a default string was once copied onto itself and came out empty), set
 * values are taken, bad ones refused with the setting named. */
#include "config.h"

#include <string.h>

#include "common/tap.h"
#include "daemon/s3/s3.h"

static int load(const char *text, s3_conf_t *out, si_error_t *err)
{
    const si_conf_key_t *const schemas[] = {s3_conf_keys, NULL};
    si_conf_t *conf = si_conf_load_string(text, schemas, err);
    if (!conf)
        return -1;
    int rc = s3_conf_from(conf, out, err);
    si_conf_free(conf);
    return rc;
}

int main(void)
{
    plan(21);
    si_error_t err = {{0}};
    s3_conf_t c;
    ok(load("s3: { enabled = true; port = 9100; };", &c, &err) == 0, "a group with two settings loads");
    is_str(c.bind, "127.0.0.1", "s3.bind absent: the default address");
    is_str(c.region, "us-east-1", "s3.region absent: the default region");
    ok(c.secrets_file[0] != '\0', "s3.secrets_file absent: the default path");
    is_int(c.port, 9100, "s3.port as set");
    ok(load("s3: { bind = \"::1\"; region = \"eu-west-1\"; archive_buckets = [ \"upl\" ]; };",
            &c, &err) == 0, "bind, region and archive buckets set");
    is_str(c.bind, "::1", "s3.bind as set");
    ok(s3_bucket_list_has(&c.archive_buckets, "upl"), "archive bucket 'upl' listed");
    ok(load("s3: { region = \"Not A Region\"; };", &c, &err) < 0 &&
       strstr(err.text, "s3.region") != NULL, "a bad region is refused naming s3.region");
    diag("%s", err.text);
    ok(load("s3: { virtual_host_domain = \"s3.example.org\"; tls_cert_file = \"/c.pem\";"
            " tls_key_file = \"/k.pem\"; };", &c, &err) == 0, "TLS files and a virtual-host domain load");
    is_str(c.vhost_domain, "s3.example.org", "s3.virtual_host_domain as set");
    ok(strcmp(c.tls_cert_file, "/c.pem") == 0 && strcmp(c.tls_key_file, "/k.pem") == 0,
       "s3.tls_cert_file and s3.tls_key_file as set");
    ok(load("s3: { tls_key_file = \"/k.pem\"; };", &c, &err) < 0 &&
       strstr(err.text, "go together"), "a key without a certificate is refused: %s", err.text);
    ok(load("s3: { virtual_host_domain = \".example.org\"; };", &c, &err) < 0 &&
       strstr(err.text, "s3.virtual_host_domain"), "a domain with a leading dot is refused: %s", err.text);
    ok(load("s3: { virtual_host_domain = \"Example.org\"; };", &c, &err) < 0,
       "an upper-case domain is refused");
    ok(load("s3: { enabled = true; };", &c, &err) == 0 && c.archive_bucket_mode == 0600 &&
       c.max_user_upload_bytes == S3_HALF_CACHE && c.min_upload_rate > 0 && c.max_user_uploads > 0,
       "defaults: shared archive buckets 0600, per-user bounds on, a rate floor");
    ok(load("s3: { archive_bucket_mode = \"0640\"; archive_bucket_group = 100;"
            " max_user_upload_bytes = 0; min_upload_rate = 0; };", &c, &err) == 0,
       "mode, group and bounds set");
    ok(c.archive_bucket_mode == 0640 && c.archive_bucket_group == 100, "mode 0640 (octal), group 100");
    ok(c.max_user_upload_bytes == 0 && c.min_upload_rate == 0, "0: no byte bound, no rate floor");
    ok(load("s3: { archive_bucket_mode = \"0999\"; };", &c, &err) < 0 &&
       strstr(err.text, "s3.archive_bucket_mode"), "a mode that is not octal is refused: %s", err.text);
    ok(load("s3: { archive_bucket_mode = \"01777\"; };", &c, &err) < 0,
       "a mode over 0777 is refused");
    return done_testing();
}
