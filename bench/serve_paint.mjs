// bench/serve_paint: the time from navigation to a drawn run page (every chart painted) in headless
// Chromium. usage: node serve_paint.mjs URL PUPPETEER_CORE_DIR TMPDIR
import { createRequire } from "node:module";
import { join } from "node:path";
const require = createRequire(import.meta.url);
const [url, mod, tmp] = process.argv.slice(2);
const puppeteer = require(mod);
const browser = await puppeteer.launch({
  executablePath: "/usr/bin/chromium", headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--user-data-dir=" + join(tmp, "chromium-bench")],
});
const page = await browser.newPage();
await page.setViewport({ width: 1400, height: 1000 });
const times = [];
let first = null;
for (let i = 0; i < 5; i++) {
  await page.goto("about:blank");
  await page.goto(url);
  const hash = new URL(url).hash;
  await page.waitForFunction((h) => document.body.dataset.ready === h, { timeout: 30000 }, hash);
  times.push(await page.evaluate(() => performance.now()));
  if (first === null) first = times[0];
}
const charts = await page.$$eval("[data-chart] canvas", (c) => c.length);
times.sort((a, b) => a - b);
console.log(`run page painted: first ${(first / 1000).toFixed(2)} s, then ${(times[2] / 1000).toFixed(2)} s median of 5 ` +
  `(${charts} charts, from navigation to every chart drawn)`);
await browser.close();
