#!/bin/bash
# Nothing accepted is lost: stage requests keep arriving while stageind is
# killed with SIGKILL at random moments of its recalls (at least 20 times)
# and restarted each time; at the end every accepted request is COMPLETED
# and every cache file is byte-identical to its source and its checksum.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"

KILLS=${KILLS:-20}
keys=()
for i in $(seq -w 1 45); do
    make_file "k$i" $((40000 + 10#$i * 9000))
    keys+=("k$i")
done

use_state K
# a slower clock than the default so that kills land inside recalls
write_conf 'library: { drives = 3; time_scale = 0.01; };'
"$STAGEIN" catalog init >/dev/null
for v in K00001 K00002 K00003; do tape create "$v" --capacity 20000000000 >/dev/null; done
write_volume K00001 1 "${keys[@]:0:15}"
write_volume K00002 1 "${keys[@]:15:15}"
write_volume K00003 1 "${keys[@]:30:15}"
write_volume K00003 2 "${keys[@]:0:5}"
define part1 "${keys[@]:0:20}"
define part2 "${keys[@]:15:20}"
define part3 "${keys[@]:25:20}"
define all "${keys[@]}"

# P's push service: pushes to run during the kill loop go here, and their
# read-back check into check_pushes (both run once per round / at the end).
push_round() { :; }
check_pushes() { :; }

round() {
    submit "part$(($1 % 3 + 1))"
    push_round
}

run_ok "stageind starts" -- start
track_pid "$(daemon_pid)"
submit all
kill_loop "$KILLS" round
is "$kills:$restarts" "$KILLS:$KILLS" "$KILLS kill -9 during recalls, each followed by a restart"
diag "accepted ${#accepted[@]} requests; $(sql "SELECT count(*) FROM events WHERE kind = 'object.recalled'") recalls recorded"
ok "$([ "${#accepted[@]}" -eq $((KILLS + 1)) ]; echo $?)" "every stage request was accepted"

is_all_completed 120 "${accepted[@]}"
is "$(cache_mismatches "${keys[@]}")" "" "every cache file is byte-identical and matches its checksum"
is "$(sql "SELECT count(*) FROM cache")" 45 "each object cached once"
is "$(sql "SELECT count(*) FROM cache_pins")" \
    "$(sql "SELECT count(*) FROM request_items WHERE state = 'COMPLETED'")" \
    "one cache pin per completed item"
check_pushes
stop
finish
