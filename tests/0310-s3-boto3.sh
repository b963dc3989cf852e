#!/bin/bash
# stageind's S3 server driven by boto3 (python3-boto3): put/get, ListObjectsV2
# with prefix, delimiter and pagination, ListObjects V1, multipart (list parts,
# list uploads, complete, abort), copy, delete_objects, conditional and ranged
# GETs, restore_object and head_object's Restore field, presigned GET and PUT.
# Every transfer is compared byte for byte.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3

s3_setup A
s3_start_ok "stageind starts with its S3 port"
ok "$(s3_make_hot small1 small2 hot/h1 hot/h2 deep/a/b/d1; echo $?)" "five fixture objects staged into the cache"

# The python side prints one "ok<TAB>description" or "not ok<TAB>description<TAB>detail"
# line per check; the shell numbers them.
results=$(boto3_run '
'"$BOTO3_CHECKS"'
def read(path):
    return open(path, "rb").read()
md5 = lambda b: hashlib.md5(b).hexdigest()

# ---- reading the archive bucket
body = attempt("get hot/h2", lambda: s3.get_object(Bucket="data", Key="hot/h2")["Body"].read())
check(body == read(SRC + "/hot/h2"), "get_object hot/h2: byte-identical")
r = attempt("ranged get", lambda: s3.get_object(Bucket="data", Key="hot/h2", Range="bytes=123-4567"))
check(r is not None and r["ResponseMetadata"]["HTTPStatusCode"] == 206 and
      r["Body"].read() == read(SRC + "/hot/h2")[123:4568] and
      r["ContentRange"] == "bytes 123-4567/2000000", "get_object Range: 206, Content-Range, those bytes")
h = attempt("head hot/h1", lambda: s3.head_object(Bucket="data", Key="hot/h1"))
etag = h["ETag"] if h else None
try:
    s3.get_object(Bucket="data", Key="hot/h1", IfNoneMatch=etag)
    check(False, "If-None-Match with the current ETag: 304", "200")
except ClientError as e:
    check(e.response["ResponseMetadata"]["HTTPStatusCode"] == 304, "If-None-Match with the current ETag: 304", code_of(e))
try:
    s3.get_object(Bucket="data", Key="hot/h1", IfMatch="\"0123456789abcdef0123456789abcdef\"")
    check(False, "If-Match with another ETag: 412 PreconditionFailed", "200")
except ClientError as e:
    check(code_of(e) == "PreconditionFailed 412", "If-Match with another ETag: 412 PreconditionFailed", code_of(e))
r = attempt("if-match", lambda: s3.get_object(Bucket="data", Key="hot/h1", IfMatch=etag))
check(r is not None and r["Body"].read() == read(SRC + "/hot/h1"), "If-Match with the current ETag: the object")

keys, prefixes, pages, token = [], [], 0, None
while True:
    kw = {"Bucket": "data", "MaxKeys": 2}
    if token: kw["ContinuationToken"] = token
    page = attempt("list page", lambda: s3.list_objects_v2(**kw))
    if page is None: break
    pages += 1
    keys += [o["Key"] for o in page.get("Contents", [])]
    if not page.get("IsTruncated"): break
    token = page["NextContinuationToken"]
check(sorted(keys) == sorted(["small1", "small2", "hot/h1", "hot/h2", "cold/c1", "cold/c2", "deep/a/b/d1"]) and pages == 4,
      "list_objects_v2 MaxKeys=2: 7 keys over 4 pages", (keys, pages))
page = attempt("list delimiter", lambda: s3.list_objects_v2(Bucket="data", Delimiter="/"))
check(page is not None and [o["Key"] for o in page.get("Contents", [])] == ["small1", "small2"] and
      [p["Prefix"] for p in page.get("CommonPrefixes", [])] == ["cold/", "deep/", "hot/"],
      "list_objects_v2 Delimiter=/: two keys, three common prefixes", page)
page = attempt("list prefix", lambda: s3.list_objects_v2(Bucket="data", Prefix="cold/"))
check(page is not None and [(o["Key"], o["Size"], o.get("StorageClass")) for o in page.get("Contents", [])] ==
      [("cold/c1", 500000, "GLACIER"), ("cold/c2", 1500000, "GLACIER")],
      "list_objects_v2 Prefix=cold/: keys, sizes, StorageClass GLACIER", page)
page = attempt("list hot", lambda: s3.list_objects_v2(Bucket="data", Prefix="hot/"))
check(page is not None and [o.get("StorageClass") for o in page.get("Contents", [])] == ["STANDARD", "STANDARD"],
      "cached objects listed as STANDARD", page)
v1 = attempt("list v1", lambda: s3.list_objects(Bucket="data", Prefix="deep/", Delimiter="/"))
check(v1 is not None and [p["Prefix"] for p in v1.get("CommonPrefixes", [])] == ["deep/a/"],
      "list_objects (V1) Prefix=deep/ Delimiter=/: deep/a/", v1)
v1 = attempt("list v1 marker", lambda: s3.list_objects(Bucket="data", Marker="hot/h1", MaxKeys=2))
check(v1 is not None and [o["Key"] for o in v1.get("Contents", [])] == ["hot/h2", "small1"] and v1["IsTruncated"],
      "list_objects (V1) Marker=hot/h1 MaxKeys=2: the next two, truncated", v1)

# ---- Glacier: head_object Restore, restore_object, get after
try:
    s3.get_object(Bucket="data", Key="cold/c2")
    check(False, "get of a GLACIER object: 403 InvalidObjectState", "200")
except ClientError as e:
    check(code_of(e) == "InvalidObjectState 403", "get of a GLACIER object: 403 InvalidObjectState", code_of(e))
h = attempt("head c2", lambda: s3.head_object(Bucket="data", Key="cold/c2"))
check(h is not None and h.get("StorageClass") == "GLACIER" and "Restore" not in h, "head_object: GLACIER, no Restore yet", h)
r = attempt("restore", lambda: s3.restore_object(Bucket="data", Key="cold/c2",
            RestoreRequest={"Days": 2, "GlacierJobParameters": {"Tier": "Expedited"}}))
check(r is not None and r["ResponseMetadata"]["HTTPStatusCode"] == 202, "restore_object: 202 Accepted", r)
seen = []
for _ in range(300):
    h = s3.head_object(Bucket="data", Key="cold/c2")
    if not seen or seen[-1] != h.get("Restore"): seen.append(h.get("Restore"))
    if "ongoing-request=\"false\"" in (h.get("Restore") or ""): break
    time.sleep(0.2)
check(seen and "ongoing-request=\"false\"" in seen[-1] and "expiry-date=" in seen[-1],
      "head_object Restore: ongoing-request=\"false\" with expiry-date once restored", seen)
check(all(s is None or s == "ongoing-request=\"true\"" for s in seen[:-1]),
      "head_object Restore before that: ongoing-request=\"true\"", seen)
body = attempt("get c2", lambda: s3.get_object(Bucket="data", Key="cold/c2")["Body"].read())
check(body == read(SRC + "/cold/c2"), "get_object after the restore: byte-identical")
r = attempt("restore again", lambda: s3.restore_object(Bucket="data", Key="cold/c2", RestoreRequest={"Days": 1}))
check(r is not None and r["ResponseMetadata"]["HTTPStatusCode"] == 200, "restore_object of a restored object: 200", r)

# ---- writing: an archive bucket
# ("upl" is an archive bucket in the configuration; "made" is created here)
r = attempt("create_bucket", lambda: s3.create_bucket(Bucket="made"))
check(r is not None and r["ResponseMetadata"]["HTTPStatusCode"] == 200, "create_bucket made: 200", r)
names = [b["Name"] for b in attempt("list_buckets", lambda: s3.list_buckets()["Buckets"]) or []]
check("upl" in names and "data" in names and "made" in names, "list_buckets: data, upl and made", names)
check(attempt("head_bucket", lambda: s3.head_bucket(Bucket="upl")) is not None, "head_bucket upl")
try:
    s3.head_bucket(Bucket="nosuchbucket")
    check(False, "head_bucket of an unknown bucket: 404", "200")
except ClientError as e:
    check(e.response["ResponseMetadata"]["HTTPStatusCode"] == 404, "head_bucket of an unknown bucket: 404", code_of(e))
attempt("put into made", lambda: s3.put_object(Bucket="made", Key="k", Body=b"made"))
try:
    s3.delete_bucket(Bucket="made")
    check(False, "delete_bucket of a non-empty bucket: 409 BucketNotEmpty", "204")
except ClientError as e:
    check(code_of(e) == "BucketNotEmpty 409", "delete_bucket of a non-empty bucket: 409 BucketNotEmpty", code_of(e))
check(attempt("get from made", lambda: s3.get_object(Bucket="made", Key="k")["Body"].read()) == b"made",
      "PUT into a created bucket reads back")
one = os.urandom(300000)
r = attempt("put", lambda: s3.put_object(Bucket="upl", Key="one", Body=one))
check(r is not None and r["ETag"] == "\"%s\"" % md5(one), "put_object: ETag is the MD5", r)
check(attempt("get one", lambda: s3.get_object(Bucket="upl", Key="one")["Body"].read()) == one, "get_object of the put: byte-identical")

parts = [os.urandom(5 * 1024 * 1024), os.urandom(5 * 1024 * 1024), os.urandom(777777)]
mpu = attempt("create_multipart_upload", lambda: s3.create_multipart_upload(Bucket="upl", Key="multi/part"))
uid = mpu["UploadId"] if mpu else ""
etags = []
for i, p in enumerate(parts):
    r = attempt("upload_part", lambda: s3.upload_part(Bucket="upl", Key="multi/part", UploadId=uid, PartNumber=i + 1, Body=p))
    etags.append(r["ETag"] if r else None)
check(etags == ["\"%s\"" % md5(p) for p in parts], "upload_part: each ETag is the part MD5", etags)
lp = attempt("list_parts", lambda: s3.list_parts(Bucket="upl", Key="multi/part", UploadId=uid))
check(lp is not None and [(p["PartNumber"], p["Size"]) for p in lp.get("Parts", [])] == [(1, 5242880), (2, 5242880), (3, 777777)],
      "list_parts: numbers and sizes", lp)
lu = attempt("list_multipart_uploads", lambda: s3.list_multipart_uploads(Bucket="upl"))
check(lu is not None and [(u["Key"], u["UploadId"]) for u in lu.get("Uploads", [])] == [("multi/part", uid)],
      "list_multipart_uploads: the open upload", lu)
r = attempt("complete", lambda: s3.complete_multipart_upload(Bucket="upl", Key="multi/part", UploadId=uid,
            MultipartUpload={"Parts": [{"PartNumber": i + 1, "ETag": e} for i, e in enumerate(etags)]}))
want = "\"%s-3\"" % hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest()
check(r is not None and r["ETag"] == want, "complete_multipart_upload: ETag MD5-of-MD5s-3", r)
check(attempt("get multi", lambda: s3.get_object(Bucket="upl", Key="multi/part")["Body"].read()) == b"".join(parts),
      "get_object of the multipart object: byte-identical")
h = attempt("head multi", lambda: s3.head_object(Bucket="upl", Key="multi/part"))
check(h is not None and h["ContentLength"] == 5242880 * 2 + 777777 and h["ETag"] == want, "head_object: size and ETag", h)

mpu = attempt("create for abort", lambda: s3.create_multipart_upload(Bucket="upl", Key="aborted"))
if mpu:
    attempt("part for abort", lambda: s3.upload_part(Bucket="upl", Key="aborted", UploadId=mpu["UploadId"], PartNumber=1, Body=b"x" * 1000))
    r = attempt("abort", lambda: s3.abort_multipart_upload(Bucket="upl", Key="aborted", UploadId=mpu["UploadId"]))
    check(r is not None and r["ResponseMetadata"]["HTTPStatusCode"] == 204, "abort_multipart_upload: 204", r)
    lu = s3.list_multipart_uploads(Bucket="upl")
    check(not lu.get("Uploads"), "no upload left after complete and abort", lu)
    try:
        s3.head_object(Bucket="upl", Key="aborted")
        check(False, "the aborted upload made no object", "200")
    except ClientError as e:
        check(e.response["ResponseMetadata"]["HTTPStatusCode"] == 404, "the aborted upload made no object")
    try:
        s3.upload_part(Bucket="upl", Key="aborted", UploadId=mpu["UploadId"], PartNumber=2, Body=b"y")
        check(False, "upload_part to an aborted upload: NoSuchUpload", "200")
    except ClientError as e:
        check(code_of(e) == "NoSuchUpload 404", "upload_part to an aborted upload: 404 NoSuchUpload", code_of(e))

r = attempt("copy", lambda: s3.copy_object(Bucket="upl", Key="copy-of-one", CopySource={"Bucket": "upl", "Key": "one"}))
check(r is not None and r["CopyObjectResult"]["ETag"] == "\"%s\"" % md5(one), "copy_object: ETag of the source bytes", r)
check(attempt("get copy", lambda: s3.get_object(Bucket="upl", Key="copy-of-one")["Body"].read()) == one, "the copy is byte-identical")
r = attempt("copy from data", lambda: s3.copy_object(Bucket="upl", Key="h1", CopySource={"Bucket": "data", "Key": "hot/h1"}))
check(attempt("get copied", lambda: s3.get_object(Bucket="upl", Key="h1")["Body"].read()) == read(SRC + "/hot/h1"),
      "copy_object across buckets (cached source): byte-identical")

r = attempt("delete_objects", lambda: s3.delete_objects(Bucket="upl", Delete={"Objects": [{"Key": "copy-of-one"}, {"Key": "h1"}, {"Key": "never-was"}]}))
check(r is not None and sorted(d["Key"] for d in r.get("Deleted", [])) == ["copy-of-one", "h1", "never-was"] and not r.get("Errors"),
      "delete_objects: three Deleted (a missing key counts as deleted)", r)
left = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="upl").get("Contents", []))
check(left == ["multi/part", "one"], "list after delete_objects: multi/part and one", left)

# ---- presigned URLs
import urllib.request
url = s3.generate_presigned_url("get_object", Params={"Bucket": "data", "Key": "hot/h1"}, ExpiresIn=60)
got = attempt("presigned get", lambda: urllib.request.urlopen(url, timeout=10).read())
check(got == read(SRC + "/hot/h1"), "presigned GET: byte-identical")
put_body = os.urandom(123456)
url = s3.generate_presigned_url("put_object", Params={"Bucket": "upl", "Key": "presigned"}, ExpiresIn=60)
req = urllib.request.Request(url, data=put_body, method="PUT")
r = attempt("presigned put", lambda: urllib.request.urlopen(req, timeout=10))
check(r is not None and r.status == 200, "presigned PUT: 200")
check(attempt("get presigned", lambda: s3.get_object(Bucket="upl", Key="presigned")["Body"].read()) == put_body,
      "the presigned PUT reads back byte-identical")
print("done")
')
boto3_tap "$results"

stop
finish
