// The op graph (groups' "inputs": the stored graph, docs/reports.md, HTML): a layered layout of
// its own, drawn in SVG, top to bottom. Only the part near the view is in the DOM, and far out
// nodes are drawn without text, so 2,000 ops and more stay light.

// ---- layout ---------------------------------------------------------------------------------
// Longest-path layering, long edges cut into dummy vertices, barycentric ordering sweeps, then
// each layer placed left to right near its upper neighbours. Every step is linear or a sort
// of one layer: O(n log n) for n ops (dummies are capped at a few per op).
const LAYOUT = {nodeW: 172, nodeH: 40, dummyW: 14, gap: 26, layerH: 78, margin: 40, sweeps: 6, dummiesPerOp: 4};

// Kahn's algorithm seeded in op order; ops left on a cycle follow in op order. Returns each
// op's position in the order: an edge counts only from an earlier to a later op.
function topologicalRanks(n, preds) {
  const indegree = new Int32Array(n), succ = Array.from({length: n}, () => []);
  preds.forEach((list, v) => { for (const u of list) { succ[u].push(v); indegree[v]++; } });
  const rank = new Int32Array(n).fill(-1), queue = [];
  for (let v = 0; v < n; ++v) if (!indegree[v]) queue.push(v);
  let next = 0;
  for (let head = 0; head < queue.length; ++head) {
    const v = queue[head];
    rank[v] = next++;
    for (const w of succ[v]) if (--indegree[w] === 0) queue.push(w);
  }
  for (let v = 0; v < n; ++v) if (rank[v] < 0) rank[v] = next++;
  return rank;
}
function graphEdges(rows) {
  const index = new Map(rows.map((r, i) => [r.group.id, i]));
  const preds = rows.map((r, i) => Array.from(new Set((r.group.inputs || []).map(id => index.get(id))))
    .filter(j => j !== undefined && j !== i));
  const rank = topologicalRanks(rows.length, preds);
  const edges = [];
  preds.forEach((list, v) => { for (const u of list) if (rank[u] < rank[v]) edges.push([u, v]); });
  return {edges, rank};
}
function longestPathLayers(n, edges, rank) {
  const byRank = Array.from({length: n}, (_, v) => v).sort((a, b) => rank[a] - rank[b]);
  const into = Array.from({length: n}, () => []);
  for (const [u, v] of edges) into[v].push(u);
  const layer = new Int32Array(n);
  for (const v of byRank) for (const u of into[v]) layer[v] = Math.max(layer[v], layer[u] + 1);
  return {layer, byRank};
}
// Vertices: the ops, then dummies that carry edges longer than one layer (while the budget
// lasts; a longer edge past it is drawn straight). up/down: neighbours one layer away.
function layerVertices(n, edges, layer) {
  const vLayer = Array.from(layer), up = Array.from({length: n}, () => []), down = Array.from({length: n}, () => []);
  let budget = LAYOUT.dummiesPerOp * n + 100;
  const link = (a, b) => { down[a].push(b); up[b].push(a); };
  const chains = edges.map(([u, v]) => {
    const span = layer[v] - layer[u];
    if (span > 1 && span - 1 > budget) return [u, v];
    const chain = [u];
    for (let l = layer[u] + 1; l < layer[v]; ++l) {
      const d = vLayer.length;
      vLayer.push(l); up.push([]); down.push([]);
      link(chain[chain.length - 1], d);
      chain.push(d);
    }
    budget -= Math.max(0, span - 1);
    link(chain[chain.length - 1], v);
    chain.push(v);
    return chain;
  });
  return {vLayer, up, down, chains};
}
// Barycentric sweeps, down then up: each vertex moves to the mean position of its neighbours in
// the layer just swept (a vertex without any keeps its place). Fewer crossings, not the fewest.
function orderLayers(v, byRank, n) {
  const layers = [];
  const place = id => { (layers[v.vLayer[id]] = layers[v.vLayer[id]] || []).push(id); };
  byRank.forEach(place);
  for (let d = n; d < v.vLayer.length; ++d) place(d);
  for (let l = 0; l < layers.length; ++l) layers[l] = layers[l] || [];
  const pos = new Float64Array(v.vLayer.length), key = new Float64Array(v.vLayer.length);
  const number = layer => layer.forEach((id, i) => { pos[id] = i; });
  layers.forEach(number);
  for (let sweep = 0; sweep < LAYOUT.sweeps; ++sweep) {
    const downward = sweep % 2 === 0, near = downward ? v.up : v.down;
    for (let step = 1; step < layers.length; ++step) {
      const layer = layers[downward ? step : layers.length - 1 - step];
      for (const id of layer) {
        const list = near[id];
        key[id] = list.length ? list.reduce((s, w) => s + pos[w], 0) / list.length : pos[id];
      }
      layer.sort((a, b) => key[a] - key[b] || pos[a] - pos[b]);
      number(layer);
    }
  }
  return layers;
}
// x: each layer in its order, every vertex as near as its spacing allows to the mean x of its
// upper neighbours (the first layer centred on 0), so chains run straight down.
function placeLayers(layers, v, n) {
  const x = new Float64Array(v.vLayer.length), width = id => id < n ? LAYOUT.nodeW : LAYOUT.dummyW;
  for (const layer of layers) {
    const want = layer.map(id => v.up[id].length ? v.up[id].reduce((s, w) => s + x[w], 0) / v.up[id].length : NaN);
    let total = -LAYOUT.gap;
    for (const id of layer) total += width(id) + LAYOUT.gap;
    let cursor = -total / 2;
    const grid = layer.map(id => { const c = cursor + width(id) / 2; cursor += width(id) + LAYOUT.gap; return c; });
    let prev = -Infinity, prevHalf = 0, shift = 0;
    layer.forEach((id, i) => {
      const desired = Number.isNaN(want[i]) ? grid[i] : want[i];
      x[id] = Math.max(desired, prev + prevHalf + LAYOUT.gap + width(id) / 2);
      shift += desired - x[id];
      prev = x[id]; prevHalf = width(id) / 2;
    });
    shift /= Math.max(1, layer.length);  // pushing right only would drift every layer rightwards
    for (const id of layer) x[id] += shift;
  }
  return x;
}
function edgePath(points) {  // vertical tangents at every point: smooth, readable joins
  let d = 'M' + points[0][0].toFixed(1) + ' ' + points[0][1].toFixed(1);
  for (let i = 1; i < points.length; ++i) {
    const [x0, y0] = points[i - 1], [x1, y1] = points[i], mid = (y1 - y0) / 2;
    d += 'C' + x0.toFixed(1) + ' ' + (y0 + mid).toFixed(1) + ' ' + x1.toFixed(1) + ' ' + (y1 - mid).toFixed(1) + ' ' + x1.toFixed(1) + ' ' + y1.toFixed(1);
  }
  return d;
}
function layoutGraph(rows) {
  const n = rows.length;
  const {edges, rank} = graphEdges(rows);
  const {layer, byRank} = longestPathLayers(n, edges, rank);
  const v = layerVertices(n, edges, layer);
  const layers = orderLayers(v, byRank, n);
  const x = placeLayers(layers, v, n);
  const minX = minOf(x, Infinity) - LAYOUT.nodeW / 2;
  const X = id => x[id] - minX + LAYOUT.margin, Y = id => LAYOUT.margin + v.vLayer[id] * LAYOUT.layerH + LAYOUT.nodeH / 2;
  const nodes = rows.map((r, i) => ({row: r, x: X(i), y: Y(i)}));
  const lines = v.chains.map(chain => {
    const points = chain.map((id, i) => [X(id), i === 0 ? Y(id) + LAYOUT.nodeH / 2 : i === chain.length - 1 ? Y(id) - LAYOUT.nodeH / 2 : Y(id)]);
    const xs = points.map(p => p[0]), ys = points.map(p => p[1]);
    return {d: edgePath(points), box: [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)], from: chain[0], to: chain[chain.length - 1]};
  });
  return {nodes, lines, layers: layers.length,
    width: maxOf(nodes.map(p => p.x), 0) + LAYOUT.nodeW / 2 + LAYOUT.margin,
    height: LAYOUT.margin * 2 + layers.length * LAYOUT.layerH};
}

// ---- the view -------------------------------------------------------------------------------
const ZOOM = {min: 0.003, max: 3, text: 0.45};  // 0.003: 'fit' shows a few thousand layers

function nodeTitle(r) {
  const g = r.group;
  return g.id + '  ' + r.name + '\n' + (g.op_type || 'unknown op') + ', SQNR ' + fmt(g.sqnr_db, 2) + ' dB, ' + g.verdict +
    (g.introduced_db !== null ? ', introduced ' + fmt(g.introduced_db, 2) + ' dB' : '') +
    (g.time ? '\ntime ' + timeText(g.time) + ' (' + shareText(g.time) + ')' : '') +
    ((g.hints || []).length ? '\nwhy: ' + g.hints.map(h => h.kind).join(', ') : '');
}
// One node: its box coloured by the group's verdict (the report's, as the judge gave it: a node
// never contradicts its own verdict), name and figures, and its marks (first divergence,
// introducer rank, hint badge). Text only through textContent.
function nodeElement(node, i, marks, withText) {
  const r = node.row, w = LAYOUT.nodeW, h = LAYOUT.nodeH;
  const g = svg('g', {class: 'node ' + r.group.verdict, 'data-node': i,
    transform: 'translate(' + (node.x - w / 2).toFixed(1) + ',' + (node.y - h / 2).toFixed(1) + ')'});
  if (marks.first === r) g.appendChild(svg('rect', {x: -6, y: -6, width: w + 12, height: h + 12, rx: 9, class: 'first-ring'}));
  const rank = marks.introducers.get(r.group.id);
  if (rank) g.appendChild(svg('rect', {x: -3, y: -3, width: w + 6, height: h + 6, rx: 7, class: 'intro-ring'}));
  g.appendChild(svg('rect', {width: w, height: h, rx: 5, class: 'box'}));
  if (withText) {
    g.appendChild(svgText(8, 16, shorten(r.name || r.group.id, 24), {class: 'label'}));
    g.appendChild(svgText(8, 32, shorten((r.group.op_type ? r.group.op_type + '  ' : '') + (r.sqnr === null ? 'not compared' : fmt(r.sqnr, 1) + ' dB'), 26), {class: 'sub'}));
    if (marks.first === r) g.appendChild(svgText(w + 10, h / 2 + 4, 'first divergence', {class: 'first-label'}));
  }
  if (rank) {
    g.appendChild(svg('circle', {cx: 0, cy: 0, r: 9, class: 'intro-rank'}));
    g.appendChild(svgText(0, 4, String(rank), {class: 'intro-rank-text', 'text-anchor': 'middle'}));
  }
  const hints = r.group.hints || [];
  if (hints.length) {
    const badge = svg('g', {class: 'hint-badge', 'data-hint': hints[0].kind});
    badge.appendChild(svg('circle', {cx: w, cy: 0, r: 9}));
    badge.appendChild(svgText(w, 4, vocabulary.hint_badges[hints[0].kind] || '?', {'text-anchor': 'middle'}));
    g.appendChild(withTitle(badge, hints.map(hint => hint.kind).join(', ') + ': ' + hints[0].sentence));
  }
  return withTitle(g, nodeTitle(r));
}

// The view: a transform (scale k, translation tx, ty: screen = graph x k + t) over the layout,
// and the nodes near it in the DOM. ctx: {runs: [{runId, rows, run}], policy, select(row),
// firstDivergence(runId) -> row}.
class GraphView {
  constructor(ctx) {
    this.ctx = ctx;
    this.box = document.getElementById('graph');
    this.canvas = svg('svg', {class: 'graph', role: 'img', 'aria-label': 'op graph'});
    this.edgeLayer = svg('g', {class: 'edges'});
    this.nodeLayer = svg('g', {class: 'nodes'});
    this.world = svg('g', {});
    this.world.appendChild(this.edgeLayer);
    this.world.appendChild(this.nodeLayer);
    this.canvas.appendChild(this.world);
    this.box.appendChild(this.canvas);
    document.getElementById('graph-section').hidden = false;
    Object.assign(this, {k: 1, tx: 0, ty: 0, layout: null, runId: null, marks: null, drawn: null,
      elements: new Map(), selected: null, matches: [], current: -1});
  }
  size() { return {w: this.box.clientWidth || 1000, h: this.box.clientHeight || 600}; }
  viewRect() {
    const {w, h} = this.size();
    return [-this.tx / this.k, -this.ty / this.k, (w - this.tx) / this.k, (h - this.ty) / this.k];
  }
  // Draws what lies within one view's size around the view, so panning redraws only when it
  // leaves that region, and zooming only when it leaves it or crosses the text threshold.
  update(force) {
    this.world.setAttribute('transform', 'translate(' + this.tx.toFixed(1) + ',' + this.ty.toFixed(1) + ') scale(' + this.k.toFixed(4) + ')');
    const [x0, y0, x1, y1] = this.viewRect(), text = this.k >= ZOOM.text, d = this.drawn;
    if (!force && d && d.text === text && x0 >= d.box[0] && y0 >= d.box[1] && x1 <= d.box[2] && y1 <= d.box[3]) return;
    const mw = x1 - x0, mh = y1 - y0;
    this.drawn = {text, box: [x0 - mw, y0 - mh, x1 + mw, y1 + mh]};
    this.draw(this.drawn.box, text);
  }
  draw([x0, y0, x1, y1], text) {
    const {nodes, lines} = this.layout, hw = LAYOUT.nodeW / 2 + 12, hh = LAYOUT.nodeH / 2 + 12;
    const inside = b => b[2] >= x0 && b[0] <= x1 && b[3] >= y0 && b[1] <= y1;
    const edgeFrag = document.createDocumentFragment(), nodeFrag = document.createDocumentFragment();
    for (const line of lines) if (inside(line.box)) edgeFrag.appendChild(svg('path', {d: line.d}));
    this.elements = new Map();
    nodes.forEach((node, i) => {
      if (!inside([node.x - hw, node.y - hh, node.x + hw, node.y + hh])) return;
      const g = nodeElement(node, i, this.marks, text);
      this.elements.set(i, g);
      nodeFrag.appendChild(g);
    });
    this.edgeLayer.replaceChildren(edgeFrag);
    this.nodeLayer.replaceChildren(nodeFrag);
    this.restyle();
  }
  restyle() {  // selection and search marks on the drawn nodes
    const matched = new Set(this.matches);
    for (const [i, g] of this.elements) {
      g.classList.toggle('selected', this.layout.nodes[i].row === this.selected);
      g.classList.toggle('match', matched.has(i));
      g.classList.toggle('current', this.matches[this.current] === i);
    }
  }
  zoomAt(factor, px, py) {  // the point (px, py) of the box stays where it is
    const k = Math.max(ZOOM.min, Math.min(ZOOM.max, this.k * factor));
    this.tx = px - (px - this.tx) * k / this.k;
    this.ty = py - (py - this.ty) * k / this.k;
    this.k = k;
    this.update();
  }
  zoomCentre(factor) { const {w, h} = this.size(); this.zoomAt(factor, w / 2, h / 2); }
  fit() {
    const {w, h} = this.size(), L = this.layout;
    this.k = Math.max(ZOOM.min, Math.min(1, w / L.width, h / L.height));
    this.tx = (w - L.width * this.k) / 2;
    this.ty = (h - L.height * this.k) / 2;
    this.update();
  }
  centreOn(i, minK) {
    const {w, h} = this.size(), node = this.layout.nodes[i];
    this.k = Math.max(this.k, minK || 0);
    this.tx = w / 2 - node.x * this.k;
    this.ty = h / 2 - node.y * this.k;
    this.update();
  }
  nodeInView(i) {
    const [x0, y0, x1, y1] = this.viewRect(), node = this.layout.nodes[i];
    return node.x >= x0 && node.x <= x1 && node.y >= y0 && node.y <= y1;
  }
  panTo(tx, ty) { this.tx = tx; this.ty = ty; this.update(); }

  // Search: every op whose group id or name holds the text is marked; the current one centred.
  find(text) {
    const wanted = text.trim().toLowerCase();
    this.matches = [];
    if (wanted) this.layout.nodes.forEach((node, i) => {
      if ((node.row.group.id + ' ' + node.row.name).toLowerCase().includes(wanted)) this.matches.push(i);
    });
    this.current = this.matches.length ? 0 : -1;
    this.showMatch();
  }
  nextMatch() {
    if (!this.matches.length) return;
    this.current = (this.current + 1) % this.matches.length;
    this.showMatch();
  }
  showMatch() {
    if (this.current >= 0) this.centreOn(this.matches[this.current], 0.8);
    this.restyle();
  }
  matchText(searching) {
    return searching ? (this.matches.length ? (this.current + 1) + ' of ' + this.matches.length : 'no match') : '';
  }

  // Lays out and draws one run's graph, around the selected op (or the first divergence) when
  // the whole graph would be too small to read.
  show(runId) {
    const started = performance.now();
    const entry = this.ctx.runs.find(e => e.runId === runId) || this.ctx.runs[0];
    this.runId = entry.runId;
    this.layout = layoutGraph(entry.rows);
    const introducers = new Map((entry.run.introducers || []).slice(0, 3).map((item, i) => [item.id, i + 1]));
    this.marks = {first: this.ctx.firstDivergence(entry.runId), introducers};
    this.drawn = null;
    this.matches = [];
    this.current = -1;
    const focus = this.layout.nodes.findIndex(node => node.row === (this.selected || this.marks.first));
    const {w, h} = this.size();
    if (Math.min(w / this.layout.width, h / this.layout.height) >= 0.6 || focus < 0) this.fit();
    else this.centreOn(focus, 1);
    document.body.dataset.graphMs = (performance.now() - started).toFixed(1);
    document.body.dataset.graphNodes = String(this.layout.nodes.length);
  }
  // The selected row, marked when it is in the drawn run; brought into view when off screen.
  select(r) {
    this.selected = r;
    if (!this.layout) return;
    const i = this.layout.nodes.findIndex(node => node.row === r);
    if (i >= 0 && !this.nodeInView(i)) this.centreOn(i);
    this.restyle();
  }
}

// The wheel zooms at the pointer; a press that moves more than a few pixels pans, one that
// does not is a click on its node.
function wireGraphPointer(view) {
  const canvas = view.canvas;
  canvas.addEventListener('wheel', event => {
    event.preventDefault();
    const area = canvas.getBoundingClientRect();
    view.zoomAt(Math.exp(-event.deltaY * 0.0015), event.clientX - area.left, event.clientY - area.top);
  }, {passive: false});
  let press = null;
  canvas.addEventListener('pointerdown', event => {
    const node = event.target.closest('[data-node]');
    press = {x: event.clientX, y: event.clientY, tx: view.tx, ty: view.ty, node: node ? Number(node.dataset.node) : null, moved: false};
    canvas.setPointerCapture(event.pointerId);
  });
  canvas.addEventListener('pointermove', event => {
    if (!press) return;
    const dx = event.clientX - press.x, dy = event.clientY - press.y;
    if (!press.moved && Math.hypot(dx, dy) < 4) return;
    press.moved = true;
    canvas.classList.add('panning');
    view.panTo(press.tx + dx, press.ty + dy);
  });
  canvas.addEventListener('pointerup', () => {
    const done = press;
    press = null;
    canvas.classList.remove('panning');
    if (done && !done.moved && done.node !== null) view.ctx.select(view.layout.nodes[done.node].row);
  });
  canvas.addEventListener('pointercancel', () => { press = null; canvas.classList.remove('panning'); });
}

// The toolbar: zoom buttons, the search box (Enter: the next match), the device-run selector.
function wireGraphControls(view) {
  document.getElementById('graph-zoom-in').addEventListener('click', () => view.zoomCentre(1.4));
  document.getElementById('graph-zoom-out').addEventListener('click', () => view.zoomCentre(1 / 1.4));
  document.getElementById('graph-fit').addEventListener('click', () => view.fit());
  const search = document.getElementById('graph-search'), count = document.getElementById('graph-matches');
  const find = () => { view.find(search.value); count.textContent = view.matchText(search.value.trim()); };
  let timer = 0;
  search.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(find, 150); });
  search.addEventListener('keydown', event => {
    if (event.key !== 'Enter') return;
    event.preventDefault();
    clearTimeout(timer);
    if (view.matches.length) view.nextMatch(); else view.find(search.value);
    count.textContent = view.matchText(search.value.trim());
  });
  const runSelect = document.getElementById('graph-run');
  for (const {runId, label} of view.ctx.runs) {
    runSelect.appendChild(el('option', {value: runId}, [severalDevices() ? label : runId]));
  }
  runSelect.addEventListener('change', () => { view.show(runSelect.value); find(); });
  return runSelect;
}

function createGraphView(ctx) {
  const view = new GraphView(ctx);
  wireGraphPointer(view);
  const runSelect = wireGraphControls(view);
  return {
    show(runId) { view.show(runId); runSelect.value = String(view.runId); },
    select(r) { view.select(r); },
  };
}
