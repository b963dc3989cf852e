#!/bin/bash
# What standard S3 clients do beyond the basics (issue 15), each finding
# checked with the client that hit it (boto3, awscli, s3cmd, rclone) and
# with a raw request (tests/s3raw.py) for the status, error code and
# headers: sub-resources by allow-list, GET/HEAD ?partNumber, bucket-to-bucket
# copies (GetObjectTagging, UploadPartCopy), copy and PUT preconditions,
# NoSuchBucket for writes, the pin lifetime cap of RestoreObject, an abort
# racing an UploadPart, ListMultipartUploads markers, stored standard headers
# and user metadata, <Region> in wrong-region errors, transparent-recall
# buckets' storage class, and smaller answers.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3 aws

S3_CONF_EXTRA='transparent_recall_buckets = [ "tdata" ]; transparent_recall_max_wait = 20;'
STAGEIND_CONF_EXTRA="pin_lifetime_max = 864000;"
s3_setup A
s3_start_ok "stageind starts with its S3 port"

# boto3_checks SCRIPT: runs SCRIPT under boto3_run with check(cond, desc,
# detail) and expect_error(desc, "Code status", fn); one TAP line per check
boto3_checks() {
    local results
    results=$(boto3_run '
'"$BOTO3_CHECKS"'
md5 = lambda b: hashlib.md5(b).hexdigest()
'"$1"'
print("done")
' 2>&1)
    boto3_tap "$results"
}

# raw WANT DESC -- s3raw ARGS: "STATUS CODE" as wanted
raw() {
    local want=$1 desc=$2; shift 3
    is "$(s3raw "$@" 2>/dev/null)" "$want" "raw: $desc"
}
# raw_header WANT_REGEX HEADER DESC -- s3raw ARGS: "STATUS CODE" and a header
raw_header() {
    local want=$1 header=$2 desc=$3; shift 4
    local got
    got="$(s3raw "$@" --show-header "$header" 2>"$OUT/raw.err") $(cat "$OUT/raw.err")"
    if grep -qE -- "$want" <<<"$got"; then ok 0 "raw: $desc"; else ok 1 "raw: $desc"; diag "got: $got (want /$want/)"; fi
}

# ---- 1: sub-resources are an allow-list; GetBucketVersioning answers unversioned
boto3_checks '
expect_error("put_bucket_versioning on an unknown bucket creates nothing: 501", "NotImplemented 501",
    lambda: s3.put_bucket_versioning(Bucket="versioning-typo-bkt", VersioningConfiguration={"Status": "Enabled"}))
names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
check("versioning-typo-bkt" not in names, "the bucket of put_bucket_versioning is not created", names)
expect_error("put_bucket_versioning on an existing bucket: 501", "NotImplemented 501",
    lambda: s3.put_bucket_versioning(Bucket="upl", VersioningConfiguration={"Status": "Enabled"}))
v = attempt("get_bucket_versioning", lambda: s3.get_bucket_versioning(Bucket="upl"))
check(v is not None and "Status" not in v and v["ResponseMetadata"]["HTTPStatusCode"] == 200,
      "get_bucket_versioning: 200, no Status (unversioned)", v)
expect_error("get_bucket_versioning of an unknown bucket: NoSuchBucket", "NoSuchBucket 404",
    lambda: s3.get_bucket_versioning(Bucket="no-such-bucket-1"))
expect_error("get_bucket_acl: 501", "NotImplemented 501", lambda: s3.get_bucket_acl(Bucket="upl"))
expect_error("put_object_acl: 501", "NotImplemented 501",
    lambda: s3.put_object_acl(Bucket="data", Key="small1", ACL="private"))
'
raw "501 NotImplemented" "PUT ?versioning: 501" -- request PUT /rawbkt1 --query versioning= \
    --data '<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>'
raw "404 -" "PUT ?versioning created no bucket (HEAD: 404)" -- request HEAD /rawbkt1
raw "501 NotImplemented" "GET ?foo (an unknown parameter): 501" -- request GET /data --query foo=bar
raw "501 NotImplemented" "DELETE ?tagging: 501, the object stays" -- request DELETE /upl/x --query tagging=
raw "501 NotImplemented" "PUT ?acl on a bucket: 501" -- request PUT /upl --query acl= --data x
raw_header "200 -" Content-Type "GET ?versioning: 200" -- request GET /upl --query versioning=

# ---- 2: GET/HEAD ?partNumber serve that part (206, x-amz-mp-parts-count)
boto3_checks '
parts = [os.urandom(5 * 1024 * 1024), os.urandom(5 * 1024 * 1024), os.urandom(777777)]
mpu = s3.create_multipart_upload(Bucket="upl", Key="mp3")
etags = [s3.upload_part(Bucket="upl", Key="mp3", UploadId=mpu["UploadId"], PartNumber=i + 1, Body=p)["ETag"]
         for i, p in enumerate(parts)]
s3.complete_multipart_upload(Bucket="upl", Key="mp3", UploadId=mpu["UploadId"],
    MultipartUpload={"Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]})
open(TEST_DIR + "/mp3", "wb").write(b"".join(parts))
r = attempt("get part 2", lambda: s3.get_object(Bucket="upl", Key="mp3", PartNumber=2))
check(r is not None and r["ResponseMetadata"]["HTTPStatusCode"] == 206 and r["Body"].read() == parts[1]
      and r.get("PartsCount") == 3 and r["ContentRange"] == "bytes 5242880-10485759/11263537",
      "get_object PartNumber=2: 206, that part, PartsCount 3, its Content-Range", r and {k: r.get(k) for k in ("ContentRange", "PartsCount", "ContentLength")})
r = attempt("get part 3", lambda: s3.get_object(Bucket="upl", Key="mp3", PartNumber=3))
check(r is not None and r["Body"].read() == parts[2], "get_object PartNumber=3: the last part")
h = attempt("head part 1", lambda: s3.head_object(Bucket="upl", Key="mp3", PartNumber=1))
check(h is not None and h["ContentLength"] == 5242880 and h.get("PartsCount") == 3,
      "head_object PartNumber=1: its length, PartsCount 3", h)
expect_error("get_object PartNumber=4 of 3 parts: InvalidPartNumber", "InvalidPartNumber 416",
    lambda: s3.get_object(Bucket="upl", Key="mp3", PartNumber=4))
one = os.urandom(1000)
s3.put_object(Bucket="upl", Key="single", Body=one)
r = attempt("single part 1", lambda: s3.get_object(Bucket="upl", Key="single", PartNumber=1))
check(r is not None and r["Body"].read() == one and "PartsCount" not in r,
      "get_object PartNumber=1 of a single-part object: the whole object", r)
expect_error("get_object PartNumber=2 of a single-part object: InvalidPartNumber", "InvalidPartNumber 416",
    lambda: s3.get_object(Bucket="upl", Key="single", PartNumber=2))
'
raw_header "^206 - x-amz-mp-parts-count: 3" x-amz-mp-parts-count "GET ?partNumber=2: 206 and x-amz-mp-parts-count" -- \
    request GET /upl/mp3 --query partNumber=2 --out "$OUT/part2"
is "$(stat -c %s "$OUT/part2")" 5242880 "raw: GET ?partNumber=2: the part's 5242880 bytes"
raw "416 InvalidPartNumber" "GET ?partNumber=9: 416 InvalidPartNumber" -- request GET /upl/mp3 --query partNumber=9
raw "400 InvalidRequest" "GET ?partNumber with a Range: 400 InvalidRequest" -- \
    request GET /upl/mp3 --query partNumber=1 -H "Range: bytes=0-10"
raw "400 InvalidArgument" "GET ?partNumber=0: 400 InvalidArgument" -- request GET /upl/mp3 --query partNumber=0

# ---- 3: bucket-to-bucket copies over 8 MiB (GetObjectTagging, UploadPartCopy)
run_ok "awscli: aws s3 cp s3://upl/mp3 s3://arch/mp3-copy (multipart copy, tags copied)" -- \
    aws_s3 s3 cp --no-progress s3://upl/mp3 s3://arch/mp3-copy
aws_s3 s3 cp --no-progress s3://arch/mp3-copy "$OUT/mp3-copy" >/dev/null 2>&1
ok "$(same_bytes "$OUT/mp3-copy" "$TEST_DIR/mp3"; echo $?)" "awscli: the copy is byte-identical"
run_ok "awscli: aws s3 cp --copy-props none (UploadPartCopy alone)" -- \
    aws_s3 s3 cp --no-progress --copy-props none s3://upl/mp3 s3://arch/mp3-copy2
aws_s3 s3 cp --no-progress s3://arch/mp3-copy2 "$OUT/mp3-copy2" >/dev/null 2>&1
ok "$(same_bytes "$OUT/mp3-copy2" "$TEST_DIR/mp3"; echo $?)" "awscli: that copy is byte-identical"
boto3_checks '
from boto3.s3.transfer import TransferConfig
cfg = TransferConfig(multipart_threshold=8 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
attempt("s3.copy", lambda: s3.copy({"Bucket": "upl", "Key": "mp3"}, "arch", "mp3-boto3", Config=cfg))
body = attempt("get copy", lambda: s3.get_object(Bucket="arch", Key="mp3-boto3")["Body"].read())
check(body == open(TEST_DIR + "/mp3", "rb").read(), "s3.copy (managed, UploadPartCopy): byte-identical")
t = attempt("tagging", lambda: s3.get_object_tagging(Bucket="upl", Key="mp3"))
check(t is not None and t["TagSet"] == [], "get_object_tagging: an empty TagSet", t)
expect_error("get_object_tagging of a missing key: NoSuchKey", "NoSuchKey 404",
    lambda: s3.get_object_tagging(Bucket="upl", Key="nope"))
mpu = s3.create_multipart_upload(Bucket="arch", Key="ranged")
r = attempt("upload_part_copy", lambda: s3.upload_part_copy(Bucket="arch", Key="ranged", UploadId=mpu["UploadId"], PartNumber=1,
            CopySource={"Bucket": "upl", "Key": "mp3"}, CopySourceRange="bytes=100-5243979"))
src = open(TEST_DIR + "/mp3", "rb").read()
check(r is not None and r["CopyPartResult"]["ETag"] == "\"%s\"" % md5(src[100:5243980]),
      "upload_part_copy with a range: the ETag of those bytes", r)
expect_error("upload_part_copy with a range past the end: InvalidRange", "InvalidRange 416",
    lambda: s3.upload_part_copy(Bucket="arch", Key="ranged", UploadId=mpu["UploadId"], PartNumber=2,
            CopySource={"Bucket": "upl", "Key": "mp3"}, CopySourceRange="bytes=0-99999999"))
r2 = attempt("upload_part", lambda: s3.upload_part(Bucket="arch", Key="ranged", UploadId=mpu["UploadId"], PartNumber=2, Body=b"tail"))
attempt("complete ranged", lambda: s3.complete_multipart_upload(Bucket="arch", Key="ranged", UploadId=mpu["UploadId"],
    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": r["CopyPartResult"]["ETag"]}, {"PartNumber": 2, "ETag": r2["ETag"]}]}))
got = attempt("get ranged", lambda: s3.get_object(Bucket="arch", Key="ranged")["Body"].read())
check(got == src[100:5243980] + b"tail", "the object of a copied part and an uploaded one is byte-identical")
'
raw "200 -" "GET ?tagging: 200" -- request GET /upl/mp3 --query tagging=
raw "404 NoSuchUpload" "UploadPartCopy into an upload that does not exist: 404 NoSuchUpload" -- \
    request PUT /arch/x --query "partNumber=1&uploadId=$(printf '%032d' 0)" -H "x-amz-copy-source: upl/mp3"

# ---- 4: copy and PUT preconditions
boto3_checks '
e = s3.head_object(Bucket="upl", Key="single")["ETag"]
one_single = s3.get_object(Bucket="upl", Key="single")["Body"].read()
expect_error("copy_object CopySourceIfMatch with another ETag: 412", "PreconditionFailed 412",
    lambda: s3.copy_object(Bucket="arch", Key="c1", CopySource={"Bucket": "upl", "Key": "single"},
                           CopySourceIfMatch="\"0123456789abcdef0123456789abcdef\""))
expect_error("copy_object CopySourceIfNoneMatch with its ETag: 412", "PreconditionFailed 412",
    lambda: s3.copy_object(Bucket="arch", Key="c1", CopySource={"Bucket": "upl", "Key": "single"}, CopySourceIfNoneMatch=e))
expect_error("copy_object CopySourceIfModifiedSince in the future: 412", "PreconditionFailed 412",
    lambda: s3.copy_object(Bucket="arch", Key="c1", CopySource={"Bucket": "upl", "Key": "single"},
                           CopySourceIfModifiedSince="2100-01-01T00:00:00Z"))
expect_error("upload_part_copy CopySourceIfMatch with another ETag: 412", "PreconditionFailed 412",
    lambda: s3.upload_part_copy(Bucket="arch", Key="c1", UploadId=s3.create_multipart_upload(Bucket="arch", Key="c1")["UploadId"],
            PartNumber=1, CopySource={"Bucket": "upl", "Key": "single"}, CopySourceIfMatch="\"00\""))
expect_error("the refused copies made nothing", "404 404",
    lambda: s3.head_object(Bucket="arch", Key="c1"))
r = attempt("copy if-match", lambda: s3.copy_object(Bucket="arch", Key="c2", CopySource={"Bucket": "upl", "Key": "single"}, CopySourceIfMatch=e))
check(r is not None, "copy_object CopySourceIfMatch with its ETag: copied")
# botocore 1.26 has no IfNoneMatch/IfMatch for put_object: the headers are added as a newer SDK sends them
def with_headers(h):
    def add(request, **kw):
        for n, v in h.items():
            request.headers[n] = v
    s3.meta.events.register_first("before-sign.s3.PutObject", add)
    return add
add = with_headers({"If-None-Match": "*"})
expect_error("put_object If-None-Match: * over an existing key: 412", "PreconditionFailed 412",
    lambda: s3.put_object(Bucket="upl", Key="single", Body=b"overwritten"))
r = attempt("put if-none-match new", lambda: s3.put_object(Bucket="upl", Key="fresh", Body=b"fresh"))
check(r is not None, "put_object If-None-Match: * of a new key: stored")
s3.meta.events.unregister("before-sign.s3.PutObject", add)
check(s3.get_object(Bucket="upl", Key="single")["Body"].read() == one_single, "the refused PUT left the object as it was")
add = with_headers({"If-Match": "\"0123456789abcdef0123456789abcdef\""})
expect_error("put_object If-Match with another ETag: 412", "PreconditionFailed 412",
    lambda: s3.put_object(Bucket="upl", Key="single", Body=b"overwritten"))
s3.meta.events.unregister("before-sign.s3.PutObject", add)
add = with_headers({"If-Match": e})
r = attempt("put if-match", lambda: s3.put_object(Bucket="upl", Key="single", Body=b"replaced"))
check(r is not None, "put_object If-Match with its ETag: replaced")
s3.meta.events.unregister("before-sign.s3.PutObject", add)
'
raw "412 PreconditionFailed" "PUT If-None-Match: * over an existing key: 412" -- \
    request PUT /upl/single -H "If-None-Match: *" --data x
raw "404 NoSuchKey" "PUT If-Match of a missing key: 404 NoSuchKey" -- \
    request PUT /upl/nokey -H 'If-Match: "0123456789abcdef0123456789abcdef"' --data x
raw "412 PreconditionFailed" "CopyObject x-amz-copy-source-if-none-match: * of an existing source: 412" -- \
    request PUT /arch/c3 -H "x-amz-copy-source: upl/single" -H "x-amz-copy-source-if-none-match: *"

# ---- 5: writes to a bucket that does not exist: NoSuchBucket
boto3_checks '
for desc, fn in [
    ("put_object", lambda: s3.put_object(Bucket="no-such-bkt", Key="k", Body=b"x")),
    ("delete_object", lambda: s3.delete_object(Bucket="no-such-bkt", Key="k")),
    ("delete_objects", lambda: s3.delete_objects(Bucket="no-such-bkt", Delete={"Objects": [{"Key": "k"}]})),
    ("create_multipart_upload", lambda: s3.create_multipart_upload(Bucket="no-such-bkt", Key="k")),
    ("list_multipart_uploads", lambda: s3.list_multipart_uploads(Bucket="no-such-bkt")),
    ("copy_object", lambda: s3.copy_object(Bucket="no-such-bkt", Key="k", CopySource={"Bucket": "upl", "Key": "single"})),
    ("restore_object", lambda: s3.restore_object(Bucket="no-such-bkt", Key="k", RestoreRequest={"Days": 1})),
]:
    expect_error(desc + " into a bucket that does not exist: NoSuchBucket", "NoSuchBucket 404", fn)
expect_error("put_object into a read-only catalog bucket: AccessDenied", "AccessDenied 403",
    lambda: s3.put_object(Bucket="data", Key="k", Body=b"x"))
expect_error("copy_object from a source bucket that does not exist: NoSuchBucket", "NoSuchBucket 404",
    lambda: s3.copy_object(Bucket="upl", Key="k", CopySource={"Bucket": "no-such-bkt", "Key": "k"}))
'
raw "404 NoSuchBucket" "PUT into a bucket that does not exist: 404 NoSuchBucket" -- request PUT /no-such-bkt/k --data x
raw "404 NoSuchBucket" "POST ?uploads into a bucket that does not exist: 404 NoSuchBucket" -- \
    request POST /no-such-bkt/k --query uploads=
raw "403 AccessDenied" "PUT into a read-only bucket: 403 AccessDenied" -- request PUT /data/k --data x

# ---- 7: AbortMultipartUpload while an UploadPart is in flight: 404 NoSuchUpload, no server path
boto3_checks '
import io, socket, threading
sys.path.insert(0, os.path.dirname(os.environ["S3RAW"]))
import s3raw
class AbortHalfway(io.BytesIO):
    """Aborts the upload when the sending pass (botocore reads it once to hash it) is half way."""
    def __init__(self, data, upload_id):
        super().__init__(data); self.passes = 0; self.upload_id = upload_id; self.size = len(data)
    def seek(self, *a):
        if a and a[0] == 0: self.passes += 1
        return super().seek(*a)
    def read(self, n=-1):
        if self.passes >= 2 and self.tell() >= self.size // 2 and self.upload_id:
            abort_client.abort_multipart_upload(Bucket="upl", Key="raced", UploadId=self.upload_id)
            self.upload_id = None
        return super().read(n)
abort_client = boto3.client("s3", endpoint_url=os.environ["S3_URL"], aws_access_key_id=os.environ["S3_KEY"],
    aws_secret_access_key=os.environ["S3_SECRET"], region_name="us-east-1",
    config=botocore.config.Config(s3={"addressing_style": "path"}))
mpu = s3.create_multipart_upload(Bucket="upl", Key="raced")
try:
    s3.upload_part(Bucket="upl", Key="raced", UploadId=mpu["UploadId"], PartNumber=1,
                   Body=AbortHalfway(os.urandom(8 * 1024 * 1024), mpu["UploadId"]))
    check(False, "upload_part aborted half way: 404 NoSuchUpload", "200")
except ClientError as e:
    msg = e.response["Error"].get("Message", "")
    check(code_of(e) == "NoSuchUpload 404" and "/" not in msg, "upload_part aborted half way: 404 NoSuchUpload, no path in the message", code_of(e) + " " + msg)
# raw: the headers and half the body, the abort, then the rest
mpu = s3.create_multipart_upload(Bucket="upl", Key="raced2")
body = os.urandom(4 * 1024 * 1024)
args = type("A", (), {"endpoint": os.environ["S3_URL"][7:], "key": os.environ["S3_KEY"], "secret": os.environ["S3_SECRET"],
                      "region": "us-east-1", "date_offset": 0, "payload_hash": None})()
target, headers = s3raw._sign(args, "PUT", "/upl/raced2", "partNumber=1&uploadId=" + mpu["UploadId"], [], body)
head = "PUT %s HTTP/1.1\r\nHost: %s\r\n" % (target, args.endpoint) + "".join("%s: %s\r\n" % h for h in headers if h[0].lower() not in ("host", "content-length"))
head += "Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
host, port = args.endpoint.rsplit(":", 1)
sock = socket.create_connection((host, int(port)))
sock.sendall(head.encode() + body[:len(body) // 2])
time.sleep(0.3)
s3.abort_multipart_upload(Bucket="upl", Key="raced2", UploadId=mpu["UploadId"])
sock.sendall(body[len(body) // 2:])
status, hdrs, answer = s3raw._read_answer(sock, 10)
sock.close()
check(status == 404 and b"<Code>NoSuchUpload</Code>" in answer and b"s3-multipart" not in answer and b"/tmp" not in answer,
      "raw: a part whose upload is aborted while it arrives: 404 NoSuchUpload, no server path", (status, answer[:300]))
lu = s3.list_multipart_uploads(Bucket="upl")
check(not [u for u in lu.get("Uploads", []) if u["Key"].startswith("raced")], "no raced upload is left", lu)
'

# ---- 9: standard headers and x-amz-meta-* stored with the object
boto3_checks '
kw = dict(ContentType="text/csv", CacheControl="max-age=60", ContentDisposition="attachment; filename=\"a.csv\"",
          ContentEncoding="gzip", ContentLanguage="de", Expires="Wed, 21 Oct 2037 07:28:00 GMT",
          Metadata={"mtime": "1700000000.5", "Owner-Note": "plain ok"})
s3.put_object(Bucket="upl", Key="meta/put", Body=b"a,b\n", **kw)
def same_meta(h, desc):
    got = {k: h.get(k) for k in ("ContentType", "CacheControl", "ContentDisposition", "ContentEncoding", "ContentLanguage")}
    want = {k: kw[k] for k in got}
    check(got == want and h.get("Metadata") == {"mtime": "1700000000.5", "owner-note": "plain ok"} and
          h["ResponseMetadata"]["HTTPHeaders"].get("expires") == kw["Expires"], desc, (got, h.get("Metadata"), h["ResponseMetadata"]["HTTPHeaders"].get("expires")))
same_meta(s3.head_object(Bucket="upl", Key="meta/put"), "put_object headers and Metadata: head_object returns them")
same_meta(s3.get_object(Bucket="upl", Key="meta/put"), "get_object returns them too")
r = s3.get_object(Bucket="upl", Key="meta/put", ResponseContentType="application/x-over")
check(r["ContentType"] == "application/x-over" and r["CacheControl"] == "max-age=60",
      "response-content-type overrides the stored Content-Type, the others stay", r["ContentType"])
check(s3.head_object(Bucket="upl", Key="single")["ContentType"] == "binary/octet-stream",
      "an object stored without Content-Type: binary/octet-stream")
s3.copy_object(Bucket="arch", Key="meta/copy", CopySource={"Bucket": "upl", "Key": "meta/put"})
same_meta(s3.head_object(Bucket="arch", Key="meta/copy"), "copy_object (MetadataDirective COPY): the headers of the source")
s3.copy_object(Bucket="arch", Key="meta/copy", CopySource={"Bucket": "upl", "Key": "meta/put"},
               MetadataDirective="REPLACE", ContentType="text/plain", Metadata={"new": "1"})
h = s3.head_object(Bucket="arch", Key="meta/copy")
check(h["ContentType"] == "text/plain" and h["Metadata"] == {"new": "1"} and "CacheControl" not in h,
      "copy_object REPLACE: the headers of the request only", h)
s3.copy_object(Bucket="upl", Key="meta/put", CopySource={"Bucket": "upl", "Key": "meta/put"},
               MetadataDirective="REPLACE", ContentType="text/tab-separated-values", Metadata={"mtime": "1800000000"})
h = s3.head_object(Bucket="upl", Key="meta/put")
check(h["ContentType"] == "text/tab-separated-values" and h["Metadata"] == {"mtime": "1800000000"},
      "copy_object onto itself with REPLACE: the metadata changes", h)
check(s3.get_object(Bucket="upl", Key="meta/put")["Body"].read() == b"a,b\n", "... and the bytes stay")
expect_error("3 KB of user metadata: MetadataTooLarge", "MetadataTooLarge 400",
    lambda: s3.put_object(Bucket="upl", Key="meta/big", Body=b"x", Metadata={"a": "v" * 3000}))
expect_error("the refused PUT stored nothing", "404 404", lambda: s3.head_object(Bucket="upl", Key="meta/big"))
mpu = s3.create_multipart_upload(Bucket="upl", Key="meta/mp", ContentType="video/mp4", Metadata={"md5chksum": "abc"})
p1 = s3.upload_part(Bucket="upl", Key="meta/mp", UploadId=mpu["UploadId"], PartNumber=1, Body=b"x" * 100)
s3.complete_multipart_upload(Bucket="upl", Key="meta/mp", UploadId=mpu["UploadId"],
    MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": p1["ETag"]}]})
h = s3.head_object(Bucket="upl", Key="meta/mp")
check(h["ContentType"] == "video/mp4" and h["Metadata"] == {"md5chksum": "abc"},
      "create_multipart_upload headers: the completed object has them", h)
expect_error("create_multipart_upload with 3 KB of metadata: MetadataTooLarge", "MetadataTooLarge 400",
    lambda: s3.create_multipart_upload(Bucket="upl", Key="meta/big", Metadata={"a": "v" * 3000}))
'
raw "200 -" "PUT with x-amz-meta-Color and Content-Type: 200" -- \
    request PUT /upl/meta/raw -H "x-amz-meta-Color: blue" -H "Content-Type: image/png" --data png
raw_header "^200 - x-amz-meta-color: blue" x-amz-meta-color "HEAD returns x-amz-meta-color" -- request HEAD /upl/meta/raw
raw_header "^200 - Content-Type: image/png" Content-Type "GET returns the stored Content-Type" -- request GET /upl/meta/raw
raw "400 MetadataTooLarge" "PUT with 3 KB of x-amz-meta-*: 400 MetadataTooLarge" -- \
    request PUT /upl/meta/raw2 -H "x-amz-meta-big: $(head -c 3000 /dev/zero | tr '\0' v)" --data x
stop
s3_start_ok "stageind restarts"
raw_header "^200 - x-amz-meta-color: blue" x-amz-meta-color "after a restart HEAD still returns x-amz-meta-color" -- \
    request HEAD /upl/meta/raw
if command -v rclone >/dev/null 2>&1; then
    mkdir -p "$OUT/rc/sub"
    head -c $((12 * 1024 * 1024 + 5)) /dev/urandom > "$OUT/rc/big.bin"
    head -c 1000 /dev/urandom > "$OUT/rc/sub/small.bin"
    touch -d '2020-02-02 02:02:02' "$OUT/rc/big.bin" "$OUT/rc/sub/small.bin"
    run_ok "rclone: copy a tree up (a 12 MiB file in 5 MiB parts)" -- \
        rclone_cli copy --s3-upload-cutoff 5M --s3-chunk-size 5M "$OUT/rc" "$(rclone_remote upl/rc)"
    out=$(rclone_cli check "$OUT/rc" "$(rclone_remote upl/rc)" 2>&1)
    ok "$(grep -q '0 differences found' <<<"$out" && ! grep -q 'could not be checked' <<<"$out"; echo $?)" \
        "rclone: check (the multipart object too, by its stored md5): no differences, every hash checked"
    grep -q 'could not be checked' <<<"$out" && diag "$out"
    rclone_cli sync --s3-upload-cutoff 5M --s3-chunk-size 5M "$OUT/rc" "$(rclone_remote upl/rc)" >/dev/null 2>&1
    out=$(rclone_cli sync -v --s3-upload-cutoff 5M --s3-chunk-size 5M "$OUT/rc" "$(rclone_remote upl/rc)" 2>&1)
    ok "$(! grep -qE 'Updated modification time|Copied' <<<"$out"; echo $?)" \
        "rclone: a second sync settles (nothing copied, no modification time updated)"
    grep -qE 'Updated modification time|Copied' <<<"$out" && diag "$(head -5 <<<"$out")"
else
    tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP rclone is not installed (package rclone)"
fi

# ---- 6: RestoreObject Days within stageind.pin_lifetime_max (864000 s here: 10 days)
boto3_checks '
expect_error("restore_object Days=36500: InvalidArgument", "InvalidArgument 400",
    lambda: s3.restore_object(Bucket="data", Key="cold/c1", RestoreRequest={"Days": 36500}))
r = attempt("restore 10 days", lambda: s3.restore_object(Bucket="data", Key="cold/c1", RestoreRequest={"Days": 10}))
check(r is not None and r["ResponseMetadata"]["HTTPStatusCode"] in (200, 202), "restore_object Days=10 (the limit): accepted", r)
'
before=$(sql "SELECT count(*) FROM requests")
raw "400 InvalidArgument" "POST ?restore Days=11: 400 InvalidArgument" -- request POST /data/cold/c2 --query restore= \
    --data '<RestoreRequest><Days>11</Days></RestoreRequest>'
is "$(sql "SELECT count(*) FROM requests")" "$before" "raw: the refused restore made no stage request"
if command -v s3cmd >/dev/null 2>&1; then
    # s3cmd retries a refused request signed the old way (SigV2, refused as
    # such): it fails with a 400 either way
    before=$(sql "SELECT count(*) FROM requests")
    out=$(s3cmd_cli restore --restore-days=36500 s3://data/cold/c2 2>&1)
    rc=$?
    ok "$([ $rc != 0 ] && grep -q '400' <<<"$out" && [ "$(sql "SELECT count(*) FROM requests")" = "$before" ]; echo $?)" \
        "s3cmd: restore --restore-days=36500 fails with a 400 and makes no stage request"
    grep -q 400 <<<"$out" || diag "rc $rc: $out"
else
    tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP s3cmd is not installed (package s3cmd)"
fi

# ---- 8: ListMultipartUploads and ListParts pagination markers
boto3_checks '
ids = [s3.create_multipart_upload(Bucket="arch", Key=k)["UploadId"] for k in ("lmu/a", "lmu/b", "lmu/b", "lmu/c")]
pages = list(s3.get_paginator("list_multipart_uploads").paginate(Bucket="arch", Prefix="lmu/", PaginationConfig={"PageSize": 1}))
got = [(u["Key"], u["UploadId"]) for p in pages for u in p.get("Uploads", [])]
check(sorted(got) == sorted(zip(("lmu/a", "lmu/b", "lmu/b", "lmu/c"), ids)) and len(pages) == 4,
      "list_multipart_uploads paginator, 1 a page: all 4 uploads over 4 pages", (got, len(pages)))
p = s3.list_multipart_uploads(Bucket="arch", Prefix="lmu/", MaxUploads=2)
check(p["IsTruncated"] and p.get("NextKeyMarker") == "lmu/b" and p.get("NextUploadIdMarker") in ids,
      "a truncated page names NextKeyMarker and NextUploadIdMarker", p)
for k, i in zip(("lmu/a", "lmu/b", "lmu/b", "lmu/c"), ids):
    s3.abort_multipart_upload(Bucket="arch", Key=k, UploadId=i)
mpu = s3.create_multipart_upload(Bucket="arch", Key="lp")
for n in (1, 2, 3):
    s3.upload_part(Bucket="arch", Key="lp", UploadId=mpu["UploadId"], PartNumber=n, Body=b"p")
pages = list(s3.get_paginator("list_parts").paginate(Bucket="arch", Key="lp", UploadId=mpu["UploadId"], PaginationConfig={"PageSize": 1}))
check([q["PartNumber"] for p in pages for q in p.get("Parts", [])] == [1, 2, 3], "list_parts paginator, 1 a page: parts 1, 2, 3", pages)
s3.abort_multipart_upload(Bucket="arch", Key="lp", UploadId=mpu["UploadId"])
'
raw "200 -" "GET ?uploads&key-marker&upload-id-marker: 200" -- request GET /arch --query "uploads=&key-marker=lmu%2Fa&upload-id-marker=$(printf '%032d' 0)"

# ---- 10: a request signed for another region names this one (<Region>, x-amz-bucket-region)
s3raw --region eu-west-1 request GET /upl --out "$OUT/region.xml" --show-header x-amz-bucket-region >"$OUT/region.out" 2>&1
is "$(tr '\n' ' ' <"$OUT/region.out")" "x-amz-bucket-region: us-east-1 400 AuthorizationHeaderMalformed " \
    "raw: signed for eu-west-1: 400 AuthorizationHeaderMalformed with x-amz-bucket-region"
ok "$(grep -q '<Region>us-east-1</Region>' "$OUT/region.xml"; echo $?)" "raw: ... and <Region>us-east-1</Region> in the error"
boto3_checks '
other = boto3.client("s3", endpoint_url=os.environ["S3_URL"], aws_access_key_id=os.environ["S3_KEY"],
    aws_secret_access_key=os.environ["S3_SECRET"], region_name="eu-west-1",
    config=botocore.config.Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
try:
    other.head_object(Bucket="upl", Key="single")
    check(True, "a client configured for eu-west-1 re-signs for us-east-1 by itself")
except ClientError as e:
    check(False, "a client configured for eu-west-1 re-signs for us-east-1 by itself", code_of(e))
'
out=$(S3_REGION=eu-west-1 aws_s3 s3 ls s3://upl/single 2>&1)
ok "$(grep -q ' single$' <<<"$out"; echo $?)" "awscli with region eu-west-1: re-signs for us-east-1 and lists"
grep -q ' single$' <<<"$out" || diag "$out"
if command -v s3cmd >/dev/null 2>&1; then
    sed 's/^bucket_location = .*/bucket_location = eu-west-1/' "$S3CMD_CFG" > "$OUT/s3cmd-eu.cfg"
    out=$(s3cmd -c "$OUT/s3cmd-eu.cfg" ls s3://upl/single 2>&1)
    ok "$(grep -q 's3://upl/single' <<<"$out"; echo $?)" "s3cmd with bucket_location = eu-west-1: re-signs for us-east-1 and lists"
    grep -q 's3://upl/single' <<<"$out" || diag "$out"
else
    tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP s3cmd is not installed (package s3cmd)"
fi

# ---- 12: smaller answers
etag=$(s3raw request HEAD /upl/single --show-header ETag 2>&1 >/dev/null | sed 's/^ETag: //')
raw_header "^304 - Last-Modified: .+GMT" Last-Modified "a 304 carries Last-Modified" -- \
    request GET /upl/single -H "If-None-Match: $etag"
raw_header "^304 - ETag: \"" ETag "... and ETag" -- request GET /upl/single -H "If-None-Match: $etag"
raw "400 InvalidStorageClass" "PUT x-amz-storage-class: FOO: 400 InvalidStorageClass" -- \
    request PUT /upl/cls -H "x-amz-storage-class: FOO" --data x
raw "400 IllegalLocationConstraintException" "CreateBucket in eu-west-1 on a us-east-1 server: 400" -- \
    request PUT /eu-bucket --data '<CreateBucketConfiguration><LocationConstraint>eu-west-1</LocationConstraint></CreateBucketConfiguration>'
raw "404 -" "... and no bucket was made" -- request HEAD /eu-bucket
raw "200 -" "CreateBucket with this region's LocationConstraint: 200" -- \
    request PUT /us-bucket --data '<CreateBucketConfiguration><LocationConstraint>us-east-1</LocationConstraint></CreateBucketConfiguration>'
raw "501 NotImplemented" "POST Object (a form upload, unsigned): 501 NotImplemented" -- \
    request POST /upl --sign none -H "Content-Type: multipart/form-data; boundary=x" --data=$'--x\r\n--x--\r\n'
run_ok "awscli: cp --storage-class GLACIER" -- aws_s3 s3 cp --no-progress --storage-class GLACIER "$OUT/part2" s3://upl/glacier-up
is "$(aws_s3 s3api list-objects-v2 --bucket upl --prefix glacier-up --query 'Contents[0].StorageClass' --output text)" GLACIER \
    "awscli: an upload with --storage-class GLACIER lists as GLACIER at once"
boto3_checks '
expect_error("put_object StorageClass=FOO: InvalidStorageClass", "InvalidStorageClass 400",
    lambda: s3.put_object(Bucket="upl", Key="cls", Body=b"x", StorageClass="FOO"))
h = s3.head_object(Bucket="upl", Key="glacier-up")
check(h.get("StorageClass") == "GLACIER" and "ongoing-request=\"false\"" in (h.get("Restore") or ""),
      "head_object of it: GLACIER, readable (Restore ongoing-request=\"false\")", h)
expect_error("create_bucket in eu-west-1: IllegalLocationConstraintException", "IllegalLocationConstraintException 400",
    lambda: s3.create_bucket(Bucket="eu-bucket2", CreateBucketConfiguration={"LocationConstraint": "eu-west-1"}))
import urllib.request, uuid
post = s3.generate_presigned_post("upl", "form-upload")
boundary = uuid.uuid4().hex
form = b"".join(b"--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n" % (boundary.encode(), k.encode(), v.encode())
                for k, v in post["fields"].items())
form += b"--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\nbody\r\n--%s--\r\n" % (boundary.encode(), boundary.encode())
req = urllib.request.Request(post["url"], data=form, method="POST", headers={"Content-Type": "multipart/form-data; boundary=" + boundary})
try:
    urllib.request.urlopen(req, timeout=10)
    check(False, "presigned POST (generate_presigned_post): 501 NotImplemented", "200")
except urllib.error.HTTPError as e:
    body = e.read()
    check(e.code == 501 and b"NotImplemented" in body, "presigned POST (generate_presigned_post): 501 NotImplemented", (e.code, body[:200]))
mpu = s3.create_multipart_upload(Bucket="upl", Key="ck", ChecksumAlgorithm="CRC32")
r = s3.upload_part(Bucket="upl", Key="ck", UploadId=mpu["UploadId"], PartNumber=1, Body=b"checksummed", ChecksumAlgorithm="CRC32")
import zlib, base64
want = base64.b64encode(zlib.crc32(b"checksummed").to_bytes(4, "big")).decode()
check(r.get("ChecksumCRC32") == want, "upload_part ChecksumAlgorithm=CRC32: the checksum is echoed", r)
s3.abort_multipart_upload(Bucket="upl", Key="ck", UploadId=mpu["UploadId"])
'

# ---- doc/s3.md "Setting up clients": the rclone config file and curl --aws-sigv4 as written there
cat > "$OUT/rclone.conf" <<CONF
[stagein]
type = s3
provider = Other
access_key_id = $S3_KEY
secret_access_key = $S3_SECRET
region = $S3_REGION
endpoint = $S3_URL
CONF
if command -v rclone >/dev/null 2>&1; then
    is "$(env -u AWS_CA_BUNDLE rclone --config "$OUT/rclone.conf" lsf stagein:upl/meta/ 2>&1 | sort | tr '\n' ' ')" \
        "mp put raw " "rclone: the documented config file lists a bucket"
else
    tap_n=$((tap_n + 1)); echo "ok $tap_n # SKIP rclone is not installed (package rclone)"
fi
curl_s3() { curl -s --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_KEY:$S3_SECRET" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"; }
is "$(curl_s3 -o "$OUT/curl.err" -w '%{http_code}' -T "$OUT/part2" "$S3_URL/upl/curl/put.bin")" 200 \
    "curl --aws-sigv4: PUT as documented"
grep -q Error "$OUT/curl.err" 2>/dev/null && diag "$(tr -d '\n' < "$OUT/curl.err")"
curl_s3 -o "$OUT/curl.bin" "$S3_URL/upl/curl/put.bin"
ok "$(same_bytes "$OUT/curl.bin" "$OUT/part2"; echo $?)" "curl --aws-sigv4: GET as documented, byte-identical"

stop
finish
