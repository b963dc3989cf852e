#!/bin/bash
# A batch commit whose flush fails (EIO, ENOSPC: injected with
# STAGEIN_TEST_CACHE_FLUSH_FAULT, as a failing disk would) marks nothing
# done: the recalled objects of that batch fail with an error naming the
# flush, none of them is cached (no row, no file), and a push in such a
# batch is refused (500) and not recorded. Once the fault is gone the same
# request completes and the same push is acknowledged.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"

keys=()
for i in 1 2 3 4 5 6; do
    make_file "f$i" $((30000 * i))
    keys+=("f$i")
done
use_state F
write_conf 'library: { drives = 1; time_scale = 0.001; };'
"$STAGEIN" catalog init >/dev/null
tape create F00001 --capacity 20000000000 >/dev/null
write_volume F00001 1 "${keys[@]}"
define six "${keys[@]}"

# cache_state: "rows files" of the cache
cache_state() {
    echo "$(sql "SELECT count(*) FROM cache") $(find "$STATE/cache/objects" "$STATE/cache/segments" "$STATE/cache/tmp" -type f | wc -l)"
}

# every batch flush fails while the first daemon runs
STAGEIN_TEST_CACHE_FLUSH_FAULT=EIO:1000 run_ok "stageind starts (flushes fail with EIO)" -- start
track_pid "$(daemon_pid)"
id=$(stage '{"datasets":["six"]}')
is "$(wait_done "$id" 60)" FAILED "the request FAILED"
is "$(sql "SELECT count(*) FROM request_items i JOIN requests r ON r.id = i.request_id
           WHERE r.uuid = '$id' AND i.state = 'FAILED' AND i.error LIKE '%flushing the cache%Input/output error%'")" 6 \
    "each item FAILED with an error naming the failed flush"
is "$(sql "SELECT count(*) FROM request_items WHERE state = 'COMPLETED'")" 0 "nothing marked done"
is "$(cache_state)" "0 0" "nothing of them in the cache: no row, no file"
grep -q "flushing the cache" "$LOG"
ok $? "the log says why"

# a push whose batch cannot be flushed (ENOSPC) is refused and not recorded
make_file p1 200000
push_file() {
    curl -s -o "$BODY" -w '%{http_code}' -X POST -H "X-Stagein-Munge: $(cred)" \
        --data-binary "@$SRC/$1" "http://127.0.0.1:$PORT/api/v1/push?dataset=out&key=$1"
}
stop
STAGEIN_TEST_CACHE_FLUSH_FAULT=ENOSPC:1 run_ok "stageind restarts (the next flush fails with ENOSPC)" -- start
track_pid "$(daemon_pid)"
is "$(push_file p1)" 500 "a push in the failing batch: 500"
grep -q "No space left on device" "$BODY"
ok $? "its error names the failure: $(head -c 200 "$BODY")"
is "$(sql "SELECT count(*) FROM push_items") $(cache_state)" "0 0 0" \
    "the push is not recorded, nothing in the cache"

# the fault has passed: the same push and the same request succeed
is "$(push_file p1)" 202 "the same push once the flush works: 202"
id=$(stage '{"datasets":["six"]}')
is "$(wait_done "$id" 60)" COMPLETED "the same request COMPLETED"
is "$(cache_mismatches "${keys[@]}")" "" "every recalled file is identical to its source"
stop
finish
