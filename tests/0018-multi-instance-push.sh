#!/bin/bash
# Pushes across three stageind instances sharing one PostgreSQL catalog
# (a private server, tests/pg-lib.sh) and one cache directory, each with its
# own simulated library. First the shared cache: objects pinned by a stage
# request through instance 1 stay while instance 2 evicts to make room for
# its push. Then the kill -9 loop: clients push through all three while the
# instance holding a push in the middle of its archive write is killed (a
# lease time of 1 s), restarted at once or only after its leases lapsed so
# that another instance takes its push over. At the end every acknowledged
# push is DURABLE with exactly one tape copy (none archived twice), no
# unacknowledged upload is left, and every acknowledged file reads back
# identical over S3 through another instance than the one it was pushed to.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/pg-lib.sh"
. "$top_srcdir/tests/recall-lib.sh"
KILLS=${KILLS:-20}
INSTANCES_SITE=t0018
INSTANCES_CONF='push: { copies = 1; aggregate_window = 0.1; aggregate_bytes = 1500000; };
library: { time_scale = 0.02; };'
. "$top_srcdir/tests/instances-lib.sh"

for n in 1 2 3; do
    conf_instance "$n" 24000000
    for v in 1 2; do
        as_instance "$n" "$STAGEIN" tape create "$(printf 'I%d%04d' "$n" "$v")" \
            --capacity 4000000000 >/dev/null
    done
done
as_instance 1 "$STAGEIN" catalog init >/dev/null
start_all "three instances start on one catalog and one cache directory"
is "$(sql "SELECT count(*) FROM instances")" 3 "all three are in the registry"

# ---- the shared cache: instance 2's eviction spares instance 1's pins ------------------
for f in pin-a pin-b loose-1 loose-2 loose-3 new-1; do
    head -c 4000000 /dev/urandom > "$TEST_DIR/$f"
done
for f in pin-a pin-b; do push_to 1 pinned "$f" "$TEST_DIR/$f" >/dev/null; done
for f in loose-1 loose-2 loose-3; do push_to 1 loose "$f" "$TEST_DIR/$f" >/dev/null; done
is "$(wait_state "SELECT count(*) FROM push_items WHERE state = 'DURABLE'" 5 30)" 5 \
    "five 4 MB files pushed through instance 1 are durable (20 of the cache's 24 MB)"
code=$(curl -s -o "$TEST_DIR/stage.json" -w '%{http_code}' -X POST -H "X-Stagein-Munge: $(cred)" \
    -H 'Content-Type: application/json' --data-binary '{"datasets":["pinned"]}' \
    "http://127.0.0.1:$(port_of 1)/api/v1/stage")
REQ=$(json "$TEST_DIR/stage.json" 'j["requestId"]')
is "$code" 201 "a stage request for dataset pinned through instance 1"
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$REQ'" COMPLETED 30)" COMPLETED \
    "it completes at once: the objects are cached, now pinned by the request"
push_to 2 fresh new-1 "$TEST_DIR/new-1" >/dev/null
is "$(wait_state "SELECT count(*) FROM push_items WHERE state = 'DURABLE'" 6 30)" 6 \
    "a 4 MB file pushed through instance 2 is durable (room made past the high watermark)"
is "$(sql "SELECT count(*) FROM cache c JOIN objects o ON o.id = c.object_id WHERE o.key LIKE 'pinned/%'")" \
    2 "both objects pinned through instance 1 are still cached"
loose=$(sql "SELECT count(*) FROM cache c JOIN objects o ON o.id = c.object_id WHERE o.key LIKE 'loose/%'")
ok "$([ "$loose" -lt 3 ]; echo $?)" "unpinned objects were evicted instead ($loose of 3 left)"
bad=""
for f in pin-a pin-b; do
    CACHE_DIR=$CACHE same_as_cached "o.key = 'pinned/$f'" "$TEST_DIR/$f" || bad+="$f "
    s3_get 3 "stageout/pinned/$f" "$TEST_DIR/back" && cmp -s "$TEST_DIR/back" "$TEST_DIR/$f" ||
        bad+="$f(s3) "
done
is "$bad" "" "the pinned files are intact, and read back through instance 3"
used=$(sql "SELECT sum(size) FROM cache")
ok "$([ "$used" -le 24000000 ]; echo $?)" "the shared directory holds no more than its capacity ($used bytes)"

# ---- the kill -9 loop --------------------------------------------------------------------
stop_all
for n in 1 2 3; do conf_instance "$n" 2000000000; done
start_all "the three instances restart with a larger cache"
pushers_start kill

kills=0 restarts=0 mid_archive=0
for round in $(seq "$KILLS"); do kill_round "$round"; done
kills_checked

pushes_durable_checked 60
is "$(sql "SELECT count(*) FROM push_items i WHERE state = 'DURABLE' AND (SELECT count(*) FROM tape_copies t WHERE t.object_id = i.object_id) <> 1")" \
    0 "every durable file has exactly one tape copy: none archived twice"
# one query: an upload the killed pushers left in a batch may still turn durable
is "$(sql "SELECT (SELECT count(*) FROM tape_copies) - (SELECT count(*) FROM push_items WHERE state = 'DURABLE')")" \
    0 "as many tape copies as durable files"
taken=$(sql "SELECT count(*) FROM events WHERE kind = 'push.taken_over'")
ok "$([ "$taken" -ge 1 ]; echo $?)" "pushes of killed instances were taken over ($taken times)"
is "$(wait_state "SELECT count(*) FROM push_items WHERE state IN ('RECEIVING', 'DISCARDED')" 0 20)" 0 \
    "no unacknowledged upload of a killed instance is left recorded"

bad=""
while read -r id key file n; do
    other=$((n % 3 + 1))
    s3_get "$other" "stageout/$key" "$TEST_DIR/back" && cmp -s "$TEST_DIR/back" "$TEST_DIR/src.$file" ||
        bad+="$key "
done < "$ACKED"
is "$bad" "" "every acknowledged file reads back identical through another instance"
finish
