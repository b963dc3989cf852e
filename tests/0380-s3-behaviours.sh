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

OUT=$TEST_DIR/out
mkdir -p "$OUT"
S3_CONF_EXTRA='transparent_recall_buckets = [ "tdata" ]; transparent_recall_max_wait = 20;'
STAGEIND_CONF_EXTRA="pin_lifetime_max = 864000;"
s3_setup A
s3_start_ok "stageind starts with its S3 port"

# boto3_checks SCRIPT: runs SCRIPT under boto3_run with check(cond, desc,
# detail) and expect_error(desc, "Code status", fn); one TAP line per check
boto3_checks() {
    local results
    results=$(boto3_run '
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
md5 = lambda b: hashlib.md5(b).hexdigest()
'"$1"'
print("done")
' 2>&1)
    while IFS=$'\t' read -r verdict desc detail; do
        case $verdict in
            ok) ok 0 "boto3: $desc" ;;
            "not ok") ok 1 "boto3: $desc"; diag "$detail" | cut -c1-600 ;;
            done) ;;
            *) [ -n "$verdict$desc" ] && diag "$verdict $desc $detail" ;;
        esac
    done <<<"$results"
    ok "$(grep -qx done <<<"$results"; echo $?)" "boto3: the script ran to its end"
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
    got=$(s3raw "$@" --show-header "$header" 2>&1 | tr '\n' ' ')
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

stop
finish
