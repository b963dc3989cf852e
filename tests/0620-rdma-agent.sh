#!/bin/bash
# The node agent over the RDMA data path, through stageind: `stagein agent
# --dataset` lands the dataset in memfd memory by RDMA (tcp;ofi_rxm on lo),
# checks every checksum and serves it; processes attach with libstagein
# through python/stagein.py (read-only numpy arrays, no copy): the bytes
# equal the sources, two attachers at once, detach and attach again, an
# attacher killed while attached, the agent killed while a process holds
# its data (the mapping stays valid; the next attach says nobody serves;
# a new agent on the same socket serves), and the agent stopped on request.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/s3-lib.sh"
. "$top_srcdir/tests/rdma-lib.sh"
s3_need_clients boto3
"$PY" -c 'import numpy' 2>/dev/null || { echo "1..0 # SKIP python3-numpy is not installed"; exit 0; }

S3_FIXTURE="a:1 b:4097 c:3145735 d/e:20971537 f:70000"
KEYS="a b c d/e f"
s3_setup A "$(rdma_conf "tcp;ofi_rxm" lo)"
s3_start_ok "stageind starts with RDMA on tcp;ofi_rxm (lo)"
rdma_client_env
export STAGEIN_TRANSPORT=rdma STAGEIN_RDMA_DOMAIN=lo
export STAGEIN_LIBRARY=$top_builddir/stagein/.libs/libstagein.so.0 PYTHONPATH=$top_srcdir/python
AGENT_SOCK=$TEST_DIR/agent.sock

# start_agent LOG: the agent for dataset pub; waits until it serves
start_agent() {
    "$STAGEIN" agent --dataset pub --socket "$AGENT_SOCK" --endpoint "unix:$SOCK" >"$1" 2>&1 &
    AGENT_PID=$!
    track_pid "$AGENT_PID"
    local _
    for _ in $(seq 300); do
        grep -q "agent: serving" "$1" && return 0
        kill -0 "$AGENT_PID" 2>/dev/null || break
        sleep 0.1
    done
    sed 's/^/# /' "$1"
    return 1
}

# attach_check: attaches, compares every object with its source and its
# checksum, checks the arrays are read-only; prints OK or what differs
ATTACH_CHECK='
import hashlib, os, sys, time, stagein
src, keys, hold = sys.argv[1], sys.argv[2].split(), float(sys.argv[3])
bad = []
with stagein.attach(os.environ["AGENT_SOCK"]) as a:
    if sorted(a) != sorted("data/" + k for k in keys):
        bad.append("objects %s" % sorted(a))
    for k in keys:
        arr = a["data/" + k]
        want = open(os.path.join(src, k), "rb").read()
        if arr.tobytes() != want:
            bad.append(k + " bytes")
        if a.checksum("data/" + k) != "sha256:" + hashlib.sha256(want).hexdigest():
            bad.append(k + " checksum " + a.checksum("data/" + k))
        if arr.flags.writeable:
            bad.append(k + " writable array")
    time.sleep(hold)
    # read again after holding: still the same bytes
    for k in keys:
        if a["data/" + k].tobytes() != open(os.path.join(src, k), "rb").read():
            bad.append(k + " changed")
print("OK" if not bad else " ".join(bad))
'
attach_check() { AGENT_SOCK=$AGENT_SOCK "$PY" -c "$ATTACH_CHECK" "$SRC" "$KEYS" "${1:-0}" 2>&1; }

sent0=$(metric stagein_rdma_sent_bytes_total)
start_agent "$TEST_DIR/agent1.log"
ok $? "the agent lands dataset pub and serves"
ok "$(grep -q "agent: 5 objects, 24191370 bytes resident in host memory in .* checksums verified" \
    "$TEST_DIR/agent1.log"; echo $?)" "it reports 5 objects resident, checksums verified"
sent=$(metric stagein_rdma_sent_bytes_total)
ok "$([ $((sent - sent0)) -ge 24191370 ]; echo $?)" "stageind wrote them by RDMA ($((sent - sent0)) bytes)"
is "$(attach_check)" OK "attach: every object equals its source and checksum, read-only arrays"
# (run in the test's directory: the handler writes a .btr file where it runs)
is "$(cd "$TEST_DIR" && AGENT_SOCK=$AGENT_SOCK "$PY" -c '
import ctypes, os, stagein
a = stagein.attach(os.environ["AGENT_SOCK"])
address = a["data/c"].ctypes.data
pid = os.fork()
if pid == 0:
    ctypes.memset(address, 0, 1)   # must fault: the mapping is read-only
    os._exit(0)
_, status = os.waitpid(pid, 0)
# SIGSEGV, or the exit of a handler that reported it (libfabric installs one)
print("faulted" if status != 0 else "written")' 2>/dev/null)" \
    faulted "writing into the attached memory faults: it is mapped read-only"

# two attachers at once
attach_check 1.5 > "$TEST_DIR/two1" &
p1=$!
attach_check 1.5 > "$TEST_DIR/two2" &
p2=$!
wait $p1 $p2
is "$(cat "$TEST_DIR/two1") $(cat "$TEST_DIR/two2")" "OK OK" "two processes attached at the same time both see the data"

is "$(SRC=$SRC AGENT_SOCK=$AGENT_SOCK "$PY" -c '
import os, stagein
a = stagein.attach(os.environ["AGENT_SOCK"]); n = len(a); a.detach()
b = stagein.attach(os.environ["AGENT_SOCK"]); print(n, len(b), bytes(b["data/a"]) == open(os.environ["SRC"] + "/a", "rb").read()); b.detach()
' 2>&1)" "5 5 True" "detach, then attach again in the same process"

# an attacher killed while attached
AGENT_SOCK=$AGENT_SOCK "$PY" -c '
import os, signal, stagein
a = stagein.attach(os.environ["AGENT_SOCK"]); a["data/d/e"][0]
os.kill(os.getpid(), signal.SIGKILL)' 2>/dev/null &
wait $! 2>/dev/null
is "$(attach_check)" OK "after an attacher was killed while attached, the agent still serves"

# the agent killed while a process holds its data
attach_check 3 > "$TEST_DIR/holder" &
holder=$!
sleep 1
kill -KILL "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
shm_forget "$AGENT_PID"
wait $holder
is "$(cat "$TEST_DIR/holder")" OK "a process attached when the agent was killed keeps reading the same bytes"
out=$(AGENT_SOCK=$AGENT_SOCK "$PY" -c '
import os, stagein
try:
    stagein.attach(os.environ["AGENT_SOCK"]); print("attached")
except stagein.StageinError as e:
    print(e)' 2>&1)
ok "$(grep -q "$AGENT_SOCK" <<<"$out"; echo $?)" "attaching to the dead agent fails naming the socket: $out"
start_agent "$TEST_DIR/agent2.log"
ok $? "a new agent serves on the same socket"
is "$(attach_check)" OK "... and its data is right"

# stopped on request
is "$(AGENT_SOCK=$AGENT_SOCK "$PY" -c '
import os, stagein; stagein.stop_agent(os.environ["AGENT_SOCK"]); print("stopped")' 2>&1)" stopped \
    "stop_agent asks the agent to stop"
for _ in $(seq 50); do kill -0 "$AGENT_PID" 2>/dev/null || break; sleep 0.1; done
wait "$AGENT_PID"
is "$?" 0 "the agent exits 0"
ok "$([ ! -e "$AGENT_SOCK" ]; echo $?)" "and removes its socket"
is "$(rdma_settled | cut -d' ' -f2-)" "$(metric stagein_rdma_buffers)/$(metric stagein_rdma_buffers) transfers=0 retired=0" \
    "stageind: no transfer left, every pool buffer free"
rdma_stop
finish
