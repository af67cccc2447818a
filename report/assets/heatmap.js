// The heatmaps (docs/reports.md, HTML): ops x devices for a report of several devices, from its
// device_matrix, and ops x runs for a report of many runs (prefill, then a run per decode step),
// from the page's aggregate and the step lines. Both keep the op order on one axis, colour each
// cell by the verdict the report gives the op in that run (the judge's: the page decides none),
// and open the group's details in that run on a click. ctx: {rowOf(key, groupId) -> row,
// nameOf(groupId), open(row), missing(run, groupId), policy, aggregate: the page's}.

// ---- each device's outcome (the summary's) --------------------------------------------------
// Each device's store (path, backend, SoC, runs) and outcome: a row per device.
function deviceOutcomes(ctx) {
  const head = el('tr', null, ['device', 'path', 'backend', 'SoC', 'runs', 'verdict', 'pass', 'warn', 'fail', 'first divergence'].map(h => el('th', null, [h])));
  const store = i => doc.devices[i] || {};
  return el('table', {class: 'device-outcomes', id: 'device-outcomes'}, [head].concat((doc.device_outcomes || []).map(o => {
    const first = o.first_divergence;
    const where = el('td', null, [first ? first.group + ' in run ' + first.device_run + ' (SQNR ' + fmt(first.sqnr_db, 2) + ' dB) ' : 'none']);
    if (first) where.appendChild(linkButton('details', () => openIn(ctx, Object.assign({device_index: o.device_index}, first), first.group)));
    return el('tr', {'data-device': String(o.device_index)}, [
      el('td', null, [deviceLabel(o.device_index)]), el('td', null, [store(o.device_index).path || '']),
      el('td', null, [store(o.device_index).backend || '']), el('td', null, [store(o.device_index).soc || '']),
      el('td', {class: 'num'}, [String((store(o.device_index).runs || []).length)]), el('td', null, [verdictBadge(o.verdict)]),
      el('td', {class: 'num'}, [String(o.pass)]), el('td', {class: 'num'}, [String(o.warn)]), el('td', {class: 'num'}, [String(o.fail)]), where]);
  })));
}

// Opens group GROUPID of RUN (anything with device_index and device_run), or says why it cannot.
function openIn(ctx, run, groupId) {
  const target = ctx.rowOf(runKey(run), groupId);
  if (target) ctx.open(target);
  else ctx.missing(run, groupId);
}

// ---- ops x devices ------------------------------------------------------------------------
function cellOf(row, device) { return row.cells.find(c => (c.device_index || 0) === device); }

function deviceCellTitle(row, cell) {
  return deviceLabel(cell.device_index) + ', ' + row.id + ' ' + row.name + ': ' + cell.verdict +
    ', SQNR ' + fmt(cell.sqnr_db, 2) + ' dB' +
    (cell.introduced_db === null ? '' : ', introduced ' + fmt(cell.introduced_db, 2) + ' dB') +
    (cell.hint ? ', hint: ' + cell.hint : '') + ' (run ' + cell.device_run + ')';
}

// The ops where one device goes its own way: the largest spread of introduced error first, from
// 3 dB (where the attribution, too, calls an op's own error real: docs/metrics.md, 6c).
const DISAGREEMENT_SHOWN_DB = 3;
function disagreementList(matrix, ctx) {
  const ranked = matrix.filter(r => r.outlier !== null && num(r.disagreement_db) >= DISAGREEMENT_SHOWN_DB)
    .sort((a, b) => num(b.disagreement_db) - num(a.disagreement_db)).slice(0, 5);
  if (!ranked.length) return el('p', {class: 'muted'}, ['The devices agree: no op adds 3 dB more error on one device than on another.']);
  return el('ol', {id: 'disagreement'}, ranked.map(row => {
    const cell = cellOf(row, row.outlier);
    const item = el('li', {'data-group': row.id}, [
      el('strong', null, [row.name || row.id]), ' (' + row.id + '): ',
      el('span', {class: 'outlier'}, [deviceLabel(row.outlier)]),
      ' adds the most error here, ' + fmt(row.disagreement_db, 2) + ' dB more than the device adding least (SQNR ' + fmt(cell.sqnr_db, 2) + ' dB' +
      (cell.hint ? ', ' + cell.hint : '') + ') ']);
    item.appendChild(linkButton('details', () => openIn(ctx, cell, row.id)));
    return item;
  }));
}

const HEATMAP_ROWS_MAX = 5000;
function deviceHeatmapTable(rows, ctx) {
  const count = doc.devices.length;
  const head = el('tr', null, [el('th', null, ['group']), el('th', null, ['name'])]
    .concat(doc.devices.map((d, i) => el('th', {class: 'device', 'data-device': String(i)}, [deviceLabel(i)])))
    .concat([el('th', null, ['spread dB']), el('th', null, ['adds most'])]));
  const body = rows.slice(0, HEATMAP_ROWS_MAX).map(row => {
    const tr = el('tr', {'data-group': row.id}, [el('td', null, [row.id]), el('td', {class: 'name'}, [shorten(row.name, 48)])]);
    for (let d = 0; d < count; ++d) {
      const cell = cellOf(row, d);
      const td = el('td', cell ? {class: 'hm ' + cell.verdict, 'data-device': String(d), 'data-verdict': cell.verdict} : {class: 'hm none'},
        [cell ? fmt(cell.sqnr_db, 1) + (row.outlier === d ? ' *' : '') : '\u2013']);
      if (cell) {
        withTitle(td, deviceCellTitle(row, cell));
        td.addEventListener('click', () => openIn(ctx, cell, row.id));
      }
      tr.appendChild(td);
    }
    const spread = num(row.disagreement_db);
    tr.appendChild(el('td', {class: 'num'}, [Math.abs(spread) < 0.005 ? '0.00' : fmt(spread, 2)]));
    tr.appendChild(el('td', {class: 'outlier-cell'}, [row.outlier === null ? '' : deviceLabel(row.outlier)]));
    return tr;
  });
  return el('table', {class: 'heatmap', id: 'device-heatmap'}, [head].concat(body));
}

function fillDeviceHeatmap(section, ctx) {
  const matrix = doc.device_matrix;
  if (!severalDevices() || !Array.isArray(matrix) || !matrix.length) return;
  section.hidden = false;
  section.appendChild(el('h3', null, ['Where the devices disagree most']));
  section.appendChild(disagreementList(matrix, ctx));
  section.appendChild(el('h3', null, ['Ops x devices']));
  const byOrder = matrix.slice();
  const bySpread = matrix.slice().sort((a, b) => num(b.disagreement_db) - num(a.disagreement_db));
  const wrap = el('div', {class: 'table-wrap'}, [deviceHeatmapTable(byOrder, ctx)]);
  let spreadFirst = false;
  const toggle = linkButton('sort by spread', () => {
    spreadFirst = !spreadFirst;
    toggle.textContent = spreadFirst ? 'sort in op order' : 'sort by spread';
    wrap.replaceChildren(deviceHeatmapTable(spreadFirst ? bySpread : byOrder, ctx));
  });
  section.appendChild(el('p', {class: 'legend muted'}, ['Each cell: the op\'s SQNR (dB) on that device, coloured by its verdict there:',
    el('span', {class: 'swatch fail'}), 'fail', el('span', {class: 'swatch warn'}), 'warn', el('span', {class: 'swatch hm-pass'}), 'pass;',
    ' * marks the device that adds the most error at the op; hover: verdict and hint. Rows in op order; a click shows the op on that device. ', toggle]));
  section.appendChild(wrap);
  if (matrix.length > HEATMAP_ROWS_MAX) {
    section.appendChild(el('p', {class: 'muted'}, [(matrix.length - HEATMAP_ROWS_MAX) + ' more ops in the JSON report.']));
  }
}

// ---- ops x runs ---------------------------------------------------------------------------
// One canvas, written pixel by pixel (5,000 runs x 200 ops is a million cells): above the cells,
// per run, its verdict, its output's verdict, whether its next token is the reference's (the token
// view: red where it differs), whether its groups are on this page, and a line of
// its output's SQNR (dark) and top-1 agreement (blue). The op names sit on a canvas of their own
// beside it, so they stay in view when the cells scroll sideways. When the runs outnumber the
// pixels, a pixel column holds several runs (`per`) and shows the worst of them.
const STRIP = {verdict: [0, 10], output: [11, 10], token: [22, 8], kept: [31, 5], line: [38, 40]};  // [top, height] px
const CELLS_TOP = 81;
const STEP_LABELS_W = 210;
const CANVAS_PIXELS_MAX = 16e6;
const CELL_W_MAX = 16;
const RANK = {none: 0, pass: 1, warn: 2, fail: 3};
const BAND = ['none', 'pass', 'warn', 'fail'];
// The page aggregate's verdict letters (an entry's "verdicts", a letter per column; '-': not compared).
const LETTER_RANK = {'-': RANK.none, p: RANK.pass, w: RANK.warn, f: RANK.fail};

// The runs of DEVICE in report order (the page aggregate's columns), their step lines, and each
// op with its verdict's rank in each run and the run where it first fails.
function stepModel(ctx, device) {
  const cols = [], runs = [];
  ctx.aggregate.columns.forEach(([d, run], i) => { if (d === device) { cols.push(i); runs.push(run); } });
  const byRun = new Map((doc.steps || []).filter(s => (s.device_index || 0) === device).map(s => [s.device_run, s]));
  const steps = runs.map(run => byRun.get(run) || null);
  const column = new Map(runs.map((run, i) => [run, i]));
  const inPage = runs.map(() => false);
  for (const r of doc.runs) if ((r.device_index || 0) === device && r.groups_in_page !== false && column.has(r.device_run)) inPage[column.get(r.device_run)] = true;
  const key = run => runKey({device_index: device, device_run: run});
  const ops = ctx.aggregate.entries.map(entry => {
    const ranks = new Uint8Array(cols.length);
    cols.forEach((c, i) => { ranks[i] = LETTER_RANK[entry.verdicts[c]] || RANK.none; });
    let first = ranks.indexOf(RANK.fail);  // this device's first fail-coloured cell, unless the
    if ((entry.first_failing_device_index || 0) === device && column.has(entry.first_failing_device_run)) {
      first = column.get(entry.first_failing_device_run);  // report names the device's first fail
    }
    return {entry, ranks, first, name: ctx.nameOf(entry.id)};
  });
  const firstFailing = steps.findIndex(s => s && s.verdict === 'fail');
  const firstOutput = steps.findIndex(s => s && s.output_verdict === 'fail');
  return {device, cols, runs, steps, inPage, ops, key, firstFailing, firstOutput, policy: ctx.policy};
}

// The drawing's scale: zoom is px per run (0: fit the width; below 1: several runs a pixel).
function stepGeometry(model, zoom, avail) {
  const n = Math.max(1, model.runs.length), count = model.ops.length;
  const cellH = count <= 40 ? 12 : Math.max(2, Math.min(12, Math.floor(480 / count)));
  const height = CELLS_TOP + count * cellH;
  const fit = n <= avail ? Math.min(14, Math.floor(avail / n)) : 1 / Math.ceil(n / avail);
  const widest = Math.max(1, Math.min(CELL_W_MAX, Math.floor(CANVAS_PIXELS_MAX / (height * n))));
  const scale = Math.min(widest, zoom || fit);
  const cellW = Math.max(1, Math.floor(scale)), per = scale >= 1 ? 1 : Math.round(1 / scale);
  const columns = Math.ceil(n / per);
  return {cellW, cellH, per, columns, width: columns * cellW, height, widest, scale: cellW / per};
}

// '#rrggbb' as a pixel of a little-endian Uint32Array over RGBA bytes.
function pixel(hex) {
  const v = parseInt(hex.replace('#', ''), 16);
  return ((255 << 24) | ((v & 255) << 16) | (v & 0xff00) | (v >> 16)) >>> 0;
}
function cssColour(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }
function stepPixels() {
  return {band: ['#d6d8db', '#b9dcbc', cssColour('--warn'), cssColour('--fail')].map(pixel), kept: pixel('#5f6670'), white: pixel('#ffffff')};
}

// The worst of RANKS (one per run) in each pixel column.
function binned(ranks, n, g) {
  if (g.per === 1) return ranks;
  const out = new Uint8Array(g.columns);
  for (let i = 0; i < n; ++i) { const c = (i / g.per) | 0; if (ranks[i] > out[c]) out[c] = ranks[i]; }
  return out;
}

// A step's next token as a band: fail where it is not the reference's, pass where it is, none
// when the step's output was not ranked.
function tokenRank(s) {
  const t = s && s.tokens;
  if (!t || t.device_token === null || t.device_token === undefined) return RANK.none;
  return t.differs ? RANK.fail : RANK.pass;
}

function tokenText(t) {
  if (!t || t.device_token === null || t.device_token === undefined) return '';
  return ', token ' + (t.differs ? t.device_token + ' (reference ' + t.reference_token + ')' : t.device_token + ' as the reference') +
    (t.kl_divergence === null || t.kl_divergence === undefined ? '' : ', KL ' + fmt(t.kl_divergence, 3) + ' nats') +
    (t.reference_token_rank ? ', the reference\'s token at rank ' + t.reference_token_rank + ' (p ' + fmt(t.reference_token_probability, 3) + ')' : '') +
    (t.differs && t.reference_margin !== null && t.reference_margin !== undefined ? ', the reference\'s margin ' + fmt(t.reference_margin, 3) + ' nats' : '');
}

function paintSteps(image, model, g, colours) {
  const px = new Uint32Array(image.data.buffer), W = g.width, n = model.runs.length;
  px.fill(colours.white);
  const box = (x0, y0, w, h, v) => { for (let y = y0; y < y0 + h; ++y) { const o = y * W + x0; for (let x = 0; x < w; ++x) px[o + x] = v; } };
  const w = g.cellW > 4 ? g.cellW - 1 : g.cellW, h = g.cellH > 4 ? g.cellH - 1 : g.cellH;
  const strip = (ranks, [top, height], colour) => binned(ranks, n, g).forEach((r, c) => { if (r) box(c * g.cellW, top, w, height, colour(r)); });
  strip(Uint8Array.from(model.steps, s => s ? RANK[s.verdict] : 0), STRIP.verdict, r => colours.band[r]);
  strip(Uint8Array.from(model.steps, s => s ? RANK[s.output_verdict] : 0), STRIP.output, r => colours.band[r]);
  strip(Uint8Array.from(model.steps, tokenRank), STRIP.token, r => colours.band[r]);
  strip(Uint8Array.from(model.inPage, k => k ? 1 : 0), STRIP.kept, () => colours.kept);
  model.ops.forEach((op, row) => {
    const y = CELLS_TOP + row * g.cellH;
    binned(op.ranks, n, g).forEach((r, c) => box(c * g.cellW, y, w, h, colours.band[r]));
  });
}

// The output's SQNR (dark, on the policy's default lines) and top-1 agreement (blue, 0 to 100%),
// the lowest of each pixel column's runs.
function drawStepLines(c2d, model, g) {
  const [top, height] = STRIP.line, lines = model.policy.default;
  const lowest = pick => {
    const out = new Float64Array(g.columns).fill(NaN);
    model.steps.forEach((s, i) => { const v = s ? pick(s) : NaN, c = (i / g.per) | 0; if (!Number.isNaN(v) && !(out[c] <= v)) out[c] = v; });
    return out;
  };
  const output = lowest(s => num(s.output_sqnr_db)), top1 = lowest(s => s.top1 === null || s.top1 === undefined ? NaN : num(s.top1));
  const finite = Array.from(output).filter(Number.isFinite);
  const lo = Math.min(lines.fail_below_db - 5, minOf(finite, Infinity)), hi = Math.max(lines.warn_below_db + 10, maxOf(finite, -Infinity));
  const y = v => top + height - (Math.min(hi, Math.max(lo, v)) - lo) / (hi - lo) * height;
  c2d.fillStyle = '#f4f5f7';
  c2d.fillRect(0, top, g.width, height);
  c2d.setLineDash([4, 3]);
  for (const [db, colour] of [[lines.fail_below_db, '--fail'], [lines.warn_below_db, '--warn']]) {
    c2d.strokeStyle = cssColour(colour);
    c2d.beginPath(); c2d.moveTo(0, y(db) + 0.5); c2d.lineTo(g.width, y(db) + 0.5); c2d.stroke();
  }
  c2d.setLineDash([]);
  const polyline = (values, at, colour) => {
    c2d.strokeStyle = colour; c2d.lineWidth = 1.2; c2d.beginPath();
    let pen = false;
    values.forEach((v, c) => {
      if (Number.isNaN(v)) { pen = false; return; }
      const x = c * g.cellW + g.cellW / 2;
      if (pen) c2d.lineTo(x, at(v)); else c2d.moveTo(x, at(v));
      pen = true;
    });
    c2d.stroke();
  };
  polyline(output, y, '#1d2127');
  polyline(top1, v => top + height - v * height, '#1a56b0');
}

// Each op's first failing run (a black bar on its cell's left), the first failing run (a dark
// frame around its column) and the first run whose output fails (a dashed one).
function drawStepMarks(c2d, model, g) {
  const x = i => Math.floor(i / g.per) * g.cellW;
  c2d.fillStyle = '#000000';
  model.ops.forEach((op, r) => {
    if (op.first >= 0) c2d.fillRect(x(op.first), CELLS_TOP + r * g.cellH, Math.max(1, Math.min(3, g.cellW)), g.cellH);
  });
  const frame = (i, dash) => {
    if (i < 0) return;
    c2d.setLineDash(dash); c2d.strokeStyle = '#1d2127'; c2d.lineWidth = 2;
    c2d.strokeRect(x(i) - 1, 1, g.cellW + 2, g.height - 2);
    c2d.setLineDash([]);
  };
  frame(model.firstFailing, []);
  if (Math.floor(model.firstOutput / g.per) !== Math.floor(model.firstFailing / g.per)) frame(model.firstOutput, [4, 3]);
}

function drawStepLabels(canvas, model, g) {
  const c2d = canvas.getContext('2d');
  c2d.clearRect(0, 0, canvas.width, canvas.height);
  c2d.fillStyle = '#1d2127';
  c2d.textBaseline = 'middle';
  c2d.font = '9px sans-serif';
  c2d.textAlign = 'right';
  const right = STEP_LABELS_W - 6;
  for (const [text, [top, h]] of [['run verdict', STRIP.verdict], ['output verdict', STRIP.output], ['next token', STRIP.token], ['groups on page', STRIP.kept]]) {
    c2d.fillText(text, right, top + h / 2 + 0.5);
  }
  c2d.fillText('output dB', right, STRIP.line[0] + 10);
  c2d.fillStyle = '#1a56b0';
  c2d.fillText('top-1', right, STRIP.line[0] + STRIP.line[1] - 8);
  c2d.fillStyle = '#1d2127';
  c2d.font = Math.min(11, Math.max(9, g.cellH - 1)) + 'px sans-serif';
  const every = Math.max(1, Math.ceil(11 / g.cellH));  // a name per 11 px at least
  for (let r = 0; r < model.ops.length; r += every) {
    const op = model.ops[r];
    c2d.fillText(shorten(op.entry.id + ' ' + op.name, 36), right, CELLS_TOP + r * g.cellH + g.cellH / 2, right - 2);
  }
}

// What is under canvas point (x, y): {i: a run's index, from, to: the pixel column's runs, op
// (null on the strips)} or null. Of a column's runs, the worst (for an op, its worst band; on
// the strips, the worst run verdict), one whose groups are on the page first, else the first.
function stepHit(model, g, x, y) {
  const c = Math.floor(x / g.cellW), from = c * g.per, to = Math.min(model.runs.length, from + g.per);
  if (x < 0 || from >= model.runs.length || y < 0) return null;
  const r = Math.floor((y - CELLS_TOP) / g.cellH);
  if (y >= CELLS_TOP && r >= model.ops.length) return null;
  const op = y < CELLS_TOP ? null : model.ops[r];
  const rank = op ? i => op.ranks[i] : i => model.steps[i] ? RANK[model.steps[i].verdict] : 0;
  let best = from;
  for (let i = from; i < to; ++i) {
    const better = rank(i) - rank(best) || (model.inPage[i] ? 1 : 0) - (model.inPage[best] ? 1 : 0);
    if (better > 0) best = i;
  }
  return {i: best, from, to, op};
}

function stepText(model, hit) {
  const run = model.runs[hit.i], s = model.steps[hit.i];
  const where = (severalDevices() ? runName({device_index: model.device, device_run: run}) : 'run ' + run) +
    (hit.to - hit.from > 1 ? ' (the worst of runs ' + model.runs[hit.from] + '\u2013' + model.runs[hit.to - 1] + ')' : '');
  const kept = model.inPage[hit.i] ? '' : '; this page has its groups\' overview only';
  if (!hit.op) {
    return where + ': ' + (s ? s.verdict + (s.first_divergence ? ', first divergence ' + s.first_divergence : '') +
      (s.worst ? ', worst ' + s.worst + ' (' + fmt(s.worst_sqnr_db, 2) + ' dB)' : '') + ', output ' + (s.output || '') + ' ' +
      s.output_verdict + ' (' + fmt(s.output_sqnr_db, 2) + ' dB)' + (s.top1 === null ? '' : ', top-1 ' + (100 * num(s.top1)).toFixed(1) + '%') + tokenText(s.tokens) : 'no step line') + kept;
  }
  const db = num(hit.op.entry.sqnr[model.cols[hit.i]]);
  return hit.op.entry.id + ' in ' + where + ': SQNR ' + fmt(db, 2) + ' dB (' + BAND[hit.op.ranks[hit.i]] + ')' +
    (hit.op.first >= 0 ? ', first fails in run ' + model.runs[hit.op.first] : ', never fails') + kept;
}

function stepClick(ctx, model, hit) {
  const run = {device_index: model.device, device_run: model.runs[hit.i]}, s = model.steps[hit.i];
  const group = hit.op ? hit.op.entry.id : s && (s.first_divergence || s.worst);
  if (group) openIn(ctx, run, group);
}

// The summary's first diverging token, when it is this device's, and the op that led to it.
function divergingTokenText(model) {
  const t = doc.summary && doc.summary.first_diverging_token;
  if (!t || (t.device_index || 0) !== model.device) return '';
  const d = t.first_departure;
  return ' First diverging token: run ' + t.device_run + ', token ' + t.device_token + ' where the reference has ' + t.reference_token +
    (d ? ' (first departing op before it: ' + d.group + ' ' + d.name + ', run ' + d.device_run + ')' : '') + '.';
}

function firstFailingStepText(model) {
  const s = model.firstFailing >= 0 ? model.steps[model.firstFailing] : null;
  const o = model.firstOutput >= 0 ? model.steps[model.firstOutput] : null;
  return 'First failing run: ' + (s ? s.device_run + ' (first divergence ' + s.first_divergence + ')' : 'none') +
    '; first run whose output fails: ' + (o ? o.device_run + ' (' + o.output + ', ' + fmt(o.output_sqnr_db, 2) + ' dB)' : 'none') + '.' +
    divergingTokenText(model);
}

// The view of one device's runs at ZOOM px per run (0: fit the width).
function drawStepView(view, ctx, device, zoom) {
  const started = performance.now();
  const model = stepModel(ctx, device);
  const g = stepGeometry(model, zoom, Math.max(200, view.wrap.clientWidth || 1100));
  const canvas = view.canvas;
  Object.assign(canvas, {width: g.width, height: g.height});
  Object.assign(view.labels, {width: STEP_LABELS_W, height: g.height});
  Object.assign(canvas.dataset, {left: '0', cellW: String(g.cellW), per: String(g.per), cellH: String(g.cellH), top: String(CELLS_TOP),
    steps: String(model.runs.length), ops: String(model.ops.length), device: String(device), firstFailing: String(model.firstFailing)});
  const c2d = canvas.getContext('2d');
  const image = c2d.createImageData(g.width, g.height);
  paintSteps(image, model, g, stepPixels());
  c2d.putImageData(image, 0, 0);
  drawStepLines(c2d, model, g);
  drawStepMarks(c2d, model, g);
  drawStepLabels(view.labels, model, g);
  view.first.textContent = firstFailingStepText(model);
  view.model = model;
  view.g = g;
  document.body.dataset.stepsMs = (performance.now() - started).toFixed(1);  // for the browser test
}

function stepControls(view, ctx, devices) {
  const controls = el('div', {class: 'controls'});
  const width = el('span', {id: 'steps-zoom', class: 'muted'});
  let device = devices[0], zoom = 0;
  const redraw = () => {
    drawStepView(view, ctx, device, zoom);
    width.textContent = view.g.per > 1 ? view.g.per + ' runs a pixel' : view.g.cellW + ' px a run';
  };
  if (devices.length > 1) {
    const select = el('select', {id: 'steps-device'}, devices.map(d => el('option', {value: String(d)}, [deviceLabel(d)])));
    select.addEventListener('change', () => { device = Number(select.value); redraw(); });
    controls.appendChild(el('label', null, ['Device ', select]));
  }
  const button = (text, id, action) => {
    const b = el('button', {type: 'button', id}, [text]);
    b.addEventListener('click', () => { action(); redraw(); });
    return b;
  };
  controls.appendChild(el('span', {class: 'zoom'}, ['Run width ',
    button('+', 'steps-wider', () => { zoom = Math.min(view.g.widest, view.g.scale * 2); }),
    button('\u2212', 'steps-narrower', () => { zoom = Math.max(1 / 64, view.g.scale / 2); }),
    button('fit', 'steps-fit', () => { zoom = 0; }), ' ', width]));
  return {controls, redraw};
}

function fillStepHeatmap(section, ctx) {
  const counts = new Map();
  for (const [d] of ctx.aggregate.columns) counts.set(d, (counts.get(d) || 0) + 1);
  const devices = [...counts.keys()].filter(d => counts.get(d) > 1).sort((a, b) => a - b);
  if (!devices.length || !ctx.aggregate.entries.length) return;
  section.hidden = false;
  const view = {first: el('p', {id: 'steps-first'}), canvas: el('canvas', {id: 'steps-heatmap'}),
    labels: el('canvas', {id: 'steps-labels'}), readout: el('p', {id: 'steps-readout', class: 'muted'},
      ['Hover a cell for its op and run, or the strips for the run; click for the details.'])};
  view.wrap = el('div', {class: 'heatmap-wrap'}, [view.canvas]);
  const {controls, redraw} = stepControls(view, ctx, devices);
  const at = event => {
    const box = view.canvas.getBoundingClientRect();
    return stepHit(view.model, view.g, event.clientX - box.left, event.clientY - box.top);
  };
  view.canvas.addEventListener('mousemove', event => { const hit = at(event); if (hit) view.readout.textContent = stepText(view.model, hit); });
  view.canvas.addEventListener('click', event => { const hit = at(event); if (hit) stepClick(ctx, view.model, hit); });
  section.append(view.first, controls, el('p', {class: 'legend muted'}, ['Rows: each op in op order; columns: each run in report order ' +
    '(when they outnumber the pixels, a column shows the worst of its runs). Cells: the op\'s verdict in that run:',
    el('span', {class: 'swatch fail'}), 'fail', el('span', {class: 'swatch warn'}), 'warn', el('span', {class: 'swatch hm-pass'}), 'pass',
    el('span', {class: 'swatch hm-none'}), 'not compared; a black bar where an op first fails; a frame around the first failing run ' +
    '(dashed: the first whose output fails). The "next token" strip is red where the device\'s next token is not the reference\'s ' +
    '(hover for the KL divergence and the reference\'s token\'s rank). A click opens the op in that run, when the run\'s groups are on this page (the grey strip).']),
    el('div', {class: 'steps-view'}, [view.labels, view.wrap]), view.readout);
  redraw();
}
