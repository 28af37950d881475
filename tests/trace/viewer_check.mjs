// The ordo-trace HTML viewer in headless Chromium, driven by playwright-core (pinned in
// tools/ordo-trace/viewer/package-lock.json) through the DOM and screenshots. A two-rank heat2d
// trace; the expected figures come from `ordo-trace summary --json` of the same trace, not from
// the page. Checks: one lane per rank and worker, each at least 20 px tall; the legend names the
// user's task kinds; no two time-axis labels overlap (also zoomed in); the critical path is drawn
// through every instance of the summary's path, and its colour is in the screenshot; the
// location view shows a chosen location's FIFO (one row per task accessing it, the location's
// grants all there); hover, search, histogram and messages work; on a dense trace, every pixel
// column of the lanes' lock waits and the location view's holds is drawn as the events say;
// nothing is logged to the console.
// Exit 77 (skip) when Chromium or node_modules is missing.
// Usage: node viewer_check.mjs ORDO_TRACE HEAT2D ORDORUN VIEWER_DIR
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const [tool, heat, ordorun, viewerDir] = process.argv.slice(2);
const fail = (why) => { console.log('FAIL: ' + why); process.exit(1); };
const skip = (why) => { console.log('SKIP: ' + why); process.exit(77); };
const chromiumPath = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
if (!chromiumPath) skip('chromium is not installed (scripts/setup.sh installs Debian\'s chromium)');
let chromium;
try {
  ({ chromium } = createRequire(path.resolve(viewerDir, 'package.json'))('playwright-core'));
} catch (e) {
  skip('playwright-core is not installed in ' + viewerDir + ' (scripts/setup.sh runs npm ci there)');
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ordo-viewer-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
const trace = path.join(dir, 'heat.trace'), page = path.join(dir, 'heat.html');
const WORKERS = 2, RANKS = 2;
execFileSync(ordorun, ['--timeout', '60', '-n', String(RANKS), heat, '--size', '96x96', '--blocks',
  '3x3', '--iters', '6', '--workers', String(WORKERS), '--trace', trace],
  { stdio: ['ignore', 'ignore', 'inherit'],
    env: { ...process.env, UCX_TLS: 'shm,self', UCX_NET_DEVICES: 'lo', UCX_WARN_UNUSED_ENV_VARS: 'n',
           ORDO_SHARED_MEMORY: '0' } });
execFileSync(tool, ['html', '-o', page, trace]);
const summary = JSON.parse(execFileSync(tool, ['summary', '--json', trace], { encoding: 'utf8' }));
const html = fs.readFileSync(page, 'utf8');
if (/(src|href)\s*=\s*["']?(https?:)?\/\//i.test(html)) fail('the page refers to the network');

// The trace files read here, independently of ordo-trace (docs/trace-format.md): per rank and
// event buffer (a worker, or `workers` for the caller thread), the count of each event kind.
const FLUSH = 11, STEAL = 4, SEND = 9, RECEIVE = 10;
function countEvents(file) {
  const b = fs.readFileSync(file);
  const workers = b.readUInt32LE(28), offset = Number(b.readBigInt64LE(32)), count = {};
  const open = new Map(), instances = [];
  let first = Infinity;
  for (let pos = 64; pos + 16 <= b.length;) {
    const type = b.readUInt32LE(pos), arg = b.readUInt32LE(pos + 4), size = Number(b.readBigUInt64LE(pos + 8));
    if (type === 2)
      for (let e = pos + 16; e + 40 <= pos + 16 + size; e += 40) {
        const key = b.readUInt16LE(e + 36) + '/' + b[e + 38];
        count[key] = (count[key] || 0) + 1;
        const t = Number(b.readBigUInt64LE(e)) + offset, inst = b.readUInt32LE(e + 24) + '#' + b.readBigUInt64LE(e + 8);
        first = Math.min(first, t);
        if (b[e + 38] === 1) open.set(inst, t);
        if (b[e + 38] === 2 && open.has(inst)) { instances.push([open.get(inst), t]); open.delete(inst); }
      }
    pos += 16 + size;
  }
  return { workers, first, instances, of: (buffer, kind) => count[buffer + '/' + kind] || 0 };
}
const raw = [];
for (let r = 0; r < RANKS; ++r) raw.push(countEvents(trace + '.rank' + r));
// The common clock's origin: the earliest aligned event of any rank.
const origin = Math.min(...raw.map((r) => r.first));
// A rank's mean busy workers over [a, b], from its task bodies.
const busy = (r, a, b) => raw[r].instances.reduce((s, [p, q]) =>
  s + Math.max(0, Math.min(b, q - origin) - Math.max(a, p - origin)), 0) / (b - a) / raw[r].workers;

// A one-rank trace written here (docs/trace-format.md, version 2), not by ordo's recorder:
// tasks by name (no accesses), events as [buffer, kind, time, task, arg0].
function writeTrace(file, names, workers, events) {
  const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
  const header = Buffer.alloc(64);
  header.write('ORDOTRC\0', 0, 'latin1');
  [2, 64, 40, 0, 1, workers].forEach((v, k) => header.writeUInt32LE(v, 8 + 4 * k));
  const body = [u32(0), u32(0), u32(0), u32(names.length), u32(0)];
  for (const n of names) body.push(u32(0), u32(n.length), Buffer.from(n, 'latin1'), u32(0));
  const graph = Buffer.concat(body);
  const parts = [header, u32(1), u32(0), Buffer.alloc(8), graph];
  parts[3].writeBigUInt64LE(BigInt(graph.length));
  const buffers = new Map();
  for (const e of events) (buffers.get(e[0]) || buffers.set(e[0], []).get(e[0])).push(e);
  for (const [buffer, list] of [...buffers].sort((a, b) => a[0] - b[0])) {
    const data = Buffer.alloc(40 * list.length);
    list.forEach(([, kind, t, task, arg0], k) => {
      data.writeBigUInt64LE(BigInt(t), 40 * k);
      data.writeBigUInt64LE(BigInt(arg0 || 0), 40 * k + 8);
      data.writeUInt32LE(task === undefined ? 0xffffffff : task, 40 * k + 24);
      data.writeUInt32LE(0xffffffff, 40 * k + 28);
      data.writeUInt32LE(0xffffffff, 40 * k + 32);
      data.writeUInt16LE(buffer, 40 * k + 36);
      data[40 * k + 38] = kind;
    });
    const size = Buffer.alloc(8);
    size.writeBigUInt64LE(BigInt(data.length));
    parts.push(u32(2), u32(buffer), size, data);
  }
  const end = Buffer.alloc(16);
  end.writeBigUInt64LE(BigInt(events.length), 8);
  parts.push(u32(3), u32(0), Buffer.from([8, 0, 0, 0, 0, 0, 0, 0]), end.subarray(8));
  fs.writeFileSync(file, Buffer.concat(parts));
}

const kind = (name) => name.replace(/\[[^\]]*\]$/, '');
const userTasks = summary.tasks.filter((t) => !t.internal);
const expectedKinds = [...new Set(userTasks.map((t) => kind(t.name)))].sort();

const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const console_ = [];
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 }, deviceScaleFactor: 1 });
  // Nothing may come from the network: every request other than the file itself is refused.
  const requests = [];
  await ctx.route('**/*', (route) => {
    const url = route.request().url();
    if (url.startsWith('file:')) return route.continue();
    requests.push(url);
    return route.abort();
  });
  const p = await ctx.newPage();
  p.on('console', (m) => console_.push(m.type() + ': ' + m.text()));
  p.on('pageerror', (e) => console_.push('pageerror: ' + e.message));
  await p.goto('file://' + page);
  await p.waitForSelector('body[data-ready="1"]', { timeout: 20000 });
  // count(pixels, width, height, arg), run in the page on the RGBA pixels of a PNG screenshot.
  const onPixels = (png, count, arg) => p.evaluate(async ([b64, src, a]) => {
    const img = new Image();
    img.src = 'data:image/png;base64,' + b64;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.width; c.height = img.height;
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    return (0, eval)('(' + src + ')')(g.getImageData(0, 0, c.width, c.height).data, c.width, c.height, a);
  }, [png.toString('base64'), count.toString(), arg]);
  if (requests.length) fail('the page asked the network for ' + requests.join(', '));

  const view = async () => p.$eval('#lanes', (e) => [Number(e.dataset.t0), Number(e.dataset.t1)]);
  // Lanes: one per rank and worker, each at least 20 px tall.
  const lanes = await p.$$eval('.lane', (els) => els.map((e) => {
    const b = e.getBoundingClientRect();
    return { rank: e.dataset.rank, worker: e.dataset.worker, h: b.height, top: b.top, bottom: b.bottom };
  }));
  const want = [];
  for (let r = 0; r < RANKS; ++r) {
    for (let w = 0; w < WORKERS; ++w) want.push(r + '/' + w);
    want.push(r + '/caller');
  }
  const got = lanes.map((l) => l.rank + '/' + l.worker);
  if (JSON.stringify(got) !== JSON.stringify(want)) fail('lanes ' + got + ', expected ' + want);
  for (const l of lanes) if (l.h < 20) fail('lane ' + l.rank + '/' + l.worker + ' is ' + l.h + ' px tall');
  // Each lane holds its thread's flushes, steals (the thief's) and message ends, as the files
  // have them: the caller thread (where the runtime receives) has a lane of its own.
  const laneData = await p.$$eval('.lane', (els) => els.map((e) => ({ rank: Number(e.dataset.rank),
    worker: e.dataset.worker, flushes: Number(e.dataset.flushes), steals: Number(e.dataset.steals),
    ends: Number(e.dataset.messageEnds) })));
  let callerEnds = 0, totalFlushes = 0, totalSteals = 0;
  for (const l of laneData) {
    const buffer = l.worker === 'caller' ? raw[l.rank].workers : Number(l.worker);
    const want = { flushes: raw[l.rank].of(buffer, FLUSH), steals: raw[l.rank].of(buffer, STEAL),
                   ends: raw[l.rank].of(buffer, SEND) + raw[l.rank].of(buffer, RECEIVE) };
    for (const k of ['flushes', 'steals'].concat(summary.unmatched_messages ? [] : ['ends']))
      if (l[k] !== want[k])
        fail('rank ' + l.rank + ' lane ' + l.worker + ': ' + l[k] + ' ' + k + ', the file has ' + want[k]);
    if (l.worker === 'caller') callerEnds += l.ends;
    totalFlushes += l.flushes; totalSteals += l.steals;
  }
  if (!callerEnds) fail('no message ends on the caller threads\' lanes: ' + JSON.stringify(laneData));
  const utilRows = await p.$$eval('.util-row', (els) => els.length);
  if (utilRows !== RANKS) fail(utilRows + ' utilisation rows, expected one per rank');

  // Legend: the user's task kinds (tasks are coloured by name when there are few).
  const legend = await p.$$eval('.legend-item:not(.helper)', (els) => els.map((e) => e.dataset.key));
  const legendKinds = [...new Set(legend.map(kind))].sort();
  if (JSON.stringify(legendKinds) !== JSON.stringify(expectedKinds))
    fail('legend kinds ' + legendKinds + ', the summary has ' + expectedKinds);

  // Axis labels never overlap, at the whole run and zoomed in at the pointer.
  async function checkAxis(when) {
    const boxes = await p.$$eval('#axis .tick text', (els) => els.map((e) => {
      const b = e.getBoundingClientRect(); return [b.left, b.right, e.textContent]; }));
    if (boxes.length < 3) fail(when + ': only ' + boxes.length + ' axis labels');
    boxes.sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < boxes.length; ++i)
      if (boxes[i][0] < boxes[i - 1][1]) fail(when + ': axis labels overlap: ' + boxes[i - 1][2] + ' / ' + boxes[i][2]);
    return boxes.length;
  }
  await checkAxis('whole run');
  const lanesBox = await p.$('#lanes');
  const lb = await lanesBox.boundingBox();
  await p.mouse.move(lb.x + lb.width * 0.5, lb.y + 40);
  for (let i = 0; i < 6; ++i) await p.mouse.wheel(0, -300);
  await p.waitForTimeout(100);
  await checkAxis('zoomed in');
  const zoomed = await p.$eval('#axis .tick text', (e) => e.textContent);
  await p.click('#reset');
  await p.waitForTimeout(100);
  if ((await p.$eval('#axis .tick text', (e) => e.textContent)) === zoomed && zoomed !== '0 ns')
    fail('the wheel did not zoom');

  // The critical path: a line through each instance of the summary's path (begin and end).
  const pathInstances = summary.critical_path.instances.length;
  if (pathInstances < 2) fail('the summary\'s critical path has ' + pathInstances + ' instances');
  const crit = await p.$eval('#critical-path', (e) => {
    const b = e.getBoundingClientRect();
    return { points: (e.getAttribute('d') || '').split(/[ML]/).filter((s) => s.trim()).length,
             display: getComputedStyle(e).display, top: b.top, bottom: b.bottom };
  });
  if (crit.points !== 2 * pathInstances || crit.display === 'none')
    fail('critical path drawn with ' + crit.points + ' points (' + crit.display + '), the ' +
         'summary\'s has ' + pathInstances + ' instances');
  // The summary's path has instances of both ranks: the line reaches both ranks' lanes.
  const pathRanks = new Set(summary.critical_path.instances.map((i) => i.rank));
  const laneSpan = (rank) => lanes.filter((l) => Number(l.rank) === rank);
  if (pathRanks.size === RANKS &&
      !(crit.top <= Math.max(...laneSpan(0).map((l) => l.bottom)) &&
        crit.bottom >= Math.min(...laneSpan(RANKS - 1).map((l) => l.top))))
    fail('the critical path crosses ranks but its line (' + crit.top + '-' + crit.bottom +
         ' px) does not reach both ranks\' lanes');

  // Colours: no task kind shares (or comes near) the lock-wait or critical-path colour.
  const rgbOf = (css) => (css.match(/\d+(\.\d+)?/g) || []).slice(0, 3).map(Number);
  const colours = await p.evaluate(() => ({
    keys: [...document.querySelectorAll('.legend-item:not(.helper) .swatch')]
      .map((e) => [e.parentNode.dataset.key, getComputedStyle(e).backgroundColor]),
    wait: getComputedStyle(document.querySelector('.key .swatch[data-role="wait"]')).backgroundColor,
    critical: getComputedStyle(document.querySelector('.key .swatch[data-role="critical"]')).backgroundColor,
    stroke: getComputedStyle(document.getElementById('critical-path')).stroke }));
  const near = (a, b) => Math.hypot(...a.map((v, i) => v - b[i])) < 60;
  if (!near(rgbOf(colours.stroke), rgbOf(colours.critical)))
    fail('the critical path is drawn in ' + colours.stroke + ', its key says ' + colours.critical);
  for (const [key, c] of colours.keys)
    for (const [what, r] of [['lock wait', colours.wait], ['the critical path', colours.critical]])
      if (near(rgbOf(c), rgbOf(r))) fail('task ' + key + ' is coloured ' + c + ', like ' + what + ' (' + r + ')');
  if (new Set(colours.keys.map((k) => k[1])).size !== colours.keys.length)
    fail('two task kinds share a colour: ' + JSON.stringify(colours.keys));

  // Zoomed in at the middle of the critical path, its line and the messages stay inside the
  // plot (cut at its edges, not drawn over the lane labels), in the DOM and in the pixels.
  const plot = await p.$eval('#lanes', (e) => [Number(e.dataset.plotLeft), Number(e.dataset.plotRight)]);
  const pathXs = async () => (await p.$eval('#critical-path', (e) => e.getAttribute('d') || ''))
    .split(/[ML]/).filter((q) => q.trim()).map((q) => Number(q.split(',')[0]));
  const whole = await pathXs();
  const mid = (Math.min(...whole) + Math.max(...whole)) / 2;
  await p.check('#show-messages');
  await p.mouse.move(lb.x + mid, lb.y + 40);
  // d3 zooms by 2^(0.6) per wheel step of 300: enough steps that a third of the path fills
  // the plot.
  const extent = Math.max(1, Math.max(...whole) - Math.min(...whole));
  const steps = Math.max(1, Math.ceil(Math.log2(3 * (plot[1] - plot[0]) / extent) / 0.6));
  for (let i = 0; i < steps; ++i) await p.mouse.wheel(0, -300);
  await p.waitForTimeout(150);
  async function checkInside(when) {
    const xs = await pathXs();
    if (!xs.length) fail(when + ': no part of the critical path is drawn');
    for (const px of xs)
      if (px < plot[0] - 0.01 || px > plot[1] + 0.01)
        fail(when + ': the critical path reaches x = ' + px + ', outside the plot ' + plot);
    const m = await p.$eval('#message-count', (e) => [e.textContent, e.dataset.minX, e.dataset.maxX]);
    if (m[1] !== '' && (Number(m[1]) < plot[0] - 0.01 || Number(m[2]) > plot[1] + 0.01))
      fail(when + ': ' + m[0] + ' reaching x ' + m[1] + '-' + m[2] + ', outside the plot ' + plot);
    // The pixels of the lanes' gutter (the labels) hold neither red nor the messages' colour.
    const bad = await onPixels(await lanesBox.screenshot(), (px, w, h, left) => {
      let n = 0;
      for (let y = 0; y < h; ++y)
        for (let x = 0; x < Math.floor(left) - 1; ++x) {
          const i = 4 * (y * w + x), r = px[i], gg = px[i + 1], b = px[i + 2];
          if ((Math.abs(r - 214) < 30 && gg < 90 && b < 90) ||
              (Math.abs(r - 27) < 12 && Math.abs(gg - 42) < 12 && Math.abs(b - 73) < 12)) ++n;
        }
      return n;
    }, plot[0]);
    if (bad > 0) fail(when + ': ' + bad + ' pixels of the critical path or the messages in the lane labels');
    return xs;
  }
  const cut = await checkInside('zoomed in at the critical path');
  if (!cut.some((px) => Math.abs(px - plot[0]) < 0.01 || Math.abs(px - plot[1]) < 0.01))
    fail('zoomed in, the critical path (x ' + Math.min(...cut) + '-' + Math.max(...cut) +
         ') was not cut at the plot\'s edge: the check did not test clipping');

  // Resizing keeps the times in view, and something is still drawn there.
  const before = await view();
  for (const w of [900, 1600, 1280]) {
    await p.setViewportSize({ width: w, height: 900 });
    await p.waitForFunction((ww) => Number(document.getElementById('lanes').dataset.plotRight) >
      ww - 400 && Number(document.getElementById('lanes').dataset.plotRight) < ww, w, { timeout: 5000 })
      .catch(() => fail('no redraw after resizing to ' + w + ' px'));
    const after = await view();
    const tol = 1e-6 * (before[1] - before[0]);
    if (Math.abs(after[0] - before[0]) > tol || Math.abs(after[1] - before[1]) > tol)
      fail('resizing to ' + w + ' px moved the view from ' + before + ' to ' + after);
  }
  await checkInside('after resizing');

  // Axis labels stay unique (and apart) however deep the zoom.
  for (let i = 0; i < 60; ++i) await p.mouse.wheel(0, -400);
  await p.waitForTimeout(150);
  const deep = await view();
  const labels = await p.$$eval('#axis .tick text', (els) => els.map((e) => e.textContent));
  if (new Set(labels).size !== labels.length)
    fail('at the deepest zoom (' + (deep[1] - deep[0]).toFixed(0) + ' ns in view) axis labels repeat: ' + labels.join(' | '));
  await checkAxis('deepest zoom');
  await checkInside('deepest zoom');
  await p.uncheck('#show-messages');
  await p.click('#reset');
  await p.waitForTimeout(100);

  // Utilisation follows the zoom: zoomed in 50 times, one bin per 2 px of the view, each the
  // busy workers' mean over its time as the files have it.
  // Where the task bodies start and end most often, as the files have them, so that the
  // zoomed view holds changes to check (the middle of the critical path was sometimes a gap
  // between runs, where every bin is rightly 0).
  const viewNow = await p.$$eval('.util-row', (els) => [Number(els[0].dataset.t0), Number(els[0].dataset.t1)]);
  const span = viewNow[1] - viewNow[0], half = span / 100;
  let zoomAt = viewNow[0] + span / 2, mostEdges = -1;
  for (let k = 1; k < 400; ++k) {
    const t = viewNow[0] + span * k / 400;
    let edges = 0;
    for (const r of raw)
      for (const [a, b] of r.instances) {
        if (Math.abs(a - origin - t) < half) ++edges;
        if (Math.abs(b - origin - t) < half) ++edges;
      }
    if (edges > mostEdges) { mostEdges = edges; zoomAt = t; }
  }
  await p.mouse.move(lb.x + plot[0] + (zoomAt - viewNow[0]) / span * (plot[1] - plot[0]), lb.y + 40);
  for (let i = 0; i < 10; ++i) await p.mouse.wheel(0, -283);
  await p.waitForTimeout(150);
  const rows = await p.$$eval('.util-row', (els) => els.map((e) => ({ rank: Number(e.dataset.rank),
    t0: Number(e.dataset.t0), t1: Number(e.dataset.t1), bins: Number(e.dataset.bins),
    compute: (e.dataset.compute || '').split(',').map(Number) })));
  let distinct = 0;
  for (const row of rows) {
    if (!(row.bins >= (plot[1] - plot[0]) / 2 - 1) || row.compute.length !== row.bins)
      fail('rank ' + row.rank + ': ' + row.bins + ' utilisation bins for a plot of ' + (plot[1] - plot[0]) + ' px');
    const per = (row.t1 - row.t0) / row.bins;
    for (let c = 0; c < row.bins; c += 7) {
      const want = busy(row.rank, row.t0 + c * per, row.t0 + (c + 1) * per);
      if (Math.abs(want - row.compute[c]) > 0.02)
        fail('rank ' + row.rank + ' utilisation bin ' + c + ' of the view ' + row.t0 + '-' + row.t1 + ': ' +
             row.compute[c] + ', the files give ' + want.toFixed(4));
    }
    distinct += new Set(row.compute).size;
  }
  if (distinct < 4) fail('zoomed in 50 times, the utilisation rows are flat: ' + distinct + ' values ' + JSON.stringify(rows.map((r) => [r.t0, r.t1, [...new Set(r.compute)]])) + ' ' + JSON.stringify(summary.window_ns));
  await p.click('#reset');
  await p.waitForTimeout(100);

  // The whole trace: every flush and steal drawn, in their colours.
  const drawnMarks = await p.$eval('#lanes', (e) => [Number(e.dataset.flushesDrawn), Number(e.dataset.stealsDrawn)]);
  if (drawnMarks[0] !== totalFlushes || drawnMarks[1] !== totalSteals)
    fail('whole trace: ' + drawnMarks[0] + ' flushes and ' + drawnMarks[1] + ' steals drawn, the files have ' +
         totalFlushes + ' and ' + totalSteals);
  const markPixels = await onPixels(await lanesBox.screenshot(), (px) => {
    const count = (rgb) => { let n = 0; for (let i = 0; i < px.length; i += 4)
      n += Math.abs(px[i] - rgb[0]) < 10 && Math.abs(px[i + 1] - rgb[1]) < 10 && Math.abs(px[i + 2] - rgb[2]) < 10; return n; };
    return [count([0x5c, 0x2e, 0x00]), count([0xe7, 0x29, 0x8a])];
  });
  if ((totalFlushes > 0 && markPixels[0] < 10) || (totalSteals > 0 && markPixels[1] < 5))
    fail('the lanes show ' + markPixels[0] + ' pixels of flushes and ' + markPixels[1] + ' of steals');

  // The location view opens on the location that held up the most lock-wait: the summary's
  // figure (the time in which some instance whose last grant it was waited).
  const mostWait = Math.max(...summary.locations.filter((l) => !l.internal && l.grants > 0)
    .map((l) => l.wait_ns));
  const opened = await p.$eval('#location-view', (e) => e.dataset.location);
  const openedRow = summary.locations.find((l) => l.name === opened);
  if (mostWait > 0 && (!openedRow || openedRow.wait_ns !== mostWait))
    fail('the location view opens on ' + opened + ' (' + (openedRow && openedRow.wait_ns) +
         ' ns of lock-wait held up), the summary\'s most is ' + mostWait + ' ns');

  // The location view: choose the location with the most grants in the summary.
  const loc = summary.locations.filter((l) => !l.internal).sort((a, b) => b.grants - a.grants)[0];
  const option = await p.$$eval('#location option', (os, name) =>
    os.filter((o) => o.textContent.startsWith(name + ' (')).map((o) => o.value), loc.name);
  if (option.length !== 1) fail('the location list has no ' + loc.name);
  await p.selectOption('#location', option[0]);
  let fifo = await p.$$eval('.fifo-row', (els) => els.map((e) => ({
    task: e.dataset.task, holds: Number(e.dataset.holds), h: e.getBoundingClientRect().height })));
  const holds = fifo.reduce((a, r) => a + r.holds, 0);
  if (fifo.length < 2 || holds !== loc.grants)
    fail('location ' + loc.name + ': ' + fifo.length + ' FIFO rows with ' + holds +
         ' grants, the summary counts ' + loc.grants + ' grants');
  if ((await p.$eval('#location-view', (e) => e.dataset.location)) !== loc.name)
    fail('the location view does not show ' + loc.name);

  // The FIFO's waits are hatched: zoomed in until a wait is at least 12 px wide, its pixels of
  // the lock-wait colour come in short runs along a row (diagonal lines), not in a solid bar.
  // On the location with the most grants if some of its instances waited, else on the one
  // that held up the most waiting (in some runs every grant of the first came at once).
  const waited = summary.locations.filter((l) => !l.internal && l.grants > 0).sort((a, b) => b.wait_ns - a.wait_ns)[0];
  if (!(loc.wait_ns > 0) && waited && waited.wait_ns > 0) {
    const o = await p.$$eval('#location option', (os, name) =>
      os.filter((e) => e.textContent.startsWith(name + ' (')).map((e) => e.value), waited.name);
    await p.selectOption('#location', o[0]);
    fifo = await p.$$eval('.fifo-row', (els) => els.map((e) => ({ task: e.dataset.task })));
  }
  const fifoCanvas = await p.$('#fifo-canvas');
  const fb = await fifoCanvas.boundingBox();
  // Zoomed in on the widest wait, wherever it lies: zoomed on the middle, a trace whose waits
  // all lay elsewhere showed none (the pointer moves with it, since a zoom keeps the time under
  // the pointer in place but the widest wait may change).
  for (let i = 0; i < 40 && Number(await p.$eval('#fifo-canvas', (e) => e.dataset.widestWait)) < 12; ++i) {
    const at = Number(await p.$eval('#fifo-canvas', (e) => e.dataset.widestWaitAt));
    await p.mouse.move(lb.x + plot[0] + at * (plot[1] - plot[0]), lb.y + 40);
    await p.mouse.wheel(0, -200);
  }
  const widest = Number(await p.$eval('#fifo-canvas', (e) => e.dataset.widestWait));
  if (widest >= 12) {
    const runs = await onPixels(await fifoCanvas.screenshot(), (px, w, h) => {
      let orange = 0, longest = 0;
      for (let y = 0; y < h; ++y)
        for (let x = 0, run = 0; x < w; ++x) {
          const i = 4 * (y * w + x);
          const hit = Math.abs(px[i] - 242) < 40 && Math.abs(px[i + 1] - 142) < 40 && Math.abs(px[i + 2] - 43) < 40;
          run = hit ? run + 1 : 0;
          orange += hit;
          longest = Math.max(longest, run);
        }
      return { orange, longest };
    });
    if (runs.orange < 20 || runs.longest > 5)
      fail('the FIFO\'s waits (the widest ' + widest + ' px) are not hatched: ' + runs.orange +
           ' pixels of the lock-wait colour, in runs of up to ' + runs.longest + ' px');
  } else {
    fail('zoomed in 40 steps, no wait in the FIFO of ' + (await p.$eval('#location-view', (e) => e.dataset.location)) + ' is 12 px wide (' + widest + ')');
  }
  // Hovering a FIFO row names the instance, its wait and its hold.
  let fifoTip = '';
  for (let row = 0; row < fifo.length && !fifoTip; ++row)
    for (let px = fb.x + 142; px < fb.x + fb.width - 14 && !fifoTip; px += 2) {
      await p.mouse.move(px, fb.y + row * 20 + 10);
      fifoTip = await p.$eval('#tip', (e) => (e.hidden ? '' : e.textContent));
      if (fifoTip && !fifo.some((r) => fifoTip.startsWith(r.task + ', iteration ')))
        fail('the FIFO\'s tooltip names no task of its rows: "' + fifoTip + '"');
    }
  if (!/requested .*, granted .*: waited .*\nheld until /.test(fifoTip))
    fail('hovering the FIFO shows "' + fifoTip + '"');
  await p.click('#reset');

  // Hover shows the instance under the pointer; search counts instances by task name.
  let hovered = '';
  for (const lane of await p.$$('.lane')) {
    const box = await lane.boundingBox();
    for (let px = lb.x + 150; px < lb.x + lb.width - 20 && !hovered; px += 3) {
      await p.mouse.move(px, box.y + box.height / 2);
      hovered = await p.$eval('#tip', (e) => (e.hidden ? '' : e.textContent));
    }
    if (hovered) {
      const where = 'rank ' + (await lane.getAttribute('data-rank')) + ', worker ' +
                    (await lane.getAttribute('data-worker'));
      if (!new RegExp('iteration \\d+\n' + where).test(hovered)) fail('hover on ' + where + ' shows "' + hovered + '"');
      break;
    }
  }
  if (!hovered) fail('hovering the lanes shows nothing');
  // The kind with the most instances (heat2d's u.compute) for search and histogram.
  const perKind = {};
  for (const t of userTasks) perKind[kind(t.name)] = (perKind[kind(t.name)] || 0) + t.instances;
  const [mainKind, kindInstances] = Object.entries(perKind).sort((a, b) => b[1] - a[1])[0];
  await p.fill('#search', mainKind);
  const found = await p.$eval('#search-count', (e) => e.textContent);
  if (!found.startsWith(kindInstances + ' instances'))
    fail('search "' + mainKind + '": ' + found + ', expected ' + kindInstances);
  // Next and previous: matching instances in time order, each brought into view.
  const at = async () => p.$eval('#search-at', (e) => ({ i: e.dataset.instance, begin: Number(e.dataset.begin),
    name: e.dataset.name, t0: Number(document.getElementById('lanes').dataset.t0),
    t1: Number(document.getElementById('lanes').dataset.t1) }));
  const visits = [];
  for (const how of ['next', 'next', 'next', 'prev', 'enter']) {
    if (how === 'enter') await p.press('#search', 'Enter');
    else await p.click('#search-' + how);
    visits.push(await at());
  }
  for (const v of visits) {
    if (!v.name || kind(v.name) !== mainKind) fail('search next/previous found ' + v.name + ', not a ' + mainKind);
    if (!(v.begin >= v.t0 && v.begin <= v.t1)) fail('search: the match at ' + v.begin + ' is outside the view ' + v.t0 + '-' + v.t1);
  }
  if (!(visits[1].begin >= visits[0].begin && visits[2].begin >= visits[1].begin && visits[1].i !== visits[0].i &&
        visits[2].i !== visits[1].i))
    fail('search next does not go forward in time: ' + JSON.stringify(visits.slice(0, 3)));
  if (visits[3].i !== visits[1].i || visits[4].i !== visits[2].i)
    fail('search previous / Enter: ' + JSON.stringify(visits));
  await p.fill('#search', '');

  // Keyboard: + zooms in by 1.5 at the view's middle, the right arrow pans by a fifth, -
  // zooms out, 0 shows the whole trace.
  await p.click('#summary-line');
  const v0 = await view();
  const near1 = (a, b, scale) => Math.abs(a - b) <= 1e-6 * scale + 1e-3;
  await p.keyboard.press('+');
  const v1 = await view();
  if (!near1(v1[1] - v1[0], (v0[1] - v0[0]) / 1.5, v0[1] - v0[0]) || !near1(v1[0] + v1[1], v0[0] + v0[1], v0[1]))
    fail('key +: view ' + v0 + ' became ' + v1);
  await p.keyboard.press('ArrowLeft');
  const v2 = await view();
  if (!near1(v2[0], v1[0] - (v1[1] - v1[0]) / 5, v1[1]) || !near1(v2[1] - v2[0], v1[1] - v1[0], v1[1]))
    fail('key ArrowLeft: view ' + v1 + ' became ' + v2);
  await p.keyboard.press('-');
  const v3 = await view();
  if (!near1(v3[1] - v3[0], (v2[1] - v2[0]) * 1.5, v2[1])) fail('key -: view ' + v2 + ' became ' + v3);
  await p.keyboard.press('0');
  const v4 = await view();
  if (v4[0] !== 0 || !(v4[1] >= v0[1])) fail('key 0: view ' + v4 + ', not the whole trace');

  // A kind's histogram counts its instances.
  const kindButton = (await p.$('.legend-kind[data-kind="' + mainKind + '"]')) ||
                     (await p.$('.legend-item[data-key="' + mainKind + '"]'));
  if (!kindButton) fail('the legend has no button for ' + mainKind);
  await kindButton.click();
  const histo = await p.$eval('#histogram', (e) => ({ hidden: e.hidden, count: Number(e.dataset.count),
    bars: e.querySelectorAll('rect.bar').length }));
  if (histo.hidden || histo.count !== kindInstances || histo.bars < 1)
    fail('histogram of ' + mainKind + ': ' + JSON.stringify(histo) + ', expected ' + kindInstances + ' instances');

  // Messages between ranks, on demand.
  await p.check('#show-messages');
  const drawn = await p.$eval('#message-count', (e) => e.textContent);
  if (!/^[1-9]\d* messages drawn/.test(drawn)) fail('messages: "' + drawn + '"');
  await p.uncheck('#show-messages');

  // The screenshot: the critical path's red and the location view's holds are painted.
  const shot = await p.screenshot({ fullPage: true });
  const counts = await onPixels(shot, (px, w, h) => {
    const fifo = document.getElementById('fifo-canvas').getBoundingClientRect();
    const top = Math.round(fifo.top + window.scrollY), bottom = Math.round(fifo.bottom + window.scrollY);
    let red = 0, painted = 0;
    for (let y = 0; y < h; ++y)
      for (let x = 0; x < w; ++x) {
        const i = 4 * (y * w + x), r = px[i], gg = px[i + 1], b = px[i + 2];
        if (Math.abs(r - 214) < 12 && Math.abs(gg - 39) < 12 && Math.abs(b - 40) < 12) ++red;
        if (y >= top && y < bottom && x > 150 && Math.max(r, gg, b) - Math.min(r, gg, b) > 40) ++painted;
      }
    return { red, painted };
  });
  if (counts.red < 50) fail('the screenshot shows ' + counts.red + ' pixels of the critical path\'s red');
  if (counts.painted < 50) fail('the screenshot\'s location view has ' + counts.painted + ' painted pixels');
  if (process.env.ORDO_VIEWER_SHOT) fs.writeFileSync(process.env.ORDO_VIEWER_SHOT, shot);

  // What is drawn is what the events say, pixel column by pixel column, on a trace dense
  // enough (several instances per column, nearly every one waiting) that the lanes' lock
  // waits and the location view's holds are drawn from their unions and skipped by binary
  // search. The oracle is the page's own data, read here event by event: a column that an
  // interval covers with a pixel to spare on each side is painted (the lock-wait orange in
  // the lanes' wait bar; not the row's background in the location view's hold band), a
  // column with no interval within a pixel shows the background. At the whole trace, zoomed
  // in, after a drag and zoomed in deeper.
  const dense = path.join(dir, 'dense.trace'), densePage = path.join(dir, 'dense.html');
  execFileSync(heat, ['--size', '96x96', '--blocks', '3x3', '--iters', '400', '--workers', '2',
    '--trace', dense], { stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync(tool, ['html', '-o', densePage, dense]);
  await p.goto('file://' + densePage);
  await p.waitForSelector('body[data-ready="1"]', { timeout: 20000 });
  const checkDrawn = () => p.evaluate(() => {
    const D = JSON.parse(document.getElementById('trace-data').textContent);
    const lanesEl = document.getElementById('lanes');
    const t0 = Number(lanesEl.dataset.t0), t1 = Number(lanesEl.dataset.t1);
    const lo = Number(lanesEl.dataset.plotLeft), hi = Number(lanesEl.dataset.plotRight), kx = (hi - lo) / (t1 - t0);
    // Per pixel column x in [lo, hi): 1 where one interval covers [x - 1, x + 2), 0 where
    // none touches it, -1 (not checked) otherwise.
    const columns = (intervals) => {
      const n = Math.floor(hi - lo), state = new Int8Array(n).fill(0);
      const cover = new Int8Array(n);
      for (const [a, b] of intervals) {
        const pa = lo + (a - t0) * kx, pb = lo + (b - t0) * kx;
        for (let x = Math.max(0, Math.floor(pa - lo) - 1); x < Math.min(n, Math.ceil(pb - lo) + 1); ++x) {
          if (state[x] === 0) state[x] = -1;
          if (pa <= lo + x - 1 && pb >= lo + x + 2) cover[x] = 1;
        }
      }
      for (let x = 0; x < n; ++x) if (cover[x]) state[x] = 1;
      return state;
    };
    const rgbAt = (img, w, x, y) => { const i = 4 * (y * w + x); return [img[i], img[i + 1], img[i + 2], img[i + 3]]; };
    const near = (c, r, tol) => Math.abs(c[0] - r[0]) <= tol && Math.abs(c[1] - r[1]) <= tol && Math.abs(c[2] - r[2]) <= tol;
    const backgrounds = [[0xfa, 0xfa, 0xfa], [0xf3, 0xf3, 0xf3]];
    const out = { painted: 0, empty: 0, bad: [] };
    const check = (state, img, w, y, paintedOk, what) => {
      for (let x = 0; x < state.length; ++x) {
        if (state[x] < 0) continue;
        const c = rgbAt(img, w, Math.floor(lo) + x, y), bg = c[3] === 255 && backgrounds.some((b) => near(c, b, 0));
        if (state[x] === 1) ++out.painted; else ++out.empty;
        if (state[x] === 1 ? !paintedOk(c, bg) : !bg)
          if (out.bad.length < 5) out.bad.push(what + ' x ' + (Math.floor(lo) + x) + ': ' + c + ' where the events ' +
            (state[x] ? 'cover the column' : 'have nothing'));
      }
    };
    // The lanes' lock waits: a bar 3 px tall at the bottom of the lane (row 22 of 24 is under
    // no flush, slice or idle bar).
    // Read from a copy: reading a canvas back more than once makes Chromium warn on the console.
    const pixels = (c) => {
      const copy = document.createElement('canvas');
      copy.width = c.width; copy.height = c.height;
      const g = copy.getContext('2d');
      g.drawImage(c, 0, 0);
      return g.getImageData(0, 0, c.width, c.height).data;
    };
    const lc = document.getElementById('lanes-canvas'), limg = pixels(lc);
    [...document.querySelectorAll('.lane')].forEach((el, l) => {
      const waits = [];
      for (let i = 0; i < D.inst.lane.length; ++i)
        if (D.inst.lane[i] === l && D.inst.wait[i] > 0 && D.inst.otherwise[i] >= 0)
          waits.push([D.inst.otherwise[i], D.inst.otherwise[i] + D.inst.wait[i]]);
      check(columns(waits), limg, lc.width, parseFloat(el.style.top) + 22,
            (c) => near(c, [0xf2, 0x8e, 0x2b], 2), 'lane ' + l + ' lock wait');
    });
    // The location view's holds, from each grant to the end of its instance (row 4 of 20:
    // in the hold band, above the hatched waits); empty where nothing is waited for or held.
    const fc = document.getElementById('fifo-canvas'), fimg = pixels(fc);
    const loc = D.locs.indexOf(document.getElementById('location-view').dataset.location);
    [...document.querySelectorAll('.fifo-row')].forEach((el, k) => {
      const name = D.names.indexOf(el.dataset.task), holds = [], any = [];
      for (let g = 0; g < D.grants.loc.length; ++g) {
        const i = D.grants.inst[g];
        if (D.grants.loc[g] !== loc || D.inst.name[i] !== name) continue;
        holds.push([D.grants.at[g], D.inst.begin[i] + D.inst.dur[i]]);
        any.push([Math.min(D.grants.requested[g], D.grants.at[g]), D.inst.begin[i] + D.inst.dur[i]]);
      }
      const held = columns(holds), touched = columns(any);
      // Empty only where neither a hold nor a wait comes near.
      for (let x = 0; x < held.length; ++x) if (held[x] === 0 && touched[x] !== 0) held[x] = -1;
      check(held, fimg, fc.width, k * 20 + 4, (c, bg) => !bg, 'location row ' + el.dataset.task);
    });
    return out;
  });
  const lb2 = await (await p.$('#lanes')).boundingBox();
  for (const when of ['whole trace', 'zoomed in', 'dragged', 'zoomed in deeper']) {
    if (when === 'zoomed in') {
      await p.mouse.move(lb2.x + lb2.width * 0.4, lb2.y + 40);
      for (let i = 0; i < 4; ++i) await p.mouse.wheel(0, -300);
    } else if (when === 'dragged') {
      await p.mouse.move(lb2.x + lb2.width * 0.6, lb2.y + 40);
      await p.mouse.down();
      for (let i = 1; i <= 10; ++i) await p.mouse.move(lb2.x + lb2.width * 0.6 - 17 * i, lb2.y + 40);
      await p.mouse.up();
    } else if (when === 'zoomed in deeper') {
      for (let i = 0; i < 6; ++i) await p.mouse.wheel(0, -300);
    }
    await p.waitForTimeout(150);
    const r = await checkDrawn();
    if (r.bad.length) fail(when + ' on a dense trace: ' + r.bad.join('; '));
    if (r.painted < 20 || r.empty < 20)
      fail(when + ' on a dense trace: ' + r.painted + ' columns painted and ' + r.empty +
           ' empty checked, too few for the check to test anything');
  }

  // Colours are keyed by name: two traces whose task sets differ (and list them in another
  // order) give the names they share the same colours.
  const colourOf = async (names) => {
    const file = path.join(dir, 'names.trace'), html = path.join(dir, 'names.html');
    const evs = [[1, 12, 1000, undefined, 1]];
    names.forEach((_, k) => evs.push([0, 1, 2000 + 1000 * k, k, 0], [0, 2, 2500 + 1000 * k, k, 0]));
    evs.push([1, 13, 2000 + 1000 * names.length, undefined, 1]);
    writeTrace(file, names, 1, evs);
    execFileSync(tool, ['html', '-o', html, file]);
    await p.goto('file://' + html);
    await p.waitForSelector('body[data-ready="1"]', { timeout: 20000 });
    return Object.fromEntries(await p.$$eval('.legend-item .swatch', (els) =>
      els.map((e) => [e.parentNode.dataset.key, getComputedStyle(e).backgroundColor])));
  };
  const first = await colourOf(['alpha', 'beta', 'gamma', 'omega']);
  const second = await colourOf(['zeta', 'gamma', 'delta', 'alpha', 'epsilon', 'omega']);
  for (const n of ['alpha', 'gamma', 'omega'])
    if (!first[n] || first[n] !== second[n])
      fail('task ' + n + ' is ' + first[n] + ' in one trace and ' + second[n] + ' in another');
  // (zeta and omega pick the same palette colour: zeta, sorting after, takes another.)
  if (new Set(Object.values(second)).size !== 6) fail('six tasks, colours ' + JSON.stringify(second));
  for (const c of Object.values(second))
    for (const [what, r] of [['lock wait', colours.wait], ['the critical path', colours.critical]])
      if (near(rgbOf(c), rgbOf(r))) fail('a task is coloured ' + c + ', like ' + what);

  // Durations that span a thousand times (1 us to 1 ms, evenly in their logarithm): the
  // histogram goes on a log scale, where no bar holds most of them (linear bins of 33 us put
  // half in the first).
  const spread = path.join(dir, 'spread.trace'), spreadPage = path.join(dir, 'spread.html');
  const ev = [[1, 12, 1000, undefined, 60]];
  let t = 2000;
  for (let k = 0; k < 60; ++k) {
    const d = Math.round(1000 * Math.pow(1000, k / 59));
    ev.push([0, 1, t, 0, k], [0, 2, t + d, 0, k]);
    t += d + 500;
  }
  ev.push([1, 13, t, undefined, 60]);
  writeTrace(spread, ['spread'], 1, ev);
  execFileSync(tool, ['html', '-o', spreadPage, spread]);
  await p.goto('file://' + spreadPage);
  await p.waitForSelector('body[data-ready="1"]', { timeout: 20000 });
  await p.click('.legend-item[data-key="spread"]');
  const h = await p.$eval('#histogram', (e) => ({ scale: e.dataset.scale, count: Number(e.dataset.count),
    bars: [...e.querySelectorAll('rect.bar')].map((b) => Number(b.dataset.count)) }));
  const inBars = h.bars.reduce((a, b) => a + b, 0), fullest = Math.max(...h.bars);
  if (h.scale !== 'log' || h.count !== 60 || inBars !== 60 || fullest > 10)
    fail('histogram of durations from 1 us to 1 ms: ' + h.scale + ' scale, ' + inBars + ' of ' + h.count +
         ' instances in its bars, the fullest ' + fullest + ' (expected a log scale, none above 10)');
} finally {
  await browser.close();
}
const noisy = console_.filter((m) => !m.startsWith('debug'));
if (noisy.length) fail('the page wrote to the console:\n' + noisy.join('\n'));
console.log('viewer: ' + RANKS * (WORKERS + 1) + ' lanes >= 20 px (the caller threads\' too), flushes, steals, message ends per lane, legend, axis labels apart, critical path, ' +
            'location FIFO hatched and hovered, hover, search next/previous, keys, histogram (log scale ' +
            'when wide), messages, utilisation per zoom; no console output');
