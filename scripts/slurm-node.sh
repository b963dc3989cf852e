# A single-node Slurm on loopback (slurmctld + slurmd, ports chosen per run,
# every file under one directory), for the demo and the Slurm system tests.
# Source it; then:
#   slurm_node_init DIR MUNGE_SOCKET   directories and the variables below
#   slurm_node_conf [EXTRA_LINES]      writes $SLURM_CONF (EXTRA: more settings)
#   slurm_node_start                   slurmctld and slurmd; 0 once the node is idle
#   slurm_node_stop                    TERM by pid file, bounded, then KILL
#   slurm_node_state                   what sinfo reports (idle, mixed, drained...)
# plugstack.conf is $SLURM_NODE/etc/plugstack.conf (slurmd reads it at start).
PATH=$PATH:/usr/sbin

slurm_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

slurm_node_init() {
    SLURM_NODE=$1
    SLURM_NODE_MUNGE=$2
    export SLURM_CONF=$SLURM_NODE/etc/slurm.conf
    mkdir -p "$SLURM_NODE/etc" "$SLURM_NODE/state" "$SLURM_NODE/spool/localhost" \
        "$SLURM_NODE/log" "$SLURM_NODE/run" "$SLURM_NODE/out"
    chmod 1777 "$SLURM_NODE/out"
    chmod 755 "$SLURM_NODE" "$SLURM_NODE/etc"
}

slurm_node_conf() {
    local d=$SLURM_NODE
    cat > "$SLURM_CONF" <<CONF
ClusterName=stagein-node
SlurmctldHost=localhost
SlurmctldPort=$(slurm_free_port)
SlurmdPort=$(slurm_free_port)
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$SLURM_NODE_MUNGE
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd.log
SlurmdDebug=info
PlugStackConfig=$d/etc/plugstack.conf
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
${1:-}
CONF
    [ -e "$SLURM_NODE/etc/plugstack.conf" ] || : > "$SLURM_NODE/etc/plugstack.conf"
}

slurm_node_pid() { cat "$SLURM_NODE/run/$1.pid" 2>/dev/null; }
slurm_node_state() { sinfo -h -n localhost -o %T 2>/dev/null; }
# slurm_node_wait_idle [SECONDS]
slurm_node_wait_idle() {
    local limit=${1:-20}
    for _ in $(seq $((limit * 10))); do
        [ "$(slurm_node_state)" = idle ] && return 0
        sleep 0.1
    done
    return 1
}

# slurm_node_start_daemon slurmctld|slurmd: started, pid file awaited
slurm_node_start_daemon() {
    "$1" -f "$SLURM_CONF" 2>>"$SLURM_NODE/log/$1.start"
    for _ in $(seq 50); do [ -s "$SLURM_NODE/run/$1.pid" ] && return 0; sleep 0.1; done
    return 1
}

# slurm_node_stop_daemon NAME: TERM by pid file, bounded wait, then KILL
slurm_node_stop_daemon() {
    local pid
    pid=$(slurm_node_pid "$1")
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$SLURM_NODE/run/$1.pid"
}

slurm_node_start() {
    slurm_node_start_daemon slurmctld && slurm_node_start_daemon slurmd &&
        slurm_node_wait_idle 30
}

slurm_node_stop() {
    slurm_node_stop_daemon slurmd
    slurm_node_stop_daemon slurmctld
}

# slurm_node_job_state ID: COMPLETED, FAILED, PENDING, RUNNING... ("" once forgotten)
slurm_node_job_state() {
    scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}
# slurm_node_wait_job ID [SECONDS]: until the job has ended; prints its final state
slurm_node_wait_job() {
    local id=$1 limit=${2:-60} state=""
    for _ in $(seq $((limit * 10))); do
        state=$(slurm_node_job_state "$id")
        case $state in PENDING | RUNNING | CONFIGURING | COMPLETING | STAGE_OUT | "") sleep 0.1 ;; *) break ;; esac
    done
    echo "$state"
}
