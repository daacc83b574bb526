// The wiretape console: the store's status, its timeline (drag to zoom),
// a filter whose count updates as one types, a download of the window,
// and the files. Everything from the store or the user is put into the
// page as text (textContent) or as SVG attributes of numbers, never as
// markup. No inline script: the page's policy is default-src 'self'.
'use strict';

const SVGNS = 'http://www.w3.org/2000/svg';
const NS_PER_MS = 1000000n;
const NS_PER_S = 1000000000n;
const $ = (id) => document.getElementById(id);

// Stamps are u64 ns: past 2^53, so read from the JSON's own digits;
// a session_id (63 bits) stays its digits, as text.
function parseJson(text) {
  return JSON.parse(text, function (key, value, ctx) {
    if (typeof value === 'number' && key === 'session_id') {
      return ctx && typeof ctx.source === 'string' ? ctx.source : String(value);
    }
    if (typeof value === 'number' && key.endsWith('_ns')) {
      if (ctx && typeof ctx.source === 'string' && /^\d+$/.test(ctx.source)) {
        return BigInt(ctx.source);
      }
      return BigInt(Math.round(value));
    }
    return value;
  });
}

async function getJson(url, signal) {
  const r = await fetch(url, { signal, credentials: 'same-origin', cache: 'no-store' });
  const text = await r.text();
  let body;
  try {
    body = parseJson(text);
  } catch (e) {
    body = { error: text };
  }
  return { ok: r.ok, status: r.status, body };
}

// API time parameters: Unix seconds with nine decimals.
function timeParam(ns) {
  const s = ns / NS_PER_S;
  const f = (ns % NS_PER_S).toString().padStart(9, '0');
  return s.toString() + '.' + f;
}

function iso(ns, digits) {
  const ms = Number(ns / NS_PER_MS);
  const base = new Date(ms).toISOString(); // YYYY-MM-DDTHH:MM:SS.mmmZ
  const frac = (ns % NS_PER_S).toString().padStart(9, '0');
  return base.slice(0, 19) + (digits > 0 ? '.' + frac.slice(0, digits) : '');
}

function thousands(n) {
  return BigInt(n).toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

function human(n) {
  let v = Number(n);
  const units = ['B', 'KB', 'MB', 'GB', 'TB', 'PB'];
  let u = 0;
  while (v >= 1000 && u < units.length - 1) { v /= 1000; u += 1; }
  return (u === 0 ? v.toFixed(0) : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)) + ' ' + units[u];
}

function si(v) {
  const a = Math.abs(v);
  const [d, u] = a >= 1e12 ? [1e12, 'T'] : a >= 1e9 ? [1e9, 'G'] : a >= 1e6 ? [1e6, 'M'] : a >= 1e3 ? [1e3, 'k'] : [1, ''];
  const x = v / d;
  return (Number.isInteger(x) ? x.toFixed(0) : x.toFixed(x >= 10 ? 1 : 2)) + u;
}

const state = {
  status: null,
  from: null, // BigInt ns or null (open)
  to: null,
  filterOk: false,
  count: null, // AbortController of the count in flight
  timer: null,
  timeline: null,
};

function windowParams(params) {
  if (state.from !== null) params.set('from', timeParam(state.from));
  if (state.to !== null) params.set('to', timeParam(state.to));
  return params;
}

function filterText() {
  return $('filter').value.trim();
}

async function loadStatus() {
  const r = await getJson('/v1/status');
  if (!r.ok) return;
  const s = r.body;
  state.status = s;
  $('status-frames').textContent = thousands(s.frames);
  $('status-bytes').textContent = human(s.bytes);
  $('status-bytes').title = thousands(s.bytes) + ' bytes';
  $('status-files').textContent = thousands(s.files);
  $('status-first').textContent = s.first_time || '–';
  $('status-last').textContent = s.last_time || '–';
  $('status-free').textContent = s.free_bytes == null ? '–' : human(s.free_bytes);
  $('node').textContent = s.node ? 'node ' + s.node : '';
  const rec = $('recording');
  rec.textContent = s.recording ? 'recording' : 'not recording';
  rec.classList.toggle('on', !!s.recording);
}

async function loadFiles() {
  const r = await getJson('/v1/files');
  if (!r.ok) return;
  const body = $('files').tBodies[0];
  body.replaceChildren();
  for (const f of r.body.files) {
    const tr = document.createElement('tr');
    const cells = [
      [f.name, 'name'],
      [thousands(f.frames), 'n'],
      [thousands(f.bytes), 'n'],
      [f.first_time || '–', ''],
      [f.last_time || '–', ''],
    ];
    for (const [text, cls] of cells) {
      const td = document.createElement('td');
      td.textContent = text;
      if (cls) td.className = cls;
      tr.appendChild(td);
    }
    if (f.being_written) tr.title = 'being written';
    body.appendChild(tr);
  }
}

function svgEl(name, attrs, text) {
  const e = document.createElementNS(SVGNS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

const ROUND = [1n, 2n, 5n, 10n, 20n, 50n, 100n, 200n, 500n, 1000n, 2000n, 5000n, 10000n, 20000n, 50000n,
  100000n, 200000n, 500000n, 1000000n, 2000000n, 5000000n, 10000000n, 20000000n, 50000000n, 100000000n,
  200000000n, 500000000n, 1000000000n, 2000000000n, 5000000000n, 10000000000n, 15000000000n, 30000000000n,
  60000000000n, 120000000000n, 300000000000n, 600000000000n, 900000000000n, 1800000000000n, 3600000000000n,
  7200000000000n, 10800000000000n, 21600000000000n, 43200000000000n, 86400000000000n, 172800000000000n,
  604800000000000n];

function tickStep(span, max) {
  for (const w of ROUND) if (span / w <= BigInt(max)) return w;
  return span / BigInt(max) + 1n;
}

function tickLabel(ns, step) {
  if (step >= 86400n * NS_PER_S) return iso(ns, 0).slice(0, 10);
  if (step >= 60n * NS_PER_S) return iso(ns, 0).slice(11, 16);
  if (step >= NS_PER_S) return iso(ns, 0).slice(11, 19);
  if (step >= NS_PER_MS) return iso(ns, 3).slice(11);
  if (step >= 1000n) return iso(ns, 6).slice(11);
  return iso(ns, 9).slice(11);
}

const CHART = { w: 1000, h: 260, left: 60, right: 12, top: 12, bottom: 28 };

function drawTimeline(t) {
  const svg = $('timeline');
  svg.replaceChildren();
  const { w, h, left, right, top, bottom } = CHART;
  const pw = w - left - right;
  const ph = h - top - bottom;
  svg.appendChild(svgEl('rect', { x: 0, y: 0, width: w, height: h, fill: '#ffffff' }));
  const from = t.from_ns;
  const to = t.to_ns;
  const span = to > from ? to - from : 1n;
  const xOf = (ns) => {
    let d = ns < from ? 0n : ns - from;
    if (d > span) d = span;
    return left + (Number(d) / Number(span)) * pw;
  };
  const perS = 1e9 / Number(t.bin_ns);
  let peak = 0;
  for (const b of t.bins) {
    peak = Math.max(peak, b.frames * perS, (b.filter_frames_max || 0) * perS);
  }
  let ymax = 1;
  if (peak > 0) {
    const p = Math.pow(10, Math.floor(Math.log10(peak)));
    ymax = [1, 2, 5, 10].map((m) => m * p).find((v) => v >= peak * 0.999999);
  }
  const yOf = (v) => top + ph - (v / ymax) * ph;
  for (let k = 0; k <= 4; k++) {
    const v = (ymax * k) / 4;
    const y = yOf(v);
    svg.appendChild(svgEl('line', { x1: left, y1: y, x2: left + pw, y2: y, stroke: '#e3e3e3' }));
    svg.appendChild(svgEl('text', { x: left - 6, y: y + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#444' }, si(v)));
  }
  svg.appendChild(svgEl('text', { x: 12, y: top + ph / 2, 'font-size': 11, fill: '#444', 'text-anchor': 'middle',
    transform: 'rotate(-90 12 ' + (top + ph / 2) + ')' }, 'frames/s'));
  const bars = svgEl('g', { id: 'bars', 'shape-rendering': 'crispEdges' });
  for (const b of t.bins) {
    if (!b.frames) continue;
    const x0 = xOf(b.start_ns);
    const x1 = xOf(b.end_ns);
    const y = yOf(b.frames * perS);
    bars.appendChild(svgEl('rect', { x: x0, y: y, width: Math.max(x1 - x0, 0.6), height: Math.max(top + ph - y, 0.5), fill: '#3572b0' }));
  }
  svg.appendChild(bars);
  if (t.filter) {
    let d = '';
    t.bins.forEach((b, i) => {
      const y = yOf((b.filter_frames_max || 0) * perS);
      d += (i === 0 ? 'M' : 'L') + xOf(b.start_ns).toFixed(2) + ' ' + y.toFixed(2) + ' L' + xOf(b.end_ns).toFixed(2) + ' ' + y.toFixed(2) + ' ';
    });
    svg.appendChild(svgEl('path', { id: 'bound', d: d.trim(), fill: 'none', stroke: '#d9480f', 'stroke-width': 1.5 }));
  }
  svg.appendChild(svgEl('line', { x1: left, y1: top + ph, x2: left + pw, y2: top + ph, stroke: '#333' }));
  svg.appendChild(svgEl('line', { x1: left, y1: top, x2: left, y2: top + ph, stroke: '#333' }));
  const step = tickStep(span, Math.max(1, Math.floor(pw / 110)));
  for (let tk = ((from + step - 1n) / step) * step; tk < to; tk += step) {
    const x = xOf(tk);
    svg.appendChild(svgEl('line', { x1: x, y1: top + ph, x2: x, y2: top + ph + 4, stroke: '#333' }));
    const anchor = x > w - 50 ? 'end' : 'middle';
    svg.appendChild(svgEl('text', { x: x, y: top + ph + 16, 'text-anchor': anchor, 'font-size': 11, fill: '#444' }, tickLabel(tk, step)));
  }
  svg.appendChild(svgEl('rect', { id: 'selection', x: 0, y: top, width: 0, height: ph, fill: 'rgba(53,114,176,0.18)', stroke: '#3572b0', visibility: 'hidden' }));
  const tot = t.totals;
  let text = thousands(tot.frames) + ' frames in the window, ' + thousands(tot.bytes) + ' bytes of records (bins of ' +
    (Number(t.bin_ns) / 1e6).toString() + ' ms)';
  if (t.filter) text += '; the filter: at most ' + thousands(tot.filter_frames_max) + ' frames (flow index bound)';
  $('timeline-total').textContent = text;
  $('window-text').textContent = 'window ' + iso(from, 9) + 'Z to ' + iso(to, 9) + 'Z';
}

// The picture while its data is on its way: the last one veiled, or an
// empty frame, with a word; `data-loading` says so to tests.
function showLoading(what) {
  const svg = $('timeline');
  svg.setAttribute('data-loading', '1');
  for (const id of ['timeline-veil', 'timeline-loading']) {
    const old = document.getElementById(id);
    if (old) old.remove();
  }
  if (!state.timeline) {
    svg.replaceChildren(svgEl('rect', { x: 0, y: 0, width: CHART.w, height: CHART.h, fill: '#ffffff' }));
  }
  svg.appendChild(svgEl('rect', { id: 'timeline-veil', x: 0, y: 0, width: CHART.w, height: CHART.h, fill: 'rgba(255,255,255,0.6)' }));
  svg.appendChild(svgEl('text', { id: 'timeline-loading', x: CHART.w / 2, y: CHART.h / 2, 'text-anchor': 'middle',
    'font-size': 15, fill: '#555' }, what));
}

function doneLoading() {
  const svg = $('timeline');
  svg.removeAttribute('data-loading');
  for (const id of ['timeline-veil', 'timeline-loading']) {
    const old = document.getElementById(id);
    if (old) old.remove();
  }
}

async function loadTimeline() {
  const p = windowParams(new URLSearchParams());
  p.set('width', String(CHART.w));
  const f = filterText();
  if (f && state.filterOk) p.set('filter_index', f);
  showLoading('loading the timeline…');
  let r;
  try {
    r = await getJson('/v1/timeline?' + p.toString());
  } catch (e) {
    r = { ok: false, status: 0, body: { error: 'the timeline did not come: ' + e } };
  }
  if (!r.ok) {
    doneLoading();
    const msg = r.body.error || ('timeline: HTTP ' + r.status);
    $('timeline-total').textContent = msg;
    if (!state.timeline) {
      $('timeline').appendChild(svgEl('text', { id: 'timeline-error', x: CHART.w / 2, y: CHART.h / 2, 'text-anchor': 'middle',
        'font-size': 13, fill: '#c0392b' }, msg));
    }
    return;
  }
  state.timeline = r.body;
  drawTimeline(r.body);
  doneLoading();
}

function updateDownload() {
  const p = windowParams(new URLSearchParams());
  const f = filterText();
  if (f) p.set('filter', f);
  const fmt = $('format').value;
  p.set('format', fmt);
  const a = $('download');
  a.href = '/v1/extract?' + p.toString();
  a.setAttribute('download', 'wiretape.' + fmt);
}

async function updateCount() {
  if (state.count) state.count.abort();
  const ctl = new AbortController();
  state.count = ctl;
  $('count').textContent = 'counting…';
  const p = windowParams(new URLSearchParams());
  const f = filterText();
  if (f) p.set('filter', f);
  let r;
  try {
    r = await getJson('/v1/count?' + p.toString(), ctl.signal);
  } catch (e) {
    return; // aborted by a newer keystroke
  }
  if (state.count !== ctl) return;
  const box = $('filter');
  if (r.ok) {
    state.filterOk = true;
    box.classList.remove('bad');
    $('filter-error').textContent = '';
    $('count').textContent = thousands(r.body.frames) + ' frames, ' + thousands(r.body.bytes) + ' bytes of frames';
  } else {
    state.filterOk = false;
    box.classList.add('bad');
    $('count').textContent = '';
    $('filter-error').textContent = r.body.error || ('HTTP ' + r.status);
  }
  return r.ok;
}

// A name as shown: stored escaped already; anything below space or in
// C1 escaped again all the same (never a raw control character).
function shown(s) {
  return String(s).replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => '\\x' + c.charCodeAt(0).toString(16).padStart(2, '0'));
}

const PROTOS = { 1: 'icmp', 6: 'tcp', 17: 'udp', 58: 'icmp6', 132: 'sctp' };
const TOP_SESSIONS = 20;

function endpoint(ip, port) {
  const a = ip.includes(':') ? '[' + ip + ']' : ip;
  return port ? a + ':' + port : a;
}

// The window's sessions (/v1/sessions, one row per session and file)
// summed per session_id, the TOP_SESSIONS of most bytes shown, each with
// a link to its packets (/v1/extract?session_where=session_id = ID).
async function loadSessions() {
  const p = windowParams(new URLSearchParams());
  let r;
  try {
    r = await fetch('/v1/sessions?' + p.toString(), { credentials: 'same-origin', cache: 'no-store' });
  } catch (e) {
    $('sessions-total').textContent = 'the sessions did not come: ' + e;
    return;
  }
  const text = await r.text();
  const body = $('sessions').tBodies[0];
  body.replaceChildren();
  if (!r.ok) {
    let msg = 'sessions: HTTP ' + r.status;
    try { msg = parseJson(text).error || msg; } catch (e) { /* not JSON */ }
    $('sessions-total').textContent = shown(msg);
    return;
  }
  const by = new Map();
  for (const line of text.split('\n')) {
    if (!line) continue;
    const row = parseJson(line);
    const s = by.get(row.session_id);
    if (!s) {
      by.set(row.session_id, Object.assign({}, row));
      continue;
    }
    for (const k of ['client_packets', 'client_bytes', 'server_packets', 'server_bytes']) s[k] += row[k];
    if (row.first_ns < s.first_ns) { s.first_ns = row.first_ns; s.first_time = row.first_time; }
    if (row.last_ns > s.last_ns) s.last_ns = row.last_ns;
    for (const k of NAME_KEYS) if (s[k] == null && row[k] != null) s[k] = row[k];
  }
  const all = Array.from(by.values());
  const bytes = (s) => s.client_bytes + s.server_bytes;
  all.sort((a, b) => bytes(b) - bytes(a) || (a.first_ns < b.first_ns ? -1 : a.first_ns > b.first_ns ? 1 : 0));
  const top = all.slice(0, TOP_SESSIONS);
  let total = thousands(all.length) + ' sessions in the window';
  if (all.length > top.length) total += ', the ' + top.length + ' of most bytes';
  const inc = Number(r.headers.get('wiretape-tables-incomplete') || 0);
  const without = Number(r.headers.get('wiretape-files-without-table') || 0);
  if (inc) total += '; ' + inc + ' tables incomplete (frames skipped while recording)';
  if (without) total += '; ' + without + ' files without a session table';
  $('sessions-total').textContent = total;
  const fmt = $('format').value;
  for (const s of top) {
    const tr = document.createElement('tr');
    tr.dataset.session = s.session_id;
    const cells = [
      [iso(s.first_ns, 6).replace('T', ' '), 'ep'],
      [PROTOS[s.proto] || String(s.proto), ''],
      [endpoint(s.client_ip, s.client_port) + ' → ' + endpoint(s.server_ip, s.server_port), 'ep'],
      [thousands(s.client_packets + s.server_packets), 'n'],
      [thousands(bytes(s)), 'n'],
      [namesOf(s), 'names'],
    ];
    for (const [t, cls] of cells) {
      const td = document.createElement('td');
      td.textContent = t;
      if (cls) td.className = cls;
      tr.appendChild(td);
    }
    const q = windowParams(new URLSearchParams());
    q.set('session_where', 'session_id = ' + s.session_id);
    q.set('format', fmt);
    const a = document.createElement('a');
    a.className = 'packets';
    a.href = '/v1/extract?' + q.toString();
    a.setAttribute('download', 'session-' + s.session_id + '.' + fmt);
    a.textContent = 'packets';
    const td = document.createElement('td');
    td.appendChild(a);
    tr.appendChild(td);
    body.appendChild(tr);
  }
}

const NAME_KEYS = ['tls_sni', 'quic_sni', 'http_host', 'http_method', 'http_path', 'http_user_agent',
  'dns_query', 'dns_type', 'dns_answers', 'tls_alpn', 'ja4'];

function namesOf(s) {
  const v = [];
  const put = (k, x) => { if (x != null) v.push(k + '=' + shown(Array.isArray(x) ? x.join(',') : x)); };
  put('sni', s.tls_sni);
  put('quic_sni', s.quic_sni);
  put('host', s.http_host);
  if (s.http_method != null && s.http_path != null) v.push(shown(s.http_method + ' ' + s.http_path));
  put('ua', s.http_user_agent);
  put('dns', s.dns_query);
  put('answers', s.dns_answers);
  put('alpn', s.tls_alpn);
  put('ja4', s.ja4);
  return v.join(' ');
}

async function refresh() {
  showLoading('loading the timeline…');
  updateDownload();
  await updateCount();
  await loadTimeline();
  await loadSessions();
}

function setWindow(from, to) {
  state.from = from;
  state.to = to;
  refresh();
}

function lastFrame() {
  const s = state.status;
  return s && s.last_ns != null ? s.last_ns : null;
}

function setupButtons() {
  $('btn-all').addEventListener('click', () => setWindow(null, null));
  for (const [id, secs] of [['btn-5m', 300n], ['btn-1h', 3600n]]) {
    $(id).addEventListener('click', () => {
      const last = lastFrame();
      if (last === null) return;
      const to = last + 1n;
      const from = to > secs * NS_PER_S ? to - secs * NS_PER_S : 0n;
      setWindow(from, to);
    });
  }
  $('format').addEventListener('change', () => { updateDownload(); loadSessions(); });
  $('filter').addEventListener('input', () => {
    updateDownload();
    clearTimeout(state.timer);
    state.timer = setTimeout(async () => {
      const wasOk = state.filterOk;
      const ok = await updateCount();
      if (ok || wasOk) loadTimeline();
    }, 250);
  });
}

function setupDrag() {
  const svg = $('timeline');
  let x0 = null;
  const xAt = (ev) => {
    const r = svg.getBoundingClientRect();
    const x = ((ev.clientX - r.left) / r.width) * CHART.w;
    return Math.min(Math.max(x, CHART.left), CHART.w - CHART.right);
  };
  svg.addEventListener('mousedown', (ev) => {
    x0 = xAt(ev);
    ev.preventDefault();
  });
  svg.addEventListener('mousemove', (ev) => {
    if (x0 === null) return;
    const sel = $('selection');
    if (!sel) return;
    const x1 = xAt(ev);
    sel.setAttribute('x', String(Math.min(x0, x1)));
    sel.setAttribute('width', String(Math.abs(x1 - x0)));
    sel.setAttribute('visibility', 'visible');
  });
  window.addEventListener('mouseup', (ev) => {
    if (x0 === null) return;
    const x1 = xAt(ev);
    const a = Math.min(x0, x1);
    const b = Math.max(x0, x1);
    x0 = null;
    const t = state.timeline;
    if (!t || b - a < 3) {
      const sel = $('selection');
      if (sel) sel.setAttribute('visibility', 'hidden');
      return;
    }
    const pw = CHART.w - CHART.left - CHART.right;
    const span = Number(t.to_ns - t.from_ns);
    const at = (x) => t.from_ns + BigInt(Math.round(((x - CHART.left) / pw) * span));
    const from = at(a);
    let to = at(b);
    if (to <= from) to = from + 1n;
    setWindow(from, to);
  });
}

async function main() {
  const q = new URLSearchParams(window.location.search);
  const f = q.get('filter');
  if (f !== null) $('filter').value = f;
  setupButtons();
  setupDrag();
  await loadStatus();
  await refresh();
  await loadFiles();
  document.body.setAttribute('data-ready', '1');
}

main();
