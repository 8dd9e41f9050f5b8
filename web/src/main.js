// gpuscope serve's front end: the runs page, a run's page and the compare page, drawn from the JSON
// API (docs/api.md) with uPlot. Plain DOM: every piece of store text goes in as a text node, never as
// HTML. Absent numbers are shown as "—" and drawn as gaps, never as zero. Built by web/build.mjs
// (esbuild) into one script, assets/app.js, which the binary embeds.
import { pageCompare } from "./pages/compare.js";
import { pageRun } from "./pages/run.js";
import { pageRuns } from "./pages/runs.js";
import { startRouter } from "./router.js";

startRouter({ runs: pageRuns, run: pageRun, compare: pageCompare });
