// The page's pictures, drawn in SVG from the report's numbers: the error-growth chart of the
// overview and the per-op pictures of the details (docs/reports.md, HTML). Colours come from
// report.css through classes (fail, warn, pass, none), so each verdict colour has one home.

// ---- shared scales ------------------------------------------------------------------------
// A dB axis that shows the policy's lines with room above the warn line; +inf (exact) and
// values beyond the range are drawn at its ends.
function dbDomain(values, policy) {
  const finite = values.filter(Number.isFinite);
  const top = Math.min(200, maxOf(finite, policy.default.warn_below_db + 10)) + 5;
  const bottom = Math.max(-50, minOf(finite, 0));
  return [bottom, top];
}
function linear(from0, from1, to0, to1) {
  const span = from1 - from0 || 1;
  return v => to0 + (to1 - to0) * (Math.max(from0, Math.min(from1, v)) - from0) / span;
}
function chartSvg(W, H, label, cls) {
  return svg('svg', {viewBox: '0 0 ' + W + ' ' + H, width: W, height: H, role: 'img', 'aria-label': label, class: 'pic ' + (cls || '')});
}
function thresholdLines(chart, policy, at, horizontal, from, to) {
  for (const [v, band] of [[policy.default.fail_below_db, 'fail'], [policy.default.warn_below_db, 'warn']]) {
    const p = at(v);
    chart.appendChild(svg('line', horizontal ? {x1: from, x2: to, y1: p, y2: p, class: 'threshold ' + band}
      : {x1: p, x2: p, y1: from, y2: to, class: 'threshold ' + band}));
  }
}

// ---- labels that fit ----------------------------------------------------------------------
// The width of TEXT as an SVG of class SVG_CLASS draws it (user units of an unscaled SVG),
// measured in a hidden SVG of the page, so the page's styles apply.
let measureSvg = null;
function textWidth(text, svgClass, textClass) {
  if (!measureSvg) {
    measureSvg = svg('svg', {width: 0, height: 0, 'aria-hidden': 'true', style: 'position: absolute; left: -9999px; visibility: hidden'});
    document.body.appendChild(measureSvg);
  }
  measureSvg.setAttribute('class', svgClass || '');
  const node = measureSvg.appendChild(svgText(0, 0, text, textClass ? {class: textClass} : {}));
  const width = node.getComputedTextLength();
  measureSvg.removeChild(node);
  return width;
}
// TEXT cut in the middle to KEEP characters: its start and its end (a layer number, a debug id)
// both stay.
function middleCut(text, keep) {
  if (text.length <= keep) return text;
  const head = Math.ceil((keep - 1) * 0.4);
  return text.slice(0, head) + '\u2026' + text.slice(text.length - (keep - 1 - head));
}
// TEXT cut in the middle to fit WIDTH; the caller keeps the whole in a title.
function fitText(text, width, svgClass, textClass) {
  if (width <= 0) return '';
  if (textWidth(text, svgClass, textClass) <= width) return text;
  let lo = 0, hi = text.length - 1;  // the most characters kept that fit: binary search
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (textWidth(middleCut(text, mid), svgClass, textClass) <= width) lo = mid; else hi = mid - 1;
  }
  return lo > 1 ? middleCut(text, lo) : '';
}
// What every name of NAMES starts with, up to a separator ('.', '/', '_', ':'), when something is
// left of each: the axis leaves it out so that the names' own parts show.
function commonPrefix(names) {
  if (names.length < 2) return '';
  let prefix = names[0];
  for (const name of names) {
    let k = 0;
    while (k < prefix.length && k < name.length && prefix[k] === name[k]) ++k;
    prefix = prefix.slice(0, k);
  }
  const cut = Math.max(...['.', '/', '_', ':'].map(c => prefix.lastIndexOf(c)));
  prefix = cut >= 0 ? prefix.slice(0, cut + 1) : '';
  return names.every(n => n.length > prefix.length) ? prefix : '';
}

// ---- error growth along the op order ------------------------------------------------------
// Columns: one per group id in op order, with each drawn run's row. Few runs get a line each;
// many get the worst, mean and best across them.
const RUN_SERIES_MAX = 4;
function growthColumns(runRows) {
  const byId = new Map();
  for (const {rows} of runRows) {
    for (const r of rows) {
      let column = byId.get(r.group.id);
      if (!column) byId.set(r.group.id, column = {id: r.group.id, name: r.name, order: r.group.order, byRun: new Map()});
      column.byRun.set(runKey(r.run), r);
    }
  }
  return Array.from(byId.values()).sort((a, b) => a.order - b.order);
}
function growthSeries(columns, runRows) {
  const value = (column, runId) => { const r = column.byRun.get(runId); return r && r.sqnr !== null ? r.sqnr : NaN; };
  if (runRows.length <= RUN_SERIES_MAX) {
    return runRows.map(({runId, label}, i) => ({name: label, cls: 'series s' + i,
      values: columns.map(c => value(c, runId))}));
  }
  const across = (c, pick) => {
    const values = runRows.map(({runId}) => value(c, runId)).filter(v => !Number.isNaN(v));
    return values.length ? pick(values) : NaN;
  };
  const mean = v => v.some(x => x === Infinity) ? (v.every(x => x === Infinity) ? Infinity : NaN) :
    v.reduce((a, b) => a + b, 0) / v.length;
  return [{name: 'worst run', cls: 'series worst', values: columns.map(c => across(c, v => Math.min(...v)))},
          {name: 'mean over runs', cls: 'series s0', values: columns.map(c => across(c, mean))},
          {name: 'best run', cls: 'series best', values: columns.map(c => across(c, v => Math.max(...v)))}];
}
// A path through the values, broken where there is none; at most about 2 points per pixel
// column (each bucket keeps its lowest, the one that matters), so 100,000 groups stay cheap.
function seriesPath(values, x, y, width) {
  const per = Math.max(1, Math.floor(values.length / (2 * width)));
  let d = '', pen = false;
  for (let i = 0; i < values.length; i += per) {
    let v = NaN;
    for (let j = i; j < Math.min(values.length, i + per); ++j) if (!Number.isNaN(values[j]) && !(v <= values[j])) v = values[j];
    if (Number.isNaN(v)) { pen = false; continue; }
    d += (pen ? 'L' : 'M') + x(i).toFixed(1) + ' ' + y(v).toFixed(1);
    pen = true;
  }
  return d;
}
// Op names along the axis, every k-th so that none overlaps the next: rotated 40 degrees, names
// 22 px apart along the axis are 22 x sin 40 = 14 px apart across, room for 10 px text. Their
// common prefix is left out (the caption names it) and each is cut in the middle to stay inside
// the picture: right of its left edge and above BOTTOM (the captions). Hover: the whole name.
// Returns the prefix left out.
const AXIS_ANGLE = 40 * Math.PI / 180;
function axisNames(chart, columns, x, baseline, plotWidth, bottom) {
  const every = Math.max(1, Math.ceil(columns.length / Math.floor(plotWidth / 22)));
  const picked = [];
  for (let i = 0; i < columns.length; i += every) picked.push(i);
  const names = picked.map(i => columns[i].name || columns[i].id);
  const prefix = commonPrefix(names);
  const cos = Math.cos(AXIS_ANGLE), sin = Math.sin(AXIS_ANGLE), glyph = 10;  // the font size
  picked.forEach((i, k) => {
    // The text runs down and left from its anchor; its glyphs stand up to `glyph` beside it.
    const room = Math.min((x(i) - glyph * sin) / cos, (bottom - baseline - glyph * cos) / sin);
    const label = svgText(0, 0, fitText(names[k].slice(prefix.length), room, 'growth', 'axis-name'),
      {class: 'axis-name', 'text-anchor': 'end', transform: 'translate(' + x(i).toFixed(1) + ',' + baseline + ') rotate(-40)'});
    chart.appendChild(withTitle(label, columns[i].id + ' ' + names[k]));
  });
  return prefix;
}
function drawGrowthChart(box, runRows, policy, onPick) {
  box.textContent = '';
  const columns = growthColumns(runRows);
  if (!columns.length) { box.appendChild(el('p', {class: 'muted'}, ['Nothing compared.'])); return; }
  const series = growthSeries(columns, runRows);
  const [bottom, top] = dbDomain(series.flatMap(s => s.values), policy);
  const W = 1000, H = 360, L = 80, R = 10, T = 10, B = 130;  // room for the rotated names
  const x = i => L + (columns.length === 1 ? 0 : i * (W - L - R) / (columns.length - 1));
  const y = linear(bottom, top, H - B, T);
  const chart = svg('svg', {viewBox: '0 0 ' + W + ' ' + H, width: '100%', role: 'img', 'aria-label': 'SQNR per group', class: 'growth'});
  chart.appendChild(svg('line', {x1: L, y1: T, x2: L, y2: H - B, class: 'axis'}));
  for (let v = Math.ceil(bottom / 10) * 10; v <= top; v += 10) {
    chart.appendChild(svg('line', {x1: L, y1: y(v), x2: W - R, y2: y(v), class: 'grid'}));
    chart.appendChild(svgText(L - 5, y(v) + 4, String(v), {'text-anchor': 'end'}));
  }
  thresholdLines(chart, policy, y, true, L, W - R);
  for (const s of series) chart.appendChild(svg('path', {d: seriesPath(s.values, x, y, W - L - R), class: s.cls}));
  if (columns.length <= 2000 && runRows.length === 1) {  // markers help on small graphs and only cost on large ones
    series[0].values.forEach((v, i) => {  // each op's dot in its verdict's colour
      const row = columns[i].byRun.get(runRows[0].runId);
      if (!Number.isNaN(v)) chart.appendChild(svg('circle', {cx: x(i), cy: y(v), r: 3, class: 'dot ' + row.group.verdict}));
    });
  }
  const prefix = axisNames(chart, columns, x, H - B + 12, W - L - R, H - 18);
  const caption = 'ops in op order' + (series.length > 1 ? '' : ' (' + series[0].name + ')') +
    '; +inf (exact) at the top; hover: an op, click: its details';
  chart.appendChild(svgText(W - R, H - 4, caption, {'text-anchor': 'end', class: 'caption'}));
  if (prefix) {  // what the names on the axis leave out, left of the caption
    const room = W - R - textWidth(caption, 'growth', 'caption') - 24 - L;
    const text = chart.appendChild(svgText(L, H - 4, fitText('names after ' + prefix, room, 'growth', 'caption'), {class: 'caption prefix'}));
    withTitle(text, 'every name on the axis starts with ' + prefix);
  }
  box.appendChild(chart);
  growthLegend(box, series);
  growthHover(box, chart, columns, x, {L, R, T, B, W, H}, onPick);
}
function growthLegend(box, series) {
  if (series.length < 2) return;
  box.appendChild(el('div', {class: 'legend'}, series.map(s =>
    el('span', null, [el('span', {class: 'swatch ' + s.cls}), s.name]))));
}
// Hovering shows the op under the pointer (id, name, SQNR per drawn run); a click selects it.
function growthHover(box, chart, columns, x, frame, onPick) {
  const guide = svg('line', {y1: frame.T, y2: frame.H - frame.B, class: 'guide', visibility: 'hidden'});
  const overlay = svg('rect', {x: frame.L, y: frame.T, width: frame.W - frame.L - frame.R, height: frame.H - frame.B - frame.T, class: 'overlay'});
  chart.appendChild(guide);
  chart.appendChild(overlay);
  const tip = el('div', {class: 'tip', hidden: ''});
  box.classList.add('has-tip');
  box.appendChild(tip);
  const columnAt = event => {
    const point = chart.createSVGPoint();
    point.x = event.clientX;
    point.y = event.clientY;
    const local = point.matrixTransform(chart.getScreenCTM().inverse());
    const step = columns.length > 1 ? (frame.W - frame.L - frame.R) / (columns.length - 1) : 1;
    return Math.max(0, Math.min(columns.length - 1, Math.round((local.x - frame.L) / step)));
  };
  overlay.addEventListener('mousemove', event => {
    const i = columnAt(event), column = columns[i];
    guide.setAttribute('x1', x(i));
    guide.setAttribute('x2', x(i));
    guide.setAttribute('visibility', 'visible');
    tip.textContent = column.id + '  ' + column.name + ': ' + Array.from(column.byRun.values())
      .map(r => fmt(r.sqnr, 2) + ' dB' + (column.byRun.size > 1 ? ' (' + runName(r.run) + ')' : '')).join(', ');
    const area = box.getBoundingClientRect();
    tip.style.left = Math.min(event.clientX - area.left + 12, area.width - 320) + 'px';
    tip.style.top = (event.clientY - area.top + 12) + 'px';
    tip.hidden = false;
  });
  overlay.addEventListener('mouseleave', () => { tip.hidden = true; guide.setAttribute('visibility', 'hidden'); });
  overlay.addEventListener('click', event => {
    const rows = Array.from(columns[columnAt(event)].byRun.values());
    rows.sort((a, b) => (a.sqnr === null ? Infinity : a.sqnr) - (b.sqnr === null ? Infinity : b.sqnr));
    onPick(rows[0]);  // the worst run's row of that op
  });
}

// ---- per-op pictures ------------------------------------------------------------------------
// Device against reference: the even sample (metrics.samples) and the largest errors
// (metrics.worst), on equal axes so that a correct op lies on the y = x line.
function scatterPoints(m) {
  const points = [];
  const s = m.samples;
  if (s) s.index.forEach((index, i) => points.push({r: num(s.reference[i]), d: num(s.device[i]), worst: false, where: 'element ' + index}));
  for (const w of m.worst || []) points.push({r: num(w.reference), d: num(w.device), worst: true, where: dims(w.coordinates)});
  return points;
}
function scatterPlot(m) {
  const points = scatterPoints(m);
  const finite = points.filter(p => Number.isFinite(p.r) && Number.isFinite(p.d));
  if (!finite.length) return null;
  let lo = Math.min(...finite.map(p => Math.min(p.r, p.d))), hi = Math.max(...finite.map(p => Math.max(p.r, p.d)));
  if (lo === hi) { lo -= Math.abs(lo) * 0.1 || 1; hi += Math.abs(hi) * 0.1 || 1; }
  const pad = (hi - lo) * 0.04;
  lo -= pad; hi += pad;
  const W = 290, H = 270, L = 52, R = 10, T = 10, B = 42, side = Math.min(W - L - R, H - T - B);
  const x = linear(lo, hi, L, L + side), y = linear(lo, hi, T + side, T);
  const chart = chartSvg(W, H, 'device against reference values', 'scatter');
  chart.appendChild(svg('rect', {x: L, y: T, width: side, height: side, class: 'frame'}));
  chart.appendChild(svg('line', {x1: x(lo), y1: y(lo), x2: x(hi), y2: y(hi), class: 'diagonal'}));
  for (const p of finite) {
    const dot = svg('circle', {cx: x(p.r).toFixed(1), cy: y(p.d).toFixed(1), r: p.worst ? 3.5 : 2.5, class: 'pt' + (p.worst ? ' worst' : '')});
    chart.appendChild(withTitle(dot, p.where + ': reference ' + fmt(p.r, 6) + ', device ' + fmt(p.d, 6)));
  }
  chart.appendChild(svgText(L, T + side + 14, fmt(lo), {}));
  chart.appendChild(svgText(L + side, T + side + 14, fmt(hi), {'text-anchor': 'end'}));
  chart.appendChild(svgText(L + side / 2, T + side + 30, 'reference', {'text-anchor': 'middle', class: 'caption'}));
  chart.appendChild(svgText(L - 4, T + side, fmt(lo), {'text-anchor': 'end'}));
  chart.appendChild(svgText(L - 4, T + 10, fmt(hi), {'text-anchor': 'end'}));
  chart.appendChild(svgText(0, 0, 'device', {'text-anchor': 'middle', class: 'caption', transform: 'translate(12,' + (T + side / 2) + ') rotate(-90)'}));
  const dropped = points.length - finite.length;
  return figure(chart, finite.filter(p => !p.worst).length + ' sampled elements, ' + finite.filter(p => p.worst).length +
    ' largest errors (red); y = x dashed' + (dropped ? '; ' + dropped + ' NaN/Inf not drawn' : ''));
}
function figure(picture, caption) {
  return el('figure', {class: 'picture'}, [picture, el('figcaption', {class: 'muted'}, [caption])]);
}

// The error histogram: log counts over octave bins of |e| (docs/metrics.md).
function histogram(h) {
  const counts = h.counts, edges = h.edges;
  const W = 480, H = 150, B = 28, max = Math.max(1, ...counts);
  const chart = chartSvg(W, H, 'error histogram', 'histogram');
  const bw = W / counts.length;
  counts.forEach((c, i) => {
    const h2 = c ? Math.max(1, (H - B) * Math.log1p(c) / Math.log1p(max)) : 0;
    const bar = svg('rect', {x: i * bw + 1, y: H - B - h2, width: Math.max(0, bw - 2), height: h2, class: 'bar'});
    chart.appendChild(withTitle(bar, '[' + fmt(edges[i]) + ', ' + fmt(edges[i + 1]) + '): ' + c));
  });
  chart.appendChild(svgText(0, H - 8, '|e| < ' + fmt(edges[1]), {}));
  chart.appendChild(svgText(W, H - 8, fmt(edges[edges.length - 1]) + ' (log count, octave bins)', {'text-anchor': 'end'}));
  return figure(chart, 'error histogram');
}

// The real range an encoding can represent: [(raw_min + offset) x scale, (raw_max + offset) x
// scale] in QNN's convention, raw_min .. raw_max the device dtype's range narrowed to the
// bitwidth (docs/metrics.md, sections 1 and 6b; docs/store-format.md for zero_point). A per-axis
// encoding gives the envelope of its channels' ranges and the narrowest one.
function encodingRange(q, dtype) {
  const dtypeBits = Number((/(\d+)$/.exec(dtype || '') || [])[1]);
  if (!q || !dtypeBits) return null;
  const bits = q.bitwidth > 0 && q.bitwidth < dtypeBits ? q.bitwidth : dtypeBits;
  const signed = /^(SFIXED|INT_)/.test(dtype);
  const rawMin = signed ? -Math.pow(2, bits - 1) : 0, rawMax = signed ? Math.pow(2, bits - 1) - 1 : Math.pow(2, bits) - 1;
  const out = {lo: Infinity, hi: -Infinity, narrowLo: -Infinity, narrowHi: Infinity, channels: q.scales.length, bits, signed};
  q.scales.forEach((s, c) => {
    const scale = num(s), offset = q.offsets[c] !== undefined ? q.offsets[c] : q.offsets[0];
    const shift = q.convention === 'zero_point' ? -offset : offset;
    const a = (rawMin + shift) * scale, b = (rawMax + shift) * scale;
    if (!Number.isFinite(a) || !Number.isFinite(b) || a === b) return;
    out.lo = Math.min(out.lo, a, b); out.hi = Math.max(out.hi, a, b);
    out.narrowLo = Math.max(out.narrowLo, Math.min(a, b)); out.narrowHi = Math.min(out.narrowHi, Math.max(a, b));
  });
  return out.lo < out.hi ? out : null;
}
// The reference's min/max against the encoding's range: what lies outside is clipped (fail
// colour), what the reference never reaches is range the encoding wastes (hatched).
function rangePicture(pair, hints) {
  const range = encodingRange(pair.device.quantization, pair.device.dtype);
  const ref = pair.reference.stats, dev = pair.device.stats;
  if (!range || !ref || !Number.isFinite(num(ref.min)) || !Number.isFinite(num(ref.max))) return null;
  const refLo = num(ref.min), refHi = num(ref.max);
  const fitted = (hints || []).map(h => h.evidence && h.evidence.fitted).find(f => f) || null;
  const rows = [['encoding', range.lo, range.hi, 'encoding'], ['reference', refLo, refHi, 'reference']];
  if (dev && Number.isFinite(num(dev.min)) && Number.isFinite(num(dev.max))) rows.push(['device', num(dev.min), num(dev.max), 'device']);
  if (fitted) rows.push(['fitted', num(fitted.min), num(fitted.max), 'fitted']);
  const lo = Math.min(...rows.map(r => r[1])), hi = Math.max(...rows.map(r => r[2]));
  const W = 480, L = 72, R = 12, rowH = 22, H = rows.length * rowH + 34;
  const x = linear(lo - (hi - lo) * 0.02, hi + (hi - lo) * 0.02, L, W - R);
  const chart = chartSvg(W, H, 'encoding range against the reference range', 'range');
  rows.forEach(([label, a, b, cls], i) => {
    const top = 6 + i * rowH;
    chart.appendChild(svgText(0, top + 13, label, {}));
    chart.appendChild(svg('rect', {x: x(a), y: top + 2, width: Math.max(1, x(b) - x(a)), height: rowH - 8, class: 'span ' + cls}));
  });
  // The encoding's unused part (hatched) and the reference's clipped parts (fail colour).
  const used = [Math.max(range.lo, refLo), Math.min(range.hi, refHi)];
  for (const [a, b] of [[range.lo, Math.min(range.hi, refLo)], [Math.max(range.lo, refHi), range.hi]]) {
    if (b > a) chart.appendChild(svg('rect', {x: x(a), y: 8, width: x(b) - x(a), height: rowH - 8, class: 'span unused'}));
  }
  for (const [a, b] of [[refLo, Math.min(refHi, range.lo)], [Math.max(refLo, range.hi), refHi]]) {
    if (b > a) chart.appendChild(svg('rect', {x: x(a), y: 6 + rowH + 2, width: x(b) - x(a), height: rowH - 8, class: 'span clipped'}));
  }
  for (const v of [range.lo, range.hi]) chart.appendChild(svg('line', {x1: x(v), x2: x(v), y1: 4, y2: H - 28, class: 'edge'}));
  // The encoding's ends on the axis (outside its span, so that close ends do not collide), the
  // picture's own ends at its edges.
  const base = H - 10;
  chart.appendChild(svgText(x(range.lo) - 3, base, fmt(range.lo), {'text-anchor': 'end', class: 'strong'}));
  chart.appendChild(svgText(x(range.hi) + 3, base, fmt(range.hi), {'text-anchor': 'start', class: 'strong'}));
  if (x(range.lo) - L > 90) chart.appendChild(svgText(L, base + 0, fmt(lo), {'text-anchor': 'start'}));
  if (W - R - x(range.hi) > 90) chart.appendChild(svgText(W - R, base, fmt(hi), {'text-anchor': 'end'}));
  return figure(chart, rangeCaption(range, refLo, refHi, used));
}
function rangeCaption(range, refLo, refHi, used) {
  const clippedBelow = Math.max(0, Math.min(refHi, range.lo) - refLo), clippedAbove = Math.max(0, refHi - Math.max(refLo, range.hi));
  const span = refHi - refLo, share = Math.max(0, used[1] - used[0]) / (range.hi - range.lo);
  const parts = [range.bits + '-bit ' + (range.signed ? 'signed' : 'unsigned') + ' encoding [' + fmt(range.lo) + ', ' + fmt(range.hi) + ']' +
    (range.channels > 1 ? ' (envelope of ' + range.channels + ' channels; the narrowest [' + fmt(range.narrowLo) + ', ' + fmt(range.narrowHi) + '])' : ''),
    'reference [' + fmt(refLo) + ', ' + fmt(refHi) + ']'];
  if (span > 0 && clippedBelow + clippedAbove > 0) parts.push('clipped: ' + (100 * (clippedBelow + clippedAbove) / span).toFixed(1) + '% of the reference range');
  parts.push('the reference uses ' + (100 * share).toFixed(1) + '% of the encoding\'s range');
  return parts.join('; ');
}

// Per-channel SQNR as bars, the worst channels named (metrics.channels, worst_channels).
function channelBars(m, policy) {
  const values = m.channels.map(c => num(c.sqnr_db));
  const worst = m.worst_channels || values.map((v, i) => [v, i]).sort((a, b) => a[0] - b[0]).slice(0, 5).map(p => p[1]);
  const [bottom, top] = dbDomain(values, policy);
  const W = 520, H = 150, L = 34, R = 6, T = 14, B = 18;
  const y = linear(bottom, top, H - B, T), bw = (W - L - R) / values.length;
  const chart = chartSvg(W, H, 'SQNR per channel', 'channels');
  thresholdLines(chart, policy, y, true, L, W - R);
  chart.appendChild(svgText(L - 4, y(top) + 8, fmt(top, 0), {'text-anchor': 'end'}));
  chart.appendChild(svgText(L - 4, y(bottom), fmt(bottom, 0), {'text-anchor': 'end'}));
  const named = new Set(worst);
  values.forEach((v, i) => {
    const h = Number.isNaN(v) ? 0 : Math.max(1, y(bottom) - y(v));
    const bar = svg('rect', {x: L + i * bw, y: y(bottom) - h, width: Math.max(0.5, bw - (bw > 3 ? 1 : 0)), height: h,
      class: 'bar' + (named.has(i) ? ' named' : '')});  // a figure, not a verdict: the lines give the scale
    chart.appendChild(withTitle(bar, 'channel ' + i + ': ' + fmt(v, 2) + ' dB'));
  });
  worst.forEach(i => chart.appendChild(svgText(L + (i + 0.5) * bw, T - 3, String(i), {'text-anchor': 'middle', class: 'named-label'})));
  chart.appendChild(svgText(L, H - 3, 'channel 0', {}));
  chart.appendChild(svgText(W - R, H - 3, String(values.length - 1), {'text-anchor': 'end'}));
  const caption = 'SQNR (dB) per channel' + (m.channel_axis !== undefined && m.channel_axis !== null ? ' along axis ' + m.channel_axis : '') +
    '; worst: ' + worst.map(i => 'channel ' + i + ' (' + fmt(values[i], 2) + ' dB)').join(', ');
  return figure(chart, caption);
}

// Labelled SQNR values as horizontal bars on the policy's scale: a hint's evidence, a group's
// error parts. Items: [label, dB or null, the verdict the report gives it (its colour) or none];
// +inf (exact) fills the bar.
function dbBars(items, policy, label) {
  const shown = items.filter(([, v]) => v !== null && v !== undefined);
  if (!shown.length) return null;
  const values = shown.map(([, v]) => num(v));
  const [bottom, top] = dbDomain(values, policy);
  const W = 560, L = 250, R = 70, rowH = 20, H = shown.length * rowH + 8;
  const x = linear(bottom, top, L, W - R);
  const chart = chartSvg(W, H, label, 'db-bars');
  thresholdLines(chart, policy, x, false, 2, H - 2);
  shown.forEach(([name], i) => {
    const v = values[i], yTop = 4 + i * rowH;
    chart.appendChild(withTitle(svgText(0, yTop + 13, fitText(name, L - 8, 'pic db-bars'), {}), name));
    const end = Number.isNaN(v) ? x(bottom) : x(v);
    const verdict = shown[i][2];
    chart.appendChild(svg('rect', {x: x(bottom), y: yTop + 2, width: Math.max(1, end - x(bottom)), height: rowH - 6, class: 'bar' + (verdict ? ' ' + verdict : '')}));
    chart.appendChild(svgText(W - R + 6, yTop + 13, v === Infinity ? 'exact' : fmt(v, 2) + ' dB', {}));
  });
  return chart;
}
