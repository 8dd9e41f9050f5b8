// End-to-end: `gpuscope serve` in a real headless Chromium (Debian's /usr/bin/chromium, driven by
// puppeteer-core: no browser is ever downloaded). Two finished runs and one live run, all with the
// simulated GPU (tests/gpusim) and a job that reports its steps over gs1; then the runs page, the
// runs page from a URL with a search (gpuscope runs --where's filter, sort and columns) and the tags
// and notes gpuscope tag and note added, the live run's page (charts have data and grow while the
// run goes on; the live finding appears), a
// finished run's page (zoom and reset), the compare page (bars with speed-ups), and the same pages
// written by report --html and compare --html, opened from file:// with no network; then a group of two
// runs (gpuscope run --group) served as one run and compared beside a run in a file. Screenshots go to
// $GS_BUILD_DIR/tests/e2e/screens/ — look at them.
//
// env: GPUSCOPE_BIN, GS_BUILD_DIR, GS_SOURCE_DIR, GS_PYTHON, GS_CHROMIUM, NODE_PATH (puppeteer-core)
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const puppeteer = require(process.env.GS_PUPPETEER || "puppeteer-core");
const BIN = process.env.GPUSCOPE_BIN, BUILD = process.env.GS_BUILD_DIR, SRC = process.env.GS_SOURCE_DIR;
const PY = process.env.GS_PYTHON || "/usr/bin/python3";
const CHROMIUM = process.env.GS_CHROMIUM || "/usr/bin/chromium";
const SIM = join(BUILD, "tests/gpusim/libnvidia-ml.so.1");
const SHOTS = join(BUILD, "tests/e2e/screens");
mkdirSync(SHOTS, { recursive: true });
const dir = mkdtempSync(join(tmpdir(), "gs-e2e-"));
const env = { ...process.env, GPUSCOPE_STORE: "sqlite://" + join(dir, "gs.db"), XDG_DATA_HOME: join(dir, "xdg"),
  GPUSCOPE_NVML_LIB: SIM };
delete env.GPUSIM_JOBPID;

let failed = 0;
const children = [];
function check(cond, msg) { if (!cond) throw new Error(msg); }
let shotPage = null, nstep = 0;
async function step(name, fn) {
  nstep++;
  try { await fn(); console.log("ok   " + name); } catch (e) {
    failed++;
    console.log("FAIL " + name + ": " + e.message);
    if (shotPage) await shotPage.screenshot({ path: join(SHOTS, `failed-${nstep}.png`), fullPage: true }).catch(() => {});
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A job that waits DATA s for each batch and computes COMPUTE s, for N steps, reporting each.
const job = join(dir, "job.py");
writeFileSync(job, `
import os, socket, sys, time
data, comp, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
path = os.environ.get("GPUSCOPE_SOCKET")
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
def send(line):
    if path: s.sendto(line.encode(), path)
for kv in sys.argv[4:]:
    k, v = kv.split("=", 1); send(f"gs1 param {k} {v}")
for i in range(n):
    t0 = time.monotonic(); time.sleep(data); t1 = time.monotonic()
    while time.monotonic() - t1 < comp: pass
    t2 = time.monotonic()
    send(f"gs1 step {i} data={t1 - t0:.6f} compute={t2 - t1:.6f} samples=32 t={t2:.6f}")
    send(f"gs1 metric loss {2.0 / (1 + i * 0.05):.4f} {i}")
    if i == n // 2: send(f"gs1 mark epoch 1 t={t2:.6f}")
    if i % 10 == 0: print(f"step {i} loss {2.0 / (1 + i * 0.05):.4f}", flush=True)
print("NCCL WARN watchdog: collective timed out (a line the log panel finds)", file=sys.stderr, flush=True)
`);

function gsRun(name, scenario, data, compute, steps, params, wait = true) {
  const args = ["run", "--quiet", "--interval", "100ms", "--name", name, "--", PY, job, String(data), String(compute),
    String(steps), ...params];
  const e = { ...env, GPUSIM_SCENARIO: join(SRC, "tests/gpusim/scenarios", scenario) };
  if (wait) {
    const r = spawnSync(BIN, args, { env: e, encoding: "utf8", timeout: 120000 });
    check(r.status === 0, `gpuscope run ${name} exited ${r.status}: ${r.stderr}`);
    return null;
  }
  const p = spawn(BIN, args, { env: e, stdio: "ignore" });
  children.push(p);
  return p;
}

async function startServe() {
  const p = spawn(BIN, ["serve", "--listen", "127.0.0.1:0"], { env, stdio: ["ignore", "pipe", "pipe"] });
  children.push(p);
  let out = "";
  p.stdout.on("data", (d) => (out += d));
  p.stderr.on("data", (d) => process.stderr.write(d));
  for (let i = 0; i < 100 && !/:(\d+)\//.test(out); i++) await sleep(50);
  const m = /127\.0\.0\.1:(\d+)\//.exec(out);
  check(m, "serve printed no address: " + out);
  return "http://127.0.0.1:" + m[1];
}

// Opens a page of the app and waits until it is drawn.
async function open(page, base, hash) {
  await page.goto(base + "/" + hash, { waitUntil: "networkidle2" });
  await page.waitForFunction((h) => document.body.dataset.ready === (h || "#/"), { timeout: 15000 }, hash);
}

// Waits until the run has samples of a series (the agent's first flushes).
async function waitSeries(base, run, name) {
  for (let i = 0; i < 100; i++) {
    const r = await fetch(`${base}/api/runs/${run}`).then((x) => (x.ok ? x.json() : null)).catch(() => null);
    if (r && r.series.some((s) => s.name === name && s.count > 0)) return;
    await sleep(200);
  }
  throw new Error(`${run} has no ${name} samples`);
}

// The number of x values and of non-null values of line 1 of a chart on the page.
// How many lines (series) a chart draws: the heat map's rows.
async function chartLines(page, id) {
  return page.evaluate((id) => {
    const w = document.querySelector(`[data-chart="${id}"]`);
    return w && w.gsPlot ? w.gsPlot.data.length - 1 : null;
  }, id);
}

async function chartPoints(page, id) {
  return page.evaluate((id) => {
    const w = document.querySelector(`[data-chart="${id}"]`);
    if (!w || !w.gsPlot) return null;
    const d = w.gsPlot.data;
    return { x: d[0].length, last: d[0][d[0].length - 1], values: (d[1] || []).filter((v) => v !== null && v !== undefined).length };
  }, id);
}

// An MLflow file store of one run, "mlflow-run", by the format's own rules (as test_import_mlflow.py
// writes it): its loss at steps 0..59, one point a second; imported, it has no step series of its own.
function importMlflow() {
  const root = join(dir, "mlruns"), rid = "5e2e5e2e5e2e5e2e5e2e5e2e5e2e5e2e", d = join(root, "0", rid), t0 = 1796000000000;
  for (const sub of ["metrics", "params", "tags"]) mkdirSync(join(d, sub), { recursive: true });
  writeFileSync(join(root, "0", "meta.yaml"), `artifact_location: file://${root}/0\ncreation_time: ${t0}\nexperiment_id: '0'\n` +
    `last_update_time: ${t0}\nlifecycle_stage: active\nname: e2e\n`);
  writeFileSync(join(d, "meta.yaml"), `artifact_uri: file://${d}/artifacts\nend_time: ${t0 + 61000}\nexperiment_id: '0'\n` +
    `lifecycle_stage: active\nrun_id: ${rid}\nrun_name: mlflow-run\nrun_uuid: ${rid}\nstart_time: ${t0}\nstatus: 3\n` +
    `tags: []\nuser_id: e2e\n`);
  writeFileSync(join(d, "params", "batch_size"), "32");
  writeFileSync(join(d, "metrics", "loss"), Array.from({ length: 60 }, (_, i) => `${t0 + 1000 * (i + 1)} ${2.5 / (1 + i * 0.05)} ${i}\n`).join(""));
  const r = spawnSync(BIN, ["import", root], { env, encoding: "utf8" });
  check(r.status === 0, `import of the MLflow store exited ${r.status}: ${r.stderr}`);
}

let browser;
try {
  check(existsSync(SIM), SIM + " is not built");
  gsRun("slow-loader", "busy8_h200.scn", 0.03, 0.02, 60, ["num_workers=0", "batch_size=32", "pin_memory=false"]);
  gsRun("fast-loader", "busy8_h200.scn", 0.004, 0.02, 60, ["num_workers=4", "batch_size=32", "pin_memory=true"]);
  const live = gsRun("live-run", "throttled.scn", 0.03, 0.02, 500, ["num_workers=0", "batch_size=32"], false);
  const base = await startServe();
  await waitSeries(base, "live-run", "gpu.util_pct");
  await waitSeries(base, "live-run", "step.total_s");
  browser = await puppeteer.launch({
    executablePath: CHROMIUM, headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--user-data-dir=" + join(dir, "chromium")],
  });
  const page = await browser.newPage();
  shotPage = page;
  await page.setViewport({ width: 1400, height: 1000 });
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));

  await step("runs page lists the three runs with their status and a sparkline", async () => {
    await open(page, base, "");
    const rows = await page.$$eval("#runs tbody tr[data-run]", (t) => t.map((r) => r.innerText));
    check(rows.length === 3, "rows: " + rows.length);
    check(rows.some((r) => r.includes("live-run") && r.includes("running")), "the live run shows as running: " + rows.join(" | "));
    check(await page.$('#runs tr[data-run] .finding-cell .live-badge'), "the live run's top finding, live");
    const sparks = await page.$$eval("#runs svg.spark path", (p) => p.map((x) => x.getTotalLength() > 0 || /l0\.01/.test(x.getAttribute("d"))));
    check(sparks.length === 3 && sparks.every(Boolean), "a drawn sparkline per run: " + sparks);
    await page.screenshot({ path: join(SHOTS, "runs.png"), fullPage: true });
  });

  await step("a filtered runs page from a URL: its search, columns, tags and notes; a bad filter says why", async () => {
    for (const args of [["tag", "slow-loader", "team=vision"], ["note", "slow-loader", "loader starved <b>x</b>"]]) {
      const r = spawnSync(BIN, args, { env, encoding: "utf8" });
      check(r.status === 0, `gpuscope ${args[0]}: ${r.stderr}`);
    }
    const names = (t) => t.map((r) => r.querySelector("td:nth-child(2) a").textContent);
    const where = "param.num_workers = 0 and tag.team = vision";
    await open(page, base, "#/?" + new URLSearchParams({ where, columns: "param.batch_size,tag.team" }));
    check((await page.$$eval("#runs tbody tr[data-run]", names)).join() === "slow-loader", "only the tagged run");
    check(await page.$eval("#where", (e) => e.value) === where, "the filter shown in its box");
    const cells = await page.$$eval("#runs tbody td.col", (t) => t.map((c) => c.dataset.col + "=" + c.textContent));
    check(cells.join() === "param.batch_size=32,tag.team=vision", "the asked columns: " + cells);
    check(await page.$eval("#runs .tag", (e) => e.textContent) === "team=vision", "the tag as a chip");
    const note = await page.$eval("#runs .note", (e) => ({ text: e.textContent, tags: e.querySelectorAll("b").length }));
    check(note.text.includes("loader starved <b>x</b>") && note.tags === 0, "the note, as text: " + JSON.stringify(note));
    check(!/Not Supported/.test(note.text + (await page.$eval("#runs .note", (e) => e.title))),
      "no GPU's missing metric under the run's name: " + note.text);
    await open(page, base, "#/?" + new URLSearchParams({ where: "param.batch_size = 32 and not status = running",
      sort: "-samples_per_s", columns: "samples_per_s" }));
    const order = await page.$$eval("#runs tbody tr[data-run]", names);
    const rates = await page.$$eval("#runs tbody td.col", (t) => t.map((c) => Number(c.textContent)));
    check(order.join() === "fast-loader,slow-loader" && rates[0] > rates[1], `sorted by throughput: ${order} ${rates}`);
    await page.screenshot({ path: join(SHOTS, "runs-search.png"), fullPage: true });
    await open(page, base, "#/?" + new URLSearchParams({ where: "param.batch_size >=" }));
    const err = await page.$eval("#where-error", (e) => (e.hidden ? "" : e.textContent));
    check(/where: .*the end/.test(err) && !(await page.$("#runs tbody tr[data-run]")), "a bad filter says why: " + err);
    await open(page, base, "#/run/slow-loader");
    check((await page.$eval("#run-tags", (e) => e.textContent)).includes("team=vision"), "the run page's tags");
    check((await page.$eval("#run-notes", (e) => e.textContent)).includes("loader starved <b>x</b>"), "its note");
  });

  await step("live run page: charts have data and grow while the run goes on; the live finding appears", async () => {
    await open(page, base, "#/run/live-run");
    const a = await chartPoints(page, "util");
    check(a && a.values > 0, "the util chart has data: " + JSON.stringify(a));
    check(await page.$('[data-chart="steps"]'), "a step chart");
    check(await page.$('[data-chart="cpu"]'), "a host CPU heat map");
    await page.waitForSelector("#live-findings", { timeout: 15000 });
    await page.waitForFunction(() => +(document.body.dataset.liveUpdates || 0) >= 2, { timeout: 15000 });
    const b = await chartPoints(page, "util");
    check(b.x > a.x && b.last > a.last, `the util chart grew: ${JSON.stringify(a)} -> ${JSON.stringify(b)}`);
    const findings = await page.$$eval("#findings article", (x) => x.map((f) => f.dataset.rule));
    check(findings.length >= 1, "live findings shown");
    // the job's output, followed: its lines grow while it runs
    await page.waitForFunction(() => +(document.querySelector("#log") || { dataset: {} }).dataset.lines > 0, { timeout: 15000 });
    const n0 = await page.$$eval("#log-lines .log-line", (l) => l.length);
    await page.waitForFunction((n) => document.querySelectorAll("#log-lines .log-line").length > n, { timeout: 20000 }, n0);
    await page.screenshot({ path: join(SHOTS, "run-live.png"), fullPage: true });
  });

  await step("finished run page: verdict card, GPU table of 8, where it came from, findings with evidence and a copy button", async () => {
    await open(page, base, "#/run/slow-loader");
    const verdict = await page.$eval("#verdict", (v) => v.innerText);
    check(/samples\/s/.test(verdict), "the verdict card shows throughput: " + verdict);
    check((await page.$$("#gpus tbody tr")).length === 8, "eight GPUs in the table");
    check((await page.$$("#findings .fix .copy")).length >= 1, "a fix with a copy button");
    const origin = await page.$eval("#origin", (o) => o.innerText);
    check(/NVIDIA driver\s+\d+\.\d+/.test(origin) && /driver CUDA\s+12\.4/.test(origin), "where it came from: " + origin);
    const ev = await page.$$eval("#findings table.evidence td", (t) => t.map((x) => x.innerText).join(" "));
    check(/ms|%|GiB/.test(ev), "evidence in units: " + ev.slice(0, 200));
    // a person reads a few figures; the step model and its change are folded under "how this was estimated"
    const shown = await page.$$eval("#findings article", (a) => a.map((f) => [f.dataset.rule,
      f.querySelectorAll("table.evidence:not(.estimate) tr").length, f.querySelector("details.estimate")?.innerText || ""]));
    check(shown.length && shown.every(([, n]) => n >= 1 && n <= 6), "three to six figures each: " + JSON.stringify(shown));
    check(shown.some(([, , est]) => /how this was estimated/.test(est)), "the model folded: " + JSON.stringify(shown));
    const folded = await page.$$eval("#findings details.estimate", (d) => d.map((x) => x.open));
    check(folded.length && folded.every((o) => !o), "folded (closed): " + folded);
    // a GPU's missing metrics (busy8_h200.scn: no fan speed) under the GPU table, not at the top
    const top = await page.$eval("#run-notes", (e) => e.textContent);
    check(!/Not Supported/.test(top) && top.includes("loader starved"), "the top's notes: " + top);
    const gpuNotes = await page.$eval("#gpu-notes", (e) => e.textContent);
    check(/gpu0: fan speed: Not Supported/.test(gpuNotes), "the GPU table's details: " + gpuNotes);
    for (const id of ["util", "mem-util", "activity", "memory", "power", "thermal", "pcie", "cpu", "steps"]) {
      const p = await chartPoints(page, id);
      check(p && p.values > 0, `chart ${id} has data: ${JSON.stringify(p)}`);
    }
    await page.screenshot({ path: join(SHOTS, "run-finished.png"), fullPage: true });
  });

  await step("finished run page: the job's output with a search box", async () => {
    await page.waitForFunction(() => +(document.querySelector("#log") || { dataset: {} }).dataset.lines > 0, { timeout: 15000 });
    const lines = await page.$$eval("#log-lines .log-line", (l) => l.map((x) => [x.dataset.stream, x.innerText]));
    check(lines.length === 7, "six step lines and the stderr line: " + JSON.stringify(lines));
    check(lines.filter(([s]) => s === "out").every(([, t]) => /step \d+ loss/.test(t)), "stdout's lines: " + JSON.stringify(lines));
    check(lines.some(([s, t]) => s === "err" && /NCCL WARN/.test(t)), "stderr's line: " + JSON.stringify(lines));
    await page.type("#log-search", "nccl.*timed");
    await page.waitForFunction(() => document.querySelectorAll("#log-lines .log-line").length === 1, { timeout: 5000 });
    check(/collective timed out/.test(await page.$eval("#log-lines .log-line", (x) => x.innerText)), "the search kept its line");
    await page.$eval("#log-search", (i) => { i.value = ""; i.dispatchEvent(new Event("input")); });
    check((await page.$$("#log-lines .log-line")).length === 7, "an empty search shows every line");
    await page.$eval("#log", (x) => x.scrollIntoView());
    await page.screenshot({ path: join(SHOTS, "run-log.png") });
  });

  await step("zoom by dragging sets every chart's window and fetches it; a double-click resets", async () => {
    const scales = () => page.evaluate(() => [...document.querySelectorAll("[data-chart]")]
      .filter((w) => w.gsPlot).map((w) => [w.gsPlot.scales.x.min, w.gsPlot.scales.x.max, w.gsPlot.data[0].length]));
    const before = await scales();
    const over = await page.$('[data-chart="util"] .u-over');
    await over.scrollIntoView();
    const box = await over.boundingBox();
    const y = box.y + box.height / 2;
    await page.mouse.move(box.x + box.width * 0.3, y);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.5, y, { steps: 5 });
    await page.mouse.move(box.x + box.width * 0.6, y, { steps: 5 });
    await page.mouse.up();
    // the window's data comes from the server: wait for the util chart to hold only the window's
    // points (a state, not a sleep: under ASan on a loaded machine the fetch takes seconds)
    await page.waitForFunction((b0, b1) => {
      const u = document.querySelector('[data-chart="util"]').gsPlot, d = u.data[0];
      const lo = u.scales.x.min, hi = u.scales.x.max;
      return hi - lo < (b1 - b0) * 0.5 && d.length > 0 && d[0] >= lo - 0.5 && d[d.length - 1] <= hi + 0.5;
    }, { timeout: 20000 }, before[0][0], before[0][1]).catch(() => null);
    const after = await scales();
    const [a0, a1] = after[0], [b0, b1] = before[0];
    check(a1 - a0 < (b1 - b0) * 0.5 && a0 > b0, `the util chart zoomed: ${[b0, b1]} -> ${[a0, a1]}`);
    check(after.every(([x0, x1]) => Math.abs(x0 - a0) < 1e-6 && Math.abs(x1 - a1) < 1e-6), "every chart has the same window");
    const inWindow = await page.evaluate((lo, hi) => {
      const d = document.querySelector('[data-chart="util"]').gsPlot.data[0];
      return d.length > 0 && d[0] >= lo - 0.5 && d[d.length - 1] <= hi + 0.5;
    }, a0, a1);
    check(inWindow, "the util chart holds the window's data (fetched for it)");
    await page.screenshot({ path: join(SHOTS, "run-zoomed.png") });
    await over.click({ count: 2 });
    await page.waitForFunction((b0, b1) => {
      const x = document.querySelector('[data-chart="util"]').gsPlot.scales.x;
      return Math.abs(x.min - b0) < 1e-6 && Math.abs(x.max - b1) < 1e-6;
    }, { timeout: 20000 }, before[0][0], before[0][1]).catch(() => null);
    const reset = await scales();
    check(Math.abs(reset[0][0] - b0) < 1e-6 && Math.abs(reset[0][1] - b1) < 1e-6, `double-click resets: ${reset[0]} vs ${before[0]}`);
  });

  await step("compare page: throughput bars with speed-ups, the table, differing params", async () => {
    await open(page, base, "#/compare/slow-loader,fast-loader");
    const bars = await page.$$eval("#bars .bar", (b) => b.map((x) => [x.innerText, x.dataset.speedup]));
    check(bars.length === 2, "two bars");
    check(/baseline/.test(bars[0][0]), "the first is the baseline: " + bars[0][0]);
    check(+bars[1][1] > 1.3 && /×/.test(bars[1][0]), "the fast loader's bar says its speed-up: " + bars[1]);
    const params = await page.$eval("#params-differ", (p) => p.innerText);
    check(/num_workers/.test(params) && /pin_memory/.test(params), "differing params: " + params);
    check((await chartPoints(page, "step.total_s")).values > 0, "the overlaid step times");
    // the job's own loss of both runs on one chart (the metric picker takes loss by default)
    await page.waitForSelector('[data-chart="loss"]', { timeout: 15000 });
    const loss = await page.$eval('[data-chart="loss"]', (w) => w.gsPlot.data.slice(1).map((d) => d.filter((v) => v !== null && v !== undefined).length));
    check(loss.length === 2 && loss.every((n) => n > 0), "both runs' loss overlaid on one chart: " + JSON.stringify(loss));
    await page.click("#align-step");
    await page.waitForFunction(() => document.querySelector('[data-chart="step.total_s"]').gsPlot.series[0].label === "step");
    const byStep = await chartPoints(page, "step.total_s");
    check(byStep.values > 0 && byStep.last >= 50 && byStep.last <= 60, "aligned by step, up to the 60th: " + JSON.stringify(byStep));
    await page.screenshot({ path: join(SHOTS, "compare.png"), fullPage: true });
  });

  await step("an imported MLflow run beside a gpuscope run, overlaid by step through its metric's own steps", async () => {
    importMlflow();
    await open(page, base, "#/compare/slow-loader,mlflow-run");
    // the imported run has no step series: the page starts by step all the same (its loss carries steps)
    check(await page.$("#align-step"), "a step alignment is offered");
    // not judged (nothing measured): no finding "went away", the page says it cannot tell
    const changed = await page.$eval("#findings-changed", (x) => x.innerText);
    check(/mlflow-run: cannot tell/.test(changed) && !/went away:/.test(changed), "findings of an unjudged run: " + changed);
    await page.waitForFunction(() => { const w = document.querySelector('[data-chart="loss"]'); return w && w.dataset.align === "step"; },
      { timeout: 15000 });
    const got = await page.$eval('[data-chart="loss"]', (w) => {
      const d = w.gsPlot.data, x = d[0];
      return d.slice(1).map((ys) => { const k = ys.map((v, i) => (v === null || v === undefined ? -1 : i)).filter((i) => i >= 0); return { n: k.length, last: x[k[k.length - 1]] }; });
    });
    check(got.length === 2 && got.every((g) => g.n >= 50 && g.last >= 55 && g.last <= 60), "both runs' loss by step, to about the 60th: " + JSON.stringify(got));
    await page.screenshot({ path: join(SHOTS, "compare-imported.png"), fullPage: true });
  });

  await step("the self-contained run and compare pages open from file:// with no network", async () => {
    const run = join(SHOTS, "..", "run.html"), cmp = join(SHOTS, "..", "compare.html");
    // report --html and compare --html write the same page as serve --html
    for (const args of [["report", "slow-loader", "--html", run], ["compare", "slow-loader", "fast-loader", "--html", cmp]]) {
      const r = spawnSync(BIN, args, { env, encoding: "utf8" });
      check(r.status === 0, `${args.join(" ")} exited ${r.status}: ${r.stderr}`);
    }
    const fresh = await browser.newPage();
    await fresh.setViewport({ width: 1400, height: 1000 });
    const asked = [];
    fresh.on("request", (q) => asked.push(q.url()));
    fresh.on("pageerror", (e) => errors.push("file page: " + e.message));
    await fresh.goto("file://" + run);
    await fresh.waitForFunction(() => document.body.dataset.ready, { timeout: 15000 });
    for (const id of ["util", "mem-util", "steps", "cpu"]) {
      const p = await chartPoints(fresh, id);
      check(p && p.values > 0, `file page chart ${id} has data: ${JSON.stringify(p)}`);
    }
    check((await fresh.$$("#gpus tbody tr")).length === 8, "the file page's GPU table");
    await fresh.waitForFunction(() => document.querySelectorAll("#log-lines .log-line").length === 7, { timeout: 15000 });
    await fresh.screenshot({ path: join(SHOTS, "file-run.png"), fullPage: true });
    await fresh.goto("file://" + cmp);
    await fresh.waitForFunction(() => document.body.dataset.ready, { timeout: 15000 });
    const bars = await fresh.$$eval("#bars .bar", (b) => b.map((x) => x.dataset.speedup));
    check(bars.length === 2 && +bars[1] > 1.3, "the file compare page's bars: " + bars);
    check((await chartPoints(fresh, "gpu.util_pct")).values > 0, "the file compare page's overlay");
    await fresh.screenshot({ path: join(SHOTS, "file-compare.png"), fullPage: true });
    const net = asked.filter((u) => !u.startsWith("file://") && !u.startsWith("data:"));
    check(!net.length, "requests beyond the file: " + net.join(" "));
    await fresh.close();
  });

  await step("a group (two runs of one job, gpuscope run --group) as one run: served, and written by compare --html", async () => {
    // two runs at once on this machine's one host (one task per GPU): both see the same 8 GPUs
    const nodes = ["pair-a", "pair-b"].map((name) => new Promise((done) => {
      const args = ["run", "--quiet", "--interval", "100ms", "--group", "pair", "--name", name, "--", PY, job, "0.01", "0.02",
        "30"];
      const p = spawn(BIN, args, { env: { ...env, GPUSIM_SCENARIO: join(SRC, "tests/gpusim/scenarios/busy8_h200.scn") },
        stdio: "ignore" });
      children.push(p);
      p.on("exit", done);
    }));
    check((await Promise.all(nodes)).every((c) => c === 0), "the group's runs failed");
    await open(page, base, "#/run/slow-loader");
    const cores = await chartLines(page, "cpu");
    await open(page, base, "#/run/pair");
    check((await page.$$("#gpus tbody tr")).length === 8, "the group's 8 GPUs (each seen by both runs) in the table");
    const rows = await chartLines(page, "cpu");
    check(cores > 0 && rows === cores, `the host's CPU heat map once (${cores} cores of one run): ${rows} rows`);
    for (const id of ["util", "cpu", "steps"]) {
      const p = await chartPoints(page, id);
      check(p && p.values > 0, `the group's chart ${id} has data: ${JSON.stringify(p)}`);
    }
    // the two runs share the host: their job metrics are host=H,run=ID, one chart per run
    const metricCharts = await page.$$eval('[data-chart^="metric-"]', (ws) => ws.length);
    check(metricCharts === 2, `each run's loss charted (two runs on one host): ${metricCharts} job-metric charts`);
    await page.screenshot({ path: join(SHOTS, "run-group.png"), fullPage: true });
    const cmp = join(SHOTS, "..", "compare-group.html");
    const r = spawnSync(BIN, ["compare", "pair", "slow-loader", "--html", cmp], { env, encoding: "utf8" });
    check(r.status === 0, `compare pair slow-loader --html exited ${r.status}: ${r.stderr}`);
    const fresh = await browser.newPage();
    fresh.on("pageerror", (e) => errors.push("group file page: " + e.message));
    await fresh.goto("file://" + cmp);
    await fresh.waitForFunction(() => document.body.dataset.ready, { timeout: 15000 });
    const bars = await fresh.$$eval("#bars .bar", (b) => b.map((x) => x.innerText));
    const text = await fresh.evaluate(() => document.body.innerText);
    check(bars.length === 2 && /pair/.test(text) && /slow-loader/.test(text), "the group beside the run: " + bars);
    await fresh.screenshot({ path: join(SHOTS, "file-compare-group.png"), fullPage: true });
    await fresh.close();
  });

  await step("no script errors on any page", async () => check(!errors.length, errors.join("; ")));
  live.kill("SIGTERM");
} catch (e) {
  failed++;
  console.log("FAIL setup: " + e.message);
} finally {
  if (browser) await browser.close().catch(() => {});
  for (const c of children) if (c.exitCode === null) c.kill("SIGTERM");
  await sleep(300);
  if (!process.env.GS_KEEP) rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
