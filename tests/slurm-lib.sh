# Helpers for the Slurm system tests (0400-0410): a single-node Slurm on
# loopback (slurmctld + slurmd with per-run ports, the private munged of
# recall-lib.sh, the plugin in plugstack.conf) beside a real stageind with
# the simulated library. Source after lib.sh and recall-lib.sh. Everything
# started here is stopped by pid at exit; every wait is bounded.
PATH=$PATH:/usr/sbin
need_tools -p "slurmctld slurmd slurm-client" slurmctld slurmd sbatch squeue sinfo scontrol setpriv
if [ "$(id -u)" -ne 0 ]; then
    echo "1..0 # SKIP the Slurm tests run slurmd, which needs root"
    exit 0
fi
PLUGIN=$top_builddir/spank/.libs/stagein.so
[ -f "$PLUGIN" ] || { echo "1..0 # SKIP $PLUGIN is not built"; exit 0; }

S=$TEST_DIR/slurm
. "$top_srcdir/scripts/slurm-node.sh"
slurm_node_init "$S" "$M/sock"
mkdir -p "$S/rundir"

# plugstack ARGS...: the plugin with site arguments (slurmd reads it at start);
# $PLUGSTACK_ENDPOINT: another endpoint= than the test's stageind
plugstack() {
    echo "required $PLUGIN endpoint=${PLUGSTACK_ENDPOINT:-http://127.0.0.1:$PORT} munge_socket=$M/sock" \
        "stagein=$STAGEIN config=$STAGEIN_CONF run_dir=$S/rundir $*" > "$S/etc/plugstack.conf"
}

node_state() { slurm_node_state; }
wait_idle() { slurm_node_wait_idle "$@"; }
start_slurmd() {
    slurm_node_start_daemon slurmd
    track_pid "$(slurm_node_pid slurmd)"
}
restart_slurmd() { slurm_node_stop_daemon slurmd; start_slurmd; }
# start_slurm [EXTRA_CONF]: slurmctld and slurmd; when the node does not come
# up idle, nothing after it can be tested: bail out with what the daemons said
start_slurm() {
    slurm_node_conf "${1:-}"
    slurm_node_start_daemon slurmctld
    track_pid "$(slurm_node_pid slurmctld)"
    start_slurmd
    wait_idle 30 && return 0
    grep -h "error" "$S/log/slurmctld.log" "$S/log/slurmd.log" 2>/dev/null | tail -5 | sed 's/^/# /'
    echo "Bail out! the single-node Slurm did not come up (node: $(node_state))"
    exit 1
}
stop_slurm() { slurm_node_stop; }
trap 'stop_slurm; cleanup' EXIT

job_state() { slurm_node_job_state "$1"; }
wait_job() { slurm_node_wait_job "$@"; }
# submit [sbatch arguments...] SCRIPT: prints the job id ("" when refused;
# sbatch's messages are in $S/sbatch.err)
submit() { sbatch --parsable -o "$S/out/%j.out" "$@" 2> "$S/sbatch.err"; }
job_out() { cat "$S/out/$1.out" 2>/dev/null; }
newest_request() { sql "SELECT uuid FROM requests ORDER BY id DESC LIMIT 1"; }

# project_users: two unprivileged users, $U1 in the supplementary group $G
# that owns the dataset projdata (data/g1, mode 0640), $U2 outside it; one
# check. cleanup_users removes them (the test's exit trap calls it).
project_users() {
    U1=stagein-t1-$$ U2=stagein-t2-$$ G=stagein-proj-$$
    created_users=""
    groupadd "$G" && useradd -M -N -g users -G "$G" -s /bin/bash "$U1" && created_users="$U1" &&
        useradd -M -N -g users -s /bin/bash "$U2" && created_users="$U1 $U2"
    ok $? "users $U1 (in group $G) and $U2 created"
    printf 'data/g1\n' > "$TEST_DIR/proj.manifest"
    "$STAGEIN" catalog define projdata "$TEST_DIR/proj.manifest" --owner "root:$G" --mode 0640 >/dev/null
}
cleanup_users() { for u in ${created_users:-}; do userdel "$u" 2>/dev/null; done; groupdel "${G:-}" 2>/dev/null; }
# as_user USER COMMAND...: COMMAND as USER, with USER's groups
as_user() { local u=$1; shift; setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups "$@"; }

# check_dependency_overlap DATASET WAIT: a 10 s job and a job that depends on
# it (afterok) staging DATASET from $TEST_DIR/show.sh; checks that the
# dependent job's request COMPLETED while the first had not ended and the
# dependent one was PENDING (WAIT REQUEST STATE SECONDS: the test's own
# wait for a request's state). Sets DEP_JOB and DEP_REQUEST.
check_dependency_overlap() {
    local first st first_state
    first=$(submit --wrap 'sleep 10')
    DEP_JOB=$(submit --dependency="afterok:$first" --stage-in="$1" "$TEST_DIR/show.sh")
    DEP_REQUEST=$(newest_request)
    st=$("$2" "$DEP_REQUEST" COMPLETED 9)
    first_state=$(job_state "$first")
    case $first_state in PENDING | CONFIGURING | RUNNING) first_state=not-ended ;; esac
    is "$st:$first_state:$(job_state "$DEP_JOB")" COMPLETED:not-ended:PENDING \
        "--dependency=afterok: its data was staged before the job it waits for ended"
}
