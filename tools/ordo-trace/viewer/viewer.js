// The ordo-trace HTML viewer (docs/tracing.md). It reads the JSON that `ordo-trace html` puts
// in #trace-data and uses d3 (bundled into the page at build time) for scales, axes, zoom, the
// minimap's brush and the histograms. Slices are drawn on canvases, since a trace may hold
// hundreds of thousands of them; everything a reader or a test looks for (lanes, legend, axis
// labels, the critical path, a location's FIFO) is also in the DOM.
(function () {
  'use strict';
  const D = JSON.parse(document.getElementById('trace-data').textContent);
  const LANE = 24, UTIL = 36, GUTTER = 140, RIGHT = 12;
  const $ = (id) => document.getElementById(id);
  const f64 = (a) => Float64Array.from(a);
  const i32 = (a) => Int32Array.from(a);

  // ---- data --------------------------------------------------------------------------------
  const I = { lane: i32(D.inst.lane), b: f64(D.inst.begin), d: f64(D.inst.dur),
              n: i32(D.inst.name), it: f64(D.inst.iter), w: f64(D.inst.wait),
              bl: i32(D.inst.blocker), ow: f64(D.inst.otherwise) };
  const NI = I.lane.length;
  const idle = { lane: i32(D.idle.lane), b: f64(D.idle.begin), d: f64(D.idle.dur) };
  const G = { loc: i32(D.grants.loc), inst: i32(D.grants.inst), req: f64(D.grants.requested),
              at: f64(D.grants.at), wr: Int8Array.from(D.grants.write) };
  const FL = { lane: i32(D.flushes.lane), b: f64(D.flushes.begin), d: f64(D.flushes.dur),
               bytes: f64(D.flushes.bytes) };
  const ST = { lane: i32(D.steals.lane), victim: i32(D.steals.victim), at: f64(D.steals.at) };
  const M = { from: i32(D.msgs.from), to: i32(D.msgs.to), t0: f64(D.msgs.t0), t1: f64(D.msgs.t1),
              bytes: f64(D.msgs.bytes) };
  const span = Math.max(1, D.span);
  const kindOfName = D.kind_of_name, internalName = D.internal_name;

  // Colour keys: one per task name when there are few, else one per task kind.
  const userNames = D.names.filter((_, i) => !internalName[i]);
  const byName = new Set(userNames).size <= 20;
  const keyOfName = D.names.map((nm, i) => byName ? nm : D.kinds[kindOfName[i]]);
  const keys = [...new Set(keyOfName.filter((_, i) => !internalName[i]))];
  const helperKeys = [...new Set(keyOfName.filter((_, i) => internalName[i]))];
  // The colours of what is not a task: a task's colour is never one of these, nor near one.
  const COLOUR = { wait: '#f28e2b', critical: '#d62728', compute: '#59a14f', idle: '#d6d6d6',
                   helper: '#9a9a9a', message: '#1b2a49', flush: '#5c2e00', steal: '#e7298a' };
  const rgb = (c) => { const o = d3.rgb(c); return [o.r, o.g, o.b]; };
  const dist = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1], a[2] - b[2]);
  // At least 80 from each (40 from the two greys, which pale colours come near).
  const reserved = Object.entries(COLOUR).map(([k, c]) => [rgb(c), k === 'idle' || k === 'helper' ? 0.5 : 1]);
  const farFromReserved = (c, min) => reserved.every(([r, f]) => dist(rgb(c), r) >= min * f);
  const palette = ['#4e79a7', '#76b7b2', '#edc948', '#b07aa1', '#ff9da7', '#9c755f', '#8dd3c7',
    '#bebada', '#80b1d3', '#b3de69', '#fccde5', '#bc80bd', '#ccebc5', '#ffed6f', '#1f77b4',
    '#17becf', '#8c564b', '#bcbd22', '#9467bd', '#aec7e8', '#c5b0d5', '#c49c94']
    .filter((c) => farFromReserved(c, 80));
  // Keyed by the name itself (a hash), not by its place in this trace, so that a task keeps
  // its colour from one trace to the next. Of two names of one trace that hash to the same
  // palette colour, the one that sorts first keeps it and the other takes a colour off the
  // palette drawn from its own hash: no name's colour depends on the others' but for that.
  function hash(str) {
    let h = 0x811c9dc5;
    for (let i = 0; i < str.length; ++i) h = Math.imul(h ^ str.charCodeAt(i), 0x01000193);
    return h >>> 0;
  }
  const colourOfKey = new Map(), taken = new Set();
  for (const k of [...keys].sort()) {
    let c = palette[hash(k) % palette.length];
    for (let i = 0; taken.has(c); ++i) {
      const h = hash(k + '#' + i);
      const cand = d3.hcl((h % 3600) / 10, 35 + (h >>> 12) % 3 * 10, 55 + (h >>> 16) % 3 * 10).formatHex();
      if ((farFromReserved(cand, 80) && palette.every((q) => dist(rgb(q), rgb(cand)) >= 30)) || i > 500) c = cand;
    }
    taken.add(c);
    colourOfKey.set(k, c);
  }
  helperKeys.forEach((k) => colourOfKey.set(k, COLOUR.helper));
  document.querySelectorAll('.key .swatch[data-role]').forEach((el) => {
    el.style.background = COLOUR[el.dataset.role];
  });
  const nameColour = D.names.map((_, i) => colourOfKey.get(keyOfName[i]));

  // Lanes: one per worker per rank, in rank order, each rank followed by its utilisation row.
  const lanes = [];
  // Lanes: each rank's workers, then its caller thread (the runtime's progress: messages,
  // run begin and end, the end-of-run flush).
  D.ranks.forEach((r) => {
    for (let w = 0; w < r.workers; ++w) lanes.push({ rank: r.rank, worker: w, caller: false });
    lanes.push({ rank: r.rank, worker: r.workers, caller: true });
  });
  const laneName = (ln) => (ln.caller ? 'caller thread' : 'worker ' + ln.worker);
  const laneTop = new Float64Array(lanes.length);
  // Per lane: its instances and idle periods, sorted by begin, for binary search on draw.
  // Grouped by lane in one pass (counting), each lane sorted only where it is not already
  // (the summary gives instances nearly in time order). `items` are the indices to group
  // (default: all `count`).
  function perLane(count, laneOf, begin, items) {
    const item = items ? (k) => items[k] : (k) => k;
    const n = items ? items.length : count;
    const start = new Int32Array(lanes.length + 1);
    for (let k = 0; k < n; ++k) ++start[laneOf[item(k)] + 1];
    for (let l = 0; l < lanes.length; ++l) start[l + 1] += start[l];
    const all = new Int32Array(n), at = start.slice(0, lanes.length);
    for (let k = 0; k < n; ++k) { const i = item(k); all[at[laneOf[i]]++] = i; }
    return lanes.map((_, l) => {
      const list = all.subarray(start[l], start[l + 1]);
      let sorted = true;
      for (let k = 1; k < list.length && sorted; ++k) sorted = begin[list[k]] >= begin[list[k - 1]];
      if (!sorted) list.set(Array.from(list).sort((a, b) => begin[a] - begin[b]));
      return list;
    });
  }
  // The union of intervals listed in order of their begins, as disjoint intervals in time
  // order (begins and ends both sorted): what a layer of one colour shows. A frame then draws
  // disjoint intervals and skips them by binary search as the lanes skip slices, however many
  // of the raw intervals overlap (nearly every instance of a large trace waits). Empty
  // intervals are kept where `empty` says so (a hold is drawn a pixel wide).
  function unionOf(count, beginAt, endAt, empty) {
    const B = new Float64Array(count), E = new Float64Array(count);
    let n = 0;
    for (let k = 0; k < count; ++k) {
      const b = beginAt(k), e = endAt(k);
      if (!(e > b || (empty && e === b))) continue;
      if (n && b <= E[n - 1]) { if (e > E[n - 1]) E[n - 1] = e; } else { B[n] = b; E[n] = e; ++n; }
    }
    return { b: B.slice(0, n), e: E.slice(0, n) };
  }
  const instOfLane = perLane(NI, I.lane, I.b);
  const idleOfLane = perLane(idle.lane.length, idle.lane, idle.b);
  const flushOfLane = perLane(FL.lane.length, FL.lane, FL.b);
  const stealOfLane = perLane(ST.lane.length, ST.lane, ST.at);
  const longestFlush = lanes.map((_, l) => { let m = 0; for (const i of flushOfLane[l]) m = Math.max(m, FL.d[i]); return m; });
  // Per lane, how many message ends it holds (a send or a receive of a drawn message).
  const messageEnds = lanes.map(() => 0);
  for (let m = 0; m < M.from.length; ++m) { ++messageEnds[M.from[m]]; ++messageEnds[M.to[m]]; }
  // Lock waits per lane (where the instance ran), by when they began.
  const waiting = [];
  for (let i = 0; i < NI; ++i) if (I.w[i] > 0 && I.ow[i] >= 0) waiting.push(i);
  const waitOfLane = perLane(NI, I.lane, I.ow, waiting);
  const longestWait = waitOfLane.map((l) => { let m = 0; for (const i of l) m = Math.max(m, I.w[i]); return m; });
  const waitUnion = waitOfLane.map((wl) => unionOf(wl.length, (k) => I.ow[wl[k]], (k) => I.ow[wl[k]] + I.w[wl[k]]));
  const longestIdle = idleOfLane.map((l) => { let m = 0; for (const i of l) m = Math.max(m, idle.d[i]); return m; });
  // Lanes whose slices overlap (fibers that suspend): drawn without skipping.
  const overlapping = lanes.map(() => false);
  // Longest slice per lane, so a binary search can start early enough.
  const longest = lanes.map((_, l) => { let m = 0; for (const i of instOfLane[l]) m = Math.max(m, I.d[i]); return m; });
  instOfLane.forEach((list, l) => {
    for (let k = 1; k < list.length && !overlapping[l]; ++k)
      overlapping[l] = I.b[list[k]] < I.b[list[k - 1]] + I.d[list[k - 1]];
  });

  // ---- layout ------------------------------------------------------------------------------
  const lanesBox = $('lanes'), canvas = $('lanes-canvas'), overlay = $('overlay');
  const ctx = canvas.getContext('2d');
  let y = 0;
  const rankRows = [], utilRows = [];
  D.ranks.forEach((r) => {
    const head = document.createElement('div');
    head.className = 'rank-header';
    head.style.top = y + 'px';
    head.textContent = 'rank ' + r.rank;
    lanesBox.appendChild(head);
    y += 18;
    lanes.forEach((ln, li) => {
      if (ln.rank !== r.rank) return;
      laneTop[li] = y;
      const el = document.createElement('div');
      el.className = 'lane' + (ln.caller ? ' caller' : '');
      el.dataset.rank = ln.rank;
      el.dataset.worker = ln.caller ? 'caller' : ln.worker;
      el.dataset.flushes = flushOfLane[li].length;
      el.dataset.steals = stealOfLane[li].length;
      el.dataset.messageEnds = messageEnds[li];
      el.style.top = y + 'px';
      el.style.height = LANE + 'px';
      const label = document.createElement('span');
      label.className = 'lane-label';
      label.textContent = laneName(ln);
      el.appendChild(label);
      lanesBox.appendChild(el);
      y += LANE;
    });
    const util = document.createElement('div');
    util.className = 'util-row';
    util.dataset.rank = r.rank;
    util.style.top = y + 'px';
    util.style.height = UTIL + 'px';
    const label = document.createElement('span');
    label.className = 'lane-label';
    label.textContent = 'utilisation';
    util.appendChild(label);
    lanesBox.appendChild(util);
    rankRows.push({ rank: r.rank, top: y, workers: r.workers });
    utilRows.push(util);
    y += UTIL + 6;
  });
  const height = y;
  lanesBox.style.height = height + 'px';

  // ---- scales, zoom ------------------------------------------------------------------------
  // Never narrower than the gutter and a little room: a page laid out at width 0 (a hidden
  // tab, a window being created) must not give scales and SVG shapes negative sizes.
  // Measured only when the lanes are resized: reading clientWidth after the DOM changed (as
  // every frame does) would lay the page out again, several times per frame.
  const measureWidth = () => Math.max(lanesBox.clientWidth, GUTTER + RIGHT + 200);
  let widthNow = GUTTER + RIGHT + 200;
  const width = () => widthNow;
  const x0 = d3.scaleLinear().domain([0, span]);
  let x = x0.copy();
  function fmtTime(t) {
    const a = Math.abs(t);
    return a >= 1e9 ? (t / 1e9).toPrecision(4) + ' s' : a >= 1e6 ? (t / 1e6).toPrecision(4) + ' ms'
         : a >= 1e3 ? (t / 1e3).toPrecision(4) + ' µs' : t.toFixed(0) + ' ns';
  }
  // Axis labels: the unit of the view's largest time, and as many decimals as the tick step
  // needs, so that no two ticks read the same at any zoom (385.91 and 385.92 ms, not twice
  // 385.9 ms).
  function tickFormat(ticks) {
    const step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : 1;
    const big = Math.max(...ticks.map(Math.abs));
    const [u, name] = big >= 1e9 ? [1e9, ' s'] : big >= 1e6 ? [1e6, ' ms'] : big >= 1e3 ? [1e3, ' µs'] : [1, ' ns'];
    const decimals = Math.max(0, Math.ceil(-Math.log10(step / u) - 1e-9));
    return (t) => (t / u).toFixed(Math.min(decimals, 9)) + name;
  }
  const zoom = d3.zoom().scaleExtent([1, Math.max(2, span / 200)])
    .filter((ev) => !ev.button && ev.type !== 'dblclick')
    // A drag redraws once per frame, however many moves the frame brought; a wheel step or a
    // programmatic change at once.
    .on('zoom', (ev) => {
      x = ev.transform.rescaleX(x0);
      if (ev.sourceEvent && ev.sourceEvent.type !== 'wheel') requestDraw(); else draw();
    });
  const zoomTarget = d3.select('#lanes');
  // The transform that shows [a, b] across the lanes: d3's maps x0(t) to k * x0(t) + tx.
  function viewTransform(a, b) {
    const k = span / (b - a);
    return d3.zoomIdentity.translate(GUTTER - k * x0(a), 0).scale(k);
  }
  // A new width keeps the times in view: d3's transform is in pixels, so it is rebuilt for
  // the new range from the view's times (else the view jumps, often to an empty range).
  let laidOut = false;
  function resize() {
    const [a, b] = x.domain();
    widthNow = measureWidth();
    x0.range([GUTTER, width() - RIGHT]);
    zoom.extent([[GUTTER, 0], [width() - RIGHT, height]])
        .translateExtent([[GUTTER, 0], [width() - RIGHT, height]]);
    if (laidOut && b > a && (a > 0 || b < span)) {
      zoomTarget.call(zoom.transform, viewTransform(a, b));
    } else {
      x = d3.zoomTransform(lanesBox).rescaleX(x0);
    }
    laidOut = true;
  }
  zoomTarget.call(zoom).on('dblclick', () => zoomTarget.call(zoom.transform, d3.zoomIdentity));
  // Shows [a, b], as wide as the zoom allows (the whole trace at most, 200 ns at least) and
  // moved inside the trace, keeping its width.
  function setView(a, b) {
    const wv = Math.min(span, Math.max(span / zoom.scaleExtent()[1], b - a));
    const c = Math.min(span - wv / 2, Math.max(wv / 2, (a + b) / 2));
    zoomTarget.call(zoom.transform, viewTransform(c - wv / 2, c + wv / 2));
  }
  // Zooms so that [a, b] fills the lanes: d3's transform maps x0(t) to k * x0(t) + tx.
  function showRange(a, b) {
    a = Math.max(0, a); b = Math.min(span, b);
    if (b - a < 100) return;
    zoomTarget.call(zoom.transform, viewTransform(a, b));
  }

  // ---- axis, iteration ruler, minimap ------------------------------------------------------
  const axisSvg = d3.select('#axis');
  const rulerSvg = d3.select('#ruler');
  // Iterations: the earliest begin of a user instance of each iteration.
  const iterStart = new Map();
  for (let i = 0; i < NI; ++i) {
    if (internalName[I.n[i]]) continue;
    const it = I.it[i], s = iterStart.get(it);
    if (s === undefined || I.b[i] < s) iterStart.set(it, I.b[i]);
  }
  const iterations = [...iterStart.entries()].sort((a, b) => a[1] - b[1]);
  const measure = document.createElement('canvas').getContext('2d');
  measure.font = '11px sans-serif';
  // The time axis: the elements of d3's axisTop (a domain line; per tick a group holding a
  // line and its label), kept from frame to frame. A pan moves every tick, but only a tick
  // that comes into view gets a new label: d3's axis set every tick's text and attributes on
  // each frame, which Chromium then laid out again.
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const svgElement = (name, attrs) => {
    const el = document.createElementNS(SVG_NS, name);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    return el;
  };
  const axisG = axisSvg.node().appendChild(svgElement('g', { class: 'axis', transform: 'translate(0,22)',
    fill: 'none', 'font-size': 10, 'font-family': 'sans-serif', 'text-anchor': 'middle' }));
  const axisDomain = axisG.appendChild(svgElement('path', { class: 'domain', stroke: 'currentColor' }));
  const tickPool = [];
  const labelWidth = new Map();
  let axisW = -1;
  function drawAxis() {
    const w = width();
    // d3's half-pixel offset, so that 1 px lines fall on pixels.
    const off = window.devicePixelRatio > 1 ? 0 : 0.5;
    if (axisW !== w) {
      axisSvg.attr('width', w).attr('height', 24);
      rulerSvg.attr('width', w).attr('height', 18);
      axisDomain.setAttribute('d', 'M' + (GUTTER + off) + ',0V' + off + 'H' + (w - RIGHT + off) + 'V0');
      axisW = w;
    }
    // About one tick per 110 px, and labels dropped where they would still touch: never two
    // labels on top of each other.
    const ticks = x.ticks(Math.max(2, Math.floor((w - GUTTER) / 110)));
    const fmt = tickFormat(ticks);
    // Widths measured on a canvas in the axis's font (and kept): asking the SVG (getBBox)
    // would lay out the page on every frame of a pan.
    if (labelWidth.size > 4096) labelWidth.clear();
    let last = -Infinity;
    ticks.forEach((t, k) => {
      const e = tickPool[k] || (tickPool[k] = { g: svgElement('g', { class: 'tick' }), text: null, at: '', label: null });
      if (!e.text) {
        e.g.appendChild(svgElement('line', { stroke: 'currentColor', y2: -6 }));
        e.text = e.g.appendChild(svgElement('text', { fill: 'currentColor', y: -9 }));
      }
      if (!e.g.parentNode) axisG.appendChild(e.g);
      const p = x(t), at = 'translate(' + (p + off) + ',0)', label = fmt(t);
      if (e.at !== at) { e.g.setAttribute('transform', at); e.at = at; }
      let wt = labelWidth.get(label);
      if (wt === undefined) labelWidth.set(label, wt = measure.measureText(label).width + 2);
      const left = p - wt / 2, show = left >= last + 6;
      if (show) last = left + wt;
      if (show && !e.text.parentNode) e.g.appendChild(e.text);
      if (!show && e.text.parentNode) e.text.remove();
      if (show && e.label !== label) { e.text.textContent = label; e.label = label; }
    });
    for (let k = ticks.length; k < tickPool.length; ++k) if (tickPool[k].g.parentNode) tickPool[k].g.remove();
    // Marks at least 3 px apart (thousands of iterations would make thousands of lines).
    const [d0, d1] = x.domain();
    let prev = -Infinity, prevMark = -Infinity;
    const marks = [];
    for (let k = d3.bisector((e) => e[1]).left(iterations, d0); k < iterations.length && iterations[k][1] <= d1; ++k) {
      const [it, t] = iterations[k], px = x(t);
      if (px - prevMark < 3) continue;
      prevMark = px;
      marks.push({ it, px, label: px - prev > 46 });
      if (px - prev > 46) prev = px;
    }
    // All marks in one path: hundreds of line elements would be laid out on every frame.
    rulerSvg.selectAll('path.iteration-mark').data([0]).join('path').attr('class', 'iteration-mark')
      .attr('data-marks', marks.length)
      .attr('d', marks.map((m) => 'M' + (Math.round(m.px * 10) / 10) + ',2V18').join('') || null);
    // Labels set only where they change (a pan moves them, it seldom renames them).
    rulerSvg.selectAll('text.iteration-label').data(marks.filter((m) => m.label))
      .join((enter) => enter.append('text').attr('class', 'iteration-label').attr('y', 13))
      .attr('x', (m) => m.px + 3)
      .each(function (m) { const s = 'it ' + m.it; if (this.textContent !== s) this.textContent = s; });
    if (rulerSvg.select('text.ruler-title').empty())
      rulerSvg.append('text').attr('class', 'ruler-title').attr('x', 4).attr('y', 13).text('iterations');
  }

  const mini = $('minimap'), mctx = mini.getContext('2d');
  const MINI_H = 40;
  const xm = d3.scaleLinear().domain([0, span]);
  let brushing = false;
  const brush = d3.brushX().on('brush end', (ev) => {
    if (!ev.sourceEvent || !ev.selection) return;
    brushing = true;
    showRange(xm.invert(ev.selection[0]), xm.invert(ev.selection[1]));
    brushing = false;
  });
  const brushG = d3.select('#minimap-brush');
  function drawMinimap() {
    const w = width();
    mini.width = w; mini.height = MINI_H;
    d3.select('#minimap-brush').attr('width', w).attr('height', MINI_H);
    xm.range([GUTTER, w - RIGHT]);
    mctx.fillStyle = '#fafafa'; mctx.fillRect(0, 0, w, MINI_H);
    mctx.fillStyle = '#555'; mctx.font = '11px sans-serif'; mctx.fillText('whole run', 6, 24);
    // Busy workers over time, all ranks: one column per pixel.
    const cols = Math.max(1, Math.floor(w - GUTTER - RIGHT));
    const busy = new Float64Array(cols);
    const per = span / cols;
    for (let i = 0; i < NI; ++i) {
      let a = I.b[i], b = a + I.d[i];
      for (let c = Math.floor(a / per); c <= Math.min(cols - 1, Math.floor(b / per)); ++c) {
        const lo = Math.max(a, c * per), hi = Math.min(b, (c + 1) * per);
        if (hi > lo) busy[c] += (hi - lo) / per;
      }
    }
    const scale = (MINI_H - 4) / Math.max(1, lanes.length);
    mctx.fillStyle = '#4e79a7';
    for (let c = 0; c < cols; ++c) {
      const h = busy[c] * scale;
      mctx.fillRect(GUTTER + c, MINI_H - 2 - h, 1, h);
    }
    brush.extent([[GUTTER, 0], [w - RIGHT, MINI_H]]);
    brushG.call(brush);
  }
  function syncBrush() {
    if (brushing) return;
    const [a, b] = x.domain();
    brushG.call(brush.move, a <= 0 && b >= span ? null : [xm(a), xm(b)]);
  }

  // ---- utilisation over time ---------------------------------------------------------------
  // Per rank: compute (workers in task bodies), lock wait (free workers while an instance of
  // the rank waited for a lock it could otherwise have run with), idle (the rest). Each is kept
  // as its integral over time, a step function's running sum at its breakpoints, so that any
  // bin of any zoom costs two binary searches: the bins follow the view (one per 2 px).
  function integral(begins, ends) {
    begins.sort(); ends.sort();
    const n = begins.length, T = new Float64Array(2 * n + 1), S = new Float64Array(2 * n + 1),
          L = new Float64Array(2 * n + 1);
    let i = 0, j = 0, k = 0, level = 0, sum = 0, last = 0;
    T[0] = 0; S[0] = 0; L[0] = 0;
    while (i < n || j < n) {
      const t = j >= n || (i < n && begins[i] <= ends[j]) ? begins[i] : ends[j];
      sum += level * (t - last); last = t;
      if (j >= n || (i < n && begins[i] <= ends[j])) { ++level; ++i; } else { --level; ++j; }
      ++k; T[k] = t; S[k] = sum; L[k] = level;
    }
    const count = k + 1;
    // The integral from 0 to t.
    return (t) => {
      let lo = 0, hi = count;
      while (lo < hi) { const m = (lo + hi) >> 1; if (T[m] <= t) lo = m + 1; else hi = m; }
      const at = Math.max(0, lo - 1);
      return S[at] + L[at] * (t - T[at]);
    };
  }
  const rankIndex = new Map(D.ranks.map((r, i) => [r.rank, i]));
  const rankOfLane = Int32Array.from(lanes, (ln) => rankIndex.get(ln.rank));
  const util = D.ranks.map((r, ri) => {
    let nc = 0, nw = 0;
    for (let i = 0; i < NI; ++i)
      if (rankOfLane[I.lane[i]] === ri) { ++nc; nw += I.w[i] > 0 && I.ow[i] >= 0; }
    const cb = new Float64Array(nc), ce = new Float64Array(nc), wb = new Float64Array(nw), we = new Float64Array(nw);
    for (let i = 0, c = 0, w = 0; i < NI; ++i) {
      if (rankOfLane[I.lane[i]] !== ri) continue;
      cb[c] = I.b[i]; ce[c++] = I.b[i] + I.d[i];
      if (I.w[i] > 0 && I.ow[i] >= 0) { wb[w] = I.ow[i]; we[w++] = I.ow[i] + I.w[i]; }
    }
    return { compute: integral(cb, ce), wait: integral(wb, we), workers: r.workers };
  });

  // ---- drawing -----------------------------------------------------------------------------
  const show = { messages: false, critical: true, waits: true };
  let search = '', matches = null, found = null;
  function lowerBound(arr, key, t) {
    let lo = 0, hi = arr.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (key[arr[m]] < t) lo = m + 1; else hi = m; }
    return lo;
  }
  // The first index of a sorted array whose value is t or more.
  function firstAtLeast(arr, t) {
    let lo = 0, hi = arr.length;
    while (lo < hi) { const m = (lo + hi) >> 1; if (arr[m] < t) lo = m + 1; else hi = m; }
    return lo;
  }
  // Disjoint intervals in time order (unionOf) that reach into [t0, t1], given to put(a, b)
  // in pixels cut to [lo, hi]. As on a lane of slices: once an interval narrower than a pixel
  // is drawn, the next ones that begin in its pixel column are skipped by binary search (only
  // the last of them can reach past it, and it is drawn), so a layer costs its pixels.
  function eachInterval(u, t0, t1, lo, hi, kx, put) {
    const B = u.b, E = u.e, n = B.length;
    for (let k = firstAtLeast(E, t0); k < n && B[k] <= t1; ++k) {
      const a = Math.max(lo, lo + (B[k] - t0) * kx), b = Math.min(hi, lo + (E[k] - t0) * kx);
      put(a, b);
      if (b - a < 1) {
        const j = firstAtLeast(B, t0 + (a + 1 - lo) / kx);
        if (j - 2 > k) k = j - 2;
      }
    }
  }
  // The segment (xa, ya)-(xb, yb) cut to lo <= x <= hi, slope kept; null when outside.
  function clipSegment(xa, ya, xb, yb, lo, hi) {
    if (xa > xb) { const r = clipSegment(xb, yb, xa, ya, lo, hi); return r && [r[2], r[3], r[0], r[1]]; }
    if (xb < lo || xa > hi) return null;
    const at = (xx) => (xb === xa ? ya : ya + (yb - ya) * (xx - xa) / (xb - xa));
    return xa >= lo && xb <= hi ? [xa, ya, xb, yb]
      : [Math.max(xa, lo), at(Math.max(xa, lo)), Math.min(xb, hi), at(Math.min(xb, hi))];
  }
  // Rectangles gathered per colour and filled colour by colour: setting a canvas's fillStyle
  // is what costs when a million slices are drawn, not the rectangles.
  const colourIndex = new Map();
  const colourList = [];
  const colourOf = (c) => {
    let k = colourIndex.get(c);
    if (k === undefined) { k = colourList.length; colourIndex.set(c, k); colourList.push(c); }
    return k;
  };
  const nameColourIndex = D.names.map((_, n) => colourOf(nameColour[n]));
  const waitIndex = colourOf(COLOUR.wait);
  let buckets = [];
  // A rectangle that reaches the last one of its colour on the same row extends it: slices
  // side by side become one bar, and rastering the canvas (most of a frame's cost) is per
  // rectangle drawn.
  function rectangle(colour, faded, a, y0, w, h) {
    const k = 2 * colour + (faded ? 1 : 0);
    const r = buckets[k] || (buckets[k] = []), n = r.length;
    if (n && r[n - 3] === y0 && r[n - 1] === h && a >= r[n - 4] && a <= r[n - 4] + r[n - 2]) {
      r[n - 2] = Math.max(r[n - 2], a + w - r[n - 4]);
      return;
    }
    r.push(a, y0, w, h);
  }
  function fillBuckets() {
    for (let k = 0; k < buckets.length; ++k) {
      const b = buckets[k];
      if (!b || !b.length) continue;
      ctx.fillStyle = colourList[k >> 1];
      ctx.globalAlpha = k & 1 ? 0.15 : 1;
      for (let i = 0; i < b.length; i += 4) ctx.fillRect(b[i], b[i + 1], b[i + 2], b[i + 3]);
    }
    ctx.globalAlpha = 1;
    buckets = [];
  }
  // Zoom and pan redraw once per frame, however many events the frame brought.
  let framePending = false;
  function requestDraw() {
    if (framePending) return;
    framePending = true;
    requestAnimationFrame(() => { framePending = false; draw(); });
  }
  let canvasW = -1, canvasH = -1;
  function draw() {
    const started = performance.now();
    const w = width();
    const lo = GUTTER, hi = w - RIGHT;
    lanesBox.dataset.plotLeft = lo;
    lanesBox.dataset.plotRight = hi;
    // A canvas's size is set only when it changes: setting it reallocates the canvas.
    if (canvasW !== w || canvasH !== height) {
      canvas.width = w; canvas.height = height;
      canvas.style.height = height + 'px';
      canvasW = w; canvasH = height;
    }
    ctx.clearRect(0, 0, w, height);
    const [t0, t1] = x.domain();
    // x(t) without d3's call per slice.
    const kx = (hi - lo) / (t1 - t0), px = (t) => lo + (t - t0) * kx;
    ctx.font = '11px sans-serif';
    ctx.textBaseline = 'middle';
    let flushesDrawn = 0, stealsDrawn = 0;
    const labels = [];
    lanes.forEach((ln, l) => {
      const top = laneTop[l];
      ctx.fillStyle = l % 2 ? '#f3f3f3' : '#fafafa';
      ctx.fillRect(lo, top, hi - lo, LANE - 1);
      // Idle periods: a thin grey bar.
      const il = idleOfLane[l];
      ctx.fillStyle = COLOUR.idle;
      for (let k = lowerBound(il, idle.b, t0 - longestIdle[l]); k < il.length; ++k) {
        const i = il[k];
        if (idle.b[i] > t1) break;
        if (idle.b[i] + idle.d[i] < t0) continue;
        const a = Math.max(lo, px(idle.b[i])), b = Math.min(hi, px(idle.b[i] + idle.d[i]));
        ctx.fillRect(a, top + LANE / 2 - 2, Math.max(1, b - a), 4);
      }
      // Instances: once a slice narrower than a pixel is drawn, the next ones that begin in
      // its pixel column are skipped by a binary search (on a lane whose slices do not
      // overlap, only the last of them can reach past the column), so a zoomed-out lane costs
      // its pixels, not its slices. While searching, every slice is looked at (faded or not).
      const list = instOfLane[l], skip = !matches && !overlapping[l];
      let drawnTo = -Infinity;
      for (let k = lowerBound(list, I.b, t0 - longest[l]); k < list.length; ++k) {
        const i = list[k];
        const bi = I.b[i];
        if (bi > t1) break;
        const end = bi + I.d[i];
        if (end < t0) continue;
        const a = Math.max(lo, px(bi)), b = Math.min(hi, px(end));
        const hit = !matches || matches.has(I.n[i]);
        if (b < drawnTo && b - a < 1 && hit) continue;
        const wpx = Math.max(1, b - a);
        rectangle(nameColourIndex[I.n[i]], !hit, a, top + 3, wpx, LANE - 7);
        if (wpx > 36) labels.push(i, a, top, wpx);
        drawnTo = a + 1;
        if (skip && b - a < 1) {
          const j = lowerBound(list, I.b, t0 + (drawnTo - lo) / kx);
          if (j - 2 > k) k = j - 2;
        }
      }
      // Lock waits, under the slices: orange from when each instance could otherwise have
      // run. Their union, but while searching (the waits of other tasks fade): then each wait,
      // one covering the pixels already drawn skipped.
      if (show.waits && !matches) {
        eachInterval(waitUnion[l], t0, t1, lo, hi, kx,
          (a, b) => rectangle(waitIndex, false, a, top + LANE - 4, Math.max(1, b - a), 3));
      } else if (show.waits) {
        const wl = waitOfLane[l];
        let waitTo = -Infinity;
        for (let k = lowerBound(wl, I.ow, t0 - longestWait[l]); k < wl.length; ++k) {
          const i = wl[k];
          if (I.ow[i] > t1) break;
          if (I.ow[i] + I.w[i] < t0) continue;
          const wa = Math.max(lo, px(I.ow[i])), wb = Math.min(hi, px(I.ow[i] + I.w[i]));
          if (wb < waitTo) continue;
          const hit = !matches || matches.has(I.n[i]);
          rectangle(waitIndex, !hit, wa, top + LANE - 4, Math.max(1, wb - wa), 3);
          if (hit) waitTo = Math.max(waitTo, Math.max(wa + 1, wb));
        }
      }
    });
    fillBuckets();
    ctx.fillStyle = '#111';
    for (let k = 0; k < labels.length; k += 4) {
      const i = labels[k], a = labels[k + 1], top = labels[k + 2], wpx = labels[k + 3];
      ctx.save();
      ctx.beginPath(); ctx.rect(a, top, wpx - 2, LANE); ctx.clip();
      ctx.fillText(D.names[I.n[i]] + ' #' + I.it[i], a + 3, top + LANE / 2 - 1);
      ctx.restore();
    }
    if (found && found.at >= 0) {
      const i = found[found.at], a = px(I.b[i]), b = px(I.b[i] + I.d[i]);
      if (b >= lo && a <= hi) {
        ctx.strokeStyle = '#000'; ctx.lineWidth = 2;
        ctx.strokeRect(Math.max(lo, a) - 1, laneTop[I.lane[i]] + 2, Math.min(hi, b) - Math.max(lo, a) + 2, LANE - 5);
      }
    }
    lanes.forEach((ln, l) => {
      const top = laneTop[l];
      // Trace flushes over whatever the thread was doing (the recorder's own cost), steals as
      // a mark at the top of the thief's lane.
      const fl = flushOfLane[l];
      ctx.fillStyle = COLOUR.flush;
      for (let k = lowerBound(fl, FL.b, t0 - longestFlush[l]); k < fl.length; ++k) {
        const i = fl[k];
        if (FL.b[i] > t1) break;
        if (FL.b[i] + FL.d[i] < t0) continue;
        const a = Math.max(lo, px(FL.b[i])), b = Math.min(hi, px(FL.b[i] + FL.d[i]));
        ctx.fillRect(a, top + 1, Math.max(2, b - a), LANE - 3);
        ++flushesDrawn;
      }
      const sl = stealOfLane[l];
      ctx.fillStyle = COLOUR.steal;
      ctx.beginPath();
      let markedTo = -Infinity;
      for (let k = lowerBound(sl, ST.at, t0); k < sl.length && ST.at[sl[k]] <= t1; ++k) {
        const p = px(ST.at[sl[k]]);
        ++stealsDrawn;
        // One mark per 2 px: the rest would be drawn over it.
        if (p < markedTo) continue;
        markedTo = p + 2;
        ctx.moveTo(p - 3, top); ctx.lineTo(p + 3, top); ctx.lineTo(p, top + 6); ctx.closePath();
      }
      ctx.fill();
    });
    lanesBox.dataset.flushesDrawn = flushesDrawn;
    lanesBox.dataset.stealsDrawn = stealsDrawn;
    // Utilisation rows: one bin per 2 px of the view, each the mean over its time.
    const nbins = Math.max(1, Math.floor((hi - lo) / 2)), per = (t1 - t0) / nbins;
    rankRows.forEach((rr, r) => {
      const u = util[r], top = rr.top + 2, h = UTIL - 6;
      ctx.fillStyle = '#eee';
      ctx.fillRect(lo, top, hi - lo, h);
      const compute = new Float64Array(nbins), wait = new Float64Array(nbins);
      let fc = u.compute(t0), fw = u.wait(t0);
      for (let c = 0; c < nbins; ++c) {
        const gc = u.compute(t0 + (c + 1) * per), gw = u.wait(t0 + (c + 1) * per);
        compute[c] = Math.min(1, Math.max(0, (gc - fc) / per / u.workers));
        wait[c] = Math.min(Math.max(0, (gw - fw) / per / u.workers), 1 - compute[c]);
        fc = gc; fw = gw;
      }
      // Each as one shape, its top a step per bin (one fill, not one rectangle per bin):
      // compute from the bottom, lock wait on top of it.
      const bw = (hi - lo) / nbins;
      const area = (upper, lower, colour) => {
        ctx.fillStyle = colour;
        ctx.beginPath();
        ctx.moveTo(lo, top + h - lower(0) * h);
        for (let c = 0; c < nbins; ++c) {
          const yy = top + h - upper(c) * h;
          ctx.lineTo(lo + c * bw, yy); ctx.lineTo(lo + (c + 1) * bw, yy);
        }
        for (let c = nbins - 1; c >= 0; --c) {
          const yy = top + h - lower(c) * h;
          ctx.lineTo(lo + (c + 1) * bw, yy); ctx.lineTo(lo + c * bw, yy);
        }
        ctx.closePath();
        ctx.fill();
      };
      area((c) => compute[c], () => 0, COLOUR.compute);
      area((c) => compute[c] + wait[c], (c) => compute[c], COLOUR.wait);
      const row = utilRows[r];
      row.dataset.t0 = t0; row.dataset.t1 = t1; row.dataset.bins = nbins;
      row.dataset.compute = Array.from(compute, (v) => v.toFixed(4)).join(',');
    });
    // Messages between ranks, on demand: a line from the send to the receive.
    if (show.messages) {
      ctx.strokeStyle = COLOUR.message; ctx.lineWidth = 1;
      ctx.beginPath();
      let drawn = 0, minX = Infinity, maxX = -Infinity;
      for (let m = 0; m < M.from.length && drawn < 20000; ++m) {
        if (Math.max(M.t0[m], M.t1[m]) < t0 || Math.min(M.t0[m], M.t1[m]) > t1) continue;
        // Cut to the plot: a line to a send or receive out of view keeps its slope.
        const c = clipSegment(x(M.t0[m]), laneTop[M.from[m]] + LANE / 2,
                              x(M.t1[m]), laneTop[M.to[m]] + LANE / 2, lo, hi);
        if (!c) continue;
        ctx.moveTo(c[0], c[1]);
        ctx.lineTo(c[2], c[3]);
        minX = Math.min(minX, c[0], c[2]); maxX = Math.max(maxX, c[0], c[2]);
        ++drawn;
      }
      ctx.stroke();
      $('message-count').textContent = drawn + ' messages drawn';
      $('message-count').dataset.minX = drawn ? minX : '';
      $('message-count').dataset.maxX = drawn ? maxX : '';
    } else {
      $('message-count').textContent = '';
    }
    drawCritical();
    lanesBox.dataset.t0 = t0;
    lanesBox.dataset.t1 = t1;
    drawAxis();
    syncBrush();
    drawLocation();
    lanesBox.dataset.drawMs = (performance.now() - started).toFixed(2);
  }

  // The critical path: a line through its instances, from each one's end to the next's begin.
  // The critical path's instances in its order: begin, end, lane centre.
  const cBegin = Float64Array.from(D.critical, (i) => I.b[i]);
  const cEnd = Float64Array.from(D.critical, (i) => I.b[i] + I.d[i]);
  const cY = Float64Array.from(D.critical, (i) => laneTop[I.lane[i]] + LANE / 2);
  let cMonotone = true;
  for (let k = 1; k < cBegin.length; ++k) cMonotone = cMonotone && cBegin[k] >= cBegin[k - 1] && cEnd[k] >= cEnd[k - 1];
  function drawCritical() {
    const svg = d3.select(overlay).attr('width', width()).attr('height', height);
    const [t0, t1] = x.domain();
    // Each step cut to the plot (slopes kept); a step out of view is left out, and the line
    // goes on from where it comes back. A path of more points than the plot has pixels keeps,
    // of the points that follow one another in a pixel column, the lowest, the highest and the
    // last (the line looks the same: it went up and down that column), so that the path has a
    // few points per pixel, not per instance (a large trace's path hops between lanes).
    const lo = GUTTER, hi = width() - RIGHT;
    const n = show.critical ? D.critical.length : 0, thin = 2 * n > 2 * (hi - lo);
    const kx = (hi - lo) / (t1 - t0);
    const ptX = (k) => lo + ((k & 1 ? cEnd[k >> 1] : cBegin[k >> 1]) - t0) * kx;
    const ptY = (k) => cY[k >> 1];
    const r1 = (v) => Math.round(v * 10) / 10;
    const parts = [];
    // Only the steps that reach into the view: the path runs forward in time.
    let first = 0, last = 2 * n - 1;
    if (cMonotone && n) {
      first = Math.max(0, 2 * d3.bisectLeft(cEnd, t0) - 1);
      last = Math.min(2 * n - 1, 2 * d3.bisectRight(cBegin, t1) + 1);
    }
    let at = null, xa = n ? ptX(first) : 0, ya = n ? ptY(first) : 0, atX = 0, atY = 0, lastOut = -Infinity;
    // The points held back in the column of the last one written.
    let held = false, heldX = 0, heldY = 0, heldMin = 0, heldMax = 0;
    const release = () => {
      if (!held) return;
      if (heldMin !== heldMax) parts.push('L' + r1(heldX) + ',' + heldMin, 'L' + r1(heldX) + ',' + heldMax);
      parts.push('L' + r1(heldX) + ',' + heldY);
      held = false;
    };
    for (let k = first; k < last; ++k) {
      const xb = ptX(k + 1), yb = ptY(k + 1);
      let c0 = xa, c1 = ya, c2 = xb, c3 = yb;
      if (!(xa >= lo && xa <= hi && xb >= lo && xb <= hi)) {
        const c = clipSegment(xa, ya, xb, yb, lo, hi);
        if (!c) { at = null; xa = xb; ya = yb; continue; }
        [c0, c1, c2, c3] = c;
      }
      xa = xb; ya = yb;
      if (!at || atX !== c0 || atY !== c1) { release(); parts.push('M' + r1(c0) + ',' + c1); at = true; lastOut = c0; }
      atX = c2; atY = c3;
      if (thin && Math.floor(c2) === Math.floor(lastOut) && k + 1 < last) {
        if (!held) { held = true; heldMin = heldMax = c3; }
        heldMin = Math.min(heldMin, c3); heldMax = Math.max(heldMax, c3);
        heldX = c2; heldY = c3;
        continue;
      }
      release();
      parts.push('L' + r1(c2) + ',' + c3);
      lastOut = c2;
    }
    release();
    let d = parts.join('');
    if (n === 1 && ptX(0) >= lo && ptX(0) <= hi) d = 'M' + r1(ptX(0)) + ',' + ptY(0);
    svg.selectAll('path#critical-path').data([0]).join('path').attr('id', 'critical-path')
      .attr('d', d || null).style('stroke', COLOUR.critical)
      .attr('data-instances', show.critical ? D.critical.length : 0)
      .style('display', show.critical && t1 > t0 ? null : 'none');
  }


  // ---- location view: a location's FIFO over time ------------------------------------------
  const locSelect = $('location');
  const locGrants = D.locs.map(() => []);
  for (let g = 0; g < G.loc.length; ++g) locGrants[G.loc[g]].push(g);
  D.locs.forEach((name, l) => {
    if (!locGrants[l].length) return;
    const o = document.createElement('option');
    o.value = l; o.textContent = name + ' (' + locGrants[l].length + ' grants)';
    locSelect.appendChild(o);
  });
  const fifoCanvas = $('fifo-canvas'), fctx = fifoCanvas.getContext('2d');
  const FIFO_ROW = 20;
  // Waiting is hatched: diagonal lines of the lock-wait colour, 6 px apart, the pattern's tile
  // repeated from the canvas's corner. Not filled with the pattern each frame, which a canvas
  // rasters pixel by pixel (most of a frame at a million events), nor stroked (a thousand
  // slanted lines cost nearly as much): a strip of the hatching is filled once per width, and
  // each wait copies its part, whole pixels, which is a plain copy. A wait narrower than a
  // tile is a pale bar of the wait colour, about as dark as the hatching.
  const HATCH = 6, HATCH_H = FIFO_ROW - 11;
  const waitFill = (() => {
    const c = document.createElement('canvas');
    c.width = c.height = HATCH;
    const g = c.getContext('2d');
    g.strokeStyle = COLOUR.wait; g.lineWidth = 1.5;
    g.beginPath();
    for (const o of [-HATCH, 0, HATCH]) { g.moveTo(o, HATCH); g.lineTo(o + HATCH, 0); }
    g.stroke();
    return fctx.createPattern(c, 'repeat');
  })();
  // Its rows from the tile's row 0 on, HATCH more than a wait's height: a wait whose top is at
  // row r of the canvas copies from row r mod HATCH.
  const hatchStrip = document.createElement('canvas');
  let fifoRows = [];
  function chooseLocation(l) {
    const box = $('fifo-rows');
    box.textContent = '';
    fifoRows = [];
    if (!(l >= 0)) { $('location-view').dataset.location = ''; drawLocation(); return; }
    // One row per task that accesses it, in the order of their first grant: the FIFO's order.
    const rowOf = new Map();
    for (const g of locGrants[l]) {
      const n = I.n[G.inst[g]];
      if (!rowOf.has(n)) { rowOf.set(n, fifoRows.length); fifoRows.push({ name: n, grants: [] }); }
      fifoRows[rowOf.get(n)].grants.push(g);
    }
    for (const row of fifoRows) {
      row.grants.sort((a, b) => G.req[a] - G.req[b]);
      row.longest = 0;
      for (const g of row.grants) row.longest = Math.max(row.longest, I.b[G.inst[g]] + I.d[G.inst[g]] - G.req[g]);
      // What the row shows, as unions (drawn as the lanes draw theirs): waiting, from each
      // request to its grant; holding, from the grant to the end of the instance, writes and
      // reads apart.
      const gs = row.grants, end = (g) => I.b[G.inst[g]] + I.d[G.inst[g]];
      row.waits = unionOf(gs.length, (k) => G.req[gs[k]], (k) => G.at[gs[k]], false);
      const holds = (wr) => {
        const list = gs.filter((g) => !G.wr[g] === !wr).sort((a, b) => G.at[a] - G.at[b]);
        return unionOf(list.length, (k) => G.at[list[k]], (k) => end(list[k]), true);
      };
      row.writes = holds(true);
      row.reads = holds(false);
    }
    fifoRows.forEach((row, k) => {
      const el = document.createElement('div');
      el.className = 'fifo-row';
      el.style.top = (k * FIFO_ROW) + 'px';
      el.style.height = FIFO_ROW + 'px';
      el.dataset.task = D.names[row.name];
      el.dataset.holds = row.grants.length;
      let waited = 0;
      for (const g of row.grants) waited += Math.max(0, G.at[g] - G.req[g]);
      el.dataset.waitedNs = waited;
      const label = document.createElement('span');
      label.className = 'lane-label';
      label.textContent = D.names[row.name];
      el.appendChild(label);
      box.appendChild(el);
    });
    box.style.height = (fifoRows.length * FIFO_ROW) + 'px';
    $('location-view').dataset.location = D.locs[l];
    $('location-title').textContent = D.locs[l] + ': ' + fifoRows.length + ' tasks, ' +
      locGrants[l].length + ' grants. Hatched: waiting (requested, not granted); solid: holding ' +
      '(granted until the instance ended); dark: writes, light: reads.';
    drawLocation();
  }
  let fifoW = -1, fifoH = -1;
  function drawLocation() {
    const w = width(), h = Math.max(FIFO_ROW, fifoRows.length * FIFO_ROW);
    if (fifoW !== w || fifoH !== h) {
      fifoCanvas.width = w; fifoCanvas.height = h;
      fifoCanvas.style.height = h + 'px';
      if (hatchStrip.width !== w) {
        hatchStrip.width = w; hatchStrip.height = HATCH_H + HATCH;
        const g = hatchStrip.getContext('2d');
        g.fillStyle = waitFill;
        g.fillRect(0, 0, w, HATCH_H + HATCH);
      }
      fifoW = w; fifoH = h;
    }
    fctx.clearRect(0, 0, w, h);
    const [t0, t1] = x.domain();
    const lo = GUTTER, hi = w - RIGHT, kx = (hi - lo) / (t1 - t0);
    let widest = 0, widestAt = 0;
    // Rectangles that reach the last one of their list become one (as in the lanes).
    const push = (list, a, wd) => {
      const n = list.length;
      if (n && a <= list[n - 2] + list[n - 1]) list[n - 1] = Math.max(list[n - 1], a + wd - list[n - 2]);
      else list.push(a, wd);
    };
    const hatch = [];
    fifoRows.forEach((row, k) => {
      const top = k * FIFO_ROW;
      fctx.fillStyle = k % 2 ? '#f3f3f3' : '#fafafa';
      fctx.fillRect(lo, top, hi - lo, FIFO_ROW - 1);
      // A pale wait is at least a pixel wide, as a hold is: thousands of slivers side by side
      // zoomed out become one bar.
      const pale = [], writes = [], reads = [];
      eachInterval(row.waits, t0, t1, lo, hi, kx, (a, b) => {
        if (!(b > a)) return;
        if (b - a > widest) { widest = b - a; widestAt = ((a + b) / 2 - lo) / (hi - lo); }
        if (b - a >= HATCH) hatch.push(a, top, b - a); else push(pale, a, Math.max(1, b - a));
      });
      eachInterval(row.writes, t0, t1, lo, hi, kx, (a, b) => push(writes, a, Math.max(1, b - a)));
      eachInterval(row.reads, t0, t1, lo, hi, kx, (a, b) => push(reads, a, Math.max(1, b - a)));
      row.drawn = [pale, writes, reads];
    });
    // Waiting, under the holds.
    const ya = 5, yb = ya + HATCH_H;
    fctx.fillStyle = COLOUR.wait;
    fctx.globalAlpha = 0.35;
    fifoRows.forEach((row, k) => {
      const pale = row.drawn[0];
      for (let j = 0; j < pale.length; j += 2) fctx.fillRect(pale[j], k * FIFO_ROW + ya, pale[j + 1], yb - ya);
    });
    fctx.globalAlpha = 1;
    for (let j = 0; j < hatch.length; j += 3) {
      const xa = Math.round(hatch[j]), xb = Math.round(hatch[j] + hatch[j + 2]), y0 = hatch[j + 1] + ya;
      fctx.drawImage(hatchStrip, xa, y0 % HATCH, xb - xa, HATCH_H, xa, y0, xb - xa, HATCH_H);
    }
    // Holding, over the waits: dark for writes, light for reads.
    fifoRows.forEach((row, k) => {
      const top = k * FIFO_ROW, [, writes, reads] = row.drawn;
      fctx.fillStyle = nameColour[row.name];
      for (let j = 0; j < writes.length; j += 2) fctx.fillRect(writes[j], top + 3, writes[j + 1], FIFO_ROW - 7);
      fctx.globalAlpha = 0.55;
      for (let j = 0; j < reads.length; j += 2) fctx.fillRect(reads[j], top + 3, reads[j + 1], FIFO_ROW - 7);
      fctx.globalAlpha = 1;
    });
    // The widest wait and where it lies (a fraction of the plot's width), for the tests.
    fifoCanvas.dataset.widestWait = widest.toFixed(1);
    fifoCanvas.dataset.widestWaitAt = widestAt.toFixed(4);
  }

  locSelect.addEventListener('change', () => chooseLocation(parseInt(locSelect.value, 10)));
  // Hover a grant: its instance, request, grant and end.
  const fifoBox = $('fifo');
  fifoBox.addEventListener('mousemove', (ev) => {
    const r = fifoBox.getBoundingClientRect(), pxm = ev.clientX - r.left, row = fifoRows[Math.floor((ev.clientY - r.top) / FIFO_ROW)];
    const tipEl = $('tip');
    let g = -1;
    if (row && pxm >= GUTTER) {
      const t = x.invert(pxm), slack = x.invert(pxm + 2) - t;
      for (let j = lowerBound(row.grants, G.req, t - row.longest - slack); j < row.grants.length && g < 0; ++j) {
        const c = row.grants[j], end = I.b[G.inst[c]] + I.d[G.inst[c]];
        if (G.req[c] > t + slack) break;
        if (G.req[c] - slack <= t && t <= end + slack) g = c;
      }
    }
    if (g < 0) { tipEl.hidden = true; return; }
    const i = G.inst[g], end = I.b[i] + I.d[i];
    tipEl.textContent = D.names[I.n[i]] + ', iteration ' + I.it[i] + ' on ' + $('location-view').dataset.location +
      ' (' + (G.wr[g] ? 'write' : 'read') + ')\nrequested ' + fmtTime(G.req[g]) + ', granted ' + fmtTime(G.at[g]) +
      ': waited ' + fmtTime(Math.max(0, G.at[g] - G.req[g])) + '\nheld until ' + fmtTime(end) +
      ' (' + fmtTime(end - G.at[g]) + ')';
    tipEl.hidden = false;
    tipEl.style.left = (ev.pageX + 14) + 'px';
    tipEl.style.top = (ev.pageY + 14) + 'px';
  });
  fifoBox.addEventListener('mouseleave', () => { $('tip').hidden = true; });

  // ---- legend and histograms ---------------------------------------------------------------
  const legend = $('legend');
  function legendItem(key, helper) {
    const el = document.createElement('button');
    el.className = 'legend-item' + (helper ? ' helper' : '');
    el.dataset.key = key;
    el.title = 'durations of ' + key;
    const sw = document.createElement('span');
    sw.className = 'swatch';
    sw.style.background = colourOfKey.get(key);
    el.appendChild(sw);
    el.appendChild(document.createTextNode(key + (helper ? ' (helper)' : '')));
    el.addEventListener('click', () => histogram(key));
    legend.appendChild(el);
  }
  keys.forEach((k) => legendItem(k, false));
  helperKeys.forEach((k) => legendItem(k, true));
  if (byName) {
    // Task kinds as well, for their histograms.
    const kinds = [...new Set(D.names.map((_, i) => D.kinds[kindOfName[i]]))];
    if (kinds.length < keys.length + helperKeys.length)
      for (const k of kinds) {
        const el = document.createElement('button');
        el.className = 'legend-kind';
        el.dataset.kind = k;
        el.textContent = 'kind ' + k;
        el.title = 'durations of every ' + k + ' task';
        el.addEventListener('click', () => histogram(k, true));
        legend.appendChild(el);
      }
  }
  function histogram(key, isKind) {
    const durations = [];
    for (let i = 0; i < NI; ++i) {
      const n = I.n[i];
      if (isKind ? D.kinds[kindOfName[n]] === key : keyOfName[n] === key) durations.push(I.d[i] / 1e3);
    }
    const panel = $('histogram');
    panel.hidden = false;
    panel.dataset.key = key;
    panel.dataset.count = durations.length;
    $('histogram-title').textContent = 'Durations of ' + key + ' (' + durations.length +
      ' instances, µs; median ' + (d3.median(durations) || 0).toFixed(1) + ')';
    const W = Math.min(720, width() - 20), H = 180, m = { l: 48, r: 10, t: 8, b: 30 };
    const svg = d3.select('#histogram-svg').attr('width', W).attr('height', H);
    svg.selectAll('*').remove();
    if (!durations.length) return;
    const ext = d3.extent(durations);
    // Durations that span 20 times or more (an outlier, or a kind of several sizes) go on a
    // log scale, with bins of equal ratio: linear bins would put nearly all in the first.
    const log = ext[0] > 0 && ext[1] / ext[0] >= 20;
    panel.dataset.scale = log ? 'log' : 'linear';
    let hx, thresholds;
    if (log) {
      hx = d3.scaleLog().domain(ext).nice().range([m.l, W - m.r]);
      const [a, b] = hx.domain();
      thresholds = d3.range(1, 30).map((k) => a * Math.pow(b / a, k / 30));
    } else {
      hx = d3.scaleLinear().domain(ext[0] === ext[1] ? [ext[0] * 0.9, ext[1] * 1.1 + 1] : ext)
        .nice().range([m.l, W - m.r]);
      thresholds = hx.ticks(30);
    }
    $('histogram-title').textContent += log ? '; log scale: they span ' + (ext[1] / ext[0]).toFixed(0) + ' times' : '';
    const bins = d3.bin().domain(hx.domain()).thresholds(thresholds)(durations);
    const hy = d3.scaleLinear().domain([0, d3.max(bins, (b) => b.length)]).nice()
      .range([H - m.b, m.t]);
    svg.append('g').selectAll('rect').data(bins).join('rect').attr('class', 'bar')
      .attr('x', (b) => hx(b.x0) + 0.5).attr('width', (b) => Math.max(0, hx(b.x1) - hx(b.x0) - 1))
      .attr('y', (b) => hy(b.length)).attr('height', (b) => hy(0) - hy(b.length))
      .attr('fill', colourOfKey.get(key) || '#4e79a7').attr('data-count', (b) => b.length);
    svg.append('g').attr('transform', 'translate(0,' + (H - m.b) + ')')
      .call(d3.axisBottom(hx).ticks(Math.floor(W / 90), log ? '~s' : undefined));
    svg.append('g').attr('transform', 'translate(' + m.l + ',0)').call(d3.axisLeft(hy).ticks(5));
  }
  $('histogram-close').addEventListener('click', () => { $('histogram').hidden = true; });

  // ---- hover, search, toggles --------------------------------------------------------------
  const tip = $('tip');
  function laneAt(py) {
    for (let k = 0; k < lanes.length; ++k) if (py >= laneTop[k] && py < laneTop[k] + LANE) return k;
    return -1;
  }
  // The flush or steal under the pointer, as the text of its tooltip ('' where none).
  function markAt(px, py) {
    const l = laneAt(py);
    if (l < 0) return '';
    const t = x.invert(px), slack = x.invert(px + 3) - t;
    const fl = flushOfLane[l];
    for (let k = lowerBound(fl, FL.b, t - longestFlush[l] - slack); k < fl.length && FL.b[fl[k]] <= t + slack; ++k)
      if (t <= FL.b[fl[k]] + FL.d[fl[k]] + slack)
        return 'trace flush: ' + FL.bytes[fl[k]] + ' bytes written\n' + 'rank ' + lanes[l].rank +
          ', ' + laneName(lanes[l]) + '\nbegin ' + fmtTime(FL.b[fl[k]]) + ', duration ' + fmtTime(FL.d[fl[k]]);
    const sl = stealOfLane[l];
    for (let k = lowerBound(sl, ST.at, t - slack); k < sl.length && ST.at[sl[k]] <= t + slack; ++k)
      if (py - laneTop[l] < 8)
        return 'steal: rank ' + lanes[l].rank + ', ' + laneName(lanes[l]) + ' took work from ' +
          (ST.victim[sl[k]] >= 0 ? laneName(lanes[ST.victim[sl[k]]]) : 'another worker') + '\nat ' + fmtTime(ST.at[sl[k]]);
    return '';
  }
  function instanceAt(px, py) {
    const l = laneAt(py);
    if (l < 0) return -1;
    const t = x.invert(px), slack = x.invert(px + 2) - t;
    const list = instOfLane[l];
    for (let k = lowerBound(list, I.b, t - longest[l] - slack); k < list.length; ++k) {
      const i = list[k];
      if (I.b[i] > t + slack) break;
      if (I.b[i] - slack <= t && t <= I.b[i] + I.d[i] + slack) return i;
    }
    return -1;
  }
  lanesBox.addEventListener('mousemove', (ev) => {
    const r = lanesBox.getBoundingClientRect();
    const px = ev.clientX - r.left, py = ev.clientY - r.top;
    const mark = markAt(px, py), i = mark ? -1 : instanceAt(px, py);
    if (i < 0 && !mark) { tip.hidden = true; return; }
    let text = mark;
    if (i >= 0) {
      const ln = lanes[I.lane[i]];
      text = D.names[I.n[i]] + ', iteration ' + I.it[i] + '\nrank ' + ln.rank + ', ' + laneName(ln) +
        '\nbegin ' + fmtTime(I.b[i]) + ', duration ' + fmtTime(I.d[i]);
      if (I.w[i] > 0)
        text += '\nlock wait ' + fmtTime(I.w[i]) + (I.bl[i] >= 0 ? ', held up by ' + D.locs[I.bl[i]] : '');
    }
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = (ev.pageX + 14) + 'px';
    tip.style.top = (ev.pageY + 14) + 'px';
  });
  lanesBox.addEventListener('mouseleave', () => { tip.hidden = true; });
  $('search').addEventListener('input', (ev) => {
    search = ev.target.value.trim().toLowerCase();
    if (!search) {
      matches = null;
      $('search-count').textContent = '';
    } else {
      matches = new Set();
      D.names.forEach((nm, n) => { if (nm.toLowerCase().includes(search)) matches.add(n); });
      let count = 0;
      for (let i = 0; i < NI; ++i) count += matches.has(I.n[i]);
      $('search-count').textContent = count + ' instances of ' + matches.size + ' tasks';
    }
    found = null;
    $('search-at').textContent = '';
    draw();
  });
  // Next and previous match: the instances of the matching tasks in time order; the view
  // centres on the one found (keeping its width when the instance fits in half of it), which
  // is outlined.
  function step(dir) {
    if (!matches) return;
    if (!found) {
      found = [];
      for (let i = 0; i < NI; ++i) if (matches.has(I.n[i])) found.push(i);
      found.sort((a, b) => I.b[a] - I.b[b] || a - b);
      found.at = -1;
    }
    if (!found.length) return;
    if (found.at < 0) {
      // From the view: the first match that begins in it, or the last one, going back.
      const [a, b] = x.domain(), by = d3.bisector((i) => I.b[i]);
      const k = dir > 0 ? by.left(found, a) : by.right(found, b) - 1;
      found.at = Math.min(found.length - 1, Math.max(0, k));
    } else {
      found.at = Math.min(found.length - 1, Math.max(0, found.at + dir));
    }
    const i = found[found.at], [a, b] = x.domain();
    const wv = Math.max(b - a, Math.min(span, 3 * I.d[i]));
    const c = I.b[i] + I.d[i] / 2;
    setView(c - wv / 2, c + wv / 2);
    const el = $('search-at');
    el.textContent = (found.at + 1) + ' of ' + found.length + ': ' + D.names[I.n[i]] + ' #' + I.it[i] +
      ' at ' + fmtTime(I.b[i]);
    el.dataset.instance = i;
    el.dataset.begin = I.b[i];
    el.dataset.name = D.names[I.n[i]];
    draw();
  }
  $('search-next').addEventListener('click', () => step(1));
  $('search-prev').addEventListener('click', () => step(-1));
  $('search').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter') { ev.preventDefault(); step(ev.shiftKey ? -1 : 1); }
  });
  // Keyboard zoom and pan, outside the form fields: by 1.5 at the view's middle, by a fifth
  // of the view.
  document.addEventListener('keydown', (ev) => {
    if (ev.target.closest && ev.target.closest('input, select, textarea') || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const [a, b] = x.domain(), wv = b - a, mid = (a + b) / 2;
    const keys = { '+': [wv / 1.5, 0], '=': [wv / 1.5, 0], w: [wv / 1.5, 0], '-': [wv * 1.5, 0],
                   s: [wv * 1.5, 0], ArrowLeft: [wv, -wv / 5], a: [wv, -wv / 5],
                   ArrowRight: [wv, wv / 5], d: [wv, wv / 5] };
    if (ev.key === '0' || ev.key === 'Home') { ev.preventDefault(); zoomTarget.call(zoom.transform, d3.zoomIdentity); return; }
    const k = keys[ev.key];
    if (!k) return;
    ev.preventDefault();
    setView(mid + k[1] - k[0] / 2, mid + k[1] + k[0] / 2);
  });
  for (const k of Object.keys(show)) {
    const box = $('show-' + k);
    box.checked = show[k];
    box.addEventListener('change', () => { show[k] = box.checked; draw(); });
  }
  $('reset').addEventListener('click', () => zoomTarget.call(zoom.transform, d3.zoomIdentity));
  // Redrawn whenever the lanes' width changes (window resized, page laid out late).
  let drawnWidth = -1;
  new ResizeObserver(() => {
    if (lanesBox.clientWidth === drawnWidth || lanesBox.clientWidth === 0) return;
    drawnWidth = lanesBox.clientWidth;
    resize(); drawMinimap(); draw();
  }).observe(lanesBox);

  resize();
  drawMinimap();
  // The first view drawn once: the user's runs where they are not the whole trace.
  if (D.view[1] - D.view[0] >= 100 && (D.view[0] > 0 || D.view[1] < span)) showRange(D.view[0], D.view[1]);
  else draw();
  drawnWidth = lanesBox.clientWidth;
  // The location view starts on the location that held up the most waiting (the summary's
  // figure: the time in which some instance waited on it).
  let best = -1, most = -1;
  D.locs.forEach((_, l) => {
    if (locGrants[l].length && !D.internal_loc[l] && D.loc_wait[l] > most) { most = D.loc_wait[l]; best = l; }
  });
  if (best >= 0) { locSelect.value = best; chooseLocation(best); }
  document.body.dataset.lanes = String(lanes.length);
  $('status').textContent = 'ready: ' + lanes.length + ' lanes, ' + NI + ' task instances';
  document.body.dataset.ready = '1';
})();
