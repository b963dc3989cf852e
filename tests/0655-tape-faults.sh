#!/bin/bash
# The tape backend's error handling against tgt's virtual library (2 drives,
# 8 cartridges, cartridge capacity set to 8 MB so that pushes move on):
# a corrupted region of a cartridge (the other copy is read), a cartridge
# whose label does not match its barcode (refused, nothing written), a
# cartridge that fills before its capacity (end of medium: the copy goes to
# another one), a write-protected cartridge, a drive taken offline before a
# recall and one taken offline mid-recall (their work goes to the other
# drive), kill -9 of stageind mid-write
# (the interrupted archive file is redone and never listed), UNIT ATTENTION
# mid-write (the archive file written again from its start, once on tape).
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"
. "$top_srcdir/tests/tape-lib.sh"
trap 'stop; tgt_stop; cleanup' EXIT

TGT_SPARE_SLOTS=2 tgt_start 2 8
ok $? "tgtd serves a library of 2 drives and 8 cartridges"
# T0000006 holds 1 MB only: it reaches its end of medium long before 8 MB
rm -f "$VTL/T0000006"
tgtimg --op new --device-type tape --barcode T0000006 --size 1 --type data --file "$VTL/T0000006" >/dev/null
# T0000003 carries the label record of another cartridge (a copy of T0000001's image, taken later)

use_state F
write_conf "push: { copies = 2; aggregate_window = 0.2; };
library: { policy = \"linear\"; };
$(TAPE_CAPACITY=8000000 tape_conf 2)"
"$STAGEIN" catalog init >/dev/null
run_ok "stageind starts" -- start
track_pid "$(daemon_pid)"
mkdir -p "$SRC"
for f in a:200000 b:3000000 c:5000000 d:5000000 e:100000; do
    head -c "${f##*:}" /dev/urandom > "$SRC/${f%%:*}"
done
# push_one KEY: one file in a push of its own; prints its final state
push_one() {
    push ckpt "$1" "$SRC/$1" >/dev/null
    wait_push "$(json "$BODY" 'j["pushId"]')" 60
}
# unload_drives: (stageind stopped) the cartridges left in the drives moved back to their slots
unload_drives() {
    while read -r el src; do
        "$TAPE_TOOL" move "$CHANGER_URL" "$el" "$src" || echo "# moving $el back to $src failed"
    done < <(awk '$1 == "drive" && $3 == "yes" { print $2, $5 }' <<<"$("$TAPE_TOOL" inventory "$CHANGER_URL")")
}
vols_of() { sql "SELECT group_concat(v.label, ' ') FROM (SELECT v.label FROM tape_copies t JOIN objects o ON o.id = t.object_id JOIN volumes v ON v.id = t.volume_id WHERE o.key = 'ckpt/$1' ORDER BY v.label) v"; }
push ckpt a "$SRC/a" >/dev/null; ID=$(json "$BODY" 'j["pushId"]')
push ckpt b "$SRC/b" "$ID" >/dev/null
is "$(wait_push "$ID")" DURABLE "a and b pushed: DURABLE"
is "$(vols_of b)" "T0000001 T0000002" "b on the two cartridges loaded first"

# ---- a cartridge whose label is another's: refused, nothing written ------------------------
cp "$VTL/T0000001" "$VTL/T0000003"
cp "$VTL/T0000003" "$TEST_DIR/T0000003.before"
is "$(push_one c)" DURABLE "c (5 MB: no room left on T0000001/2) pushed: DURABLE"
grep -q 'cartridge T0000003: its label record says T0000001.*refused, nothing written' "$LOG"
ok $? "T0000003, labelled T0000001 on tape, is refused with a message saying so"
cmp -s "$VTL/T0000003" "$TEST_DIR/T0000003.before"
ok $? "nothing was written to T0000003"
is "$(vols_of c)" "T0000004 T0000005" "c's copies went to the next cartridges"

# ---- end of medium before the capacity: the copy moves on --------------------------------
is "$(push_one d)" DURABLE "d pushed: DURABLE"
grep -q 'cartridge T0000006, archive file 1: .*WRITE(6): .*end of medium' "$LOG"
ok $? "T0000006 reached its end of medium while d was written"
grep -qx full "$STATE/tape/T0000006.index"
ok $? "T0000006 is recorded full in its index"
is "$(vols_of d)" "T0000007 T0000008" "d's copies are on other cartridges, none on T0000006"

# ---- a write-protected cartridge ---------------------------------------------------------
wp_lun=2
$TGTADM --mode logicalunit --op update --tid 1 --lun $wp_lun --params readonly=1
is "$(push_one e)" DURABLE "e pushed with drive $wp_lun reporting its cartridges write protected: DURABLE"
grep -q 'write protected' "$LOG"
ok $? "the write-protected cartridge is logged"
is "$(sql "SELECT count(DISTINCT t.volume_id) FROM tape_copies t JOIN objects o ON o.id = t.object_id WHERE o.key = 'ckpt/e'")" \
    2 "e has its two copies on two cartridges"
$TGTADM --mode logicalunit --op update --tid 1 --lun $wp_lun --params readonly=0

# ---- a corrupted region: the other copy is read ----------------------------------------
c1=$(sql "SELECT v.label FROM tape_copies t JOIN objects o ON o.id = t.object_id JOIN volumes v ON v.id = t.volume_id WHERE o.key = 'ckpt/b' AND t.copy = 1")
# flip CARTRIDGE_FILE: inverts 4 KiB of b's data in it (again: restores them)
flip() {
    python3 - "$1" "$SRC/b" <<'PY'
import sys
img = bytearray(open(sys.argv[1], 'rb').read())
data = open(sys.argv[2], 'rb').read()
at = img.find(data[1000000:1000064])
if at < 0:
    at = img.find(bytes(x ^ 0xff for x in data[1000000:1000064]))
assert at > 0, "b's bytes not found in the cartridge file"
for i in range(at, at + 4096):
    img[i] ^= 0xff
open(sys.argv[1], 'r+b').write(img)
PY
}
flip "$VTL/$c1"
ok $? "4 KiB of b's data flipped in cartridge $c1 (copy 1)"
evict stageout
: > "$TEST_DIR/scsi.log"
run_ok "stageind restarts" -- start
track_pid "$(daemon_pid)"
REQ=$(stage '{"datasets":["ckpt"]}')
is "$(wait_done "$REQ" 60)" COMPLETED "the checkpoints are recalled: COMPLETED"
is "$(mismatched a b c d e)" "" "every recalled file equals what was pushed"
grep -q "checksum mismatch.*volume $c1" "$LOG"
ok $? "b's mismatch on $c1 is logged, naming the volume; the other copy was read"
flip "$VTL/$c1"

# ---- a drive taken offline: its work goes to the other drive -----------------------------
evict stageout
$TGTADM --mode logicalunit --op update --tid 1 --lun 1 --params online=0
run_ok "stageind restarts with drive 1 offline" -- start
track_pid "$(daemon_pid)"
REQ=$(stage '{"datasets":["ckpt"]}')
is "$(wait_done "$REQ" 90)" COMPLETED "recalled with one drive offline: COMPLETED"
is "$(mismatched a b c d e)" "" "every recalled file equals what was pushed"
grep -q 'tape: drive 0 (.*) offline: .*NOT READY: medium not present' "$LOG"
ok $? "drive 0 is taken offline with the condition it reported"
api GET /metrics >/dev/null
grep -q '^stagein_drives_failed 1' "$BODY"
ok $? "the metrics count one failed drive"
stop
$TGTADM --mode logicalunit --op update --tid 1 --lun 1 --params online=1

# ---- UNIT ATTENTION, and cartridges moved by hand, while stageind runs --------------------
evict stageout
# the cartridges left in the drives back to their slots, so that a's are in slots
unload_drives
run_ok "stageind restarts" -- start
track_pid "$(daemon_pid)"
read -r a1 a2 <<<"$(vols_of a | tr '\n' ' ')"
spare=$((100 + 8))
for v in $a1 $a2; do
    from=$(awk -v b="$v" '$1 == "slot" && $4 == b { print $2 }' <<<"$("$TAPE_TOOL" inventory "$CHANGER_URL")")
    "$TAPE_TOOL" move "$CHANGER_URL" "$from" "$spare" || echo "# moving $v from $from failed"
    spare=$((spare + 1))
done
is "$("$TAPE_TOOL" inventory "$CHANGER_URL" | awk '$1 == "slot" && $2 >= 108 { print $4 }' | tr '\n' ' ')" \
    "$a1 $a2 " "a's cartridges $a1 and $a2 moved by hand to the spare slots 108, 109"
"$TAPE_TOOL" reset "$TGT_URL/1" && "$TAPE_TOOL" reset "$TGT_URL/2"
ok $? "LOGICAL UNIT RESET of both drives (stagein-tape reset): stageind's next commands report UNIT ATTENTION"
: > "$TEST_DIR/scsi.log"
REQ=$(stage '{"datasets":["ckpt"]}')
is "$(wait_done "$REQ" 90)" COMPLETED "recalled after the resets and the moves: COMPLETED"
is "$(mismatched a b c d e)" "" "every recalled file equals what was pushed"
ua=$(grep -c 'status=check(UNIT ATTENTION 29h/00h)' "$TEST_DIR/scsi.log")
[ "$ua" -ge 1 ] && [ "$ua" -le 4 ]
ok $? "the UNIT ATTENTION after the reset is reported ($ua commands) and retried, a bounded number of times"
grep -Eq "tape: cartridge ($a1|$a2) is in slot 10[89], not [0-9]+ as recorded" "$LOG"
ok $? "a moved cartridge is found again where the re-read inventory has it, not guessed"
stop

# restart_in_blocks COPIES WINDOW BLOCK: stageind restarted on 60 MB cartridges,
# pushes of COPIES copies (aggregated over WINDOW s) written in BLOCK-byte blocks
restart_in_blocks() {
    write_conf "push: { copies = $1; aggregate_window = $2; };
library: { policy = \"linear\"; };
$(TAPE_CAPACITY=60000000 tape_conf 2 "block_size = $3;")"
    run_ok "stageind restarts" -- start
    track_pid "$(daemon_pid)"
}

# ---- a drive taken offline mid-recall: its object and the rest from the other copies ----
# Four 6 MB objects in 16 KiB blocks (~1,500 READs): the drive reading them is
# taken offline (tgtadm online=0) after 40 of its READs. On a loaded machine
# the recall can end before the offline lands: then it is tried again (the
# cache evicted), at most three times.
restart_in_blocks 2 0.5 16384
MID_KEYS="m1 m2 m3 m4"
ID=""
for k in $MID_KEYS; do
    head -c 6000000 /dev/urandom > "$SRC/$k"
    push mid "$k" "$SRC/$k" "$ID" >/dev/null
    [ -n "$ID" ] || ID=$(json "$BODY" 'j["pushId"]')
done
is "$(wait_push "$ID" 90)" DURABLE "four 6 MB objects pushed in 16 KiB blocks, two copies: DURABLE"
offline_lun="" mid_state="" mid_reads=0
for try in 1 2 3; do
    evict stageout
    : > "$TEST_DIR/scsi.log"
    log_mark=$(wc -l < "$LOG")
    start >/dev/null 2>&1 || diag "stageind did not start (try $try)"
    track_pid "$(daemon_pid)"
    REQ=$(stage '{"datasets":["mid"]}')
    offline_lun=""
    for _ in $(seq 1000); do
        offline_lun=$(awk '$3 == "READ(6)" && ++n[$2] > 40 { sub(/.*\//, "", $2); print $2; exit }' \
            "$TEST_DIR/scsi.log")
        [ -n "$offline_lun" ] && break
        sleep 0.01
    done
    [ -n "$offline_lun" ] &&
        $TGTADM --mode logicalunit --op update --tid 1 --lun "$offline_lun" --params online=0
    mid_reads=$(grep -c 'READ(6)' "$TEST_DIR/scsi.log")
    mid_state=$(wait_done "$REQ" 90)
    tail -n +"$((log_mark + 1))" "$LOG" | grep -q 'tape: drive [0-9] (.*) offline' && break
    diag "the offline of drive LUN '$offline_lun' landed after the recall ($mid_reads READs, $mid_state): again"
    [ -n "$offline_lun" ] &&
        $TGTADM --mode logicalunit --op update --tid 1 --lun "$offline_lun" --params online=1
done
is "$mid_state" COMPLETED \
    "recalled with drive LUN $offline_lun taken offline after $mid_reads READs in all: COMPLETED"
is "$(MISMATCH_DATASET=mid mismatched $MID_KEYS)" "" "every recalled file equals what was pushed"
tail -n +"$((log_mark + 1))" "$LOG" |
    grep -q "tape: drive $((offline_lun - 1)) (.*/$offline_lun) offline: .*NOT READY"
ok $? "drive $((offline_lun - 1)) is taken offline mid-recall with the condition it reported"
other=$((3 - offline_lun))
after=$(awk -v off="/$offline_lun\$" -v other="/$other\$" '
    $2 ~ off && $0 !~ /status=good/ { failed = 1; next }
    failed && $2 ~ other && $3 == "READ(6)" { n++ } END { print n + 0 }' "$TEST_DIR/scsi.log")
[ "$after" -gt 0 ]
ok $? "the other drive (LUN $other) read on after the failed command ($after READs)"
api GET /metrics >/dev/null
grep -q '^stagein_drives_failed 1' "$BODY"
ok $? "the metrics count one failed drive"
stop
$TGTADM --mode logicalunit --op update --tid 1 --lun "$offline_lun" --params online=1

# ---- kill -9 mid-write ------------------------------------------------------------------
# push_under_way KEY MB: MB megabytes pushed as KEY (its push id in PUSH)
# until more than 20 of its blocks have been written
push_under_way() {
    head -c "$2"000000 /dev/urandom > "$SRC/$1"
    : > "$TEST_DIR/scsi.log"
    push ckpt "$1" "$SRC/$1" >/dev/null
    PUSH=$(json "$BODY" 'j["pushId"]')
    for _ in $(seq 300); do
        [ "$(grep -c 'WRITE(6) len=65536' "$TEST_DIR/scsi.log")" -gt 20 ] && break
        sleep 0.02
    done
}
restart_in_blocks 1 0.2 65536
push_under_way big 20
BIG=$PUSH
kill -9 "$(daemon_pid)"
ok $? "stageind killed with -9 after $(grep -c 'WRITE(6) len=65536' "$TEST_DIR/scsi.log") blocks of the archive write"
sleep 0.5
run_ok "stageind restarts" -- start
track_pid "$(daemon_pid)"
is "$(wait_push "$BIG" 90)" DURABLE "the interrupted push is redone: DURABLE"

# ---- UNIT ATTENTION mid-write: the archive file written again, not twice -------------------
# 50 MB: the reset must find the write still under way (a cartridge of
# 60 MB: big2 goes to another one than big's). tgt writes the 763 blocks
# faster than the reset tool logs in, so stageind is stopped (SIGSTOP)
# between two of its commands while both drives are reset, as a bus reset
# between two commands would find it; its next command meets the UNIT
# ATTENTION. Should the write still end first (a stall before the stop),
# the push is tried again with another file, at most three times.
rewrite='tape: archive write, copy 1: .*UNIT ATTENTION.*; position re-read, archive file [0-9]+ of T[0-9]+ written again from its start \(1 of 30\)'
# stop_at_block N: stageind stopped (SIGSTOP) the moment the command log
# shows the archive write's Nth block; prints the count then (nothing when
# the log stays short of N for 60 s)
stop_at_block() {
    awk -v n="$1" -v pid="$(daemon_pid)" '
        /WRITE\(6\) len=65536/ && ++c >= n { system("kill -STOP " pid); print c; exit }' \
        < <(exec timeout 60 tail -n +1 -f "$TEST_DIR/scsi.log")
}
for big2 in big2 big2b big2c; do
    head -c 50000000 /dev/urandom > "$SRC/$big2"
    : > "$TEST_DIR/scsi.log"
    stop_at_block 21 > "$TEST_DIR/stopped" &
    watcher=$!
    push ckpt "$big2" "$SRC/$big2" >/dev/null
    BIG2=$(json "$BODY" 'j["pushId"]')
    wait "$watcher"
    stop_blocks=$(grep -c 'WRITE(6) len=65536' "$TEST_DIR/scsi.log")
    "$TAPE_TOOL" reset "$TGT_URL/1" && "$TAPE_TOOL" reset "$TGT_URL/2"
    reset_rc=$? reset_blocks=$(grep -c 'WRITE(6) len=65536' "$TEST_DIR/scsi.log")
    kill -CONT "$(daemon_pid)"
    diag "stageind stopped at block $(cat "$TEST_DIR/stopped") of $big2's write ($stop_blocks logged), both drives reset after $reset_blocks"
    state=$(wait_push "$BIG2" 90)
    [ "$state" = DURABLE ] && grep -Eq "$rewrite" "$LOG" && break
    diag "the reset of $big2's write landed after $reset_blocks blocks ($state): again"
done
ok $reset_rc "both drives reset after $reset_blocks blocks of the archive write"
is "$state" DURABLE "the push interrupted by UNIT ATTENTION: DURABLE"
grep -Eq "$rewrite" "$LOG"
ok $? "the write met the UNIT ATTENTION, re-read its position and wrote the archive file again"
stop
# each read back off its cartridge, in drive 1 (emptied first: the cartridge
# stageind left there may be another one than the one read)
unload_drives
for k in big "$big2"; do
    vol=$(vols_of $k)
    "$TAPE_TOOL" image "$CHANGER_URL" "$TGT_URL/1" 1 "$vol" "$TEST_DIR/images-$k" >/dev/null
    "$STAGEIN" tape dump "$vol" --volume-dir "$TEST_DIR/images-$k" --verify > "$TEST_DIR/dump-$k" 2>&1
    ok $? "cartridge $vol ($k's) reads back whole and verified (stagein tape dump --verify)"
    is "$(awk -v m="stageout/ckpt/$k" '$4 == m' "$TEST_DIR/dump-$k" | wc -l)" 1 \
        "$k is on it once: the interrupted archive file was written over"
done

finish
