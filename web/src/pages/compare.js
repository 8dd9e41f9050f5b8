// The compare page: throughput bars with each run's speed-up against the first, the figures side by
// side, the params that differ, the findings that appeared or went away, and overlaid charts aligned
// by time since start or by step.
import { api, EMB } from "../api.js";
import { $app, COLORS, crumbs, el } from "../dom.js";
import { bytes, DASH, fin, pct, pctv, secs, speed, sps } from "../fmt.js";

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
  const params = el("section", { id: "params-differ" }, el("h2", {}, "Params that differ"),
    c.params_differ.length ? el("table", { class: "compare" },
      el("thead", {}, el("tr", {}, el("th", {}, "param"), runs.map((r) => el("th", {}, r.name || r.id)))),
      el("tbody", {}, c.params_differ.map((p) => el("tr", {}, el("th", {}, p.key), p.values.map((v) => el("td", {}, v === null ? DASH : v))))))
      : el("p", { class: "muted" }, "none"));
  const changes = el("section", { id: "findings-changed" }, el("h2", {}, "Findings that appeared or went away (against the first run)"));
  const ul = el("ul");
  for (const f of c.findings) {
    if (f.rule === "healthy") continue; // the absence of findings, not one
    runs.forEach((r, i) => {
      if (!i || f.in[0] === f.in[i]) return;
      ul.append(el("li", { class: f.in[i] ? "appeared" : "gone" }, r.name || r.id, ": ", f.in[i] ? "appeared: " : "went away: ", f.title,
        f.in[i] ? " (" + secs(f.lost_s[i]) + " lost)" : ""));
    });
  }
  changes.append(ul.children.length ? ul : el("p", { class: "muted" }, "no change"));
  const overlay = el("section", { class: "charts", id: "overlay" }, el("h2", {}, "Overlaid"));
  $app().replaceChildren(el("h1", {}, "Compare ", String(runs.length), " runs"), bars, table, params, changes, overlay);
  // overlaid charts: GPU 0's util and the step time of each run, by time since start or by step
  // (a run's step numbers, step.n, map its times to steps)
  const width = Math.max(480, Math.min(1400, $app().clientWidth - 20));
  const get = (r, name, labels) => api(`runs/${encodeURIComponent(r.id)}/series?name=${name}&labels=${labels}&points=${Math.round(width)}&band=0`)
    .then((g) => (g.series[0] && g.series[0].t.length ? g.series[0] : null)).catch(() => null);
  const stepsOf = await Promise.all(runs.map((r) => get(r, "step.n", "")));
  const lines = [];
  for (const [name, labels, title, fmt] of [["gpu.util_pct", "gpu=0", "GPU 0 utilisation", pctv], ["step.total_s", "", "Step time", secs]])
    lines.push({ name, title, fmt, got: await Promise.all(runs.map((r) => get(r, name, labels))) });
  const stepAt = (steps, t) => { // linear between the step series' points; null outside
    if (!steps) return null;
    const T = steps.t, N = steps.mean;
    if (t < T[0] || t > T[T.length - 1]) return null;
    let lo = 0, hi = T.length - 1;
    while (hi - lo > 1) { const m = (lo + hi) >> 1; if (T[m] <= t) lo = m; else hi = m; }
    if (!fin(N[lo]) || !fin(N[hi])) return null;
    return T[hi] === T[lo] ? N[lo] : N[lo] + ((N[hi] - N[lo]) * (t - T[lo])) / (T[hi] - T[lo]);
  };
  const byStep = stepsOf.some(Boolean);
  const modes = el("div", { class: "toolbar", id: "align" }, "align by ",
    el("button", { type: "button", id: "align-time", class: "on" }, "time since start"),
    byStep ? el("button", { type: "button", id: "align-step" }, "step") : null);
  overlay.append(modes);
  const box = el("div");
  overlay.append(box);
  function draw(mode) {
    box.replaceChildren();
    modes.querySelectorAll("button").forEach((b) => b.classList.toggle("on", b.id === "align-" + mode));
    for (const l of lines) {
      const tables = l.got.map((s, i) => {
        if (!s) return null;
        if (mode === "time") return [s.t, s.mean];
        const x = [], y = [];
        s.t.forEach((t, k) => { const n = stepAt(stepsOf[i], t); if (n !== null && (!x.length || n > x[x.length - 1])) x.push(n), y.push(s.mean[k]); });
        return x.length ? [x, y] : null;
      });
      const present = tables.map((t, i) => [t, i]).filter(([t]) => t);
      if (!present.length) continue;
      const data = present.length === 1 ? present[0][0] : uPlot.join(present.map(([t]) => t));
      const xf = mode === "time" ? secs : (v) => (fin(v) ? "step " + Math.round(v) : DASH);
      const wrap = el("div", { class: "chart", "data-chart": l.name }, el("h3", {}, l.title));
      box.append(wrap);
      wrap.gsPlot = new uPlot({
        width, height: 200, scales: { x: { time: false } },
        series: [{ label: mode === "time" ? "since start" : "step", value: (u, v) => xf(v) },
          ...present.map(([, i]) => ({ label: runs[i].name || runs[i].id, stroke: COLORS[i % COLORS.length], width: 1.5, value: (u, v) => l.fmt(v), points: { show: false } }))],
        axes: [{ values: (u, t) => t.map(xf) }, { values: (u, t) => t.map((v) => l.fmt(v)), size: 70 }],
        cursor: { sync: { key: "compare" } },
      }, data, wrap);
    }
  }
  modes.addEventListener("click", (e) => { if (e.target.id === "align-time") draw("time"); else if (e.target.id === "align-step") draw("step"); });
  draw("time");
}
