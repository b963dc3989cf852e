#!/bin/bash
# stageind's S3 server driven by s3cmd: ls, la, info (storage class), get,
# put (single and multipart), sync up and down, del, restore of a GLACIER
# object then get. Every transfer is compared byte for byte.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients s3cmd

s3_setup A
s3_start_ok "stageind starts with its S3 port"
ok "$(s3_make_hot small1 hot/h1 hot/h2; echo $?)" "three fixture objects staged into the cache"

is "$(s3cmd_cli ls 2>&1 | awk '{print $3}' | grep -x s3://data)" s3://data "s3cmd ls: the bucket 'data'"
listing=$(s3cmd_cli ls --recursive s3://data 2>&1 | awk '{print $3, $4}' | sort)
want=$(for f in $S3_FIXTURE; do echo "${f##*:} s3://data/${f%%:*}"; done | sort)
is "$listing" "$want" "s3cmd ls --recursive: every object with its size"
info=$(s3cmd_cli info s3://data/cold/c2 2>&1)
ok "$(grep -qE 'Storage:[[:space:]]+GLACIER' <<<"$info"; echo $?)" "s3cmd info of an archived object: Storage GLACIER"
info=$(s3cmd_cli info s3://data/hot/h1 2>&1)
ok "$(grep -qE 'Storage:[[:space:]]+STANDARD' <<<"$info" && grep -qE 'File size:[[:space:]]+300000' <<<"$info"; echo $?)" \
    "s3cmd info of a cached object: STANDARD, its size"
for k in hot/h1 hot/h2 small1; do
    rm -f "$OUT/got"
    s3cmd_cli get --force "s3://data/$k" "$OUT/got" >/dev/null 2>&1
    ok "$(same_bytes "$OUT/got" "$SRC/$k"; echo $?)" "s3cmd get s3://data/$k: byte-identical"
done

run_ok "s3cmd restore of cold/c2" -- s3cmd_cli restore --restore-days=1 --restore-priority=standard s3://data/cold/c2
for _ in $(seq 300); do
    s3cmd_cli info s3://data/cold/c2 2>/dev/null | grep -q 'ongoing-request="false"' && break
    # s3cmd info may not print x-amz-restore: a GET that succeeds ends the wait too
    s3cmd_cli get --force s3://data/cold/c2 "$OUT/c2" >/dev/null 2>&1 && break
    sleep 0.2
done
rm -f "$OUT/c2"
s3cmd_cli get --force s3://data/cold/c2 "$OUT/c2" >/dev/null 2>&1
ok "$(same_bytes "$OUT/c2" "$SRC/cold/c2"; echo $?)" "s3cmd get after the restore: byte-identical"

head -c 200000 /dev/urandom > "$OUT/one.bin"
head -c $((12 * 1024 * 1024 + 999)) /dev/urandom > "$OUT/big.bin"
run_ok "s3cmd put (single PUT)" -- s3cmd_cli put "$OUT/one.bin" s3://upl/s3cmd/one.bin
run_ok "s3cmd put of 12 MiB in 5 MiB parts (multipart)" -- \
    s3cmd_cli put --multipart-chunk-size-mb=5 "$OUT/big.bin" s3://upl/s3cmd/big.bin
info=$(s3cmd_cli info s3://upl/s3cmd/big.bin 2>&1)
ok "$(grep -qE 'MD5 sum:.*-3|ETag.*-3' <<<"$info" || grep -q "$(md5sum < "$OUT/big.bin" | cut -d' ' -f1)" <<<"$info"; echo $?)" \
    "s3cmd info of the multipart object: a 3-part ETag (or the MD5 s3cmd stored)"
for k in one.bin big.bin; do
    rm -f "$OUT/back"
    s3cmd_cli get --force "s3://upl/s3cmd/$k" "$OUT/back" >/dev/null 2>&1
    ok "$(same_bytes "$OUT/back" "$OUT/$k"; echo $?)" "s3cmd get of s3://upl/s3cmd/$k: byte-identical"
done

mkdir -p "$OUT/tree/x/y"
for f in x/1 x/y/2 3; do head -c $((RANDOM * 3 + 1)) /dev/urandom > "$OUT/tree/$f"; done
run_ok "s3cmd sync up" -- s3cmd_cli sync "$OUT/tree/" s3://upl/s3cmd/tree/
run_ok "s3cmd sync down" -- s3cmd_cli sync s3://upl/s3cmd/tree/ "$OUT/tree2/"
ok "$(diff -r "$OUT/tree" "$OUT/tree2" >/dev/null; echo $?)" "the tree synced back is identical"
out=$(s3cmd_cli sync "$OUT/tree/" s3://upl/s3cmd/tree/ 2>&1)
ok "$(! grep -q "upload:" <<<"$out"; echo $?)" "a second sync uploads nothing"
run_ok "s3cmd del" -- s3cmd_cli del s3://upl/s3cmd/one.bin
is "$(s3cmd_cli ls --recursive s3://upl/s3cmd/ 2>&1 | awk '{print $4}' | sort | tr '\n' ' ')" \
    "s3://upl/s3cmd/big.bin s3://upl/s3cmd/tree/3 s3://upl/s3cmd/tree/x/1 s3://upl/s3cmd/tree/x/y/2 " \
    "s3cmd ls after del"
out=$(s3cmd_cli get --force s3://upl/s3cmd/one.bin "$OUT/gone" 2>&1)
# s3cmd HEADs first; on the 404 it prints "Source object ... does not exist"
ok "$(grep -qE '404|NoSuchKey|does not exist' <<<"$out" && [ ! -s "$OUT/gone" ]; echo $?)" "s3cmd get of the deleted object: 404 (does not exist)"

stop
finish
