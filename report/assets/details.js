// The details of one group: its figures, its causes (hints) with their evidence, and per output
// the pictures (device against reference, error histogram, encoding range, per-channel SQNR).
// A light group (a large report's page keeps only its overview: docs/reports.md, HTML) shows
// what it has and says where the rest is.

// The encoding's bit width: a stored 0 means the storage dtype's own (docs/store-format.md).
function encodingBits(q, dtype) {
  if (q.bitwidth > 0) return q.bitwidth;
  const width = Number((/(\d+)$/.exec(dtype || '') || [])[1]);
  return width > 0 ? width : null;
}
function quantText(q, dtype) {
  if (!q) return 'none (float)';
  const s = q.scales, o = q.offsets, bits = encodingBits(q, dtype);
  const head = q.convention + ', ' + (bits ? bits + '-bit' : 'the dtype\'s width') + ', ';
  if (s.length === 1) return head + 'per-tensor: scale ' + fmt(s[0], 6) + ', offset ' + o[0];
  const scales = s.map(num);
  return head + 'per-axis (axis ' + q.axis + ', ' + s.length + ' channels): scale ' +
    fmt(minOf(scales, Infinity), 6) + ' .. ' + fmt(maxOf(scales, -Infinity), 6);
}
function encodingText(problems) {  // the encoding lint's findings (docs/metrics.md, section 7)
  if (!problems || !problems.length) return 'sound';
  return problems.map(p => p.problem + ' (scale ' + fmt(p.scale, 6) +
    (p.channels > 1 ? ', ' + p.channels + ' channels' : '') + ')').join('; ');
}
function tensorTable(t) {
  // A light row leaves out the device's name and dims where they are the reference's.
  if (!t.stats) return kvTable([['name', t.name === undefined ? 'as the reference' : t.name], ['dtype', t.dtype],
    ['dims', t.dims ? dims(t.dims) : 'as the reference']]);
  return kvTable([['name', t.name], ['handles', t.handles.join(', ')], ['output index', t.output_index],
    ['dtype', t.dtype], ['dims', dims(t.dims)], ['axis order', t.axis_order.length ? dims(t.axis_order) : 'as stored'],
    ['quantization', quantText(t.quantization, t.dtype)],
    ['encoding', encodingText(t.encoding_problems)],
    ['stats', 'min ' + fmt(t.stats.min) + ', max ' + fmt(t.stats.max) + ', mean ' + fmt(t.stats.mean) +
      ', NaN ' + t.stats.nan_count + ', Inf ' + t.stats.inf_count]]);
}
function metricsTable(m, metricFields) {
  const rowsKv = metricFields.filter(f => f.kind === 'real' && m[f.key] !== undefined).map(f => [f.label, fmt(m[f.key], 6)]);
  if (m.max_abs_coordinates) rowsKv.push(['max |e| at', dims(m.max_abs_coordinates)]);
  if (m.elements !== undefined) {
    rowsKv.push(['elements / finite pairs', m.elements + ' / ' + m.n]);
    rowsKv.push(['NaN / Inf (reference)', m.ref_nan + ' / ' + m.ref_inf]);
    rowsKv.push(['NaN / Inf (device)', m.dev_nan + ' / ' + m.dev_inf]);
  }
  const worstChannel = m.channels && m.worst_channel !== null ? m.channels[m.worst_channel] : undefined;  // an edited report may point past the list
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

// One output's pictures, side by side; each is left out when the pair lacks its numbers.
function pairPictures(pair, hints, policy) {
  const m = pair.metrics;
  const pictures = [scatterPlot(m), m.error_histogram ? histogram(m.error_histogram) : null,
    rangePicture(pair, hints.filter(h => h.tensor === pair.reference.name)),
    m.channels && m.channels.length ? channelBars(m, policy) : null].filter(p => p);
  return el('div', {class: 'pictures'}, pictures);
}
// A pair: the pictures first (what an engineer reads at a glance), then both tensors, the
// layout, the figures and the largest errors.
function pairBlock(pair, group, ctx) {
  const m = pair.metrics;
  const block = el('div', {class: 'pair'}, [
    el('h3', null, [pair.output_index === undefined ? 'Output' : 'Output ' + pair.output_index + ' \u2014 matched by ' + pair.match]),
    ...(m && !group.light ? [pairPictures(pair, group.hints || [], ctx.policy)] : []),
    el('div', {class: 'cols'}, [
      el('div', null, [el('h3', null, ['Reference']), tensorTable(pair.reference)]),
      el('div', null, [el('h3', null, ['Device']), tensorTable(pair.device)])])]);
  if (pair.layout) {
    block.appendChild(el('p', null, ['Layout: ' + (pair.layout.axis_order.length ? 'device axes ' + dims(pair.layout.axis_order) : 'same order') +
      (pair.layout.inferred ? ' (inferred from the shapes)' : '') + (pair.layout.reshaped ? ', size-1 axes differ' : '')]));
  }
  if (pair.error) block.appendChild(el('p', {class: 'callout'}, ['Not compared: ' + pair.error]));
  if (!m) return block;
  if (group.light) {
    block.appendChild(el('div', null, [el('h3', null, ['Overview figures']), metricsTable(m, ctx.metricFields)]));
    return block;
  }
  block.appendChild(el('div', {class: 'cols'}, [
    el('div', null, [el('h3', null, ['Metrics']), metricsTable(m, ctx.metricFields)]),
    el('div', null, [el('h3', null, ['Largest errors']), worstTable(m.worst || [])]),
    ...(m.channels.length ? [el('div', null, [el('h3', null, ['Worst channels (' +
      (m.channel_axis === null || m.channel_axis === undefined ? '' : 'axis ' + m.channel_axis + ', ') + m.channels.length + ' channels)']),
      channelTable(m.channels)])] : [])]));
  return block;
}

// ---- hints and their evidence (docs/metrics.md, 6b) ---------------------------------------
const EXACT_DB = 144.49;  // float32's resolution (compare::kExactSqnrDb): what no encoding limits
function hintPairSqnr(hint, group) {  // the SQNR of the output the hint is about
  const pair = group.pairs.find(p => p.reference.name === hint.tensor);
  return pair && pair.metrics ? num(pair.metrics.sqnr_db) : num(group.sqnr_db);
}
// What each kind measured, as SQNR bars: what the output reaches now against what the cause
// says it would reach without it.
function evidenceItems(hint, group) {
  const e = hint.evidence || {}, now = ['as the device computed it', hintPairSqnr(hint, group)];
  switch (hint.kind) {
    case 'layout_suspect':
      return [now, ['read as ' + e.permutation, e.sqnr_db]];
    case 'clipping':
      return [now, ['without the clipped elements', e.sqnr_without_db], ['with an encoding fitted to the reference', e.fitted_sqnr_db],
        ...(e.wider ? [['the same range at 16 bits', e.wider.sqnr_db]] : [])];
    case 'coarse_encoding':
      return [now, ['with an encoding fitted to the reference', e.fitted_sqnr_db],
        ...(e.wider ? [['the same range at 16 bits', e.wider.sqnr_db]] : [])];
    case 'kernel_suspect': {
      // A device output without an encoding has nothing that allows less: no such bar.
      const pair = group.pairs.find(p => p.reference.name === hint.tensor);
      const encoded = pair && pair.device.quantization !== undefined ? pair.device.quantization !== null :
        !/^FLOAT/.test((pair && pair.device.dtype) || '');
      return [...(encoded && num(e.ideal_sqnr_db) < EXACT_DB ? [['the device\'s encoding allows', e.ideal_sqnr_db]] : []),
        ['its input', group.input_sqnr_db], now];
    }
    case 'inherited':
      return [['its input', group.input_sqnr_db], now];
    default:
      return [];
  }
}
function evidenceText(hint) {
  const e = hint.evidence || {};
  if (hint.kind === 'nan_inf_introduced') return 'NaN / Inf: reference ' + e.reference_nan + ' / ' + e.reference_inf + ', device ' + e.device_nan + ' / ' + e.device_inf;
  if (hint.kind === 'degenerate_encoding') return 'encoding finding: ' + e.finding;
  if (hint.kind === 'coarse_encoding' && e.range_fraction !== undefined) return 'the reference spans ' + (100 * num(e.range_fraction)).toFixed(2) + '% of the encoding\'s range';
  return '';
}
function hintItem(hint, group, ctx) {
  const item = el('li', null, [el('span', {class: 'flag'}, [hint.kind]), ' ' + hint.sentence]);
  if (hint.kind === 'inherited' && hint.evidence && hint.evidence.upstream_group) {
    item.appendChild(document.createTextNode(' '));
    item.appendChild(linkButton('go to ' + hint.evidence.upstream_group, () => ctx.selectGroup(hint.evidence.upstream_group)));
  }
  const text = evidenceText(hint);
  if (text) item.appendChild(el('div', {class: 'muted'}, [text]));
  const bars = dbBars(evidenceItems(hint, group), ctx.policy, hint.kind + ' evidence');
  if (bars) item.appendChild(el('div', {class: 'evidence'}, [bars]));
  return item;
}
// The group's causes, most explaining first: kind, sentence, evidence.
function hintList(group, ctx) {
  const hints = group.hints || [];
  if (!hints.length) return el('span', {class: 'muted'}, ['no cause found']);
  return el('ul', {class: 'hints'}, hints.map(h => hintItem(h, group, ctx)));
}

// ---- error parts (docs/metrics.md, "Quantization or kernel?") ----------------------------
const PARTS = vocabulary.parts;  // [[name, the pair it compares]], compare::kParts
function attributionText(a) {
  return a && a.kind !== 'none' ? a.kind + (a.inherited ? ', inherited' : '') + ' (by ' +
    fmt(a.margin_db, 1) + ' dB)' : '';
}
// A group's error parts as detail rows: each part's SQNR, verdict and LSB, then the attribution,
// then the parts side by side as bars.
function partRows(parts, group, policy) {
  const out = [['total (REF vs DEV)', verdictBadge(parts.total_verdict)]];
  for (const [part, what] of PARTS) {
    const p = parts[part];
    if (!p) continue;
    out.push([part + ' (' + what + ')', el('span', null, [verdictBadge(p.verdict), ' SQNR ' + fmt(p.sqnr_db, 2) + ' dB' +
      (p.introduced_db !== null ? ', introduced ' + fmt(p.introduced_db, 2) + ' dB' : '') +
      (p.lsb_max !== null ? ', max ' + fmt(p.lsb_max, 2) + ' LSB' : '')])]);
  }
  if (parts.attribution) out.push(['attribution', attributionText(parts.attribution) || 'none']);
  const bars = dbBars([['total', group.sqnr_db, group.verdict], ...PARTS.filter(([part]) => parts[part]).map(([part, what]) =>
    [part + ' (' + what + ')', parts[part].sqnr_db, parts[part].verdict])], policy, 'error parts');
  if (bars) out.push(['parts (SQNR)', el('div', {class: 'parts-bars'}, [bars])]);
  return out;
}

// What the group's inputs and encoding allow and the op's own error beyond it (docs/metrics.md,
// section 6a), as the judge estimated it.
function excessText(e) {
  return fmt(e.allowed_sqnr_db, 2) + ' dB; the op\u2019s own error ' + fmt(e.excess_noise_ratio, 2) +
    '\u00d7 its rounding noise, ' + fmt(e.excess_db, 2) + ' dB below (' + e.source + ')';
}

// Where the group departs from its SQNR over the device's earlier runs (docs/metrics.md,
// 'Departure across runs'): shown in the run where it does, and by the summary's callout.
function departureText(d) {
  const own = d.sqnr_db === 'nan' ? 'NaN/Inf on the device' : fmt(d.sqnr_db, 2) + ' dB';
  return fmt(d.baseline_db, 2) + ' dB -> ' + own + ' (baseline over ' + d.baseline_runs + ' run' +
    (d.baseline_runs === 1 ? '' : 's') + ', spread ' + fmt(d.spread_db, 2) + ' dB)';
}

function groupFacts(r, ctx) {
  const g = r.group, time = g.time;
  return [['verdict', verdictBadge(g.verdict)], ['op type', g.op_type || 'unknown'],
    ['handles', g.handles.join(', ')], ['SQNR', fmt(g.sqnr_db, 2) + ' dB'],
    ['input SQNR', g.input_sqnr_db === null ? 'n/a' : fmt(g.input_sqnr_db, 2) + ' dB'],
    ['introduced', g.introduced_db === null ? 'n/a' : fmt(g.introduced_db, 2) + ' dB'],
    g.excess ? ['allowed', excessText(g.excess)] : null,
    g.departure ? ['departs', departureText(g.departure)] : null,
    g.inputs ? ['inputs', g.inputs.length ? el('span', null, g.inputs.flatMap(id => [linkButton(id, () => ctx.selectGroup(id)), ' '])) : 'none (a graph input)'] : null,
    time ? ['time', timeText(time) + ', ' + time.events + ' event' + (time.events === 1 ? '' : 's') + ', ' + shareText(time) + ' of the run'] : null,
    ['flags', el('span', null, g.flags.map(f => el('span', {class: 'flag', title: vocabulary.flags[f] || ''}, [f])))],
    ['why', hintList(g, ctx)],
    ['policy rule', !(g.policy_rule >= 0) ? 'defaults' : String(g.policy_rule)]]
    .concat(r.parts ? partRows(r.parts, g, ctx.policy) : []);
}

// Fills BOX with the details of row R. ctx: {policy, metricFields, selectGroup(id)}.
function renderDetails(box, r, ctx) {
  box.textContent = '';
  box.appendChild(el('h2', null, ['Details: group ', el('span', {class: 'details-id'}, [r.group.id]),
    ' (' + runName(r.run) + ') ', el('span', {class: 'details-name'}, [r.name])]));
  if (r.group.cell) {
    box.appendChild(el('p', {class: 'callout light-note', id: 'cell-note'}, ['This page keeps the overview of this run\'s groups only ' +
      '(its groups are not in the table): the full figures of this group, and its hints, are in the JSON report (qnn-debug diff --json).']));
  } else if (r.group.light) {
    box.appendChild(el('p', {class: 'callout light-note'}, ['This page keeps the overview of this group only: ' +
      'the full figures of this group are in the JSON report (qnn-debug diff --json).' +
      ((r.group.hints || []).length ? ' Its first hint is shown.' : '')]));
  }
  box.appendChild(kvTable(groupFacts(r, ctx)));
  for (const pair of r.group.pairs) box.appendChild(pairBlock(pair, r.group, ctx));
}
