#!/bin/bash
# The tape backend on a site of several instances (tgt: 2 drives, 4
# cartridges): an archive write takes the volume lease of each cartridge it
# writes, so no cartridge is written by one instance while another holds it
# (mounted in its drive, or being written by it). Another live instance is
# stood in for by its rows (instances, leases), as a second stageind on the
# same library would leave them: the push goes to the one cartridge nobody
# holds; with every cartridge held it waits, and is written once one is
# given back; the lease is this instance's while it writes.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"
. "$top_srcdir/tests/tape-lib.sh"
trap 'stop; tgt_stop; cleanup' EXIT

tgt_start 2 4
ok $? "tgtd serves a library of 2 drives and 4 cartridges on 127.0.0.1:$TGT_PORT"

use_state A
STAGEIND_CONF_EXTRA='instance = "i1"; lease_time = 5; heartbeat_interval = 0.5;' \
    write_conf "push: { copies = 1; aggregate_window = 0.2; };
$(tape_conf 2)"
"$STAGEIN" catalog init >/dev/null
# instance i2 on another node, live (its heartbeat ahead), holding three
# cartridges' volume leases
now=$(date +%s)
sql "INSERT INTO instances(name, host, pid, started, heartbeat) VALUES ('i2', 'node-elsewhere', 1, $now, $((now + 3600)));
     INSERT INTO leases(kind, name, instance, expires) VALUES
       ('volume', 'T0000001', 'i2', $((now + 3600))), ('volume', 'T0000002', 'i2', $((now + 3600))),
       ('volume', 'T0000003', 'i2', $((now + 3600)));"
run_ok "stageind (instance i1) starts on the tape backend" -- start
track_pid "$(daemon_pid)"

make_file a 300000
make_file b 200000
code=$(push ckpt a "$SRC/a"); ID=$(json "$BODY" 'j["pushId"]')
is "$code:$(wait_push "$ID")" "202:DURABLE" "a push while i2 holds three of the four cartridges: DURABLE"
is "$(sql "SELECT v.label FROM tape_copies t JOIN volumes v ON v.id = t.volume_id JOIN objects o ON o.id = t.object_id WHERE o.key = 'ckpt/a'")" \
    T0000004 "written to the one cartridge no other instance holds"
is "$(sql "SELECT instance FROM leases WHERE kind = 'volume' AND name = 'T0000004'")" i1 \
    "its volume lease is i1's (held while the cartridge is in i1's drive)"
is "$(sql "SELECT group_concat(name || '=' || instance, ' ') FROM (SELECT name, instance FROM leases WHERE kind = 'volume' AND instance = 'i2' ORDER BY name)")" \
    "T0000001=i2 T0000002=i2 T0000003=i2" "i2's leases untouched"

# every cartridge held by i2: the write waits
sql "INSERT OR REPLACE INTO leases(kind, name, instance, expires) VALUES ('volume', 'T0000004', 'i2', $(($(date +%s) + 3600)));"
code=$(push ckpt b "$SRC/b"); ID2=$(json "$BODY" 'j["pushId"]')
sleep 3
is "$code:$(api GET "/api/v1/push/$ID2" >/dev/null; json "$BODY" 'j["state"]')" "202:ARCHIVING" \
    "a push while i2 holds every cartridge: acknowledged, ARCHIVING (waiting for a cartridge)"
is "$(sql "SELECT count(*) FROM tape_copies t JOIN objects o ON o.id = t.object_id WHERE o.key = 'ckpt/b'")" 0 \
    "nothing of it on tape meanwhile"
sql "DELETE FROM leases WHERE kind = 'volume' AND name = 'T0000002'"
is "$(wait_push "$ID2")" DURABLE "once i2 gives T0000002 back, the push is written: DURABLE"
is "$(sql "SELECT v.label FROM tape_copies t JOIN volumes v ON v.id = t.volume_id JOIN objects o ON o.id = t.object_id WHERE o.key = 'ckpt/b'")" \
    T0000002 "on the cartridge given back"
is "$(sql "SELECT count(*) FROM leases WHERE kind = 'volume' AND instance = 'i2'")" 3 \
    "i2's other three leases untouched"
is "$(grep -c 'WRITE(6)' "$TEST_DIR/scsi.log" | awk '$1 > 0 { print "yes" }')" yes \
    "the archive files went to tgt (WRITE(6)s in the command log)"

stop
finish
