#!/bin/bash
# The recall benchmark on its quick workloads: well-formed JSON, every policy
# on every workload (one seed, to stay quick; --seeds checked on W4), engine
# invariants held; workload files with errors are refused with FILE:LINE.
# (No timing is asserted.)
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
RECALL="$top_builddir/tests/bench/recall"

rc=0
"$RECALL" --quick --json --seeds 1 >"$TEST_DIR/out.json" 2>"$TEST_DIR/err.txt" || rc=$?
ok "$rc" "recall --quick --json --seeds 1 exits 0"
[ "$rc" -eq 0 ] || sed 's/^/# /' "$TEST_DIR/err.txt" | head -20

python3 - "$TEST_DIR/out.json" >"$TEST_DIR/check.txt" 2>&1 <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
assert set(doc) == {"default_policy", "results", "worst"}, doc.keys()
assert doc["default_policy"] == "job-aware", doc["default_policy"]
keys = {"workload", "seed", "policy", "makespan_s", "mean_completion_s", "p95_completion_s",
        "missed_deadlines", "lateness_s", "mounts", "locate_s", "efficiency", "cpu_s"}
workloads = ("W1", "W2", "W3", "W4", "W5", "W6", "W6X", "W7", "W8", "W9")
policies = ("fifo", "linear", "edf", "cta-sltf", "cta-mount", "sltf", "job-aware")
runs = set()
for r in doc["results"]:
    assert set(r) == keys, r
    for k in keys - {"workload", "policy"}:
        assert isinstance(r[k], (int, float)) and r[k] >= 0, (k, r)
    assert 0 <= r["efficiency"] <= 1, r
    assert r["makespan_s"] > 0 and r["mounts"] >= 1, r
    assert r["seed"] == 20260101, r
    assert (r["missed_deadlines"] == 0) == (r["lateness_s"] == 0), r
    runs.add((r["workload"], r["policy"]))
want = {(w, p) for w in workloads for p in policies}
assert runs == want, sorted(want - runs)
# Deadlines exist only in W2, W6 and W6X; fifo misses W6's.
assert all(r["missed_deadlines"] == 0 for r in doc["results"]
           if r["workload"] not in ("W2", "W6", "W6X")), "deadline outside W2/W6/W6X"
assert any(r["missed_deadlines"] > 0 for r in doc["results"]
           if r["workload"] == "W6" and r["policy"] == "fifo"), "fifo meets W6?"
worst = {w["workload"]: w for w in doc["worst"]}
assert set(worst) == set(workloads), worst.keys()
for w in worst.values():
    assert w["seeds"] == 1 and w["makespan_over_best"] >= 0 and w["mean_over_best"] >= 0, w
    assert w["fifo_makespan_x"] > 0, w
print("ok")
PY
ok $? "JSON is well-formed: the exact keys, 10 workloads x 7 policies, worst ratios"
grep -v '^ok$' "$TEST_DIR/check.txt" | sed 's/^/# /'

n=$(grep -c 'invariants held' "$TEST_DIR/err.txt")
is "$n" 70 "invariants held in all 70 runs (each object read once, no volume in two drives, ...)"
if grep -q 'INVARIANT BROKEN' "$TEST_DIR/err.txt"; then ok 1 "no broken invariant"; else ok 0 "no broken invariant"; fi

# Seeds: two seeds of W4 give two different workloads, each reported.
"$RECALL" --quick --json --seeds 2 --workload W4 --policy linear --policy job-aware \
    >"$TEST_DIR/seeds.json" 2>/dev/null
python3 - "$TEST_DIR/seeds.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
seeds = sorted({r["seed"] for r in doc["results"]})
assert seeds == [20260101, 20260102], seeds
a, b = ([r["makespan_s"] for r in doc["results"] if r["seed"] == s and r["policy"] == "linear"]
        for s in seeds)
assert a != b, (a, b)
assert doc["worst"][0]["seeds"] == 2, doc["worst"]
PY
ok $? "--seeds 2: two seeds, two different workloads, worst over both"
run_fails_with "--seeds 0 is refused" "--seeds '0'" -- "$RECALL" --quick --seeds 0

# A workload file of our own, with faults: a readable second copy, a file
# with no good copy, a drive failing mid-run.
cat >"$TEST_DIR/mine.wl" <<'WL'
library drives=2 robots=1
volume T00001 fill=2000000000000
volume T00002 fill=2000000000000
file 1 4000000000 T00001:100000000000 T00002:5000
file 2 4000000000 T00001:900000000000
file 3 4000000000 T00002:700000000000
request 1 at=0 files=1-3
fault region volume=T00001 start=100000000000 length=4096
fault region volume=T00001 start=900000000000 length=4096
fault drive=0 at=40
WL
"$RECALL" --json --workload "$TEST_DIR/mine.wl" >"$TEST_DIR/mine.json" 2>"$TEST_DIR/mine.err"
ok $? "a workload file with faults runs under every policy"
n=$(grep -c 'invariants held: 1 requests, 2 reads (each object once), 1 failed objects' "$TEST_DIR/mine.err")
is "$n" 7 "each policy: file 1 from its second copy, file 2 failed, file 3 read"
grep -q 'T00001: unreadable region at offset 900000000000 (object 2' "$TEST_DIR/mine.err"
ok $? "the failure names volume, region and object"

# Bad workload files: refused with FILE:LINE.
printf 'library drives=2\nvolume A fill=100\nfile 1 1000 A:0\n' >"$TEST_DIR/bad1.wl"
run_fails_with "a file past its volume's fill is refused with its line" "bad1.wl:3: file 1" \
    -- "$RECALL" --quick --workload "$TEST_DIR/bad1.wl"
printf 'volume A fill=1000\nfile 1 10 A:0\n\nrequest 1 at=0 files=1,2\n' >"$TEST_DIR/bad2.wl"
run_fails_with "an undeclared file in a request is refused with its line" \
    "bad2.wl:4: request names file 2" -- "$RECALL" --workload "$TEST_DIR/bad2.wl"
printf 'volume A fill=1000\nfrobnicate\n' >"$TEST_DIR/bad3.wl"
run_fails_with "an unknown statement is refused with its line" "bad3.wl:2: unknown statement" \
    -- "$RECALL" --workload "$TEST_DIR/bad3.wl"
run_fails_with "an unknown policy is refused" "unknown scheduling policy 'best'" \
    -- "$RECALL" --quick --policy best
run_fails_with "a missing workload file is refused" "nope.wl" \
    -- "$RECALL" --workload "$TEST_DIR/nope.wl"
finish
