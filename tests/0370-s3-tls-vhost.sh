#!/bin/bash
# TLS and virtual-host-style addressing on the S3 server, both by
# configuration (s3.tls_cert_file/s3.tls_key_file, s3.virtual_host_domain):
# a self-signed certificate made here with openssl; awscli, boto3, curl and
# `stagein get` verify it against that certificate and read byte-identical
# objects over https; boto3 in virtual-host style (data.s3.test, names
# resolved to 127.0.0.1 inside the client) lists, heads and reads; plain
# http to the TLS port gets no answer; a client that does not trust the
# certificate is refused by its own TLS check. Bad TLS settings (cert without
# key, key readable by others, a file that holds no PEM, a bad domain) stop
# stageind from starting with a message that names the setting.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients aws boto3 openssl curl

CERT=$TEST_DIR/s3.crt
KEY=$TEST_DIR/s3.key
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=s3.test \
    -addext "subjectAltName=IP:127.0.0.1,DNS:s3.test,DNS:*.s3.test" \
    -keyout "$KEY" -out "$CERT" 2>"$TEST_DIR/openssl.err" ||
    { sed 's/^/# /' "$TEST_DIR/openssl.err"; echo "Bail out! openssl could not make a certificate"; exit 1; }
chmod 600 "$KEY"
S3_CONF_EXTRA="tls_cert_file = \"$CERT\"; tls_key_file = \"$KEY\"; virtual_host_domain = \"s3.test\";"
s3_setup A
S3_URL=https://$S3_ENDPOINT
s3_start_ok "stageind starts with TLS and virtual hosts on its S3 port"
ok "$(grep -q "port $S3_PORT with TLS.*virtual hosts under s3.test" "$LOG"; echo $?)" \
    "its log says so"
ok "$(s3_make_hot hot/h1 hot/h2 small1; echo $?)" "hot/h1, hot/h2 and small1 staged into the cache"

# ---- https, path style ------------------------------------------------------------------
aws_tls() {
    env AWS_ACCESS_KEY_ID="$S3_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET" AWS_CA_BUNDLE="$CERT" \
        AWS_DEFAULT_REGION="$S3_REGION" AWS_EC2_METADATA_DISABLED=true \
        AWS_CONFIG_FILE="$AWS_CONFIG" AWS_SHARED_CREDENTIALS_FILE=/dev/null \
        "$AWS" --endpoint-url "$S3_URL" "$@"
}
aws_tls s3 ls s3://data/hot/ > "$OUT/ls" 2>&1
ok "$(grep -q ' h1$' "$OUT/ls" && grep -q ' h2$' "$OUT/ls"; echo $?)" \
    "awscli lists data/hot/ over https, verifying the certificate"
aws_tls s3 cp --no-progress s3://data/hot/h2 "$OUT/h2" >/dev/null 2>&1
ok "$(same_bytes "$OUT/h2" "$SRC/hot/h2"; echo $?)" "awscli reads hot/h2 over https, byte-identical"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$CERT" "$S3_URL/data/hot/h1")
is "$code" 403 "curl over https, unsigned: the server answers (403 AccessDenied)"
curl -s -o /dev/null "$S3_URL/data/hot/h1" 2>/dev/null
is "$?" 60 "curl without the certificate refuses the server's (exit 60, unknown CA)"
curl -s -m 5 -o /dev/null -w '%{http_code}' "http://$S3_ENDPOINT/data/hot/h1" > "$OUT/plain" 2>/dev/null
ok "$(grep -qv '^[1-5]' "$OUT/plain" || [ ! -s "$OUT/plain" ] || [ "$(cat "$OUT/plain")" = 000 ]; echo $?)" \
    "plain http to the TLS port gets no HTTP answer"

# ---- stagein get over https ---------------------------------------------------------------
getenv=(env STAGEIN_S3_ENDPOINT="$S3_URL" STAGEIN_S3_ACCESS_KEY="$S3_KEY" STAGEIN_S3_SECRET="$S3_SECRET"
        STAGEIN_S3_REGION="$S3_REGION")
"${getenv[@]}" STAGEIN_S3_CA_FILE="$CERT" "$STAGEIN" get --dest "$OUT/get" --endpoint \
    "http://127.0.0.1:$PORT" data/hot/h1 > "$OUT/get.out" 2>&1
ok "$(same_bytes "$OUT/get/data/hot/h1" "$SRC/hot/h1"; echo $?)" \
    "stagein get with STAGEIN_S3_CA_FILE reads hot/h1 over https, byte-identical"
sed 's/^/# /' "$OUT/get.out" | tail -2
"${getenv[@]}" "$STAGEIN" get --dest "$OUT/get2" --endpoint "http://127.0.0.1:$PORT" data/hot/h2 \
    > "$OUT/get2.out" 2>&1
ok "$([ ! -s "$OUT/get2/data/hot/h2" ] && grep -qi 'certificate' "$OUT/get2.out"; echo $?)" \
    "without the CA file it refuses the certificate ($(grep -i -m1 certificate "$OUT/get2.out" | cut -c1-100))"
is "$("${getenv[@]}" STAGEIN_S3_ENDPOINT="ftp://127.0.0.1:$S3_PORT" "$STAGEIN" get --dest "$OUT/get3" \
    --endpoint "http://127.0.0.1:$PORT" data/hot/h2 >/dev/null 2>"$OUT/get3.err"; echo $?)" 1 \
    "an S3 endpoint that is neither http:// nor https:// is an error"
ok "$(grep -q 'https' "$OUT/get3.err"; echo $?)" "saying what is accepted ($(head -1 "$OUT/get3.err" | cut -c1-100))"

# ---- virtual-host style -------------------------------------------------------------------
# boto3 in virtual-host style sends "Host: data.s3.test:PORT"; the names
# resolve to 127.0.0.1 inside the client only
vhost_run() {
    S3_PORT=$S3_PORT CERT=$CERT S3_KEY=$S3_KEY S3_SECRET=$S3_SECRET S3_REGION=$S3_REGION SRC=$SRC \
        OUT=$OUT "$PY" -c "
import os, socket, hashlib
import boto3, botocore.config
from botocore.exceptions import ClientError
real = socket.getaddrinfo
def loopback(host, *a, **k):
    if host == 's3.test' or str(host).endswith('.s3.test'):
        host = '127.0.0.1'
    return real(host, *a, **k)
socket.getaddrinfo = loopback
s3 = boto3.client('s3', endpoint_url='https://s3.test:%s' % os.environ['S3_PORT'],
                  verify=os.environ['CERT'], aws_access_key_id=os.environ['S3_KEY'],
                  aws_secret_access_key=os.environ['S3_SECRET'], region_name=os.environ['S3_REGION'],
                  config=botocore.config.Config(s3={'addressing_style': 'virtual'},
                                                signature_version='s3v4', retries={'max_attempts': 1}))
seen = []
s3.meta.events.register('before-send.s3', lambda request, **k: seen.append(request.url))
SRC = os.environ['SRC']; OUT = os.environ['OUT']
$1"
}
is "$(vhost_run "
r = s3.list_objects_v2(Bucket='data', Prefix='hot/')
print(' '.join(o['Key'] for o in r['Contents']), seen[-1].split('/')[2].split(':')[0])")" \
    "hot/h1 hot/h2 data.s3.test" "boto3 in virtual-host style lists data/hot/ at data.s3.test"
is "$(vhost_run "
h = s3.head_object(Bucket='data', Key='hot/h2')
b = s3.get_object(Bucket='data', Key='small1')['Body'].read()
print(h['ContentLength'], hashlib.sha256(b).hexdigest() == hashlib.sha256(open(SRC + '/small1', 'rb').read()).hexdigest(),
      seen[-1].startswith('https://data.s3.test:'))")" \
    "2000000 True True" "boto3 in virtual-host style heads hot/h2 and reads small1, byte-identical"
is "$(vhost_run "
try:
    s3.get_object(Bucket='nosuch', Key='small1')
except ClientError as e:
    print(e.response['Error']['Code'])")" NoSuchBucket "a virtual host naming an unknown bucket: NoSuchBucket"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$CERT" --resolve "s3.test:$S3_PORT:127.0.0.1" \
    "https://s3.test:$S3_PORT/data/hot/h1")
is "$code" 403 "Host s3.test itself stays path style (/data/hot/h1 names bucket data: 403 unsigned)"
stop

# ---- bad TLS settings -----------------------------------------------------------------------
# refused_conf DESCRIPTION REGEX S3_KEYS: stageind will not start; its error matches REGEX
refused_conf() {
    S3_CONF_EXTRA=$3
    s3_write_conf ""
    if start > "$TEST_DIR/bad.out" 2>&1; then
        track_pid "$(daemon_pid)"
        ok 1 "$1"
        stop
        return
    fi
    ok "$(grep -Eq "$2" "$TEST_DIR/bad.out" "$LOG" 2>/dev/null; echo $?)" \
        "$1 ($(grep -Eh -m1 "$2" "$TEST_DIR/bad.out" "$LOG" 2>/dev/null | head -1 | cut -c1-110))"
}
refused_conf "a certificate without a key stops stageind" "tls_cert_file and s3.tls_key_file go together" \
    "tls_cert_file = \"$CERT\";"
chmod 644 "$KEY"
refused_conf "a key file readable by others stops stageind" "s3.tls_key_file.*(mode|private|permission)" \
    "tls_cert_file = \"$CERT\"; tls_key_file = \"$KEY\";"
chmod 600 "$KEY"
printf 'not a certificate\n' > "$TEST_DIR/junk.crt"
refused_conf "a certificate file that holds no PEM stops stageind" "s3.tls_cert_file: .*no PEM certificate" \
    "tls_cert_file = \"$TEST_DIR/junk.crt\"; tls_key_file = \"$KEY\";"
refused_conf "a missing certificate file stops stageind" "s3.tls_cert_file: .*nosuch.crt" \
    "tls_cert_file = \"$TEST_DIR/nosuch.crt\"; tls_key_file = \"$KEY\";"
refused_conf "a virtual-host domain that is no DNS name stops stageind" "s3.virtual_host_domain: .*not a lower-case DNS name" \
    "virtual_host_domain = \"S3 Test\";"
finish
