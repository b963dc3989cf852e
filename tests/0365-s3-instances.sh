#!/bin/bash
# S3 clients against a site of three stageind instances (one PostgreSQL
# catalog, a private server; one cache directory), the way a load balancer
# or DNS round robin spreads them: session credentials handed out by one
# instance are good at the others, and so is a token one instance signs;
# awscli's multipart copy through one instance reads back through another;
# a multipart upload begun at one instance takes parts at the other two, lists them anywhere, completes at
# the third; an upload aborted at one instance is gone at all; rclone copies
# through one and checks through another; s3cmd lists through the third.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/pg-lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients aws boto3 rclone s3cmd
INSTANCES_SITE=t0365
INSTANCES_S3='archive_buckets = [ "upl" ];'
INSTANCES_CONF="client: { munge_socket = \"$M/sock\"; };
push: { copies = 1; aggregate_window = 0.2; };
library: { volume_dir = \"$TEST_DIR/volumes\"; drives = 1; time_scale = 0.01; };"
. "$top_srcdir/tests/instances-lib.sh"
S3_REGION=us-east-1

for n in 1 2 3; do conf_instance "$n" 500000000; done
export STAGEIN_CONF=$TEST_DIR/i1.conf
"$STAGEIN" catalog init >/dev/null
for v in V00001 W00001 W00002; do tape create "$v" --capacity 4000000000 >/dev/null; done
mkdir -p "$SRC"
head -c 300000 /dev/urandom > "$SRC/p1"
(cd "$SRC" && "$STAGEIN" tape write V00001 --bucket data --no-catalog p1 >/dev/null)
"$STAGEIN" tape import V00001 >/dev/null
define pub p1
start_all "three instances start on one catalog and one cache directory"
for n in 1 2 3; do   # each S3 port open
    for _ in $(seq 100); do
        "$PY" -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' \
            "$(cat "$TEST_DIR/s3port.$n")" 2>/dev/null && break
        sleep 0.1
    done
done
PORT=$(port_of 1)
req=$(stage '{"datasets":["pub"]}')
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$req'" COMPLETED 60)" COMPLETED \
    "dataset pub staged through instance 1"
# at_instance N: the clients' endpoint is instance N's S3 port
at_instance() {
    S3_ENDPOINT=127.0.0.1:$(cat "$TEST_DIR/s3port.$1")
    S3_URL=http://$S3_ENDPOINT
    s3_client_configs
}

# ---- session credentials from one instance, used at the others ----------------------------
code=$(curl -s -o "$TEST_DIR/creds" -w '%{http_code}' -X POST -H "X-Stagein-Munge: $(cred)" \
    "http://127.0.0.1:$(port_of 1)/api/v1/credentials")
is "$code" 201 "instance 1 hands out session credentials"
CK=$(json "$TEST_DIR/creds" 'j["accessKeyId"]') CS=$(json "$TEST_DIR/creds" 'j["secretAccessKey"]')
bad=""
for n in 1 2 3; do
    at_instance "$n"
    S3_KEY=$CK S3_SECRET=$CS aws_s3 s3 cp --no-progress s3://data/p1 "$OUT/p1.$n" >/dev/null 2>"$OUT/err.$n" &&
        same_bytes "$OUT/p1.$n" "$SRC/p1" || { bad+="i$n "; sed 's/^/# /' "$OUT/err.$n" | head -2; }
done
is "$bad" "" "awscli with them reads data/p1 through each of the three instances"

# ---- a bearer token stageind signs, from one instance, read with at the others ------------
tok=$("$STAGEIN" token --endpoint "http://127.0.0.1:$(port_of 1)" --scope "storage.read:/data" \
    --lifetime 10m 2>"$OUT/err")
ok $? "instance 1 signs a token (stagein token)"
bad=""
for n in 2 3; do
    curl -s -f -o "$OUT/t.$n" -H "Authorization: Bearer $tok" \
        "http://127.0.0.1:$(cat "$TEST_DIR/s3port.$n")/data/p1" && same_bytes "$OUT/t.$n" "$SRC/p1" ||
        bad+="i$n "
done
is "$bad" "" "a GET with it reads data/p1 through instances 2 and 3"

# ---- awscli: a multipart copy through one instance, read back through another ---------------
head -c 17000000 /dev/urandom > "$SRC/big"
at_instance 2
aws_s3 s3 cp --no-progress "$SRC/big" s3://upl/big >/dev/null 2>"$OUT/err"
ok $? "awscli s3 cp of 17 MB (multipart, 8 MB parts) through instance 2"
at_instance 3
aws_s3 s3 cp --no-progress s3://upl/big "$OUT/big" >/dev/null 2>&1 && same_bytes "$OUT/big" "$SRC/big"
ok $? "... reads back byte-identical through instance 3"

# ---- boto3: one multipart upload over three instances -------------------------------------
res=$(S3_PORT1=$(cat "$TEST_DIR/s3port.1") S3_PORT2=$(cat "$TEST_DIR/s3port.2") \
      S3_PORT3=$(cat "$TEST_DIR/s3port.3") boto3_run "$BOTO3_CHECKS
import hashlib
def client(n):
    return boto3.client('s3', endpoint_url='http://127.0.0.1:%s' % os.environ['S3_PORT%d' % n],
                        aws_access_key_id=os.environ['S3_KEY'], aws_secret_access_key=os.environ['S3_SECRET'],
                        region_name='us-east-1',
                        config=botocore.config.Config(s3={'addressing_style': 'path'}, signature_version='s3v4',
                                                      retries={'max_attempts': 1}))
c1, c2, c3 = client(1), client(2), client(3)
p1, p2 = os.urandom(5 * 1024 * 1024), os.urandom(1234567)
up = c1.create_multipart_upload(Bucket='upl', Key='spread', Metadata={'origin': 'i1'})['UploadId']
e1 = attempt('part 1 through instance 2', lambda: c2.upload_part(Bucket='upl', Key='spread', UploadId=up, PartNumber=1, Body=p1))
e2 = attempt('part 2 through instance 3', lambda: c3.upload_part(Bucket='upl', Key='spread', UploadId=up, PartNumber=2, Body=p2))
parts = attempt('ListParts through instance 1', lambda: c1.list_parts(Bucket='upl', Key='spread', UploadId=up))
check(parts is not None and [p['PartNumber'] for p in parts.get('Parts', [])] == [1, 2],
      'instance 1 lists both parts', parts)
ups = attempt('ListMultipartUploads through instance 2', lambda: c2.list_multipart_uploads(Bucket='upl'))
check(ups is not None and up in [u['UploadId'] for u in ups.get('Uploads', [])], 'instance 2 lists the upload', ups)
if e1 and e2:
    done = attempt('CompleteMultipartUpload through instance 3', lambda: c3.complete_multipart_upload(
        Bucket='upl', Key='spread', UploadId=up,
        MultipartUpload={'Parts': [{'PartNumber': 1, 'ETag': e1['ETag']}, {'PartNumber': 2, 'ETag': e2['ETag']}]}))
    want = hashlib.md5(hashlib.md5(p1).digest() + hashlib.md5(p2).digest()).hexdigest() + '-2'
    check(done is not None and done['ETag'].strip('\"') == want, 'the ETag is the multipart one', done)
    got = attempt('GET through instance 1', lambda: c1.get_object(Bucket='upl', Key='spread'))
    check(got is not None and got['Body'].read() == p1 + p2, 'the object reads back whole through instance 1')
    check(got is not None and got['Metadata'].get('origin') == 'i1', 'with the metadata given at instance 1',
          got and got['Metadata'])
ab = c2.create_multipart_upload(Bucket='upl', Key='dropped')['UploadId']
c2.upload_part(Bucket='upl', Key='dropped', UploadId=ab, PartNumber=1, Body=b'x' * 1000)
attempt('AbortMultipartUpload through instance 3', lambda: c3.abort_multipart_upload(Bucket='upl', Key='dropped', UploadId=ab))
expect_error('a part for it through instance 1: NoSuchUpload', 'NoSuchUpload 404',
             lambda: c1.upload_part(Bucket='upl', Key='dropped', UploadId=ab, PartNumber=2, Body=b'y'))
left = c1.list_multipart_uploads(Bucket='upl').get('Uploads', [])
check(left == [], 'no upload is left in progress', left)
print('done')")
boto3_tap "$res"

# ---- rclone through one instance, checked through another; s3cmd through the third ---------
mkdir -p "$SRC/tree/sub"
for f in a b sub/c; do head -c $((RANDOM * 10 + 1)) /dev/urandom > "$SRC/tree/$f"; done
at_instance 1
rclone_cli copy "$SRC/tree" "$(rclone_remote upl/tree)" 2>"$OUT/err"
ok $? "rclone copy of a directory through instance 1"
at_instance 2
rclone_cli check "$SRC/tree" "$(rclone_remote upl/tree)" >/dev/null 2>"$OUT/err"
ok $? "rclone check through instance 2: sizes and hashes match"
at_instance 3
out=$(s3cmd_cli ls -r s3://upl/tree/ 2>&1)
is "$(echo "$out" | grep -c "s3://upl/tree/")" 3 "s3cmd ls -r through instance 3 lists the three files"
finish
