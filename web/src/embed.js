// A self-contained page (gpuscope serve --html, gpuscope report --html) carries its data in
// window.GS_EMBED: the API is answered from it, the same paths the server answers (docs/api.md).
// embedApi(EMB) returns that answerer; pure (unit-tested with node --test).

export function embedApi(EMB) {
  function embRun(ref) {
    const all = Object.values(EMB.runs);
    const r = all.find((x) => x.run.id === ref) || all.find((x) => x.run.name === ref);
    if (r) return r;
    const c = EMB.compare && EMB.compare.runs.find((x) => x.id === ref || x.name === ref);
    if (c) throw new Error(`this file holds the comparison, not run ${c.name || c.id}'s page`);
    throw new Error("no run '" + ref + "' in this file");
  }
  return function embApi(path) {
    const [p, q] = path.split("?");
    const args = new URLSearchParams(q || "");
    const parts = p.split("/").map(decodeURIComponent);
    if (p === "compare") return EMB.compare;
    if (parts[0] === "runs" && parts.length === 2) return embRun(parts[1]);
    if (parts[0] === "runs" && parts[2] === "log") {
      // the file holds the output's last bytes (its tail); a follow-up from "next" has nothing more
      const l = (EMB.log || {})[embRun(parts[1]).run.id];
      if (!l) return { chunks: [], next: 0, more: false, capture: null };
      return args.has("from") && +args.get("from") >= l.next ? { ...l, chunks: [] } : l;
    }
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
  };
}
