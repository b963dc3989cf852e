# Helpers for the S3 system tests (0300-s3-*): a stageind with its S3 port,
# a 0600 secrets file, configuration files for awscli, s3cmd and rclone, a
# boto3 preamble, and a fixture of archived objects (volumes written with
# `stagein tape create/write`, catalogued with `stagein tape import`, a
# public dataset defined over them). Source after lib.sh:
#   . "$top_srcdir/tests/s3-lib.sh"
# which also sources recall-lib.sh (private munged, use_state, start, stop,
# api, stage, wait_done, sql).
. "$top_srcdir/tests/recall-lib.sh"

S3RAW="$top_srcdir/tests/s3raw.py"
PY=/usr/bin/python3   # Debian's interpreter, where python3-boto3 lives
[ -x "$PY" ] || PY=python3
AWS=/usr/bin/aws      # awscli v2 from Debian; another aws may come first on PATH
S3_REGION=us-east-1
S3_KEY=STAGEINS3TESTKEY0001
S3_SECRET=$(head -c 30 /dev/urandom | base64 | tr -d '/+=' | head -c 40)
S3_KEY_NOBODY=STAGEINS3NOBODY00001
S3_SECRET_NOBODY=$(head -c 30 /dev/urandom | base64 | tr -d '/+=' | head -c 40)
S3_TIMEOUT=${S3_TIMEOUT:-3}   # the S3 server's connection timeout, seconds
OUT=$TEST_DIR/out              # scratch folder for what the tests download
mkdir -p "$OUT"

# s3_need_clients NAME...: skip the whole test (TAP 1..0) when a client is missing
s3_need_clients() {
    local c
    for c in "$@"; do
        case $c in
            aws) [ -x "$AWS" ] || { echo "1..0 # SKIP awscli (/usr/bin/aws) is not installed"; exit 0; } ;;
            boto3) "$PY" -c 'import boto3' 2>/dev/null ||
                { echo "1..0 # SKIP python3-boto3 is not installed"; exit 0; } ;;
            *) command -v "$c" >/dev/null 2>&1 || { echo "1..0 # SKIP $c is not installed"; exit 0; } ;;
        esac
    done
}

# s3_write_conf EXTRA: stagein.conf with the S3 server (the "s3" group of
# doc/s3.md) and EXTRA groups; S3_CONF_EXTRA adds keys to the s3 group.
# Buckets "upl" and "arch" are archive buckets (PUT goes through the push path).
s3_write_conf() {
    write_conf "s3: {
    enabled = true;
    port = $S3_PORT;
    bind = \"127.0.0.1\";
    secrets_file = \"$S3_SECRETS\";
    region = \"$S3_REGION\";
    timeout = $S3_TIMEOUT;
    archive_buckets = [ \"upl\", \"arch\" ];
    ${S3_CONF_EXTRA:-}
};
push: { copies = 1; aggregate_window = 0.3; };
$1"
}

# s3_setup NAME [EXTRA_CONF]: a state directory with the catalog, volumes
# V00001/V00002 holding the fixture objects of bucket "data" (catalogued from
# the volumes themselves), empty volumes for archive-mode writes, the public
# dataset "pub" over every fixture object, secrets and client configs.
S3_FIXTURE="small1:70000 small2:130000 hot/h1:300000 hot/h2:2000000 cold/c1:500000 cold/c2:1500000 deep/a/b/d1:4000"
s3_setup() {
    use_state "$1"
    S3_PORT=$(free_port)
    S3_SECRETS=$TEST_DIR/$1.secrets
    S3_ENDPOINT=127.0.0.1:$S3_PORT
    S3_URL=http://$S3_ENDPOINT
    printf '# access key, secret, uid, gid\n%s %s 0 0\n%s %s 65534 65534\n' \
        "$S3_KEY" "$S3_SECRET" "$S3_KEY_NOBODY" "$S3_SECRET_NOBODY" > "$S3_SECRETS"
    chmod 600 "$S3_SECRETS"
    # the fixture is built by the CLI under a configuration without the S3 group
    write_conf ""
    "$STAGEIN" catalog init >/dev/null
    local f keys=()
    mkdir -p "$SRC"
    for f in $S3_FIXTURE; do
        # random bytes: an offset error cannot hide in periodic content
        mkdir -p "$SRC/$(dirname "${f%%:*}")"
        [ -e "$SRC/${f%%:*}" ] || head -c "${f##*:}" /dev/urandom > "$SRC/${f%%:*}"
        keys+=("${f%%:*}")
    done
    for v in V00001 V00002 A00001 A00002; do tape create "$v" --capacity 4000000000 >/dev/null; done
    # written without cataloguing: the catalog learns the objects from the volumes
    (cd "$SRC" && "$STAGEIN" tape write V00001 --bucket data --no-catalog "${keys[@]:0:4}" >/dev/null)
    (cd "$SRC" && "$STAGEIN" tape write V00002 --bucket data --no-catalog "${keys[@]:4}" >/dev/null)
    "$STAGEIN" tape import V00001 >/dev/null
    "$STAGEIN" tape import V00002 >/dev/null
    define pub "${keys[@]}"
    s3_write_conf "${2:-}"
    s3_client_configs
}

s3_client_configs() {
    AWS_CONFIG=$TEST_DIR/aws.cfg
    printf '[default]\ns3 =\n  addressing_style = path\n' > "$AWS_CONFIG"
    S3CMD_CFG=$TEST_DIR/s3cmd.cfg
    cat > "$S3CMD_CFG" <<CFG
[default]
access_key = $S3_KEY
secret_key = $S3_SECRET
host_base = $S3_ENDPOINT
host_bucket = $S3_ENDPOINT
use_https = False
signature_v2 = False
bucket_location = $S3_REGION
check_ssl_certificate = False
progress_meter = False
CFG
}

# s3_start: stageind, waiting until the S3 port accepts connections
s3_start() {
    start || return 1
    track_pid "$(daemon_pid)"
    local _
    for _ in $(seq 100); do
        "$PY" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
            "$S3_PORT" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "# the S3 port $S3_PORT never opened; log:" >&2
    tail -5 "$LOG" | sed 's/^/# /' >&2
    return 1
}

# s3_start_ok DESCRIPTION: s3_start as a TAP check; without a server the
# rest of the test cannot run, so a failure bails out
s3_start_ok() {
    if s3_start 2>"$TEST_DIR/start.err"; then
        ok 0 "$1"
    else
        ok 1 "$1"
        sed 's/^/# /' "$TEST_DIR/start.err"
        echo "Bail out! stageind's S3 server did not start"
        exit 1
    fi
}

# s3_make_hot KEY...: stage data/KEY... through the control API into the cache
s3_make_hot() {
    local files
    files=$(printf '"data/%s",' "$@")
    local req
    req=$(stage "{\"files\":[${files%,}]}")
    [ -n "$req" ] && [ "$(wait_done "$req" 60)" = COMPLETED ]
}

# clients -------------------------------------------------------------------------
aws_s3() {
    env -u AWS_PROFILE -u AWS_CA_BUNDLE \
        AWS_ACCESS_KEY_ID="$S3_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET" \
        AWS_DEFAULT_REGION="$S3_REGION" AWS_EC2_METADATA_DISABLED=true \
        AWS_CONFIG_FILE="$AWS_CONFIG" AWS_SHARED_CREDENTIALS_FILE=/dev/null \
        "$AWS" --endpoint-url "$S3_URL" "$@"
}
s3cmd_cli() { s3cmd -c "$S3CMD_CFG" "$@"; }
rclone_remote() {  # rclone_remote BUCKET[/PATH]
    echo ":s3,provider=Other,access_key_id=$S3_KEY,secret_access_key=$S3_SECRET,region=$S3_REGION,endpoint='$S3_URL',force_path_style=true:$1"
}
rclone_cli() { env -u AWS_CA_BUNDLE rclone --config /dev/null "$@"; }
# s3raw ARGS...: tests/s3raw.py with this server's endpoint and credentials
s3raw() { "$PY" "$S3RAW" --endpoint "$S3_ENDPOINT" --key "$S3_KEY" --secret "$S3_SECRET" "$@"; }
# boto3 SCRIPT: runs python with `s3` (a path-style boto3 client), SRC, TEST_DIR
boto3_run() {
    S3_URL=$S3_URL S3_KEY=$S3_KEY S3_SECRET=$S3_SECRET S3_REGION=$S3_REGION SRC=$SRC S3RAW=$S3RAW \
        TEST_DIR=$TEST_DIR "$PY" -c "
import os, sys, hashlib, time
import boto3, botocore.config
from botocore.exceptions import ClientError
s3 = boto3.client('s3', endpoint_url=os.environ['S3_URL'],
                  aws_access_key_id=os.environ['S3_KEY'],
                  aws_secret_access_key=os.environ['S3_SECRET'],
                  region_name=os.environ['S3_REGION'],
                  config=botocore.config.Config(s3={'addressing_style': 'path'}, signature_version='s3v4',
                                                retries={'max_attempts': 1}))
SRC = os.environ['SRC']; TEST_DIR = os.environ['TEST_DIR']
def code_of(e): return e.response['Error']['Code'] + ' ' + str(e.response['ResponseMetadata']['HTTPStatusCode'])
$1"
}

# s3_wait_tape_copies LIKE N: prints how many objects with a key LIKE the
# pattern have a tape copy in the catalog, once N have (or after 60 s).
s3_wait_tape_copies() {
    local n=""
    for _ in $(seq 300); do
        n=$(sql "SELECT count(DISTINCT t.object_id) FROM tape_copies t JOIN objects o ON o.id = t.object_id WHERE o.key LIKE '$1'")
        [ "$n" = "$2" ] && break
        sleep 0.2
    done
    echo "$n"
}

# BOTO3_CHECKS: python for boto3_run scripts: check(cond, desc, detail),
# expect_error(desc, "Code status", fn) and attempt(desc, fn) print the
# lines boto3_tap reads
BOTO3_CHECKS='
def check(cond, desc, detail=""):
    print(("ok\t%s" if cond else "not ok\t%s\t" + str(detail).replace("\n", " ")) % desc)
    sys.stdout.flush()
def expect_error(desc, want, fn):
    try:
        r = fn()
        check(False, desc, "no error: %r" % (r,))
    except ClientError as e:
        check(code_of(e) == want, desc, code_of(e) + " " + str(e.response.get("Error")))
def attempt(desc, fn):
    try:
        return fn()
    except Exception as e:
        check(False, desc, repr(e))
        return None
'

# boto3_tap RESULTS: the lines a boto3 script printed ("ok<TAB>desc",
# "not ok<TAB>desc<TAB>detail", a last "done") as TAP checks
boto3_tap() {
    local verdict desc detail
    while IFS=$'\t' read -r verdict desc detail; do
        case $verdict in
            ok) ok 0 "boto3: $desc" ;;
            "not ok") ok 1 "boto3: $desc"; diag "$detail" | cut -c1-600 ;;
            done) ;;
            *) [ -n "$verdict$desc" ] && diag "$verdict $desc $detail" ;;
        esac
    done <<<"$1"
    ok "$(grep -qx done <<<"$1"; echo $?)" "boto3: the script ran to its end"
}

# s3_state_rows: every catalog table's row count (events left out: reads may
# log), one line, to compare before and after a refused request
s3_state_rows() {
    local t out=""
    for t in $(sql "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('events', 'sqlite_sequence') ORDER BY name"); do
        out+="$t=$(sql "SELECT count(*) FROM \"$t\"") "
    done
    echo "$out$(find "$STATE/cache" -type f 2>/dev/null | wc -l)files"
}

# same_bytes FILE1 FILE2: status 0 when identical
same_bytes() { cmp -s "$1" "$2"; }
