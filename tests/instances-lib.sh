# Helpers for tests of several stageind instances i1..i3 on one private
# PostgreSQL catalog (pg-lib.sh, set up by the caller first) and one cache
# directory. Sourcing it starts the private server (or skips the test
# without one) and stops the instances and the server at exit. The caller
# sets INSTANCES_SITE (the catalog's site), INSTANCES_CONF (the rest of each
# instance's configuration: push, library), INSTANCES_S3 (more settings of
# the s3 group), INSTANCES_TRAP (more to stop at exit) and LEASE (default
# 1.0 s) before sourcing it, after lib.sh, pg-lib.sh and recall-lib.sh (or
# s3-lib.sh).
LEASE=${LEASE:-1.0}
S3_KEY=STAGEINS3TESTKEY${INSTANCES_SITE#t}
S3_SECRET=$(head -c 30 /dev/urandom | base64 | tr -d '/+=' | head -c 40)
printf '# access key, secret, uid, gid\n%s %s 0 0\n' "$S3_KEY" "$S3_SECRET" > "$TEST_DIR/s3.secrets"
chmod 600 "$TEST_DIR/s3.secrets"
CACHE=$TEST_DIR/cache

# conf_instance N CAPACITY: instance N's stagein.conf (its own state, the
# shared catalog and cache directory, $INSTANCES_CONF)
conf_instance() {
    local n=$1
    [ -s "$TEST_DIR/s3port.$n" ] || free_port > "$TEST_DIR/s3port.$n"
    mkdir -p "$TEST_DIR/i$n"
    cat > "$TEST_DIR/i$n.conf" <<CONF
state_dir = "$TEST_DIR/i$n";
catalog: { url = "$(cat "$TEST_DIR/pg-url")"; password_file = "$TEST_DIR/pg-password";
    site = "$INSTANCES_SITE"; };
stageind: { munge_socket = "$M/sock"; log_level = "info"; instance = "i$n";
    lease_time = $LEASE; heartbeat_interval = 0.25; };
cache: { dir = "$CACHE"; capacity = $2; };
s3: { enabled = true; port = $(cat "$TEST_DIR/s3port.$n"); bind = "127.0.0.1";
    secrets_file = "$TEST_DIR/s3.secrets"; region = "us-east-1"; ${INSTANCES_S3:-} };
$INSTANCES_CONF
CONF
}
as_instance() { local n=$1; shift; STAGEIN_CONF=$TEST_DIR/i$n.conf "$@"; }
pid_of() { cat "$TEST_DIR/i$1/stageind.pid" 2>/dev/null; }
port_of() { cat "$TEST_DIR/port.$1"; }
# start_instance N: on a new port each time (a killed instance's connections
# may linger), or on its first one with INSTANCES_KEEP_PORTS=1 (clients that
# were given every endpoint at the start: the SPANK plugin's endpoint=a,b,c)
start_instance() {
    local n=$1
    [ -n "${INSTANCES_KEEP_PORTS:-}" ] && [ -s "$TEST_DIR/port.$n" ] || free_port > "$TEST_DIR/port.$n"
    as_instance "$n" "$STAGEIND" -d "$TEST_DIR/i$n" -p "$(port_of "$n")" -S "$TEST_DIR/i$n.sock" \
        -l "$TEST_DIR/i$n.log" || return 1
    track_pid "$(pid_of "$n")"
}
stop_instance() { stop_daemon "$TEST_DIR/i$1/stageind.pid"; }
stop_all() { for n in 1 2 3; do stop_instance "$n"; done; }
trap "${INSTANCES_TRAP:+$INSTANCES_TRAP; }stop_all; pg_lib_stop \"\$TEST_DIR\"; cleanup" EXIT
# three instances hold more connections than pg-lib's 40
PG_LIB_MAX_CONNECTIONS=200 pg_lib_setup "$TEST_DIR" skip_all
# the catalog through psql (a process per query costs little: the loops poll)
printf '*:*:*:stagein:%s\n' "$(cat "$TEST_DIR/pg-password")" > "$TEST_DIR/pgpass"
chmod 600 "$TEST_DIR/pgpass"
PSQL=$(pg_lib_bin)/psql
[ -x "$PSQL" ] || PSQL=psql
sql() { PGPASSFILE=$TEST_DIR/pgpass "$PSQL" -X -A -t -q "$(cat "$TEST_DIR/pg-url")" -c "$1"; }
# push_to N DATASET KEY FILE: status code; body in $TEST_DIR/body.N
push_to() {
    curl -s -o "$TEST_DIR/body.$1" -w '%{http_code}' --max-time 20 -X POST \
        -H "X-Stagein-Munge: $(cred)" -H 'Content-Type: application/octet-stream' \
        -H "X-Stagein-Checksum: sha256:$(sha256sum < "$4" | cut -d' ' -f1)" \
        --data-binary "@$4" "http://127.0.0.1:$(port_of "$1")/api/v1/push?dataset=$2&key=$3" \
        2>/dev/null
}
# s3_get N BUCKET/KEY OUT: GET through instance N's S3 endpoint
s3_get() {
    curl -s -f -o "$3" --max-time 20 --aws-sigv4 "aws:amz:us-east-1:s3" \
        --user "$S3_KEY:$S3_SECRET" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
        "http://127.0.0.1:$(cat "$TEST_DIR/s3port.$1")/$2"
}
# wait_state SQL WANT SECONDS: polls until SQL's answer is WANT; prints it
wait_state() {
    local got=""
    for _ in $(seq $(($3 * 5))); do
        got=$(sql "$1")
        [ "$got" = "$2" ] && break
        sleep 0.2
    done
    echo "$got"
}
# requests_unfinished_shown LIST: for each request of LIST ('uuid','uuid')
# not COMPLETED, its items not done and what the site holds of their
# objects (leases, cache rows), with the instances' log lines naming them
requests_unfinished_shown() {
    local objects
    sql "SELECT r.uuid || ' ' || r.state || ' ' || coalesce(r.error, '') FROM requests r
         WHERE r.uuid IN ($1) AND r.state <> 'COMPLETED'" | sed 's/^/# request /'
    sql "SELECT 'object ' || i.object_id || ' ' || i.state || ' ' || coalesce(i.error, '') ||
            ' cached=' || (SELECT count(*) FROM cache c WHERE c.object_id = i.object_id) ||
            ' leases=' || coalesce((SELECT string_agg(l.kind || ':' || l.name || '@' || l.instance, ',')
                FROM leases l WHERE l.kind = 'object' AND l.name = i.object_id::text), '-')
         FROM request_items i JOIN requests r ON r.id = i.request_id
         WHERE r.uuid IN ($1) AND i.state <> 'COMPLETED'" | sed 's/^/# /'
    sql "SELECT kind || ':' || name || '@' || instance || ' expires ' || expires FROM leases
         WHERE kind <> 'push'" | sed 's/^/# lease /'
    objects=$(sql "SELECT DISTINCT i.object_id FROM request_items i JOIN requests r ON r.id = i.request_id
         WHERE r.uuid IN ($1) AND i.state <> 'COMPLETED'")
    for o in $objects; do
        grep -h "object $o\b" "$TEST_DIR"/i[123].log | tail -5 | sed "s/^/# log: /"
    done
    grep -h "recall" "$TEST_DIR"/i[123].log | tail -15 | sed "s/^/# log: /"
}
# pusher N PREFIX: pushes random files through instance N until killed; each
# acknowledged one as "pushId dataset/key file instance" in $ACKED
pusher() {
    local n=$1 i=0 code name
    while :; do
        i=$((i + 1))
        name=$2$n-$i
        head -c $(((RANDOM * 9 + i) % 300000 + 1)) /dev/urandom > "$TEST_DIR/src.$name"
        code=$(push_to "$n" "$2-$n" "$name" "$TEST_DIR/src.$name")
        if [ "$code" = 202 ]; then
            echo "$(json "$TEST_DIR/body.$n" 'j["pushId"]') $2-$n/$name $name $n" >> "$ACKED"
        else
            rm -f "$TEST_DIR/src.$name"
            sleep 0.1
        fi
    done
}
# kill_round ROUND: kill -9 of the instance holding a push in the middle of
# its archive write (looked for during 1.5 s; else instance ROUND mod 3 + 1),
# left down every other round until the others took its leases over, then
# restarted; counted in kills, restarts and mid_archive (0 before round 1)
kill_round() {
    local victim="" n pid
    for _ in $(seq 15); do
        victim=$(sql "SELECT l.instance FROM leases l JOIN pushes p ON p.uuid = l.name
            JOIN push_items i ON i.push_id = p.id WHERE l.kind = 'push' AND i.state = 'ARCHIVING'
            LIMIT 1")
        case $victim in i[123]) break ;; *) victim="" ;; esac
        sleep 0.1
    done
    if [ -n "$victim" ]; then mid_archive=$((mid_archive + 1)); n=${victim#i}
    else n=$(($1 % 3 + 1)); fi
    pid=$(pid_of "$n")
    if [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; then
        kills=$((kills + 1))
        wait_gone "$pid"
    fi
    [ $(($1 % 2)) = 1 ] && sleep 1.6
    start_instance "$n" && restarts=$((restarts + 1))
}
# kills_checked: the pushers ($PUSHERS) stopped; the kill rounds' checks
kills_checked() {
    kill $PUSHERS 2>/dev/null
    wait $PUSHERS 2>/dev/null
    is "$kills/$restarts" "$KILLS/$KILLS" "$KILLS kill -9 across the three instances, each restarted"
    diag "$mid_archive of them killed the holder of a push in the middle of its archive write"
    ok "$([ "$mid_archive" -ge 1 ]; echo $?)" "at least one kill hit an archive write in progress"
    acked=$(wc -l < "$ACKED")
    ok "$([ "$acked" -ge 10 ]; echo $?)" "pushes acknowledged across the kills: $acked"
}
# start_all DESCRIPTION: instances 1..3 started, as one check
start_all() {
    local n started=0
    for n in 1 2 3; do start_instance "$n" && started=$((started + 1)); done
    is "$started" 3 "$1"
}
# pushers_start PREFIX: a pusher per instance (pusher N PREFIX), acknowledged
# pushes listed in $ACKED, the pushers' pids in $PUSHERS
pushers_start() {
    ACKED=$TEST_DIR/acked   # "pushId dataset/key file instance" for every 202
    : > "$ACKED"
    local n
    for n in 1 2 3; do pusher "$n" "$1" & track_pid $!; done
    PUSHERS=$(jobs -p)
}
# pushes_durable_checked SECONDS: once nothing waits to be archived (within
# SECONDS), every acknowledged push is DURABLE
pushes_durable_checked() {
    is "$(wait_state "SELECT count(*) FROM push_items WHERE state IN ('RECEIVED', 'ARCHIVING')" 0 "$1")" 0 \
        "nothing is left waiting to be archived"
    sql "SELECT p.uuid || ' ' || o.key || ' ' || i.state FROM push_items i JOIN objects o ON o.id = i.object_id
         JOIN pushes p ON p.id = i.push_id" > "$TEST_DIR/states"
    local missing
    missing=$(awk 'NR == FNR { s[$1 " " $2] = $3; next } s[$1 " " $2] != "DURABLE" { printf "%s:%s ", $2, s[$1 " " $2] }' \
        "$TEST_DIR/states" "$ACKED")
    is "$missing" "" "every acknowledged push is DURABLE"
}
