// The page: reads the embedded report, fills the summary, the graph, the chart and the table,
// and keeps the view (sort, filters, selected group) in the URL fragment. Runs last of the
// scripts (report/embed_assets.cmake), so every helper is declared.
const started = performance.now();
const doc = JSON.parse(document.getElementById('qd-data').textContent);
// Every figure of a pair, declared once in C++ (compare/metric_fields.h): key, label, unit, kind.
const metricFields = JSON.parse(document.getElementById('qd-metrics').textContent);
// The graph legend's badges, one per hint kind, from the report's vocabulary.
document.getElementById('hint-legend').replaceChildren(...Object.entries(vocabulary.hint_badges).flatMap(([kind, badge]) =>
  [el('span', {class: 'dot-badge'}, [badge]), ' ' + kind]));
const policy = doc.policy;
// The aggregate in the page's form (report/src/html.cpp): each entry's SQNR in every run as one
// array in the order of its columns ([device index, device run]); empty with one run.
const pageAggregate = JSON.parse(document.getElementById('qd-aggregate').textContent);
doc.aggregate = pageAggregate.entries;
// The runs whose groups are on the page: a long report leaves most runs' out (groups_in_page).
const pageRuns = doc.runs.filter(run => run.groups_in_page !== false);

// ---- the rows: one per group of every run -------------------------------------------------
// The output a group is labelled by, as the terminal's (GroupReport::name): the one its verdict
// and SQNR come from, the first not compared, else the first with the lowest SQNR (NaN lowest).
function worstPair(group) {
  let worst = null;
  for (const pair of group.pairs) {
    if (!pair.metrics) return pair;
    const v = num(pair.metrics.sqnr_db), w = worst ? num(worst.metrics.sqnr_db) : null;
    if (!worst || v < w || (Number.isNaN(v) && !Number.isNaN(w))) worst = pair;
  }
  return worst;
}
function makeRow(run, group) {
  // A light group may leave out what is empty (docs/reports.md, HTML): the page reads it as empty.
  for (const key of ['flags', 'handles', 'hints']) if (!group[key]) group[key] = [];
  const first = worstPair(group);
  return {run, group, first,
    name: first ? first.reference.name : '',
    dtype: first ? first.device.dtype : '',
    shape: first ? dims(first.reference.dims) : '',
    sqnr: group.sqnr_db === null ? null : num(group.sqnr_db),
    introduced: group.introduced_db === null ? null : num(group.introduced_db),
    metrics: first && first.metrics ? first.metrics : null,
    parts: group.parts || null,
    search: null};  // filled by the first filter
}
const rows = [];
const runRows = new Map();  // run key (runKey) -> its rows in op order
const rowIndex = new Map();  // run key + group id -> row
for (const run of doc.runs) {
  const own = run.groups.map(group => makeRow(run, group));
  runRows.set(runKey(run), own);
  for (const r of own) { rows.push(r); rowIndex.set(runKey(run) + '\u0000' + r.group.id, r); }
}
// ---- the runs the page keeps no groups of: their groups as cells (report/src/json_rows.h,
// CellWriter), each a light row's numbers for a template that holds the rest. A cell becomes a
// row when something opens it (a heatmap's cell, a link), so 400,000 of them cost their JSON only.
const cellTemplates = [];  // numbered across the runs, in report order
const runByKey = new Map();
for (const run of doc.runs) {
  runByKey.set(runKey(run), run);
  if (run.cells) for (const t of run.cells.templates) cellTemplates.push(t);
}
// The light group of cell CELL: its template with each slot's number put in.
function cellGroup(cell) {
  const t = cellTemplates[cell[0]];
  const group = JSON.parse(JSON.stringify(t.group));
  t.slots.forEach((path, i) => {
    let at = group;
    for (let k = 0; k + 1 < path.length; ++k) at = at[path[k]];
    at[path[path.length - 1]] = cell[i + 1];
  });
  group.cell = true;  // the details say what a cell leaves out
  return group;
}
const cellIndex = new Map();  // run key -> (group id -> its cell), made on the run's first use
function cellRow(key, groupId) {
  const run = runByKey.get(key);
  if (!run || !run.cells) return undefined;
  if (!cellIndex.has(key)) {
    const ids = new Map();
    for (const cell of run.cells.rows) if (cell) ids.set(cellTemplates[cell[0]].group.id, cell);
    cellIndex.set(key, ids);
  }
  const cell = cellIndex.get(key).get(groupId);
  if (!cell) return undefined;
  const r = makeRow(run, cellGroup(cell));
  rowIndex.set(key + '\u0000' + groupId, r);
  return r;
}
function rowOf(key, groupId) { return rowIndex.get(key + '\u0000' + groupId) || cellRow(key, groupId); }

// ---- the table's columns --------------------------------------------------------------------
// A diff with --sim / --isolated: its error parts (docs/metrics.md, "Quantization or kernel?").
const hasParts = rows.some(r => r.parts);
const hasTime = rows.some(r => r.group.time);
function partSqnr(r, part) {
  const p = r.parts && r.parts[part];
  return p && p.sqnr_db !== null ? num(p.sqnr_db) : null;
}
const PART_LABELS = {quantization: ['quant. dB', 5], kernel: ['kernel dB', 5], isolated: ['isolated dB', 5.5]};
const partColumns = [
  ...vocabulary.parts.map(([part]) => ({key: part + '_sqnr_db', width: (PART_LABELS[part] || [0, 5])[1],
    label: (PART_LABELS[part] || [part + ' dB'])[0], value: r => partSqnr(r, part), num: true, digits: 2})),
  {key: 'attribution', width: 9, label: 'attribution', value: r => r.parts ? attributionText(r.parts.attribution) : ''},
];
// The overview's metric columns come from the declarations; these only tune their layout.
const overviewWidths = {max_abs: 6, cosine: 5.5, lsb_mae: 5.5, saturation: 7};
const overviewDigits = {cosine: 5, saturation: 4};
const timeColumns = [
  {key: 'time', width: 6, label: 'time', value: r => r.group.time ? num(r.group.time.duration) : null, num: true, text: r => timeText(r.group.time, true)},
  {key: 'time_share', width: 4.5, label: 'time %', value: r => r.group.time ? num(r.group.time.share) : null, num: true, text: r => shareText(r.group.time)},
];
// Widths in em of the table's font; the name column (width 0) takes what is left, at least
// 11em. Together they fit a 1,400 px window (tests/browser checks it): the run column only
// with several runs, the shape (in the details) gives way to the time columns.
const columns = [
  {key: 'order', width: 4.5, label: '#', value: r => r.group.order, num: true, int: true},
  ...(severalDevices() ? [{key: 'device', width: 3, label: 'dev', value: r => r.run.device_index || 0, num: true, int: true}] : []),
  ...(doc.runs.length > 1 ? [{key: 'run', width: 3, label: 'run', value: r => r.run.device_run, num: true, int: true}] : []),
  {key: 'id', width: 5, label: 'group', value: r => r.group.id},
  {key: 'name', width: 0, label: 'reference tensor', value: r => r.name, cls: 'name'},
  {key: 'op_type', width: 7, label: 'op type', value: r => r.group.op_type},
  {key: 'dtype', width: 9, label: 'device dtype', value: r => r.dtype},
  ...(hasTime ? [] : [{key: 'shape', width: 7.5, label: 'shape', value: r => r.shape}]),
  {key: 'sqnr_db', width: 5, label: 'SQNR dB', value: r => r.sqnr, num: true, digits: 2},
  {key: 'introduced_db', width: 7.5, label: 'introduced dB', value: r => r.introduced, num: true, digits: 2},
  // With error parts their columns take the overview metrics' place (those stay in the details).
  ...(hasParts ? partColumns : metricFields.filter(f => f.overview).map(f => ({key: f.key, width: overviewWidths[f.key] || 6,
    label: f.label, num: true, digits: overviewDigits[f.key],
    value: r => r.metrics && r.metrics[f.key] !== null && r.metrics[f.key] !== undefined ? num(r.metrics[f.key]) : null}))),
  ...(hasTime ? timeColumns : []),
  {key: 'verdict', width: 5, label: 'verdict', value: r => ({fail: 0, warn: 1, pass: 2})[r.group.verdict]},
  {key: 'flags', width: 7.5, label: 'flags', value: r => r.group.flags.join(' ')},
];

// ---- header, summary and first divergence -----------------------------------------------
const summary = doc.summary;
const badge = document.getElementById('verdict');
badge.textContent = summary.verdict;
badge.classList.add(summary.verdict);
document.getElementById('tool-version').textContent = 'qnn-debug ' + doc.tool_version;

function storeRows(store) {
  const runName = r => r.id + ' ' + r.name + (r.complete ? '' : ' (incomplete)');
  const runs = store.runs.length <= 8 ? store.runs.map(runName).join(', ') :
    store.runs.slice(0, 4).map(runName).join(', ') + ' \u2026 ' + runName(store.runs[store.runs.length - 1]) +
    ' (' + store.runs.length.toLocaleString('en-US') + ' runs)';
  return kvTable([['path', store.path], ['producer', store.producer], ['backend', store.backend],
    ['SoC', store.soc], ['model', store.model], ['runs', runs]]);
}
function policyTable() {
  const ruleRows = policy.rules.map((rule, i) => el('tr', null, [
    el('td', null, [String(i)]), el('td', null, [rule.op_type || 'any']),
    el('td', null, [rule.name || 'any']), el('td', null, [rule.dtype || 'any']),
    el('td', {class: 'num'}, [fmt(rule.fail_below_db, 1)]),
    el('td', {class: 'num'}, [fmt(rule.warn_below_db, 1)])]));
  return el('div', null, [
    el('p', null, ['Fail below ' + fmt(policy.default.fail_below_db, 1) + ' dB, warn below ' +
      fmt(policy.default.warn_below_db, 1) + ' dB' + (ruleRows.length ? ', except where a rule applies (the first that matches):' : '.')]),
    ruleRows.length ? el('table', null, [el('tr', null, ['rule', 'op type', 'name pattern', 'dtype', 'fail below', 'warn below'].map(h => el('th', null, [h])))].concat(ruleRows)) : el('span')]);
}
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
function fillSummary() {
  const summaryRows = [
    ['verdict', verdictBadge(summary.verdict)],
    ['runs compared', summary.runs_compared],
    ['groups', summary.groups + ' (' + summary.pass + ' pass, ' + summary.warn + ' warn, ' + summary.fail + ' fail)'],
    ['compared pairs', summary.compared_pairs],
    ['unmatched', summary.unmatched_reference + ' reference, ' + summary.unmatched_device + ' device'],
  ];
  for (const reason of summary.verdict_reasons || []) summaryRows.push(['fails because', reason]);
  if (summary.first_departure) {
    const dep = summary.first_departure;
    summaryRows.push(['first departure', dep.group + ' ' + dep.name + ' (' + runName(dep) + '): ' + departureText(dep.departure)]);
  }
  const classifier = classifierText();
  if (classifier) summaryRows.push(['classifier agreement', classifier]);
  const lightRows = rows.filter(r => r.group.light).length;
  if (lightRows) {
    summaryRows.push(['details on this page', (rows.length - lightRows) + ' of ' + rows.length +
      ' groups (failing and warning ones first); every group\'s are in the JSON report (qnn-debug diff --json)']);
  }
  if (pageRuns.length < doc.runs.length) {
    summaryRows.push(['groups on this page', 'those of ' + pageRuns.length + ' of ' + doc.runs.length.toLocaleString('en-US') +
      ' runs in the table: each device\'s first runs, its first failing runs and the runs that go lowest; every other run\'s ' +
      'groups by their overview, opened from the heatmap of runs, which draws every run; the JSON report (qnn-debug diff --json) ' +
      'has every figure of every group of every run']);
  }
  const section = document.getElementById('summary');
  section.appendChild(kvTable(summaryRows));
  // Several devices: a row each, with its store and outcome (heatmap.js), instead of a store table.
  if (severalDevices()) section.appendChild(el('div', null, [el('h3', null, ['Devices']), deviceOutcomes(heatmapContext)]));
  section.appendChild(el('div', {class: 'cols'}, [
    el('div', null, [el('h3', null, ['Reference store']), storeRows(doc.reference)]),
    ...(severalDevices() ? [] : [el('div', null, [el('h3', null, ['Device store']), storeRows(doc.device)])]),
    ...(doc.simulation ? [el('div', null, [el('h3', null, ['Simulation store']), storeRows(doc.simulation)])] : []),
    ...(doc.isolated ? [el('div', null, [el('h3', null, ['Replay store (isolated)']), storeRows(doc.isolated)])] : []),
    el('div', null, [el('h3', null, ['Policy']), policyTable()])]));
}
const fd = summary.first_divergence;
function fillCallout() {
  const callout = document.getElementById('first-divergence');
  if (fd) {
    const row = rowOf(runKey(fd), fd.group);
    const intro = row && row.introduced !== null ? ', introduced ' + fmt(row.introduced, 2) + ' dB' : '';
    // The cause the hints found leads (docs/metrics.md, 6b); the figures and the flags follow.
    const hint = row && row.group.hints.length ? row.group.hints[0] : null;
    callout.appendChild(el('strong', null, ['First divergence: ']));
    callout.appendChild(el('span', {id: 'first-divergence-group'}, [fd.group]));
    callout.appendChild(document.createTextNode(' ' + (row ? row.name : '') + ' (' + runName(fd) + ')' + (hint ? ': ' : ' ')));
    if (hint) {
      callout.appendChild(el('span', {id: 'first-divergence-cause'}, [
        el('span', {class: 'flag'}, [hint.kind]), ' ' + hint.sentence]));
    }
    callout.appendChild(document.createTextNode((hint ? '. ' : '') + 'SQNR ' + fmt(fd.sqnr_db, 2) + ' dB' + intro +
      (fd.flags.length ? ' [' + fd.flags.join(', ') + ']' : '') + ' '));
    if (row) callout.appendChild(linkButton('details', () => { select(row); showDetails(); }));
  } else {
    callout.classList.add('none');
    callout.textContent = 'No divergence: every compared group passes the policy\'s fail threshold.';
  }
  // The earliest group to leave its earlier runs' SQNR, beside the first divergence.
  const dep = summary.first_departure;
  if (dep) {
    const row = rowOf(runKey(dep), dep.group);
    const line = el('div', {id: 'first-departure'}, [el('strong', null, ['First departure: ']),
      dep.group + ' ' + dep.name + ' (' + runName(dep) + '): ' + departureText(dep.departure) + ' ']);
    if (row) line.appendChild(linkButton('details', () => { select(row); showDetails(); }));
    callout.appendChild(line);
  }
  // Where each error part starts: the first run's, as the summary says.
  const partsFirst = summary.parts_first_divergence;
  if (partsFirst) {
    const lines = PARTS.filter(([part]) => doc.runs.some(run => run.parts && run.parts[part]))
      .map(([part, what]) => {
        const first = partsFirst[part];
        const row = first ? rowOf(runKey(first), first.group) : null;
        return el('li', {id: 'part-' + part}, [el('strong', null, [part + ' (' + what + '): ']),
          first ? first.group + ' ' + (row ? row.name : '') + ', SQNR ' + fmt(first.sqnr_db, 2) + ' dB' : 'no divergence']);
      });
    callout.appendChild(el('ul', {class: 'parts'}, lines));
  }
}
// What the heatmaps and the device outcomes open (heatmap.js): a group of a run, or why not.
const firstRowOf = new Map();  // group id -> its first row on the page
for (const r of rows) if (!firstRowOf.has(r.group.id)) firstRowOf.set(r.group.id, r);
const heatmapContext = {rowOf, policy, aggregate: pageAggregate,
  nameOf: id => { const r = firstRowOf.get(id); return r ? r.name : ''; },
  open: r => { select(r); showDetails(); },
  missing: (run, groupId) => {
    const inPage = doc.runs.some(r => runKey(r) === runKey(run) && r.groups_in_page !== false);
    const where = groupId + ' of ' + (severalDevices() ? runName(run) : 'run ' + run.device_run);
    const text = inPage ? where + ' is not in this report: that run has no such group.' :
      where + ' is not in this page: a report of ' + doc.runs.length.toLocaleString('en-US') + ' runs keeps the groups of each device\'s ' +
      'first runs, first failing runs and the runs that go lowest, and the overview of every other run\'s groups as far as its budget ' +
      'went. The JSON report (qnn-debug diff ... --json report.json) has every group of every run; qnn-debug report report.json prints its summary.';
    const details = document.getElementById('details');
    details.replaceChildren(el('h2', null, ['Details']), el('p', {class: 'callout light-note', id: 'not-in-page'}, [text]));
    showDetails();
  }};
fillSummary();
fillCallout();

// ---- selection: the table row, the graph node, the details, the URL ----------------------
let selected = null;
const detailsContext = {policy, metricFields, selectGroup: id => {
  const r = (selected && rowOf(runKey(selected.run), id)) || rows.find(row => row.group.id === id);
  if (r) select(r);
}};
function showDetails() { document.getElementById('details').scrollIntoView({block: 'start'}); }
function select(r) {
  const begun = performance.now();
  selected = r;
  table.setSelected(r);
  table.reveal(r);
  if (graph) graph.select(r);
  renderDetails(document.getElementById('details'), r, detailsContext);
  const line = document.getElementById('graph-selected');
  if (line) {
    line.textContent = r.group.id + ' ' + shorten(r.name, 40) + ': ' + fmt(r.sqnr, 2) + ' dB ';
    line.appendChild(linkButton('details \u2193', showDetails));
  }
  writeHash();
  document.body.dataset.selectMs = (performance.now() - begun).toFixed(1);  // for the browser test
}

const table = createGroupTable(columns, rows, select, () => writeHash());

// ---- the graph (only with a stored graph) and the error-growth chart ----------------------
const graph = rows.some(r => r.group.inputs) ? createGraphView({
  runs: pageRuns.map(run => ({runId: runKey(run), label: runName(run), run, rows: runRows.get(runKey(run))})),
  policy, select,
  firstDivergence: runId => {
    const first = doc.runs.find(run => runKey(run) === runId).first_divergence;
    return first ? rowOf(runId, first) || null : null;  // the run's first divergence: a group id
  },
}) : null;
function drawChart() {
  const runs = runFilter.value === '' ? pageRuns : pageRuns.filter(run => runKey(run) === runFilter.value);
  drawGrowthChart(document.getElementById('chart'), runs.map(run => ({runId: runKey(run), label: runName(run), rows: runRows.get(runKey(run))})),
    policy, select);
}

// ---- filters and the URL fragment ---------------------------------------------------------
const filterInput = document.getElementById('filter');
const verdictFilter = document.getElementById('verdict-filter');
const runFilter = document.getElementById('run-filter');
for (const run of pageRuns) {
  runFilter.appendChild(el('option', {value: runKey(run)}, [severalDevices() ? runName(run) : runKey(run)]));
}
function searchText(r) {
  if (r.search === null) {
    r.search = (r.group.id + ' ' + r.name + ' ' + r.group.op_type + ' ' + r.group.flags.join(' ') + ' ' +
      (r.group.hints || []).map(h => h.kind).join(' ') + ' ' + r.dtype).toLowerCase();
  }
  return r.search;
}
function applyFilter() {
  const text = filterInput.value.trim().toLowerCase();
  const verdict = verdictFilter.value, run = runFilter.value;
  const keep = text || verdict || run ? r => (!text || searchText(r).includes(text)) &&
    (!verdict || r.group.verdict === verdict) && (!run || runKey(r.run) === run) : null;
  const shown = table.filter(keep);
  document.getElementById('shown-count').textContent = shown + ' of ' + rows.length + ' groups shown';
  writeHash();
}
let filterTimer = 0;
filterInput.addEventListener('input', () => { clearTimeout(filterTimer); filterTimer = setTimeout(applyFilter, 120); });
verdictFilter.addEventListener('change', applyFilter);
runFilter.addEventListener('change', () => { applyFilter(); drawChart(); });

// The view lives in the URL hash (#sort=sqnr_db&dir=asc&filter=conv&verdict=fail&run=0&group=h3),
// so a link reproduces what an engineer is looking at.
let restoring = false;
function writeHash() {
  if (restoring) return;
  const p = new URLSearchParams(), sort = table.sortState();
  if (sort.key !== 'order' || sort.dir !== 'asc') { p.set('sort', sort.key); p.set('dir', sort.dir); }
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
  table.sortBy(p.get('sort') || 'order', p.get('dir') === 'desc' ? 'desc' : 'asc');
  applyFilter();
  const group = p.get('group');
  const target = group ? rows.find(r => r.group.id === group && (!runFilter.value || runKey(r.run) === runFilter.value)) : null;
  restoring = false;
  return target;
}

// ---- across runs: per group, the worst run and the mean ----------------------------------
function listTable(headers, items, cells, limit) {
  const shown = items.slice(0, limit);
  const list = el('table', null, [el('tr', null, headers.map(h => el('th', null, [h])))]
    .concat(shown.map(item => el('tr', null, cells(item).map(c => el('td', null, [String(c)]))))));
  const box = el('div', null, [list]);
  if (items.length > limit) box.appendChild(el('p', {class: 'muted'}, [(items.length - limit) + ' more in the JSON report.']));
  return box;
}
function fillAcrossRuns() {
  if (doc.runs.length < 2 || !doc.aggregate.length) return;
  const across = document.getElementById('across-runs');
  across.hidden = false;
  const worstFirst = doc.aggregate.slice().sort((a, b) => num(a.worst_sqnr_db) - num(b.worst_sqnr_db));
  across.appendChild(el('p', {class: 'muted'}, ['Each group over the ' + doc.runs.length + ' compared runs, worst first.']));
  // With several devices a run is named with its device's label ("HTP QNN 2.30 run 0").
  const run = (index, number) => severalDevices() ? runName({device_index: index, device_run: number}) : number;
  across.appendChild(listTable(['group', 'worst SQNR dB', 'worst device run', 'mean SQNR dB', 'first fails in run'], worstFirst,
    a => [a.id, fmt(a.worst_sqnr_db, 2), run(a.worst_device_index, a.worst_device_run), fmt(a.mean_sqnr_db, 2),
      a.first_failing_device_run === null || a.first_failing_device_run === undefined ? 'never' : run(a.first_failing_device_index, a.first_failing_device_run)], 2000));
}

// ---- unmatched, timing, memory, warnings -------------------------------------------------
function fillUnmatched() {
  const unmatched = document.getElementById('unmatched');
  const all = [];
  for (const run of doc.runs) for (const u of run.unmatched) all.push([run.device_run, u]);
  unmatched.appendChild(all.length ? listTable(['device run', 'side', 'name', 'reason'], all,
    ([run, u]) => [run, u.side, u.name, u.reason], 5000) : el('p', {class: 'muted'}, ['None: every tensor found its counterpart.']));
}
// Each memory checkpoint with its change from the run's previous one: an HTP heap profile's
// after_context_freed against before_context_created is what the context leaked.
function withChanges(checkpoints) {
  const last = new Map();  // run -> bytes at its previous checkpoint
  return checkpoints.map(c => {
    const key = c.run === null ? '' : String(c.run);
    const before = last.get(key);
    last.set(key, c.bytes);
    const change = before === undefined ? '' : (c.bytes >= before ? '+' : '\u2212') +
      Math.abs(c.bytes - before).toLocaleString('en-US');
    return [c, change];
  });
}
function fillProfile() {
  const profile = document.getElementById('profile');
  let any = false;
  for (const side of ['device', 'reference']) {
    const store = doc[side];
    if (store.profile_events.length) {
      any = true;
      const events = store.profile_events.slice().sort((a, b) => (b.end - b.start) - (a.end - a.start));
      profile.appendChild(el('h3', null, ['Profile events (' + side + '), longest first']));
      profile.appendChild(listTable(['run', 'name', 'handles', 'duration', 'unit'], events,
        e => [e.run === null ? '' : e.run, e.name, e.handles.join(', '), e.end - e.start, e.unit], 2000));
    }
    if (store.memory_checkpoints.length) {
      any = true;
      profile.appendChild(el('h3', null, ['Memory checkpoints (' + side + ')']));
      profile.appendChild(listTable(['run', 'label', 'bytes', 'change'], withChanges(store.memory_checkpoints),
        ([c, change]) => [c.run === null ? '' : c.run, c.label, c.bytes.toLocaleString('en-US'), change], 2000));
    }
  }
  if (!any) profile.appendChild(el('p', {class: 'muted'}, ['The stores carry no profile events or memory checkpoints.']));
}
// ---- KV caches across runs: which positions differ, from which run (docs/metrics.md, 6d) ------
const KV_RANGES_SHOWN = 12;
function rangesText(ranges) {
  const shown = ranges.slice(0, KV_RANGES_SHOWN).map(([a, b]) => a === b ? String(a) : a + '\u2013' + b);
  return shown.join(', ') + (ranges.length > KV_RANGES_SHOWN ? ' (+' + (ranges.length - KV_RANGES_SHOWN) + ' more ranges)' : '');
}
function kvHeadsText(step) {
  const heads = [...new Set((step.cells || []).map(c => c[0]))].sort((a, b) => a - b);
  return heads.length ? ' (head' + (heads.length > 1 ? 's ' : ' ') + heads.join(', ') + ')' : '';
}
function kvRunCell(track, step) {
  const run = Object.assign({device_index: step.device_index || 0}, step);
  const cell = el('td', null, ['positions ' + rangesText(step.differing) + kvHeadsText(step) + ' in ' + runName(run) + ' ']);
  cell.appendChild(linkButton('details', () => openIn(heatmapContext, run, track.group)));
  return cell;
}
function fillKvCache() {
  const tracks = doc.kv_cache || [];
  if (!tracks.length) return;
  const section = document.getElementById('kv-cache-section');
  section.hidden = false;
  section.appendChild(el('p', {class: 'muted'}, ['Each KV-cache tensor is measured per position along its position axis; ' +
    'a position differs in a run when its SQNR is below 20 dB (positions not yet written are exact on both sides); a cache laid out ' +
    '[batch, heads, positions, dim] or [batch, positions, heads, dim] is also measured per head, so the view below says which heads.']));
  const shown = tracks.slice(0, 500);
  const head = el('tr', null, ['cache tensor', 'group', 'positions', 'heads', 'runs', 'first differ', 'at the last run that differs'].map(h => el('th', null, [h])));
  section.appendChild(el('table', {id: 'kv-cache'}, [head].concat(shown.map(track => {
    const first = track.steps[0], last = track.steps[track.steps.length - 1];
    return el('tr', {'data-tensor': track.tensor}, [el('td', {class: 'name'}, [track.tensor]), el('td', null, [track.group]),
      el('td', {class: 'num'}, [track.positions + ' on axis ' + track.axis]), el('td', {class: 'num'}, [track.heads ? String(track.heads) : '\u2013']),
      el('td', {class: 'num'}, [String(track.runs)]),
      first ? kvRunCell(track, first) : el('td', null, ['no position differs']),
      last && last !== first ? kvRunCell(track, last) : el('td', null, [''])]);
  }))));
  if (tracks.length > shown.length) section.appendChild(el('p', {class: 'muted'}, [(tracks.length - shown.length) + ' more in the JSON report.']));
  fillKvMap(section, shown);
}

// The layer x head x position view: a row per cache tensor and head (a cache tracked by position
// only is one row), a column per position, each cell coloured by the run where it first differs
// (dark: early; light: late; grey: never), from the tracks' first_differ, for the first device.
const KV_MAP_W = 1100, KV_MAP_H = 900, KV_NEVER = '#e4e7eb';
function kvMapModel(tracks) {
  const rows = [];
  let positions = 1, lo = Infinity, hi = -Infinity;
  for (const track of tracks) {
    const heads = Math.max(1, track.heads || 0), start = rows.length;
    for (let h = 0; h < heads; ++h) rows.push({track, head: h, first: new Float64Array(track.positions).fill(NaN)});
    positions = Math.max(positions, track.positions);
    for (const [head, a, b, device, run] of track.first_differ || []) {
      if (device !== 0 || head >= heads) continue;
      const first = rows[start + head].first;
      for (let p = a; p <= b && p < first.length; ++p) if (!(first[p] <= run)) first[p] = run;
      lo = Math.min(lo, run); hi = Math.max(hi, run);
    }
  }
  return {rows, positions, lo, hi};
}
function kvColour(run, lo, hi) {
  if (Number.isNaN(run)) return KV_NEVER;
  const t = hi > lo ? (run - lo) / (hi - lo) : 0;  // 0: the earliest run, dark red; 1: the latest, light orange
  const mix = (a, b) => Math.round(a + (b - a) * t);
  return 'rgb(' + mix(150, 250) + ',' + mix(20, 190) + ',' + mix(20, 120) + ')';
}
function fillKvMap(section, tracks) {
  const model = kvMapModel(tracks);
  if (!model.rows.length || !Number.isFinite(model.lo)) return;  // nothing differs: the table says so
  const cellW = Math.max(1, Math.min(12, Math.floor(KV_MAP_W / model.positions)));
  const cellH = Math.max(1, Math.min(10, Math.floor(KV_MAP_H / model.rows.length)));
  const canvas = el('canvas', {id: 'kv-map'});
  Object.assign(canvas, {width: cellW * model.positions, height: cellH * model.rows.length});
  Object.assign(canvas.dataset, {cellW: String(cellW), cellH: String(cellH), rows: String(model.rows.length)});
  const c2d = canvas.getContext('2d');
  model.rows.forEach((row, r) => {
    for (let p = 0; p < row.first.length; ++p) {
      c2d.fillStyle = kvColour(row.first[p], model.lo, model.hi);
      c2d.fillRect(p * cellW, r * cellH, cellW > 3 ? cellW - 1 : cellW, cellH > 3 ? cellH - 1 : cellH);
    }
  });
  const readout = el('p', {id: 'kv-map-readout', class: 'muted'}, ['Hover a cell for its cache, head and position; click to open the cache in that run.']);
  const hit = event => {
    const box = canvas.getBoundingClientRect();
    const r = Math.floor((event.clientY - box.top) / cellH), p = Math.floor((event.clientX - box.left) / cellW);
    const row = model.rows[r];
    return row && p >= 0 && p < row.first.length ? {row, p} : null;
  };
  const describe = ({row, p}) => row.track.tensor + (row.track.heads ? ' head ' + row.head : '') + ' position ' + p + ': ' +
    (Number.isNaN(row.first[p]) ? 'never differs' : 'first differs in run ' + row.first[p]);
  canvas.addEventListener('mousemove', event => { const h = hit(event); if (h) readout.textContent = describe(h); });
  canvas.addEventListener('click', event => {
    const h = hit(event);
    if (h && !Number.isNaN(h.row.first[h.p])) openIn(heatmapContext, {device_index: 0, device_run: h.row.first[h.p]}, h.row.track.group);
  });
  section.append(el('h3', null, ['Layers x heads x positions']),
    el('p', {class: 'legend muted'}, ['A row per cache tensor and KV head (in the table\'s order), a column per position; each cell is coloured by the run where it first differs: ',
      el('span', {class: 'swatch', style: 'background:' + kvColour(model.lo, model.lo, model.hi)}), 'run ' + model.lo + ' \u2192 ',
      el('span', {class: 'swatch', style: 'background:' + kvColour(model.hi, model.lo, model.hi)}), 'run ' + model.hi + ', ',
      el('span', {class: 'swatch', style: 'background:' + KV_NEVER}), 'never' + (severalDevices() ? ' (the first device)' : '') + '.']),
    el('div', {class: 'heatmap-wrap'}, [canvas]), readout);
}
function fillWarnings() {
  const warnings = document.getElementById('warnings');
  warnings.appendChild(doc.warnings.length ? el('ul', null, doc.warnings.map(w => el('li', null, [w])))
    : el('p', {class: 'muted'}, ['None.']));
}
fillDeviceHeatmap(document.getElementById('devices-section'), heatmapContext);
fillStepHeatmap(document.getElementById('steps-section'), heatmapContext);
fillKvCache();
fillAcrossRuns();
fillUnmatched();
fillProfile();
fillWarnings();

// ---- initial view ------------------------------------------------------------------------
const target = readHash();
drawChart();
const fdRow = fd ? rowOf(runKey(fd), fd.group) : null;
if (graph) {
  graph.select(target || fdRow || null);
  graph.show(runKey((target || fdRow || rows[0]).run));
}
if (target || fdRow) select(target || fdRow);
window.addEventListener('hashchange', () => { const t = readHash(); if (t) select(t); });
// Timings for the browser test and docs/performance.md: DOM built and laid out, then the first
// frame.
void document.body.offsetHeight;
document.body.dataset.tableMs = (performance.now() - started).toFixed(1);
document.body.dataset.readyMs = performance.now().toFixed(1);  // from the navigation's start
document.body.dataset.ready = '1';
requestAnimationFrame(() => requestAnimationFrame(() => {
  document.body.dataset.paintMs = (performance.now() - started).toFixed(1);
}));
