#!/bin/bash
# The S3 endpoint's threads (doc/s3.md "Threads"): one event thread serves
# every connection, so whatever may wait must not run on it. With
# io_threads = 1: a GET waiting for a transparent recall (the library at
# real time, the recall slower than the wait) holds up no other request: a
# cached GET, a HEAD, a listing and a PUT are all answered while it waits;
# it then gets 503 SlowDown. More concurrent PUTs than worker threads are
# each answered 200 once their batch commit is durable (no thread is held
# while they wait) and read back byte-identical. A stop while a GET waits
# answers it first, then exits cleanly.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
s3_need_clients boto3

s3_setup A
S3_CONF_EXTRA='io_threads = 1; threads = 2; transparent_recall_buckets = [ "data" ];
    transparent_recall_max_wait = 10;' s3_write_conf 'library: { time_scale = 1.0; };'
s3_start_ok "stageind starts with one event thread and two workers"
ok "$(grep -q 's3: listening on .* 1 event threads, 2 workers' "$LOG"; echo $?)" \
    "its log names the event threads and the workers"
# a cached object without a recall (the library runs at real time): a PUT's
head -c 300000 /dev/urandom > "$OUT/hot"
is "$(s3raw request PUT /arch/hot/h1 --body-file "$OUT/hot")" "200 -" "arch/hot/h1 PUT: in the cache"

# ---- a GET waiting for a recall holds up nothing else ----------------------------------
s3raw --timeout 30 request GET /data/cold/c1 --out "$OUT/c1" > "$OUT/cold.code" 2>&1 &
cold=$!
# the GET is waiting once its stage request is in the catalog
queued=0
for _ in $(seq 100); do
    queued=$(sql "SELECT count(*) FROM request_items i JOIN objects o ON o.id = i.object_id WHERE o.key = 'cold/c1'")
    [ "$queued" -ge 1 ] && break
    sleep 0.05
done
is "$queued" 1 "the GET of cold/c1 queued its recall and waits"
is "$(s3raw request GET /arch/hot/h1 --out "$OUT/h1")" "200 -" "meanwhile: GET of a cached object: 200"
ok "$(same_bytes "$OUT/h1" "$OUT/hot"; echo $?)" "byte-identical"
is "$(s3raw request HEAD /data/small1)" "200 -" "meanwhile: HEAD: 200"
is "$(s3raw request GET /data --query 'list-type=2&prefix=hot%2F')" "200 -" "meanwhile: ListObjectsV2: 200"
head -c 100000 /dev/urandom > "$OUT/put0"
is "$(s3raw request PUT /arch/while/p0 --body-file "$OUT/put0")" "200 -" "meanwhile: PUT: 200"
ok "$(kill -0 $cold 2>/dev/null; echo $?)" "all of that answered while the recall GET still waited"
wait $cold
is "$(cat "$OUT/cold.code")" "503 SlowDown" "the recall GET: 503 SlowDown once its wait ran out"

# ---- more concurrent PUTs than workers ----------------------------------------------------
pids=()
for i in 1 2 3 4; do
    head -c $((i * 50000 + 3)) /dev/urandom > "$OUT/put$i"
    s3raw request PUT "/arch/many/p$i" --body-file "$OUT/put$i" > "$OUT/put$i.code" 2>&1 &
    pids+=($!)
done
wait "${pids[@]}"
bad=""
for i in 1 2 3 4; do
    [ "$(cat "$OUT/put$i.code")" = "200 -" ] || bad+="p$i:$(cat "$OUT/put$i.code") "
    s3raw request GET "/arch/many/p$i" --out "$OUT/back$i" >/dev/null
    same_bytes "$OUT/back$i" "$OUT/put$i" || bad+="p$i:differs "
done
is "$bad" "" "four concurrent PUTs with two workers: 200 each, each reads back byte-identical"
is "$(sql "SELECT count(*) FROM push_items pi JOIN objects o ON o.id = pi.object_id WHERE o.key LIKE '%many/p%' AND pi.state IN ('RECEIVED', 'ARCHIVING', 'DURABLE')")" 4 \
    "the four are acknowledged in the catalog"
# ---- a stop while a GET waits: it is answered, then the S3 port closes ----------------
# (the rest of the stop, the push archiving the PUTs at the library's real
# time, is left to the test's cleanup)
pid=$(daemon_pid)
s3raw --timeout 30 request GET /data/cold/c2 > "$OUT/c2.code" 2>&1 &
cold=$!
for _ in $(seq 100); do
    [ "$(sql "SELECT count(*) FROM request_items i JOIN objects o ON o.id = i.object_id WHERE o.key = 'cold/c2'")" -ge 1 ] && break
    sleep 0.05
done
kill -TERM "$pid"
wait $cold
code=$(cat "$OUT/c2.code")
ok "$([ "$code" = "503 SlowDown" ] || [ "$code" = "200 -" ]; echo $?)" \
    "a stop while a GET waits for its recall: the GET is answered first ($code)"
closed=1
for _ in $(seq 150); do
    (exec 3<>"/dev/tcp/127.0.0.1/$S3_PORT") 2>/dev/null || { closed=0; break; }
    sleep 0.1
done
ok "$closed" "then the S3 server stops (its port closes)"
ok "$( { kill -0 "$pid" 2>/dev/null || grep -q 'notice: stopped' "$LOG"; } && ! grep -qi 'panic\|suspended connections' "$LOG"; echo $?)" \
    "stageind goes on stopping: no libmicrohttpd panic about suspended connections"
finish
