#!/bin/bash
# Three stageind instances sharing ONE simulated library (one volume_dir,
# one robot), one PostgreSQL catalog (a private server, tests/pg-lib.sh)
# and one cache directory: clients push through all three while stage
# requests recall datasets from the same volumes, and the instance holding a
# push in the middle of its archive write is killed -9 and restarted, now
# and then only after its leases lapsed. Then the volumes themselves are
# judged: each reads back whole (`stagein tape dump --verify`), a catalog
# rebuilt from the volumes alone (`stagein tape import` into a new SQLite
# catalog) holds every acknowledged push with its checksum, and a recall of
# all of them from tape into an empty cache returns every file
# byte-identical.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/pg-lib.sh"
. "$top_srcdir/tests/recall-lib.sh"
KILLS=${KILLS:-8}
INSTANCES_TRAP=stop   # the one stageind of the rebuilt catalog
VOLUMES=$TEST_DIR/volumes
INSTANCES_SITE=t0020
INSTANCES_CONF="push: { copies = 1; aggregate_window = 0.1; aggregate_bytes = 1500000; };
library: { volume_dir = \"$VOLUMES\"; drives = 1; time_scale = 0.02; };"
. "$top_srcdir/tests/instances-lib.sh"

# ---- one library: volumes R1, R2 with the recall datasets, W1..W3 empty ----------------------
for n in 1 2 3; do conf_instance "$n" 2000000000; done
export STAGEIN_CONF=$TEST_DIR/i1.conf
"$STAGEIN" catalog init >/dev/null
for v in R0001 R0002 W0001 W0002 W0003; do tape create "$v" --capacity 4000000000 >/dev/null; done
for r in $(seq "$KILLS"); do
    make_file "r$r-a" $((70000 + 1000 * r))
    make_file "r$r-b" $((71000 + 1000 * r))
    (cd "$SRC" && "$STAGEIN" tape write R0001 --bucket data --no-catalog "r$r-a" >/dev/null &&
        "$STAGEIN" tape write R0002 --bucket data --no-catalog "r$r-b" >/dev/null)
done
for v in R0001 R0002; do "$STAGEIN" tape import "$v" >/dev/null; done
for r in $(seq "$KILLS"); do define "r$r" "r$r-a" "r$r-b"; done
is "$(sql "SELECT count(*) FROM objects")" $((2 * KILLS)) "$((2 * KILLS)) objects to recall on R0001 and R0002"
start_all "three instances start on one library, one catalog and one cache directory"

# ---- pushes, recalls and kills at once -----------------------------------------------------
pushers_start ck
requests=()
kills=0 restarts=0 mid_archive=0
for round in $(seq "$KILLS"); do
    # a recall from the shared volumes, through a live instance
    for try in 1 2 3; do
        PORT=$(port_of $(((round + try) % 3 + 1)))
        id=$(stage "{\"datasets\":[\"r$round\"]}")
        [ -n "$id" ] && requests+=("$id") && break
    done
    kill_round "$round"
done
kills_checked
is "${#requests[@]}" "$KILLS" "a stage request accepted in each of the $KILLS rounds"

waited=$SECONDS
pushes_durable_checked 90
list=$(printf "'%s'," "${requests[@]}")
unfinished=$(wait_state "SELECT count(*) FROM requests WHERE uuid IN (${list%,}) AND state <> 'COMPLETED'" 0 90)
is "$unfinished" 0 "every accepted stage request completes"
diag "the wait after the kills: $((SECONDS - waited)) s"
[ "$unfinished" = 0 ] || requests_unfinished_shown "${list%,}"
is "$(sql "SELECT count(*) FROM (SELECT subject FROM events WHERE kind = 'object.recalled'
          GROUP BY subject HAVING count(*) > 1) t")" 0 "no object recalled twice"
is "$(sql "SELECT count(*) FROM push_items i WHERE state = 'DURABLE' AND (SELECT count(*) FROM tape_copies t WHERE t.object_id = i.object_id) <> 1")" \
    0 "every durable file has exactly one tape copy in the catalog"
sql "SELECT DISTINCT v.label FROM tape_copies t JOIN volumes v ON v.id = t.volume_id
     JOIN push_items i ON i.object_id = t.object_id" | sort > "$TEST_DIR/written"
diag "pushes archived on: $(tr '\n' ' ' < "$TEST_DIR/written")"
ok "$(grep -q . "$TEST_DIR/written"; echo $?)" "the pushes were written to the shared library's volumes"
stop_all

# ---- the volumes alone ---------------------------------------------------------------------
bad=""
for v in R0001 R0002 W0001 W0002 W0003; do
    "$STAGEIN" tape dump "$v" --volume-dir "$VOLUMES" --verify > "$TEST_DIR/dump.$v" 2>&1 || bad+="$v "
done
is "$bad" "" "every volume reads back whole, each member's checksum verified (tape dump --verify)"
use_state rebuilt
sql() { sqlite3 -cmd ".timeout 10000" "$DB" "$1"; }   # the rebuilt catalog from here on
CATALOG_CONF="catalog: { path = \"$STATE/catalog.db\"; };"
write_conf "library: { volume_dir = \"$VOLUMES\"; drives = 2; time_scale = 0.02; };
cache: { capacity = 2000000000; };"
"$STAGEIN" catalog init >/dev/null
bad=""
for v in R0001 R0002 W0001 W0002 W0003; do
    "$STAGEIN" tape import "$v" > /dev/null 2>"$TEST_DIR/import.err" ||
        { bad+="$v "; sed "s/^/# $v: /" "$TEST_DIR/import.err" | head -3; }
done
is "$bad" "" "a new SQLite catalog is rebuilt from the five volumes (tape import)"
missing=""
: > "$TEST_DIR/back.manifest"
while read -r id key file n; do
    sum=$(sql "SELECT checksum FROM objects WHERE bucket = 'stageout' AND key = '$key'")
    [ "$sum" = "sha256:$(sha256sum < "$TEST_DIR/src.$file" | cut -d' ' -f1)" ] || missing+="$key "
    echo "stageout/$key" >> "$TEST_DIR/back.manifest"
done < "$ACKED"
is "$missing" "" "every acknowledged push is on tape with its checksum ($acked files)"
"$STAGEIN" catalog define back "$TEST_DIR/back.manifest" --owner root:root --mode 0644 >/dev/null
start
ok $? "one stageind starts on the rebuilt catalog, with an empty cache"
id=$(stage '{"datasets":["back"]}')
[ -n "$id" ] || diag "stage: $(cat "$BODY")"
is "$(wait_done "$id" 120)" COMPLETED "the pushed files are recalled from tape"
bad=""
while read -r id key file n; do
    same_as_cached "o.bucket = 'stageout' AND o.key = '$key'" "$TEST_DIR/src.$file" ||
        bad+="$key "
done < "$ACKED"
is "$bad" "" "every acknowledged file, recalled from tape, is byte-identical to what was pushed"
stop
finish
