#!/bin/bash
# stagein catalog import --from-s3 BUCKET[/PREFIX] against a real S3 archive
# (stageind A in archive mode): every object listed (ListObjectsV2, more than
# one page), with its size, ETag and storage class; single-part ETags become
# md5 checksums; names mapped back through archive.s3.buckets; importing
# again adds nothing; an unknown bucket or a bad prefix is refused and
# changes nothing. A dataset defined over the imported objects (no tape
# positions known) is then staged through the s3 backend, byte for byte.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3

s3_setup A "library: { drives = 2; time_scale = 0.002; };"
A_DB=$DB A_STATE=$STATE
# 1,500 more objects in A's catalog (listed, never read): the listing takes two pages
{
    echo "bucket,key,size,volume,position,copy,checksum"
    for i in $(seq 1500); do echo "bulk,obj/$(printf %05d "$i"),$((i * 10)),V00002,$((i * 100000)),1,"; done
} > "$TEST_DIR/bulk.csv"
run_ok "1,500 objects catalogued on A" -- "$STAGEIN" catalog import "$TEST_DIR/bulk.csv"
s3_start_ok "A starts"
for i in 1 2 3; do
    head -c $((i * 100000 + 3)) /dev/urandom > "$OUT/put$i"
    s3raw request PUT "/arch/imp/put$i" --body-file "$OUT/put$i" >/dev/null
done

CREDS=$TEST_DIR/c.creds
printf '%s %s\n' "$S3_KEY" "$S3_SECRET" > "$CREDS"
chmod 600 "$CREDS"
use_state C
write_conf "archive: { backend = \"s3\"; s3: {
    endpoint = \"$S3_URL\"; credentials_file = \"$CREDS\"; restores = 2;
    buckets = ( { bucket = \"mine\"; upstream = \"arch\"; prefix = \"imp/\"; } );
    poll_min = 0.05; poll_max = 0.3; }; };"
"$STAGEIN" catalog init >/dev/null

out=$("$STAGEIN" catalog import --from-s3 data 2>&1)
ok $? "import --from-s3 data: $out"
is "$out" "s3://data: 7 records, 7 new objects, 0 new copies, 0 new volumes" "seven objects"
is "$(sql "SELECT key || ':' || size || ':' || storage_class FROM objects WHERE bucket = 'data' ORDER BY key" | tr '\n' ' ')" \
    "$(sqlite3 "$A_DB" "SELECT key || ':' || size || ':GLACIER' FROM objects WHERE bucket = 'data' ORDER BY key" | tr '\n' ' ')" \
    "keys, sizes and storage class as A has them"
etag=$(s3raw request HEAD /data/cold/c1 --show-header etag 2>&1 >/dev/null | sed 's/^etag: //I; s/"//g')
is "$(sql "SELECT etag FROM objects WHERE key = 'cold/c1'")" "$etag" "the ETag recorded"
is "$(sql "SELECT count(*) FROM objects WHERE bucket = 'data' AND checksum IS NOT NULL")" 0 \
    "ETags that are not MD5s (\"...-1\") give no checksum"

out=$("$STAGEIN" catalog import --from-s3 bulk/obj/ 2>&1)
is "$out" "s3://bulk/obj/: 1500 records, 1500 new objects, 0 new copies, 0 new volumes" \
    "a prefix over two listing pages: 1,500 objects"
is "$(sql "SELECT count(*) || ' ' || sum(size) FROM objects WHERE bucket = 'bulk'")" "1500 $((10 * 1500 * 1501 / 2))" \
    "every one with its size"

out=$("$STAGEIN" catalog import --from-s3 arch/imp/ 2>&1)
is "$out" "s3://arch/imp/: 3 records, 3 new objects, 0 new copies, 0 new volumes" "the archive bucket's uploads"
is "$(sql "SELECT bucket || '/' || key FROM objects WHERE key LIKE 'put%' ORDER BY key" | tr '\n' ' ')" \
    "mine/put1 mine/put2 mine/put3 " "named back through archive.s3.buckets (arch/imp/ -> mine)"
is "$(sql "SELECT checksum FROM objects WHERE key = 'put2'")" "md5:$(md5sum < "$OUT/put2" | cut -d' ' -f1)" \
    "a single-part ETag recorded as the md5 checksum"
is "$(sql "SELECT storage_class FROM objects WHERE key = 'put2'")" STANDARD "storage class STANDARD (online upstream)"

before=$(sql "SELECT count(*) FROM objects")
is "$("$STAGEIN" catalog import --from-s3 data 2>&1)" "s3://data: 7 records, 0 new objects, 0 new copies, 0 new volumes" \
    "importing again adds nothing"
run_fails_with "an unknown upstream bucket is refused" "ListObjectsV2 of nosuchbucket: HTTP 404 NoSuchBucket.*nothing imported" -- \
    "$STAGEIN" catalog import --from-s3 nosuchbucket
run_fails_with "a bad bucket name is refused" "--from-s3 'Bad_Bucket'" -- "$STAGEIN" catalog import --from-s3 Bad_Bucket
is "$(sql "SELECT count(*) FROM objects")" "$before" "the refused imports changed nothing"

# ---- stage what was imported: no positions known, restores bounded by archive.s3.restores -------
printf 'data/\n' > "$TEST_DIR/all.manifest"
run_ok "a dataset over the imported data/ objects" -- \
    "$STAGEIN" catalog define imported "$TEST_DIR/all.manifest" --owner root:root --mode 0644
run_ok "C starts with the s3 backend" -- start
track_pid "$(daemon_pid)"
REQ=$(stage '{"datasets":["imported"]}')
is "$(wait_done "$REQ" 120)" COMPLETED "the imported dataset staged from A"
bad=""
for k in small1 small2 hot/h1 hot/h2 cold/c1 cold/c2 deep/a/b/d1; do
    same_as_cached "o.bucket = 'data' AND o.key = '$k'" "$SRC/$k" || bad+="$k "
done
is "$bad" "" "every staged object byte-identical to A's source"
REQ=$(stage '{"files":["mine/put1","mine/put3"]}')
is "$(wait_done "$REQ" 60)" COMPLETED "the uploads staged back under their local names"
ok "$(same_as_cached "o.key = 'put3'" "$OUT/put3"; echo $?)" "byte-identical (md5 verified by the cache)"
stop
STATE=$A_STATE stop
finish
