// Helpers every part of the page uses. Everything from the report is data: it reaches the page
// through textContent and attribute setters only, never as markup.

// The closed vocabularies the page names, as the C++ tables declare them (docs/reports.md):
// each flag's meaning, each hint kind's badge, the error parts and the pair each compares.
const vocabulary = JSON.parse(document.getElementById('qd-vocabulary').textContent);
const SVG_NS = 'http://www.w3.org/2000/svg';

function num(v) {  // report numbers: JSON numbers or "inf" / "-inf" / "nan"
  if (typeof v === 'number') return v;
  if (v === 'inf') return Infinity;
  if (v === '-inf') return -Infinity;
  return NaN;
}
// Extremes of a long array (Math.min(...values) overflows the stack at about 100,000 values).
function minOf(values, start) { let m = start; for (const v of values) if (v < m) m = v; return m; }
function maxOf(values, start) { let m = start; for (const v of values) if (v > m) m = v; return m; }
function missing(v) { return v === null || v === undefined || Number.isNaN(v); }
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
  const node = document.createElementNS(SVG_NS, tag);
  for (const k in attrs) node.setAttribute(k, attrs[k]);
  return node;
}
function svgText(x, y, text, attrs) {
  const node = svg('text', Object.assign({x, y}, attrs || {}));
  node.textContent = text;
  return node;
}
function withTitle(node, text) {  // a tooltip: SVG's <title> child, the title attribute in HTML
  if (node.namespaceURI === SVG_NS) {
    const tip = svg('title', {});
    tip.textContent = text;
    node.appendChild(tip);
  } else {
    node.title = text;
  }
  return node;
}
// A button that looks like a link: it acts without touching the URL fragment (the view's state).
function linkButton(text, action) {
  const button = el('button', {type: 'button', class: 'link'}, [text]);
  button.addEventListener('click', action);
  return button;
}
function kvTable(rows) {
  return el('table', {class: 'kv'}, rows.filter(r => r).map(([k, v]) =>
    el('tr', null, [el('th', null, [k]), el('td', null, [v === null || v === undefined ? '' : typeof v === 'object' ? v : String(v)])])));
}
function verdictBadge(verdict) {
  return el('span', {class: 'badge ' + verdict}, [verdict]);
}
function dims(d) { return d ? '[' + d.join(', ') + ']' : ''; }
function shorten(text, length) {
  return text.length > length ? text.slice(0, length - 1) + '\u2026' : text;
}

// A run of the report on the page: its key (the device run; "device:run" when several devices
// share the report) and its name ("device run 3"; "HTP QNN 2.30 run 3"). RUN is a report run or
// anything with its device_index and device_run (a first divergence, a step, a matrix cell).
function severalDevices() { return Array.isArray(doc.devices) && doc.devices.length > 1; }
function deviceLabel(index) {
  const device = severalDevices() ? doc.devices[index || 0] : doc.device;
  return device ? device.label : '';  // the report's own: diff and the loader always set it
}
function runKey(run) {
  return severalDevices() ? (run.device_index || 0) + ':' + run.device_run : String(run.device_run);
}
function runName(run) {
  return severalDevices() ? deviceLabel(run.device_index) + ' run ' + run.device_run : 'device run ' + run.device_run;
}


// A group's profile time (docs/reports.md, Time): "110,992 cyc", "1,234 ns".
const TIME_UNITS = {cycles: 'cyc'};
function timeText(time, compact) {  // compact (the table's column): 74.1k, 296k, 1.23M
  if (!time) return '';
  const d = num(time.duration), unit = ' ' + (TIME_UNITS[time.unit] || time.unit);
  if (!Number.isFinite(d)) return String(time.duration) + unit;
  if (compact && d >= 1e4) {
    const [scaled, suffix] = d >= 1e9 ? [d / 1e9, 'G'] : d >= 1e6 ? [d / 1e6, 'M'] : [d / 1e3, 'k'];
    return scaled.toPrecision(3).replace(/\.?0+$/, '') + suffix + unit;
  }
  return Math.round(d).toLocaleString('en-US') + unit;
}
function shareText(time) {
  return time ? (100 * num(time.share)).toFixed(1) + '%' : '';
}
