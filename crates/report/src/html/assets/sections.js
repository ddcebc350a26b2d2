// sections.js — the header, the headline figures, and the tabbed tables (files,
// processes and threads, phases, critical path, disks, findings, warnings). Every
// table follows the process filter.

function commandLine() {
  return A.trace.command.map(a => (/^[\w@%+=:,./-]+$/.test(a) ? a : "'" + a.replace(/'/g, "'\\''") + "'")).join(' ');
}

function renderHeader() {
  const t = A.trace;
  const cmd = commandLine() || '(no command)';
  document.title = 'coldstart: ' + cmd;
  const when = t.start_unix_ns ? new Date(t.start_unix_ns / 1e6).toISOString().replace('T', ' ').slice(0, 19) + ' UTC' : null;
  const disks = A.disks.map(d => d.name + (d.model ? ' (' + d.model + ')' : '') + (d.kind ? '; ' + d.kind : ''));
  const facts = [t.host, t.kernel, t.cpu_model ? t.cpu_count + ' × ' + t.cpu_model : null,
    t.mem_total_bytes ? fmtBytes(t.mem_total_bytes) + ' RAM' : null, disks.length ? 'disk ' + disks.join(', ') : null, when];
  clear(document.getElementById('head')).append(
    el('div', { class: 'brand', text: 'coldstart report' }),
    el('h1', { class: 'command', text: cmd, title: cmd }),
    el('div', { class: 'facts', text: facts.filter(Boolean).join(' · ') }));
  clear(document.getElementById('foot')).append(el('span', {
    text: 'Written by ' + DATA.generator + ' from a trace by ' + (t.tool || 'unknown') + ' (' + t.source + '). ' +
      'Self-contained: this file loads nothing from the network. Times are seconds since the start of the recording.' }));
}

function card(label, value, sub, cls) {
  return el('div', { class: 'card ' + (cls || '') }, el('div', { class: 'card-label', text: label }),
    el('div', { class: 'card-value', text: value }), sub ? el('div', { class: 'card-sub', text: sub }) : null);
}

function renderSummary() {
  const o = A.overview, t = A.trace;
  const ready = o.ready;
  const cards = [
    card('Time to ready', ready ? fmtSecs(ready.time_to_ready_ns) : 'no readiness point',
      ready ? 'at ' + fmtSecs(ready.t_ns) + ' (' + ready.reason + ')' : 'end of trace ' + fmtSecs(o.end_ns), 'primary'),
    card('Page cache', t.cache, t.eviction || (t.cache === 'cold' ? 'evicted before the start' : null), t.cache === 'cold' ? 'cold' : ''),
    card('Read into the cache', fmtBytes(o.bytes_read), fmtCount(o.files_read) + ' files, ' + fmtCount(o.pages_read) + ' pages'),
    card('Reads and seeks', fmtCount(o.reads) + ' / ' + fmtCount(o.seeks), 'coalesced reads / file-level seeks'),
    card('Disk reads', fmtBytes(o.block_read_bytes), fmtCount(o.block_read_requests) + ' block requests'),
    card('Threads\' time', fmtSecs(o.cpu_ns) + ' CPU', fmtSecs(o.io_wait_ns) + ' in I/O wait (summed)'),
    card('Processes', fmtCount(o.processes_in_scope), fmtCount(o.threads) + ' threads, ' + fmtCount(o.execs) + ' execs'),
    card('Lost data', o.lost ? fmtCount(o.lost) : 'none', A.warnings.length ? A.warnings.length + ' warnings (see the Warnings tab)' : 'no warnings', o.lost || A.warnings.length ? 'warn' : 'ok'),
  ];
  const host = clear(document.getElementById('summary'));
  // A part left out is null, which append() would write as the text `null`.
  host.append(...[el('div', { class: 'cards' }, ...cards), breakdownBar(), pathSentence(), findingsBox()].filter(Boolean));
}

// The wall-clock breakdown of the start as one stacked bar.
function breakdownBar() {
  const s = A.start;
  const total = s.to_ns - s.from_ns;
  if (!s.has_sched || total <= 0) return el('p', { class: 'muted', text: 'No scheduler data: no wall-clock breakdown of the start.' });
  const parts = [['CPU', s.cpu_ns, STATE_COLORS[0], 'some thread running'], ['I/O wait', s.io_wait_ns, STATE_COLORS[1], 'none running, some waiting for I/O'],
    ['waiting for a CPU', s.cpu_wait_ns, STATE_COLORS[2], 'runnable, no CPU free'], ['idle', s.idle_ns, '#c9ced8', 'sleeps, timers, other processes']];
  const bar = el('div', { class: 'bar', attrs: { role: 'img', 'aria-label': 'Where the time to ready went' } });
  const legend = el('div', { class: 'bar-legend' });
  for (const [name, ns, color, why] of parts) {
    const seg = el('div', { class: 'bar-seg', title: name + ': ' + fmtSecs(ns) + ' (' + fmtPct(ns, total) + ') — ' + why });
    seg.style.width = (100 * ns / total) + '%';
    seg.style.background = color;
    bar.append(seg);
    const sw = el('i', { class: 'swatch' });
    sw.style.background = color;
    legend.append(el('span', { class: 'legend-item' }, sw, name + ' ', el('strong', { text: fmtSecs(ns) }), ' ' + fmtPct(ns, total)));
  }
  return el('div', { class: 'breakdown' },
    el('div', { class: 'section-title', text: 'Where the time to ready went (wall clock, ' + fmtSecs(s.from_ns) + ' to ' + fmtSecs(s.to_ns) + ')' }),
    bar, legend);
}

function pathSentence() {
  const p = A.critical_path;
  if (!p) return el('p', { class: 'muted', text: 'No critical path (it needs a readiness point and scheduler data).' });
  const s = p.summary;
  const parts = [fmtSecs(s.cpu_ns) + ' CPU', fmtSecs(s.io_wait_ns) + ' I/O wait'];
  if (s.io_files.length) parts[1] += ' (' + s.io_files.slice(0, 3).map(f => baseName(fileName(f.file)) + ' ' + fmtDur(f.ns)).join(', ') + (s.io_files.length > 3 ? ', …' : '') + ')';
  for (const h of s.helpers.slice(0, 3)) parts.push(fmtSecs(h.ns) + ' in ' + h.comm + '/' + h.pid);
  if (s.helpers.length > 3) parts.push(fmtSecs(s.helpers.slice(3).reduce((a, h) => a + h.ns, 0)) + ' in ' + (s.helpers.length - 3) + ' other processes');
  if (s.cpu_wait_ns) parts.push(fmtSecs(s.cpu_wait_ns) + ' waiting for a CPU');
  if (s.sleep_ns) parts.push(fmtSecs(s.sleep_ns) + ' asleep on a timer');
  const outside = new Map();
  for (const g of p.segments) {
    if (g.pid !== p.pid || !g.waker_process) continue;
    const o = outside.get(g.waker_process.pid) || { process: g.waker_process, ns: 0 };
    o.ns += g.end_ns - g.start_ns;
    outside.set(g.waker_process.pid, o);
  }
  for (const o of outside.values()) parts.push(fmtSecs(o.ns) + ' waiting on ' + outsideName(o.process));
  if (s.no_wakeup_ns) parts.push(fmtSecs(s.no_wakeup_ns) + ' asleep with no wakeup recorded');
  if (s.untraced_ns) parts.push(fmtSecs(s.untraced_ns) + ' untraced');
  return el('p', { class: 'path-sentence' }, el('strong', { text: 'Critical path: ' }),
    fmtSecs(s.total_ns) + ' to ready = ' + parts.join(' + ') + '.');
}

// --- tables ---

const C = {
  num: (key, label, fmt, title) => ({ key, label, num: true, fmt: fmt || fmtCount, title }),
  text: (key, label, title, cls) => ({ key, label, title, cls }),
};

function fileTip(row) {
  const f = FILES.get(row.file) || {};
  const users = A.file_uses.filter(u => u.file === row.file).map(u => who(u.pid) + ' ' + fmtCount(u.reads) + ' reads').slice(0, 6);
  return [row.name, [['kind', f.kind], ['size', f.size_bytes === null || f.size_bytes === undefined ? null : fmtBytes(f.size_bytes)],
    ['device, inode', f.dev ? f.dev + ', ' + f.ino : null], ['reads', fmtCount(row.reads)], ['seeks', fmtCount(row.seeks)],
    ['read', fmtBytes(row.bytes) + ' (' + fmtCount(row.pages) + ' pages)'], ['I/O wait', fmtDur(row.io_wait_ns)],
    ['first read', fmtSecs(row.first_ns)], ['read ahead, never used', row.unused === null ? null : fmtBytes(row.unused)],
    ['block requests', row.requests ? fmtCount(row.requests) : null], ['read by', users.join(', ')]]];
}

function fileRows() {
  const unused = new Map(A.page_use_by_file.map(u => [u.file, u.unused_pages * PAGE]));
  const requests = new Map();
  for (const d of A.disks) for (const f of d.files) requests.set(f.file, (requests.get(f.file) || 0) + f.requests);
  const rows = new Map();
  for (const u of A.file_uses) {
    if (!FILTER.hasPid(u.pid)) continue;
    let r = rows.get(u.file);
    if (!r) {
      r = { file: u.file, name: fileName(u.file), reads: 0, seeks: 0, pages: 0, bytes: 0, io_wait_ns: 0, first_ns: u.first_ns, procs: 0,
        unused: unused.has(u.file) ? unused.get(u.file) : null, requests: requests.get(u.file) || 0 };
      rows.set(u.file, r);
    }
    r.reads += u.reads; r.seeks += u.seeks; r.pages += u.pages; r.bytes += u.pages * PAGE; r.io_wait_ns += u.io_wait_ns;
    r.first_ns = Math.min(r.first_ns, u.first_ns); r.procs += 1;
  }
  return [...rows.values()];
}

function processRows() {
  return A.processes.filter(p => FILTER.hasPid(p.pid) && (p.in_scope || p.reads || p.time.running_ns))
    .map(p => Object.assign({ bytes: p.pages * PAGE }, p));
}

function threadRows() {
  return A.threads.filter(t => FILTER.hasPid(t.pid));
}

function phaseRows() {
  return A.phases.map((ph, i) => Object.assign({ n: i + 1, len: ph.end_ns - ph.start_ns }, ph)).filter(ph => {
    if (FILTER.pid === null) return true;
    const p = PROCS.get(FILTER.pid);
    const start = p && p.start_ns !== null ? p.start_ns : -Infinity, end = p && p.end_ns !== null ? p.end_ns : Infinity;
    return ph.end_ns > start && ph.start_ns < end;
  }).map(ph => {
    if (FILTER.pid === null) return ph;
    let bytes = 0, reads = 0, seeks = 0;
    for (const i of READS_BY_PID.get(FILTER.pid) || []) {
      if (READS.t[i] >= ph.start_ns && READS.t[i] < ph.end_ns) { reads += 1; seeks += READS.seek[i]; bytes += READS.pages[i] * PAGE; }
    }
    return Object.assign({}, ph, { bytes, reads, seeks });
  });
}

function pathRows() {
  if (!A.critical_path) return [];
  return A.critical_path.segments.map((s, i) => Object.assign({ n: i, len: s.end_ns - s.start_ns }, s)).filter(s => FILTER.hasPid(s.pid));
}

function pathDoing(s) {
  const what = PATH_NAMES[s.kind] || s.kind;
  if (s.files.length) return what + ': ' + s.files.slice(0, 3).map(f => fileName(f.file) + ' ' + fmtDur(f.ns)).join(', ') + (s.files.length > 3 ? ', …' : '');
  if (s.waker_process) return 'waiting on ' + outsideName(s.waker_process);
  if (s.waker_tid !== null) return what + ' (woken by thread ' + s.waker_tid + ')';
  return what;
}

function diskFileRows() {
  const rows = [];
  for (const d of A.disks) {
    for (const f of d.files) {
      if (!FILTER.hasFile(f.file)) continue;
      rows.push({ disk: d.name, file: f.file, name: fileName(f.file), requests: f.requests, bytes: f.bytes, far_seeks: f.far_seeks, latency_ns: f.latency_ns });
    }
  }
  return rows;
}

function findingRows() {
  const findings = DATA.doctor ? DATA.doctor.findings : [];
  return findings.map((f, i) => Object.assign({ rank: i + 1 }, f)).filter(f => FILTER.pid === null
    || f.evidence.processes.some(p => p.pid === FILTER.pid) || f.evidence.files.some(x => FILTER.hasFile(x.file)));
}

const AUDIENCE = { developers: "the program's developers", distribution: 'the distribution or image builder',
  administrator: "the machine's administrator", user: 'whoever starts the program' };

function findingTip(f) {
  const e = f.evidence;
  const files = e.files.slice(0, 5).map(x => x.name + (x.wait_ns ? ' (' + fmtDur(x.wait_ns) + ' wait)' : '')).join(', ') +
    (e.files_total > 5 ? ' … ' + fmtCount(e.files_total) + ' files in all' : '');
  const procs = e.processes.slice(0, 5).map(p => p.comm + '/' + p.pid + ' ' + fmtDur(p.ns)).join(', ');
  return [f.title, [['evidence', e.summary], ['gain', f.gain.text], ['gain if done ahead', f.gain.ahead_ns === null ? null : fmtSecs(f.gain.ahead_ns)],
    ['files', files], ['processes', procs], ['who can act', AUDIENCE[f.audience] || f.audience], ['suggestion', f.suggestion], ['verify', f.verify], ['confidence', f.confidence], ['caveat', f.caveat], ['kind', f.kind]]];
}

// The top findings, under the headline figures.
function findingsBox() {
  const findings = DATA.doctor ? DATA.doctor.findings : [];
  if (!findings.length) return null;
  const list = el('ol', { class: 'top-findings' });
  for (const f of findings.slice(0, 3)) {
    list.append(el('li', {}, el('span', { class: 'gain', text: gainWords(f) }), ' ', f.title));
  }
  const more = el('button', { text: findings.length > 3 ? 'All ' + findings.length + ' findings' : 'Details', attrs: { type: 'button', id: 'show-findings' },
    on: { click: () => { document.getElementById('tab-findings').click(); document.getElementById('tables').scrollIntoView(); } } });
  return el('div', { class: 'findings-box' }, el('div', { class: 'section-title', text: 'The doctor suggests' }), list, more);
}

function buildTables() {
  const host = clear(document.getElementById('tables'));
  const tabs = el('div', { class: 'tabs', attrs: { role: 'tablist' } });
  const panels = el('div', { class: 'panels' });
  host.append(tabs, panels);
  const views = [];
  const addTab = (id, label, build) => {
    const panel = el('div', { class: 'panel', attrs: { id: 'panel-' + id, role: 'tabpanel' } });
    const tab = el('button', { class: 'tab', text: label, attrs: { type: 'button', role: 'tab', id: 'tab-' + id, 'aria-controls': 'panel-' + id } });
    tab.addEventListener('click', () => select(id));
    tabs.append(tab);
    panels.append(panel);
    views.push({ id, tab, panel, update: build(panel) });
  };
  const select = id => {
    for (const v of views) {
      const on = v.id === id;
      v.tab.setAttribute('aria-selected', on ? 'true' : 'false');
      v.tab.classList.toggle('active', on);
      v.panel.hidden = !on;
    }
  };

  const titled = (panel, text) => {
    const h = el('div', { class: 'section-title' });
    panel.append(h);
    return () => { h.textContent = text(); };
  };

  addTab('files', 'Files', panel => {
    const title = titled(panel, () => FILTER.pid === null ? 'Files read, by process reads (click a header to sort: reads, seeks, wait, …)' : 'Files read by ' + who(FILTER.pid));
    const t = sortableTable({ id: 'files-table', sort: { key: 'reads', desc: true }, limit: 100, tip: fileTip,
      tie: (a, b) => b.bytes - a.bytes || a.name.localeCompare(b.name), empty: 'No files read.',
      columns: [C.text('name', 'file', 'The path (hover for details)', 'path'), C.num('reads', 'reads', null, 'Coalesced reads'),
        C.num('seeks', 'seeks', null, 'Reads not continuing the previous read of the file'), C.num('bytes', 'read', fmtBytes),
        C.num('io_wait_ns', 'I/O wait', fmtDur, 'I/O wait attributed to the file'), C.num('first_ns', 'first read', fmtSecs),
        C.num('procs', 'procs', null, 'Processes that read it'), C.num('unused', 'unused readahead', fmtBytes, 'Pages read ahead and never asked for'),
        C.num('requests', 'disk requests', null, 'Block requests of the file (all processes)')] });
    panel.append(t.node);
    return () => { title(); t.update(fileRows()); };
  });

  addTab('processes', 'Processes', panel => {
    const title = titled(panel, () => FILTER.pid === null ? 'Processes by time (click a row to filter the page to it)' : 'The selected process (click it again to show all)');
    const procs = sortableTable({ id: 'processes-table', sort: { key: 'start_ns', desc: false }, limit: 200,
      onRowClick: p => FILTER.toggle(p.pid), rowClass: p => (p.pid === FILTER.pid ? 'selected' : ''),
      tip: p => [who(p.pid), [['executable', p.exe], ['arguments', p.argv.join(' ')], ['parent', p.ppid === null ? null : who(p.ppid)], ['exit code', p.exit_code === null ? null : String(p.exit_code)]]],
      columns: [C.text('comm', 'process'), C.num('pid', 'pid', String), C.num('start_ns', 'start', fmtSecs), C.num('end_ns', 'end', fmtSecs),
        C.num('running', 'running', fmtDur, 'All threads'), C.num('runnable', 'waiting for CPU', fmtDur), C.num('io_wait', 'I/O wait', fmtDur),
        C.num('sleeping', 'asleep', fmtDur), C.num('bytes', 'read', fmtBytes), C.num('reads', 'reads'), C.num('seeks', 'seeks'), C.num('files', 'files')]
        .map(c => (['running', 'runnable', 'io_wait', 'sleeping'].includes(c.key) ? Object.assign(c, { get: p => p.time[c.key + '_ns'] }) : c)) });
    const threadsTitle = el('div', { class: 'section-title', text: 'Threads' });
    const threads = sortableTable({ id: 'threads-table', sort: { key: 'running', desc: true }, limit: 100,
      columns: [C.text('comm', 'thread'), C.num('tid', 'tid', String), C.num('pid', 'pid', String), C.num('start_ns', 'start', fmtSecs),
        C.num('running', 'running', fmtDur), C.num('runnable', 'waiting for CPU', fmtDur), C.num('io_wait', 'I/O wait', fmtDur),
        C.num('io_wait_attributed_ns', 'I/O wait on files', fmtDur), C.num('sleeping', 'asleep', fmtDur)]
        .map(c => (['running', 'runnable', 'io_wait', 'sleeping'].includes(c.key) ? Object.assign(c, { get: t => t.time[c.key + '_ns'] }) : c)) });
    panel.append(procs.node, threadsTitle, threads.node);
    return () => { title(); procs.update(processRows()); threads.update(threadRows()); };
  });

  addTab('phases', 'Phases', panel => {
    const title = titled(panel, () => FILTER.pid === null ? 'Phases of the start (dominant work between the command\'s start and ready)' : 'Phases while ' + who(FILTER.pid) + ' lived (reads, seeks and bytes: its own)');
    const t = sortableTable({ id: 'phases-table', sort: { key: 'n', desc: false },
      tip: ph => { const h = phaseTip(ph, ph.n - 1); return [h.title, h.rows]; },
      columns: [C.num('n', '#', String), C.num('start_ns', 'start', fmtSecs), C.num('len', 'length', fmtDur), C.text('kind', 'kind'),
        C.text('name', 'what', null, 'wide'), C.num('cpu_ns', 'CPU', fmtDur), C.num('io_wait_ns', 'I/O wait', fmtDur), C.num('bytes', 'read', fmtBytes),
        C.num('reads', 'reads'), C.num('seeks', 'seeks'), { key: 'top_pid', label: 'busiest process', get: ph => (ph.top_pid === null ? null : who(ph.top_pid)) }] });
    panel.append(t.node);
    return () => { title(); t.update(phaseRows()); };
  });

  addTab('path', 'Critical path', panel => {
    const title = titled(panel, () => !A.critical_path ? 'No critical path in this trace.' : FILTER.pid === null
      ? 'Critical path segments (' + fmtCount(A.critical_path.segments.length) + '), longest first'
      : 'Critical path segments in ' + who(FILTER.pid));
    const t = sortableTable({ id: 'path-table', sort: { key: 'len', desc: true }, limit: 100, empty: 'No segment of the critical path.',
      tip: s => { const h = pathTip(s, s.n); return [h.title, h.rows]; },
      columns: [C.num('start_ns', 'start', fmtSecs), C.num('end_ns', 'end', fmtSecs), C.num('len', 'length', fmtDur),
        { key: 'tid', label: 'thread', get: s => threadName(s.tid) }, { key: 'kind', label: 'doing', get: pathDoing, cls: 'wide' }] });
    panel.append(t.node);
    return () => { title(); t.update(pathRows()); };
  });

  if (A.units && A.units.length) {
    addTab('units', 'Units', panel => {
      const title = titled(panel, () => 'systemd units: ' + fmtCount(A.units.length) + ' became active; each start split into CPU, I/O wait, waits on other units and the rest (hover a row)');
      const rows = A.units.map(u => Object.assign({
        waits: u.unit_waits.reduce((s, w) => s + w.ns, 0) + u.manager_wait_ns,
        top_file: u.io_files.length ? baseName(fileName(u.io_files[0].file)) : null,
        procs: u.pids.map(who).join(' ') || 'none found',
      }, u));
      const t = sortableTable({ id: 'units-table', sort: { key: 'took_ns', desc: true }, limit: 200, tip: u => { const h = unitTip(u); return [h.title, h.rows]; },
        onRowClick: u => { if (u.pids.length) FILTER.toggle(u.pids[0]); },
        columns: [C.text('name', 'unit', null, 'wide'), C.num('activating_ns', 'started', fmtSecs), C.num('took_ns', 'took', fmtDur),
          C.num('cpu_ns', 'CPU', fmtDur, 'Wall-clock time one of its processes ran'), C.num('io_wait_ns', 'I/O wait', fmtDur), C.text('top_file', 'top file'),
          C.num('waits', 'waiting on units', fmtDur, 'Asleep until a process of another unit (or the manager) woke it'), C.num('other_ns', 'other', fmtDur),
          C.text('procs', 'processes')] });
      t.update(rows);
      panel.append(t.node);
      if (A.unit_chain) {
        const byName = new Map(A.units.map(u => [u.name, u]));
        const list = el('ol', { class: 'unit-chain', attrs: { id: 'unit-chain' } });
        for (const name of A.unit_chain.links) {
          const u = byName.get(name);
          if (!u) continue;
          const at = u.took_ns > 0 ? '@' + fmtSecs(u.activating_ns) + ' +' + fmtDur(u.took_ns) : '@' + fmtSecs(u.active_ns);
          const waits = u.unit_waits.reduce((n, w) => n + w.ns, 0) + u.manager_wait_ns;
          const split = u.took_ns > 0 ? ': CPU ' + fmtDur(u.cpu_ns) + ', I/O ' + fmtDur(u.io_wait_ns) + ', waiting on units ' + fmtDur(waits) + ', other ' + fmtDur(u.other_ns)
            + (u.pids.length ? '' : ' (no process of its own found)') : '';
          list.append(el('li', {}, el('b', { text: name }), ' ' + at + split));
        }
        panel.append(el('div', { class: 'section-title', text: 'Chain to ' + A.unit_chain.target + ' (as systemd-analyze critical-chain: each unit the After= unit that became active last before the one above started)' }), list);
      }
      return () => { title(); };
    });
  }

  if (A.cpu_profile) {
    addTab('cpu', 'CPU', panel => {
      const p = A.cpu_profile;
      const share = v => (p.samples ? (100 * v / p.samples).toFixed(1) + ' %' : '–');
      const title = titled(panel, () => 'Where the CPU went: ' + fmtCount(p.samples) + ' stack samples from the command\'s start to ready, by function');
      const t = sortableTable({ id: 'cpu-table', sort: { key: 'self_samples', desc: true }, limit: 100, empty: 'No samples before ready.',
        columns: [C.text('name', 'function', null, 'wide'), C.text('library', 'in', 'The executable or library (or the kernel)'),
          C.num('self_samples', 'self', share, 'Samples where it was the innermost frame'),
          C.num('samples', 'total', share, 'Samples with it anywhere on the stack')] });
      const flame = DATA.timeline && DATA.timeline.flamegraph;
      if (flame) {
        panel.append(el('div', { class: 'section-title', text: 'Flame graph of every sample of the recording (coldstart report --format flamegraph draws it with search and zoom)' }),
          el('img', { class: 'flamegraph', attrs: { src: flame, alt: 'Flame graph of the CPU stack samples' } }));
      }
      panel.append(t.node);
      return () => { title(); t.update(p.functions); };
    });
  }

  addTab('disks', 'Disks', panel => {
    const summary = sortableTable({ id: 'disks-table', sort: { key: 'name', desc: false },
      columns: [C.text('name', 'disk'), { key: 'kind', label: 'kind', get: d => d.kind },
        C.num('traced_read_bytes', 'read (requests)', fmtBytes), C.num('traced_read_requests', 'requests'),
        { key: 'coverage', label: 'of diskstats', num: true, fmt: v => (v === null ? '–' : (100 * v).toFixed(1) + ' %') },
        { key: 'seq', label: 'sequential', num: true, get: d => d.seeks.sequential, fmt: fmtCount },
        { key: 'fwd', label: 'forward', num: true, get: d => d.seeks.forward, fmt: fmtCount },
        { key: 'back', label: 'backward', num: true, get: d => d.seeks.backward, fmt: fmtCount },
        { key: 'far', label: 'far seeks', num: true, get: d => d.seeks.far, fmt: fmtCount },
        C.num('read_latency_median_ns', 'median latency', fmtDur), C.num('metadata_bytes', 'metadata', fmtBytes)] });
    summary.update(A.disks);
    const title = titled(panel, () => FILTER.pid === null ? 'Files by block requests' : 'Block requests of the files ' + who(FILTER.pid) + ' read');
    const files = sortableTable({ id: 'disk-files-table', sort: { key: 'requests', desc: true }, limit: 100,
      tip: r => fileTip(Object.assign({ reads: 0, seeks: 0, pages: 0, bytes: 0, io_wait_ns: 0, first_ns: null, unused: null }, fileRows().find(x => x.file === r.file) || {}, { name: r.name, file: r.file })),
      columns: [C.text('disk', 'disk'), C.text('name', 'file', null, 'path'), C.num('requests', 'requests'), C.num('bytes', 'bytes', fmtBytes),
        C.num('far_seeks', 'far seeks'), C.num('latency_ns', 'latency (sum)', fmtDur)] });
    panel.prepend(el('div', { class: 'section-title', text: 'Disks' }), summary.node);
    panel.append(files.node);
    return () => { title(); files.update(diskFileRows()); };
  });

  addTab('findings', 'Findings', panel => {
    const doctor = DATA.doctor;
    if (!doctor) {
      panel.append(el('p', { class: 'muted', text: 'This report was written without the doctor\'s findings (coldstart doctor FILE gives them).' }));
      return () => {};
    }
    const title = titled(panel, () => (FILTER.pid === null ? 'The doctor\'s findings, most estimated gain first (hover a row for the evidence and the arithmetic)'
      : 'Findings about ' + who(FILTER.pid) + ' or the files it read'));
    const t = sortableTable({ id: 'findings-table', sort: { key: 'rank', desc: false }, limit: 50,
      empty: doctor.findings.length ? 'No finding concerns this process.' : 'The doctor found nothing worth at least ' + fmtDur(doctor.min_gain_ns) + ' to suggest.',
      tip: findingTip,
      columns: [C.num('rank', '#', String), { key: 'gain', label: 'estimated gain', num: true, get: f => f.gain.ns, fmt: (v, f) => gainWords(f) },
        C.text('title', 'finding', null, 'wide'), C.text('confidence', 'confidence'),
        { key: 'audience', label: 'who can act', get: f => AUDIENCE[f.audience] || f.audience },
        C.text('suggestion', 'suggestion', null, 'wide'), { key: 'verify', label: 'verify with', cls: 'code' }] });
    const notes = el('ul', { class: 'notes' }, ...doctor.notes.map(n => el('li', { class: 'muted', text: n })));
    panel.append(t.node, notes);
    return () => { title(); t.update(findingRows()); };
  });

  addTab('warnings', 'Warnings & trace', panel => {
    const w = sortableTable({ id: 'warnings-table', sort: { key: 'code', desc: false }, empty: 'No warnings: the analysis found nothing odd in the data.',
      columns: [C.text('code', 'code'), C.num('count', 'count'), C.text('message', 'message', null, 'wide')] });
    w.update(A.warnings);
    const l = sortableTable({ id: 'losses-table', sort: { key: 'count', desc: true }, empty: 'Nothing lost.',
      columns: [C.text('source', 'source'), C.text('what', 'what'), C.num('count', 'count')] });
    l.update(A.losses.filter(x => x.count > 0));
    const t = A.trace;
    const info = el('dl', { class: 'info' });
    for (const [k, v] of [['command', commandLine()], ['source', t.source], ['written by', t.tool], ['scope', t.scope], ['root pid', t.root_pid],
      ['host', t.host], ['kernel', t.kernel], ['CPU', t.cpu_count + ' × ' + t.cpu_model], ['memory', fmtBytes(t.mem_total_bytes)],
      ['page size', fmtBytes(t.page_size)], ['clock', t.clock], ['recording', fmtSecs(t.duration_ns)], ['page cache', t.cache + (t.eviction ? ' (' + t.eviction + ')' : '')],
      ['exit', A.overview.exit ? A.overview.exit.text : null], ['partial', t.partial ? 'yes: recovered from an interrupted recording' : 'no']]) {
      if (v === null || v === undefined) continue;
      info.append(el('dt', { text: k }), el('dd', { text: String(v) }));
    }
    panel.append(el('div', { class: 'section-title', text: 'Warnings' }), w.node, el('div', { class: 'section-title', text: 'Lost data' }), l.node,
      el('div', { class: 'section-title', text: 'Trace' }), info);
    return () => {};
  });

  const refresh = () => { for (const v of views) v.update(); };
  FILTER.onChange(refresh);
  refresh();
  select('files');
}

