#!/bin/bash
# spank/burst_buffer.lua on a real single-node Slurm (BurstBufferType =
# burst_buffer/lua): a job of an unprivileged user with `#BB_LUA stagein
# DATASET` pends with reason BurstBufferStageIn while its data is recalled
# (nothing runs on the node meanwhile), the request is stageind's, made on
# behalf of that user, and the job then runs with STAGEIN_REQUEST and finds
# its data staged; at its end the request is released. A malformed
# directive is refused at submission; a dataset the user may not read keeps
# the job from running, with stageind's reason, and the node stays up.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"
. "$top_srcdir/tests/slurm-lib.sh"
[ -e /usr/lib/x86_64-linux-gnu/slurm-wlm/burst_buffer_lua.so ] ||
    ls /usr/lib/*/slurm*/burst_buffer_lua.so >/dev/null 2>&1 ||
    { echo "1..0 # SKIP this Slurm has no burst_buffer/lua plugin"; exit 0; }

for f in a1:150000 a2:250000 k1:2000000 k2:2000000 k3:2000000 p1:1000; do make_file "${f%%:*}" "${f##*:}"; done
use_state B
# a library slow enough (1/5 of tape time) that the recall takes seconds
write_conf "client: { munge_socket = \"$M/sock\"; }; library: { time_scale = 0.2; };"
chmod 644 "$STAGEIN_CONF"
"$STAGEIN" catalog init >/dev/null
for v in V00001 V00002 V00003; do tape create "$v" --capacity 20000000000 >/dev/null; done
write_volume V00001 1 a1 a2 p1
write_volume V00002 1 k1 k2
write_volume V00003 1 k3
define later k3
define alpha a1 a2
define slow k1 k2
printf 'data/p1\n' > "$TEST_DIR/private.manifest"
"$STAGEIN" catalog define private "$TEST_DIR/private.manifest" --owner root:root --mode 0600 >/dev/null
run_ok "stageind starts" -- start
track_pid "$(daemon_pid)"

sed -e "s|^local STAGEIN = .*|local STAGEIN = \"$STAGEIN\"|" \
    -e "s|^local CONFIG = .*|local CONFIG = \"$STAGEIN_CONF\"|" \
    -e "s|^local ENDPOINT = .*|local ENDPOINT = \"http://127.0.0.1:$PORT\"|" \
    -e "s|^local RUN_DIR = .*|local RUN_DIR = \"$S/bb\"|" \
    "$top_srcdir/spank/burst_buffer.lua" > "$S/etc/burst_buffer.lua"
start_slurm "BurstBufferType=burst_buffer/lua"
is "$(node_state)" idle "single-node Slurm with burst_buffer/lua up: the node is idle"

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
cat > "$TEST_DIR/bb.sh" <<'JOB'
#!/bin/bash
#BB_LUA stagein slow,alpha
echo "uid=$(id -u) request=$STAGEIN_REQUEST"
stagein status "$STAGEIN_REQUEST" --json | python3 -c 'import json, sys; j = json.load(sys.stdin); print("state", j["state"], j["filesCompleted"], j["filesTotal"])'
JOB
J=$(as_nobody sbatch --parsable -o "$S/out/%j.out" --export=ALL,PATH="$top_builddir/stagein:$PATH" \
    "$TEST_DIR/bb.sh" 2> "$S/sbatch.err")
ok "$([ -n "$J" ]; echo $?)" "nobody submits a job with '#BB_LUA stagein slow,alpha'"
reasons=""
for _ in $(seq 600); do
    state=$(job_state "$J")
    [ "$state" = PENDING ] && reasons+=" $(squeue -h -j "$J" -o %r 2>/dev/null)"
    case $state in PENDING | CONFIGURING | RUNNING | COMPLETING | STAGE_OUT | "") sleep 0.1 ;; *) break ;; esac
done
ok "$(grep -q BurstBufferStageIn <<<"$reasons"; echo $?)" \
    "while its data was recalled the job pended with reason BurstBufferStageIn"
diag "reasons seen: $(tr ' ' '\n' <<<"$reasons" | sort | uniq -c | tr '\n' ' ')"
is "$(wait_job "$J" 60)" COMPLETED "then it ran and COMPLETED"
R=$(job_out "$J" | sed -n 's/^uid=65534 request=//p')
ok "$([ ${#R} -eq 36 ]; echo $?)" "the job ran as nobody with STAGEIN_REQUEST from the burst buffer's paths"
is "$(job_out "$J" | grep -c '^state COMPLETED 4 4$')" 1 "inside the job, its 4 files were staged"
is "$(sql "SELECT uid || ' ' || job_id FROM requests WHERE uuid = '$R'")" "65534 $J" \
    "stageind's request is nobody's, made on his behalf for job $J"
for _ in $(seq 100); do [ "$(sql "SELECT state FROM requests WHERE uuid = '$R'")" = RELEASED ] && break; sleep 0.1; done
is "$(sql "SELECT state FROM requests WHERE uuid = '$R'")" RELEASED "teardown released the request"
# teardown removes its record after stageind answered the release
for _ in $(seq 100); do [ ! -e "$S/bb/job-$J.request" ] && break; sleep 0.1; done
ok "$([ ! -e "$S/bb/job-$J.request" ]; echo $?)" "and forgot it"

# ---- a dependent job's recall overlaps the job it depends on ----------------------------
A=$(as_nobody sbatch --parsable -o /dev/null --wrap 'sleep 20')
printf '#!/bin/bash\n#BB_LUA stagein later\necho "request=$STAGEIN_REQUEST"\n' > "$TEST_DIR/dep.sh"
B=$(as_nobody sbatch --parsable -o "$S/out/%j.out" --dependency="afterok:$A" "$TEST_DIR/dep.sh" 2> "$S/sbatch.err")
st=""
for _ in $(seq 190); do
    st=$(sql "SELECT state FROM requests WHERE job_id = '$B'")
    [ "$st" = COMPLETED ] && break
    sleep 0.1
done
is "$st:$(job_state "$A"):$(job_state "$B")" COMPLETED:RUNNING:PENDING \
    "--dependency=afterok: the job's data was staged while the job it waits for still ran"
is "$(wait_job "$B" 60)" COMPLETED "then the dependent job ran and COMPLETED"
grep -q "request=.\{36\}" "$S/out/$B.out"
ok $? "with its request"

# ---- a malformed directive -------------------------------------------------------------
printf '#!/bin/bash\n#BB_LUA stagein bad//name\ntrue\n' > "$TEST_DIR/bad.sh"
J=$(as_nobody sbatch --parsable -o "$S/out/%j.out" "$TEST_DIR/bad.sh" 2> "$S/sbatch.err")
is "$J" "" "a malformed '#BB_LUA stagein' directive: sbatch refuses the job"
ok "$(grep -q "expected DATASET" "$S/sbatch.err"; echo $?)" "saying what is expected"
sed 's/^/# /' "$S/sbatch.err" | head -2

# ---- a dataset the user may not read ---------------------------------------------------
printf '#!/bin/bash\n#BB_LUA stagein private\necho ran\n' > "$TEST_DIR/private.sh"
J=$(as_nobody sbatch --parsable -o "$S/out/%j.out" "$TEST_DIR/private.sh" 2> "$S/sbatch.err")
reason=""
for _ in $(seq 300); do
    reason=$(scontrol show job "$J" 2>/dev/null | grep -o "Reason=.*" | head -1)
    grep -q "not.readable" <<<"$reason" && break
    sleep 0.1
done
ok "$(grep -q "not.readable" <<<"$reason"; echo $?)" \
    "another user's private dataset: the job does not run, stageind's reason shown"
diag "scontrol: $reason"
ok "$([ ! -s "$S/out/$J.out" ]; echo $?)" "its script did not run"
scancel "$J" 2>/dev/null
is "$(sql "SELECT count(*) FROM requests WHERE uid = 65534 AND state <> 'RELEASED'")" 0 \
    "no request of nobody's is left active"
wait_idle 20
is "$(node_state)" idle "the node is idle, not drained"
finish
