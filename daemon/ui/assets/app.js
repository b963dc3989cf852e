// stagein status page: polls stageind's /ui/api/* (read only) and draws
// tables and SVG plots. Plain JavaScript, no library, nothing from elsewhere.
'use strict';

const STATUS_EVERY_MS = 2000;
const HISTORY_EVERY_MS = 5000;
let updates = 0;
let detailId = null;

function $(id) { return document.getElementById(id); }

function showError(text) {
  const box = $('errors');
  const line = new Date().toLocaleTimeString() + ' ' + text;
  box.textContent = line;  // the latest only: the page keeps trying
}
window.addEventListener('error', (e) => showError('script error: ' + e.message));

function bytes(n) {
  if (n === null || n === undefined) return '-';
  const units = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let i = 0;
  n = Number(n);
  while (Math.abs(n) >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(n < 10 ? 2 : 1)) + ' ' + units[i];
}

function duration(s) {
  if (s === null || s === undefined || s < 0) return '-';
  s = Math.round(s);
  if (s < 60) return s + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
}

function when(t) {
  if (!t) return '-';
  return new Date(Number(t) * 1000).toLocaleString();
}

function cell(tr, text, cls) {
  const td = document.createElement('td');
  td.textContent = text === null || text === undefined ? '-' : String(text);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function progressCell(tr, done, total, text) {
  const td = cell(tr, '', 'num');
  const bar = document.createElement('span');
  bar.className = 'progress';
  const fill = document.createElement('span');
  const frac = total > 0 ? Math.min(1, done / total) : 0;
  fill.style.width = (100 * frac).toFixed(1) + '%';
  bar.appendChild(fill);
  td.appendChild(bar);
  td.appendChild(document.createTextNode(text));
  td.dataset.done = done;
  td.dataset.total = total;
  return td;
}

function requestLink(tr, id) {
  const td = cell(tr, '');
  const a = document.createElement('a');
  a.href = '#request=' + id;
  a.textContent = String(id).slice(0, 8);
  a.title = id;
  td.appendChild(a);
  td.className = 'request-id';
  td.dataset.request = id;
}

function fill(tbody, rows, draw) {
  const fresh = document.createElement('tbody');
  rows.forEach((r) => { const tr = document.createElement('tr'); draw(tr, r); fresh.appendChild(tr); });
  tbody.replaceWith(fresh);
}

async function getJSON(path) {
  const res = await fetch(path, { credentials: 'same-origin', cache: 'no-store' });
  if (res.status === 401) {
    window.location.reload();  // the server answers with its log-in page
    throw new Error('the session ended');
  }
  const body = await res.json();
  if (!res.ok) throw new Error(path + ': ' + (body.error || res.status));
  return body;
}

function drawStatus(s) {
  $('viewer').textContent = 'uid ' + s.viewer.uid + (s.viewer.admin ? ' (admin: everyone\'s requests)' : ' (your requests)');
  const lib = s.library;
  $('library-summary').textContent = lib.drives.length + ' drives' +
    (lib.robots === undefined ? '' : ', ' + lib.robots + (lib.robots === 1 ? ' robot (' : ' robots (') + lib.robotMovesTotal + ' moves)') + ', ' +
    lib.drives.filter((d) => d.state === 'reading').length + ' reading; ' +
    (lib.readBytesPerSec === undefined ? '-' : bytes(lib.readBytesPerSec) + '/s') + ' now; ' +
    lib.mountsTotal + ' mounts, ' + bytes(lib.bytesReadTotal) + ' read since start' +
    (lib.drivesFailed ? '; ' + lib.drivesFailed + ' failed' : '');
  fill($('drives').tBodies[0], lib.drives, (tr, d) => {
    tr.className = 'drive';
    cell(tr, d.drive);
    cell(tr, d.state, 'state-' + d.state);
    cell(tr, d.volume || '-');
    cell(tr, d.readBytesPerSec === undefined ? '-' : bytes(d.readBytesPerSec) + '/s', 'num drive-rate');
  });
  fill($('volumes').tBodies[0], lib.volumes || [], (tr, v) => {
    tr.className = 'volume';
    cell(tr, v.volume);
    cell(tr, v.state, 'state-' + v.state);
    cell(tr, v.requests, 'num');
    cell(tr, v.files, 'num');
    cell(tr, bytes(v.bytes), 'num');
    cell(tr, v.recalling, 'num');
  });
  $('queue-length').textContent = s.queueLength + ' active in all' +
    (s.viewer.admin ? '' : ', ' + s.queue.length + ' yours');
  fill($('queue-table').tBodies[0], s.queue, (tr, q) => {
    tr.className = 'queued';
    cell(tr, q.position, 'num');
    requestLink(tr, q.request);
    cell(tr, q.uid);
    cell(tr, q.job);
    cell(tr, q.datasets || '-', 'datasets');
    cell(tr, q.state, 'state-' + q.state);
    cell(tr, q.files_done + ' / ' + q.files, 'num');
    progressCell(tr, q.bytes_done, q.bytes, bytes(q.bytes_done) + ' / ' + bytes(q.bytes));
    cell(tr, duration(q.eta), 'num');
    cell(tr, q.waitReason, 'wait');
  });
  fill($('requests-table').tBodies[0], s.requests, (tr, r) => {
    tr.className = 'request';
    requestLink(tr, r.request);
    cell(tr, r.uid);
    cell(tr, r.job);
    cell(tr, r.state, 'state-' + r.state);
    cell(tr, r.files_done + ' / ' + r.files + (r.files_failed ? ' (' + r.files_failed + ' failed)' : ''), 'num');
    progressCell(tr, r.bytes_done, r.bytes, bytes(r.bytes_done) + ' / ' + bytes(r.bytes));
    cell(tr, when(r.created));
  });
  const c = s.cache;
  const cap = c.capacity || 1;
  $('cache-used').style.width = (100 * Math.min(1, c.bytes / cap)).toFixed(1) + '%';
  $('cache-pinned').style.width = (100 * Math.min(1, c.pinnedBytes / cap)).toFixed(1) + '%';
  $('cache-summary').textContent = bytes(c.bytes) + ' of ' + (c.capacity ? bytes(c.capacity) : '-') +
    ' in ' + c.objects + ' objects; ' + bytes(c.pinnedBytes) + ' pinned (' + c.pinnedObjects +
    ' objects); ' + bytes(c.queuedBytes) + ' queued for recall; evicts above ' +
    (100 * c.highWatermark).toFixed(0) + '% down to ' + (100 * c.lowWatermark).toFixed(0) + '%' +
    (c.evictedObjects === undefined ? '' : '; ' + c.evictedObjects + ' objects (' +
      bytes(c.evictedBytes) + ') evicted since start');
  $('cache-high').style.left = (100 * c.highWatermark).toFixed(1) + '%';
  $('cache-low').style.left = (100 * c.lowWatermark).toFixed(1) + '%';
  drawCompletion(s.requests);
  fill($('pushes-table').tBodies[0], s.recentPushes || [], (tr, r) => {
    tr.className = 'push';
    cell(tr, String(r.push).slice(0, 8));
    cell(tr, r.uid);
    cell(tr, r.dataset);
    cell(tr, r.files, 'num');
    cell(tr, r.durable, 'num');
    cell(tr, r.failed, 'num');
    cell(tr, bytes(r.bytes), 'num');
    cell(tr, when(r.created));
  });
  const p = s.pushes;
  $('pushes').hidden = !p;
  if (p) {
    $('pushes-summary').textContent = p.waitingFiles + ' files (' + bytes(p.waitingBytes) +
      ') waiting to be archived, ' + p.archivingFiles + ' being written to tape, ' +
      p.durableFiles + ' on tape, ' + p.failedFiles + ' failed; ' + p.archiveFilesWritten +
      ' archive files written since start';
  }
  updates++;
  const u = $('updated');
  u.dataset.updates = updates;
  u.textContent = 'updated ' + new Date(s.now * 1000).toLocaleTimeString();
}

async function drawDetail() {
  const m = /^#request=([0-9a-f-]+)$/.exec(window.location.hash);
  detailId = m ? m[1] : null;
  $('detail').hidden = !detailId;
  if (!detailId) return;
  const r = await getJSON('/ui/api/request/' + detailId);
  $('detail-id').textContent = r.id;
  $('detail-summary').textContent = r.state + ', uid ' + r.uid + ', job ' + (r.job || '-') +
    ', ' + r.filesCompleted + ' of ' + r.filesTotal + ' files, ' + bytes(r.bytesDone) + ' of ' +
    bytes(r.bytesTotal) + (r.queuePosition ? ', queue position ' + r.queuePosition : '') +
    (r.eta !== null && r.eta !== undefined ? ', ETA ' + duration(r.eta) : '') +
    (r.error ? ', error: ' + r.error : '') + (r.endReason ? ' (' + r.endReason + ')' : '');
  fill($('detail-files').tBodies[0], r.files, (tr, f) => {
    cell(tr, f.path);
    cell(tr, f.state, 'state-' + f.state);
    progressCell(tr, f.bytesDone, f.size, bytes(f.bytesDone) + ' / ' + bytes(f.size));
    cell(tr, f.error || '');
  });
}

const PLOTS = [
  ['read_bytes_per_s', 'Tape reads', (v) => bytes(v) + '/s'],
  ['drives_busy', 'Drives busy', String],
  ['mounts_per_min', 'Mounts per minute', (v) => v.toFixed(1)],
  ['queue_files', 'Queued files', String],
  ['queue_bytes', 'Queued bytes', bytes],
  ['completed_per_min', 'Requests completed per minute', (v) => v.toFixed(1)],
  ['cache_bytes', 'Cache usage (bytes)', bytes],
  ['cache_pinned_bytes', 'Pinned in the cache (bytes)', bytes],
  ['evicted_bytes_per_min', 'Evicted per minute', bytes],
];
const SVG = 'http://www.w3.org/2000/svg';

function plot(t, values, label, format) {
  const fig = document.createElement('figure');
  const cap = document.createElement('figcaption');
  fig.appendChild(cap);
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'plot');
  svg.setAttribute('viewBox', '0 0 300 140');
  svg.setAttribute('preserveAspectRatio', 'none');
  const pts = [];
  for (let i = 0; i < t.length; i++) if (values[i] !== null) pts.push([t[i], values[i]]);
  const last = pts.length ? pts[pts.length - 1][1] : null;
  cap.textContent = label + (last === null ? '' : ': ' + format(last));
  if (pts.length) {
    const t0 = pts[0][0], t1 = Math.max(pts[pts.length - 1][0], t0 + 1);
    const vmax = Math.max(...pts.map((p) => p[1]), 1e-9);
    const line = document.createElementNS(SVG, 'polyline');
    line.setAttribute('points', pts.map((p) =>
      (10 + 280 * (p[0] - t0) / (t1 - t0)).toFixed(1) + ',' + (130 - 110 * p[1] / vmax).toFixed(1)).join(' '));
    svg.appendChild(line);
    const top = document.createElementNS(SVG, 'text');
    top.setAttribute('x', 12);
    top.setAttribute('y', 14);
    top.textContent = 'max ' + format(vmax);
    svg.appendChild(top);
  }
  svg.dataset.points = pts.length;
  svg.dataset.series = label;
  fig.appendChild(svg);
  return fig;
}

// how long the recent requests took, by when they finished: redrawn with
// every status, so it never waits for the slower history timer
function drawCompletion(requests) {
  const done = requests.filter((r) => r.finished && r.created)
    .sort((a, b) => a.finished - b.finished);
  const fig = plot(done.map((r) => r.finished), done.map((r) => r.finished - r.created),
    'Request completion time', duration);
  fig.id = 'completion-plot';
  $('completion-plot').replaceWith(fig);
}

async function drawHistory() {
  const h = await getJSON('/ui/api/history');
  const grid = document.createElement('div');
  grid.id = 'plot-grid';
  PLOTS.forEach(([name, label, format]) => {
    const values = h.series[name] || [];
    grid.appendChild(plot(h.t, values, label, format));
  });
  // each drive's read rate, where the backend counts by drive
  Object.keys(h.series).filter((k) => k.startsWith('drive_read_bytes_per_s.')).sort().forEach((k) => {
    grid.appendChild(plot(h.t, h.series[k], 'Drive ' + k.split('.')[1] + ' reads', (v) => bytes(v) + '/s'));
  });
  $('plot-grid').replaceWith(grid);
  $('history-span').textContent = h.t.length ? h.t.length + ' samples since ' + when(h.t[0]) +
    ', every ' + h.interval + ' s' : 'no samples yet';
}

function every(ms, fn) {
  const run = () => fn().then(() => { $('errors').textContent = ''; })
    .catch((e) => showError(e.message)).finally(() => setTimeout(run, ms));
  run();
}

every(STATUS_EVERY_MS, async () => { drawStatus(await getJSON('/ui/api/status')); await drawDetail(); });
every(HISTORY_EVERY_MS, drawHistory);
window.addEventListener('hashchange', () => drawDetail().catch((e) => showError(e.message)));
$('detail-close').addEventListener('click', (e) => { e.preventDefault(); window.location.hash = ''; });
