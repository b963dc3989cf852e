#!/bin/bash
# The Grafana dashboard (doc/grafana/stagein-dashboard.json) against a real
# stageind's GET /metrics: it is valid dashboard JSON, every panel queries
# something, every stagein_* metric a query names is in /metrics, and every
# label a legend or a "by (...)" names is a label of that metric there.
. "${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}/tests/lib.sh"
. "$top_srcdir/tests/recall-lib.sh"

use_state A
write_conf "library: { drives = 2; };"
"$STAGEIN" catalog init >/dev/null
run_ok "stageind starts" -- start
track_pid "$(daemon_pid)"
curl -s "http://127.0.0.1:$PORT/metrics" > "$TEST_DIR/metrics"
ok $([ -s "$TEST_DIR/metrics" ]; echo $?) "GET /metrics answers"

python3 - "$top_srcdir/doc/grafana/stagein-dashboard.json" "$TEST_DIR/metrics" <<'PY'
import json, re, sys
n = 0
failed = 0
def ok(cond, text):
    global n, failed
    n += 1
    failed += not cond
    print(('ok' if cond else 'not ok') + ' %d - %s' % (n + 2, text))
dash = json.load(open(sys.argv[1]))
ok(isinstance(dash.get('panels'), list) and dash.get('title') and dash.get('uid'),
   'the dashboard parses, with a title, a uid and panels')
labels = {}
for line in open(sys.argv[2]):
    m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? ', line)
    if m and not line.startswith('#'):
        labels.setdefault(m.group(1), set()).update(re.findall(r'([a-zA-Z_]+)="', m.group(3) or ''))
panels = [p for p in dash['panels'] if p.get('type') != 'row']
ok(all(p.get('targets') and all(t.get('expr') for t in p['targets']) for p in panels),
   'each of the %d panels has queries' % len(panels))
exprs = [(p['title'], t['expr'], t.get('legendFormat', '')) for p in panels for t in p['targets']]
exprs += [('variable ' + v['name'], v['query'], '') for v in dash['templating']['list'] if v['type'] == 'query']
names, missing, bad_labels = set(), [], []
for title, expr, legend in exprs:
    used = set(re.findall(r'\bstagein_[a-z0-9_]+', expr))
    names |= used
    missing += ['%s (%s)' % (m, title) for m in used if m not in labels]
    wanted = set(re.findall(r'\{\{(\w+)\}\}', legend))
    for by in re.findall(r'by \(([^)]*)\)', expr):
        wanted |= {w.strip() for w in by.split(',')}
    for m in used:
        bad_labels += ['%s{%s} (%s)' % (m, w, title) for w in wanted if m in labels and w not in labels[m]]
ok(len(names) >= 20, 'the queries name %d metrics' % len(names))
ok(not missing, 'every metric queried is in /metrics' + (': missing ' + ', '.join(sorted(missing)) if missing else ''))
ok(not bad_labels, 'every label used is a label of its metric' + (': not so for ' + ', '.join(bad_labels) if bad_labels else ''))
for word in ('drive', 'tape_bytes_read', 'queued', 'cache', 'failure'):
    ok(any(word in x for x in names), 'the dashboard covers %s' % word)
print('1..%d' % (n + 2))
sys.exit(1 if failed else 0)
PY
