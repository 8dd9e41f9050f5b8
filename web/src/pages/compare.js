// The compare page: throughput bars with each run's speed-up against the first, the figures side by
// side, the params that differ, the findings that appeared or went away, and overlaid charts aligned
// by time since start or by step.
import { align, defaultAlignment, hasOwnSteps, samplesPerStep } from "../align.js";
import { api, EMB } from "../api.js";
import { $app, COLORS, crumbs, el } from "../dom.js";
import { bytes, DASH, fin, isVerdict, pct, pctv, secs, speed, sps } from "../fmt.js";
import { isOrigin } from "../origin.js";

export async function pageCompare(list) {
  const c = await api("compare?runs=" + list.split(",").map(encodeURIComponent).join(","));
  if (EMB) crumbs("compare");
  else crumbs(el("a", { href: "#/" }, "runs"), "compare");
  const runs = c.runs;
  const tp = runs.map((r) => (fin(r.samples_per_s) ? r.samples_per_s : fin(r.median_step_s) && r.median_step_s > 0 ? 1 / r.median_step_s : null));
  const unit = runs.every((r) => fin(r.samples_per_s)) ? "samples/s" : "steps/s";
  const max = Math.max(...tp.filter(fin), 1e-12);
  const bars = el("section", { class: "bars", id: "bars" }, el("h2", {}, "Throughput (", unit, "), speed-up against the first run"),
    runs.map((r, i) => el("div", { class: "bar-row" },
      el("div", { class: "bar-label" }, el("a", { href: "#/run/" + encodeURIComponent(r.id) }, r.name || r.id)),
      el("div", { class: "bar-track" },
        el("div", { class: "bar", style: `width:${fin(tp[i]) ? Math.max(1, (tp[i] / max) * 100) : 0}%`, "data-speedup": fin(r.speedup) ? r.speedup : "" },
          el("span", { class: "bar-text" }, (fin(tp[i]) ? (tp[i] >= 100 ? tp[i].toFixed(0) : tp[i].toFixed(1)) : DASH) + " · " +
            (i === 0 ? "baseline" : speed(r.speedup))))))));
  const rows = [
    ["status", (r) => r.status], ["duration", (r) => secs(r.duration_s)], ["throughput", (r) => sps(r.samples_per_s)],
    ["speed-up", (r, i) => (i ? speed(r.speedup) : "baseline")], ["median step", (r) => secs(r.median_step_s)],
    ["data wait", (r) => pct(r.data_share)], ["h2d", (r) => pct(r.h2d_share)], ["compute", (r) => pct(r.compute_share)],
    ["GPUs", (r) => String(r.gpus)], ["GPU util", (r) => pctv(r.gpu_util)], ["SM active", (r) => pctv(r.sm_active)],
    ["GPU memory peak", (r) => bytes(r.gpu_mem_peak_bytes)], ["host CPU", (r) => pctv(r.host_cpu_pct)],
    ["top finding", (r) => (r.top_finding ? r.top_finding.title : DASH)],
  ];
  const table = el("table", { class: "compare", id: "compare-table" },
    el("thead", {}, el("tr", {}, el("th", {}, ""), runs.map((r) => el("th", {}, r.name || r.id)))),
    el("tbody", {}, rows.map(([label, f]) => el("tr", {}, el("th", {}, label), runs.map((r, i) => el("td", {}, f(r, i)))))));
  const differ = c.params_differ.filter((p) => !isOrigin(p.key)); // where they came from has its own table
  const params = el("section", { id: "params-differ" }, el("h2", {}, "Params that differ"),
    differ.length ? el("table", { class: "compare" },
      el("thead", {}, el("tr", {}, el("th", {}, "param"), runs.map((r) => el("th", {}, r.name || r.id)))),
      el("tbody", {}, differ.map((p) => el("tr", {}, el("th", {}, p.key), p.values.map((v) => el("td", {}, v === null ? DASH : v))))))
      : el("p", { class: "muted" }, "none"));
  const origin = (c.origin_differ || []).length ? el("section", { id: "origin-differ" }, el("h2", {}, "Where they came from (what differs)"),
    el("table", { class: "compare" },
      el("thead", {}, el("tr", {}, el("th", {}, ""), runs.map((r) => el("th", {}, r.name || r.id)))),
      el("tbody", {}, c.origin_differ.map((p) => el("tr", {}, el("th", {}, p.label), p.values.map((v) => el("td", {}, v === null ? DASH : v))))))) : null;
  const changes = el("section", { id: "findings-changed" }, el("h2", {}, "Findings that appeared or went away (against the first run)"));
  const ul = el("ul");
  // a run not judged (an imported one, one with nothing measured) lost no finding, nor gained one
  const unjudged = runs.map((r, i) => c.findings.some((f) => f.rule === "insufficient_data" && f.in[i]));
  runs.forEach((r, i) => {
    if (i && (unjudged[i] || unjudged[0]))
      ul.append(el("li", { class: "muted", "data-unjudged": r.name || r.id }, r.name || r.id, ": cannot tell (",
        unjudged[i] ? "this run" : "the first run", " was not judged: not enough measured)"));
  });
  for (const f of c.findings) {
    if (isVerdict(f.rule)) continue; // a verdict on the run (healthy, not enough measured), not a finding
    runs.forEach((r, i) => {
      if (!i || f.in[0] === f.in[i] || unjudged[i] || unjudged[0]) return;
      ul.append(el("li", { class: f.in[i] ? "appeared" : "gone" }, r.name || r.id, ": ", f.in[i] ? "appeared: " : "went away: ", f.title,
        f.in[i] ? " (" + secs(f.lost_s[i]) + " lost)" : ""));
    });
  }
  changes.append(ul.children.length ? ul : el("p", { class: "muted" }, "no change"));
  const overlay = el("section", { class: "charts", id: "overlay" }, el("h2", {}, "Overlaid"));
  $app().replaceChildren(el("h1", {}, "Compare ", String(runs.length), " runs"), bars, table, ...(origin ? [origin] : []),
    params, changes, overlay);
  // overlaid charts: the first GPU's util, the step time and the job's own metrics (loss, accuracy...)
  // of each run, by time since start, by step, or by samples seen (align.js)
  const width = Math.max(480, Math.min(1400, $app().clientWidth - 20));
  // labels null: of the series of that name, the one of the lowest-numbered GPU that has data (a
  // MIG GPU 0 has no util: the run's GPU 1 then stands for it)
  const gpuNo = (s) => { const m = /^gpu=(\d+)$/.exec(s.labels); return m ? +m[1] : Infinity; };
  const get = (r, name, labels) => api(`runs/${encodeURIComponent(r.id)}/series?name=${encodeURIComponent(name)}` +
    (labels === null ? "" : `&labels=${encodeURIComponent(labels)}`) + `&points=${Math.round(width)}&band=0`)
    .then((g) => g.series.filter((s) => s.t.length).sort((a, b) => gpuNo(a) - gpuNo(b))[0] || null).catch(() => null);
  const stepsOf = await Promise.all(runs.map((r) => get(r, "step.n", "")));
  const perStepOf = (await Promise.all(runs.map((r) => get(r, "step.samples", "")))).map(samplesPerStep);
  // the job metrics any run logged (the client's own series of the main loop)
  const pages = await Promise.all(runs.map((r) => (EMB ? Promise.resolve(null) : api("runs/" + encodeURIComponent(r.id)).catch(() => null))));
  const metricNames = [...new Set(pages.flatMap((p) => (p ? p.series : []).filter((s) => s.source === "client" &&
    s.labels === "" && !s.name.startsWith("step.") && s.count > 0).map((s) => s.name)))].sort();
  const lines = [];
  for (const [name, labels, title, fmt] of [["gpu.util_pct", null, "GPU utilisation (each run's first GPU that reports it)", pctv],
    ["step.total_s", "", "Step time", secs]])
    lines.push({ name, title, fmt, got: await Promise.all(runs.map((r) => get(r, name, labels))) });
  const metricFmt = (v) => (fin(v) ? v.toPrecision(4) : DASH);
  const picked = new Set(metricNames.filter((n) => /loss/.test(n)).slice(0, 2));
  if (!picked.size && metricNames.length) picked.add(metricNames[0]);
  const metricLines = new Map();
  const metricLine = async (name) => {
    if (!metricLines.has(name))
      metricLines.set(name, { name, title: "Job metric: " + name, fmt: metricFmt, got: await Promise.all(runs.map((r) => get(r, name, ""))) });
    return metricLines.get(name);
  };
  // a run without a step series (an imported one) still aligns by step through its metrics' own steps
  const first = await Promise.all([...picked].map(metricLine));
  const ownStepsOf = runs.map((r, i) => first.some((l) => hasOwnSteps(l.got[i])));
  const can = { step: stepsOf.some(Boolean) || ownStepsOf.some(Boolean), samples: perStepOf.some(fin) };
  let mode = defaultAlignment(c.params_differ, stepsOf, perStepOf, ownStepsOf);
  const modes = el("div", { class: "toolbar", id: "align" }, "align by ",
    el("button", { type: "button", id: "align-time" }, "time since start"),
    can.step ? el("button", { type: "button", id: "align-step" }, "step") : null,
    can.samples ? el("button", { type: "button", id: "align-samples" }, "samples seen") : null);
  const pick = el("div", { class: "toolbar", id: "metric-pick" }, metricNames.length ? "job metrics: " : null,
    metricNames.map((n) => el("label", {}, el("input", { type: "checkbox", "data-metric": n, checked: picked.has(n) }), " ", n, " ")));
  overlay.append(modes, pick);
  const box = el("div");
  overlay.append(box);
  const xLabel = { time: "since start", step: "step", samples: "samples seen" };
  const xFmt = { time: secs, step: (v) => (fin(v) ? "step " + Math.round(v) : DASH), samples: (v) => (fin(v) ? Math.round(v) + " samples" : DASH) };
  async function draw() {
    const all = [...lines, ...(await Promise.all([...picked].sort().map(metricLine)))];
    box.replaceChildren();
    modes.querySelectorAll("button").forEach((b) => b.classList.toggle("on", b.id === "align-" + mode));
    for (const l of all) {
      const tables = l.got.map((s, i) => align(s, mode, stepsOf[i], perStepOf[i]));
      const present = tables.map((t, i) => [t, i]).filter(([t]) => t);
      if (!present.length) continue;
      const data = present.length === 1 ? present[0][0] : uPlot.join(present.map(([t]) => t));
      const xf = xFmt[mode];
      const wrap = el("div", { class: "chart", "data-chart": l.name, "data-align": mode }, el("h3", {}, l.title));
      box.append(wrap);
      wrap.gsPlot = new uPlot({
        width, height: 200, scales: { x: { time: false } },
        series: [{ label: xLabel[mode], value: (u, v) => xf(v) },
          ...present.map(([, i]) => ({ label: runs[i].name || runs[i].id, stroke: COLORS[i % COLORS.length], width: 1.5, value: (u, v) => l.fmt(v), points: { show: false } }))],
        axes: [{ values: (u, t) => t.map(xf) }, { values: (u, t) => t.map((v) => l.fmt(v)), size: 70 }],
        cursor: { sync: { key: "compare" } },
      }, data, wrap);
    }
    document.body.dataset.overlayDrawn = mode + ":" + [...picked].sort().join(",");
  }
  modes.addEventListener("click", (e) => {
    const m = /^align-(time|step|samples)$/.exec(e.target.id || "");
    if (m) { mode = m[1]; draw(); }
  });
  pick.addEventListener("change", (e) => {
    const n = e.target.dataset && e.target.dataset.metric;
    if (!n) return;
    if (e.target.checked) picked.add(n); else picked.delete(n);
    draw();
  });
  await draw();
}
