#!/bin/bash
# The layering rule: inside every folder the files call one another as a
# tree (dispatcher -> operations -> helpers), never in a circle. Read from
# the built objects by scripts/call-cycles; a cycle names its files.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_tools -p binutils nm
need_tools -p python3 python3

out=$(python3 "$top_srcdir/scripts/call-cycles" "$top_builddir" "$top_srcdir" 2>&1)
rc=$?
printf '# %s\n' "$out"
ok $([ "$rc" -ne 2 ]; echo $?) "the built objects were found"
ok "$rc" "no folder's files call one another in a circle"

# The checker itself finds a circle: two objects that need each other.
mkdir -p "$TEST_DIR/tree/dir/.libs"
cd "$TEST_DIR/tree/dir" || exit 1
printf 'int b(void);\nint a(void) { return b(); }\n' > a.c
printf 'int a(void);\nint b(void) { return a() + 1; }\n' > b.c
for f in a b; do
    cc -c -o ".libs/libx_la-$f.o" "$f.c" &&
        printf "pic_object='.libs/libx_la-%s.o'\n" "$f" > "libx_la-$f.lo"
done
cd "$TEST_DIR" || exit 1
out=$(python3 "$top_srcdir/scripts/call-cycles" "$TEST_DIR/tree" 2>&1)
ok $([ $? -eq 1 ] && grep -q "cycle: dir/a.c dir/b.c" <<<"$out"; echo $?) \
    "a circle between two files is reported (exit 1, both named)"

finish
