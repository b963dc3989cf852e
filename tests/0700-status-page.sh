#!/bin/bash
# The web status page (doc/status-page.md) in a real browser: headless
# Chromium against a stageind with the simulated library while requests
# are recalled. The page lists every drive, the request's progress rises
# between two loads, the plots have points, it updates live without a
# reload, no script error, nothing loaded from outside loopback; a user's
# link shows their request and not another's, root's and an admin group
# member's show both; no token,
# a replayed or a bogus one gets the 401 page. Screenshots (1280x800 and a
# narrow window) are kept in tests/0700-status-page.artifacts/.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
if ! command -v chromium >/dev/null 2>&1; then
    echo "1..0 # SKIP chromium is not installed (Debian package chromium)"
    exit 0
fi
. "$top_srcdir/tests/recall-lib.sh"

ART=$top_builddir/tests/0700-status-page.artifacts
rm -rf "$ART"
mkdir -p "$ART"
for i in 1 2 3 4 5 6 7 8; do make_file "a$i" 3000000; done
make_file b1 200000
use_state A
STAGEIND_CONF_EXTRA='peercred = true;'
UI_CONF='sample_interval = 0.5; admin_group = "bin"; sessions_per_user = 3;'
write_conf "library: { drives = 3; time_scale = 0.3; };
ui: { $UI_CONF };"
"$STAGEIN" catalog init >/dev/null
for v in V00001 V00002 V00003; do tape create "$v" --capacity 20000000000 >/dev/null; done
write_volume V00001 1 a1 a2 a3 a4
write_volume V00002 1 a5 a6 a7 a8
write_volume V00003 1 b1
define alpha a1 a2 a3 a4 a5 a6 a7 a8
define beta b1
chmod 755 "$TEST_DIR" "$SRC"
run_ok "stageind starts (3 drives, the status page on)" -- start
track_pid "$(daemon_pid)"
URL=http://127.0.0.1:$PORT

# login links: `stagein ui` for root, the API for two unprivileged users
USER_A=nobody USER_B=daemon
as() { runuser -u "$1" -- "${@:2}"; }
api_as() {  # api_as USER METHOD PATH [DATA]
    local args=(-s -o "$BODY" -w '%{http_code}' -X "$2" -H "X-Stagein-Munge: $(as "$1" munge -S "$M/sock" -n)")
    [ -n "${4:-}" ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
    curl "${args[@]}" "$URL$3"
}
link_as() { api_as "$1" POST /api/v1/ui/login >/dev/null && json "$BODY" 'j["url"]'; }
link_root() { "$STAGEIN" ui --endpoint "unix:$SOCK"; }

RA=$(api_as "$USER_A" POST /api/v1/stage '{"datasets": ["alpha"], "job": "4711"}' >/dev/null && json "$BODY" 'j["requestId"]')
RB=$(api_as "$USER_B" POST /api/v1/stage '{"datasets": ["beta"], "job": "4712"}' >/dev/null && json "$BODY" 'j["requestId"]')
ok $([ -n "$RA" ] && [ -n "$RB" ]; echo $?) "user A ($USER_A) and user B ($USER_B) each staged a dataset"

PROFILE=$TEST_DIR/chromium
# browse URL OUT [WIDTH]: the DOM after the page's scripts ran for a while;
# every host but loopback resolves to nothing, so no request can leave it
browse() {
    rm -rf "$PROFILE"
    timeout 60 chromium --headless --no-sandbox --disable-gpu --user-data-dir="$PROFILE" \
        --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" --window-size="${3:-1280},800" \
        --virtual-time-budget="${BUDGET:-5000}" --dump-dom "$1" > "$2" 2>"$TEST_DIR/chromium.err"
}
shot() {
    rm -rf "$PROFILE"
    timeout 60 chromium --headless --no-sandbox --disable-gpu --user-data-dir="$PROFILE" \
        --host-resolver-rules="MAP * ~NOTFOUND, EXCLUDE 127.0.0.1" --window-size="$3" \
        --hide-scrollbars --virtual-time-budget=5000 --screenshot="$2" "$1" >/dev/null 2>&1
}
# dom FILE EXPR: python over the dumped DOM (d: the text, rows(table id): its cells)
dom() {
    python3 - "$1" "$2" <<'PY'
import html.parser, re, sys
text = open(sys.argv[1]).read()
class P(html.parser.HTMLParser):
    def __init__(s):
        super().__init__(); s.tables = {}; s.cur = None; s.row = None; s.cell = None; s.attrs = {}
    def handle_starttag(s, tag, a):
        a = dict(a)
        if a.get('id'): s.attrs[a['id']] = a
        if tag == 'table': s.cur = s.tables.setdefault(a.get('id'), [])
        if tag == 'tr' and s.cur is not None: s.row = []; s.cur.append(s.row)
        if tag in ('td', 'th') and s.row is not None: s.cell = ''; s.row.append(s.cell)
    def handle_endtag(s, tag):
        if tag == 'table': s.cur = None
        if tag in ('td', 'th') and s.row is not None and s.cell is not None: s.row[-1] = s.cell; s.cell = None
    def handle_data(s, data):
        if s.cell is not None: s.cell += data
p = P(); p.feed(text)
rows = lambda t: p.tables.get(t, [])[1:]
attr = lambda i, k: p.attrs.get(i, {}).get(k)
svgs = re.findall(r'<svg[^>]*data-points="(\d+)"[^>]*data-series="([^"]*)"', text)
errors = re.search(r'<div id="errors"[^>]*>(.*?)</div>', text, re.S).group(1)
print(eval(sys.argv[2]))
PY
}

# --- root: every drive, both requests, live updates, plots
sleep 1.5
browse "$(link_root)" "$TEST_DIR/root1.html"
is "$(dom "$TEST_DIR/root1.html" 'len(rows("drives"))')" 3 "the library view lists the 3 configured drives"
is "$(dom "$TEST_DIR/root1.html" 'sorted(r[0] for r in rows("drives")) == ["0", "1", "2"]')" True \
    "drives 0, 1 and 2 by number"
is "$(dom "$TEST_DIR/root1.html" "any('$RA'[:8] in r[1] for r in rows('queue-table')) and any('$RB'[:8] in r[0] for r in rows('requests-table'))")" True \
    "root sees A's request in the queue and B's among the requests"
is "$(dom "$TEST_DIR/root1.html" 'errors.strip()')" "" "no script or fetch error on the page"
grep -q 'files (0 B) waiting to be archived, 0 being written to tape' "$TEST_DIR/root1.html"
ok $? "the stage-out view shows the push counts"
is "$(dom "$TEST_DIR/root1.html" 'int(attr("updated", "data-updates")) >= 2')" True \
    "the page updated itself without a reload (polling)"
is "$(dom "$TEST_DIR/root1.html" 'sorted(s for _, s in svgs if s.startswith("Drive "))')" \
    "['Drive 0 reads', 'Drive 1 reads', 'Drive 2 reads']" "a read rate plot per drive"
is "$(dom "$TEST_DIR/root1.html" 'len(svgs)')" 13 "thirteen plots (9 library-wide, 3 drives, completion times)"
is "$(dom "$TEST_DIR/root1.html" 'min(int(n) for n, s in svgs if s != "Request completion time") >= 2')" True \
    "every plot over the history has data points"
is "$(dom "$TEST_DIR/root1.html" 'all(r[3].endswith("/s") for r in rows("drives"))')" True \
    "each drive shows its read rate now (the backend's per-drive counters)"
is "$(dom "$TEST_DIR/root1.html" 'sorted(r[0] for r in rows("volumes"))[0] in ("V00001", "V00002") and all(int(r[3]) > 0 for r in rows("volumes"))')" True \
    "the volumes with queued work are listed with their waiting files"
is "$(dom "$TEST_DIR/root1.html" 'all(r[9] for r in rows("queue-table")) and len(rows("queue-table")) > 0')" True \
    "each queued request says why it waits"
is "$(dom "$TEST_DIR/root1.html" "[r[4] for r in rows('queue-table') if '$RA'[:8] in r[1]]")" "['alpha']" \
    "the queue names the datasets of A's request's files"
grep -q '1 robot (\|3 robots (' "$TEST_DIR/root1.html"; ok $? "the library view shows its robots"
grep -q 'evicted since start' "$TEST_DIR/root1.html"; ok $? "the cache view shows evictions"
# the screenshot at 1280x800 while the recalls run
shot "$(link_root)" "$ART/status-1280x800.png" 1280,800
done1=$(dom "$TEST_DIR/root1.html" "[r for r in rows('requests-table') if '$RA'[:8] in r[0]][0][4].split(' / ')[0]")
# a later load shows more files done (however long the mounts take on a
# loaded machine: bounded, not timed)
for _ in $(seq 20); do
    sleep 3
    browse "$(link_root)" "$TEST_DIR/root2.html"
    done2=$(dom "$TEST_DIR/root2.html" "[r for r in rows('requests-table') if '$RA'[:8] in r[0]][0][4].split(' / ')[0]")
    [ "${done2:-0}" -gt "${done1:-0}" ] 2>/dev/null && break
done
diag "request A: $done1 files done at the first load, $done2 at the second"
ok $([ "$done2" -gt "$done1" ]; echo $?) "the request's progress rose between two loads"

# --- users: A sees A's request only; the detail view of a request
browse "$(link_as "$USER_A")#request=$RA" "$TEST_DIR/a.html"
is "$(dom "$TEST_DIR/a.html" "any('$RA'[:8] in r[0] for r in rows('requests-table'))")" True "user A sees A's request"
is "$(dom "$TEST_DIR/a.html" "'$RB'[:8] in open(sys.argv[1]).read()")" False "user A does not see B's request"
is "$(dom "$TEST_DIR/a.html" "len(rows('detail-files'))")" 8 "A's request detail lists its 8 files"
is "$(dom "$TEST_DIR/a.html" '"(your requests)" in text')" True \
    "the page says it shows the user's own requests"
browse "$(link_as "$USER_B")" "$TEST_DIR/b.html"
is "$(dom "$TEST_DIR/b.html" "('$RB'[:8] in text, '$RA'[:8] in text)")" "(True, False)" \
    "user B sees B's request and not A's"
BUDGET=2000 browse "$(link_as bin)" "$TEST_DIR/c.html"
is "$(dom "$TEST_DIR/c.html" "('$RA'[:8] in text, '$RB'[:8] in text, 'admin' in text)")" "(True, True, True)" \
    "a member of ui.admin_group (bin) sees both requests"

# --- the JSON behind it, with A's cookie: B's request is not A's to read
LINK=$(link_as "$USER_A")
JAR=$TEST_DIR/jar
is "$(curl -s -o /dev/null -w '%{http_code}' -c "$JAR" "$LINK")" 303 "a login link sets the session cookie"
grep -q 'HttpOnly' "$JAR"; ok $? "the cookie is HttpOnly"
curl -sD "$TEST_DIR/h" -o /dev/null "$(link_as "$USER_A")"
grep -qi '^Set-Cookie: stagein_ui=[0-9a-f]*; Path=/ui; HttpOnly; SameSite=Strict' "$TEST_DIR/h"
ok $? "the cookie is HttpOnly and SameSite=Strict, for /ui only"
is "$(curl -s -o "$BODY" -w '%{http_code}' -b "$JAR" "$URL/ui/api/request/$RB")" 403 \
    "A's session cannot read B's request (403)"
is "$(curl -s -o /dev/null -w '%{http_code}' -b "$JAR" "$URL/ui/api/request/$RA")" 200 "but reads A's own"
is "$(curl -s -o /dev/null -w '%{http_code}' "$LINK")" 401 "a replayed login link gets 401"
curl -s "$LINK" | grep -q 'stagein ui'; ok $? "the 401 page says how to log in"
is "$(curl -s -o /dev/null -w '%{http_code}' "$URL/ui")" 401 "no session: the page answers 401"
is "$(curl -s -o /dev/null -w '%{http_code}' "$URL/ui/login?token=$(printf '%064d' 0)")" 401 "a bogus token: 401"
is "$(curl -s -o /dev/null -w '%{http_code}' "$URL/ui/api/status")" 401 "no session: the API answers 401"
is "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/api/v1/ui/login")" 401 "a login link needs MUNGE"
BUDGET=1000 browse "$URL/ui" "$TEST_DIR/none.html"
grep -q 'Not logged in' "$TEST_DIR/none.html"; ok $? "the browser without a session gets the 401 page"
is "$(curl -s -o "$BODY" -w '%{http_code}' -b "$JAR" "$URL/ui/api/history?hours=x")" 400 "history: bad hours is a 400"
grep -q 'hours=x' "$BODY"; ok $? "naming the argument"
curl -s -b "$JAR" "$URL/ui/api/history" > "$TEST_DIR/hist.json"
is "$(json "$TEST_DIR/hist.json" 'len(j["t"]) >= 4 and all(len(v) == len(j["t"]) for v in j["series"].values())')" True \
    "the history as JSON: one value (or null) per sample and series"
# nothing on the page comes from elsewhere: no absolute URL but the SVG namespace
for f in "" /app.js /app.css; do curl -s -b "$JAR" "$URL/ui$f"; done | grep -o 'https\?://[^"'"'"' )]*' | grep -v '^http://www.w3.org/2000/svg$' > "$TEST_DIR/urls"
is "$(wc -l < "$TEST_DIR/urls")" 0 "the page's files name no other host"
curl -sD - -o /dev/null -b "$JAR" "$URL/ui" | grep -qi "^Content-Security-Policy: default-src 'self'"
ok $? "a Content-Security-Policy keeps the browser on stageind"

# --- login CSRF: a link followed from another site's page logs nobody in
LINK=$(link_as "$USER_A")
is "$(curl -s -o "$BODY" -w '%{http_code}' -H 'Sec-Fetch-Site: cross-site' "$LINK")" 403 \
    "a login link followed from another site (Sec-Fetch-Site: cross-site) is refused"
grep -q 'followed from another site' "$BODY"; ok $? "... saying so"
is "$(curl -s -o /dev/null -w '%{http_code}' -H 'Referer: http://evil.example/page' "$LINK")" 403 \
    "a browser without Sec-Fetch-Site: another site's Referer is refused"
is "$(curl -s -o /dev/null -w '%{http_code}' -H 'Sec-Fetch-Site: none' "$LINK")" 303 \
    "the same link, opened by the user (Sec-Fetch-Site: none), still logs in"

# --- a user's sessions are bounded (ui.sessions_per_user = 3): their own oldest go
JAR_B=$TEST_DIR/jar-b
curl -s -c "$JAR_B" -o /dev/null "$(link_as "$USER_B")"
JAR1=$TEST_DIR/jar1
curl -s -c "$JAR1" -o /dev/null "$(link_as "$USER_A")"
is "$(curl -s -o /dev/null -w '%{http_code}' -b "$JAR1" "$URL/ui/api/status")" 200 "A's session works"
for i in 1 2 3; do curl -s -o /dev/null "$(link_as "$USER_A")"; done
is "$(curl -s -o /dev/null -w '%{http_code}' -b "$JAR1" "$URL/ui/api/status")" 401 \
    "after three more logins of A, A's oldest session is gone"
is "$(curl -s -o /dev/null -w '%{http_code}' -b "$JAR_B" "$URL/ui/api/status")" 200 \
    "... and B's session is untouched"

# --- SIGHUP rereads the ui settings
curl -sD "$TEST_DIR/h1" -o /dev/null "$(link_as "$USER_A")"
write_conf "library: { drives = 3; time_scale = 0.3; };
ui: { $UI_CONF session_lifetime = 120; };"
kill -HUP "$(daemon_pid)"
for _ in $(seq 50); do grep -q 'reload: configuration reread' "$LOG" && break; sleep 0.1; done
curl -sD "$TEST_DIR/h2" -o /dev/null "$(link_as "$USER_A")"
is "$(grep -io 'Max-Age=[0-9]*' "$TEST_DIR/h1") $(grep -io 'Max-Age=[0-9]*' "$TEST_DIR/h2")" "Max-Age=28800 Max-Age=120" \
    "after SIGHUP a new session gets the reloaded ui.session_lifetime"
curl -s -c "$JAR" -o /dev/null "$(link_root)"
is "$(curl -s -b "$JAR" "$URL/ui/api/status" | python3 -c 'import json, sys; j = json.load(sys.stdin); print(type(j["recentPushes"]).__name__, type(j["library"]["volumes"]).__name__, "evictedBytes" in j["cache"])')" \
    "list list True" "the status JSON has the recent pushes, queued volumes and evictions"

# --- a narrow window
shot "$(link_as "$USER_A")" "$ART/status-narrow-420.png" 420,900
ok $([ -s "$ART/status-1280x800.png" ] && [ -s "$ART/status-narrow-420.png" ]; echo $?) "screenshots taken ($ART)"
BUDGET=3000 browse "$(link_root)" "$TEST_DIR/narrow.html" 420
is "$(dom "$TEST_DIR/narrow.html" 'len(rows("drives")) == 3 and not errors.strip()')" True \
    "in a narrow window the page shows the same views"

# --- the history survives a restart
wait_done "$RA" 120 >/dev/null
wait_done "$RB" 120 >/dev/null
BUDGET=3000 browse "$(link_root)" "$TEST_DIR/done.html"
is "$(dom "$TEST_DIR/done.html" '[int(n) >= 2 for n, s in svgs if s == "Request completion time"]')" "[True]" \
    "the completion time plot shows the finished requests"
n_before=$(json "$TEST_DIR/hist.json" 'len(j["t"])')
stop
run_ok "stageind restarts" -- start
track_pid "$(daemon_pid)"
curl -s -c "$JAR" -o /dev/null "$(link_root)"
curl -s -b "$JAR" "$URL/ui/api/history" > "$TEST_DIR/hist2.json"
is "$(json "$TEST_DIR/hist2.json" "len(j['t']) > $n_before")" True \
    "the history survived the restart ($n_before samples before it, more after)"
finish
