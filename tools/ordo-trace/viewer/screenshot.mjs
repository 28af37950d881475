// Takes the screenshot of docs/images/viewer-heat2d-2ranks.png: the page of a trace, opened in
// headless Chromium through playwright-core, 1400 px wide, the whole page.
// Usage: node screenshot.mjs PAGE.html OUT.png
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const [page, out] = process.argv.slice(2);
const here = path.dirname(fileURLToPath(import.meta.url));
const { chromium } = createRequire(path.join(here, 'package.json'))('playwright-core');
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const p = await browser.newPage({ viewport: { width: 1400, height: 800 } });
await p.goto('file://' + path.resolve(page));
await p.waitForSelector('body[data-ready="1"]');
await p.screenshot({ path: out, fullPage: true });
await browser.close();
