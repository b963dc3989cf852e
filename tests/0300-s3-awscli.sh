#!/bin/bash
# stageind's S3 server driven by awscli (Debian's /usr/bin/aws): ListBuckets,
# s3 ls/cp/sync/rm, a large cp (multipart, ETag "-N"), s3api head-object
# (STANDARD for cached objects, GLACIER for the others), get-object --range,
# restore-object then get. Every transfer is compared byte for byte.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients aws

s3_setup A
s3_start_ok "stageind starts with its S3 port"
ok "$(s3_make_hot small1 small2 hot/h1 hot/h2 deep/a/b/d1; echo $?)" "five fixture objects staged into the cache"
j() { "$PY" -c 'import json, sys; j = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1" 2>/dev/null; }

# ---- reading the archive's bucket --------------------------------------------------
is "$(aws_s3 s3 ls 2>&1 | awk '{print $3}' | grep -x data)" data "s3 ls: ListBuckets shows the catalog's bucket 'data'"
listing=$(aws_s3 s3 ls --recursive s3://data/ 2>&1 | awk '{print $3, $4}' | sort)
want=$(for f in $S3_FIXTURE; do echo "${f##*:} ${f%%:*}"; done | sort)
is "$listing" "$want" "s3 ls --recursive: every catalog object with its size"
is "$(aws_s3 s3 ls s3://data/ 2>&1 | awk '$1 == "PRE" {print $2}' | sort | tr '\n' ' ')" \
    "cold/ deep/ hot/ " "s3 ls: common prefixes with a delimiter"
for k in hot/h2 small1 deep/a/b/d1; do
    rm -f "$OUT/got"
    aws_s3 s3 cp --no-progress "s3://data/$k" "$OUT/got" >/dev/null 2>&1
    ok "$(same_bytes "$OUT/got" "$SRC/$k"; echo $?)" "s3 cp s3://data/$k: byte-identical"
done
aws_s3 s3api get-object --bucket data --key hot/h2 --range bytes=1000000-1065535 "$OUT/range" >/dev/null 2>&1
dd if="$SRC/hot/h2" of="$OUT/range.want" bs=1 skip=1000000 count=65536 status=none 2>/dev/null ||
    tail -c +1000001 "$SRC/hot/h2" | head -c 65536 > "$OUT/range.want"
ok "$(same_bytes "$OUT/range" "$OUT/range.want"; echo $?)" "get-object --range bytes=1000000-1065535: those bytes"
aws_s3 s3api get-object --bucket data --key hot/h1 --range bytes=-1000 "$OUT/suffix" >/dev/null 2>&1
ok "$(tail -c 1000 "$SRC/hot/h1" | cmp -s - "$OUT/suffix"; echo $?)" "get-object --range bytes=-1000: the last 1000 bytes"

head=$(aws_s3 s3api head-object --bucket data --key hot/h1 2>&1)
is "$(j 'j["ContentLength"], j.get("StorageClass", "STANDARD"), "Restore" in j' <<<"$head")" \
    "(300000, 'STANDARD', False)" "head-object of a cached object: length, STANDARD, no Restore"
head=$(aws_s3 s3api head-object --bucket data --key cold/c1 2>&1)
is "$(j 'j["ContentLength"], j.get("StorageClass")' <<<"$head")" "(500000, 'GLACIER')" \
    "head-object of an archived object not in the cache: GLACIER"
out=$(aws_s3 s3 cp --no-progress s3://data/cold/c1 "$OUT/c1" 2>&1)
# awscli reads the storage class first (HeadObject) and refuses on its own
ok "$(grep -q 'Object is of storage class GLACIER' <<<"$out" && [ ! -s "$OUT/c1" ]; echo $?)" "s3 cp of a GLACIER object: awscli skips it (storage class GLACIER), nothing written"
out=$(aws_s3 s3api get-object --bucket data --key cold/c1 "$OUT/c1" 2>&1)
ok "$(grep -q InvalidObjectState <<<"$out" && [ ! -s "$OUT/c1" ]; echo $?)" "s3api get-object of a GLACIER object: InvalidObjectState, nothing written"

run_ok "s3api restore-object (Days=1, Standard)" -- aws_s3 s3api restore-object --bucket data --key cold/c1 \
    --restore-request '{"Days":1,"GlacierJobParameters":{"Tier":"Standard"}}'
restore=""
for _ in $(seq 300); do
    restore=$(aws_s3 s3api head-object --bucket data --key cold/c1 2>/dev/null | j 'j.get("Restore", "")')
    grep -q 'ongoing-request="false"' <<<"$restore" && break
    sleep 0.2
done
ok "$(grep -q 'ongoing-request="false", expiry-date="' <<<"$restore"; echo $?)" "head-object: Restore becomes ongoing-request=\"false\" with an expiry date"
diag "Restore: $restore"
aws_s3 s3 cp --no-progress s3://data/cold/c1 "$OUT/c1" >/dev/null 2>&1
ok "$(same_bytes "$OUT/c1" "$SRC/cold/c1"; echo $?)" "s3 cp after the restore: byte-identical"

# ---- buckets: create, list, delete --------------------------------------------------
run_ok "s3 mb s3://made (CreateBucket)" -- aws_s3 s3 mb s3://made
is "$(aws_s3 s3 ls 2>&1 | awk '{print $3}' | grep -x made)" made "s3 ls: the new bucket is listed"
run_ok "s3 rb s3://made (DeleteBucket of an empty bucket)" -- aws_s3 s3 rb s3://made
is "$(aws_s3 s3 ls 2>&1 | awk '{print $3}' | grep -x made)" "" "s3 ls: the deleted bucket is gone"

# ---- writing: "upl" is an archive bucket (configured) ----------------------------------
head -c 100000 /dev/urandom > "$OUT/small.bin"
head -c $((20 * 1024 * 1024 + 12345)) /dev/urandom > "$OUT/large.bin"
run_ok "s3 cp of 100 KB (PutObject)" -- aws_s3 s3 cp --no-progress "$OUT/small.bin" s3://upl/small.bin
etag=$(aws_s3 s3api head-object --bucket upl --key small.bin 2>/dev/null | j 'j["ETag"]')
is "$etag" "\"$(md5sum < "$OUT/small.bin" | cut -d' ' -f1)\"" "single-PUT ETag is the body's MD5"
run_ok "s3 cp of 20 MiB (multipart: 8 MiB parts)" -- aws_s3 s3 cp --no-progress "$OUT/large.bin" s3://upl/dir/large.bin
etag=$(aws_s3 s3api head-object --bucket upl --key dir/large.bin 2>/dev/null | j 'j["ETag"]')
want=$("$PY" - "$OUT/large.bin" <<'PY'
import hashlib, sys
data = open(sys.argv[1], "rb").read()
part = 8 * 1024 * 1024
digests = b"".join(hashlib.md5(data[i:i + part]).digest() for i in range(0, len(data), part))
print('"%s-%d"' % (hashlib.md5(digests).hexdigest(), (len(data) + part - 1) // part))
PY
)
is "$etag" "$want" "multipart ETag: MD5 of the part MD5s, -3"
for k in small.bin dir/large.bin; do
    rm -f "$OUT/back"
    aws_s3 s3 cp --no-progress "s3://upl/$k" "$OUT/back" >/dev/null 2>&1
    ok "$(same_bytes "$OUT/back" "$OUT/$(basename "$k")"; echo $?)" "s3://upl/$k read back byte-identical"
done

mkdir -p "$OUT/tree/a/b" "$OUT/tree/c"
for f in a/1 a/b/2 c/3 4; do head -c $((RANDOM * 7 + 1)) /dev/urandom > "$OUT/tree/$f"; done
run_ok "s3 sync of a directory tree up" -- aws_s3 s3 sync --no-progress "$OUT/tree" s3://upl/tree
run_ok "s3 sync of it back down" -- aws_s3 s3 sync --no-progress s3://upl/tree "$OUT/tree2"
ok "$(diff -r "$OUT/tree" "$OUT/tree2" >/dev/null; echo $?)" "the tree synced back is identical"
is "$(aws_s3 s3 sync --no-progress "$OUT/tree" s3://upl/tree 2>&1)" "" "a second sync transfers nothing (sizes and times match)"

run_ok "s3 rm s3://upl/small.bin (DeleteObject)" -- aws_s3 s3 rm s3://upl/small.bin
out=$(aws_s3 s3api head-object --bucket upl --key small.bin 2>&1)
ok "$(grep -qE '404|Not Found' <<<"$out"; echo $?)" "head-object after rm: 404"
is "$(aws_s3 s3 ls --recursive s3://upl/ 2>&1 | awk '{print $4}' | sort | tr '\n' ' ')" \
    "dir/large.bin tree/4 tree/a/1 tree/a/b/2 tree/c/3 " "s3 ls of the bucket after rm"
run_ok "s3 rm --recursive s3://upl/tree" -- aws_s3 s3 rm --recursive s3://upl/tree
is "$(aws_s3 s3 ls --recursive s3://upl/ 2>&1 | awk '{print $4}' | tr '\n' ' ')" "dir/large.bin " "only the large object left"

stop
finish
