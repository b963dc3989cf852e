#!/bin/bash
# The catalog's history is kept for catalog.history_days: stageind removes
# requests that ended longer ago than that (with their items), and keeps
# active and pinned ones; `stagein catalog purge` does the same on demand,
# counts first with --dry-run, and refuses bad input. The objects, the
# cache and the volumes stay.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"

for f in h1 h2 h3 h4; do make_file "$f" 70000; done
use_state H
# 0.0001 days (8.6 s) kept, so purged about every 0.9 s
CATALOG_CONF='catalog: { history_days = 0.0001; };' write_conf 'library: { time_scale = 0.001; };'
"$STAGEIN" catalog init >/dev/null
tape create H00001 --capacity 20000000000 >/dev/null
write_volume H00001 1 h1 h2 h3 h4
define hist h1 h2 h3 h4
run_ok "stageind starts, keeping 0.0001 days of history" -- start
track_pid "$(daemon_pid)"

A=$(stage '{"datasets":["hist"]}')
B=$(stage '{"datasets":["hist"]}')
is "$(wait_done "$A"):$(wait_done "$B")" "COMPLETED:COMPLETED" "two requests COMPLETED"
is "$(api POST "/api/v1/release/$A")" 200 "the first released"
released=$(date +%s.%N)
# the released one goes once 8.6 s have passed, within a tenth of that more
gone=""
for _ in $(seq 200); do
    [ "$(sql "SELECT count(*) FROM requests WHERE uuid = '$A'")" = 0 ] && { gone=$(date +%s.%N); break; }
    sleep 0.1
done
ok "$([ -n "$gone" ]; echo $?)" "the released request is purged by stageind"
# (the release's own round trip is the margin below 8.6 s)
ok "$(python3 -c "import sys; sys.exit(0 if ${gone:-0} - $released >= 8.0 else 1)"; echo $?)" \
    "... not before the 8.6 s kept ($(python3 -c "print(round(${gone:-0} - $released, 1))") s)"
is "$(sql "SELECT count(*) FROM request_items i JOIN requests r ON r.id = i.request_id WHERE r.uuid = '$B'"):$(sql "SELECT count(*) FROM request_items")" \
    "4:4" "the pinned request and its items stay; the purged one's items are gone"
is "$(sql "SELECT count(*) FROM cache"):$(sql "SELECT count(*) FROM cache_pins"):$(sql "SELECT count(*) FROM objects")" \
    "4:4:4" "the cache, the pinned request's pins and the objects stay"
ok "$(grep -q 'history purge: 1 requests (4 items) and 0 pushes (0 files) ended more than 0.0001 days ago' "$LOG"; echo $?)" \
    "the log says what was purged and why"
is "$(api GET "/api/v1/stage/$A")" 404 "the purged request's status: not found"

# the CLI: bad input changes nothing; a dry run counts; a purge removes
run_fails_with "--older-than x refused, naming the bad value" "'x' is not a number of days" -- \
    "$STAGEIN" catalog purge --older-than x
run_fails_with "--older-than -1 refused" "'-1' is not a number of days" -- \
    "$STAGEIN" catalog purge --older-than -1
is "$(api POST "/api/v1/release/$B")" 200 "the second released"
sleep 1.2
is "$("$STAGEIN" catalog purge --older-than 0 --dry-run | cut -d' ' -f1-9)" \
    "would purge 1 requests (4 items) and 0 pushes" "a dry run counts the released request"
is "$(sql "SELECT count(*) FROM requests")" 1 "... and removes nothing"
is "$("$STAGEIN" catalog purge --older-than 0 | cut -d' ' -f1-8)" \
    "purged 1 requests (4 items) and 0 pushes" "stagein catalog purge --older-than 0 removes it"
is "$(sql "SELECT count(*) FROM requests"):$(sql "SELECT count(*) FROM objects")" "0:4" \
    "no request left, every object kept"
stop
finish
