// The web build: node build.mjs SRC_DIR NODE_MODULES OUT_DIR. Writes OUT_DIR/index.html and
// OUT_DIR/assets/ (the app's script and style, and uPlot's), which web/embed.cmake embeds in the
// binary. No bundler: the app is a few plain files; uPlot ships a ready IIFE build.
import { mkdirSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { join } from "node:path";

const [src, modules, out] = process.argv.slice(2);
if (!src || !modules || !out) {
  console.error("usage: node build.mjs SRC_DIR NODE_MODULES OUT_DIR");
  process.exit(2);
}
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "assets"), { recursive: true });
const copy = (from, to) => writeFileSync(join(out, to), readFileSync(from));
copy(join(src, "index.html"), "index.html");
copy(join(src, "app.js"), "assets/app.js");
copy(join(src, "app.css"), "assets/app.css");
copy(join(modules, "uplot/dist/uPlot.iife.min.js"), "assets/uPlot.iife.min.js");
copy(join(modules, "uplot/dist/uPlot.min.css"), "assets/uPlot.min.css");
