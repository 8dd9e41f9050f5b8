// The DOM helpers every page uses: elements built from store text as text nodes (never HTML), the
// header's breadcrumbs and live badge, what a page must stop when another is shown. Nothing here
// touches the document until called, so the pure modules that import it load in Node's tests.
import { fin } from "./fmt.js";

export const COLORS = ["#2f6fdb", "#e0672b", "#2e9c5a", "#b8398f", "#7a5cd6", "#c9a21b", "#1aa3b8", "#d43c3c",
  "#5d7a2a", "#8a5a3c", "#446688", "#aa3366"];

// The page's three places: the main area, the breadcrumbs, the live badge.
export const $app = () => document.getElementById("app");
export const $live = () => document.getElementById("live");

// What the current page must stop (timers, streams) when another is shown; the router empties it.
export const cleanup = [];

// Draws the current page again (a live run's page when a new series appears, or when it ends). The
// router sets it, so pages need not import the router (which imports them).
let redraw = () => {};
export function setRerender(f) { redraw = f; }
export function rerender() { return redraw(); }

export function el(tag, attrs, ...kids) {
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

// A run's tags ("k=v,k2=v2") as chips; null when it has none.
export function tagChips(tags) {
  const list = (tags || "").split(",").filter(Boolean);
  return list.length ? el("span", { class: "tags" }, list.map((t) => el("span", { class: "tag" }, t))) : null;
}

export function statusBadge(s) { return el("span", { class: "badge st-" + s.replace(/[^a-z]/g, "") }, s); }

export function sparkline(values, w = 120, h = 24) {
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

export function copyButton(text) {
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

export function crumbs(...parts) {
  document.getElementById("crumbs").replaceChildren(...parts.flatMap((p, i) => [i ? " / " : "", p]));
}
