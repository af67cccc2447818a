// The groups table, virtualised: the current view (every group, sorted, filtered) is an array,
// and only the rows in and near the scrolled window exist in the DOM, each at a fixed height in
// a body as tall as the whole view. 100,000 groups cost what 60 rows cost; a row the filter
// leaves out has no element at all. A grid of divs with ARIA table roles (aria-rowcount,
// aria-rowindex say where the window is).
const ROW_HEIGHT = 24;  // px; the style sheet reads it as --row-h
const OVERSCAN = 12;    // rows drawn above and below the window, so a small scroll shows no gap
const collator = new Intl.Collator('en', {numeric: true});

function compareValues(a, b, numeric) {
  const missingA = a === null || a === undefined || (numeric && Number.isNaN(a));
  const missingB = b === null || b === undefined || (numeric && Number.isNaN(b));
  if (missingA || missingB) return missingA === missingB ? 0 : missingA ? 1 : -1;  // last either way
  if (numeric) return a < b ? -1 : a > b ? 1 : 0;
  return collator.compare(String(a), String(b));
}

function tableCell(c, r) {
  const td = document.createElement('div');
  td.setAttribute('role', 'cell');
  const v = c.value(r);
  if (c.key === 'verdict') {
    td.className = 'verdict';
    td.appendChild(el('span', {class: 'v-' + r.group.verdict}, [r.group.verdict]));
    return td;
  }
  td.textContent = c.text ? c.text(r) : c.int ? String(v) : c.num ? fmt(v, c.digits) : (v === null || v === undefined ? '' : String(v));
  if (c.num) td.className = 'num';
  if (c.cls) td.className = c.cls;
  if (c.key === 'name') td.title = td.textContent;  // long names are cut with an ellipsis
  return td;
}
function tableRow(columns, r, i, selected) {
  const tr = document.createElement('div');
  tr.className = 'grid-row' + (r === selected ? ' selected' : '');
  tr.setAttribute('role', 'row');
  tr.setAttribute('aria-rowindex', String(i + 2));  // the header is row 1
  tr.style.top = (i * ROW_HEIGHT) + 'px';
  tr.dataset.group = r.group.id;
  tr.dataset.run = runKey(r.run);
  tr.dataset.verdict = r.group.verdict;
  tr.dataset.sqnr = r.sqnr === null ? '' : String(r.sqnr);
  for (const c of columns) tr.appendChild(tableCell(c, r));
  tr.qdRow = r;
  return tr;
}

// columns: [{key, width (em, 0: the rest), label, value(row), num, int, digits, text(row)}].
// onSort(key, dir) runs after a header click sorted the view.
function createGroupTable(columns, rows, onSelect, onSort) {
  const wrap = document.querySelector('.table-wrap');
  const table = document.getElementById('groups');
  const head = document.getElementById('groups-head');
  const body = document.getElementById('groups-body');
  table.style.setProperty('--columns', columns.map(c => c.width ? c.width + 'em' : 'minmax(11em, 1fr)').join(' '));
  table.style.setProperty('--row-h', ROW_HEIGHT + 'px');
  const state = {sorted: rows, view: rows, keep: null, sort: {key: 'order', dir: 'asc'}, selected: null, window: null};

  for (const c of columns) {
    const th = el('div', {'data-key': c.key, role: 'columnheader', class: c.num ? 'num' : ''}, [c.label]);
    th.addEventListener('click', () => {
      sortBy(c.key, state.sort.key === c.key && state.sort.dir === 'asc' ? 'desc' : 'asc');
      onSort();
    });
    head.appendChild(th);
  }
  // The rows of the scrolled window, replaced whole when the window moves by a row or more.
  function render(force) {
    const top = wrap.scrollTop - body.offsetTop;
    const first = Math.max(0, Math.floor(top / ROW_HEIGHT) - OVERSCAN);
    const last = Math.min(state.view.length, Math.ceil((top + wrap.clientHeight) / ROW_HEIGHT) + OVERSCAN);
    if (!force && state.window && state.window[0] === first && state.window[1] === last) return;
    state.window = [first, last];
    const fragment = document.createDocumentFragment();
    for (let i = first; i < last; ++i) fragment.appendChild(tableRow(columns, state.view[i], i, state.selected));
    body.replaceChildren(fragment);
  }
  function refresh() {
    body.style.height = (state.view.length * ROW_HEIGHT) + 'px';
    table.setAttribute('aria-rowcount', String(state.view.length + 1));
    render(true);
  }
  wrap.addEventListener('scroll', () => render(false));
  window.addEventListener('resize', () => render(false));
  body.addEventListener('click', event => {  // one listener for every row
    const tr = event.target.closest('[role=row]');
    if (tr && tr.qdRow) onSelect(tr.qdRow);
  });

  // Sorts every row by a column (ties and missing values keep op order, missing last); the
  // filter then runs on the sorted array.
  function sortBy(key, dir) {
    const column = columns.find(c => c.key === key);
    if (!column) return;
    state.sort = {key, dir};
    const sign = dir === 'desc' ? -1 : 1, numeric = column.num || key === 'verdict';
    const values = rows.map(column.value), index = rows.map((_, i) => i);
    index.sort((a, b) => {
      const c = compareValues(values[a], values[b], numeric);
      if (c !== 0 && (missing(values[a]) || missing(values[b]))) return c;
      return c !== 0 ? sign * c : a - b;
    });
    state.sorted = index.map(i => rows[i]);
    for (const th of head.children) {
      th.setAttribute('aria-sort', th.dataset.key === key ? (dir === 'asc' ? 'ascending' : 'descending') : 'none');
    }
    applyKeep();
  }
  function applyKeep() {
    state.view = state.keep ? state.sorted.filter(state.keep) : state.sorted;
    refresh();
  }
  return {
    sortBy,
    sortState: () => state.sort,
    // Keeps the rows KEEP accepts (null: all); returns how many.
    filter(keep) { state.keep = keep; applyKeep(); return state.view.length; },
    setSelected(r) {
      state.selected = r;
      for (const tr of body.children) tr.classList.toggle('selected', tr.qdRow === r);
    },
    // Scrolls the table (not the page) so that R's row is in its window, when the view has it.
    reveal(r) {
      const i = state.view.indexOf(r);
      if (i < 0) return;
      const top = body.offsetTop + i * ROW_HEIGHT;
      if (top < wrap.scrollTop + body.offsetTop || top + ROW_HEIGHT > wrap.scrollTop + wrap.clientHeight) {
        wrap.scrollTop = top - wrap.clientHeight / 2;
        render(false);
      }
    },
  };
}
