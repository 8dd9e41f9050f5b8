// The runs page: every run, sortable and filtered, with a sparkline of its GPU use, its top finding
// and its estimated gain; runs ticked here are compared. Refreshed every 5 s while one runs.
import { api } from "../api.js";
import { $app, cleanup, crumbs, el, sparkline, statusBadge } from "../dom.js";
import { DASH, fin, pctv, secs, speed, sps, when } from "../fmt.js";

export async function pageRuns() {
  crumbs("runs");
  const state = { sort: "start", dir: -1, filter: "", picked: new Set() };
  const box = el("div");
  $app().replaceChildren(box);
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
