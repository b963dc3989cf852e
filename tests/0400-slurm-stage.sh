#!/bin/bash
# The SPANK plugin on a real single-node Slurm (slurmctld + slurmd on
# loopback, private munged) with a real stageind and the simulated library:
# --stage-in on the command line and in #SBATCH lines, the data verified
# inside the job; two jobs sharing a dataset recalled once; an unknown and
# another user's private dataset refused at submission (as an unprivileged
# user); a job of an unprivileged user; --stage-out pushed durable at job end
# and staged back by a later job; slurmd restarted between jobs; staging that
# cannot finish in the prolog's limit fails the step with the reason and the
# node stays up. Every check looks at job output and node state.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"
. "$top_srcdir/tests/slurm-lib.sh"

for f in a1:150000 a2:250000 a3:300000 b1:120000 b2:80000 s1:400000 s2:500000 p1:1000 \
    k1:3000000 k2:3000000; do
    make_file "${f%%:*}" "${f##*:}"
done
use_state A
# stageind serves S3 too: the node agent lands the data through it, with
# session credentials it gets as the job's user
S3_PORT=$(free_port)
: > "$TEST_DIR/s3.secrets"
chmod 600 "$TEST_DIR/s3.secrets"
S3_GROUP="s3: { enabled = true; bind = \"127.0.0.1\"; port = $S3_PORT; secrets_file = \"$TEST_DIR/s3.secrets\"; };"
write_conf "client: { munge_socket = \"$M/sock\"; };
push: { aggregate_window = 0.2; };
$S3_GROUP"
chmod 644 "$STAGEIN_CONF"
"$STAGEIN" catalog init >/dev/null
for v in V00001 V00002 V00003; do tape create "$v" --capacity 20000000000 >/dev/null; done
write_volume V00001 1 a1 a2 a3 b1
write_volume V00002 1 b2 s1 s2 p1
write_volume V00003 1 k1 k2
define alpha a1 a2 a3
define beta b1 b2
define shared s1 s2
define slow k1 k2
printf 'data/p1\n' > "$TEST_DIR/private.manifest"
"$STAGEIN" catalog define private "$TEST_DIR/private.manifest" --owner root:root --mode 0600 >/dev/null
run_ok "stageind starts" -- start
track_pid "$(daemon_pid)"

plugstack wait=30
start_slurm
is "$(node_state)" idle "single-node Slurm up: the node is idle"

# A job that checks its data: it attaches to the node agent
# ($STAGEIN_AGENT_SOCKET) with the Python module, and hashes every object of
# $STAGEIN_REQUEST in the agent's memory against the catalog's checksum.
cat > "$TEST_DIR/verify.sh" <<'JOB'
#!/bin/bash
echo "request=$STAGEIN_REQUEST endpoint=$STAGEIN_ENDPOINT uid=$(id -u)"
/usr/bin/python3 - <<'PY'
import hashlib, os, sqlite3, stagein
db = sqlite3.connect("file:%s/catalog.db?mode=ro" % os.environ["STAGEIN_STATE"], uri=True)
want = dict(db.execute("SELECT o.bucket || '/' || o.key, o.checksum FROM requests r"
                       " JOIN request_items i ON i.request_id = r.id"
                       " JOIN objects o ON o.id = i.object_id WHERE r.uuid = ?",
                       (os.environ["STAGEIN_REQUEST"],)))
with stagein.attach(os.environ["STAGEIN_AGENT_SOCKET"]) as objs:
    kind = type(objs[next(iter(objs))]).__module__ if len(objs) else "-"
    bad = [p for p in want if p not in objs or
           "sha256:" + hashlib.sha256(objs[p]).hexdigest() != want[p]]
    print("attached %d objects (%s), verified %d, %d mismatches%s" % (
        len(objs), kind, len(want), len(bad), (": " + " ".join(bad)) if bad else ""))
PY
JOB
export STAGEIN_STATE=$STATE PYTHONPATH="$top_srcdir/python" \
    STAGEIN_LIBRARY="$top_builddir/stagein/.libs/libstagein.so.0"
# verified N: the line a verify.sh job prints when all N objects matched
verified() { echo "attached $1 objects (numpy), verified $1, 0 mismatches"; }
request_of() { sed -n 's/^request=\([^ ]*\) .*/\1/p' "$S/out/$1.out"; }
request_state() { sql "SELECT state FROM requests WHERE uuid = '$1'"; }

# ---- --stage-in on the command line --------------------------------------------------
J1=$(submit --stage-in=alpha "$TEST_DIR/verify.sh")
is "$(wait_job "$J1" 60)" COMPLETED "sbatch --stage-in=alpha: the job COMPLETED"
R1=$(request_of "$J1")
is "$(job_out "$J1" | grep -cx "$(verified 3)")" 1 \
    "inside the job: 3 objects attached from the node agent's memory, every checksum verified"
job_out "$J1" | sed 's/^/# /' | head -4
is "$(job_out "$J1" | grep -c "endpoint=http://127.0.0.1:$PORT uid=0")" 1 \
    "the job has STAGEIN_ENDPOINT (and STAGEIN_REQUEST)"
grep -q "stage request $R1: 3 files, 700000 bytes" "$S/sbatch.err"
ok $? "sbatch names the stage request submitted with the job"
is "$(request_state "$R1")" RELEASED "the epilog released the request"
is "$(sql "SELECT job_id FROM requests WHERE uuid = '$R1'")" "$J1" \
    "the prolog bound the request made at submission to job $J1"
grep -q "job $J1: request $R1: COMPLETED, 3/3 files" "$S/log/slurmd.log"
ok $? "the prolog logged the staging progress for the job"
grep -q "job $J1: node agent started" "$S/log/slurmd.log"
agent_logged=$?
ok $agent_logged "the prolog started the job's node agent"
[ $agent_logged -eq 0 ] || grep "agent" "$S/log/slurmd.log" | head -5 | sed 's/^/# /'
is "$(pgrep -u 0 -f "stagein.* agent --request $R1" | wc -l)" 0 "the epilog stopped the agent"
is "$(node_state)" idle "the node is idle after the job"

# ---- #SBATCH lines --------------------------------------------------------------------
{ echo '#!/bin/bash'; echo '#SBATCH --stage-in=beta'; tail -n +2 "$TEST_DIR/verify.sh"; } > "$TEST_DIR/beta.sh"
J2=$(submit "$TEST_DIR/beta.sh")
is "$(wait_job "$J2" 60)" COMPLETED "#SBATCH --stage-in=beta: the job COMPLETED"
is "$(job_out "$J2" | grep -cx "$(verified 2)")" 1 "inside the job: beta's 2 objects attached and verified"

# ---- two jobs sharing a dataset, submitted at once ----------------------------------
J3=$(submit --stage-in=shared "$TEST_DIR/verify.sh")
J4=$(submit --stage-in=shared "$TEST_DIR/verify.sh")
is "$(wait_job "$J3" 60):$(wait_job "$J4" 60)" COMPLETED:COMPLETED "two jobs staging 'shared' COMPLETED"
is "$(job_out "$J3" | grep -cx "$(verified 2)"):$(job_out "$J4" | grep -cx "$(verified 2)")" \
    1:1 "inside each job: both objects attached from its agent and verified"
[ "$(request_of "$J3")" != "$(request_of "$J4")" ]
ok $? "each job has its own request"
is "$(recalled_count s1):$(recalled_count s2)" 1:1 "each shared object was recalled from tape once"

# ---- refused at submission --------------------------------------------------------------
jobs_before=$(squeue -h -a | wc -l)
J=$(submit --stage-in=nosuch "$TEST_DIR/verify.sh")
is "$J" "" "an unknown dataset: sbatch refuses the job"
grep -q "stagein: --stage-in=nosuch refused: .*nosuch" "$S/sbatch.err"
ok $? "the refusal names the dataset and stageind's reason"
sed 's/^/# /' "$S/sbatch.err" | head -3
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
J=$(as_nobody sbatch --parsable -o "$S/out/%j.out" --stage-in=private "$TEST_DIR/verify.sh" 2> "$S/sbatch.err")
is "$J" "" "another user's private dataset: sbatch as nobody refuses the job"
grep -q "stagein: --stage-in=private refused: .*not readable" "$S/sbatch.err"
ok $? "the refusal says the dataset is not readable by that user"
sed 's/^/# /' "$S/sbatch.err" | head -3
is "$(squeue -h -a | wc -l)" "$jobs_before" "no job was created for either"
J=$(as_nobody sbatch --parsable -o "$S/out/%j.out" --stage-in=bad/name "$TEST_DIR/verify.sh" 2> "$S/sbatch.err")
is "$J" "" "a malformed dataset name is refused by the option itself"
grep -q "invalid character '/'" "$S/sbatch.err"
ok $? "with the character named"

# ---- an unprivileged user's job -------------------------------------------------------
cat > "$TEST_DIR/mine.sh" <<'JOB'
#!/bin/bash
echo "uid=$(id -u) request=$STAGEIN_REQUEST"
stagein status "$STAGEIN_REQUEST" --json | python3 -c 'import json, sys; j = json.load(sys.stdin); print("state", j["state"], j["filesCompleted"])'
JOB
J5=$(as_nobody sbatch --parsable -o "$S/out/%j.out" --stage-in=alpha \
    --export=ALL,PATH="$top_builddir/stagein:$PATH" "$TEST_DIR/mine.sh" 2> "$S/sbatch.err")
is "$(wait_job "$J5" 60)" COMPLETED "nobody's job with --stage-in=alpha COMPLETED"
is "$(job_out "$J5" | grep -c '^uid=65534 request=.\{36\}$'):$(job_out "$J5" | grep -c '^state COMPLETED 3$')" 1:1 \
    "it ran as nobody, and stageind shows nobody's request COMPLETED from inside the job"
R5=$(job_out "$J5" | sed -n 's/^uid=65534 request=//p')
is "$(sql "SELECT uid || ' ' || state FROM requests WHERE uuid = '$R5'")" "65534 RELEASED" \
    "the request was submitted under nobody's MUNGE identity, and released"

# ---- slurmd restart between jobs, with endpoint=dead,dead,live ----------------------------
# (the stage-out below goes through the same list)
PLUGSTACK_ENDPOINT="unix:$TEST_DIR/dead.sock,http://127.0.0.1:$(free_port),http://127.0.0.1:$PORT"
plugstack wait=30
restart_slurmd
wait_idle 20
is "$(node_state)" idle "slurmd restarted: the node is idle again"
JF=$(submit --stage-in=beta "$TEST_DIR/verify.sh")
is "$(wait_job "$JF" 60)" COMPLETED "plugstack endpoint=dead,dead,live: sbatch --stage-in=beta COMPLETED"
RF=$(request_of "$JF")
is "$(job_out "$JF" | grep -cx "$(verified 2)")" 1 \
    "inside the job: beta's objects attached from the node agent (started with the list)"
is "$(job_out "$JF" | grep -c "endpoint=$PLUGSTACK_ENDPOINT uid=0")" 1 \
    "the job's STAGEIN_ENDPOINT is the whole list"
is "$(sql "SELECT count(*) || ' ' || max(state) FROM requests WHERE job_id = '$JF'")" "1 RELEASED" \
    "one request for the job, bound by the prolog and released by the epilog through the list"

# ---- --stage-out, then staged back ------------------------------------------------------
CK=$TEST_DIR/ckpt
mkdir -p "$CK"
cat > "$TEST_DIR/write.sh" <<JOB
#!/bin/bash
mkdir -p $CK/step1
head -c 200000 /dev/urandom > $CK/step1/rank0.pt
head -c 300000 /dev/urandom > $CK/step1/rank1.pt
echo state > $CK/meta.txt
sha256sum $CK/step1/rank0.pt $CK/step1/rank1.pt $CK/meta.txt > $TEST_DIR/ckpt.sums
echo written
JOB
J6=$(submit --stage-out="$CK:ckpt-t" "$TEST_DIR/write.sh")
is "$(wait_job "$J6" 60)" COMPLETED "a job with --stage-out=PATH:ckpt-t COMPLETED"
is "$(sql "SELECT count(*) FROM dataset_members m JOIN datasets d ON d.id = m.dataset_id WHERE d.name = 'ckpt-t'")" 3 \
    "at job end its 3 files are members of dataset ckpt-t (durable: archived to tape)"
grep -q "job $J6: --stage-out $CK pushed as dataset ckpt-t (durable)" "$S/log/slurmd.log"
ok $? "the epilog logged the durable push"
cat > "$TEST_DIR/readback.sh" <<JOB
#!/bin/bash
$(tail -n +2 "$TEST_DIR/verify.sh")
sed 's|$CK/||' $TEST_DIR/ckpt.sums | while read -r sum name; do
    set -- \$(sqlite3 -separator ' ' "\$STAGEIN_STATE/catalog.db" "SELECT c.path, c.file_offset, c.size FROM objects o JOIN cache c ON c.object_id = o.id WHERE o.key = 'ckpt-t/ckpt/\$name'")
    [ "\$(dd if="\$STAGEIN_STATE/cache/\$1" iflag=skip_bytes,count_bytes skip="\$2" count="\$3" status=none | sha256sum | cut -d' ' -f1)" = "\$sum" ] && echo "same \$name"
done
JOB
J7=$(submit --stage-in=ckpt-t "$TEST_DIR/readback.sh")
is "$(wait_job "$J7" 60)" COMPLETED "a later job with --stage-in=ckpt-t COMPLETED"
is "$(job_out "$J7" | grep -cx "$(verified 3)"):$(job_out "$J7" | grep -c '^same ')" 1:3 \
    "inside it: the checkpoint's 3 files verified, byte for byte what the first job wrote"
job_out "$J7" | sed 's/^/# /' | head -8
is "$(node_state)" idle "the node is idle"

# ---- staging that cannot finish within the prolog's limit --------------------------------
unset PLUGSTACK_ENDPOINT
stop
write_conf "client: { munge_socket = \"$M/sock\"; }; library: { time_scale = 1.0; };
$S3_GROUP"
run_ok "stageind restarts with a real-time tape library" -- start
track_pid "$(daemon_pid)"
plugstack wait=2
restart_slurmd
wait_idle 20
J8=$(submit --stage-in=slow "$TEST_DIR/verify.sh")
R8=$(sed -n 's/.*stage request \([^:]*\):.*/\1/p' "$S/sbatch.err")
is "$(wait_job "$J8" 60)" FAILED "staging longer than wait=2: the job FAILED"
is "$(scontrol show job "$J8" | grep -o 'ExitCode=[0-9:]*')" ExitCode=1:0 "with exit code 1 (the task failed, not the launch)"
job_out "$J8" | grep -q "stage request $R8 was not staged within the prolog's limit of 2 s"
ok $? "the job's output names the request and the cause"
job_out "$J8" | sed 's/^/# /' | head -3
job_out "$J8" | grep -q '^attached'
ok $((1 - $?)) "the job script did not run"
is "$(node_state)" idle "the node did not drain"
grep -q "job $J8: request $R8 not staged within 2 s" "$S/log/slurmd.log"
ok $? "the prolog logged the timeout"
is "$(request_state "$R8")" RELEASED "the epilog released the unfinished request"

finish
