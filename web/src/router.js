// The hash router: #/ the runs page (#/?where=...&sort=...&columns=... a search), #/run/REF a run,
// #/compare/A,B,... a comparison. parseRoute, routeQuery and searchHash are pure (unit-tested with
// node --test); startRouter draws the page for the current hash and again
// on every change, stopping what the last page left running first.
import { EMB } from "./api.js";
import { $app, cleanup, el, setRerender } from "./dom.js";

// { page: "runs" | "run" | "compare", arg } for a location hash; an unknown page is the runs page.
// What follows a "?" is the page's query (routeQuery), not part of its argument.
export function parseRoute(hash) {
  const raw = (hash || "").replace(/^#\/?/, "");
  const h = decodeURIComponent(raw.includes("?") ? raw.slice(0, raw.indexOf("?")) : raw);
  const [page, ...rest] = h.split("/");
  const arg = rest.join("/");
  if ((page === "run" || page === "compare") && arg) return { page, arg };
  return { page: "runs", arg: "" };
}

// The query of a location hash ("#/?where=...&sort=...") as URLSearchParams: the runs page keeps its
// search there, so a link shares the view.
export function routeQuery(hash) {
  const h = hash || "";
  return new URLSearchParams(h.includes("?") ? h.slice(h.indexOf("?") + 1) : "");
}

// The hash of the runs page with this search (empty values left out).
export function searchHash(search) {
  const q = new URLSearchParams();
  for (const k of ["where", "sort", "columns"]) if (search[k]) q.set(k, search[k]);
  const s = q.toString();
  return s ? "#/?" + s : "#/";
}

export function startRouter(pages) {
  async function route() {
    for (const f of cleanup.splice(0)) f();
    delete document.body.dataset.ready;
    const { page, arg } = parseRoute(location.hash);
    try {
      if (page === "run") await pages.run(arg);
      else if (page === "compare") await pages.compare(arg);
      else if (EMB) { history.replaceState(null, "", EMB.hash); await route(); return; }
      else await pages.runs();
      document.body.dataset.page = page;
      document.body.dataset.ready = location.hash || "#/"; // the page is drawn (the e2e test waits on it)
    } catch (e) {
      $app().replaceChildren(el("p", { class: "error" }, "gpuscope: ", e.message));
      document.body.dataset.page = "error";
    }
  }
  setRerender(route);
  window.addEventListener("hashchange", route);
  if (EMB && !location.hash) history.replaceState(null, "", EMB.hash);
  return route();
}
