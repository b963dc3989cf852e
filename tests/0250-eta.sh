#!/bin/bash
# The ETA a stage request reports (GET /api/v1/stage/ID "eta", stagein
# status): the simulated library's queue replayed on a virtual clock by the
# same scheduler, from the drives' state. Property checked (not a timing
# threshold): requests queued together on one drive finish in the order
# their ETAs say, every active request has an ETA, finished ones none; the
# error of each prediction is printed (BENCHMARKS.md "ETA").
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"

for f in e1 e2 e3 e4 e5 e6 z1; do make_file "$f" 200000; done
use_state A
write_conf "library: { drives = 1; time_scale = 0.05; };"
"$STAGEIN" catalog init >/dev/null
for v in V00001 V00002 V00003 V00004; do tape create "$v" --capacity 20000000000 >/dev/null; done
write_volume V00001 1 e1 e2
write_volume V00002 1 e3 e4
write_volume V00003 1 e5 e6
write_volume V00004 1 z1
define busy z1
define first e1 e2
define second e3 e4
define third e5 e6
run_ok "stageind starts (1 drive, 4 volumes, time scale 0.05)" -- start
track_pid "$(daemon_pid)"

# the drive is busy with another volume while the three wait
R0=$(stage '{"datasets": ["busy"], "priority": 100}')
sleep 0.3
R1=$(stage '{"datasets": ["first"]}')
R2=$(stage '{"datasets": ["second"], "priority": 5}')
R3=$(stage '{"datasets": ["third"], "priority": -5}')
ok $([ -n "$R1" ] && [ -n "$R2" ] && [ -n "$R3" ]; echo $?) "three requests on three volumes, one drive"
sleep 0.3
t0=$(date +%s.%N)
eta() { api GET "/api/v1/stage/$1" >/dev/null; json "$BODY" 'j["eta"] if j.get("eta") is not None else "none"'; }
E1=$(eta "$R1"); E2=$(eta "$R2"); E3=$(eta "$R3")
diag "ETAs: second $E2 s, first $E1 s, third $E3 s"
ok $([ "$E1" != none ] && [ "$E2" != none ] && [ "$E3" != none ]; echo $?) "every queued request has an ETA"
for r in "$R1" "$R2" "$R3"; do wait_done "$r" 120 >/dev/null; done
is "$(sql "SELECT group_concat(uuid, ' ') FROM (SELECT uuid FROM requests WHERE uuid <> '$R0' ORDER BY finished)")" \
    "$(python3 -c 'import sys; print(" ".join(r for _, r in sorted(zip(map(float, sys.argv[1:4]), sys.argv[4:7]))))' "$E1" "$E2" "$E3" "$R1" "$R2" "$R3")" \
    "the requests finished in the order of their ETAs"
for pair in "$R1:$E1" "$R2:$E2" "$R3:$E3"; do
    r=${pair%%:*} e=${pair##*:}
    actual=$(python3 -c "print('%.2f' % ($(sql "SELECT finished FROM requests WHERE uuid = '$r'") - $t0))")
    diag "request ${r:0:8}: predicted $(printf '%.2f' "$e") s, took $actual s, error $(python3 -c "print('%+.0f %%' % (100 * ($e - $actual) / $actual))")"
done
is "$(eta "$R1")" none "a finished request has no ETA"
"$STAGEIN" status "$R2" --endpoint "unix:$SOCK" | grep -q '^eta       -$'
ok $? "stagein status shows '-' once it is staged"
finish
