#!/bin/bash
# libfabric is loaded when an RDMA fabric is first opened, never at program
# start (common/rdma/loader.h): Debian's libfabric1 pulls libpsm_infinipath,
# whose constructor pins the process to one CPU and sleeps for a quarter of
# a second. Nothing the build makes names it in DT_NEEDED or leaves an fi_*
# symbol for the dynamic linker, and neither `stagein --help` nor a program
# on libstagein.so (tests/bench/lib_start: stagein_open + stagein_close)
# maps it; the same check sees it when it is loaded (LD_PRELOAD). That an
# RDMA GET still loads and uses it: t_loader, t_rdma, 0600, 0610.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
need_tools -p binutils readelf nm

# the real ELF files behind libtool's wrappers
elf() { local d b; d=$(dirname "$1"); b=$(basename "$1"); [ -f "$d/.libs/$b" ] && echo "$d/.libs/$b" || echo "$1"; }
LIBSTAGEIN="$top_builddir/stagein/.libs/libstagein.so"
LIB_START="$top_builddir/tests/bench/lib_start"
for f in "$(elf "$STAGEIN")" "$LIBSTAGEIN" "$(elf "$top_builddir/daemon/stageind")"; do
    name=${f#"$top_builddir"/}
    is "$(readelf -d "$f" | grep -c 'NEEDED.*libfabric')" 0 "$name does not link libfabric"
    is "$(nm -D --undefined-only "$f" | grep -c ' fi_')" 0 "$name leaves no fi_* symbol unresolved"
done
is "$(ldd "$(elf "$STAGEIN")" "$LIBSTAGEIN" | grep -c 'libfabric\|libpsm')" 0 \
    "nor through another library (ldd: no libfabric, no libpsm)"

conf="$TEST_DIR/stagein.conf"
echo "client: { endpoint = \"unix:$TEST_DIR/none.sock\"; };" > "$conf"
loaded() { STAGEIN_CONF=$conf LD_DEBUG=libs "$@" 2>&1 >/dev/null | grep -c 'libfabric\.so'; }
is "$(loaded "$STAGEIN" --help)" 0 "stagein --help does not load libfabric"
is "$(loaded "$STAGEIN" status --endpoint "unix:$TEST_DIR/none.sock" || true)" 0 \
    "nor a failing stagein status"
is "$(loaded "$LIB_START")" 0 "a program on libstagein.so does not load it at start"
ok "$([ "$(LD_PRELOAD=libfabric.so.1 loaded "$LIB_START")" -gt 0 ]; echo $?)" \
    "the check sees libfabric when it is loaded (LD_PRELOAD)"
finish
