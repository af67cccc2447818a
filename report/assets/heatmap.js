// The heatmaps (docs/reports.md, HTML): ops x devices for a report of several devices, from its
// device_matrix, and ops x runs for a report of many runs (prefill, then a run per decode step),
// from its aggregate and its step lines. Both keep the op order on one axis, colour each cell by
// the report's own verdict or the policy's SQNR bands, and open the group's details in that run
// on a click. ctx: {rowOf(key, groupId) -> row, open(row), missing(text), policy}.

// ---- ops x devices ------------------------------------------------------------------------
function cellOf(row, device) { return row.cells.find(c => (c.device_index || 0) === device); }

function deviceCellTitle(row, cell) {
  return deviceLabel(cell.device_index) + ', ' + row.id + ' ' + row.name + ': ' + cell.verdict +
    ', SQNR ' + fmt(cell.sqnr_db, 2) + ' dB' +
    (cell.introduced_db === null ? '' : ', introduced ' + fmt(cell.introduced_db, 2) + ' dB') +
    (cell.hint ? ', ' + cell.hint : '') + ' (run ' + cell.device_run + ')';
}

function openCell(ctx, row, cell) {
  const target = ctx.rowOf(runKey(cell), row.id);
  if (target) ctx.open(target);
  else ctx.missing(row.id + ' of ' + runName(cell) + ' is not in this page: the JSON report has it.');
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
      ' adds the most error here, ' + fmt(row.disagreement_db, 2) + ' dB more than the device adding least (SQNR ' + fmt(cell.sqnr_db, 2) + ' dB) ']);
    item.appendChild(linkButton('details', () => openCell(ctx, row, cell)));
    return item;
  }));
}

function deviceOutcomes() {
  return el('table', {class: 'device-outcomes'}, [el('tr', null, ['device', 'verdict', 'pass', 'warn', 'fail', 'first divergence']
    .map(h => el('th', null, [h])))].concat((doc.device_outcomes || []).map(o => el('tr', null, [
    el('td', null, [deviceLabel(o.device_index)]), el('td', null, [verdictBadge(o.verdict)]),
    el('td', {class: 'num'}, [String(o.pass)]), el('td', {class: 'num'}, [String(o.warn)]), el('td', {class: 'num'}, [String(o.fail)]),
    el('td', null, [o.first_divergence ? o.first_divergence.group + ' in run ' + o.first_divergence.device_run +
      ' (SQNR ' + fmt(o.first_divergence.sqnr_db, 2) + ' dB)' : 'none'])]))));
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
      const td = el('td', cell ? {class: 'hm ' + cell.verdict, 'data-device': String(d)} : {class: 'hm none'},
        [cell ? fmt(cell.sqnr_db, 1) + (row.outlier === d ? ' *' : '') : '\u2013']);
      if (cell) {
        withTitle(td, deviceCellTitle(row, cell));
        td.addEventListener('click', () => openCell(ctx, row, cell));
      }
      tr.appendChild(td);
    }
    const spread = num(row.disagreement_db);
    tr.appendChild(el('td', {class: 'num'}, [Math.abs(spread) < 0.005 ? '0.00' : fmt(spread, 2)]));
    tr.appendChild(el('td', null, [row.outlier === null ? '' : deviceLabel(row.outlier)]));
    return tr;
  });
  return el('table', {class: 'heatmap', id: 'device-heatmap'}, [head].concat(body));
}

function fillDeviceHeatmap(section, ctx) {
  const matrix = doc.device_matrix;
  if (!severalDevices() || !Array.isArray(matrix) || !matrix.length) return;
  section.hidden = false;
  section.appendChild(deviceOutcomes());
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
  section.appendChild(el('p', {class: 'legend muted'}, ['Each cell: the op\'s SQNR (dB) on that device, coloured by its verdict; ' +
    '* marks the device that adds the most error at the op. Rows in op order; a click shows the op on that device. ', toggle]));
  section.appendChild(wrap);
  if (matrix.length > HEATMAP_ROWS_MAX) {
    section.appendChild(el('p', {class: 'muted'}, [(matrix.length - HEATMAP_ROWS_MAX) + ' more ops in the JSON report.']));
  }
}

// ---- ops x runs ---------------------------------------------------------------------------
const STEP_STRIP = 10;  // px: the per-run verdict strip above the cells
const STEP_LABELS = 220;  // px: the op names' column, when rows are tall enough for text

function stepLayout() {
  const steps = (doc.steps || []).filter(s => (s.device_index || 0) === 0);
  const column = new Map(steps.map((s, i) => [s.device_run, i]));
  const ops = (doc.aggregate || []).map(entry => ({entry,
    values: (entry.per_run || []).filter(p => (p.device_index || 0) === 0)}));
  const cellH = Math.max(ops.length <= 80 ? 10 : 2, Math.min(14, Math.floor(520 / Math.max(1, ops.length))));
  const left = cellH >= 10 ? STEP_LABELS : 0;  // op names beside the rows when they fit
  const cellW = Math.max(1, Math.min(14, Math.floor((1300 - left) / Math.max(1, steps.length))));
  return {steps, column, ops, cellW, cellH, left,
    width: left + steps.length * cellW, height: STEP_STRIP + 2 + ops.length * cellH};
}

function bandColours() {
  const style = getComputedStyle(document.documentElement);
  const colour = name => style.getPropertyValue(name).trim();
  return {fail: colour('--fail'), warn: colour('--warn'), pass: '#b9dcbc', none: '#d6d8db'};
}

// Each group id's name (its first run's), for the rows' labels.
const opNames = new Map();
function drawSteps(canvas, layout, policy) {
  for (const run of doc.runs) for (const g of run.groups) if (!opNames.has(g.id) && g.pairs[0]) opNames.set(g.id, g.pairs[0].reference.name);
  const ctx2d = canvas.getContext('2d');
  const colours = bandColours();
  ctx2d.fillStyle = '#ffffff';
  ctx2d.fillRect(0, 0, canvas.width, canvas.height);
  const gap = layout.cellW > 5 ? 1 : 0;  // white lines between cells large enough to show them
  const x = col => layout.left + col * layout.cellW;
  layout.steps.forEach((s, i) => {
    ctx2d.fillStyle = colours[s.verdict] || colours.none;
    ctx2d.fillRect(x(i), 0, Math.max(1, layout.cellW - gap), STEP_STRIP);
  });
  const top = STEP_STRIP + 2;
  ctx2d.font = Math.min(12, layout.cellH - 1) + 'px sans-serif';
  ctx2d.textBaseline = 'middle';
  layout.ops.forEach(({entry, values}, row) => {
    const y = top + row * layout.cellH;
    if (layout.left) {
      ctx2d.fillStyle = '#1a1a1a';
      ctx2d.fillText(shorten(entry.id + ' ' + (opNames.get(entry.id) || ''), 34), 2, y + layout.cellH / 2, layout.left - 6);
    }
    for (const p of values) {
      const col = layout.column.get(p.device_run);
      if (col === undefined) continue;
      ctx2d.fillStyle = colours[sqnrBand(num(p.sqnr_db), policy)];
      ctx2d.fillRect(x(col), y, layout.cellW - gap, layout.cellH - (layout.cellH > 5 ? 1 : 0));
    }
    const first = entry.first_failing_device_run;
    if (first !== null && first !== undefined && !entry.first_failing_device_index && layout.column.has(first)) {
      ctx2d.fillStyle = '#000000';  // where this op starts failing
      ctx2d.fillRect(x(layout.column.get(first)), y, Math.max(1, Math.min(3, layout.cellW)), layout.cellH);
    }
  });
}

// The cell under canvas point (x, y): {step, op} or null.
function stepCellAt(layout, x, y) {
  const col = Math.floor((x - layout.left) / layout.cellW), row = Math.floor((y - STEP_STRIP - 2) / layout.cellH);
  if (x < layout.left || col >= layout.steps.length || row < 0 || row >= layout.ops.length) return null;
  return {step: layout.steps[col], op: layout.ops[row].entry};
}

function firstFailingStepText(layout) {
  const output = summary.first_failing_step;
  const failing = layout.steps.find(s => s.verdict === 'fail');
  return 'First failing run: ' + (failing ? failing.device_run + ' (first divergence ' + failing.first_divergence + ')' : 'none') +
    '; first run whose output fails: ' + (output ? output.device_run + ' (' + output.group + ')' : 'none') + '.';
}

function fillStepHeatmap(section, ctx) {
  const layout = stepLayout();
  if (layout.steps.length < 2 || !layout.ops.length) return;
  section.hidden = false;
  section.appendChild(el('p', {id: 'steps-first'}, [firstFailingStepText(layout)]));
  const canvas = el('canvas', {id: 'steps-heatmap', width: String(layout.width), height: String(layout.height)});
  Object.assign(canvas.dataset, {left: String(layout.left), cellW: String(layout.cellW), cellH: String(layout.cellH), top: String(STEP_STRIP + 2),
    steps: String(layout.steps.length), ops: String(layout.ops.length)});
  drawSteps(canvas, layout, ctx.policy);
  const readout = el('p', {id: 'steps-readout', class: 'muted'}, ['Hover a cell for its op and run; click it for the details.']);
  const describe = hit => hit.op.id + ' in run ' + hit.step.device_run + ': SQNR ' +
    fmt((hit.op.per_run.find(p => p.device_run === hit.step.device_run && !p.device_index) || {}).sqnr_db, 2) + ' dB' +
    (hit.op.first_failing_device_run === null || hit.op.first_failing_device_run === undefined ? '' : ', first fails in run ' + hit.op.first_failing_device_run);
  const at = event => {
    const box = canvas.getBoundingClientRect();
    return stepCellAt(layout, event.clientX - box.left, event.clientY - box.top);
  };
  canvas.addEventListener('mousemove', event => { const hit = at(event); if (hit) readout.textContent = describe(hit); });
  canvas.addEventListener('click', event => {
    const hit = at(event);
    if (!hit) return;
    const target = ctx.rowOf(runKey(hit.step), hit.op.id);
    if (target) ctx.open(target);
    else ctx.missing(hit.op.id + ' of run ' + hit.step.device_run + ' is not in this page: the JSON report has it.');
  });
  section.appendChild(el('p', {class: 'legend muted'}, ['Rows: each op in op order; columns: each run (' + layout.steps.length +
    '). The strip on top is each run\'s verdict; cells are coloured by SQNR on the policy\'s default scale, a black mark where the op first fails.']));
  section.appendChild(el('div', {class: 'heatmap-wrap'}, [canvas]));
  section.appendChild(readout);
}
