#!/bin/bash
# The push part of the kill -9 loop: stageind is killed with SIGKILL at
# random moments while clients push files (some mid-body, some while an
# aggregate is being archived; small files of 64 KiB six at a time, whose
# uploads share batch commits), at least 20 times, and restarted each time.
# At the end every push that was acknowledged (202) is DURABLE, nothing that
# was not acknowledged is left half-recorded, and every acknowledged file
# reads back identical from each of its tape copies.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"

KILLS=${KILLS:-22}
use_state K
write_conf 'push: { copies = 2; aggregate_window = 0.05; aggregate_bytes = 3000000; };'
"$STAGEIN" catalog init >/dev/null
for v in Q00001 Q00002 Q00003; do tape create "$v" --capacity 4000000000 >/dev/null; done
ACKED=$TEST_DIR/acked   # "pushId key file" for every 202
: > "$ACKED"

# pusher N [SIZE]: pushes files k<N>-<i> (of SIZE bytes, else 1 B-1.5 MB)
# until killed, recording each 202
pusher() {
    local n=$1 i=0 size code name
    while :; do
        i=$((i + 1))
        size=${2:-$(((RANDOM * 37 + n * 1000 + i) % 1500000 + 1))}
        name=k$n-$i
        make_file "$name" "$size"
        code=$(curl -s -o "$TEST_DIR/body.$n" -w '%{http_code}' --max-time 20 -X POST \
            -H "X-Stagein-Munge: $(cred)" --data-binary "@$SRC/$name" \
            -H "X-Stagein-Checksum: sha256:$(sha256sum < "$SRC/$name" | cut -d' ' -f1)" \
            "http://127.0.0.1:$PORT/api/v1/push?dataset=kill-$n&key=$name" 2>/dev/null)
        if [ "$code" = 202 ]; then
            echo "$(json "$TEST_DIR/body.$n" 'j["pushId"]') kill-$n/$name $name" >> "$ACKED"
        else
            sleep 0.05
        fi
    done
}

run_ok "stageind starts" -- start
track_pid "$(daemon_pid)"
for n in 1 2 3; do pusher "$n" & track_pid $!; done
# and small files, six in flight: batch commits of several uploads
for n in 4 5 6 7 8 9; do pusher "$n" 65536 & track_pid $!; done
PUSHERS=$(jobs -p)

restarts=0
for kill in $(seq "$KILLS"); do
    sleep "0.$((RANDOM % 9 + 1))"
    pid=$(daemon_pid)
    [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
    wait_gone "$pid"
    if start; then restarts=$((restarts + 1)); track_pid "$(daemon_pid)"; fi
done
kill $PUSHERS 2>/dev/null
wait $PUSHERS 2>/dev/null
is "$restarts" "$KILLS" "$KILLS kill -9 during pushes, each followed by a restart"
acked=$(wc -l < "$ACKED")
ok "$([ "$acked" -ge 5 ]; echo $?)" "pushes acknowledged across the kills: $acked"
small=$(grep -c ' kill-[4-9]/' "$ACKED")
ok "$([ "$small" -ge 20 ]; echo $?)" "small (64 KiB) pushes acknowledged across the kills: $small"
recovered() { grep -ho "[0-9]* $1" "$LOG" | awk '{s += $1} END {print s + 0}'; }
diag "recovery removed $(recovered 'files without a row removed') files without a row, $(recovered 'temp files removed') temp files, $(recovered 'unacknowledged uploads removed') unacknowledged uploads; freed $(recovered 'segment ranges without a row freed') segment ranges without a row"

# every acknowledged file becomes DURABLE
pending=1
for _ in $(seq 600); do
    pending=$(sql "SELECT count(*) FROM push_items WHERE state IN ('RECEIVED', 'ARCHIVING')")
    [ "$pending" = 0 ] && break
    sleep 0.1
done
is "$pending" 0 "nothing left waiting to be archived"
missing=""
while read -r id key file; do
    state=$(sql "SELECT i.state FROM push_items i JOIN objects o ON o.id = i.object_id JOIN pushes p ON p.id = i.push_id WHERE o.key = '$key' AND p.uuid = '$id'")
    [ "$state" = DURABLE ] || missing+="$key:${state:-gone} "
done < "$ACKED"
is "$missing" "" "every acknowledged push is DURABLE"
is "$(sql "SELECT count(*) FROM push_items WHERE state IN ('RECEIVING', 'DISCARDED')")" 0 \
    "no unacknowledged upload is left recorded"
is "$(sql "SELECT count(*) FROM push_items i WHERE state = 'DURABLE' AND (SELECT count(DISTINCT volume_id) FROM tape_copies t WHERE t.object_id = i.object_id) <> 2")" \
    0 "every durable file has two copies on distinct volumes"

# every acknowledged file, read back from each tape copy, equals what was sent
bad=$(python3 - "$DB" "$STATE/volumes" "$SRC" "$ACKED" <<'PY'
import sqlite3, sys
db, voldir, src, acked = sys.argv[1:5]
c = sqlite3.connect(db)
bad = []
for line in open(acked):
    _, key, name = line.split()
    want = open(f"{src}/{name}", "rb").read()
    rows = c.execute("SELECT v.label, t.position, t.length FROM tape_copies t"
                     " JOIN volumes v ON v.id = t.volume_id JOIN objects o ON o.id = t.object_id"
                     " WHERE o.bucket = 'stageout' AND o.key = ?", (key,)).fetchall()
    if len(rows) != 2:
        bad.append(f"{key}:{len(rows)}copies")
    for label, pos, length in rows:
        with open(f"{voldir}/{label}.vol", "rb") as f:
            f.seek(pos)
            if length != len(want) or f.read(length) != want:
                bad.append(f"{key}@{label}")
print(" ".join(bad))
PY
)
is "$bad" "" "every acknowledged file reads back identical from each of its tape copies"
stop
finish
