#!/bin/bash
# stageind's S3 server driven by rclone: copy up and down, sync (with
# deletions), check (sizes and MD5s), lsjson (sizes, tiers), backend restore
# of a GLACIER object, copy of the restored object. Byte for byte.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients rclone

s3_setup A
s3_start_ok "stageind starts with its S3 port"
ok "$(s3_make_hot small1 small2 hot/h1 hot/h2; echo $?)" "four fixture objects staged into the cache"
j() { "$PY" -c 'import json, sys; j = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1" 2>/dev/null; }

lsj=$(rclone_cli lsjson -R --files-only "$(rclone_remote data)" 2>&1)
is "$(j 'sorted((o["Path"], o["Size"]) for o in j)' <<<"$lsj")" \
    "$("$PY" -c 'import sys; print(sorted((f.split(":")[0], int(f.split(":")[1])) for f in sys.argv[1].split()))' "$S3_FIXTURE")" \
    "lsjson -R: every object with its size"
lsj=$(rclone_cli lsjson --files-only "$(rclone_remote data/hot)" 2>&1)
is "$(j 'sorted(o["Name"] for o in j)' <<<"$lsj")" "['h1', 'h2']" "lsjson of a prefix: its names"
run_ok "rclone copy data/hot down" -- rclone_cli copy "$(rclone_remote data/hot)" "$OUT/hot"
ok "$(same_bytes "$OUT/hot/h1" "$SRC/hot/h1" && same_bytes "$OUT/hot/h2" "$SRC/hot/h2"; echo $?)" \
    "copied down byte-identical"

mkdir -p "$OUT/tree/a/b" "$OUT/tree/c"
for f in a/1 a/b/2 c/3 4 5; do head -c $((RANDOM * 11 + 1)) /dev/urandom > "$OUT/tree/$f"; done
head -c $((30 * 1024 * 1024 + 17)) /dev/urandom > "$OUT/tree/c/large"
run_ok "rclone copy of a tree up (a 30 MiB file: multipart)" -- \
    rclone_cli copy --s3-upload-cutoff 8M --s3-chunk-size 5M "$OUT/tree" "$(rclone_remote upl/rc)"
run_ok "rclone check: sizes and hashes match" -- rclone_cli check "$OUT/tree" "$(rclone_remote upl/rc)"
run_ok "rclone check --download: bytes match" -- rclone_cli check --download "$OUT/tree" "$(rclone_remote upl/rc)"
rm "$OUT/tree/4" "$OUT/tree/a/b/2"
rmdir "$OUT/tree/a/b"   # S3 keeps no empty directories: a copy back would not have it
head -c 5000 /dev/urandom > "$OUT/tree/a/new"
run_ok "rclone sync (one new file, two deleted)" -- rclone_cli sync "$OUT/tree" "$(rclone_remote upl/rc)"
lsj=$(rclone_cli lsjson -R --files-only "$(rclone_remote upl/rc)" 2>&1)
is "$(j 'sorted(o["Path"] for o in j)' <<<"$lsj")" "['5', 'a/1', 'a/new', 'c/3', 'c/large']" \
    "lsjson after sync: the deletions and the new file"
run_ok "rclone check after sync" -- rclone_cli check --download "$OUT/tree" "$(rclone_remote upl/rc)"
run_ok "rclone copy back down" -- rclone_cli copy "$(rclone_remote upl/rc)" "$OUT/tree2"
ok "$(diff -r "$OUT/tree" "$OUT/tree2" >/dev/null; echo $?)" "the tree copied back is identical"

lsj=$(rclone_cli lsjson --files-only "$(rclone_remote data/cold)" 2>&1)
is "$(j 'sorted((o["Name"], o.get("Tier")) for o in j)' <<<"$lsj")" "[('c1', 'GLACIER'), ('c2', 'GLACIER')]" \
    "lsjson: archived objects not in the cache have tier GLACIER"
out=$(rclone_cli backend restore "$(rclone_remote data/cold)" --include c1 -o priority=Standard -o lifetime=1 2>&1)
ok "$(grep -q '"Status": "OK"' <<<"$out"; echo $?)" "rclone backend restore: OK"
diag "$(tr '\n' ' ' <<<"$out" | cut -c1-300)"
for _ in $(seq 300); do
    rclone_cli copy "$(rclone_remote data/cold/c1)" "$OUT/cold" >/dev/null 2>&1 && [ -s "$OUT/cold/c1" ] && break
    sleep 0.2
done
ok "$(same_bytes "$OUT/cold/c1" "$SRC/cold/c1"; echo $?)" "the restored object copies down byte-identical"

stop
finish
