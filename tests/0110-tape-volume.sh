#!/bin/bash
# Simulated tape volumes: create, write, dump; the admin's dd + tar recipe of
# doc/tape-format.md; import into a fresh catalog; faults; bad input.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"

VOLS=$TEST_DIR/volumes
DB=$TEST_DIR/catalog.db
export STAGEIN_CONF=$TEST_DIR/stagein.conf
echo "state_dir = \"$TEST_DIR/state\";" > "$STAGEIN_CONF"
unset STAGEIN_CATALOG
tape() { "$STAGEIN" tape "$@" --volume-dir "$VOLS"; }
sql() { "$STAGEIN" --catalog "$1" catalog sql "$2" --json; }

# --- data: a small text file, a file of 3 MB + 1 byte, a nested path, an empty file
mkdir -p "$TEST_DIR/src/deep/er"
cd "$TEST_DIR/src" || exit 1
printf 'hello tape\n' > small.txt
head -c 3000001 /dev/urandom > big.bin
printf 'nested\n' > deep/er/n.txt
: > empty

run_ok "create L00001" -- tape create L00001 --capacity 100000000
run_fails_with "second create refused" "already exists" -- tape create L00001
run_fails_with "lower-case label refused" "invalid character" -- tape create bad1
run_fails_with "unknown media needs a capacity" "no default capacity" -- tape create L00009 --media DLT
run_ok "write archive file 1" -- tape write L00001 --bucket data small.txt big.bin deep/er/n.txt --no-catalog
run_ok "write archive file 2" -- tape write L00001 --bucket data empty ./small.txt --no-catalog
out=$(tape write L00001 --bucket other "$TEST_DIR/src/deep/er/n.txt" --no-catalog --json)
case $out in
*'"file":3,"bucket":"other","key":'*'deep/er/n.txt"'*) ok 0 "absolute path written as a key without its leading '/'" ;;
*) ok 1 "absolute path written as a key"; diag "$out" ;;
esac

# --- dump: offsets read back from the volume itself
dump=$(tape dump L00001 --json)
fields() {  # fields FILE MEMBER -> "start end offset size checksum"
    python3 -c '
import json, sys
rows = json.loads(sys.argv[1])
for r in rows:
    if r["file"] == int(sys.argv[2]) and r["member"] == sys.argv[3]:
        print(r["start"], r["end"], r["offset"], r["size"], r["checksum"])
' "$dump" "$1" "$2"
}
read -r start1 end1 off_big size_big sum_big <<<"$(fields 1 data/big.bin)"
read -r start2 end2 _ _ _ <<<"$(fields 2 data/empty)"
is "$start1" 1024 "archive file 1 starts after the label and its filemark"
is "$start2" $((end1 + 512)) "archive file 2 starts after filemark 1"
is "$size_big" 3000001 "member size"
is "$sum_big" "sha256:$(sha256sum big.bin | cut -d' ' -f1)" "checksum recorded on the volume"
is "$(tail -c +$((off_big + 1)) "$VOLS/L00001.vol" | head -c 3000001 | cmp - big.bin && echo same)" \
   same "data lies at the dumped offset"
is "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$dump")" 6 "dump lists 6 members"
tape dump L00001 | grep -q "data/deep/er/n.txt"; ok $? "human dump names members"
run_ok "dump --verify re-reads every member" -- tape dump L00001 --verify

vols=$(tape volumes --json)
case $vols in
*'"label":"L00001","media":"LTO-9","capacity":100000000,"used":'*'"files":3,"unreadable":null,"status":"ok"'*) ok 0 "volumes listing" ;;
*) ok 1 "volumes listing"; diag "$vols" ;;
esac

# --- the admin recipe (doc/tape-format.md): dd the byte range, untar
mkdir -p "$TEST_DIR/x1" "$TEST_DIR/x1b" "$TEST_DIR/x2"
dd if="$VOLS/L00001.vol" bs=1M iflag=skip_bytes,count_bytes skip="$start1" \
   count=$((end1 - start1)) status=none |
    tar -xf - --warning=no-unknown-keyword -C "$TEST_DIR/x1"
ok $? "dd + tar extracts archive file 1"
cmp -s "$TEST_DIR/x1/data/big.bin" big.bin && cmp -s "$TEST_DIR/x1/data/small.txt" small.txt &&
    cmp -s "$TEST_DIR/x1/data/deep/er/n.txt" deep/er/n.txt
ok $? "extracted members are byte-identical (cmp)"
# the portable form: 512-byte blocks, no GNU dd flags
dd if="$VOLS/L00001.vol" bs=512 skip=$((start1 / 512)) count=$(((end1 - start1) / 512)) \
   2>/dev/null | tar -xf - --warning=no-unknown-keyword -C "$TEST_DIR/x1b"
cmp -s "$TEST_DIR/x1b/data/big.bin" big.bin; ok $? "bs=512 recipe extracts the same"
dd if="$VOLS/L00001.vol" bs=512 skip=$((start2 / 512)) count=$(((end2 - start2) / 512)) \
   2>/dev/null | tar -tf - --warning=no-unknown-keyword > "$TEST_DIR/list2"
is "$(tr '\n' ' ' < "$TEST_DIR/list2")" "data/empty data/small.txt " "tar lists archive file 2"
python3 - "$VOLS/L00001.vol" "$start1" "$end1" "$sum_big" <<'EOF'
import hashlib, io, sys, tarfile
path, start, end, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with open(path, "rb") as f:
    f.seek(start)
    t = tarfile.open(fileobj=io.BytesIO(f.read(end - start)), mode="r:")
m = t.getmember("data/big.bin")
assert m.pax_headers["STAGEIN.bucket"] == "data"
assert m.pax_headers["STAGEIN.key"] == "big.bin"
got = "sha256:" + hashlib.sha256(t.extractfile(m).read()).hexdigest()
assert got == want == m.pax_headers["STAGEIN.checksum"], (got, want)
EOF
ok $? "Python's tarfile reads the pax records and the data"
head -c 512 "$VOLS/L00001.vol" | tr -d '\0' | grep -q "^label L00001$"
ok $? "label record is plain text"

# --- import into a fresh catalog, from the volume alone
run_ok "import" -- "$STAGEIN" --catalog "$DB" tape import L00001 --volume-dir "$VOLS"
is "$(sql "$DB" "SELECT count(*) AS n FROM objects")" '[{"n":5}]' "5 objects (small.txt written twice counts once)"
is "$(sql "$DB" "SELECT c.file_seq, c.position, c.length, o.checksum FROM objects o JOIN tape_copies c ON c.object_id = o.id WHERE o.bucket = 'data' AND o.key = 'big.bin'")" \
   "[{\"file_seq\":1,\"position\":$off_big,\"length\":3000001,\"checksum\":\"$sum_big\"}]" \
   "big.bin's copy: file, position, length, checksum"
is "$(sql "$DB" "SELECT c.file_seq FROM objects o JOIN tape_copies c ON c.object_id = o.id WHERE o.key = 'small.txt'")" \
   '[{"file_seq":2}]' "an object written twice: its last copy"
is "$(sql "$DB" "SELECT label, media, capacity_bytes FROM volumes")" \
   '[{"label":"L00001","media":"LTO-9","capacity_bytes":100000000}]' "volume from the label"
before=$(sql "$DB" "SELECT (SELECT count(*) FROM objects) + (SELECT count(*) FROM tape_copies) + (SELECT count(*) FROM volumes) AS n")
out=$("$STAGEIN" --catalog "$DB" tape import L00001 --volume-dir "$VOLS" --json)
is "$out" '[{"volume":"L00001","files":3,"members":6,"recorded":5,"new_objects":0,"new_copies":0,"renumbered":0}]' "re-import: nothing new"
is "$(sql "$DB" "SELECT (SELECT count(*) FROM objects) + (SELECT count(*) FROM tape_copies) + (SELECT count(*) FROM volumes) AS n")" \
   "$before" "re-import changed nothing"

# --- write with a catalog: positions recorded at once
run_ok "create L00002" -- tape create L00002 --capacity 100000000
run_ok "write with --catalog records the copies" -- \
    "$STAGEIN" --catalog "$DB" tape write L00002 --bucket fresh small.txt --copy 2 --volume-dir "$VOLS"
is "$(sql "$DB" "SELECT c.copy, c.file_seq FROM objects o JOIN tape_copies c ON c.object_id = o.id JOIN volumes v ON v.id = c.volume_id WHERE v.label = 'L00002'")" \
   '[{"copy":2,"file_seq":1}]' "write recorded copy 2 on L00002"

# --- write before `stagein catalog init`: refused before anything is written
size_before=$(stat -c %s "$VOLS/L00002.vol")
run_fails_with "write with no catalog yet: told to run catalog init, nothing written" \
    "no catalog at .*nocat.db: create it with .stagein catalog init. first" -- \
    "$STAGEIN" --catalog "$TEST_DIR/nocat.db" tape write L00002 --bucket fresh small.txt --volume-dir "$VOLS"
is "$(stat -c %s "$VOLS/L00002.vol")" "$size_before" "... and the volume is unchanged"
ok "$([ ! -e "$TEST_DIR/nocat.db" ]; echo $?)" "... and no catalog was made"

# --- capacity
run_ok "create a small volume" -- tape create L00003 --capacity 8192
run_fails_with "write beyond capacity refused" "L00003 is full" -- tape write L00003 --bucket data big.bin --no-catalog
is "$(stat -c %s "$VOLS/L00003.vol")" 1024 "nothing written to the full volume"

# --- faults
run_ok "mark a region unreadable" -- tape fault L00001 --unreadable "$((off_big + 1000)):4096"
is "$(tape volumes --json | python3 -c 'import json,sys; print([v["unreadable"] for v in json.load(sys.stdin) if v["label"]=="L00001"][0])')" \
   "$((off_big + 1000)):4096" "volumes shows the region"
run_ok "dump reads headers around the region" -- tape dump L00001
run_fails_with "verify hits the region with EIO" "unreadable region.*Input/output error" -- tape dump L00001 --verify
run_ok "clear" -- tape fault L00001 --clear
run_ok "verify passes again" -- tape dump L00001 --verify
run_fails_with "bad region syntax" "START:LENGTH" -- tape fault L00001 --unreadable 10-20
run_fails_with "empty region" "LENGTH must be positive" -- tape fault L00001 --unreadable 10:0

# --- bad input
run_fails_with "hostile key refused" "'\.\.' path component" -- tape write L00001 --bucket data ../src/small.txt --no-catalog
run_fails_with "bad bucket refused" "bucket name" -- tape write L00001 --bucket Data small.txt --no-catalog
run_fails_with "missing volume" "no volume L00404" -- tape dump L00404
run_fails_with "missing file" "nope.bin: No such file" -- tape write L00001 --bucket data nope.bin --no-catalog
run_fails_with "--bucket required" "bucket is required" -- tape write L00001 small.txt
run_fails_with "option of another subcommand" "does not apply" -- tape dump L00001 --bucket x
run_fails_with "bad --capacity" "not a number of bytes" -- tape create L00008 --capacity 12TB

# --- a corrupt volume: clear error, catalog untouched
cp "$VOLS/L00001.vol" "$TEST_DIR/save.vol"
printf 'XXXXXXXX' | dd of="$VOLS/L00001.vol" bs=1 seek=$((start2 + 100)) conv=notrunc status=none
run_fails_with "dump of a corrupt volume names the place" "archive file 2 \(starting at offset $start2\).*checksum mismatch" -- tape dump L00001
run_fails_with "import of a corrupt volume refused" "L00001" -- "$STAGEIN" --catalog "$TEST_DIR/other.db" tape import L00001 --volume-dir "$VOLS"
is "$(sql "$TEST_DIR/other.db" "SELECT count(*) AS n FROM objects")" '[{"n":0}]' "nothing imported"
cp "$TEST_DIR/save.vol" "$VOLS/L00001.vol"
truncate -s $((off_big + 1000)) "$VOLS/L00001.vol"
run_fails_with "truncated volume reported" "truncated" -- tape dump L00001
run_fails_with "write to a truncated volume refused" "truncated or corrupt" -- tape write L00001 --bucket data small.txt --no-catalog

# --- the directory from the configuration
rm -rf "$TEST_DIR/state"
run_ok "state_dir/volumes is the default directory" -- "$STAGEIN" tape create L00100
test -f "$TEST_DIR/state/volumes/L00100.vol"; ok $? "volume created under state_dir/volumes"
printf 'library = { volume_dir = "%s/confvols"; };\n' "$TEST_DIR" >> "$STAGEIN_CONF"
if out=$("$STAGEIN" tape create L00101 2>&1); then
    test -f "$TEST_DIR/confvols/L00101.vol"; ok $? "library.volume_dir from the configuration"
elif grep -q "'library' is not a known setting" <<<"$out"; then
    echo "ok $((tap_n += 1)) # SKIP the 'library' group is not registered yet"
else
    ok 1 "library.volume_dir from the configuration"; diag "$out"
fi

finish
