// gpuscope serve's front end: the runs page, a run's page and the compare page, drawn from the JSON
// API (docs/api.md) with uPlot. Plain DOM: every piece of store text goes in as a text node, never as
// HTML. Absent numbers are shown as "—" and drawn as gaps, never as zero.
"use strict";

(function () {
  const $app = document.getElementById("app");
  const $crumbs = document.getElementById("crumbs");
  const $live = document.getElementById("live");
  const COLORS = ["#2f6fdb", "#e0672b", "#2e9c5a", "#b8398f", "#7a5cd6", "#c9a21b", "#1aa3b8", "#d43c3c",
    "#5d7a2a", "#8a5a3c", "#446688", "#aa3366"];
  let cleanup = []; // what the current page must stop when another is shown

  // ---- small helpers ----

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids.flat()) {
      if (k === null || k === undefined || k === false) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }

  // A self-contained page (gpuscope serve --html) carries its data: the API is answered from it.
  const EMB = window.GS_EMBED || null;
  function embRun(ref) {
    const all = Object.values(EMB.runs);
    const r = all.find((x) => x.run.id === ref) || all.find((x) => x.run.name === ref);
    if (r) return r;
    const c = EMB.compare && EMB.compare.runs.find((x) => x.id === ref || x.name === ref);
    if (c) throw new Error(`this file holds the comparison, not run ${c.name || c.id}'s page`);
    throw new Error("no run '" + ref + "' in this file");
  }
  function embApi(path) {
    const [p, q] = path.split("?");
    const args = new URLSearchParams(q || "");
    const parts = p.split("/").map(decodeURIComponent);
    if (p === "compare") return EMB.compare;
    if (parts[0] === "runs" && parts.length === 2) return embRun(parts[1]);
    if (parts[0] === "runs" && parts[2] === "series") {
      const id = EMB.compare ? (EMB.compare.runs.find((x) => x.id === parts[1] || x.name === parts[1]) || {}).id
        : embRun(parts[1]).run.id;
      let list = EMB.series[id] || [];
      if (args.has("id")) { const ids = args.get("id").split(",").map(Number); list = list.filter((s) => ids.includes(s.id)); }
      if (args.has("name")) list = list.filter((s) => s.name === args.get("name") && (!args.has("labels") || s.labels === args.get("labels")));
      const from = args.has("from") ? +args.get("from") : -Infinity, to = args.has("to") ? +args.get("to") : Infinity;
      return { series: list.map((s) => {
        const keep = s.t.map((t, i) => (t >= from && t <= to ? i : -1)).filter((i) => i >= 0);
        const pick = (a) => a && keep.map((i) => a[i]);
        return { ...s, t: pick(s.t), mean: pick(s.mean), min: pick(s.min), max: pick(s.max) };
      }) };
    }
    throw new Error("this file holds one page only");
  }

  async function api(path) {
    if (EMB) return embApi(path);
    const r = await fetch("/api/" + path, { credentials: "same-origin" });
    const body = await r.json().catch(() => ({ error: "not JSON (" + r.status + ")" }));
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }

  const fin = (v) => typeof v === "number" && isFinite(v);
  const DASH = "—";
  function num(v, d = 1, unit = "") {
    if (!fin(v)) return DASH;
    return v.toFixed(d) + (unit ? " " + unit : "");
  }
  function pct(share, d = 0) { return fin(share) ? (share * 100).toFixed(d) + " %" : DASH; }
  function pctv(v, d = 0) { return fin(v) ? v.toFixed(d) + " %" : DASH; }
  function bytes(v) {
    if (!fin(v)) return DASH;
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < u.length - 1) v /= 1024, i++;
    return v.toFixed(i ? 1 : 0) + " " + u[i];
  }
  function rate(v) { // bytes per second, decimal like link speeds
    if (!fin(v)) return DASH;
    const u = ["B/s", "kB/s", "MB/s", "GB/s", "TB/s"];
    let i = 0;
    while (Math.abs(v) >= 1000 && i < u.length - 1) v /= 1000, i++;
    return v.toFixed(i ? 2 : 0) + " " + u[i];
  }
  function secs(v) {
    if (!fin(v)) return DASH;
    const a = Math.abs(v);
    if (a < 1e-3) return (v * 1e6).toFixed(0) + " µs";
    if (a < 1) return (v * 1e3).toFixed(a < 0.01 ? 2 : 1) + " ms";
    if (a < 120) return v.toFixed(a < 10 ? 2 : 1) + " s";
    if (a < 7200) return (v / 60).toFixed(1) + " min";
    if (a < 172800) return (v / 3600).toFixed(1) + " h";
    return (v / 86400).toFixed(1) + " d";
  }
  function speed(v) { return fin(v) ? v.toFixed(2) + "×" : DASH; }
  function when(t) {
    if (!fin(t)) return DASH;
    const d = new Date(t * 1000), p = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
  }
  function sps(v) { return fin(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + " samples/s" : DASH; }

  // An evidence value in units, from its key's suffix (the doctor's naming: _s, _share, _pct, _bytes,
  // _bytes_s, _w, _c, _mhz).
  function evidence(key, v) {
    if (v === null || v === undefined) return DASH;
    if (typeof v === "object") return Object.entries(v).map(([k, x]) => k + ": " + evidence(key, x)).join(", ");
    if (typeof v !== "number") return String(v);
    if (/_bytes_s$/.test(key)) return rate(v);
    if (/_bytes$/.test(key)) return bytes(v);
    if (/(_share|_estimate)$/.test(key)) return pct(v, 1);
    if (/_pct$/.test(key)) return pctv(v, 1);
    if (/_w$/.test(key)) return num(v, 0, "W");
    if (/_c$/.test(key)) return num(v, 0, "°C");
    if (/_mhz$/.test(key)) return num(v, 0, "MHz");
    if (/_cores$/.test(key)) return num(v, 2, "cores");
    if (/_hours$/.test(key)) return num(v, 2, "h");
    if (/(_s|_step_s)$/.test(key) || key === "lost_s") return secs(v);
    if (/speedup|slower_by|ratio|scale|_cv$/.test(key)) return fin(v) ? v.toFixed(2) + "×" : DASH;
    return Number.isInteger(v) ? String(v) : v.toPrecision(4);
  }

  function statusBadge(s) { return el("span", { class: "badge st-" + s.replace(/[^a-z]/g, "") }, s); }

  function sparkline(values, w = 120, h = 24) {
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("width", w), svg.setAttribute("height", h), svg.setAttribute("class", "spark");
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    let d = "", pen = false;
    (values || []).forEach((v, i) => {
      if (!fin(v)) { pen = false; return; }
      const x = (i / Math.max(1, values.length - 1)) * (w - 2) + 1, y = h - 1 - (Math.min(100, Math.max(0, v)) / 100) * (h - 2);
      // a point with no neighbour is drawn as a dot (a zero-length, round-capped segment)
      d += (pen ? "L" : "M") + x.toFixed(1) + " " + y.toFixed(1) + (pen ? "" : "l0.01 0");
      pen = true;
    });
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", d || "M0 0");
    svg.append(path);
    return svg;
  }

  function copyButton(text) {
    const b = el("button", { class: "copy", type: "button" }, "copy");
    b.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(text);
      } catch {
        const ta = el("textarea", {}, text);
        document.body.append(ta), ta.select(), document.execCommand("copy"), ta.remove();
      }
      b.textContent = "copied";
      setTimeout(() => (b.textContent = "copy"), 1500);
    });
    return b;
  }

  function crumbs(...parts) {
    $crumbs.replaceChildren(...parts.flatMap((p, i) => [i ? " / " : "", p]));
  }

  // ---- runs page ----

  async function pageRuns() {
    crumbs("runs");
    const state = { sort: "start", dir: -1, filter: "", picked: new Set() };
    const box = el("div");
    $app.replaceChildren(box);
    let data = { runs: [] };
    const filter = el("input", { type: "search", placeholder: "filter: name, tag, status, group", id: "filter" });
    const cmp = el("button", { id: "compare", type: "button", disabled: true }, "compare ticked runs");
    cmp.addEventListener("click", () => (location.hash = "#/compare/" + [...state.picked].join(",")));
    filter.addEventListener("input", () => { state.filter = filter.value.toLowerCase(); draw(); });
    const table = el("table", { class: "runs", id: "runs" });
    box.append(el("div", { class: "toolbar" }, filter, cmp), table);
    const cols = [
      ["", null], ["name", "name"], ["status", "status"], ["group", "group"], ["started", "start"],
      ["duration", "duration_s"], ["throughput", "samples_per_s"], ["GPU util", "gpu_util"],
      ["top finding", null], ["est. gain", "gain"],
    ];
    function draw() {
      const rows = data.runs.filter((r) => !state.filter ||
        [r.name, r.tags, r.status, r.group, r.id].some((x) => (x || "").toLowerCase().includes(state.filter)));
      const key = (r) => state.sort === "gain" ? (r.top_finding && r.top_finding.speedup) : r[state.sort];
      rows.sort((a, b) => {
        const x = key(a), y = key(b);
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * state.dir;
      });
      const head = el("tr", {}, cols.map(([label, k]) => {
        const th = el("th", { class: k ? "sortable" : "" }, label, k === state.sort ? (state.dir > 0 ? " ▲" : " ▼") : "");
        if (k) th.addEventListener("click", () => { state.dir = state.sort === k ? -state.dir : -1; state.sort = k; draw(); });
        return th;
      }));
      const body = rows.map((r) => {
        const box = el("input", { type: "checkbox", "data-id": r.id, checked: state.picked.has(r.id) });
        box.addEventListener("change", () => {
          box.checked ? state.picked.add(r.id) : state.picked.delete(r.id);
          cmp.disabled = state.picked.size < 2;
        });
        const f = r.top_finding;
        return el("tr", { "data-run": r.id },
          el("td", {}, box),
          el("td", {}, el("a", { href: "#/run/" + encodeURIComponent(r.id) }, r.name || r.id)),
          el("td", {}, statusBadge(r.status)),
          el("td", {}, r.group || ""),
          el("td", { class: "num" }, when(r.start)),
          el("td", { class: "num" }, secs(r.duration_s)),
          el("td", { class: "num" }, sps(r.samples_per_s)),
          el("td", { class: "spark-cell" }, sparkline(r.spark), " ", pctv(r.gpu_util)),
          el("td", { class: "finding-cell" }, f ? el("span", { class: "sev sev-" + f.severity }, f.title,
            r.top_finding_live ? el("span", { class: "badge live-badge" }, "live") : null) : DASH),
          el("td", { class: "num" }, f && fin(f.speedup) && f.speedup > 1.0001 ? speed(f.speedup) : DASH));
      });
      table.replaceChildren(el("thead", {}, head), el("tbody", {}, body));
      if (!rows.length) table.append(el("tr", {}, el("td", { colspan: cols.length, class: "muted" }, "no runs")));
    }
    async function load() {
      data = await api("runs");
      draw();
      return data.runs.some((r) => r.status === "running");
    }
    let live = await load();
    const timer = setInterval(async () => { if (live) live = await load().catch(() => live); }, 5000);
    cleanup.push(() => clearInterval(timer));
  }

  // ---- charts ----

  // One chart per group of series on the run page: which series, how to draw them.
  function chartPlan(run) {
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
  async function fetchLines(runId, ids, from, to, points) {
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
  function chartData(chart, got, extra) {
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

  function samplesRate(got, sr) {
    if (!sr || !sr.samples || !sr.total) return null;
    const a = got.get(sr.samples.id), b = got.get(sr.total.id);
    if (!a || !b || !a.t.length) return null;
    const m = new Map(b.t.map((t, i) => [t, b.mean[i]]));
    const t = [], v = [];
    a.t.forEach((x, i) => { const tot = m.get(x); t.push(x); v.push(fin(a.mean[i]) && fin(tot) && tot > 0 ? a.mean[i] / tot : null); });
    return [t, v];
  }

  // Spans of clocks cut (throttle_start .. throttle_stop, by GPU and reason) and marks, from events.
  function spansOf(run) {
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

  function heatColor(v) {
    if (!fin(v)) return null;
    const x = Math.max(0, Math.min(100, v)) / 100;
    const l = 96 - x * 62;
    return `hsl(215, 70%, ${l}%)`;
  }

  function makeChart(chart, data, ctx) {
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

  // Over the lines: the job's marks (epoch, eval, checkpoint) as vertical lines.
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
      c.beginPath(), c.moveTo(x, u.bbox.top), c.lineTo(x, u.bbox.top + u.bbox.height), c.stroke();
      c.fillText(m.name, x + 3, u.bbox.top + 10 * devicePixelRatio);
    }
    c.restore();
  }

  // ---- run page ----

  function verdictCard(run) {
    const f = run.run.top_finding, gpus = run.gpus || [];
    const util = gpus.length ? gpus.reduce((a, g) => a + (fin(g.util) ? g.util : 0), 0) / gpus.filter((g) => fin(g.util)).length : null;
    return el("section", { class: "verdict sev-" + (f ? f.severity : "info"), id: "verdict" },
      el("div", { class: "verdict-main" },
        el("div", { class: "verdict-title" }, f ? f.title : run.findings_error ? "The diagnosis could not run" : "No findings yet"),
        f && f.rule !== "healthy" ? el("div", { class: "verdict-cost" },
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

  function gpuTable(gpus) {
    if (!gpus.length) return el("p", { class: "muted" }, "No GPU was sampled in this run.");
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

  function findingsList(findings, live, window_s, error) {
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
        ev ? el("table", { class: "evidence" }, Object.entries(ev).map(([k, v]) =>
          el("tr", {}, el("th", {}, k.replace(/_/g, " ")), el("td", {}, evidence(k, v))))) :
          el("p", {}, String(f.evidence || "")),
        f.fix ? el("div", { class: "fix" }, copyButton(f.fix), el("pre", {}, f.fix)) : null));
    }
    return box;
  }

  async function pageRun(ref) {
    const hash = location.hash, started = performance.now();
    const run = await api("runs/" + encodeURIComponent(ref));
    const R = run.run, id = R.id;
    crumbs(EMB ? "run" : el("a", { href: "#/" }, "runs"), R.name || id);
    const running = R.status === "running";
    const head = el("section", { class: "run-head" },
      el("h1", {}, R.name || id, " ", statusBadge(R.status)),
      el("div", { class: "muted" }, id, " · ", R.host, " · ", when(R.start), " · ", R.command));
    const params = Object.entries(run.params).filter(([k]) => !/^gpu\.\d+\./.test(k));
    const paramBox = el("details", { class: "params" }, el("summary", {}, `params (${params.length}) and notes (${run.notes.length})`),
      el("table", {}, params.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v)))),
      el("ul", {}, run.notes.map((n) => el("li", {}, n))));
    const charts = el("section", { class: "charts", id: "charts" });
    const hint = el("p", { class: "muted hint" }, "drag across a chart to zoom, double-click to reset");
    let findingsBox = findingsList(run.findings, false, null, run.findings_error);
    $app.replaceChildren(head, verdictCard(run), el("h2", {}, "GPUs"), gpuTable(run.gpus), paramBox,
      el("h2", {}, "Timeline"), hint, charts, findingsBox);

    const plan = chartPlan(run);
    const width = Math.max(480, Math.min(1400, $app.clientWidth - 20));
    const ctx = {
      width, syncKey: "run-" + id, spans: spansOf(run),
      marks: run.events.filter((e) => e.kind === "mark"), charts: [], zooming: false, window: null,
      onZoom: null,
    };
    const ids = [...new Set(plan.flatMap((c) => [...c.lines.map((l) => l.s.id),
      ...(c.stepRate ? [c.stepRate.samples, c.stepRate.total].filter(Boolean).map((s) => s.id) : [])]))];
    const points = Math.min(2000, Math.round(width));
    let got = ids.length ? await fetchLines(id, ids, null, null, points) : new Map();
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
      $live.replaceChildren(el("span", { class: "badge live-badge" }, "● live (every 10 s)"));
      const again = setTimeout(() => { if (location.hash === hash) route(); }, 10000);
      cleanup.push(() => { clearTimeout(again); $live.replaceChildren(); });
    }
    if (!running || EMB || R.id === R.group) return;
    // ---- live: new samples extend the charts; the findings are recomputed by the server ----
    $live.replaceChildren(el("span", { class: "badge live-badge" }, "● live"));
    const since = lastT.size ? Math.min(...lastT.values()) : 0;
    const es = new EventSource(`/api/runs/${encodeURIComponent(id)}/live?since=${since}`);
    cleanup.push(() => { es.close(); $live.replaceChildren(); });
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
            setTimeout(() => { if (location.hash === hash) route(); }, 5000 - Math.min(4000, performance.now() - started));
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
    es.addEventListener("status", () => { es.close(); setTimeout(route, 300); });
  }

  // ---- compare page ----

  async function pageCompare(list) {
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
    $app.replaceChildren(el("h1", {}, "Compare ", String(runs.length), " runs"), bars, table, params, changes, overlay);
    // overlaid charts: the first GPU's util and the step time of each run, by time since start or by step
    // (a run's step numbers, step.n, map its times to steps)
    const width = Math.max(480, Math.min(1400, $app.clientWidth - 20));
    // labels null: of the series of that name, the one of the lowest-numbered GPU that has data (a
    // MIG GPU 0 has no util: the run's GPU 1 then stands for it)
    const gpuNo = (s) => { const m = /^gpu=(\d+)$/.exec(s.labels); return m ? +m[1] : Infinity; };
    const get = (r, name, labels) => api(`runs/${encodeURIComponent(r.id)}/series?name=${name}` +
      (labels === null ? "" : `&labels=${labels}`) + `&points=${Math.round(width)}&band=0`)
      .then((g) => g.series.filter((s) => s.t.length).sort((a, b) => gpuNo(a) - gpuNo(b))[0] || null).catch(() => null);
    const stepsOf = await Promise.all(runs.map((r) => get(r, "step.n", "")));
    const lines = [];
    for (const [name, labels, title, fmt] of [["gpu.util_pct", null, "GPU utilisation (each run's first GPU that reports it)", pctv], ["step.total_s", "", "Step time", secs]])
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

  // ---- routing ----

  async function route() {
    for (const f of cleanup.splice(0)) f();
    delete document.body.dataset.ready;
    const h = decodeURIComponent(location.hash.replace(/^#\/?/, ""));
    const [page, ...rest] = h.split("/");
    const arg = rest.join("/");
    try {
      if (page === "run" && arg) await pageRun(arg);
      else if (page === "compare" && arg) await pageCompare(arg);
      else if (EMB) { history.replaceState(null, "", EMB.hash); await route(); return; }
      else await pageRuns();
      document.body.dataset.page = page || "runs";
      document.body.dataset.ready = location.hash || "#/"; // the page is drawn (the e2e test waits on it)
    } catch (e) {
      $app.replaceChildren(el("p", { class: "error" }, "gpuscope: ", e.message));
      document.body.dataset.page = "error";
    }
  }
  window.addEventListener("hashchange", route);
  if (EMB && !location.hash) history.replaceState(null, "", EMB.hash);
  route();
})();
