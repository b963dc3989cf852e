#!/bin/bash
# Bad archive backend configurations are refused when stageind starts, with
# the file and line of the setting at fault, and no daemon is left running:
# an unknown backend, an s3 backend without endpoint, with a missing or a
# world-readable credentials file, with push.copies > 1, an hsm backend
# without root or with a root that does not exist.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"

use_state A
"$STAGEIN" catalog init >/dev/null 2>&1 || true
CREDS=$TEST_DIR/creds
printf 'KEY0001 secret0001\n' > "$CREDS"
chmod 600 "$CREDS"

# refused DESCRIPTION PATTERN CONFIG: stageind must fail, saying PATTERN, and leave no daemon
refused() {
    local desc=$1 pattern=$2
    write_conf "$3"
    run_fails_with "$desc" "$pattern" -- start
    local pid
    pid=$(daemon_pid)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        track_pid "$pid"
        ok 1 "no daemon left after: $desc"
    else
        ok 0 "no daemon left after: $desc"
    fi
}

# write_conf puts state_dir and stageind on lines 1-2: the archive group starts on line 3
refused "an unknown backend" \
    "$STAGEIN_CONF:3: setting 'archive.backend' = \"dvd\" is not one of sim\|s3\|hsm\|tape" \
    'archive: { backend = "dvd"; };'
refused "s3 without an endpoint" \
    "$STAGEIN_CONF: setting 'archive.s3.endpoint' is required by the s3 backend" \
    "archive: { backend = \"s3\"; s3: { credentials_file = \"$CREDS\"; }; };"
refused "s3 with a missing credentials file" \
    "$STAGEIN_CONF:5: setting 'archive.s3.credentials_file' .*$TEST_DIR/nope: cannot open" \
    "archive: { backend = \"s3\"; s3: {
    endpoint = \"http://127.0.0.1:9\";
    credentials_file = \"$TEST_DIR/nope\"; }; };"
chmod 644 "$CREDS"
refused "s3 with a world-readable credentials file" \
    "$STAGEIN_CONF:3: setting 'archive.s3.credentials_file' .*mode 0644 lets group or others" \
    "archive: { backend = \"s3\"; s3: { endpoint = \"http://127.0.0.1:9\"; credentials_file = \"$CREDS\"; }; };"
chmod 600 "$CREDS"
refused "s3 with a bad endpoint" \
    "$STAGEIN_CONF:3: setting 'archive.s3.endpoint' = \"ftp://x\" is not http" \
    "archive: { backend = \"s3\"; s3: { endpoint = \"ftp://x\"; credentials_file = \"$CREDS\"; }; };"
refused "s3 with push.copies = 2" \
    "$STAGEIN_CONF:4: setting 'push.copies' = 2: the s3 backend writes one copy" \
    "archive: { backend = \"s3\"; s3: { endpoint = \"http://127.0.0.1:9\"; credentials_file = \"$CREDS\"; }; };
push: { copies = 2; };"
refused "hsm without a root" \
    "$STAGEIN_CONF: setting 'archive.hsm.root' is required" \
    'archive: { backend = "hsm"; };'
refused "hsm with a root that does not exist" \
    "$STAGEIN_CONF:3: setting 'archive.hsm.root' = \"$TEST_DIR/none\": No such file or directory" \
    "archive: { backend = \"hsm\"; hsm: { root = \"$TEST_DIR/none\"; }; };"
refused "an unknown s3 setting" \
    "$STAGEIN_CONF:3: setting 'archive.s3.endpiont' is not a known setting" \
    'archive: { backend = "s3"; s3: { endpiont = "http://x"; }; };'

# and the same file with the mistakes fixed starts
mkdir -p "$TEST_DIR/arch"
write_conf "archive: { backend = \"hsm\"; hsm: { root = \"$TEST_DIR/arch\"; }; };"
run_ok "a good hsm configuration starts" -- start
track_pid "$(daemon_pid)"
stop
finish
