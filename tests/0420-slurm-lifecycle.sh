#!/bin/bash
# A request's life is its job's life, on a real single-node Slurm with a real
# stageind (issue: job lifecycle): an 8-task array shares one request, held
# until its last task ends; scancel while pending and while the prolog waits
# (node idle soon, request released, no agent); srun standalone and salloc
# with srun steps (one request, steps inherit it); steps and plain sruns
# while stageind is down; stageind killed with -9 and restarted while a
# prolog waits; pins that expire; a failed --stage-out the user sees; a
# dataset larger than the cache refused at submission; a supplementary
# group granting a dataset; the state directory's modes.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"
. "$top_srcdir/tests/slurm-lib.sh"
need_tools -p "passwd, slurm-client" useradd userdel groupadd groupdel salloc srun scancel

for f in a1:150000 a2:250000 b1:120000 b2:80000 g1:50000 k1:1500000 k2:1500000 \
    k3:1500000 k4:1500000 h1:6000000 h2:6000000; do
    make_file "${f%%:*}" "${f##*:}"
done
use_state A
: > "$TEST_DIR/s3.secrets"
chmod 600 "$TEST_DIR/s3.secrets"
# time_scale: the modelled library runs 10x faster than real drives, so a
# recall takes seconds (mounts, locates) and a prolog has to wait for it
LIB_GROUP="library: { time_scale = 0.1; };"
SLURM_GROUP="slurm: { squeue = \"$(command -v squeue)\"; reconcile_interval = 1.0; expiry_interval = 0.5; };"
CONF_REST="client: { munge_socket = \"$M/sock\"; };
cache: { capacity = 10000000; };
s3: { enabled = true; bind = \"127.0.0.1\"; port = $(free_port); secrets_file = \"$TEST_DIR/s3.secrets\"; };
$SLURM_GROUP"
write_conf "$CONF_REST
$LIB_GROUP"
chmod 644 "$STAGEIN_CONF"
"$STAGEIN" catalog init >/dev/null
for v in V00001 V00002 V00003 V00004; do tape create "$v" --capacity 20000000000 >/dev/null; done
write_volume V00001 1 a1 a2 b1 b2 g1
write_volume V00002 1 k1 k2
write_volume V00003 1 h1 h2
write_volume V00004 1 k3 k4
define alpha a1 a2
define beta b1 b2
define slow k1 k2
define huge h1 h2
define slow2 k3 k4

# two unprivileged users; the first is in a supplementary group that owns a dataset
trap 'stop_slurm; cleanup_users; cleanup' EXIT
project_users

run_ok "stageind starts" -- start
track_pid "$(daemon_pid)"

# ---- the state directory is the service's own ----------------------------------------
is "$(stat -c %a "$STATE"):$(stat -c %a "$DB"):$(stat -c %a "$STATE/volumes")" 711:600:700 \
    "state dir 0711 (sockets reachable, nothing listed), catalog 0600, volumes 0700"
as_user "$U2" cat "$STATE/volumes/V00001.vol" >/dev/null 2>&1
ok $((1 - $?)) "another user cannot read a volume's bytes"
as_user "$U2" sqlite3 "$DB" "SELECT count(*) FROM objects" >/dev/null 2>&1
ok $((1 - $?)) "... nor open the catalog"

plugstack wait=60
start_slurm "MinJobAge=600"
is "$(node_state)" idle "single-node Slurm up"

cat > "$TEST_DIR/show.sh" <<'JOB'
#!/bin/bash
echo "task=${SLURM_ARRAY_TASK_ID:-} request=$STAGEIN_REQUEST agent=${STAGEIN_AGENT_SOCKET:+yes}"
JOB
chmod 755 "$TEST_DIR/show.sh"
request_state() { sql "SELECT CASE WHEN expired THEN 'EXPIRED' ELSE state END FROM requests WHERE uuid = '$1'"; }
# wait_state ID STATE [SECONDS]: until the request is in STATE; prints what it is
wait_state() {
    local s=""
    for _ in $(seq $((${3:-20} * 10))); do
        s=$(request_state "$1"); [ "$s" = "$2" ] && break; sleep 0.1
    done
    echo "$s"
}
requests_now() { sql "SELECT count(*) FROM requests"; }

# ---- an 8-task array shares one request, released after its last task --------------
before=$(requests_now)
A=$(submit --array=0-7 --stage-in=alpha "$TEST_DIR/show.sh")
ok $([ -n "$A" ]; echo $?) "sbatch --array=0-7 --stage-in=alpha accepted"
RA=$(newest_request)
is "$(($(requests_now) - before))" 1 "one request for the whole array"
for t in 0 1 2 3 4 5 6 7; do
    st=$(wait_job "${A}_$t" 90)
    [ "$st" = COMPLETED ] || { diag "task $t: $st"; break; }
done
is "$st" COMPLETED "all 8 tasks COMPLETED"
outs=$(cat "$S/out/"*.out 2>/dev/null | grep -c "request=$RA agent=yes")
is "$outs" 8 "every task ran with the request and its agent"
is "$(wait_state "$RA" RELEASED 20)" RELEASED "the request is released after the last task"
is "$(sql "SELECT count(*) FROM cache_pins p JOIN requests r ON r.id = p.request_id WHERE r.uuid = '$RA'")" 0 \
    "its pins are given back"
grep -q "request.bound" <(sql "SELECT kind FROM events WHERE subject = '$RA'")
ok $? "the tasks bound the request (events)"

# ---- a dependent job's recall overlaps the job it waits for --------------------------------
check_dependency_overlap beta wait_state
B=$DEP_JOB RB=$DEP_REQUEST
is "$(sql "SELECT job_id FROM requests WHERE uuid = '$RB'")" "$B" "sbatch named the job its request is for"
is "$(wait_job "$B" 60)" COMPLETED "then the dependent job ran"
grep -q "request=$RB agent=yes" "$S/out/$B.out"
ok $? "with that request and its agent"

# ---- scancel while pending -------------------------------------------------------------
J=$(submit --hold --stage-in=beta "$TEST_DIR/show.sh")
RJ=$(newest_request)
is "$(job_state "$J")" PENDING "a held job with --stage-in=beta is PENDING"
scancel "$J"
is "$(wait_state "$RJ" RELEASED 20)" RELEASED "scancel while PENDING: stageind releases its request"
diag "reason: $(sql "SELECT end_reason FROM requests WHERE uuid = '$RJ'")"
sql "SELECT end_reason FROM requests WHERE uuid = '$RJ'" | grep -q "job $J ended (CANCELLED)"
ok $? "the reason names the job and CANCELLED"

# ---- a dataset larger than the cache is refused at submission ----------------------------
J=$(submit --stage-in=huge "$TEST_DIR/show.sh")
is "$J" "" "a dataset of 12 MB with a 10 MB cache: sbatch refuses the job"
grep -q "needs 12000000 bytes .* more than the cache's 10000000 bytes" "$S/sbatch.err"
ok $? "the refusal gives both sizes"
sed 's/^/# /' "$S/sbatch.err" | head -2

# ---- supplementary groups -------------------------------------------------------------
J=$(as_user "$U1" sbatch --parsable -o "$S/out/%j.out" --stage-in=projdata "$TEST_DIR/show.sh" 2> "$S/sbatch.err")
ok $([ -n "$J" ]; echo $?) "a member of $G (a supplementary group) may stage the group's dataset"
sed 's/^/# /' "$S/sbatch.err" | head -2
[ -n "$J" ] && is "$(wait_job "$J" 60)" COMPLETED "... and the job COMPLETED"
grep -q "request=.\{36\} agent=yes" "$S/out/$J.out" && ! grep -q "not available\|cannot" "$S/out/$J.out"
ok $? "... with its agent, which read the data through S3 as $U1 (the group counts there too)"
J=$(as_user "$U2" sbatch --parsable -o "$S/out/%j.out" --stage-in=projdata "$TEST_DIR/show.sh" 2> "$S/sbatch.err")
is "$J" "" "a user outside $G is refused"

# ---- srun standalone; salloc with srun steps ---------------------------------------------
before=$(requests_now)
out=$(cd "$TEST_DIR" && srun --stage-in=beta "$TEST_DIR/show.sh" 2>&1)
echo "$out" | grep -q "request=.\{36\} agent=yes"
ok $? "srun --stage-in: the step has its request and agent"
echo "$out" | sed 's/^/# /' | head -3
before=$(requests_now)
out=$(cd "$TEST_DIR" && salloc --stage-in=alpha /bin/bash -c "srun $TEST_DIR/show.sh; srun $TEST_DIR/show.sh" 2>&1)
is "$(echo "$out" | grep -c "request=.\{36\} agent=yes")" 2 "salloc --stage-in: both srun steps have the data"
is "$(($(requests_now) - before))" 1 "... through one request: the steps never submit again"
RS=$(newest_request)
is "$(wait_state "$RS" RELEASED 20)" RELEASED "salloc's request is released when the allocation ends"

# ---- steps while stageind is down; a restart mid-job -----------------------------------------
cat > "$TEST_DIR/steps.sh" <<JOB
#!/bin/bash
touch $TEST_DIR/running
for _ in \$(seq 300); do [ -e $TEST_DIR/go ] && break; sleep 0.1; done
srun $TEST_DIR/show.sh
srun hostname >/dev/null && echo "plain step ok"
JOB
J=$(submit --stage-in=beta "$TEST_DIR/steps.sh")
for _ in $(seq 300); do [ -e "$TEST_DIR/running" ] && break; sleep 0.1; done
stop
out=$(srun true 2>&1); rc=$?
is "$rc:$out" "0:" "stageind down: an srun without any stage option runs, silently"
touch "$TEST_DIR/go"
for _ in $(seq 100); do grep -q "plain step ok" "$S/out/$J.out" 2>/dev/null && break; sleep 0.1; done
run_ok "stageind restarts" -- start
track_pid "$(daemon_pid)"
is "$(wait_job "$J" 60)" COMPLETED "the job whose steps ran while stageind was down COMPLETED"
is "$(grep -c "request=.\{36\} agent=yes" "$S/out/$J.out"):$(grep -c "plain step ok" "$S/out/$J.out")" 1:1 \
    "its srun steps ran with the data, without stageind"

# ---- an epilog that cannot reach stageind ----------------------------------------------------
cat > "$TEST_DIR/waitgo.sh" <<JOB
#!/bin/bash
touch $TEST_DIR/running2
for _ in \$(seq 300); do [ -e $TEST_DIR/go2 ] && break; sleep 0.1; done
JOB
J=$(submit --stage-in=alpha "$TEST_DIR/waitgo.sh")
RE=$(newest_request)
for _ in $(seq 300); do [ -e "$TEST_DIR/running2" ] && break; sleep 0.1; done
stop
touch "$TEST_DIR/go2"
is "$(wait_job "$J" 60)" COMPLETED "a job whose epilog runs while stageind is down COMPLETED"
grep -q "job $J: cannot release request $RE: .*stageind releases it once it sees the job ended" "$S/log/slurmd.log"
ok $? "the epilog says it could not release the request, and who will"
run_ok "stageind restarts" -- start
track_pid "$(daemon_pid)"
is "$(wait_state "$RE" RELEASED 20)" RELEASED "stageind releases the request itself"
sql "SELECT end_reason FROM requests WHERE uuid = '$RE'" | grep -q "job $J ended"
ok $? "... because job $J ended"

# ---- pins expire ----------------------------------------------------------------------------
out=$("$STAGEIN" request beta --pin-lifetime 2 --wait --endpoint "unix:$SOCK" 2>&1)
R=$(echo "$out" | grep -o '[0-9a-f-]\{36\}' | head -1)
ok $([ -n "$R" ]; echo $?) "a request with a 2 s pin lifetime staged"
[ -n "$R" ] || echo "$out" | sed 's/^/# /' | head -5
is "$(wait_state "$R" EXPIRED 15)" EXPIRED "its pins expire: EXPIRED"
"$STAGEIN" status --all --endpoint "unix:$SOCK" | grep "$R" | grep -q EXPIRED
ok $? "stagein status --all lists it as EXPIRED"
is "$(sql "SELECT count(*) FROM events WHERE kind = 'request.expired' AND subject = '$R'")" 1 "the expiry is logged"
"$STAGEIN" catalog requests --state EXPIRED | grep "$R" | grep -q "pin lifetime of 2 s passed"
ok $? "stagein catalog requests --state EXPIRED shows it to admins, with the reason"

# ---- a failed --stage-out reaches the user ------------------------------------------------------
CK=$TEST_DIR/ckpt
mkdir -p "$CK"; echo data > "$CK/x"; chmod -R a+rX "$CK"
J=$(as_user "$U2" sbatch --parsable -o "$S/out/%j.out" --stage-out="$CK:alpha" --wrap true 2> "$S/sbatch.err")
is "$(wait_job "$J" 60)" COMPLETED "a job pushing into another user's dataset ends"
for _ in $(seq 50); do grep -q "stage-out" "$S/out/$J.out" 2>/dev/null && break; sleep 0.1; done
grep -q "stagein: --stage-out $CK as dataset alpha failed: .*owner" "$S/out/$J.out"
ok $? "the failure and its cause are in the job's output"
sed 's/^/# /' "$S/out/$J.out" | head -3
scontrol show job "$J" | grep -q "Comment=stagein: --stage-out $CK as dataset alpha failed"
ok $? "... and in the job's comment (scontrol, sacct)"

# ---- scancel while the prolog waits; kill -9 while it waits ---------------------------------------
stop
write_conf "$CONF_REST
library: { time_scale = 0.5; };"
run_ok "stageind restarts with a slower library" -- start
track_pid "$(daemon_pid)"
J=$(submit --stage-in=slow "$TEST_DIR/show.sh")
RW=$(newest_request)
for _ in $(seq 200); do scontrol show job "$J" | grep -q "Comment=stagein: staging" && break; sleep 0.1; done
scontrol show job "$J" | grep -q "Comment=stagein: staging"
ok $? "while the prolog waits, the job's comment shows the staging"
scontrol show job "$J" | grep -o "Comment=.*" | sed 's/^/# /'
squeue -h -j "$J" -O "JobID:8,State:12,Comment:80" | sed 's/^/# squeue: /' 
t0=$(date +%s)
scancel "$J"
is "$(wait_job "$J" 30)" CANCELLED "scancel while the prolog waits: CANCELLED"
wait_idle 20
is "$(node_state)" idle "the node is idle soon after"
diag "idle after $(($(date +%s) - t0)) s"
is "$(wait_state "$RW" RELEASED 20)" RELEASED "its request is released"
grep -q "job $J: node agent started" "$S/log/slurmd.log"
ok $((1 - $?)) "no agent was started for the cancelled job"

J=$(submit --stage-in=slow2 "$TEST_DIR/show.sh")
for _ in $(seq 200); do grep -q "job $J is request" "$S/log/slurmd.log" && break; sleep 0.1; done
kill -9 "$(daemon_pid)"
sleep 3
run_ok "stageind back after kill -9 during the prolog's wait" -- start
track_pid "$(daemon_pid)"
is "$(wait_job "$J" 90)" COMPLETED "the job waiting in its prolog COMPLETED"
grep -q "request=.\{36\} agent=yes" "$S/out/$J.out"
ok $? "... with its data"
grep -q "job $J: stageind unreachable" "$S/log/slurmd.log"
ok $? "the prolog said it was retrying"
is "$(node_state)" idle "the node is idle"

finish
