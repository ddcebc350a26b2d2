// util.js — the data, lookups, number formats and the one way this page makes
// elements: el(), which sets text with textContent and never parses markup.

const DATA = JSON.parse(document.getElementById('coldstart-data').textContent);
const A = DATA.analysis;
const NS_PER_US = 1000;

// Makes an element. props: {class, text, title, attrs: {name: value}, on: {event: fn}};
// children: nodes or strings (added as text).
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  if (props) {
    if (props.class) node.className = props.class;
    if (props.text !== undefined && props.text !== null) node.textContent = String(props.text);
    if (props.title) node.title = String(props.title);
    for (const [k, v] of Object.entries(props.attrs || {})) {
      if (v !== undefined && v !== null && v !== false) node.setAttribute(k, String(v));
    }
    for (const [k, fn] of Object.entries(props.on || {})) node.addEventListener(k, fn);
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    node.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

// --- numbers for people (the same units as the text report) ---

function fmtCount(n) {
  if (n === null || n === undefined) return '–';
  return Math.round(n).toLocaleString('en-US');
}

function fmtSecs(ns) {
  if (ns === null || ns === undefined) return '–';
  const s = (ns / 1e9).toFixed(3);
  return (s === '-0.000' ? '0.000' : s) + ' s';
}

// A finding's gain in the words every report uses: '−0.378 s', or 'no gain estimated'.
function gainWords(f) {
  return f.gain.ns > 0 ? '−' + fmtSecs(f.gain.ns) : 'no gain estimated';
}

function fmtDur(ns) {
  if (ns === null || ns === undefined) return '–';
  const abs = Math.abs(ns);
  if (abs < 1e6) return (ns / 1e3).toFixed(0) + ' µs';
  if (abs < 1e9) return (ns / 1e6).toFixed(1) + ' ms';
  return (ns / 1e9).toFixed(3) + ' s';
}

function fmtBytes(n) {
  if (n === null || n === undefined) return '–';
  if (n < 1024) return n + ' B';
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return v.toFixed(1) + ' ' + units[u];
}

function fmtPct(part, whole) {
  return whole > 0 ? (100 * part / whole).toFixed(1) + ' %' : '–';
}

// --- lookups ---

const FILES = new Map(A.files.map(f => [f.id, f]));
const PROCS = new Map(A.processes.map(p => [p.pid, p]));
const THREADS = new Map(A.threads.map(t => [t.tid, t]));
const PAGE = A.trace.page_size || 4096;

function fileName(id) {
  const f = FILES.get(id);
  return f ? f.name : '<unknown file ' + id + '>';
}

function baseName(path) {
  const i = path.lastIndexOf('/');
  return i >= 0 && i < path.length - 1 ? path.slice(i + 1) : path;
}

function comm(pid) {
  const p = PROCS.get(pid);
  return p && p.comm ? p.comm : String(pid);
}

function who(pid) {
  return comm(pid) + '/' + pid;
}

function threadName(tid) {
  const t = THREADS.get(tid);
  const c = t && t.comm ? t.comm : comm(t ? t.pid : tid);
  return c + '/' + tid;
}

// Process end as drawn: its exit, else the end of the trace.
function traceEnd() {
  return Math.max(A.trace.duration_ns, A.overview.end_ns);
}

// Decoded coalesced reads (times in ns), as parallel arrays.
const READS = (() => {
  const r = DATA.reads;
  const n = r.t_us.length;
  const out = { n, every: r.every, t: new Float64Array(n), end: new Float64Array(n), pid: r.pid, tid: r.tid,
    file: r.file, first: r.first_page, pages: r.pages, seek: r.seek };
  for (let i = 0; i < n; i++) {
    out.t[i] = r.t_us[i] * NS_PER_US;
    out.end[i] = (r.t_us[i] + r.dur_us[i]) * NS_PER_US;
  }
  return out;
})();

// Decoded block requests per disk, sorted by time.
const REQUESTS = DATA.requests.map(raw => {
  const n = raw.t_us.length;
  const order = Array.from({ length: n }, (_, i) => i);
  order.sort((a, b) => raw.t_us[a] - raw.t_us[b] || a - b);
  const c = {};
  for (const k of ['t_us', 'lat_us', 'sector', 'bytes', 'pid', 'file', 'flags']) c[k] = order.map(i => raw[k][i]);
  c.disk = raw.disk;
  c.every = raw.every;
  const t = new Float64Array(n);
  for (let i = 0; i < n; i++) t[i] = c.t_us[i] * NS_PER_US;
  let lo = Infinity, hi = -Infinity;
  for (let i = 0; i < n; i++) {
    if (c.flags[i] & 4) continue;
    lo = Math.min(lo, c.sector[i]);
    hi = Math.max(hi, c.sector[i] + c.bytes[i] / 512);
  }
  const maxLat = c.lat_us.reduce((m, l) => Math.max(m, l), 0) * NS_PER_US;
  return { disk: A.disks[c.disk], every: c.every, n, t, lat: c.lat_us, sector: c.sector, bytes: c.bytes,
    pid: c.pid, file: c.file, flags: c.flags, lo, hi, maxLat };
});

// First index i with arr[i] >= x in a sorted typed array.
function lowerBound(arr, x, n) {
  let lo = 0, hi = n === undefined ? arr.length : n;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (arr[mid] < x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// --- the tooltip (one for the whole page) ---

// Shows `title` and `rows` ([label, value] pairs) near the page point (x, y).
function showTip(x, y, title, rows) {
  const tip = document.getElementById('tooltip');
  clear(tip);
  tip.append(el('div', { class: 'tip-title', text: title }));
  const dl = el('dl');
  for (const [k, v] of rows) {
    if (v === null || v === undefined || v === '') continue;
    dl.append(el('dt', { text: k }), el('dd', { text: v }));
  }
  tip.append(dl);
  tip.hidden = false;
  const pad = 14;
  const w = tip.offsetWidth, h = tip.offsetHeight;
  const vw = document.documentElement.clientWidth, vh = document.documentElement.clientHeight;
  let left = x + pad, top = y + pad;
  if (left + w > window.scrollX + vw - 4) left = Math.max(window.scrollX + 4, x - w - pad);
  if (top + h > window.scrollY + vh - 4) top = Math.max(window.scrollY + 4, y - h - pad);
  tip.style.left = left + 'px';
  tip.style.top = top + 'px';
}

function hideTip() {
  document.getElementById('tooltip').hidden = true;
}
