// timeline.js — the zoomable timeline: milestones, phases, the critical path, CPU
// and disk graphs, a seek plot per disk (block requests at time × disk offset), and
// one row per process shaded by state with its reads as ticks, in the SVG chart's
// order (start order under their parents; short helpers folded into a row that a
// click opens); marks, `until` milestones and the readiness point as vertical lines
// labelled in lanes that never overlap, a diamond on the row of the process that
// reached each. Drawn on a canvas; the labels on the left
// are buttons (click one to filter the page to that process). Wheel or the
// buttons zoom, dragging pans, hovering shows the details of what is under the
// pointer.

const STATE_COLORS = ['#3f73d6', '#e0533a', '#f0ad2e', '#9a9a9a', '#dbe2ec'];
const STATE_NAMES = ['running', 'waiting for I/O (D)', 'waiting for a CPU', 'stopped', 'asleep'];
const PHASE_COLORS = { read: '#f6c8bb', cpu: '#c6d6f4', wait: '#e4e6ea' };
const PATH_COLORS = { cpu: STATE_COLORS[0], io_wait: STATE_COLORS[1], cpu_wait: STATE_COLORS[2], sleep: '#c9ced8',
  wait_untraced: '#a9b0bc', no_wakeup: '#dde1e7', untraced: '#eceff3' };
const PATH_NAMES = { cpu: 'running', io_wait: 'waiting for I/O', cpu_wait: 'waiting for a CPU', sleep: 'asleep (timer, interrupt)',
  wait_untraced: 'waiting outside the recorded scope', no_wakeup: 'asleep, no wakeup recorded', untraced: 'no scheduler data' };
// `Xvfb (pid 812, not recorded)`: the process outside the recorded scope a wait was on.
function outsideName(w) {
  const recorded = w.in_scope ? 'recorded without scheduler data' : 'not recorded';
  return w.comm ? w.comm + ' (pid ' + w.pid + ', ' + recorded + ')' : 'thread ' + w.pid + ' (exited, ' + recorded + ')';
}
const READ_COLOR = '#127f74';
const SEEK_COLOR = '#c2185b';
const REQ_COLORS = { file: '#2c6fb7', metadata: '#8e44ad', unknown: '#a0a4ab', write: '#c9a227' };
const GUTTER = 220;
const ROW_H = 22;
// As many rows as the SVG chart shows.
const MAX_ROWS = 100;

// Per-process state spans, decoded from the gap/length/state triples (µs).
const SPANS = (() => {
  const m = new Map();
  const tl = DATA.timeline;
  if (!tl) return m;
  for (const row of tl.rows) {
    const n = row.spans.length / 3;
    const s = { n, start: new Float64Array(n), end: new Float64Array(n), state: new Uint8Array(n), threads: row.threads };
    let t = 0;
    for (let i = 0; i < n; i++) {
      const start = t + row.spans[3 * i];
      const end = start + row.spans[3 * i + 1];
      s.start[i] = start * NS_PER_US;
      s.end[i] = end * NS_PER_US;
      s.state[i] = row.spans[3 * i + 2];
      t = end;
    }
    m.set(row.pid, s);
  }
  return m;
})();

// Indices of each process's reads, in time order.
const READS_BY_PID = (() => {
  const m = new Map();
  for (let i = 0; i < READS.n; i++) {
    const pid = READS.pid[i];
    if (!m.has(pid)) m.set(pid, []);
    m.get(pid).push(i);
  }
  return m;
})();

// The processes in chart order (DATA.order, the SVG chart's): start order under their
// parents, each parent's short-lived helpers folded into one entry.
const ORDER = DATA.order.map((e, k) => ({
  k,
  parent: e.parent,
  p: e.process === undefined ? null : A.processes[e.process],
  helpers: e.helpers ? e.helpers.map(([i, depth]) => ({ p: A.processes[i], depth })) : null,
}));

// Every milestone (marks, `until` milestones) and the readiness point, in time order;
// the mark or `until` milestone that is the readiness point is one line, the ready one.
const MILESTONES = (() => {
  const r = A.overview.ready;
  const isReady = m => r !== null && m.t_ns === r.t_ns && (r.reason === 'mark:' + m.name || (m.source === 'until' && r.reason === m.name));
  const out = A.marks.filter(m => !isReady(m)).map(m => ({ t: m.t_ns, label: m.name, pid: m.pid, source: m.source, ready: false }));
  if (r) out.push({ t: r.t_ns, label: 'ready (' + r.reason + ')', pid: r.pid, source: 'ready', ready: true });
  return out.sort((a, b) => a.t - b.t || (a.label < b.label ? -1 : 1));
})();
const LANE_H = 13;
// The unit starts that took time (a boot), packed into lanes so that none overlap, as
// the export's units track does: {u, lane}, by start.
const UNIT_H = 11;
const UNIT_BARS = (() => {
  const free = [];
  return (A.units || []).filter(u => u.took_ns > 0).slice().sort((a, b) => a.activating_ns - b.activating_ns || a.name.localeCompare(b.name))
    .map(u => {
      let lane = free.findIndex(t => t <= u.activating_ns);
      if (lane < 0) { lane = free.length; free.push(0); }
      free[lane] = u.active_ns;
      return { u, lane };
    });
})();
const UNIT_LANES = UNIT_BARS.reduce((n, b) => Math.max(n, b.lane + 1), 0);
const MAX_LANES = 8;
const MARK_FONT = '11px system-ui, sans-serif';

// `+12 short helpers, 80.0 ms CPU`, as the SVG chart names a folded row.
function helpersLabel(e) {
  const cpu = e.helpers.reduce((s, h) => s + h.p.time.running_ns, 0);
  return '+' + e.helpers.length + ' short helpers' + (cpu > 0 ? ', ' + fmtDur(cpu) + ' CPU' : '');
}

// Time in a state other than asleep or stopped: an import's processes have no thread
// times in the analysis, only the states of their samples.
function sampledBusy(pid) {
  const s = SPANS.get(pid);
  let ns = 0;
  if (s) for (let i = 0; i < s.n; i++) if (s.state[i] <= 2) ns += s.end[i] - s.start[i];
  return ns;
}

// How much a process did: its rows are kept first when there are too many.
function activity(p) {
  const sampled = DATA.timeline && DATA.timeline.states_from === 'samples' ? sampledBusy(p.pid) : 0;
  return p.time.running_ns + p.time.io_wait_ns + p.time.runnable_ns + sampled + p.pages * 1e5;
}

function entryActivity(e) {
  return e.p ? activity(e.p) : e.helpers.reduce((s, h) => s + activity(h.p), 0);
}

class Timeline {
  constructor(host) {
    this.host = host;
    this.full = [Math.min(0, A.overview.origin_ns), traceEnd()];
    const pad = (this.full[1] - this.full[0]) * 0.012;
    this.home = [this.full[0] - pad, this.full[1] + pad];
    this.view = this.home.slice();
    this.showAllRows = false;
    const relevant = p => p.in_scope || SPANS.has(p.pid) || READS_BY_PID.has(p.pid);
    this.entries = ORDER.filter(e => (e.p ? relevant(e.p) : e.helpers.some(h => relevant(h.p))));
    this.expanded = new Set();
    this.drag = null;
    const segs = A.critical_path ? A.critical_path.segments : [];
    this.pathStart = Float64Array.from(segs, s => s.start_ns);
    this.pathEnd = Float64Array.from(segs, s => s.end_ns);
    this.build();
    FILTER.onChange(() => { this.layout(); this.draw(); });
    new ResizeObserver(() => { this.layout(); this.draw(); }).observe(this.box);
    this.layout();
    this.draw();
  }

  build() {
    const b = (text, title, fn, id) => el('button', { text, title, attrs: { type: 'button', id }, on: { click: fn } });
    this.rangeText = el('span', { class: 'range' });
    this.rowsButton = b('', 'Rows are limited to the most active processes; show every process', () => {
      this.showAllRows = !this.showAllRows; this.layout(); this.draw();
    }, 'tl-all-rows');
    const toolbar = el('div', { class: 'tl-toolbar' },
      b('−', 'Zoom out', () => this.zoom(2, 0.5), 'tl-zoom-out'),
      b('+', 'Zoom in', () => this.zoom(0.5, 0.5), 'tl-zoom-in'),
      b('Whole trace', 'Show the whole recording', () => this.setView(this.home), 'tl-fit'),
      A.overview.ready ? b('Start to ready', 'Show the command\'s start to the readiness point',
        () => this.setView([A.overview.origin_ns, A.overview.end_ns]), 'tl-ready') : null,
      this.rangeText,
      el('span', { class: 'muted hint', text: 'Wheel: zoom · drag: pan · hover: details · click a process: filter' }),
      this.rowsButton);
    this.labels = el('div', { class: 'tl-labels' });
    this.canvas = el('canvas', { attrs: { id: 'timeline-canvas', 'aria-label': 'Timeline of the start' } });
    this.box = el('div', { class: 'tl-box' }, this.labels, this.canvas);
    this.legend = this.buildLegend();
    clear(this.host).append(toolbar, this.box, this.legend);
    this.canvas.addEventListener('wheel', e => this.onWheel(e), { passive: false });
    this.canvas.addEventListener('mousedown', e => this.onDown(e));
    window.addEventListener('mousemove', e => this.onMove(e));
    window.addEventListener('mouseup', e => this.onUp(e));
    this.canvas.addEventListener('mouseleave', () => { if (!this.drag) { hideTip(); this.hover = null; this.draw(); } });
  }

  buildLegend() {
    const item = (color, text) => el('span', { class: 'legend-item' }, el('i', { class: 'swatch', attrs: { 'data-color': color } }), text);
    const items = [];
    const from = DATA.timeline ? DATA.timeline.states_from : 'none';
    if (from !== 'none') STATE_NAMES.forEach((n, i) => items.push(item(STATE_COLORS[i], n)));
    else items.push(el('span', { class: 'muted', text: 'No thread states in this data (bars show process lifetimes).' }));
    items.push(item(READ_COLOR, 'read (coalesced page fills)'), item(SEEK_COLOR, 'read after a seek'));
    if (REQUESTS.some(r => r.n > 0)) items.push(item(REQ_COLORS.file, 'block request of a file'), item(REQ_COLORS.metadata, 'filesystem metadata'), item(REQ_COLORS.unknown, 'unknown'));
    items.push(item('#1b9e4b', 'ready'), item('#6b7280', 'mark'));
    const note = [];
    if (from === 'samples') note.push('Process states come from periodic process samples (an import), not scheduler events.');
    if (DATA.timeline && DATA.timeline.resolution_ns > 1000) note.push('States shorter than ' + fmtDur(DATA.timeline.resolution_ns) + ' are merged into their neighbours.');
    const skipped = REQUESTS.filter(r => r.n > 0).sort((a, b) => b.n - a.n).slice(3).concat(
      REQUESTS.filter(r => r.n > 0 && r.n < 0.05 * REQUESTS.reduce((s, x) => s + x.n, 0)));
    const names = [...new Set(skipped.map(r => r.disk.name))];
    if (names.length) note.push('Not drawn (under 5 % of the block requests): ' + names.map(n => 'disk ' + n).join(', ') + '; see the Disks tab.');
    if (READS.every > 1) note.push('Only every ' + READS.every + 'th read is drawn.');
    const legend = el('div', { class: 'legend' }, ...items, note.length ? el('div', { class: 'muted', text: note.join(' ') }) : null);
    for (const sw of legend.querySelectorAll('.swatch')) sw.style.background = sw.getAttribute('data-color');
    return legend;
  }

  // The tracks to draw, top to bottom, with their heights.
  layout() {
    const tracks = [{ kind: 'axis', h: 20, label: '' }];
    if (MILESTONES.length) {
      // Room for the labels' lanes at the widest view; a closer view needs no more.
      const [a, b] = this.home, pad = (b - a) * 0.25;
      // At most MAX_LANES (as the SVG chart): past them a name is in its line's tooltip.
      const needed = Math.max(...this.milestoneLanes([a - pad, b + pad], Math.max(480, this.box.clientWidth) - GUTTER - 12).map(m => m.lane + 1));
      const lanes = Math.min(MAX_LANES, needed);
      this.markLanes = lanes;
      tracks.push({ kind: 'marks', h: 6 + lanes * LANE_H, label: 'milestones' });
    }
    if (A.phases.length) tracks.push({ kind: 'phases', h: 22, label: 'phases' });
    if (UNIT_LANES) tracks.push({ kind: 'units', h: 4 + UNIT_LANES * UNIT_H, label: 'systemd units' });
    if (A.critical_path) tracks.push({ kind: 'path', h: 16, label: 'critical path' });
    const cpu = DATA.timeline && DATA.timeline.cpu;
    if (cpu) tracks.push({ kind: 'cpu', h: 54, label: cpu.from === 'sched' ? 'threads running' : 'CPU (all)' });
    const all = REQUESTS.reduce((s, r) => s + r.n, 0);
    const disks = REQUESTS.filter(r => r.n > 0 && r.n >= 0.05 * all).sort((a, b) => b.n - a.n).slice(0, 3);
    this.skippedDisks = REQUESTS.filter(r => r.n > 0 && !disks.includes(r));
    const samples = (DATA.timeline ? DATA.timeline.disks : []).filter(d => !REQUESTS.some(r => r.n > 0 && r.disk.name === d.name));
    for (const r of disks) tracks.push({ kind: 'diskio', h: 44, label: 'disk ' + r.disk.name + ' reads', req: r });
    for (const d of samples) tracks.push({ kind: 'disksamples', h: 44, label: 'disk ' + d.name + ' reads', series: d });
    for (const r of disks) tracks.push({ kind: 'seek', h: 110, label: r.disk.name + ' offset', req: r });
    const hidden = Math.max(0, this.entries.length - MAX_ROWS);
    this.rowsButton.hidden = hidden === 0 || FILTER.pid !== null;
    this.rowsButton.textContent = this.showAllRows ? 'Show the ' + MAX_ROWS + ' busiest rows' : 'Show all ' + this.entries.length + ' rows';
    tracks.push({ kind: 'procs-head', h: 18, label: FILTER.pid === null ? 'processes' : 'process (filtered)' });
    tracks.push(...this.processTracks(hidden));
    let y = 0;
    for (const t of tracks) { t.y = y; y += t.h; }
    this.tracks = tracks;
    this.height = y + 4;
    this.width = Math.max(480, this.box.clientWidth);
    this.plotW = this.width - GUTTER - 12;
    const dpr = window.devicePixelRatio || 1;
    this.canvas.width = Math.round(this.width * dpr);
    this.canvas.height = Math.round(this.height * dpr);
    this.canvas.style.width = this.width + 'px';
    this.canvas.style.height = this.height + 'px';
    this.dpr = dpr;
    this.renderLabels();
  }

  // The process rows: the filtered process alone, else every entry (or the MAX_ROWS
  // busiest), indented by their shown ancestors, an opened folded row followed by its helpers.
  processTracks(hidden) {
    if (FILTER.pid !== null) {
      const all = ORDER.flatMap(e => (e.p ? [e.p] : e.helpers.map(h => h.p)));
      return all.filter(p => p.pid === FILTER.pid).slice(0, 1).map(p => ({ kind: 'proc', h: ROW_H, p, depth: 0 }));
    }
    let entries = this.entries;
    if (!this.showAllRows && hidden > 0) {
      // The command's root first, as in the SVG chart, then the busiest.
      const rank = new Map(entries.map(e => [e, e.p && e.p.pid === A.trace.root_pid ? Infinity : entryActivity(e)]));
      const keep = new Set(entries.slice().sort((a, b) => rank.get(b) - rank.get(a)).slice(0, MAX_ROWS));
      entries = entries.filter(e => keep.has(e));
    }
    const shown = new Set(entries.map(e => e.k));
    // Parents come before their children in ORDER: one pass gives every depth.
    const depth = new Uint32Array(ORDER.length);
    for (const e of ORDER) if (e.parent !== null) depth[e.k] = depth[e.parent] + (shown.has(e.parent) ? 1 : 0);
    const tracks = [];
    for (const e of entries) {
      const d = depth[e.k];
      if (e.p) {
        tracks.push({ kind: 'proc', h: ROW_H, p: e.p, depth: d });
        continue;
      }
      const open = this.expanded.has(e.k);
      tracks.push({ kind: 'helpers', h: ROW_H, entry: e, depth: d, open });
      if (open) for (const h of e.helpers) tracks.push({ kind: 'proc', h: ROW_H, p: h.p, depth: d + 1 + h.depth, folded: true });
    }
    return tracks;
  }

  toggleHelpers(k) {
    if (this.expanded.has(k)) this.expanded.delete(k); else this.expanded.add(k);
    this.layout();
    this.draw();
  }

  renderLabels() {
    clear(this.labels);
    this.labels.style.height = this.height + 'px';
    for (const t of this.tracks) {
      if (t.kind === 'proc') {
        const p = t.p;
        const label = el('button', {
          class: 'tl-label proc' + (FILTER.pid === p.pid ? ' selected' : '') + (p.in_scope ? '' : ' out-of-scope'),
          attrs: { type: 'button', 'data-pid': p.pid },
          title: 'Click to ' + (FILTER.pid === p.pid ? 'show all processes' : 'filter the page to this process'),
          on: { click: () => FILTER.toggle(p.pid) },
        }, el('span', { class: 'comm', text: p.comm || '?' }), el('span', { class: 'pid', text: ' ' + p.pid }));
        label.style.top = t.y + 'px';
        label.style.height = t.h + 'px';
        label.style.paddingLeft = (6 + Math.min(t.depth, 8) * 9) + 'px';
        if (t.folded) label.classList.add('folded');
        this.labels.append(label);
      } else if (t.kind === 'helpers') {
        const e = t.entry;
        const label = el('button', {
          class: 'tl-label helpers' + (t.open ? ' open' : ''),
          attrs: { type: 'button', 'data-entry': e.k, 'aria-expanded': t.open ? 'true' : 'false' },
          title: (t.open ? 'Click to fold these helpers again: ' : 'Click to show each of them: ') +
            [...new Set(e.helpers.map(h => h.p.comm))].join(', '),
          on: { click: () => this.toggleHelpers(e.k) },
        }, el('span', { class: 'fold', text: t.open ? '▾ ' : '▸ ' }), el('span', { class: 'comm', text: helpersLabel(e) }));
        label.style.top = t.y + 'px';
        label.style.height = t.h + 'px';
        label.style.paddingLeft = (6 + Math.min(t.depth, 8) * 9) + 'px';
        this.labels.append(label);
      } else if (t.label) {
        const label = el('div', { class: 'tl-label track ' + t.kind, text: t.label });
        label.style.top = t.y + 'px';
        label.style.height = t.h + 'px';
        this.labels.append(label);
      }
    }
  }

  xOf(t) {
    return GUTTER + (t - this.view[0]) / (this.view[1] - this.view[0]) * this.plotW;
  }

  tOf(x) {
    return this.view[0] + (x - GUTTER) / this.plotW * (this.view[1] - this.view[0]);
  }

  setView(v) {
    const span = this.full[1] - this.full[0];
    let [a, b] = v;
    const len = Math.min(Math.max(b - a, 10000), span * 1.5);
    const mid = (a + b) / 2;
    a = mid - len / 2;
    b = mid + len / 2;
    const lo = this.full[0] - span * 0.25, hi = this.full[1] + span * 0.25;
    if (a < lo) { b += lo - a; a = lo; }
    if (b > hi) { a -= b - hi; b = hi; }
    this.view = [a, b];
    this.draw();
  }

  // Zooms by `factor` (below 1 zooms in) around the point at `frac` of the plot's width.
  zoom(factor, frac) {
    const [a, b] = this.view;
    const at = a + (b - a) * frac;
    this.setView([at - (at - a) * factor, at + (b - at) * factor]);
  }

  onWheel(e) {
    const x = e.offsetX;
    if (x < GUTTER) return;
    e.preventDefault();
    const delta = e.deltaMode === 1 ? e.deltaY * 16 : e.deltaY;
    this.zoom(Math.exp(delta * 0.0015), Math.min(1, Math.max(0, (x - GUTTER) / this.plotW)));
  }

  onDown(e) {
    if (e.button !== 0 || e.offsetX < GUTTER) return;
    this.drag = { x: e.clientX, view: this.view.slice(), moved: false };
    e.preventDefault();
  }

  onMove(e) {
    if (this.drag) {
      const dx = e.clientX - this.drag.x;
      if (Math.abs(dx) > 3) this.drag.moved = true;
      if (this.drag.moved) {
        const dt = dx / this.plotW * (this.drag.view[1] - this.drag.view[0]);
        this.setView([this.drag.view[0] - dt, this.drag.view[1] - dt]);
        this.canvas.classList.add('dragging');
        hideTip();
      }
      return;
    }
    if (e.target !== this.canvas) return;
    const hit = this.hitTest(e.offsetX, e.offsetY);
    const key = hit ? hit.key : null;
    if (hit) showTip(e.pageX, e.pageY, hit.title, hit.rows); else hideTip();
    this.canvas.style.cursor = hit && (hit.pid !== undefined || hit.group !== undefined) ? 'pointer' : 'crosshair';
    if (key !== (this.hover && this.hover.key)) { this.hover = hit; this.draw(); }
  }

  onUp(e) {
    if (!this.drag) return;
    const { moved } = this.drag;
    this.drag = null;
    this.canvas.classList.remove('dragging');
    if (!moved && e.target === this.canvas) {
      const hit = this.hitTest(e.offsetX, e.offsetY);
      if (hit && hit.pid !== undefined) FILTER.toggle(hit.pid);
      else if (hit && hit.group !== undefined) this.toggleHelpers(hit.group);
    }
  }

  trackAt(y) {
    return this.tracks.find(t => y >= t.y && y < t.y + t.h);
  }

  draw() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.paint(); });
  }

  paint() {
    const ctx = this.canvas.getContext('2d');
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.clearRect(0, 0, this.width, this.height);
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    for (const t of this.tracks) {
      ctx.save();
      ctx.beginPath();
      ctx.rect(GUTTER, t.y, this.plotW, t.h);
      ctx.clip();
      this['paint_' + t.kind.replace('-', '_')](ctx, t);
      ctx.restore();
      if (t.kind !== 'proc' && t.kind !== 'axis') {
        ctx.fillStyle = '#e6e9ef';
        ctx.fillRect(GUTTER, t.y + t.h - 1, this.plotW, 1);
      }
    }
    this.paintMarks(ctx);
    // the visible range, for scripts and tests that drive the page
    this.canvas.dataset.viewStartNs = String(this.view[0]);
    this.canvas.dataset.viewEndNs = String(this.view[1]);
    this.canvas.dataset.plotLeft = String(GUTTER);
    this.canvas.dataset.plotWidth = String(this.plotW);
    this.rangeText.textContent = fmtSecs(this.view[0]) + ' – ' + fmtSecs(this.view[1]) + '  (' + fmtDur(this.view[1] - this.view[0]) + ' shown)';
  }

  // Spans of [start, end) arrays visible in the view, merged to at least a pixel:
  // calls fn(x0, x1, i) for each span drawn (i is the most telling one in a pixel).
  eachVisible(start, end, n, fn, rank) {
    const [a, b] = this.view;
    let i = Math.max(0, lowerBound(end, a, n));
    let px = -1, best = -1;
    for (; i < n && start[i] <= b; i++) {
      const x0 = this.xOf(start[i]), x1 = this.xOf(end[i]);
      if (x1 - x0 >= 1) {
        if (best >= 0) { fn(px, px + 1, best); best = -1; }
        fn(x0, x1, i);
        continue;
      }
      const p = Math.floor(x0);
      if (p !== px && best >= 0) { fn(px, px + 1, best); best = -1; }
      px = p;
      if (best < 0 || rank(i) < rank(best)) best = i;
    }
    if (best >= 0) fn(px, px + 1, best);
  }

  paint_axis(ctx, t) {
    const [a, b] = this.view;
    const step = niceStep((b - a) / Math.max(2, this.plotW / 110));
    const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step / 1e9) + 1e-9)));
    ctx.fillStyle = '#4b5563';
    ctx.strokeStyle = '#cfd5de';
    for (let v = Math.ceil(a / step) * step; v <= b; v += step) {
      const x = Math.round(this.xOf(v)) + 0.5;
      ctx.beginPath();
      ctx.moveTo(x, t.y + 14);
      ctx.lineTo(x, t.y + t.h);
      ctx.stroke();
      ctx.fillText((v / 1e9).toFixed(decimals) + ' s', x + 3, t.y + 9);
    }
  }

  paint_phases(ctx, t) {
    for (const ph of A.phases) {
      const x0 = this.xOf(ph.start_ns), x1 = this.xOf(ph.end_ns);
      ctx.fillStyle = PHASE_COLORS[ph.kind] || '#eee';
      ctx.fillRect(x0, t.y + 2, Math.max(1, x1 - x0 - 1), t.h - 4);
      if (x1 - x0 > 40) {
        ctx.fillStyle = '#1f2937';
        ctx.fillText(fitText(ctx, ph.name, x1 - x0 - 8), Math.max(x0, GUTTER) + 4, t.y + t.h / 2);
      }
    }
  }

  paint_units(ctx, t) {
    const chain = new Set(A.unit_chain ? A.unit_chain.links : []);
    for (const { u, lane } of UNIT_BARS) {
      const x0 = this.xOf(u.activating_ns), x1 = this.xOf(u.active_ns), y = t.y + 2 + lane * UNIT_H;
      ctx.globalAlpha = u.pids.length && FILTER.pid !== null && !u.pids.includes(FILTER.pid) ? 0.25 : 1;
      ctx.fillStyle = chain.has(u.name) ? '#c0392b' : '#e08a7a';
      ctx.fillRect(x0, y, Math.max(1, x1 - x0), UNIT_H - 2);
      if (x1 - x0 > 40) {
        ctx.fillStyle = '#1f2937';
        ctx.fillText(fitText(ctx, u.name, x1 - x0 - 6), Math.max(x0, GUTTER) + 3, y + (UNIT_H - 2) / 2);
      }
    }
    ctx.globalAlpha = 1;
  }

  paint_path(ctx, t) {
    const segs = A.critical_path.segments;
    const start = this.pathStart, end = this.pathEnd;
    const order = ['io_wait', 'cpu', 'cpu_wait', 'wait_untraced', 'sleep', 'no_wakeup', 'untraced'];
    this.eachVisible(start, end, segs.length, (x0, x1, i) => {
      const s = segs[i];
      ctx.globalAlpha = FILTER.hasPid(s.pid) ? 1 : 0.25;
      ctx.fillStyle = PATH_COLORS[s.kind] || '#ccc';
      ctx.fillRect(x0, t.y + 3, x1 - x0, t.h - 6);
    }, i => order.indexOf(segs[i].kind));
    ctx.globalAlpha = 1;
  }

  paint_cpu(ctx, t) {
    const c = DATA.timeline.cpu;
    const base = t.y + t.h - 2, scale = (t.h - 6) / 1000;
    for (let i = 0; i < c.t_us.length; i++) {
      const t1 = c.t_us[i] * NS_PER_US, t0 = t1 - c.dt_us[i] * NS_PER_US;
      if (t1 < this.view[0] || t0 > this.view[1]) continue;
      const x0 = this.xOf(t0), w = Math.max(1, this.xOf(t1) - x0);
      let y = base;
      for (const [v, color] of [[c.user[i], STATE_COLORS[0]], [c.system[i], '#93b4ec'], [c.iowait[i], STATE_COLORS[1]]]) {
        const h = v * scale;
        ctx.fillStyle = color;
        ctx.fillRect(x0, y - h, w, h);
        y -= h;
      }
    }
  }

  // Read throughput from the block requests, in bins of a few pixels.
  paint_diskio(ctx, t) {
    const bins = this.ioBins(t.req);
    const max = Math.max(1, ...bins.bytes);
    const scale = (t.h - 14) / max;
    ctx.fillStyle = '#5a8fd0';
    for (let k = 0; k < bins.bytes.length; k++) {
      if (!bins.bytes[k]) continue;
      const h = bins.bytes[k] * scale;
      ctx.fillRect(GUTTER + k * bins.px, t.y + t.h - 2 - h, bins.px, h);
    }
    labelBox(ctx, 'peak ' + fmtBytes(max / (bins.ns / 1e9)) + '/s', GUTTER + 2, t.y + 7);
  }

  ioBins(r) {
    const px = 3, nb = Math.ceil(this.plotW / px);
    const ns = (this.view[1] - this.view[0]) * px / this.plotW;
    const bytes = new Float64Array(nb), count = new Uint32Array(nb);
    // each request's bytes are spread over its issue-to-completion time
    const i0 = lowerBound(r.t, this.view[0] - r.maxLat, r.n);
    for (let i = i0; i < r.n && r.t[i] <= this.view[1]; i++) {
      if (r.flags[i] & 4) continue;
      if (r.file[i] >= 0 && !FILTER.hasFile(r.file[i])) continue;
      if (FILTER.pid !== null && r.file[i] < 0) continue;
      const t0 = r.t[i], t1 = t0 + Math.max(0, r.lat[i]) * NS_PER_US;
      const k0 = Math.floor((t0 - this.view[0]) / ns), k1 = Math.floor((t1 - this.view[0]) / ns);
      if (k1 < 0 || k0 >= nb) continue;
      if (k0 >= 0) count[k0] += r.every;
      const total = r.bytes[i] * r.every;
      if (k0 === k1) { bytes[k0] += total; continue; }
      for (let k = Math.max(0, k0); k <= Math.min(nb - 1, k1); k++) {
        const a = Math.max(t0, this.view[0] + k * ns), b = Math.min(t1, this.view[0] + (k + 1) * ns);
        bytes[k] += total * (b - a) / (t1 - t0);
      }
    }
    return { px, ns, bytes, count };
  }

  paint_disksamples(ctx, t) {
    const d = t.series;
    let max = 1;
    for (let i = 0; i < d.t_us.length; i++) max = Math.max(max, d.read_bytes[i] / Math.max(1, d.dt_us[i]));
    const scale = (t.h - 14) / max;
    ctx.fillStyle = '#5a8fd0';
    for (let i = 0; i < d.t_us.length; i++) {
      const t1 = d.t_us[i] * NS_PER_US, t0 = t1 - d.dt_us[i] * NS_PER_US;
      if (t1 < this.view[0] || t0 > this.view[1]) continue;
      const h = d.read_bytes[i] / Math.max(1, d.dt_us[i]) * scale;
      const x0 = this.xOf(t0);
      ctx.fillRect(x0, t.y + t.h - 2 - h, Math.max(1, this.xOf(t1) - x0), h);
    }
    labelBox(ctx, 'peak ' + fmtBytes(max * 1e6) + '/s', GUTTER + 2, t.y + 7);
  }

  // The offsets shown: the whole disk's requests, or those of the filtered process's files.
  reqRange(r) {
    if (FILTER.pid === null) return [r.lo, r.hi];
    if (this.rangeFor !== FILTER.pid) { this.rangeFor = FILTER.pid; this.ranges = new Map(); }
    if (!this.ranges.has(r)) {
      let lo = Infinity, hi = -Infinity;
      for (let i = 0; i < r.n; i++) {
        if (r.flags[i] & 4 || r.file[i] < 0 || !FILTER.hasFile(r.file[i])) continue;
        lo = Math.min(lo, r.sector[i]);
        hi = Math.max(hi, r.sector[i] + r.bytes[i] / 512);
      }
      this.ranges.set(r, lo <= hi ? [lo, hi] : [r.lo, r.hi]);
    }
    return this.ranges.get(r);
  }

  reqY(t, r, sector) {
    const [lo, hi] = this.reqRange(r);
    return t.y + t.h - 16 - (sector - lo) / Math.max(1, hi - lo) * (t.h - 32);
  }

  reqKind(r, i) {
    if (r.flags[i] & 4) return 'write';
    if (r.flags[i] & 1) return 'metadata';
    return r.file[i] >= 0 ? 'file' : 'unknown';
  }

  paint_seek(ctx, t) {
    const r = t.req;
    const i0 = lowerBound(r.t, this.view[0], r.n);
    for (let i = i0; i < r.n && r.t[i] <= this.view[1]; i++) {
      const kind = this.reqKind(r, i);
      if (kind === 'write') continue;
      if (FILTER.pid !== null && !(r.file[i] >= 0 && FILTER.hasFile(r.file[i]))) continue;
      ctx.fillStyle = REQ_COLORS[kind];
      ctx.globalAlpha = kind === 'unknown' ? 0.45 : 1;
      const size = r.bytes[i] >= 1 << 20 ? 6 : r.bytes[i] >= 128 << 10 ? 4 : 3;
      ctx.fillRect(this.xOf(r.t[i]) - size / 2, this.reqY(t, r, r.sector[i]) - size / 2, size, size);
    }
    ctx.globalAlpha = 1;
    const [lo, hi] = this.reqRange(r);
    labelBox(ctx, fmtBytes(hi * 512), GUTTER + 2, t.y + 8);
    labelBox(ctx, fmtBytes(lo * 512), GUTTER + 2, t.y + t.h - 8);
  }

  paint_marks(ctx, t) {
    ctx.fillStyle = '#fbfcfd';
    ctx.fillRect(GUTTER, t.y, this.plotW, t.h);
  }

  paint_procs_head(ctx, t) {
    ctx.fillStyle = '#f3f5f8';
    ctx.fillRect(GUTTER, t.y, this.plotW, t.h);
  }

  paint_proc(ctx, t) {
    const p = t.p;
    const hovered = this.hover && this.hover.pid === p.pid;
    if (FILTER.pid === p.pid || hovered) {
      ctx.fillStyle = hovered ? '#eef3fb' : '#f4f7fc';
      ctx.fillRect(GUTTER, t.y, this.plotW, t.h);
    }
    this.paintLife(ctx, p, t.y + 2, t.h - 4);
    this.paintReached(ctx, p, t);
  }

  // A folded row: each helper's life and states on one line.
  paint_helpers(ctx, t) {
    if (this.hover && this.hover.key === 'hl' + t.entry.k) {
      ctx.fillStyle = '#eef3fb';
      ctx.fillRect(GUTTER, t.y, this.plotW, t.h);
    }
    for (const h of t.entry.helpers) this.paintLife(ctx, h.p, t.y + 2, t.h - 4);
  }

  // A diamond where the process reached a milestone.
  paintReached(ctx, p, t) {
    for (const m of MILESTONES) {
      if (m.pid !== p.pid || (p.start_ns !== null && m.t < p.start_ns)) continue;
      const x = this.xOf(m.t), y = t.y + t.h / 2 - 2;
      ctx.fillStyle = m.ready ? '#1b9e4b' : '#374151';
      ctx.strokeStyle = '#ffffff';
      ctx.beginPath();
      ctx.moveTo(x, y - 5); ctx.lineTo(x + 5, y); ctx.lineTo(x, y + 5); ctx.lineTo(x - 5, y); ctx.closePath();
      ctx.fill();
      ctx.stroke();
    }
  }

  // A process's bar from fork to exit, shaded by state, with its reads below.
  paintLife(ctx, p, y, h) {
    const start = p.start_ns === null ? this.full[0] : p.start_ns;
    const end = p.end_ns === null ? this.full[1] : p.end_ns;
    ctx.strokeStyle = '#b8c0cc';
    ctx.strokeRect(Math.round(this.xOf(start)) + 0.5, y + 0.5, Math.max(1, this.xOf(end) - this.xOf(start)), h - 6);
    const s = SPANS.get(p.pid);
    const barH = h - 6;
    if (s) {
      const rank = i => (s.state[i] === 4 ? 9 : s.state[i]);
      this.eachVisible(s.start, s.end, s.n, (x0, x1, i) => {
        ctx.fillStyle = STATE_COLORS[s.state[i]];
        ctx.fillRect(x0, y + 1, x1 - x0, barH - 1);
      }, rank);
    }
    const reads = READS_BY_PID.get(p.pid);
    if (reads) {
      for (const i of reads) {
        if (READS.end[i] < this.view[0] || READS.t[i] > this.view[1]) continue;
        const x0 = this.xOf(READS.t[i]);
        ctx.fillStyle = READS.seek[i] ? SEEK_COLOR : READ_COLOR;
        ctx.fillRect(x0 - 0.5, y + barH + 1, Math.max(2, this.xOf(READS.end[i]) - x0), 5);
      }
    }
  }

  // Each milestone's x in `view` (a plot `plotW` wide) and its label's lane: the first
  // lane where the label overlaps no other (written leftwards near the right edge).
  milestoneLanes(view, plotW) {
    const ctx = this.canvas.getContext('2d');
    ctx.font = MARK_FONT;
    const lanes = [];
    return MILESTONES.map(m => {
      const x = GUTTER + (m.t - view[0]) / (view[1] - view[0]) * plotW;
      const w = ctx.measureText(m.label).width;
      const [left, right] = x + 4 + w > GUTTER + plotW ? [x - 4 - w, x - 4] : [x + 4, x + 4 + w];
      let lane = lanes.findIndex(l => l.every(([a, b]) => right + 6 <= a || left >= b + 6));
      if (lane < 0) { lanes.push([]); lane = lanes.length - 1; }
      lanes[lane].push([left, right]);
      return { m, x, left, right, lane };
    });
  }

  paintMarks(ctx) {
    const track = this.tracks.find(t => t.kind === 'marks');
    if (!track) return;
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, 0, this.plotW, this.height);
    ctx.clip();
    ctx.font = MARK_FONT;
    const drawn = [];
    for (const { m, x, left, right, lane } of this.milestoneLanes(this.view, this.plotW)) {
      if (x < GUTTER - 1 || x > GUTTER + this.plotW + 1) continue;
      const color = m.ready ? '#1b9e4b' : '#6b7280';
      const y = track.y + 4 + lane * LANE_H + LANE_H / 2;
      const px = Math.round(x) + 0.5;
      ctx.strokeStyle = color;
      ctx.lineWidth = m.ready ? 1.5 : 1;
      ctx.setLineDash(m.ready ? [] : [4, 3]);
      ctx.beginPath();
      ctx.moveTo(px, lane < this.markLanes ? y - 5 : track.y);
      ctx.lineTo(px, this.height);
      ctx.stroke();
      // A closer view never needs more lanes than the widest; past them the name is in the tooltip.
      if (lane < this.markLanes) {
        ctx.fillStyle = color;
        ctx.fillText(m.label, left, y);
        drawn.push({ label: m.label, left, right, top: y - LANE_H / 2, bottom: y + LANE_H / 2 });
      }
    }
    ctx.restore();
    // the labels drawn, for tests that check they never overlap
    this.canvas.dataset.milestoneLabels = JSON.stringify(drawn);
  }

  markTip(x) {
    let best = null, bestD = 5;
    for (const l of this.milestoneLanes(this.view, this.plotW)) {
      const d = x >= l.left && x <= l.right ? 0 : Math.abs(l.x - x);
      if (d < bestD) { bestD = d; best = l; }
    }
    if (!best) return null;
    const m = best.m;
    return { key: 'mk' + m.label + m.t, title: m.ready ? 'Ready' : 'Milestone ' + m.label,
      rows: [['at', fmtSecs(m.t)], ['reached by', m.pid === null ? null : who(m.pid)],
        ['from', { until: '--until condition met', marks_file: 'marks file', command: 'coldstart mark', trace_marker: 'trace_marker', output: 'command output', import: 'imported log', ready: String(A.overview.ready && A.overview.ready.reason) }[m.source] || m.source]] };
  }

  // What is under (x, y): {key, title, rows, pid?} or null.
  hitTest(x, y) {
    if (x < GUTTER) return null;
    const t = this.trackAt(y);
    if (!t) return null;
    const at = this.tOf(x);
    const near = 3 * (this.view[1] - this.view[0]) / this.plotW; // 3 px in ns
    switch (t.kind) {
      case 'phases': {
        const i = A.phases.findIndex(p => at >= p.start_ns && at < p.end_ns);
        return i < 0 ? null : phaseTip(A.phases[i], i);
      }
      case 'units': {
        const lane = Math.floor((y - t.y - 2) / UNIT_H);
        const hit = UNIT_BARS.find(b => b.lane === lane && at >= b.u.activating_ns - near && at <= b.u.active_ns + near);
        return hit ? unitTip(hit.u) : null;
      }
      case 'path': {
        const segs = A.critical_path.segments;
        let i = lowerBound(this.pathEnd, at, segs.length);
        if (i >= segs.length || segs[i].start_ns > at + near) return null;
        return pathTip(segs[i], i);
      }
      case 'cpu': return this.cpuTip(at);
      case 'diskio': {
        const bins = this.ioBins(t.req);
        const k = Math.floor((x - GUTTER) / bins.px);
        const t0 = this.view[0] + k * bins.ns;
        return { key: 'io' + k, title: 'Disk ' + t.req.disk.name + ', ' + fmtSecs(t0) + ' – ' + fmtSecs(t0 + bins.ns),
          rows: [['read', fmtBytes(Math.round(bins.bytes[k] || 0)) + ' (' + fmtCount(bins.count[k] || 0) + ' requests issued)'],
            ['throughput', fmtBytes((bins.bytes[k] || 0) / (bins.ns / 1e9)) + '/s']] };
      }
      case 'seek': return this.requestTip(t, x, y, near);
      case 'proc': return this.procTip(t, at, near);
      case 'marks': return this.markTip(x);
      case 'helpers': return this.helpersTip(t, at, near);
      default: return null;
    }
  }

  cpuTip(at) {
    const c = DATA.timeline.cpu;
    for (let i = 0; i < c.t_us.length; i++) {
      const t1 = c.t_us[i] * NS_PER_US, t0 = t1 - c.dt_us[i] * NS_PER_US;
      if (at > t0 && at <= t1) {
        const pm = v => (v / 10).toFixed(1) + ' %';
        const rows = c.from === 'sched'
          ? [['threads running', pm(c.user[i]) + ' of ' + A.trace.cpu_count + ' CPUs'], ['threads in I/O wait', pm(c.iowait[i])]]
          : [['user', pm(c.user[i])], ['system', pm(c.system[i])], ['I/O wait', pm(c.iowait[i])]];
        return { key: 'cpu' + i, title: 'CPU, ' + fmtSecs(t0) + ' – ' + fmtSecs(t1), rows };
      }
    }
    return null;
  }

  requestTip(t, x, y, near) {
    const r = t.req;
    let best = -1, bestD = 25;
    for (let i = lowerBound(r.t, this.tOf(x - 5), r.n); i < r.n && r.t[i] <= this.tOf(x + 5); i++) {
      if (this.reqKind(r, i) === 'write') continue;
      if (FILTER.pid !== null && !(r.file[i] >= 0 && FILTER.hasFile(r.file[i]))) continue;
      const dx = this.xOf(r.t[i]) - x, dy = this.reqY(t, r, r.sector[i]) - y;
      const d = dx * dx + dy * dy;
      if (d < bestD) { bestD = d; best = i; }
    }
    if (best < 0) return null;
    const i = best;
    const kind = this.reqKind(r, i);
    return { key: 'rq' + r.disk.name + i, title: 'Block request on ' + r.disk.name,
      rows: [['file', kind === 'file' ? fileName(r.file[i]) : kind === 'metadata' ? 'filesystem metadata' : 'unknown'],
        ['issued', fmtSecs(r.t[i])], ['latency', r.lat[i] >= 0 ? fmtDur(r.lat[i] * NS_PER_US) : 'unknown'],
        ['sector', fmtCount(r.sector[i])], ['disk offset', fmtBytes(r.sector[i] * 512) + ' (' + fmtCount(r.sector[i] * 512) + ' bytes)'],
        ['bytes', fmtBytes(r.bytes[i])], ['issued by', r.pid[i] ? who(r.pid[i]) : 'pid 0 (interrupt, kworker)'],
        ['far seek', r.flags[i] & 2 ? 'yes' : 'no']] };
  }

  helpersTip(t, at, near) {
    const e = t.entry;
    const counts = new Map();
    for (const h of e.helpers) counts.set(h.p.comm, (counts.get(h.p.comm) || 0) + 1);
    const names = [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([n, c]) => (c > 1 ? n + ' ×' + c : n));
    const under = e.helpers.find(h => at >= (h.p.start_ns === null ? -Infinity : h.p.start_ns) - near && at <= (h.p.end_ns === null ? Infinity : h.p.end_ns) + near);
    const starts = e.helpers.map(h => h.p.start_ns).filter(v => v !== null), ends = e.helpers.map(h => h.p.end_ns).filter(v => v !== null);
    return { key: 'hl' + e.k, group: e.k, title: helpersLabel(e) + ' (folded)',
      rows: [['processes', names.join(', ')], ['under', e.parent === null || !ORDER[e.parent].p ? null : who(ORDER[e.parent].p.pid)],
        ['from', starts.length ? fmtSecs(Math.min(...starts)) : null], ['to', ends.length ? fmtSecs(Math.max(...ends)) : null],
        ['here', under ? under.p.comm + ' ' + under.p.pid + ', ' + fmtSecs(under.p.start_ns) + ' – ' + fmtSecs(under.p.end_ns) : null],
        ['why folded', 'each forked and exited quickly, read under 1 MiB, reached no milestone and is not on the critical path'],
        ['', t.open ? 'click to fold them again' : 'click to show each of them']] };
  }

  procTip(t, at, near) {
    const p = t.p;
    const reads = READS_BY_PID.get(p.pid) || [];
    for (const i of reads) {
      if (at >= READS.t[i] - near && at <= READS.end[i] + near) return Object.assign(readTip(i), { pid: p.pid });
    }
    const s = SPANS.get(p.pid);
    const base = [['pid', String(p.pid)], ['parent', p.ppid === null ? null : String(p.ppid)], ['executable', p.exe],
      ['lifetime', (p.start_ns === null ? 'before the recording' : fmtSecs(p.start_ns)) + ' – ' + (p.end_ns === null ? 'still running' : fmtSecs(p.end_ns))],
      ['running (all threads)', fmtDur(p.time.running_ns)], ['I/O wait (all threads)', fmtDur(p.time.io_wait_ns)],
      ['read', fmtBytes(p.pages * PAGE) + ' in ' + fmtCount(p.reads) + ' reads, ' + fmtCount(p.seeks) + ' seeks']];
    if (s) {
      const i = lowerBound(s.end, at, s.n);
      if (i < s.n && s.start[i] <= at) {
        return { key: 'sp' + p.pid + ':' + i, pid: p.pid, title: p.comm + ' — ' + STATE_NAMES[s.state[i]],
          rows: [['from', fmtSecs(s.start[i])], ['to', fmtSecs(s.end[i])], ['length', fmtDur(s.end[i] - s.start[i])],
            ['threads', String(s.threads)], ...base] };
      }
    }
    return { key: 'p' + p.pid, pid: p.pid, title: p.comm + ' (process)', rows: base };
  }
}

function readTip(i) {
  const path = fileName(READS.file[i]);
  return { key: 'rd' + i, title: 'Read of ' + baseName(path),
    rows: [['file', path], ['process', who(READS.pid[i])], ['thread', threadName(READS.tid[i])],
      ['at', fmtSecs(READS.t[i]) + (READS.end[i] > READS.t[i] ? ' – ' + fmtSecs(READS.end[i]) : '')],
      ['file offset', fmtBytes(READS.first[i] * PAGE) + ' (page ' + fmtCount(READS.first[i]) + ')'],
      ['bytes', fmtBytes(READS.pages[i] * PAGE) + ' (' + fmtCount(READS.pages[i]) + ' pages)'],
      ['seek', READS.seek[i] ? 'yes: does not continue the previous read of this file' : 'no']] };
}

// A unit's start: when, how long, and what its processes did meanwhile.
function unitTip(u) {
  const waits = u.unit_waits.map(w => w.unit + ' ' + fmtDur(w.ns));
  if (u.manager_wait_ns) waits.push('the manager ' + fmtDur(u.manager_wait_ns));
  const files = u.io_files.slice(0, 3).map(f => baseName(fileName(f.file)) + ' ' + fmtDur(f.ns)).join(', ');
  const from = { main_pid: 'its main process and descendants', name: 'the manager\'s children named like it', none: 'none found' }[u.pids_from] || u.pids_from;
  return { key: 'unit' + u.name, title: 'Unit ' + u.name,
    rows: [['started', fmtSecs(u.activating_ns)], ['active', fmtSecs(u.active_ns)], ['took', fmtDur(u.took_ns)],
      ['CPU', fmtDur(u.cpu_ns)], ['I/O wait', fmtDur(u.io_wait_ns) + (files ? ' (' + files + ')' : '')],
      ['waiting on units', waits.length ? waits.join(', ') : null], ['other', fmtDur(u.other_ns)],
      ['processes', u.pids.length ? u.pids.map(who).join(', ') + ' (' + from + ')' : from],
      ['after', u.after === null ? null : u.after + ' (active at ' + fmtSecs(u.after_active_ns) + ')']] };
}

function phaseTip(ph, i) {
  return { key: 'ph' + i, title: 'Phase ' + (i + 1) + ': ' + ph.name,
    rows: [['kind', ph.kind], ['from', fmtSecs(ph.start_ns)], ['to', fmtSecs(ph.end_ns)], ['length', fmtDur(ph.end_ns - ph.start_ns)],
      ['CPU (threads)', fmtDur(ph.cpu_ns)], ['I/O wait (threads)', fmtDur(ph.io_wait_ns)],
      ['read', fmtBytes(ph.bytes) + ' from ' + fmtCount(ph.files) + ' files, ' + fmtCount(ph.seeks) + ' seeks'],
      ['top file', ph.top_file === null ? null : fileName(ph.top_file)], ['busiest process', ph.top_pid === null ? null : who(ph.top_pid)],
      ['ends at mark', ph.ends_at_mark]] };
}

// What a wait was in: `statx under /opt/app/plug-ins (fuse)`, the type only for
// filesystems where it matters; with the kernel function of its off-CPU stack
// `fuse_simple_request (statx under /opt/app/plug-ins, fuse)` (as the text report says it).
function waitedInText(w) {
  if (!w) return null;
  const call = w.syscall + (w.dir ? ' under ' + w.dir : '');
  const t = w.fstype || '';
  const slow = t === 'fuse' || t === 'fuseblk' || t.startsWith('fuse.') ||
    ['nfs', 'nfs4', 'cifs', 'smb3', 'smbfs', '9p', 'ceph', 'afs', 'glusterfs', 'overlay'].includes(t);
  if (!w.kernel) return slow ? call + ' (' + t + ')' : call;
  const inside = [w.syscall ? call : null, slow ? t : w.area].filter(x => x);
  return inside.length ? w.kernel + ' (' + inside.join(', ') + ')' : w.kernel;
}

function pathTip(s, i) {
  const files = s.files.slice(0, 5).map(f => baseName(fileName(f.file)) + ' ' + fmtDur(f.ns)).join(', ');
  return { key: 'cp' + i, pid: s.pid, title: 'Critical path: ' + (PATH_NAMES[s.kind] || s.kind),
    rows: [['thread', threadName(s.tid)], ['process', who(s.pid)], ['from', fmtSecs(s.start_ns)], ['to', fmtSecs(s.end_ns)],
      ['length', fmtDur(s.end_ns - s.start_ns)], ['waited in', waitedInText(s.waited_in)], ['files', files],
      ['woken by', s.waker_process ? outsideName(s.waker_process) : s.waker_tid === null ? null : 'thread ' + s.waker_tid]] };
}

// A small label on a white box, readable over the points it covers.
function labelBox(ctx, text, x, y) {
  const w = ctx.measureText(text).width;
  ctx.fillStyle = 'rgba(255, 255, 255, 0.85)';
  ctx.fillRect(x, y - 7, w + 6, 14);
  ctx.fillStyle = '#4b5563';
  ctx.fillText(text, x + 3, y);
}

function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

// `text` cut with an ellipsis to fit `width` pixels.
function fitText(ctx, text, width) {
  if (ctx.measureText(text).width <= width) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (ctx.measureText(text.slice(0, mid) + '…').width <= width) lo = mid; else hi = mid - 1;
  }
  return lo > 0 ? text.slice(0, lo) + '…' : '';
}
