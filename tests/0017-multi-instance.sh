#!/bin/bash
# Three stageind instances sharing one PostgreSQL catalog, one cache
# directory and one simulated library's volumes (each instance with drives
# of its own): datasets requested through different instances are recalled
# once each and complete everywhere; any instance's S3 endpoint serves any
# cached object (awscli, curl --aws-sigv4, byte-identical); then kill -9 of
# the instances mid-recall in a loop (each stays down two rounds, longer than
# the lease time, so the others take its work over; a restart takes its own
# back): every accepted request completes, no object is recalled twice.
# Skipped without a PostgreSQL server (Debian package postgresql) or libpq.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/pg-lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients aws curl

N=3
P=i               # the instances' names and directories: i1, i2, i3
LEASE=1.5
TIME_SCALE=0.004   # simulated seconds per second: mounts of a few ms
# the first phase's robot moves take 0.4 s, so that the instances' first
# mounts meet on the one robot they share
ROBOT_MOVE_S=100
stop_instance() { stop_daemon "$TEST_DIR/$P$1/stageind.pid"; }  # TERM, as stop does
stop_all() { local i; for i in $(seq $N); do stop_instance "$i"; done; }
trap 'stop_all; pg_lib_stop "$TEST_DIR"; cleanup' EXIT
# the catalog through the CLI (read-only SQL), on either engine
sql() { "$STAGEIN" catalog sql "$1" | tail -n +2 | sed 's/ *$//'; }

S3_SECRETS=$TEST_DIR/secrets
printf '%s %s 0 0\n' "$S3_KEY" "$S3_SECRET" >"$S3_SECRETS"
chmod 600 "$S3_SECRETS"
AWS_CONFIG=$TEST_DIR/aws.cfg
printf '[default]\ns3 =\n  addressing_style = path\n' >"$AWS_CONFIG"

# instance_conf I: instance I's configuration, on fresh ports (a killed
# instance's may linger); PORT_I, S3PORT_I
instance_conf() {
    local i=$1
    eval "PORT_$i=$(free_port) S3PORT_$i=$(free_port)"
    local port s3port
    eval "port=\$PORT_$i s3port=\$S3PORT_$i"
    mkdir -p "$TEST_DIR/$P$i"
    cat >"$TEST_DIR/$P$i.conf" <<CONF
state_dir = "$TEST_DIR/$P$i"; $CATALOG_CONF
stageind: { munge_socket = "$M/sock"; log_level = "info"; port = $port;
    instance = "$P$i"; lease_time = $LEASE; heartbeat_interval = 0.25; };
cache: { dir = "$TEST_DIR/${P}cache"; };
library: { volume_dir = "$TEST_DIR/${P}volumes"; drives = 2; time_scale = $TIME_SCALE; };
tape: { robot_move_s = $ROBOT_MOVE_S; };
archive: { poll_interval = 0.3; };
s3: { enabled = true; port = $s3port; bind = "127.0.0.1"; secrets_file = "$S3_SECRETS";
    region = "$S3_REGION"; };
CONF
}
start_instance() {  # start_instance I
    local i=$1
    instance_conf "$i"
    STAGEIN_CONF=$TEST_DIR/$P$i.conf "$STAGEIND" -d "$TEST_DIR/$P$i" -S "$TEST_DIR/$P$i.sock" \
        -l "$TEST_DIR/$P$i.log" || return 1
    track_pid "$(cat "$TEST_DIR/$P$i/stageind.pid")"
}
pid_of() { cat "$TEST_DIR/$P$1/stageind.pid" 2>/dev/null; }
# stage_at I JSON: a stage request through instance I; prints its id
stage_at() { eval "PORT=\$PORT_$1"; stage "$2"; }
wait_all() {  # wait_all SECONDS ID...: the states of the requests, once none is active
    local limit=$1 states; shift
    local list
    list=$(printf "'%s'," "$@")
    for _ in $(seq $((limit * 4))); do
        states=$(sql "SELECT count(*) FROM requests WHERE uuid IN (${list%,})
                      AND state IN ('SUBMITTED', 'STARTED')")
        [ "$states" = 0 ] && break
        sleep 0.25
    done
    sql "SELECT state, count(*) FROM requests WHERE uuid IN (${list%,}) GROUP BY state ORDER BY state" |
        tr -s ' \n' ' ' | sed 's/ $//'
}

# ---- SQLite: two instances on one catalog file, on one machine ---------------------------
P=s
CATALOG_CONF="catalog: { path = \"$TEST_DIR/lite.db\"; };"
export STAGEIN_CONF=$TEST_DIR/s1.conf
instance_conf 1
"$STAGEIN" catalog init >/dev/null
STATE=$TEST_DIR/s1
lite=()
for v in 1 2 3; do
    files=()
    for f in 1 2 3 4; do make_file "s$v-f$f" $((50000 + 9000 * f + 1000 * v)); files+=("s$v-f$f"); done
    tape create "S0000$v" --capacity 4000000000 >/dev/null
    (cd "$SRC" && "$STAGEIN" tape write "S0000$v" --bucket data "${files[@]}" >/dev/null)
    lite+=("${files[@]}")
done
define lite "${lite[@]}"
for i in 1 2; do
    start_instance "$i" 2>"$TEST_DIR/start.err"
    rc=$?
    ok $rc "SQLite: instance s$i starts on the shared catalog file"
    [ $rc = 0 ] || sed 's/^/# /' "$TEST_DIR/start.err"
done
ids=("$(stage_at 1 '{"datasets":["lite"]}')" "$(stage_at 2 '{"datasets":["lite"]}')")
is "$(wait_all 60 "${ids[@]}")" "COMPLETED 2" "SQLite: the dataset staged through both instances completes"
is "$(sql "SELECT count(*) || '/' || count(DISTINCT subject) FROM events WHERE kind = 'object.recalled'")" \
    "12/12" "SQLite: each of its 12 objects recalled once"
k=${lite[0]}
curl -s -o "$TEST_DIR/got" --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_KEY:$S3_SECRET" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "http://127.0.0.1:$S3PORT_2/data/$k"
ok $(cmp -s "$TEST_DIR/got" "$SRC/$k"; echo $?) "SQLite: the second instance's S3 endpoint serves it"
N=2 stop_all
P=i

# ---- PostgreSQL ----------------------------------------------------------------------------
skip_all() { ok 0 "three instances on PostgreSQL # SKIP $1"; finish; exit 0; }
# each instance keeps a connection per module (about 15): more than
# pg-lib.sh's 40 for three instances and the CLI
PG_LIB_MAX_CONNECTIONS=120 pg_lib_setup "$TEST_DIR" skip_all
CATALOG_CONF=$(pg_lib_catalog_conf "$TEST_DIR" t0017)

# write_volume LABEL COPY FILE...: as recall-lib's, catalogued afterwards from
# the volumes (tape import), as 0016 does on PostgreSQL; errors shown
write_volume() {
    local label=$1; shift 2
    (cd "$SRC" && "$STAGEIN" tape write "$label" --bucket data --no-catalog "$@" >/dev/null) 2>&1 |
        sed 's/^/# /'
}

# ---- the site: volumes, catalog, datasets -----------------------------------------------
diag "$(date +%T) setup"
export STAGEIN_CONF=$TEST_DIR/i1.conf
instance_conf 1
"$STAGEIN" catalog init >/dev/null
STATE=$TEST_DIR/i1
keys=()
for v in 1 2 3 4 5 6; do
    files=()
    for f in 1 2 3 4 5; do
        make_file "v$v-f$f" $((100000 + 37000 * f + 1000 * v))
        files+=("v$v-f$f")
    done
    tape create "V0000$v" --capacity 4000000000 >/dev/null
    write_volume "V0000$v" 1 "${files[@]}"
    "$STAGEIN" tape import "V0000$v" >/dev/null
    keys+=("${files[@]}")
done
# the kill rounds' objects: two fresh ones per round, on volumes K1..K3
ROUNDS=22
for v in 1 2 3; do tape create "K0000$v" --capacity 4000000000 >/dev/null; done
declare -A on_volume
for r in $(seq $ROUNDS); do
    make_file "k$r-a" $((60000 + 1000 * r))
    make_file "k$r-b" $((61000 + 1000 * r))
    on_volume[$((r % 3 + 1))]+=" k$r-a"
    on_volume[$(((r + 1) % 3 + 1))]+=" k$r-b"
done
# shellcheck disable=SC2086
for v in 1 2 3; do write_volume "K0000$v" 1 ${on_volume[$v]}; done
for v in 1 2 3; do "$STAGEIN" tape import "K0000$v" >/dev/null; done
for r in $(seq $ROUNDS); do define "k$r" "k$r-a" "k$r-b"; done
define dA v1-f1 v1-f2 v1-f3 v1-f4 v1-f5 v2-f1 v2-f2 v3-f1
define dB v3-f2 v3-f3 v3-f4 v3-f5 v4-f1 v4-f2 v4-f3 v4-f4 v4-f5 v1-f1
define dC v5-f1 v5-f2 v5-f3 v5-f4 v5-f5 v6-f1 v6-f2 v6-f3 v6-f4 v6-f5 v2-f3
define all "${keys[@]}"
is "$(sql "SELECT count(*) FROM objects")" $((30 + 2 * ROUNDS)) "$((30 + 2 * ROUNDS)) objects on 9 volumes in the shared catalog"

diag "$(date +%T) starting"
for i in $(seq $N); do
    start_instance "$i" 2>"$TEST_DIR/start.err"
    rc=$?
    ok $rc "instance i$i starts on the shared catalog and cache directory"
    [ $rc = 0 ] || sed 's/^/# /' "$TEST_DIR/start.err"
done
is "$(sql "SELECT count(*) FROM instances")" 3 "three instances registered"
diag "catalog connections: $(sql "SELECT count(*) FROM pg_stat_activity WHERE datname = 'postgres'")"
STAGEIN_CONF=$TEST_DIR/i1.conf.dup
sed 's/instance = "i1"/instance = "i2"/' "$TEST_DIR/i1.conf" >"$STAGEIN_CONF"
mkdir -p "$TEST_DIR/dup"
run_fails_with "a second process under a live instance's name is refused, naming the setting" \
    "stageind.instance 'i2' is in use by pid" -- \
    "$STAGEIND" -d "$TEST_DIR/dup" -S "$TEST_DIR/dup.sock" -l "$TEST_DIR/dup.log" -p 0
export STAGEIN_CONF=$TEST_DIR/i1.conf

# ---- datasets through different instances ---------------------------------------------
diag "$(date +%T) staging"
ids=()
ids+=("$(stage_at 1 '{"datasets":["dA"]}')")
ids+=("$(stage_at 2 '{"datasets":["dB"]}')")
ids+=("$(stage_at 3 '{"datasets":["dC"]}')")
for i in 1 2 3; do ids+=("$(stage_at "$i" '{"datasets":["all"]}')"); done
is "$(printf '%s\n' "${ids[@]}" | grep -c .)" 6 "six requests accepted by three instances"
is "$(wait_all 90 "${ids[@]}")" "COMPLETED 6" "every request completes"
is "$(sql "SELECT count(*) FROM events WHERE kind = 'object.recalled'")" 30 \
    "30 recalls for the 30 objects wanted by six requests"
is "$(sql "SELECT count(*) FROM (SELECT subject FROM events WHERE kind = 'object.recalled'
          GROUP BY subject HAVING count(*) > 1) t")" 0 "no object recalled twice"
by=$(sql "SELECT substr(detail, instr(detail, 'by instance ') + 12) AS i, count(*) FROM events
          WHERE kind = 'object.recalled' GROUP BY i ORDER BY i" | tr -s ' \n' ' ')
diag "recalls by instance: $by"
ok $([ "$(echo "$by" | grep -o 'i[0-9]' | sort -u | wc -l)" -ge 2 ]; echo $?) \
    "the recalls were spread over the instances' drives ($by)"
is "$(sql "SELECT count(*) FROM leases WHERE kind = 'object'")" 0 "no object lease left"
# one library, one robot (library.robots = 1): the three instances' mounts
# took turns on it, each move booked in the volumes' directory
waited=0
for i in $(seq $N); do
    eval "port=\$PORT_$i"
    w=$(curl -s "http://127.0.0.1:$port/metrics" | awk '$1 == "stagein_robot_wait_seconds_total" {print $2}')
    waited=$(awk -v a="$waited" -v b="${w:-0}" 'BEGIN {print a + b}')
done
ok $(awk -v w="$waited" 'BEGIN {exit !(w > 0)}'; echo $?) \
    "the instances' robot moves waited for one another's on the shared robot ($waited simulated s)"
is "$(stat -c %a "$TEST_DIR/${P}volumes/robots" 2>&1)" 600 "the robots' booking file is private (0600)"

# ---- any instance's S3 endpoint serves any cached object -------------------------------
bad=""
for k in "${keys[@]}"; do
    i=$((RANDOM % N + 1))
    eval "port=\$S3PORT_$i"
    curl -s -o "$TEST_DIR/got" --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$S3_KEY:$S3_SECRET" \
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "http://127.0.0.1:$port/data/$k"
    cmp -s "$TEST_DIR/got" "$SRC/$k" || bad+="$k@i$i "
done
is "$bad" "" "curl --aws-sigv4 GETs all 30 objects byte-identical, each from a random instance"
bad=""
for i in $(seq $N); do
    # an object another instance recalled
    k=$(sql "SELECT o.key FROM events e JOIN objects o ON CAST(o.id AS TEXT) = e.subject
             WHERE e.kind = 'object.recalled' AND e.detail NOT LIKE '%by instance i$i'
             ORDER BY o.key LIMIT 1")
    [ -n "$k" ] || k=v1-f1
    eval "S3_URL=http://127.0.0.1:\$S3PORT_$i"
    aws_s3 s3 cp --no-progress "s3://data/$k" "$TEST_DIR/aws.got" >/dev/null 2>&1 &&
        cmp -s "$TEST_DIR/aws.got" "$SRC/$k" || bad+="$k@i$i "
done
is "$bad" "" "awscli GETs from each instance an object another instance recalled"

# ---- kill -9 mid-recall, in a loop --------------------------------------------------------
# Round r: the instance killed at round r-2 restarts, a request goes to a
# live instance, then instance r mod 3 dies: each is down for two rounds
# and at least twice the lease (1.5 s), so its items are others' to finish.
diag "$(date +%T) kill rounds"
# slower drives from here on (each restart reads it): kills land mid-recall
TIME_SCALE=0.1
ROBOT_MOVE_S=12
accepted=()
kills=0
declare -A killed_at killed_time
for r in $(seq $ROUNDS); do
    back=$(((r + 1) % N + 1))
    if [ -n "${killed_at[$back]:-}" ]; then
        # down for longer than its lease, whatever the rounds took: back
        # sooner, it would take its own items again before the others could
        left=$(awk -v killed="${killed_time[$back]}" -v lease="$LEASE" -v now="$(date +%s.%N)" \
            'BEGIN { d = killed + 2 * lease - now; if (d > 0) printf "%.3f", d }')
        [ -z "$left" ] || sleep "$left"
        t0=$(date +%s.%N)
        start_instance "$back" || diag "restart of i$back failed: $(tail -2 "$TEST_DIR/i$back.log")"
        unset "killed_at[$back]"
        [ "$r" -le 4 ] && diag "round $r: i$back restarted in $(awk -v t0="$t0" -v now="$(date +%s.%N)" 'BEGIN { printf "%.3f", now - t0 }') s"
    fi
    victim=$((r % N + 1))
    for to in $victim $back $(((r + 2) % N + 1)); do
        [ -z "${killed_at[$to]:-}" ] && kill -0 "$(pid_of "$to")" 2>/dev/null || continue
        id=$(stage_at "$to" "{\"datasets\":[\"k$r\"]}")
        [ -n "$id" ] && { accepted+=("$id"); break; }
    done
    # the kill lands once the recall has begun (or after 2 s)
    for _ in $(seq 20); do
        [ "$(sql "SELECT count(*) FROM request_items i JOIN requests r ON r.id = i.request_id
                  WHERE r.uuid = '$id' AND i.state = 'STARTED'")" != 0 ] && break
        sleep 0.1
    done
    sleep "0.$((RANDOM % 3))"
    pid=$(pid_of "$victim")
    if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then
        kills=$((kills + 1))
        killed_at[$victim]=$r
        killed_time[$victim]=$(date +%s.%N)
        # gone, or a zombie its reaper has not collected yet
        for _ in $(seq 50); do
            grep -qs '^[0-9]* ([^)]*) [^Z]' "/proc/$pid/stat" || break
            sleep 0.05
        done
    fi
done
for i in $(seq $N); do
    kill -0 "$(pid_of "$i")" 2>/dev/null && [ -z "${killed_at[$i]:-}" ] || start_instance "$i"
done
diag "$(date +%T) waiting for the accepted requests"
ok $([ "$kills" -ge 20 ]; echo $?) "$kills kills -9 across the three instances"
is "${#accepted[@]}" "$ROUNDS" "a request accepted in each of the $ROUNDS rounds"
is "$(wait_all 120 "${accepted[@]}")" "COMPLETED $ROUNDS" "every accepted request completes"
is "$(sql "SELECT count(*) FROM (SELECT subject FROM events WHERE kind = 'object.recalled'
          GROUP BY subject HAVING count(*) > 1) t")" 0 "no object recalled twice"
is "$(sql "SELECT count(*) FROM cache c JOIN objects o ON o.id = c.object_id WHERE o.key LIKE 'k%'")" \
    $((2 * ROUNDS)) "all $((2 * ROUNDS)) objects of the kill rounds are cached"
bad=""
for r in $(seq $ROUNDS); do
    for k in "k$r-a" "k$r-b"; do
        curl -s -o "$TEST_DIR/got" --aws-sigv4 "aws:amz:$S3_REGION:s3" \
            --user "$S3_KEY:$S3_SECRET" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
            "http://127.0.0.1:$S3PORT_1/data/$k"
        cmp -s "$TEST_DIR/got" "$SRC/$k" || bad+="$k "
    done
done
is "$bad" "" "and read back byte-identical"
taken=$(cat "$TEST_DIR"/i*.log | grep -c "items of a stopped instance queued again")
ok $([ "$taken" -ge 1 ]; echo $?) "live instances took over a dead one's items ($taken times)"
finish
