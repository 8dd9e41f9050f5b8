// The run page's charts (uPlot, a global from its own script): which series each chart draws
// (chartPlan, pure), fetching them for a time window, uPlot's aligned tables, and the drawing —
// lines with min–max bands, the CPU heat map, throttle spans under the lines, the job's marks over
// them. Absent samples are gaps, never zero.
import { api } from "./api.js";
import { COLORS, el } from "./dom.js";
import { bytes, DASH, fin, num, pctv, rate, secs, sps } from "./fmt.js";

// One chart per group of series on the run page: which series, how to draw them.
export function chartPlan(run) {
  const S = run.series.filter((s) => s.count > 0);
  const by = (name, src) => S.filter((s) => s.name === name && (!src || s.source === src));
  const gpuLab = (s) => s.labels.replace("gpu=", "GPU ");
  const plan = [];
  const gpuSeries = (names, label) => names.flatMap((n) => by(n).map((s) => ({ s, label: label(s, n) })));
  const add = (id, title, unit, fmt, lines, opts = {}) => { if (lines.length) plan.push({ id, title, unit, fmt, lines, ...opts }); };
  add("util", "GPU utilisation (band: min–max in each point)", "%", (v) => pctv(v),
    by("gpu.util_pct").map((s) => ({ s, label: gpuLab(s), band: true })), { range: [0, 100] });
  add("activity", "SM / tensor / DRAM activity", "%", (v) => pctv(v),
    gpuSeries(["gpu.sm_active_pct", "gpu.tensor_active_pct", "gpu.dram_active_pct"],
      (s, n) => gpuLab(s) + " " + n.replace("gpu.", "").replace("_active_pct", "")), { range: [0, 100] });
  // memory-controller utilisation (NVML's "memory util": the share of time device memory was read
  // or written): the one sign of a memory-bound step a GPU without GPM (no SM / DRAM activity) gives
  add("mem-util", "Memory-controller utilisation", "%", (v) => pctv(v),
    by("gpu.mem_util_pct").map((s) => ({ s, label: gpuLab(s) })), { range: [0, 100] });
  add("memory", "GPU memory used", "B", bytes, by("gpu.mem_used_bytes").map((s) => ({ s, label: gpuLab(s) })), { zero: true });
  add("power", "Power", "W", (v) => num(v, 0, "W"),
    gpuSeries(["gpu.power_w", "gpu.power_limit_w"], (s, n) => gpuLab(s) + (n.endsWith("limit_w") ? " limit" : "")),
    { zero: true, dashed: (l) => l.s.name === "gpu.power_limit_w" });
  add("thermal", "Temperature and SM clock (shaded: clocks cut)", "°C", (v) => num(v, 0, "°C"),
    [...by("gpu.temp_c").map((s) => ({ s, label: gpuLab(s) + " °C" })),
      ...by("gpu.sm_clock_mhz").map((s) => ({ s, label: gpuLab(s) + " MHz", axis: 1 }))],
    { throttle: true, axis2: { unit: "MHz", fmt: (v) => num(v, 0, "MHz") } });
  add("pcie", "PCIe", "B/s", rate,
    gpuSeries(["gpu.pcie_rx_bytes_s", "gpu.pcie_tx_bytes_s"], (s, n) => gpuLab(s) + (n.includes("rx") ? " rx" : " tx")),
    { zero: true });
  // a group's series carry host=HOST (every node's): its cores are listed by host, then number
  const hostOf = (s) => (/(?:^|,)host=([^,]*)/.exec(s.labels) || [null, ""])[1];
  const runOf = (s) => (/(?:^|,)run=([^,]*)/.exec(s.labels) || [null, ""])[1]; // runs sharing a host in a group
  const cores = by("host.cpu.busy_pct").filter((s) => /^cpu=\d+(,host=[^,]*)?$/.test(s.labels))
    .sort((a, b) => hostOf(a).localeCompare(hostOf(b)) || parseInt(a.labels.slice(4)) - parseInt(b.labels.slice(4)));
  if (cores.length) plan.push({ id: "cpu", title: "Host CPU per core (darker: busier)", unit: "%", fmt: (v) => pctv(v),
    lines: cores.map((s) => ({ s, label: s.labels.replace("cpu=", "cpu ").replace(",host=", " of ") })), heat: true,
    range: [0, 100] });
  const names = {};
  for (const e of run.events) if ((e.kind === "proc_start" || e.kind === "proc_exec") && e.labels) names[e.labels] = e.name;
  const procs = by("proc.cpu_pct").slice(0, 12);
  add("procs", "The job's processes: CPU", "%", (v) => pctv(v),
    procs.map((s) => ({ s, label: (names[s.labels] || "") + " " + s.labels.replace("pid=", "pid ") })), { zero: true });
  add("rss", "The job's processes: memory (RSS)", "B", bytes,
    by("proc.rss_bytes").slice(0, 12).map((s) => ({ s, label: (names[s.labels] || "") + " " + s.labels.replace("pid=", "pid ") })),
    { zero: true });
  const step = (n) => S.find((s) => s.name === n && s.labels === "" && s.source === "client");
  const phases = ["step.data_s", "step.h2d_s", "step.compute_s"].map(step).filter(Boolean);
  add("steps", "Step breakdown (data / h2d / compute) and samples/s", "s", secs,
    phases.map((s) => ({ s, label: s.name.replace("step.", "").replace("_s", "") })),
    { zero: true, stepRate: { samples: step("step.samples"), total: step("step.total_s") } });
  const metrics = S.filter((s) => s.source === "client" && !s.name.startsWith("step.") && /^(host=[^,]*(,run=[^,]*)?)?$/.test(s.labels));
  for (const m of metrics.slice(0, 12))
    add("metric-" + m.id, "Job metric: " + m.name + (hostOf(m) ? " of " + hostOf(m) : "") + (runOf(m) ? " (run " + runOf(m) + ")" : ""), m.unit,
      (v) => fin(v) ? v.toPrecision(4) : DASH, [{ s: m, label: m.name }]);
  return plan;
}

// Fetches the lines of every chart for [from, to] (null: the whole run) in about `points` points.
export async function fetchLines(runId, ids, from, to, points) {
  const out = new Map();
  for (let i = 0; i < ids.length; i += 64) {
    let q = `runs/${encodeURIComponent(runId)}/series?id=${ids.slice(i, i + 64).join(",")}&points=${points}`;
    if (from !== null) q += `&from=${from}&to=${to}`;
    const r = await api(q);
    for (const s of r.series) out.set(s.id, s);
  }
  return out;
}

// uPlot's aligned table for one chart from the fetched series (mean, and min/max for a band).
export function chartData(chart, got, extra) {
  const tables = [], map = [];
  for (const l of chart.lines) {
    const s = got.get(l.s.id) || { t: [], mean: [] };
    const cols = [s.t, s.mean];
    if (l.band) cols.push(s.min || s.mean, s.max || s.mean);
    tables.push(cols);
    map.push(cols.length - 1);
  }
  if (extra) tables.push(extra);
  if (!tables.length) return [[]];
  return tables.length === 1 ? tables[0] : uPlot.join(tables);
}

export function samplesRate(got, sr) {
  if (!sr || !sr.samples || !sr.total) return null;
  const a = got.get(sr.samples.id), b = got.get(sr.total.id);
  if (!a || !b || !a.t.length) return null;
  const m = new Map(b.t.map((t, i) => [t, b.mean[i]]));
  const t = [], v = [];
  a.t.forEach((x, i) => { const tot = m.get(x); t.push(x); v.push(fin(a.mean[i]) && fin(tot) && tot > 0 ? a.mean[i] / tot : null); });
  return [t, v];
}

// Spans of clocks cut (throttle_start .. throttle_stop, by GPU and reason) and marks, from events.
export function spansOf(run) {
  const open = {}, spans = [];
  const end = run.run.duration_s || 0;
  for (const e of run.events) {
    const k = e.labels + "/" + e.name;
    if (e.kind === "throttle_start") open[k] = e.t;
    else if (e.kind === "throttle_stop" && open[k] !== undefined) spans.push([open[k], e.t, e.name]), delete open[k];
  }
  for (const [k, t0] of Object.entries(open)) spans.push([t0, Math.max(end, t0), k.split("/")[1]]);
  return spans;
}

// A mark's label on the charts: an Xid names its code and GPU ("Xid 79 GPU 3"), a mark its name.
export function markName(m) {
  if (m.kind !== "xid") return m.name;
  const g = /(?:^|,)gpu=(\d+)/.exec(m.labels || "");
  return "Xid " + m.name + (g ? " GPU " + g[1] : "");
}

export function heatColor(v) {
  if (!fin(v)) return null;
  const x = Math.max(0, Math.min(100, v)) / 100;
  const l = 96 - x * 62;
  return `hsl(215, 70%, ${l}%)`;
}

export function makeChart(chart, data, ctx) {
  const wrap = el("div", { class: "chart", id: "chart-" + chart.id, "data-chart": chart.id });
  wrap.append(el("h3", {}, chart.title));
  const series = [{ label: "time", value: (u, v) => (fin(v) ? secs(v) : DASH) }];
  const bands = [];
  let col = 1;
  chart.lines.forEach((l, i) => {
    const color = COLORS[i % COLORS.length];
    series.push({
      label: l.label, stroke: color, width: 1.5, scale: l.axis ? "y2" : "y", spanGaps: false,
      dash: chart.dashed && chart.dashed(l) ? [5, 4] : undefined,
      show: !chart.heat, value: (u, v) => (l.axis ? chart.axis2.fmt(v) : chart.fmt(v)),
      points: { show: false },
    });
    if (l.band) {
      series.push({ label: l.label + " min", stroke: color + "55", width: 0, show: true, points: { show: false }, value: (u, v) => chart.fmt(v) });
      series.push({ label: l.label + " max", stroke: color + "55", width: 0, show: true, points: { show: false }, value: (u, v) => chart.fmt(v) });
      bands.push({ series: [col + 2, col + 1], fill: color + "33" });
      col += 3;
    } else col += 1;
  });
  if (chart.stepRate && data.length > col)
    series.push({ label: "samples/s", stroke: "#444", width: 1.5, scale: "y2", value: (u, v) => sps(v), points: { show: false } });
  const axes = [
    { values: (u, ticks) => ticks.map(secs), stroke: "#555", grid: { stroke: "#eee" } },
    { values: (u, ticks) => ticks.map((v) => chart.fmt(v)), size: 70, stroke: "#555", grid: { stroke: "#eee" } },
  ];
  if (chart.axis2 || chart.stepRate)
    axes.push({ scale: "y2", side: 1, size: 70, grid: { show: false }, stroke: "#555",
      values: (u, ticks) => ticks.map((v) => (chart.axis2 ? chart.axis2.fmt(v) : sps(v))) });
  const scales = { x: { time: false }, y: {} };
  if (chart.range) scales.y.range = chart.range;
  else if (chart.zero) scales.y.range = (u, min, max) => [0, max > 0 ? max * 1.05 : 1];
  if (chart.heat) scales.y.range = [0, chart.lines.length];
  if (chart.axis2 || chart.stepRate) scales.y2 = { range: (u, min, max) => [0, fin(max) && max > 0 ? max * 1.05 : 1] };
  const hooks = {
    drawClear: [(u) => drawUnder(u, chart, ctx)],
    draw: [(u) => drawOver(u, chart, ctx)],
    setSelect: [(u) => {
      if (u.select.width < 5) return;
      const min = u.posToVal(u.select.left, "x"), max = u.posToVal(u.select.left + u.select.width, "x");
      u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
      for (const o of ctx.charts) o.u.setScale("x", { min, max });
      ctx.onZoom(min, max);
    }],
  };
  const opts = {
    width: ctx.width, height: chart.heat ? Math.max(90, Math.min(240, chart.lines.length * 12 + 40)) : 200,
    series, bands, axes, scales, hooks,
    cursor: { sync: { key: ctx.syncKey, setSeries: false }, drag: { x: true, y: false, setScale: false } },
    legend: { show: !chart.heat, live: true },
  };
  if (chart.heat) opts.axes[1] = { values: (u, ticks) => ticks.map((v) => (Number.isInteger(v) && v < chart.lines.length ? "cpu " + v : "")), size: 70 };
  const u = new uPlot(opts, data, wrap);
  wrap.gsPlot = u; // for the end-to-end test
  // the band's edges need no legend entries of their own
  const rows = u.root.querySelectorAll(".u-legend .u-series");
  series.forEach((sr, i) => { if (/ (min|max)$/.test(sr.label) && rows[i]) rows[i].style.display = "none"; });

  return { wrap, u };
}

// Under the lines: throttle spans. The heat map is drawn here too (its series are hidden).
function drawUnder(u, chart, ctx) {
  const c = u.ctx, top = u.bbox.top, h = u.bbox.height;
  c.save();
  if (chart.throttle) {
    c.fillStyle = "rgba(220, 60, 60, 0.12)";
    for (const [a, b] of ctx.spans) {
      const x0 = u.valToPos(a, "x", true), x1 = u.valToPos(b, "x", true);
      if (x1 >= u.bbox.left && x0 <= u.bbox.left + u.bbox.width)
        c.fillRect(Math.max(x0, u.bbox.left), top, Math.max(1, Math.min(x1, u.bbox.left + u.bbox.width) - Math.max(x0, u.bbox.left)), h);
    }
  }
  if (chart.heat) {
    const xs = u.data[0], rows = chart.lines.length, rh = h / rows;
    for (let r = 0; r < rows; r++) {
      const ys = u.data[r + 1];
      for (let i = 0; i < xs.length; i++) {
        const color = heatColor(ys[i]);
        if (!color) continue;
        const x0 = u.valToPos(xs[i], "x", true), x1 = i + 1 < xs.length ? u.valToPos(xs[i + 1], "x", true) : x0 + 2;
        c.fillStyle = color;
        c.fillRect(x0, top + h - (r + 1) * rh, Math.max(1, x1 - x0), Math.max(1, rh - 0.5));
      }
    }
  }
  c.restore();
}

// Over the lines: the job's marks (epoch, eval, checkpoint) as vertical lines, and the lines of
// its output that matter (kind "log": CUDA out of memory, NCCL errors, Killed, tracebacks) and the
// GPUs' Xids (kind "xid", named "Xid 79 GPU 3") in red.
function drawOver(u, chart, ctx) {
  const c = u.ctx;
  c.save();
  c.strokeStyle = "rgba(80, 80, 80, 0.55)";
  c.setLineDash([3, 3]);
  c.fillStyle = "#555";
  c.font = `${10 * devicePixelRatio}px sans-serif`;
  for (const m of ctx.marks) {
    const x = u.valToPos(m.t, "x", true);
    if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
    const log = m.kind === "log" || m.kind === "xid";
    c.strokeStyle = log ? "rgba(200, 30, 30, 0.8)" : "rgba(80, 80, 80, 0.55)";
    c.fillStyle = log ? "#b00" : "#555";
    c.beginPath(), c.moveTo(x, u.bbox.top), c.lineTo(x, u.bbox.top + u.bbox.height), c.stroke();
    c.fillText(markName(m), x + 3, u.bbox.top + 10 * devicePixelRatio);
  }
  c.restore();
}
