# A virtual tape library for the tape backend's tests: Debian's tgt (tgtd,
# a userspace iSCSI target with SSC and SMC emulation) on a per-test
# loopback port, cartridges made by tgtimg in the test directory, reached
# by stageind over libiscsi. Source after lib.sh (and recall-lib.sh).

for tool in tgtd tgtadm tgtimg; do
    command -v "$tool" >/dev/null 2>&1 || [ -x "/usr/sbin/$tool" ] ||
        { echo "1..0 # SKIP $tool is not installed (Debian package tgt)"; exit 0; }
done
if ! grep -q 'define HAVE_LIBISCSI 1' "$top_builddir/config.h" 2>/dev/null; then
    echo "1..0 # SKIP stageind was built without libiscsi (install libiscsi-dev, re-run configure)"
    exit 0
fi
PATH=$PATH:/usr/sbin
TAPE_TOOL="$top_builddir/daemon/stagein-tape"
VTL=$TEST_DIR/vtl
IQN=iqn.2026-12.org.stagein.test:vtl

# tgt_start DRIVES CARTRIDGES [SIZE_MB]: drives at LUNs 1..DRIVES (element
# addresses 1..DRIVES), the changer at LUN DRIVES+1, cartridges T0000001...
# in slots 100... ($TGT_SPARE_SLOTS empty slots after them). Sets TGT_PORT,
# TGT_URL, CHANGER_URL, TGTADM.
tgt_start() {
    local drives=$1 carts=$2 size=${3:-200} i changer=$(($1 + 1))
    mkdir -p "$VTL"
    dd if=/dev/zero of="$VTL/smc" bs=1k count=1 2>/dev/null
    for i in $(seq "$carts"); do
        tgtimg --op new --device-type tape --barcode "$(printf 'T%07d' "$i")" --size "$size" \
            --type data --file "$VTL/$(printf 'T%07d' "$i")" >/dev/null
    done
    TGT_PORT=$(free_port)
    # a control instance of its own (-C), from the port: tests run side by side
    TGT_CONTROL=$((TGT_PORT % 30000 + 1000))
    TGTADM="tgtadm -C $TGT_CONTROL --lld iscsi"
    tgtd -f -C "$TGT_CONTROL" --iscsi "portal=127.0.0.1:$TGT_PORT" >"$VTL/tgtd.log" 2>&1 &
    TGT_PID=$!
    track_pid "$TGT_PID"
    for _ in $(seq 50); do $TGTADM --op show --mode sys >/dev/null 2>&1 && break; sleep 0.1; done
    $TGTADM --op new --mode target --tid 1 -T "$IQN" || return 1
    # 256 KiB segments as a real library's target has them: tgt's own
    # MaxRecvDataSegmentLength (8 KiB) cuts every WRITE into 8 KiB Data-Out PDUs
    local tp="$TGTADM --op update --mode target --tid 1 --name"
    $tp MaxRecvDataSegmentLength --value 262144 && $tp FirstBurstLength --value 262144 ||
        return 1
    for i in $(seq "$drives"); do
        $TGTADM --mode logicalunit --op new --tid 1 --lun "$i" -b "$VTL/$(printf 'T%07d' "$i")" --device-type=tape
        $TGTADM --mode logicalunit --op update --tid 1 --lun "$i" --params online=0
    done
    local lu="$TGTADM --mode logicalunit --op update --tid 1 --lun $changer --params"
    $TGTADM --mode logicalunit --op new --tid 1 --lun "$changer" -b "$VTL/smc" --device-type=changer
    $lu "media_home=$VTL"
    $lu "element_type=4,start_address=1,quantity=$drives"
    for i in $(seq "$drives"); do $lu "element_type=4,address=$i,tid=1,lun=$i"; done
    $lu "element_type=1,start_address=90,quantity=1"
    $lu "element_type=2,start_address=100,quantity=$((carts + ${TGT_SPARE_SLOTS:-0}))"
    for i in $(seq "$carts"); do
        $lu "element_type=2,address=$((99 + i)),barcode=$(printf 'T%07d' "$i"),sides=1"
    done
    $TGTADM --op bind --mode target --tid 1 -I ALL
    TGT_URL="iscsi://127.0.0.1:$TGT_PORT/$IQN"
    CHANGER_URL="$TGT_URL/$changer"
}

# tgt_stop: the target, then tgtd (SIGTERM alone does not stop it while a target exists)
tgt_stop() {
    [ -n "${TGT_PID:-}" ] || return 0
    $TGTADM --op delete --mode target --tid 1 --force >/dev/null 2>&1
    tgtadm -C "$TGT_CONTROL" --op delete --mode system >/dev/null 2>&1
    for _ in $(seq 50); do kill -0 "$TGT_PID" 2>/dev/null || break; sleep 0.1; done
    kill "$TGT_PID" 2>/dev/null
    TGT_PID=
}

# tape_conf DRIVES [EXTRA]: the archive group for the library started by tgt_start;
# drive $TAPE_BY_SERIAL (a number) is given without its element (found by serial)
tape_conf() {
    local i list=""
    for i in $(seq "$1"); do
        if [ "$i" = "${TAPE_BY_SERIAL:-}" ]; then
            list+="${list:+, }{ device = \"$TGT_URL/$i\"; }"
        else
            list+="${list:+, }{ device = \"$TGT_URL/$i\"; element = $i; }"
        fi
    done
    cat <<CONF
archive: { backend = "tape";
  tape: { changer = "$CHANGER_URL"; drives = ( $list );
          capacity = ${TAPE_CAPACITY:-150000000}; retry_interval = 0.05;
          command_log = "$TEST_DIR/scsi.log"; ${2:-} }; };
CONF
}

# mismatched KEY...: the keys of stageout/DATASET/KEY (DATASET: $MISMATCH_DATASET,
# else ckpt) whose cached copy differs from $SRC/KEY
mismatched() {
    local k
    for k in "$@"; do
        same_as_cached "o.key = '${MISMATCH_DATASET:-ckpt}/$k'" "$SRC/$k" || printf '%s ' "$k"
    done
}
# evict BUCKET: stageind stopped, the bucket's cached copies dropped as an
# eviction drops them (their rows; the next start's recovery frees their
# files and segment ranges)
evict() {
    stop
    sql "DELETE FROM cache WHERE object_id IN (SELECT id FROM objects WHERE bucket = '$1')"
}
