// The web build: node build.mjs SRC_DIR NODE_MODULES OUT_DIR. Bundles the app's ES modules
// (SRC_DIR/main.js and what it imports) with esbuild into one script, OUT_DIR/assets/app.js — one
// file, because the self-contained page (serve --html, report --html) inlines it and a file:// page
// cannot load modules — and copies index.html, the style and uPlot's ready IIFE build beside it.
// web/embed.cmake embeds OUT_DIR in the binary.
import { mkdirSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [src, modules, out] = process.argv.slice(2);
if (!src || !modules || !out) {
  console.error("usage: node build.mjs SRC_DIR NODE_MODULES OUT_DIR");
  process.exit(2);
}
const esbuild = await import(pathToFileURL(join(modules, "esbuild", "lib", "main.js")).href);
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "assets"), { recursive: true });
const copy = (from, to) => writeFileSync(join(out, to), readFileSync(from));
copy(join(src, "index.html"), "index.html");
copy(join(src, "app.css"), "assets/app.css");
copy(join(modules, "uplot/dist/uPlot.iife.min.js"), "assets/uPlot.iife.min.js");
copy(join(modules, "uplot/dist/uPlot.min.css"), "assets/uPlot.min.css");
await esbuild.build({
  entryPoints: [join(src, "main.js")],
  outfile: join(out, "assets", "app.js"),
  bundle: true,
  format: "iife",
  target: "es2020", // what Debian 12's Chromium and every browser of the last years runs
  charset: "utf8",
  legalComments: "none",
  logLevel: "error",
});
