#!/bin/bash
# stagein catalog on PostgreSQL (catalog.url): a private server (tests/pg-lib.sh:
# initdb + pg_ctl as nobody, Unix socket in the test directory), the admin
# commands as on SQLite, read-only SQL in a read-only transaction, and clear
# refusals: wrong URL, wrong password, a readable password file, a password
# in the URL, a catalog of another site, both catalog.path and catalog.url.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/pg-lib.sh"

pg_lib_setup "$TEST_DIR" skip_all
trap 'pg_lib_stop "$TEST_DIR"; cleanup' EXIT
unset STAGEIN_CATALOG

url="postgresql://stagein@/postgres?host=$TEST_DIR/pg"
conf() {  # conf FILE URL PASSWORD_FILE SITE
    printf 'catalog: { url = "%s"; password_file = "%s"; site = "%s"; };\n' "$2" "$3" "$4" >"$1"
}
conf "$TEST_DIR/a.conf" "$url" "$TEST_DIR/pg-password" site-a
si() { "$STAGEIN" --config "$TEST_DIR/a.conf" "$@"; }
data="$top_srcdir/tests/data"

run_ok "init on PostgreSQL" -- si catalog init
is "$(si catalog init)" "catalog $url: schema 1.19" "schema version reported; no directory made for a URL"
run_ok "import CSV" -- si catalog import "$data/sample-positions.csv"
run_ok "import LTFS" -- si catalog import --volume LTFS01 --bucket ltfs "$data/sample-ltfs.xml"
run_ok "define a dataset" -- si catalog define climate "$data/climate-subset.manifest" --mode 0640
json=$(si catalog datasets --json)
ok $(grep -q '"dataset":"climate"' <<<"$json" && grep -q '"mode":"0640"' <<<"$json"; echo $?) \
    "datasets view: $json"
ok $(si catalog plan climate | grep -q 'L9'; echo $?) "plan lists reads by volume"
is "$(si catalog sql 'SELECT count(*) AS n FROM volumes WHERE label = '"'"'LTFS01'"'"'' | tail -1)" 1 \
    "read-only SQL answers"
run_fails_with "SQL writes refused by the read-only transaction" "read-only transaction" \
    -- si catalog sql "DELETE FROM events"
printf 'bucket,key,size,volume,position,copy,checksum\nok-bucket,x,1,L1,0,1,\nb,x,1,L1,0,1,\n' >"$TEST_DIR/bad.csv"
before=$(si catalog sql 'SELECT count(*) FROM objects' | tail -1)
run_fails_with "a bad line: file:line, nothing imported" "bad.csv:3: .*3 to 63" \
    -- si catalog import "$TEST_DIR/bad.csv"
is "$(si catalog sql 'SELECT count(*) FROM objects' | tail -1)" "$before" "... and nothing changed"

# refusals, each naming the setting
conf "$TEST_DIR/b.conf" "$url" "$TEST_DIR/pg-password" site-b
run_fails_with "another site's catalog" "belongs to site 'site-a', not 'site-b' \(catalog.site\)" \
    -- "$STAGEIN" --config "$TEST_DIR/b.conf" catalog datasets
conf "$TEST_DIR/c.conf" "postgresql://stagein@/nosuchdb?host=$TEST_DIR/pg" "$TEST_DIR/pg-password" site-a
run_fails_with "wrong URL" "catalog.url .*nosuchdb.*does not exist" \
    -- "$STAGEIN" --config "$TEST_DIR/c.conf" catalog datasets
(umask 077; echo wrong >"$TEST_DIR/wrong-password")
conf "$TEST_DIR/d.conf" "$url" "$TEST_DIR/wrong-password" site-a
run_fails_with "wrong password" "catalog.url .*password authentication failed" \
    -- "$STAGEIN" --config "$TEST_DIR/d.conf" catalog datasets
chmod 644 "$TEST_DIR/wrong-password"
run_fails_with "a password file others can read" "catalog.password_file .*chmod 600" \
    -- "$STAGEIN" --config "$TEST_DIR/d.conf" catalog datasets
conf "$TEST_DIR/e.conf" "postgresql://stagein:secret@/postgres?host=$TEST_DIR/pg" "" site-a
sed -i 's/password_file = "";//' "$TEST_DIR/e.conf"
run_fails_with "a password in the URL" "holds a password.*catalog.password_file" \
    -- "$STAGEIN" --config "$TEST_DIR/e.conf" catalog datasets
printf 'catalog: { url = "%s"; path = "%s/x.db"; };\n' "$url" "$TEST_DIR" >"$TEST_DIR/f.conf"
run_fails_with "catalog.path and catalog.url together" "both set" \
    -- "$STAGEIN" --config "$TEST_DIR/f.conf" catalog datasets
printf 'catalog: { url = "%s"; site = "site-a"; };\n' "$url" >"$TEST_DIR/g.conf"
run_fails_with "no password anywhere" "no password supplied" \
    -- "$STAGEIN" --config "$TEST_DIR/g.conf" catalog datasets
printf '*:*:*:stagein:%s\n' "$(cat "$TEST_DIR/pg-password")" >"$TEST_DIR/pgpass"
chmod 600 "$TEST_DIR/pgpass"
run_ok "libpq's own password file (PGPASSFILE)" \
    -- env PGPASSFILE="$TEST_DIR/pgpass" "$STAGEIN" --config "$TEST_DIR/g.conf" catalog datasets
finish
