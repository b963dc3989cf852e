#!/bin/bash
# The kill -9 loop with small objects (group commit): 3,000 objects of
# 64 KiB on three volumes, requests of 1,000 to 3,000 of them, stageind
# killed with SIGKILL at random moments (at least 20 times; the drives are
# slowed so that the recalls, and their batch commits, run through the
# loop; some kills must land inside a batch commit, as each restart's
# recovery tells) and restarted each time. At the end every accepted request is
# COMPLETED, every cached object has its row and its bytes (identical to
# the source, matching its checksum), and after one more restart's
# recovery no file is left in the cache without a row, none in tmp/.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"

KILLS=${KILLS:-20}
N=3000
mkdir -p "$SRC"
# deterministic 64 KiB files, made in one process (a loop of 3,000 would be slow)
python3 - "$SRC" "$N" <<'EOF'
import hashlib, sys
src, n = sys.argv[1], int(sys.argv[2])
for i in range(1, n + 1):
    seed = hashlib.sha256(b"s%d" % i).digest()
    with open("%s/s%04d" % (src, i), "wb") as f:
        f.write((seed * 2048)[:65536])
EOF
keys=()
for i in $(seq -w 1 "$N"); do keys+=("s$i"); done

use_state K
# 4 MB/s per drive, quick mounts and locates (each restart mounts and
# locates again: LTO's 4.3 s locate would leave the drives still locating at
# most kills): the 196 MB take about as long as the loop
write_conf 'library: { drives = 3; time_scale = 1.0; };
tape: { rate = 4000000.0; load_s = 0.2; unload_s = 0.2; robot_move_s = 0.1; locate_base_s = 0.05; };'
"$STAGEIN" catalog init >/dev/null
for v in K00001 K00002 K00003; do tape create "$v" --capacity 20000000000 >/dev/null; done
write_volume K00001 1 "${keys[@]:0:1000}"
write_volume K00002 1 "${keys[@]:1000:1000}"
write_volume K00003 1 "${keys[@]:2000:1000}"
define all "${keys[@]}"
define part1 "${keys[@]:0:1500}"
define part2 "${keys[@]:1000:1500}"
define part3 "${keys[@]:1500:1500}"
is "$(sql "SELECT count(*) FROM tape_copies")" "$N" "$N objects of 64 KiB on three volumes"

# a new request of 1,500 objects every fourth round
round() { [ $(($1 % 4)) != 1 ] || submit "part$(($1 % 3 + 1))"; }

# each batch commit held open 20 ms between its flush and its transaction,
# so that kills land inside batch commits (the commit itself takes about a
# millisecond for a few small objects)
export STAGEIN_TEST_CACHE_COMMIT_PAUSE_MS=20
run_ok "stageind starts" -- start
track_pid "$(daemon_pid)"
submit all
kill_loop "$KILLS" round
unset STAGEIN_TEST_CACHE_COMMIT_PAUSE_MS
is "$kills:$restarts" "$KILLS:$KILLS" "$KILLS kill -9 during recalls of small objects, each followed by a restart"
diag "accepted ${#accepted[@]} requests; $(sql "SELECT count(*) FROM cache") objects cached when the loop ended"
# where the kills landed, from each restart's recovery: a batch's objects
# written into their segment (or files renamed into the cache) whose
# transaction the kill cut short (inside a batch commit)
recovered() { grep -ho "[0-9]* $1" "$LOG" | awk '{s += $1} END {print s + 0}'; }
cut_short=$(( $(recovered 'segment ranges without a row freed') + $(recovered 'files without a row removed') ))
diag "recovery freed $cut_short segment ranges or files without a row, removed $(recovered 'empty segments removed') empty segments"
ok "$([ "$cut_short" -gt 0 ]; echo $?)" \
    "kills landed inside a batch commit (after its writes, before its transaction)"
# one kill more, then drives at full speed for the rest (the test's time)
pid=$(daemon_pid)
kill -9 "$pid"
wait_gone "$pid"
write_conf 'library: { drives = 3; time_scale = 0.01; };'
PORT=$(free_port)
run_ok "stageind restarts with faster drives" -- start
track_pid "$(daemon_pid)"

is_all_completed 180 "${accepted[@]}"
is "$(sql "SELECT count(*) FROM cache")" "$N" "each object cached once"
is "$(sql "SELECT count(*) FROM cache_pins")" \
    "$(sql "SELECT count(*) FROM request_items WHERE state = 'COMPLETED'")" \
    "one cache pin per completed item"

# one more restart: recovery finds nothing to remove, and every row its bytes
stop
run_ok "stageind restarts" -- start
track_pid "$(daemon_pid)"
stop
check_cache() {
    python3 - "$STATE/cache" "$DB" "$SRC" <<'EOF'
import hashlib, os, sqlite3, sys
cache, db, src = sys.argv[1:]
con = sqlite3.connect(db)
rows = con.execute("SELECT c.path, o.key, o.checksum, c.file_offset, c.size FROM cache c"
                   " JOIN objects o ON o.id = c.object_id").fetchall()
bad = []
for path, key, checksum, offset, size in rows:
    # a file of its own, or its range of a segment file
    try:
        with open(os.path.join(cache, path), "rb") as f:
            f.seek(offset)
            data = f.read(size)
    except OSError:
        bad.append("%s: no file" % key)
        continue
    if data != open(os.path.join(src, key), "rb").read():
        bad.append("%s: bytes differ" % key)
    elif "sha256:" + hashlib.sha256(data).hexdigest() != checksum:
        bad.append("%s: checksum" % key)
files = set()
for top in ("objects", "segments"):
    for d, _, names in os.walk(os.path.join(cache, top)):
        files.update(os.path.relpath(os.path.join(d, n), cache) for n in names)
orphans = files - {r[0] for r in rows}
# in a segment, no byte of one object under another's
spans = sorted((p, o, o + s) for p, _, _, o, s in rows if p.startswith("segments/"))
overlaps = sum(1 for a, b in zip(spans, spans[1:]) if a[0] == b[0] and b[1] < a[2])
if overlaps:
    bad.append("%d overlapping objects" % overlaps)
tmp = os.listdir(os.path.join(cache, "tmp"))
print("rows=%d bad=%d orphans=%d tmp=%d %s" % (len(rows), len(bad), len(orphans), len(tmp),
                                               " ".join(bad[:3] + sorted(orphans)[:3])))
EOF
}
is "$(check_cache)" "rows=$N bad=0 orphans=0 tmp=0 " \
    "every cached object's file is there, identical to its source; no orphan file, nothing in tmp/"
finish
