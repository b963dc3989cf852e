#!/bin/bash
# The SPANK plugin on a real single-node Slurm (slurmctld + slurmd on
# loopback, private munged) in front of a site of three stageind instances
# sharing one PostgreSQL catalog (a private server), one cache directory
# and one simulated library; plugstack endpoint=a,b,c names all three:
# sbatch --stage-in, an array sharing one request, srun standalone, scancel
# while pending, a dependent job staged while it waits, two users and a
# supplementary group granting a dataset, the first endpoint's instance killed with -9 while a
# prolog waits (the plugin fails over, the others finish its recalls, the
# job runs with its data), salloc with srun steps, scancel while a prolog
# waits, and every instance killed and restarted at once while a prolog
# waits; every request is released after its job and no pin or lease
# outlives it.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/pg-lib.sh"
. "$top_srcdir/tests/recall-lib.sh"
. "$top_srcdir/tests/slurm-lib.sh"
need_tools -p "passwd, slurm-client" useradd userdel groupadd groupdel srun scancel
INSTANCES_TRAP="stop_slurm; cleanup_users"
VOLUMES=$TEST_DIR/volumes
INSTANCES_SITE=t0430
INSTANCES_KEEP_PORTS=1
# time_scale 0.1: the modelled library runs 10x faster than real drives, so
# a recall takes seconds and a prolog waits for it
INSTANCES_CONF="client: { munge_socket = \"$M/sock\"; };
library: { volume_dir = \"$VOLUMES\"; drives = 1; time_scale = 0.1; };
slurm: { squeue = \"$(command -v squeue)\"; reconcile_interval = 1.0; expiry_interval = 0.5; };"
. "$top_srcdir/tests/instances-lib.sh"

for f in a1:150000 a2:250000 b1:120000 b2:80000 c1:90000 d1:110000 g1:70000 k1:3000000 k2:3000000 \
    k3:3000000 k4:3000000 k5:3000000 k6:3000000; do
    make_file "${f%%:*}" "${f##*:}"
done
for n in 1 2 3; do conf_instance "$n" 100000000; chmod 644 "$TEST_DIR/i$n.conf"; done
export STAGEIN_CONF=$TEST_DIR/i1.conf
"$STAGEIN" catalog init >/dev/null
# slow, slow2 and slow3 each on a volume of their own: each recall mounts
# one (seconds at this time scale), so their prologs wait
for v in V00001 V00002 V00003 V00004 V00005; do tape create "$v" --capacity 20000000000 >/dev/null; done
(cd "$SRC" && "$STAGEIN" tape write V00001 --bucket data --no-catalog a1 a2 b1 >/dev/null &&
    "$STAGEIN" tape write V00002 --bucket data --no-catalog b2 c1 d1 g1 >/dev/null &&
    "$STAGEIN" tape write V00003 --bucket data --no-catalog k1 k2 >/dev/null &&
    "$STAGEIN" tape write V00004 --bucket data --no-catalog k3 k4 >/dev/null &&
    "$STAGEIN" tape write V00005 --bucket data --no-catalog k5 k6 >/dev/null)
for v in V00001 V00002 V00003 V00004 V00005; do "$STAGEIN" tape import "$v" >/dev/null; done
define alpha a1 a2
define beta b1 b2
define gamma c1
define delta d1
define slow k1 k2
define slow2 k3 k4
define slow3 k5 k6
# two unprivileged users; the first is in a supplementary group that owns a dataset
project_users
start_all "three instances start on one catalog, cache directory and library"

PLUGSTACK_ENDPOINT="http://127.0.0.1:$(port_of 1),http://127.0.0.1:$(port_of 2),http://127.0.0.1:$(port_of 3)"
plugstack wait=90
start_slurm "MinJobAge=600"
is "$(node_state)" idle "single-node Slurm up, its plugin given the three endpoints"

cat > "$TEST_DIR/show.sh" <<'JOB'
#!/bin/bash
echo "task=${SLURM_ARRAY_TASK_ID:-} request=$STAGEIN_REQUEST agent=${STAGEIN_AGENT_SOCKET:+yes}"
JOB
chmod 755 "$TEST_DIR/show.sh"
pins_of() { sql "SELECT count(*) FROM cache_pins p JOIN requests r ON r.id = p.request_id WHERE r.uuid = '$1'"; }

# prolog_waits JOB: until slurmd's log shows JOB's prolog waiting for its request
prolog_waits() {
    for _ in $(seq 200); do grep -q "job $1 is request" "$S/log/slurmd.log" && return 0; sleep 0.1; done
    return 1
}
# recalled_once KEY...: each object recalled exactly once (events)
recalled_once() {
    local keys
    keys=$(printf "'%s'," "$@")
    sql "SELECT count(*) FROM (SELECT subject FROM events WHERE kind = 'object.recalled' AND subject IN
         (SELECT CAST(o.id AS TEXT) FROM objects o WHERE o.key IN (${keys%,})) GROUP BY subject
         HAVING count(*) = 1) t"
}

# ---- sbatch --stage-in ----------------------------------------------------------------------
J=$(submit --stage-in=alpha "$TEST_DIR/show.sh")
ok $([ -n "$J" ]; echo $?) "sbatch --stage-in=alpha accepted"
R1=$(newest_request)
is "$(wait_job "$J" 90)" COMPLETED "the job COMPLETED"
grep -q "request=$R1 agent=yes" "$S/out/$J.out"
ok $? "it ran with its request and node agent"
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$R1'" RELEASED 20)" RELEASED \
    "the request is released after the job"
is "$(pins_of "$R1")" 0 "its pins are given back"

# ---- a job array shares one request ----------------------------------------------------------
before=$(sql "SELECT count(*) FROM requests")
A=$(submit --array=0-3 --stage-in=beta "$TEST_DIR/show.sh")
RA=$(newest_request)
is "$(($(sql "SELECT count(*) FROM requests") - before))" 1 "sbatch --array=0-3: one request for the array"
for t in 0 1 2 3; do
    st=$(wait_job "${A}_$t" 90)
    [ "$st" = COMPLETED ] || { diag "task $t: $st"; break; }
done
is "$st" COMPLETED "all 4 tasks COMPLETED"
is "$(cat "$S/out/"*.out 2>/dev/null | grep -c "request=$RA agent=yes")" 4 "every task had the request's data"
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$RA'" RELEASED 20)" RELEASED \
    "released after the last task"

# ---- srun standalone; scancel while pending ---------------------------------------------------
out=$(cd "$TEST_DIR" && srun --stage-in=gamma "$TEST_DIR/show.sh" 2>&1)
echo "$out" | grep -q "request=.\{36\} agent=yes"
ok $? "srun --stage-in: the step has its request and agent"
J=$(submit --hold --stage-in=beta "$TEST_DIR/show.sh")
RJ=$(newest_request)
is "$(job_state "$J")" PENDING "a held job with --stage-in is PENDING"
scancel "$J"
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$RJ'" RELEASED 30)" RELEASED \
    "scancel while PENDING: the site releases its request"
sql "SELECT end_reason FROM requests WHERE uuid = '$RJ'" | grep -q "job $J ended (CANCELLED)"
ok $? "the reason names the job and CANCELLED"

# ---- a dependent job's recall overlaps the job it waits for --------------------------------
request_wait() { wait_state "SELECT state FROM requests WHERE uuid = '$1'" "$2" "$3"; }
check_dependency_overlap delta request_wait
B=$DEP_JOB RB=$DEP_REQUEST
is "$(wait_job "$B" 60)" COMPLETED "then the dependent job ran"
grep -q "request=$RB agent=yes" "$S/out/$B.out"
ok $? "with that request and its agent"
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$RB'" RELEASED 20)" RELEASED \
    "its request is released after the job"

# ---- two users, a supplementary group ------------------------------------------------------
J=$(as_user "$U1" sbatch --parsable -o "$S/out/%j.out" --stage-in=projdata "$TEST_DIR/show.sh" 2> "$S/sbatch.err")
ok $([ -n "$J" ]; echo $?) "a member of $G (a supplementary group) may stage the group's dataset"
sed 's/^/# /' "$S/sbatch.err" | head -2
RG=$(newest_request)
is "$(wait_job "$J" 60)" COMPLETED "... and the job COMPLETED"
grep -q "request=$RG agent=yes" "$S/out/$J.out"
ok $? "... with its request and agent"
is "$(sql "SELECT uid FROM requests WHERE uuid = '$RG'")" "$(id -u "$U1")" \
    "the request is $U1's (its MUNGE identity reached the instance that took it)"
J=$(as_user "$U2" sbatch --parsable -o "$S/out/%j.out" --stage-in=projdata "$TEST_DIR/show.sh" 2> "$S/sbatch.err")
is "$J" "" "a user outside $G is refused"
grep -q "projdata" "$S/sbatch.err"
ok $? "... with a message naming the dataset"
sed 's/^/# /' "$S/sbatch.err" | head -2

J=$(submit --stage-in=slow "$TEST_DIR/show.sh")
RS=$(newest_request)
prolog_waits "$J"
# (its items start once an instance has a drive for its volume)
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$RS'" STARTED 30)" STARTED \
    "the job's prolog waits for its recall"
kill -9 "$(pid_of 1)"
diag "instance i1 killed at $(date +%T)"
is "$(wait_job "$J" 120)" COMPLETED "the job waiting in its prolog COMPLETED without instance i1"
grep -q "request=$RS agent=yes" "$S/out/$J.out"
ok $? "... with its data"
is "$(recalled_once k1 k2)" 2 "each of its objects recalled once"
start_instance 1
ok $? "instance i1 restarts on its port"
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$RS'" RELEASED 30)" RELEASED \
    "its request is released after the job"

# ---- salloc with srun steps ---------------------------------------------------------------
out=$(cd "$TEST_DIR" && salloc --stage-in=alpha /bin/bash -c "srun $TEST_DIR/show.sh; srun $TEST_DIR/show.sh" 2>&1)
is "$(echo "$out" | grep -c "request=.\{36\} agent=yes")" 2 "salloc --stage-in: both srun steps have the data"
RL=$(newest_request)
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$RL'" RELEASED 30)" RELEASED \
    "salloc's request is released when the allocation ends"

# ---- scancel while the prolog waits -------------------------------------------------------
J=$(submit --stage-in=slow2 "$TEST_DIR/show.sh")
RW=$(newest_request)
prolog_waits "$J"
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$RW'" STARTED 30)" STARTED \
    "a job's prolog waits for its recall (slow2)"
scancel "$J"
is "$(wait_job "$J" 30)" CANCELLED "scancel while the prolog waits: CANCELLED"
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$RW'" RELEASED 30)" RELEASED \
    "its request is released"
grep -q "job $J: node agent started" "$S/log/slurmd.log"
ok $((1 - $?)) "no agent was started for the cancelled job"

# ---- every instance killed and restarted at once while a prolog waits ---------------------
J=$(submit --stage-in=slow3 "$TEST_DIR/show.sh")
RR=$(newest_request)
prolog_waits "$J"
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$RR'" STARTED 30)" STARTED \
    "a job's prolog waits for its recall (slow3)"
pids=""
for n in 1 2 3; do pids+="$(pid_of "$n") "; done
# shellcheck disable=SC2086
kill -9 $pids
for p in $pids; do wait_gone "$p"; done
diag "every instance killed at $(date +%T)"
start_all "all three instances restart"
is "$(wait_job "$J" 120)" COMPLETED "the job waiting in its prolog COMPLETED"
grep -q "request=$RR agent=yes" "$S/out/$J.out"
ok $? "... with its data"
grep -q "job $J: stageind unreachable" "$S/log/slurmd.log"
ok $? "its prolog said every endpoint was down and it was retrying"
is "$(recalled_once k5 k6)" 2 "each of its objects recalled once"
is "$(wait_state "SELECT state FROM requests WHERE uuid = '$RR'" RELEASED 30)" RELEASED \
    "its request is released after the job"
is "$(wait_state "SELECT count(*) FROM cache_pins" 0 30)" 0 "no pin outlives its job"
is "$(wait_state "SELECT count(*) FROM leases WHERE kind = 'object'" 0 30)" 0 "no object lease is left"
wait_idle 20
is "$(node_state)" idle "the node is idle"
finish
