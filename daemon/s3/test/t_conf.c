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
    plan(9);
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
    return done_testing();
}
