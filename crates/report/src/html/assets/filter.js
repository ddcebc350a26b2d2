// filter.js — the process the whole page is filtered to (clicking a process on the
// timeline or in the processes table); every view registers to redraw on a change.

const FILTER = {
  pid: null,
  files: null, // ids of the files the selected process read
  views: [],

  onChange(fn) {
    this.views.push(fn);
  },

  // Selects `pid`, or clears the filter when it is already selected (or null).
  toggle(pid) {
    this.set(pid === this.pid ? null : pid);
  },

  set(pid) {
    this.pid = pid;
    this.files = pid === null ? null : new Set(A.file_uses.filter(u => u.pid === pid).map(u => u.file));
    renderFilterBar();
    for (const fn of this.views) fn();
  },

  // True when the row of process `pid` passes the filter.
  hasPid(pid) {
    return this.pid === null || this.pid === pid;
  },

  // True when file `id` passes the filter.
  hasFile(id) {
    return this.pid === null || (this.files !== null && this.files.has(id));
  },
};

function renderFilterBar() {
  const bar = clear(document.getElementById('filterbar'));
  if (FILTER.pid === null) {
    bar.append(el('span', { class: 'filter-hint', text: 'All processes. Click a process (timeline label or bar, or a row of the processes table) to filter everything to it.' }));
    bar.classList.remove('active');
    return;
  }
  const p = PROCS.get(FILTER.pid);
  bar.classList.add('active');
  bar.append(
    el('span', { class: 'filter-label', text: 'Filtered to process' }),
    el('span', { class: 'chip', attrs: { 'data-pid': FILTER.pid } },
      el('strong', { text: comm(FILTER.pid) }),
      el('span', { class: 'muted', text: ' pid ' + FILTER.pid }),
      p && p.exe ? el('span', { class: 'muted', text: ' · ' + p.exe }) : null),
    el('button', { class: 'clear-filter', text: 'Show all processes', attrs: { type: 'button', id: 'clear-filter' },
      on: { click: () => FILTER.set(null) } }),
  );
}
