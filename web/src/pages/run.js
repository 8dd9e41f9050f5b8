// A run's page: its verdict and figures, its GPUs, where it came from, params and notes, the timeline of charts (zoom
// by dragging, every chart on one time axis), its findings; while it runs, the live stream extends
// the charts and the server's re-diagnosis replaces the findings.
import { api, EMB } from "../api.js";
import { chartData, chartPlan, fetchLines, makeChart, samplesRate, spansOf } from "../charts.js";
import { $app, $live, cleanup, copyButton, crumbs, el, rerender, statusBadge, tagChips } from "../dom.js";
import { bytes, DASH, evidence, fin, gpuNote, isVerdict, num, pct, pctv, secs, speed, sps, when } from "../fmt.js";
import { isOrigin, originRows } from "../origin.js";
import { logFeed, logFinish, logMatcher } from "../log.js";

// The job's output (gpuscope log): its lines with a search box; a live run's grow every 2 s. At most
// LOG_SHOWN lines are in the page (the last ones); `gpuscope log` has them all.
const LOG_SHOWN = 5000;
function logPanel(id, running) {
  const state = {}, list = el("div", { class: "log-lines", id: "log-lines" });
  const note = el("p", { class: "muted", id: "log-note" });
  const search = el("input", { type: "search", id: "log-search", placeholder: "search the output (regular expression)" });
  const box = el("section", { class: "log", id: "log" }, el("h2", {}, "Output"), search, note, list);
  let next = 0, match = logMatcher(""), timer = null, stopped = false;
  const row = (l) => el("div", { class: "log-line st-" + l.stream, "data-stream": l.stream },
    el("span", { class: "log-t" }, secs(l.t_s)), " ", l.text);
  const draw = () => {
    const shown = state.lines ? state.lines.filter(match).slice(-LOG_SHOWN) : [];
    list.replaceChildren(...shown.map(row));
    box.dataset.lines = String(shown.length);
  };
  search.addEventListener("input", () => { match = logMatcher(search.value.trim()); draw(); });
  const say = (a) => {
    const cut = fin(a.bytes) && fin(a.kept_bytes) && a.bytes > a.kept_bytes
      ? `the first ${bytes(a.bytes - a.kept_bytes)} were cut (--log-max); ` : "";
    note.textContent = a.capture === false ? "This run's output was not kept (an attached process, or --log-max 0)."
      : a.capture === null ? "No output kept for this run."
        : cut + (a.streams === "tty,tty" ? "stdout and stderr were one terminal (tty)" : "streams: " + (a.streams || DASH));
  };
  async function more() {
    let a;
    try { a = await api(`runs/${encodeURIComponent(id)}/log?from=${next}`); } catch (e) {
      note.textContent = "The output could not be read: " + e.message;
      return;
    }
    if (stopped) return;
    say(a);
    logFeed(state, a.chunks);
    next = a.next;
    if (a.more) return more();
    if (a.status !== "running") logFinish(state);
    draw();
    if (a.status === "running" && running && !EMB) timer = setTimeout(more, 2000);
  }
  cleanup.push(() => { stopped = true; clearTimeout(timer); });
  more();
  return box;
}

function verdictCard(run) {
  const f = run.run.top_finding, gpus = run.gpus || [];
  const util = gpus.length ? gpus.reduce((a, g) => a + (fin(g.util) ? g.util : 0), 0) / gpus.filter((g) => fin(g.util)).length : null;
  return el("section", { class: "verdict sev-" + (f ? f.severity : "info"), id: "verdict" },
    el("div", { class: "verdict-main" },
      el("div", { class: "verdict-title" }, f ? f.title : run.findings_error ? "The diagnosis could not run" : "No findings yet"),
      f && !isVerdict(f.rule) ? el("div", { class: "verdict-cost" },
        "costs ", secs(f.lost_s), " (", pct(f.share), " of the run) · estimated speed-up if fixed ",
        el("b", {}, speed(f.speedup))) : null),
    el("div", { class: "figures" },
      figure("GPU util", pctv(fin(util) ? util : run.run.gpu_util)),
      figure("data wait", pct(run.steps.data_share)),
      figure("throughput", sps(run.steps.samples_per_s)),
      figure("median step", secs(run.steps.median_step_s)),
      figure("duration", secs(run.run.duration_s))));
}
function figure(label, value) { return el("div", { class: "figure" }, el("div", { class: "fig-v" }, value), el("div", { class: "fig-l" }, label)); }

// The GPU table, then — folded — the metrics the GPUs do not have (the NVML collector's notes).
function gpuTable(gpus, notes) {
  if (!gpus.length) return el("p", { class: "muted" }, "No GPU was sampled in this run.");
  const missing = notes.length ? el("details", { class: "params", id: "gpu-notes" },
    el("summary", {}, `metrics these GPUs do not report (${notes.length})`),
    el("ul", {}, notes.map((n) => el("li", {}, n)))) : "";
  return el("div", {}, gpuRows(gpus), missing);
}
function gpuRows(gpus) {
  return el("table", { class: "gpus", id: "gpus" },
    el("thead", {}, el("tr", {}, ["GPU", "name", "util mean", "util min", "SM active", "tensor active", "memory peak / total",
      "power (limit)", "temp max", "throttled"].map((h) => el("th", {}, h)))),
    el("tbody", {}, gpus.map((g) => el("tr", {},
      el("td", {}, String(g.index)), el("td", {}, g.name || DASH),
      el("td", { class: "num" }, pctv(g.util)), el("td", { class: "num" }, pctv(g.util_min)),
      el("td", { class: "num" }, pctv(g.sm_active)), el("td", { class: "num" }, pctv(g.tensor_active)),
      el("td", { class: "num" }, bytes(g.mem_peak_bytes) + " / " + bytes(g.mem_total_bytes)),
      el("td", { class: "num" }, num(g.power_w, 0, "W") + " (" + num(g.power_limit_w, 0, "W") + ")"),
      el("td", { class: "num" }, num(g.temp_max_c, 0, "°C")), el("td", { class: "num" }, pct(g.throttled_share, 1))))));
}

// A finding's evidence: the figures a person reads, then — folded under "how this was estimated" —
// the members the API names as the estimate's (evidence_estimate: the step model, its change, the
// model's sentence and intermediate figures; the doctor's one table, doctor_evidence_shown).
function evidenceTables(f, ev) {
  const model = new Set(f.evidence_estimate || []), units = f.evidence_units || {};
  const rows = (pairs) => pairs.map(([k, v]) =>
    el("tr", {}, el("th", {}, k.replace(/_/g, " ")), el("td", {}, evidence(v, units[k]))));
  const all = Object.entries(ev), shown = all.filter(([k]) => !model.has(k)), inner = all.filter(([k]) => model.has(k));
  return el("div", {}, el("table", { class: "evidence" }, rows(shown)),
    inner.length ? el("details", { class: "estimate" }, el("summary", {}, "how this was estimated"),
      el("table", { class: "evidence estimate" }, rows(inner))) : "");
}

export function findingsList(findings, live, window_s, error) {
  const over = fin(window_s) ? "the last " + secs(window_s) : "the run so far";
  const box = el("section", { id: "findings", class: "findings" },
    el("h2", {}, "Findings", live ? el("span", { class: "badge live-badge", id: "live-findings" },
      "live · " + over + ", recomputed every 5 s") : null));
  if (error) box.append(el("p", { class: "error", id: "findings-error" }, "The diagnosis could not run: " + error));
  else if (!findings || !findings.length) box.append(el("p", { class: "muted" }, "none"));
  for (const f of findings || []) {
    const ev = f.evidence && typeof f.evidence === "object" ? f.evidence : null;
    box.append(el("article", { class: "finding sev-" + f.severity, "data-rule": f.rule },
      el("h3", {}, el("span", { class: "sev-dot" }), f.title),
      el("div", { class: "finding-meta" }, f.rule, " · ", f.severity, " · lost ", secs(f.lost_s), " (", pct(f.share, 1),
        ") · speed-up ", speed(f.speedup)),
      ev ? evidenceTables(f, ev) : el("p", {}, String(f.evidence || "")),
      f.fix ? el("div", { class: "fix" }, copyButton(f.fix), el("pre", {}, f.fix)) : null));
  }
  return box;
}

// Where the run came from (git, Python and torch, the driver, the container, the scheduler), and the
// uncommitted diff folded when --save-diff kept it; null when the run has none of it.
function originBox(params) {
  const rows = originRows(params), diff = params["git.diff"];
  if (!rows.length && !diff) return null;
  return el("details", { class: "params origin", id: "origin", open: true }, el("summary", {}, "where it came from"),
    el("table", {}, rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))),
    diff ? el("details", { class: "diff" }, el("summary", {}, "the uncommitted diff"), el("pre", {}, diff)) : null);
}

export async function pageRun(ref) {
  const hash = location.hash, started = performance.now();
  const run = await api("runs/" + encodeURIComponent(ref));
  const R = run.run, id = R.id;
  crumbs(EMB ? "run" : el("a", { href: "#/" }, "runs"), R.name || id);
  const running = R.status === "running";
  // the top of the page is for what the user must act on: a GPU's missing metrics go under its table
  const gpuNotes = run.notes.filter((n) => gpuNote(n) !== null), notes = run.notes.filter((n) => gpuNote(n) === null);
  const head = el("section", { class: "run-head" },
    el("h1", {}, R.name || id, " ", statusBadge(R.status)),
    el("div", { class: "muted" }, id, " · ", R.host, " · ", when(R.start), " · ", R.command),
    R.tags ? el("div", { id: "run-tags" }, tagChips(R.tags)) : null,
    notes.length ? el("ul", { class: "notes", id: "run-notes" }, notes.map((n) => el("li", {}, n))) : null);
  const params = Object.entries(run.params).filter(([k]) => !/^gpu\.\d+\./.test(k) && !isOrigin(k));
  const paramBox = el("details", { class: "params" }, el("summary", {}, `params (${params.length}) and notes (${notes.length})`),
    el("table", {}, params.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))),
    el("ul", {}, notes.map((n) => el("li", {}, n))));
  const charts = el("section", { class: "charts", id: "charts" });
  const hint = el("p", { class: "muted hint" }, "drag across a chart to zoom, double-click to reset");
  let findingsBox = findingsList(run.findings, false, null, run.findings_error);
  $app().replaceChildren(head, verdictCard(run), el("h2", {}, "GPUs"), gpuTable(run.gpus, gpuNotes), originBox(run.params) || "", paramBox,
    el("h2", {}, "Timeline"), hint, charts, findingsBox, R.id === R.group ? null : logPanel(id, running));

  const plan = chartPlan(run);
  const width = Math.max(480, Math.min(1400, $app().clientWidth - 20));
  const ctx = {
    width, syncKey: "run-" + id, spans: spansOf(run),
    marks: run.events.filter((e) => e.kind === "mark" || e.kind === "log" || e.kind === "xid"), charts: [],
    zooming: false, window: null,
    onZoom: null,
  };
  const ids = [...new Set(plan.flatMap((c) => [...c.lines.map((l) => l.s.id),
    ...(c.stepRate ? [c.stepRate.samples, c.stepRate.total].filter(Boolean).map((s) => s.id) : [])]))];
  const points = Math.min(2000, Math.round(width));
  const got = ids.length ? await fetchLines(id, ids, null, null, points) : new Map();
  // the last time loaded of each series: the live stream continues from there
  const lastT = new Map();
  for (const [sid, s] of got) if (s.t.length) lastT.set(sid, s.t[s.t.length - 1]);

  const build = () => plan.map((c) => chartData(c, got, c.stepRate ? samplesRate(got, c.stepRate) : null));
  // Zoom: a drag on any chart sets every chart's time window, and the server is asked for that
  // window at full resolution; a double-click goes back to the whole run.
  ctx.onZoom = async (min, max) => {
    ctx.window = [min, max];
    const sub = await fetchLines(id, ids, min, max, points).catch(() => null);
    if (!sub || !ctx.window || ctx.window[0] !== min || ctx.window[1] !== max) return;
    ctx.charts.forEach((o, i) => {
      const c = plan[i];
      o.u.setData(chartData(c, sub, c.stepRate ? samplesRate(sub, c.stepRate) : null), false);
      o.u.setScale("x", { min, max });
    });
  };
  // one time axis: every chart spans the run's first to last sample, whatever its own series hold
  const fitAll = () => {
    if (ctx.window) return;
    const xs = ctx.charts.map((o) => o.u.data[0]).filter((x) => x && x.length);
    if (!xs.length) return;
    const min = Math.min(...xs.map((x) => x[0])), max = Math.max(...xs.map((x) => x[x.length - 1]));
    if (max > min) for (const o of ctx.charts) o.u.setScale("x", { min, max });
  };
  const datas = build();
  plan.forEach((c, i) => {
    const { wrap, u } = makeChart(c, datas[i], ctx);
    charts.append(wrap);
    ctx.charts.push({ u, wrap });
  });
  // double-click: back to the whole run (uPlot resets its own scale; the data is the whole run's)
  fitAll();
  charts.addEventListener("dblclick", () => {
    ctx.window = null;
    const d = build();
    ctx.charts.forEach((o, i) => { o.u.setData(d[i]); });
    fitAll();
  });
  if (!plan.length) charts.append(el("p", { class: "muted" }, "This run has no samples to draw."));

  // a group (the runs of one job's nodes, read as one: its id is its group's name) has no stream:
  // while it runs, the page is drawn again every 10 s
  if (running && !EMB && R.id === R.group) {
    $live().replaceChildren(el("span", { class: "badge live-badge" }, "● live (every 10 s)"));
    const again = setTimeout(() => { if (location.hash === hash) rerender(); }, 10000);
    cleanup.push(() => { clearTimeout(again); $live().replaceChildren(); });
  }
  if (!running || EMB || R.id === R.group) return;
  // ---- live: new samples extend the charts; the findings are recomputed by the server ----
  $live().replaceChildren(el("span", { class: "badge live-badge" }, "● live"));
  const since = lastT.size ? Math.min(...lastT.values()) : 0;
  const es = new EventSource(`/api/runs/${encodeURIComponent(id)}/live?since=${since}`);
  cleanup.push(() => { es.close(); $live().replaceChildren(); });
  let pending = false, rebuilt = false;
  es.addEventListener("samples", (ev) => {
    const msg = JSON.parse(ev.data);
    for (const s of msg.series) {
      const have = got.get(s.id);
      if (!have) {
        // a series the page has not drawn yet (a GPU's first samples, a new process): draw the page
        // again, at most every 5 s
        if (!rebuilt && !ctx.window) {
          rebuilt = true;
          setTimeout(() => { if (location.hash === hash) rerender(); }, 5000 - Math.min(4000, performance.now() - started));
        }
        continue;
      }
      const last = lastT.get(s.id) ?? -Infinity;
      for (let i = 0; i < s.t.length; i++) {
        if (s.t[i] <= last) continue;
        have.t.push(s.t[i]), have.mean.push(s.v[i]);
        if (have.min) have.min.push(s.v[i]), have.max.push(s.v[i]);
      }
      if (s.t.length) lastT.set(s.id, Math.max(last, s.t[s.t.length - 1]));
    }
    if (pending || ctx.window) return; // a zoomed chart stays where it is
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      const d = build();
      ctx.charts.forEach((o, i) => o.u.setData(d[i]));
      fitAll();
      document.body.dataset.liveUpdates = String(+(document.body.dataset.liveUpdates || 0) + 1);
    });
  });
  es.addEventListener("findings", (ev) => {
    const msg = JSON.parse(ev.data);
    const nb = findingsList(msg.findings, msg.live, msg.window_s);
    findingsBox.replaceWith(nb);
    findingsBox = nb;
  });
  es.addEventListener("status", () => { es.close(); setTimeout(rerender, 300); });
}
