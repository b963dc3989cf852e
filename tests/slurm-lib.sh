# Helpers for the Slurm system tests (0400-0410): a single-node Slurm on
# loopback (slurmctld + slurmd with per-run ports, the private munged of
# recall-lib.sh, the plugin in plugstack.conf) beside a real stageind with
# the simulated library. Source after lib.sh and recall-lib.sh. Everything
# started here is stopped by pid at exit; every wait is bounded.
PATH=$PATH:/usr/sbin
for tool in slurmctld slurmd sbatch squeue sinfo scontrol setpriv; do
    command -v "$tool" >/dev/null 2>&1 || { echo "1..0 # SKIP $tool is not installed (slurmctld slurmd slurm-client)"; exit 0; }
done
if [ "$(id -u)" -ne 0 ]; then
    echo "1..0 # SKIP the Slurm tests run slurmd, which needs root"
    exit 0
fi
PLUGIN=$top_builddir/spank/.libs/stagein.so
[ -f "$PLUGIN" ] || { echo "1..0 # SKIP $PLUGIN is not built"; exit 0; }

S=$TEST_DIR/slurm
export SLURM_CONF=$S/etc/slurm.conf
mkdir -p "$S/etc" "$S/state" "$S/spool/localhost" "$S/log" "$S/run" "$S/out" "$S/rundir"
chmod 1777 "$S/out"
chmod 755 "$S" "$S/etc"

# write_slurm_conf: slurm.conf with two free ports (SLURM-TESTING.md)
write_slurm_conf() {
    cat > "$SLURM_CONF" <<CONF
ClusterName=stagein-test
SlurmctldHost=localhost
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$M/sock
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
SlurmdDebug=info
PlugStackConfig=$S/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerParameters=batch_sched_delay=0
MailProg=/bin/true
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
}

# plugstack ARGS...: the plugin with site arguments (slurmd reads it at start)
plugstack() {
    echo "required $PLUGIN endpoint=http://127.0.0.1:$PORT munge_socket=$M/sock" \
        "stagein=$STAGEIN config=$STAGEIN_CONF run_dir=$S/rundir $*" > "$S/etc/plugstack.conf"
}

pid_of() { cat "$S/run/$1.pid" 2>/dev/null; }
# stop_daemon NAME: TERM by pid file, bounded wait, then KILL
stop_daemon() {
    local pid
    pid=$(pid_of "$1")
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    rm -f "$S/run/$1.pid"
}
# node_state: what sinfo reports for the node (idle, mixed, drained, down...)
node_state() { sinfo -h -n localhost -o %T 2>/dev/null; }
wait_idle() {
    local limit=${1:-20}
    for _ in $(seq $((limit * 10))); do
        [ "$(node_state)" = idle ] && return 0
        sleep 0.1
    done
    return 1
}
start_slurmd() {
    slurmd -f "$SLURM_CONF" 2>>"$S/log/slurmd.start"
    for _ in $(seq 50); do [ -s "$S/run/slurmd.pid" ] && break; sleep 0.1; done
    track_pid "$(pid_of slurmd)"
}
restart_slurmd() { stop_daemon slurmd; start_slurmd; }
# start_slurm: slurmctld and slurmd; when the node does not come up idle,
# nothing after it can be tested: bail out with what the daemons said
start_slurm() {
    write_slurm_conf
    slurmctld -f "$SLURM_CONF" 2>>"$S/log/slurmctld.start"
    for _ in $(seq 50); do [ -s "$S/run/slurmctld.pid" ] && break; sleep 0.1; done
    track_pid "$(pid_of slurmctld)"
    start_slurmd
    wait_idle 30 && return 0
    grep -h "error" "$S/log/slurmctld.log" "$S/log/slurmd.log" 2>/dev/null | tail -5 | sed 's/^/# /'
    echo "Bail out! the single-node Slurm did not come up (node: $(node_state))"
    exit 1
}
stop_slurm() { stop_daemon slurmd; stop_daemon slurmctld; }
trap 'stop_slurm; cleanup' EXIT

# job_state ID: COMPLETED, FAILED, PENDING, RUNNING... ("" once forgotten)
job_state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
# wait_job ID [SECONDS]: until the job has ended; prints its final state
wait_job() {
    local id=$1 limit=${2:-60} state=""
    for _ in $(seq $((limit * 10))); do
        state=$(job_state "$id")
        case $state in PENDING | RUNNING | CONFIGURING | COMPLETING | "") sleep 0.1 ;; *) break ;; esac
    done
    echo "$state"
}
# submit [sbatch arguments...] SCRIPT: prints the job id ("" when refused;
# sbatch's messages are in $S/sbatch.err)
submit() { sbatch --parsable -o "$S/out/%j.out" "$@" 2> "$S/sbatch.err"; }
job_out() { cat "$S/out/$1.out" 2>/dev/null; }
