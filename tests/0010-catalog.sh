#!/bin/bash
# stagein catalog: imports, admin views (table and --json), read-only SQL,
# configuration errors; bad input refused with file:line and no change.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

data="$top_srcdir/tests/data"
export STAGEIN_CATALOG="$TEST_DIR/catalog.db"
export STAGEIN_CONF="$TEST_DIR/none.conf"   # absent on purpose: explicit, so an error
si() { "$STAGEIN" "$@"; }

run_fails_with "a missing explicit configuration file is an error" "none.conf: No such file" \
    -- si catalog datasets
unset STAGEIN_CONF
cat > "$TEST_DIR/bad.conf" <<CONF
catalog: {
  path = "$TEST_DIR/catalog.db";
  colour = "blue";
};
CONF
run_fails_with "unknown configuration key named with file:line" \
    "bad.conf:3: setting 'catalog.colour' is not a known setting" -- si --config "$TEST_DIR/bad.conf" catalog init
cat > "$TEST_DIR/good.conf" <<CONF
# the catalog of this test
catalog: { path = "$TEST_DIR/from-config.db"; };
CONF
unset STAGEIN_CATALOG
run_ok "catalog.path from --config" -- si --config "$TEST_DIR/good.conf" catalog init
ok $([ -f "$TEST_DIR/from-config.db" ]; echo $?) "catalog created where the configuration says"
export STAGEIN_CATALOG="$TEST_DIR/catalog.db"

# catalog init makes a missing state directory (private), and says so
printf 'state_dir = "%s/new/state";\n' "$TEST_DIR" > "$TEST_DIR/state.conf"
out=$(env -u STAGEIN_CATALOG "$STAGEIN" --config "$TEST_DIR/state.conf" catalog init 2>&1)
is "$(head -1 <<<"$out")" "created directory $TEST_DIR/new/state (mode 0700)" "catalog init creates a missing state_dir and says so"
is "$(stat -c %a "$TEST_DIR/new/state")" 700 "... mode 0700"
ok "$([ -f "$TEST_DIR/new/state/catalog.db" ]; echo $?)" "... with the catalog in it"

run_fails_with "views need an existing catalog" "catalog.db: No such file" -- si catalog datasets
run_ok "init" -- si catalog init
run_ok "import CSV" -- si catalog import "$data/sample-positions.csv"
run_ok "import LTFS" -- si catalog import --format ltfs "$data/sample-ltfs.xml"
cat > "$TEST_DIR/extra.jsonl" <<'J'
{"bucket":"extra-bucket","key":"a/b.bin","size":1234,"volume":"L90009","position":512,"copy":1,"checksum":"md5:d41d8cd98f00b204e9800998ecf8427e"}
J
run_ok "import JSON lines" -- si catalog import "$TEST_DIR/extra.jsonl"
run_ok "define imagenet-2026" -- si catalog define imagenet-2026 "$data/imagenet-2026.manifest" --mode 0644
run_ok "define climate-subset" -- si catalog define climate-subset "$data/climate-subset.manifest" --mode 0640 --owner 1000:1000

snapshot() { si catalog sql "SELECT (SELECT COUNT(*) FROM objects) || '/' || (SELECT COUNT(*) FROM tape_copies) || '/' || (SELECT COUNT(*) FROM volumes) || '/' || (SELECT COUNT(*) FROM dataset_members) || '/' || (SELECT COUNT(*) FROM datasets) AS s" --json; }
before=$(snapshot)
is "$before" '[{"s":"117/116/6/113/2"}]' "catalog contents after the imports"

# every view, as a table and as JSON
out=$(si catalog datasets)
grep -q '^imagenet-2026 .* 102 .*23.5 GB .* 4 .*0.0%' <<<"$out"; ok $? "datasets table"
out=$(si catalog datasets --json)
python3 -c 'import json,sys; d=json.load(sys.stdin); c=[x for x in d if x["dataset"]=="climate-subset"][0]; assert c["objects"]==11 and c["owner_uid"]==1000 and c["mode"]=="0640", c' <<<"$out"
ok $? "datasets JSON"
out=$(si catalog where imagenet-2026 --json)
python3 -c 'import json,sys; d=json.load(sys.stdin); assert len(d)==4 and sum(x["objects"] for x in d)==102, d' <<<"$out"
ok $? "where: 4 volumes, 102 objects"
out=$(si catalog volume L90002 --json)
python3 -c 'import json,sys; d=json.load(sys.stdin); assert [x["dataset"] for x in d]==["climate-subset","imagenet-2026"], d' <<<"$out"
ok $? "volume: datasets touching L90002"
out=$(si catalog volumes --json)
python3 -c 'import json,sys; d=json.load(sys.stdin); v={x["volume"]:x for x in d}; assert set(v)=={"L90001","L90002","L90003","L90004","L90009","L90101"} and v["L90009"]["used"]==1746, d' <<<"$out"
ok $? "volumes: labels and used bytes"
out=$(si catalog object extra-bucket/a/b.bin --json)
python3 -c 'import json,sys; d=json.load(sys.stdin)[0]; assert d["position"]==512 and d["checksum"].startswith("md5:"), d' <<<"$out"
ok $? "object lookup"
out=$(si catalog plan climate-subset --json)
python3 -c '
import json,sys
d=json.load(sys.stdin)
assert len(d)==11
last={}
for r in d:
    assert r["position"] > last.get(r["volume"], -1), r
    last[r["volume"]]=r["position"]
' <<<"$out"
ok $? "plan: every read, ordered by position on each volume"
out=$(si catalog plan climate-subset --summary)
grep -q '^L90002 .* 4 ' <<<"$out"; ok $? "plan summary table"
out=$(si catalog requests --json); is "$out" "[]" "requests: none yet"
out=$(si catalog cache --json)
is "$out" '[{"objects":0,"bytes":0,"pinned_objects":0,"pinned_bytes":0,"verified_objects":0,"oldest_access":null,"segment_objects":0,"segments":0}]' "cache: empty"
run_fails_with "sql refuses writes" "only read-only statements" -- si catalog sql "DELETE FROM objects"
run_fails_with "unknown dataset" "no dataset 'nope'" -- si catalog where nope
run_fails_with "unknown object" "no object a-bucket/x" -- si catalog object a-bucket/x
run_fails_with "unknown subcommand" "unknown command 'catalog frobnicate'" -- si catalog frobnicate

# bad input: a clear message with file:line, and nothing changes
printf 'imagenet-2026,new/ok.bin,5,L90001,1,1,\nimagenet-2026,new/bad.bin,-5,L90001,9,1,\n' > "$TEST_DIR/neg.csv"
run_fails_with "negative size" "neg.csv:2: size '-5' is not a non-negative integer" -- si catalog import "$TEST_DIR/neg.csv"
printf 'a,b,c\n' > "$TEST_DIR/cols.csv"
run_fails_with "wrong column count" "cols.csv:1: 3 fields, want 7" -- si catalog import "$TEST_DIR/cols.csv"
printf 'imagenet-2026,x\xff,5,L90001,1,1,\n' > "$TEST_DIR/utf8.csv"
run_fails_with "invalid UTF-8" "utf8.csv:1: line is not valid UTF-8" -- si catalog import "$TEST_DIR/utf8.csv"
printf 'imagenet-2026,a/../../x,5,L90001,1,1,\n' > "$TEST_DIR/dots.csv"
run_fails_with "key with .." "dots.csv:1: object key contains a '..' path component" -- si catalog import "$TEST_DIR/dots.csv"
printf '<ltfsindex><directory><name>L1</name>' > "$TEST_DIR/trunc.xml"
run_fails_with "truncated LTFS index" "trunc.xml:1: malformed XML" -- si catalog import "$TEST_DIR/trunc.xml"
printf 'imagenet-2026/train/\nimagenet-2026/nothing-here\n' > "$TEST_DIR/bad.manifest"
run_fails_with "manifest naming a missing object" "bad.manifest:2: no object imagenet-2026/nothing-here" \
    -- si catalog define broken "$TEST_DIR/bad.manifest"
run_fails_with "redefinition without --replace" "already exists" \
    -- si catalog define imagenet-2026 "$data/imagenet-2026.manifest"
is "$(snapshot)" "$before" "catalog unchanged by every rejected input"
run_ok "redefinition with --replace" -- si catalog define climate-subset "$data/climate-subset.manifest" --replace

# the database is usable with sqlite3 directly, as doc/catalog.md says
if command -v sqlite3 >/dev/null; then
    n=$(sqlite3 "$STAGEIN_CATALOG" "SELECT COUNT(*) FROM datasets d JOIN dataset_members m ON m.dataset_id = d.id WHERE d.name = 'imagenet-2026'")
    is "$n" 102 "sqlite3 reads the catalog"
fi
finish
