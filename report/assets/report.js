// qnn-debug HTML report. Everything from the report is data: it reaches the page through
// textContent and attribute setters only, never as markup.
'use strict';
(function () {
  const started = performance.now();
  const doc = JSON.parse(document.getElementById('qd-data').textContent);
  // Every figure of a pair, declared once in C++ (compare/metric_fields.h): key, label, unit, kind.
  const metricFields = JSON.parse(document.getElementById('qd-metrics').textContent);
  const SVG = 'http://www.w3.org/2000/svg';

  // ---- small helpers ---------------------------------------------------------------------
  function num(v) {  // report numbers: JSON numbers or "inf" / "-inf" / "nan"
    if (typeof v === 'number') return v;
    if (v === 'inf') return Infinity;
    if (v === '-inf') return -Infinity;
    return NaN;
  }
  function fmt(v, digits) {
    if (v === null || v === undefined) return '';
    const x = num(v);
    if (!Number.isFinite(x)) return String(v);
    if (x !== 0 && (Math.abs(x) >= 1e6 || Math.abs(x) < 1e-3)) return x.toExponential(3);
    return x.toFixed(digits === undefined ? 3 : digits);
  }
  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    if (attrs) for (const k in attrs) node.setAttribute(k, attrs[k]);
    for (const c of children || []) {
      node.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    }
    return node;
  }
  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const k in attrs) node.setAttribute(k, attrs[k]);
    return node;
  }
  function kvTable(rows) {
    return el('table', {class: 'kv'}, rows.filter(r => r).map(([k, v]) =>
      el('tr', null, [el('th', null, [k]), el('td', null, [v === null || v === undefined ? '' : typeof v === 'object' ? v : String(v)])])));
  }
  function verdictBadge(verdict) {
    return el('span', {class: 'badge ' + verdict}, [verdict]);
  }
  function dims(d) { return '[' + d.join(', ') + ']'; }

  // ---- the rows: one per group of every run -------------------------------------------------
  const rows = [];
  for (const run of doc.runs) {
    for (const group of run.groups) {
      const first = group.pairs[0] || null;
      rows.push({run, group, first,
        name: first ? first.reference.name : '',
        dtype: first ? first.device.dtype : '',
        shape: first ? dims(first.reference.dims) : '',
        sqnr: group.sqnr_db === null ? null : num(group.sqnr_db),
        introduced: group.introduced_db === null ? null : num(group.introduced_db),
        metrics: first && first.metrics ? first.metrics : null,
        parts: group.parts || null});
    }
  }
  // A diff with --sim / --isolated: its error parts (docs/metrics.md, "Quantization or kernel?").
  const hasParts = rows.some(r => r.parts);
  function partSqnr(r, part) {
    const p = r.parts && r.parts[part];
    return p && p.sqnr_db !== null ? num(p.sqnr_db) : null;
  }
  function attributionText(a) {
    return a && a.kind !== 'none' ? a.kind + (a.inherited ? ', inherited' : '') + ' (by ' +
      fmt(a.margin_db, 1) + ' dB)' : '';
  }
  const partColumns = [
    {key: 'quantization_sqnr_db', width: 5, label: 'quant. dB', value: r => partSqnr(r, 'quantization'), num: true, digits: 2},
    {key: 'kernel_sqnr_db', width: 5, label: 'kernel dB', value: r => partSqnr(r, 'kernel'), num: true, digits: 2},
    {key: 'isolated_sqnr_db', width: 5.5, label: 'isolated dB', value: r => partSqnr(r, 'isolated'), num: true, digits: 2},
    {key: 'attribution', width: 9, label: 'attribution', value: r => r.parts ? attributionText(r.parts.attribution) : ''},
  ];

  // The overview's metric columns come from the declarations; these only tune their layout.
  const overviewWidths = {max_abs: 6, cosine: 5.5, lsb_mae: 5.5, saturation: 7};
  const overviewDigits = {cosine: 5, saturation: 4};
  // Widths in em of the table's font; the name column (width 0) takes what is left, at least
  // 12em. Together they fit a 1,400 px window (tests/browser checks it).
  const columns = [
    {key: 'order', width: 4.5, label: '#', value: r => r.group.order, num: true, int: true},
    {key: 'run', width: 3, label: 'run', value: r => r.run.device_run, num: true, int: true},
    {key: 'id', width: 5, label: 'group', value: r => r.group.id},
    {key: 'name', width: 0, label: 'reference tensor', value: r => r.name, cls: 'name'},
    {key: 'op_type', width: 7, label: 'op type', value: r => r.group.op_type},
    {key: 'dtype', width: 9.5, label: 'device dtype', value: r => r.dtype},
    {key: 'shape', width: 7.5, label: 'shape', value: r => r.shape},
    {key: 'sqnr_db', width: 5, label: 'SQNR dB', value: r => r.sqnr, num: true, digits: 2},
    {key: 'introduced_db', width: 7.5, label: 'introduced dB', value: r => r.introduced, num: true, digits: 2},
    // With error parts their columns take the overview metrics' place (those stay in the details).
    ...(hasParts ? partColumns : metricFields.filter(f => f.overview).map(f => ({key: f.key, width: overviewWidths[f.key] || 6,
      label: f.label, num: true, digits: overviewDigits[f.key],
      value: r => r.metrics && r.metrics[f.key] !== null ? num(r.metrics[f.key]) : null}))),
    {key: 'verdict', width: 5, label: 'verdict', value: r => ({fail: 0, warn: 1, pass: 2})[r.group.verdict]},
    {key: 'flags', width: 9, label: 'flags', value: r => r.group.flags.join(' ')},
  ];

  // ---- header, summary and first divergence -----------------------------------------------
  const summary = doc.summary;
  const badge = document.getElementById('verdict');
  badge.textContent = summary.verdict;
  badge.classList.add(summary.verdict);
  document.getElementById('tool-version').textContent = 'qnn-debug ' + doc.tool_version;

  function storeRows(store) {
    const runs = store.runs.map(r => r.id + ' ' + r.name + (r.complete ? '' : ' (incomplete)')).join(', ');
    return kvTable([['path', store.path], ['producer', store.producer], ['backend', store.backend],
      ['SoC', store.soc], ['model', store.model], ['runs', runs]]);
  }
  function policyTable(policy) {
    const rules = policy.rules.map((rule, i) => el('tr', null, [
      el('td', null, [String(i)]), el('td', null, [rule.op_type || 'any']),
      el('td', null, [rule.name || 'any']), el('td', null, [rule.dtype || 'any']),
      el('td', {class: 'num'}, [fmt(rule.fail_below_db, 1)]),
      el('td', {class: 'num'}, [fmt(rule.warn_below_db, 1)])]));
    return el('div', null, [
      el('p', null, ['Fail below ' + fmt(policy.default.fail_below_db, 1) + ' dB, warn below ' +
        fmt(policy.default.warn_below_db, 1) + ' dB' + (rules.length ? ', except where a rule applies (the first that matches):' : '.')]),
      rules.length ? el('table', null, [el('tr', null, ['rule', 'op type', 'name pattern', 'dtype', 'fail below', 'warn below'].map(h => el('th', null, [h])))].concat(rules)) : el('span')]);
  }
  const summarySection = document.getElementById('summary');
  // The final output read as a classifier: the run where the device agrees least.
  function classifierText() {
    let worst = null;
    for (const run of doc.runs) {
      const c = run.classification;
      if (c && c.top1_agreement !== null && (!worst || num(c.top1_agreement) < num(worst.top1_agreement))) worst = c;
    }
    if (!worst) return null;
    const pct = v => (100 * num(v)).toFixed(1) + '%';
    return worst.tensor + ' (' + worst.rows + ' rows x ' + worst.classes + ' classes): top-1 ' +
      pct(worst.top1_agreement) + (worst.top5_agreement !== null ? ', top-5 ' + pct(worst.top5_agreement) : '');
  }
  const summaryRows = [
    ['verdict', verdictBadge(summary.verdict)],
    ['runs compared', summary.runs_compared],
    ['groups', summary.groups + ' (' + summary.pass + ' pass, ' + summary.warn + ' warn, ' + summary.fail + ' fail)'],
    ['compared pairs', summary.compared_pairs],
    ['unmatched', summary.unmatched_reference + ' reference, ' + summary.unmatched_device + ' device'],
  ];
  for (const reason of summary.verdict_reasons || []) summaryRows.push(['fails because', reason]);
  const classifier = classifierText();
  if (classifier) summaryRows.push(['classifier agreement', classifier]);
  summarySection.appendChild(kvTable(summaryRows));
  summarySection.appendChild(el('div', {class: 'cols'}, [
    el('div', null, [el('h3', null, ['Reference store']), storeRows(doc.reference)]),
    el('div', null, [el('h3', null, ['Device store']), storeRows(doc.device)]),
    ...(doc.simulation ? [el('div', null, [el('h3', null, ['Simulation store']), storeRows(doc.simulation)])] : []),
    ...(doc.isolated ? [el('div', null, [el('h3', null, ['Replay store (isolated)']), storeRows(doc.isolated)])] : []),
    el('div', null, [el('h3', null, ['Policy']), policyTable(doc.policy)])]));

  function rowOf(runId, groupId) {
    return rows.find(r => r.run.device_run === runId && r.group.id === groupId);
  }
  const callout = document.getElementById('first-divergence');
  const fd = summary.first_divergence;
  if (fd) {
    const row = rowOf(fd.device_run, fd.group);
    const intro = row && row.introduced !== null ? ', introduced ' + fmt(row.introduced, 2) + ' dB' : '';
    callout.appendChild(el('strong', null, ['First divergence: ']));
    callout.appendChild(el('span', {id: 'first-divergence-group'}, [fd.group]));
    callout.appendChild(document.createTextNode(' ' + (row ? row.name : '') + ' (device run ' + fd.device_run +
      ') SQNR ' + fmt(fd.sqnr_db, 2) + ' dB' + intro + (fd.flags.length ? ' [' + fd.flags.join(', ') + ']' : '') + ' '));
    const link = el('a', {href: '#details'}, ['details']);
    link.addEventListener('click', () => row && select(row));
    callout.appendChild(link);
  } else {
    callout.classList.add('none');
    callout.textContent = 'No divergence: every compared group passes the policy\'s fail threshold.';
  }
  // Where each error part starts: the first run's, as the summary says.
  const partsFirst = summary.parts_first_divergence;
  if (partsFirst) {
    const lines = [['quantization', 'REF vs SIM'], ['kernel', 'SIM vs DEV'], ['isolated', 'ISO vs DEV']]
      .filter(([part]) => doc.runs.some(run => run.parts && run.parts[part]))
      .map(([part, what]) => {
        const first = partsFirst[part];
        const row = first ? rowOf(first.device_run, first.group) : null;
        return el('li', {id: 'part-' + part}, [el('strong', null, [part + ' (' + what + '): ']),
          first ? first.group + ' ' + (row ? row.name : '') + ', SQNR ' + fmt(first.sqnr_db, 2) + ' dB' : 'no divergence']);
      });
    callout.appendChild(el('ul', {class: 'parts'}, lines));
  }

  // ---- chart: SQNR per group along the op order, threshold lines ---------------------------
  function drawChart(runId) {
    const box = document.getElementById('chart');
    box.textContent = '';
    const series = rows.filter(r => r.run.device_run === runId && r.sqnr !== null && !Number.isNaN(r.sqnr));
    if (!series.length) { box.appendChild(el('p', {class: 'muted'}, ['Nothing compared.'])); return; }
    const finite = series.map(r => r.sqnr).filter(Number.isFinite);
    const fail = doc.policy.default.fail_below_db, warn = doc.policy.default.warn_below_db;
    const top = Math.max(warn + 10, ...finite.map(x => Math.min(x, 200))) + 5;
    const bottom = Math.min(0, ...finite.map(x => Math.max(x, -50)));
    const W = 1000, H = 260, L = 45, R = 10, T = 10, B = 30;
    const x = i => L + (series.length === 1 ? 0 : i * (W - L - R) / (series.length - 1));
    const y = v => T + (H - T - B) * (1 - (Math.max(bottom, Math.min(top, v)) - bottom) / (top - bottom));
    const chart = svg('svg', {viewBox: '0 0 ' + W + ' ' + H, width: '100%', role: 'img', 'aria-label': 'SQNR per group'});
    chart.appendChild(svg('line', {x1: L, y1: T, x2: L, y2: H - B, stroke: '#888'}));
    for (let v = Math.ceil(bottom / 10) * 10; v <= top; v += 10) {
      chart.appendChild(svg('line', {x1: L, y1: y(v), x2: W - R, y2: y(v), stroke: '#eee'}));
      const label = svg('text', {x: L - 5, y: y(v) + 4, 'text-anchor': 'end'});
      label.textContent = String(v);
      chart.appendChild(label);
    }
    for (const [v, colour, name] of [[fail, '#c62828', 'fail'], [warn, '#b26a00', 'warn']]) {
      chart.appendChild(svg('line', {x1: L, y1: y(v), x2: W - R, y2: y(v), stroke: colour, 'stroke-dasharray': '6 4'}));
      const label = svg('text', {x: W - R - 4, y: y(v) - 4, 'text-anchor': 'end', fill: colour});
      label.textContent = name + ' < ' + v + ' dB';
      chart.appendChild(label);
    }
    chart.appendChild(svg('polyline', {points: series.map((r, i) => x(i) + ',' + y(r.sqnr)).join(' '),
      fill: 'none', stroke: '#3465a4', 'stroke-width': 1.5}));
    const colours = {fail: '#c62828', warn: '#b26a00', pass: '#2e7d32'};
    if (series.length <= 2000) {  // markers help on small graphs and only cost on large ones
      series.forEach((r, i) => {
        const dot = svg('circle', {cx: x(i), cy: y(r.sqnr), r: 3, fill: colours[r.group.verdict]});
        const tip = svg('title', {});
        tip.textContent = r.group.id + ' ' + r.name + ': ' + fmt(r.sqnr, 2) + ' dB';
        dot.appendChild(tip);
        dot.addEventListener('click', () => select(r));
        chart.appendChild(dot);
      });
    }
    const axis = svg('text', {x: (L + W) / 2, y: H - 8, 'text-anchor': 'middle'});
    axis.textContent = 'groups in op order (device run ' + runId + '); +inf SQNR (exact) is drawn at the top';
    chart.appendChild(axis);
    box.appendChild(chart);
  }

  // ---- table -------------------------------------------------------------------------------
  const head = document.getElementById('groups-head');
  const body = document.getElementById('groups-body');
  document.getElementById('groups').style.setProperty('--columns',
    columns.map(c => c.width ? c.width + 'em' : 'minmax(12em, 1fr)').join(' '));
  for (const c of columns) {
    const th = el('div', {'data-key': c.key, role: 'columnheader', class: c.num ? 'num' : ''}, [c.label]);
    th.addEventListener('click', () => sortBy(c.key, sortState.key === c.key && sortState.dir === 'asc' ? 'desc' : 'asc'));
    head.appendChild(th);
  }
  const fragment = document.createDocumentFragment();
  for (const r of rows) {
    const tr = document.createElement('div');
    tr.className = 'grid-row';
    tr.setAttribute('role', 'row');
    tr.dataset.group = r.group.id;
    tr.dataset.run = String(r.run.device_run);
    tr.dataset.verdict = r.group.verdict;
    tr.dataset.sqnr = r.sqnr === null ? '' : String(r.sqnr);
    for (const c of columns) {
      const td = document.createElement('div');
      td.setAttribute('role', 'cell');
      const v = c.value(r);
      if (c.key === 'verdict') {
        td.className = 'verdict';
        td.appendChild(el('span', {class: 'v-' + r.group.verdict}, [r.group.verdict]));
      } else {
        td.textContent = c.int ? String(v) : c.num ? fmt(v, c.digits) : (v === null ? '' : String(v));
        if (c.num) td.className = 'num';
        if (c.cls) td.className = c.cls;
        if (c.key === 'name') td.title = td.textContent;  // long names are cut with an ellipsis
      }
      tr.appendChild(td);
    }
    r.tr = tr;
    tr.qdRow = r;
    r.search = (r.group.id + ' ' + r.name + ' ' + r.group.op_type + ' ' + r.group.flags.join(' ') + ' ' +
      (r.group.hints || []).map(h => h.kind).join(' ') + ' ' + r.dtype).toLowerCase();
    fragment.appendChild(tr);
  }
  body.appendChild(fragment);
  body.addEventListener('click', event => {  // one listener for every row
    const tr = event.target.closest('[role=row]');
    if (tr && tr.qdRow) select(tr.qdRow);
  });

  const sortState = {key: 'order', dir: 'asc'};
  function compareValues(a, b, numeric) {
    const missingA = a === null || a === undefined || (numeric && Number.isNaN(a));
    const missingB = b === null || b === undefined || (numeric && Number.isNaN(b));
    if (missingA || missingB) return missingA === missingB ? 0 : missingA ? 1 : -1;  // last either way
    if (numeric) return a < b ? -1 : a > b ? 1 : 0;
    return String(a).localeCompare(String(b));
  }
  function sortBy(key, dir) {
    const column = columns.find(c => c.key === key);
    if (!column) return;
    sortState.key = key;
    sortState.dir = dir;
    const sign = dir === 'desc' ? -1 : 1;
    const order = rows.map((r, i) => [r, i]);
    order.sort((p, q) => {
      const c = compareValues(column.value(p[0]), column.value(q[0]), column.num || key === 'verdict');
      const missing = v => v === null || v === undefined || Number.isNaN(v);
      if (c !== 0 && (missing(column.value(p[0])) || missing(column.value(q[0])))) return c;
      return c !== 0 ? sign * c : p[1] - q[1];
    });
    const frag = document.createDocumentFragment();
    for (const [r] of order) frag.appendChild(r.tr);
    body.appendChild(frag);
    for (const th of head.children) {
      th.setAttribute('aria-sort', th.dataset.key === key ? (dir === 'asc' ? 'ascending' : 'descending') : 'none');
    }
    writeHash();
  }

  const filterInput = document.getElementById('filter');
  const verdictFilter = document.getElementById('verdict-filter');
  const runFilter = document.getElementById('run-filter');
  for (const run of doc.runs) runFilter.appendChild(el('option', {value: String(run.device_run)}, [String(run.device_run)]));
  function applyFilter() {
    const text = filterInput.value.trim().toLowerCase();
    const verdict = verdictFilter.value, run = runFilter.value;
    let shown = 0;
    for (const r of rows) {
      const visible = (!text || r.search.includes(text)) && (!verdict || r.group.verdict === verdict) &&
        (!run || String(r.run.device_run) === run);
      r.tr.hidden = !visible;
      shown += visible ? 1 : 0;
    }
    document.getElementById('shown-count').textContent = shown + ' of ' + rows.length + ' groups shown';
    writeHash();
  }
  let filterTimer = 0;
  filterInput.addEventListener('input', () => { clearTimeout(filterTimer); filterTimer = setTimeout(applyFilter, 120); });
  verdictFilter.addEventListener('change', applyFilter);
  runFilter.addEventListener('change', () => { applyFilter(); drawChart(runFilter.value === '' ? doc.runs[0].device_run : Number(runFilter.value)); });

  // The view lives in the URL hash (#sort=sqnr_db&dir=asc&filter=conv&verdict=fail&run=0&group=h3),
  // so a link reproduces what an engineer is looking at.
  let restoring = false;
  function writeHash() {
    if (restoring) return;
    const p = new URLSearchParams();
    if (sortState.key !== 'order' || sortState.dir !== 'asc') { p.set('sort', sortState.key); p.set('dir', sortState.dir); }
    if (filterInput.value) p.set('filter', filterInput.value);
    if (verdictFilter.value) p.set('verdict', verdictFilter.value);
    if (runFilter.value) p.set('run', runFilter.value);
    if (selected) p.set('group', selected.group.id);
    try {  // some browsers refuse history changes on file: pages; the view still works
      history.replaceState(null, '', p.toString() ? '#' + p.toString() : location.pathname + location.search);
    } catch (e) { /* keep the current URL */ }
  }
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    restoring = true;
    filterInput.value = p.get('filter') || '';
    verdictFilter.value = p.get('verdict') || '';
    runFilter.value = p.get('run') || '';
    applyFilter();
    sortBy(p.get('sort') || 'order', p.get('dir') === 'desc' ? 'desc' : 'asc');
    const group = p.get('group');
    const target = group ? rows.find(r => r.group.id === group && (!runFilter.value || String(r.run.device_run) === runFilter.value)) : null;
    restoring = false;
    return target;
  }

  // ---- details of one group ----------------------------------------------------------------
  let selected = null;
  function quantText(q) {
    if (!q) return 'none (float)';
    const s = q.scales, o = q.offsets;
    const head = q.convention + ', ' + q.bitwidth + '-bit, ';
    if (s.length === 1) return head + 'per-tensor: scale ' + fmt(s[0], 6) + ', offset ' + o[0];
    const scales = s.map(num);
    return head + 'per-axis (axis ' + q.axis + ', ' + s.length + ' channels): scale ' +
      fmt(Math.min(...scales), 6) + ' .. ' + fmt(Math.max(...scales), 6);
  }
  function encodingText(problems) {  // the encoding lint's findings (docs/metrics.md, section 7)
    if (!problems || !problems.length) return 'sound';
    return problems.map(p => p.problem + ' (scale ' + fmt(p.scale, 6) +
      (p.channels > 1 ? ', ' + p.channels + ' channels' : '') + ')').join('; ');
  }
  function tensorTable(t) {
    return kvTable([['name', t.name], ['handles', t.handles.join(', ')], ['output index', t.output_index],
      ['dtype', t.dtype], ['dims', dims(t.dims)], ['axis order', t.axis_order.length ? dims(t.axis_order) : 'as stored'],
      ['quantization', quantText(t.quantization)],
      ['encoding', encodingText(t.encoding_problems)],
      ['stats', 'min ' + fmt(t.stats.min) + ', max ' + fmt(t.stats.max) + ', mean ' + fmt(t.stats.mean) +
        ', NaN ' + t.stats.nan_count + ', Inf ' + t.stats.inf_count]]);
  }
  function histogram(h) {
    const counts = h.counts, edges = h.edges;
    const W = 520, H = 150, B = 28, max = Math.max(1, ...counts);
    const chart = svg('svg', {viewBox: '0 0 ' + W + ' ' + H, width: W, height: H, role: 'img', 'aria-label': 'error histogram'});
    const bw = W / counts.length;
    counts.forEach((c, i) => {
      const h2 = c ? Math.max(1, (H - B) * Math.log1p(c) / Math.log1p(max)) : 0;
      const bar = svg('rect', {x: i * bw + 1, y: H - B - h2, width: bw - 2, height: h2, fill: '#3465a4'});
      const tip = svg('title', {});
      tip.textContent = '[' + fmt(edges[i]) + ', ' + fmt(edges[i + 1]) + '): ' + c;
      bar.appendChild(tip);
      chart.appendChild(bar);
    });
    const left = svg('text', {x: 0, y: H - 8});
    left.textContent = '|e| < ' + fmt(edges[1]);
    const right = svg('text', {x: W, y: H - 8, 'text-anchor': 'end'});
    right.textContent = fmt(edges[edges.length - 1]) + ' (log count, octave bins)';
    chart.appendChild(left);
    chart.appendChild(right);
    return chart;
  }
  function metricsTable(m) {
    const rowsKv = metricFields.filter(f => f.kind === 'real').map(f => [f.key, fmt(m[f.key], 6)]);
    rowsKv.push(['max |e| at', dims(m.max_abs_coordinates)]);
    rowsKv.push(['elements / finite pairs', m.elements + ' / ' + m.n]);
    rowsKv.push(['NaN / Inf (reference)', m.ref_nan + ' / ' + m.ref_inf]);
    rowsKv.push(['NaN / Inf (device)', m.dev_nan + ' / ' + m.dev_inf]);
    const worstChannel = m.worst_channel === null ? undefined : m.channels[m.worst_channel];  // an edited report may point past the list
    if (worstChannel) rowsKv.push(['worst channel', m.worst_channel + ' (' + fmt(worstChannel.sqnr_db, 2) + ' dB)']);
    return kvTable(rowsKv);
  }
  function worstTable(worst) {
    return el('table', null, [el('tr', null, ['coordinates', 'reference', 'device', '|e|'].map(h => el('th', null, [h])))]
      .concat(worst.map(w => el('tr', null, [el('td', null, [dims(w.coordinates)]),
        el('td', {class: 'num'}, [fmt(w.reference, 6)]), el('td', {class: 'num'}, [fmt(w.device, 6)]),
        el('td', {class: 'num'}, [fmt(w.abs_error, 6)])]))));
  }
  function channelTable(channels) {
    const worst = channels.map((c, i) => [i, c]).sort((a, b) => num(a[1].sqnr_db) - num(b[1].sqnr_db)).slice(0, 10);
    return el('table', null, [el('tr', null, ['channel', 'SQNR dB', 'MAE', 'max |e|'].map(h => el('th', null, [h])))]
      .concat(worst.map(([i, c]) => el('tr', null, [el('td', {class: 'num'}, [String(i)]),
        el('td', {class: 'num'}, [fmt(c.sqnr_db, 2)]), el('td', {class: 'num'}, [fmt(c.mae)]),
        el('td', {class: 'num'}, [fmt(c.max_abs)])]))));
  }
  function pairBlock(pair) {
    const block = el('div', {class: 'pair'}, [
      el('h3', null, ['Output ' + pair.output_index + ' \u2014 matched by ' + pair.match]),
      el('div', {class: 'cols'}, [
        el('div', null, [el('h3', null, ['Reference']), tensorTable(pair.reference)]),
        el('div', null, [el('h3', null, ['Device']), tensorTable(pair.device)])])]);
    if (pair.layout) {
      block.appendChild(el('p', null, ['Layout: ' + (pair.layout.axis_order.length ? 'device axes ' + dims(pair.layout.axis_order) : 'same order') +
        (pair.layout.inferred ? ' (inferred from the shapes)' : '') + (pair.layout.reshaped ? ', size-1 axes differ' : '')]));
    }
    if (pair.error) block.appendChild(el('p', {class: 'callout'}, ['Not compared: ' + pair.error]));
    const m = pair.metrics;
    if (m) {
      block.appendChild(el('div', {class: 'cols'}, [
        el('div', null, [el('h3', null, ['Metrics']), metricsTable(m)]),
        el('div', null, [el('h3', null, ['Error histogram']), histogram(m.error_histogram),
          el('h3', null, ['Largest errors']), worstTable(m.worst || [])])]));
      if (m.channels.length) {
        const along = (m.channel_axis === null || m.channel_axis === undefined ? '' : 'axis ' + m.channel_axis + ', ') + m.channels.length + ' channels';
        block.appendChild(el('div', null, [el('h3', null, ['Worst channels (' + along + ')']), channelTable(m.channels)]));
      }
    }
    return block;
  }
  // The group's causes, most explaining first (docs/metrics.md, Hints): kind and sentence.
  function hintList(hints) {
    if (!hints.length) return el('span', {class: 'muted'}, ['no cause found']);
    return el('ul', {class: 'hints'}, hints.map(h => el('li', null, [
      el('span', {class: 'flag'}, [h.kind]), ' ' + h.sentence])));
  }
  // A group's error parts as detail rows: each part's SQNR, verdict and LSB, then the attribution.
  function partRows(parts) {
    const out = [['total (REF vs DEV)', verdictBadge(parts.total_verdict)]];
    for (const [part, what] of [['quantization', 'REF vs SIM'], ['kernel', 'SIM vs DEV'], ['isolated', 'ISO vs DEV']]) {
      const p = parts[part];
      if (!p) continue;
      out.push([part + ' (' + what + ')', el('span', null, [verdictBadge(p.verdict), ' SQNR ' + fmt(p.sqnr_db, 2) + ' dB' +
        (p.introduced_db !== null ? ', introduced ' + fmt(p.introduced_db, 2) + ' dB' : '') +
        (p.lsb_max !== null ? ', max ' + fmt(p.lsb_max, 2) + ' LSB' : '')])]);
    }
    if (parts.attribution) out.push(['attribution', attributionText(parts.attribution) || 'none']);
    return out;
  }
  function select(r) {
    if (selected) selected.tr.classList.remove('selected');
    selected = r;
    r.tr.classList.add('selected');
    const box = document.getElementById('details');
    box.textContent = '';
    box.appendChild(el('h2', null, ['Details: group ' + r.group.id + ' (device run ' + r.run.device_run + ')']));
    box.appendChild(kvTable([['verdict', verdictBadge(r.group.verdict)], ['op type', r.group.op_type || 'unknown'],
      ['handles', r.group.handles.join(', ')], ['SQNR', fmt(r.group.sqnr_db, 2) + ' dB'],
      ['input SQNR', r.group.input_sqnr_db === null ? 'n/a' : fmt(r.group.input_sqnr_db, 2) + ' dB'],
      ['introduced', r.group.introduced_db === null ? 'n/a' : fmt(r.group.introduced_db, 2) + ' dB'],
      ['flags', el('span', null, r.group.flags.map(f => el('span', {class: 'flag'}, [f])))],
      ['why', hintList(r.group.hints || [])],
      ['policy rule', r.group.policy_rule < 0 ? 'defaults' : String(r.group.policy_rule)]]
      .concat(r.parts ? partRows(r.parts) : [])));
    for (const pair of r.group.pairs) box.appendChild(pairBlock(pair));
    writeHash();
  }

  // ---- across runs: per group, the worst run and the mean ----------------------------------
  if (doc.runs.length > 1 && doc.aggregate.length) {
    const across = document.getElementById('across-runs');
    across.hidden = false;
    const worstFirst = doc.aggregate.slice().sort((a, b) => num(a.worst_sqnr_db) - num(b.worst_sqnr_db));
    across.appendChild(el('p', {class: 'muted'}, ['Each group over the ' + doc.runs.length + ' compared runs, worst first.']));
    across.appendChild(listTable(['group', 'worst SQNR dB', 'worst device run', 'mean SQNR dB'], worstFirst,
      a => [a.id, fmt(a.worst_sqnr_db, 2), a.worst_device_run, fmt(a.mean_sqnr_db, 2)], 2000));
  }

  // ---- unmatched, timing, memory, warnings -------------------------------------------------
  function listTable(headers, items, cells, limit) {
    const shown = items.slice(0, limit);
    const table = el('table', null, [el('tr', null, headers.map(h => el('th', null, [h])))]
      .concat(shown.map(item => el('tr', null, cells(item).map(c => el('td', null, [String(c)]))))));
    const box = el('div', null, [table]);
    if (items.length > limit) box.appendChild(el('p', {class: 'muted'}, [(items.length - limit) + ' more in the JSON report.']));
    return box;
  }
  const unmatched = document.getElementById('unmatched');
  const allUnmatched = [];
  for (const run of doc.runs) for (const u of run.unmatched) allUnmatched.push([run.device_run, u]);
  unmatched.appendChild(allUnmatched.length ? listTable(['device run', 'side', 'name', 'reason'], allUnmatched,
    ([run, u]) => [run, u.side, u.name, u.reason], 5000) : el('p', {class: 'muted'}, ['None: every tensor found its counterpart.']));

  const profile = document.getElementById('profile');
  let anyProfile = false;
  for (const side of ['device', 'reference']) {
    const store = doc[side];
    if (store.profile_events.length) {
      anyProfile = true;
      const events = store.profile_events.slice().sort((a, b) => (b.end - b.start) - (a.end - a.start));
      profile.appendChild(el('h3', null, ['Profile events (' + side + '), longest first']));
      profile.appendChild(listTable(['run', 'name', 'handles', 'duration', 'unit'], events,
        e => [e.run === null ? '' : e.run, e.name, e.handles.join(', '), e.end - e.start, e.unit], 2000));
    }
    if (store.memory_checkpoints.length) {
      anyProfile = true;
      profile.appendChild(el('h3', null, ['Memory checkpoints (' + side + ')']));
      profile.appendChild(listTable(['run', 'label', 'bytes'], store.memory_checkpoints,
        c => [c.run === null ? '' : c.run, c.label, c.bytes.toLocaleString('en-US')], 2000));
    }
  }
  if (!anyProfile) profile.appendChild(el('p', {class: 'muted'}, ['The stores carry no profile events or memory checkpoints.']));

  const warnings = document.getElementById('warnings');
  if (doc.warnings.length) {
    warnings.appendChild(el('ul', null, doc.warnings.map(w => el('li', null, [w]))));
  } else {
    warnings.appendChild(el('p', {class: 'muted'}, ['None.']));
  }

  // ---- initial view ------------------------------------------------------------------------
  const target = readHash();
  drawChart(runFilter.value === '' ? (doc.runs.length ? doc.runs[0].device_run : 0) : Number(runFilter.value));
  const fdRow = fd ? rowOf(fd.device_run, fd.group) : null;
  if (target || fdRow) select(target || fdRow);
  window.addEventListener('hashchange', () => { const t = readHash(); if (t) select(t); });
  // Timings for the browser test and docs/performance.md: DOM built, then the first frame.
  void document.body.offsetHeight;  // forces style and layout of the whole table now
  document.body.dataset.tableMs = (performance.now() - started).toFixed(1);
  document.body.dataset.ready = '1';
  requestAnimationFrame(() => requestAnimationFrame(() => {
    document.body.dataset.paintMs = (performance.now() - started).toFixed(1);
  }));
})();
