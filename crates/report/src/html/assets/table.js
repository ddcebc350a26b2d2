// table.js — a sortable table: click a header to sort by it (again to reverse);
// long tables show their first rows and a button to show the rest.

// spec: {id, columns: [{key, label, num, fmt(value, row), get(row), title, cls}],
//        sort: {key, desc}, tie(a, b), limit, empty, onRowClick(row), rowClass(row), tip(row) -> [title, rows]}
// Rows that sort equal keep the order of tie(), then their given order.
function sortableTable(spec) {
  const table = el('table', { class: 'data', attrs: { id: spec.id } });
  const thead = el('thead');
  const tbody = el('tbody');
  const more = el('div', { class: 'more' });
  const node = el('div', { class: 'table-wrap' }, table, more);
  table.append(thead, tbody);
  let rows = [];
  let sort = Object.assign({}, spec.sort || { key: spec.columns[0].key, desc: false });
  let showAll = false;
  const limit = spec.limit || 200;

  const value = (col, row) => (col.get ? col.get(row) : row[col.key]);

  function compare(col, a, b) {
    const va = value(col, a), vb = value(col, b);
    const na = va === null || va === undefined, nb = vb === null || vb === undefined;
    if (na || nb) return na === nb ? 0 : na ? 1 : -1; // unknowns last, either way
    const c = col.num ? va - vb : String(va).localeCompare(String(vb));
    return sort.desc ? -c : c;
  }

  function renderHead() {
    clear(thead);
    const tr = el('tr');
    for (const col of spec.columns) {
      const active = sort.key === col.key;
      const th = el('th', {
        class: (col.num ? 'num ' : '') + (active ? 'sorted' : ''),
        title: col.title || null,
        attrs: { 'aria-sort': active ? (sort.desc ? 'descending' : 'ascending') : 'none', 'data-key': col.key, scope: 'col' },
      }, el('button', { attrs: { type: 'button' }, on: { click: () => sortBy(col) } },
        col.label, el('span', { class: 'arrow', text: active ? (sort.desc ? ' ▼' : ' ▲') : '' })));
      tr.append(th);
    }
    thead.append(tr);
  }

  function sortBy(col) {
    if (sort.key === col.key) sort.desc = !sort.desc;
    else sort = { key: col.key, desc: !!col.num };
    render();
  }

  function render() {
    renderHead();
    clear(tbody);
    clear(more);
    const col = spec.columns.find(c => c.key === sort.key) || spec.columns[0];
    const sorted = rows.map((r, i) => [r, i]).sort((a, b) => compare(col, a[0], b[0]) || (spec.tie ? spec.tie(a[0], b[0]) : 0) || a[1] - b[1]).map(x => x[0]);
    const shown = showAll ? sorted : sorted.slice(0, limit);
    if (sorted.length === 0) {
      tbody.append(el('tr', { class: 'empty' }, el('td', { text: spec.empty || 'Nothing to show.', attrs: { colspan: spec.columns.length } })));
    }
    for (const row of shown) {
      const tr = el('tr', { class: spec.rowClass ? spec.rowClass(row) : '' });
      for (const c of spec.columns) {
        const v = value(c, row);
        const text = c.fmt ? c.fmt(v, row) : v === null || v === undefined ? '–' : String(v);
        tr.append(el('td', { class: (c.num ? 'num ' : '') + (c.cls || ''), text }));
      }
      if (spec.onRowClick) {
        tr.classList.add('clickable');
        tr.addEventListener('click', () => spec.onRowClick(row));
      }
      if (spec.tip) {
        tr.addEventListener('mousemove', e => { const [title, lines] = spec.tip(row); showTip(e.pageX, e.pageY, title, lines); });
        tr.addEventListener('mouseleave', hideTip);
      }
      tbody.append(tr);
    }
    if (sorted.length > limit) {
      more.append(el('button', {
        attrs: { type: 'button' },
        text: showAll ? 'Show the first ' + limit + ' rows' : 'Show all ' + fmtCount(sorted.length) + ' rows',
        on: { click: () => { showAll = !showAll; render(); } },
      }), el('span', { class: 'muted', text: showAll ? '' : ' (' + fmtCount(limit) + ' of ' + fmtCount(sorted.length) + ' shown)' }));
    }
  }

  return {
    node,
    update(newRows) {
      rows = newRows;
      render();
    },
  };
}
