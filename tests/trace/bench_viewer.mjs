// Benchmark, not a test (meson benchmark -C build trace_viewer): how long the ordo-trace HTML
// viewer takes to open a trace of at least a million events in headless Chromium (target:
// under 3 s), and to redraw after a zoom. The trace is heat2d's, with small tasks and many
// iterations; in the same run the page's JSON is parsed alone, the least any viewer of the same
// data pays, for a ratio. Prints bench=viewer ... lines.
// Usage: node bench_viewer.mjs ORDO_TRACE HEAT2D VIEWER_DIR [MIN_EVENTS]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const [tool, heat, viewerDir, minArg] = process.argv.slice(2);
const minEvents = Number(minArg || 1e6);
const { chromium } = createRequire(path.resolve(viewerDir, 'package.json'))('playwright-core');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ordo-bench-viewer-'));
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
const trace = path.join(dir, 'big.trace'), page = path.join(dir, 'big.html');

// Iterations until the trace holds enough events (about 6 per instance of 32 tasks).
let iters = Math.ceil(minEvents / 32 / 6), events = 0, instances = 0;
for (let attempt = 0; attempt < 4 && events < minEvents; ++attempt) {
  execFileSync(heat, ['--size', '256x256', '--blocks', '4x4', '--iters', String(iters), '--workers',
    '2', '--trace', trace], { stdio: ['ignore', 'ignore', 'inherit'] });
  const s = JSON.parse(execFileSync(tool, ['summary', '--json', trace],
    { encoding: 'utf8', maxBuffer: 1 << 28 }));
  events = s.events;
  instances = s.instances;
  if (events < minEvents) iters = Math.ceil(iters * 1.1 * minEvents / Math.max(1, events));
}
const t0 = Date.now();
execFileSync(tool, ['html', '-o', page, trace]);
const writeS = (Date.now() - t0) / 1e3;
const mb = fs.statSync(page).size / 1e6;

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const results = [];
  for (let rep = 0; rep < 3; ++rep) {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const p = await ctx.newPage();
    const start = Date.now();
    await p.goto('file://' + page, { timeout: 60000 });
    await p.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    const openS = (Date.now() - start) / 1e3;
    // Parsing the page's data alone, in the same page.
    const parseS = await p.evaluate(() => {
      const text = document.getElementById('trace-data').textContent;
      const a = performance.now();
      JSON.parse(text);
      return (performance.now() - a) / 1e3;
    });
    // A zoom at the pointer, to the next painted frame.
    const box = await (await p.$('#lanes')).boundingBox();
    await p.mouse.move(box.x + box.width / 2, box.y + 30);
    const zoomMs = await p.evaluate(() => new Promise((resolve) => {
      const a = performance.now();
      document.getElementById('lanes').dispatchEvent(new WheelEvent('wheel', {
        deltaY: -500, clientX: innerWidth / 2, clientY: 200, bubbles: true, cancelable: true }));
      requestAnimationFrame(() => resolve(performance.now() - a));
    }));
    results.push({ openS, parseS, zoomMs });
    await ctx.close();
  }
  const best = (k) => Math.min(...results.map((r) => r[k]));
  console.log(`bench=viewer events=${events} instances=${instances} page_mb=${mb.toFixed(1)} ` +
              `html_write_s=${writeS.toFixed(2)}`);
  console.log(`bench=viewer open_s=${best('openS').toFixed(2)} target_s=3 ` +
              `ratio_to_target=${(best('openS') / 3).toFixed(2)} json_parse_s=${best('parseS').toFixed(2)} ` +
              `open_over_parse=${(best('openS') / best('parseS')).toFixed(1)} zoom_redraw_ms=${best('zoomMs').toFixed(0)}`);
} finally {
  await browser.close();
}
