// The runs page: every run, sortable and filtered, with a sparkline of its GPU use, its top finding
// and its estimated gain, its tags and notes; runs ticked here are compared. Refreshed every 5 s while
// one runs. A search — the filter language of `gpuscope runs --where`, a sort and extra columns — is
// the server's (/api/runs?where=&sort=&columns=) and lives in the URL (#/?where=...), so a link shares
// the view; the quick filter box only narrows what is shown.
import { api } from "../api.js";
import { $app, cleanup, crumbs, el, sparkline, statusBadge, tagChips } from "../dom.js";
import { DASH, fin, gpuNote, pctv, secs, speed, sps, when } from "../fmt.js";
import { routeQuery, searchHash } from "../router.js";

// A search column's value for a cell: numbers to six significant digits, missing as a dash.
function colValue(v) {
  if (v === null || v === undefined) return DASH;
  return typeof v === "number" ? String(Number(v.toPrecision(6))) : String(v);
}

// The search form: what is in the URL, applied by going to the URL of what is typed.
function searchForm(search) {
  const box = (id, placeholder, value, size) => el("input", { type: "search", id, placeholder, value, size });
  const where = box("where", "where: param.batch_size >= 64 and tag.team = vision", search.where, 60);
  const sort = box("sort", "sort: -samples_per_s", search.sort, 16);
  const columns = box("columns", "columns: param.batch_size,top_finding", search.columns, 30);
  const form = el("form", { class: "search", id: "search" }, where, sort, columns,
    el("button", { type: "submit", id: "apply" }, "search"));
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    location.hash = searchHash({ where: where.value.trim(), sort: sort.value.trim(), columns: columns.value.trim() });
  });
  return form;
}

export async function pageRuns() {
  crumbs("runs");
  const q = routeQuery(location.hash);
  const search = { where: q.get("where") || "", sort: q.get("sort") || "", columns: q.get("columns") || "" };
  const extra = search.columns.split(",").map((c) => c.trim()).filter(Boolean);
  // the server's order when the search sorts, until a header is clicked
  const state = { sort: search.sort ? null : "start", dir: -1, filter: "", picked: new Set() };
  const box = el("div");
  $app().replaceChildren(box);
  let data = { runs: [] };
  const searchError = el("p", { class: "error", id: "where-error", hidden: true });
  const filter = el("input", { type: "search", placeholder: "filter: name, tag, status, group", id: "filter" });
  const cmp = el("button", { id: "compare", type: "button", disabled: true }, "compare ticked runs");
  cmp.addEventListener("click", () => (location.hash = "#/compare/" + [...state.picked].join(",")));
  filter.addEventListener("input", () => { state.filter = filter.value.toLowerCase(); draw(); });
  const table = el("table", { class: "runs", id: "runs" });
  box.append(searchForm(search), searchError, el("div", { class: "toolbar" }, filter, cmp), table);
  const cols = [
    ["", null], ["name", "name"], ["status", "status"], ["group", "group"], ["started", "start"],
    ["duration", "duration_s"], ["throughput", "samples_per_s"], ["GPU util", "gpu_util"],
    ["top finding", null], ["est. gain", "gain"], ...extra.map((c) => [c, "col:" + c]),
  ];
  function draw() {
    const rows = data.runs.filter((r) => !state.filter ||
      [r.name, r.tags, r.status, r.group, r.id].some((x) => (x || "").toLowerCase().includes(state.filter)));
    const key = (r) => state.sort === "gain" ? (r.top_finding && r.top_finding.speedup) :
      state.sort.startsWith("col:") ? (r.columns || {})[state.sort.slice(4)] : r[state.sort];
    if (state.sort) rows.sort((a, b) => {
      const x = key(a), y = key(b);
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * state.dir;
    });
    const head = el("tr", {}, cols.map(([label, k]) => {
      const th = el("th", { class: k ? "sortable" : "" }, label, k && k === state.sort ? (state.dir > 0 ? " ▲" : " ▼") : "");
      if (k) th.addEventListener("click", () => { state.dir = state.sort === k ? -state.dir : -1; state.sort = k; draw(); });
      return th;
    }));
    const body = rows.map((r) => {
      const box = el("input", { type: "checkbox", "data-id": r.id, checked: state.picked.has(r.id) });
      box.addEventListener("change", () => {
        box.checked ? state.picked.add(r.id) : state.picked.delete(r.id);
        cmp.disabled = state.picked.size < 2;
      });
      // a GPU's missing metrics are listed on its run page, under the GPU table
      const f = r.top_finding, notes = (r.notes || []).filter((n) => gpuNote(n) === null);
      return el("tr", { "data-run": r.id },
        el("td", {}, box),
        el("td", { class: "name-cell" }, el("a", { href: "#/run/" + encodeURIComponent(r.id) }, r.name || r.id),
          tagChips(r.tags), notes.length ? el("div", { class: "note muted", title: notes.join("\n") },
            notes[notes.length - 1], notes.length > 1 ? ` (+${notes.length - 1})` : "") : null),
        el("td", {}, statusBadge(r.status)),
        el("td", {}, r.group || ""),
        el("td", { class: "num" }, when(r.start)),
        el("td", { class: "num" }, secs(r.duration_s)),
        el("td", { class: "num" }, sps(r.samples_per_s)),
        el("td", { class: "spark-cell" }, sparkline(r.spark), " ", pctv(r.gpu_util)),
        el("td", { class: "finding-cell" }, f ? el("span", { class: "sev sev-" + f.severity }, f.title,
          r.top_finding_live ? el("span", { class: "badge live-badge" }, "live") : null) : DASH),
        el("td", { class: "num" }, f && fin(f.speedup) && f.speedup > 1.0001 ? speed(f.speedup) : DASH),
        extra.map((c) => el("td", { class: "col", "data-col": c }, colValue((r.columns || {})[c]))));
    });
    table.replaceChildren(el("thead", {}, head), el("tbody", {}, body));
    if (!rows.length) table.append(el("tr", {}, el("td", { colspan: cols.length, class: "muted" }, "no runs")));
  }
  const path = searchHash(search) === "#/" ? "runs" : "runs?" + searchHash(search).slice(3);
  async function load() {
    try {
      data = await api(path);
      searchError.hidden = true;
    } catch (e) { // a filter the server refuses: say why, list nothing
      data = { runs: [] };
      searchError.textContent = "search: " + e.message;
      searchError.hidden = false;
    }
    draw();
    return data.runs.some((r) => r.status === "running");
  }
  let live = await load();
  const timer = setInterval(async () => { if (live) live = await load().catch(() => live); }, 5000);
  cleanup.push(() => clearInterval(timer));
}
