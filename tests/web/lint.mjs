// eslint over the front end's sources (web/src and web/build.mjs): node lint.mjs WEB_DIR NODE_MODULES.
// The configuration is here, not in web/, because eslint is a test package: it is installed (from
// this folder's lockfile) into the build folder, and `make demo` never needs it. Exits 1 with each
// problem (file:line rule message) when one is found, 0 when none.
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [web, modules] = process.argv.slice(2);
if (!web || !modules) {
  console.error("usage: node lint.mjs WEB_DIR NODE_MODULES");
  process.exit(2);
}
const load = (p) => import(pathToFileURL(join(modules, p)).href);
const { ESLint } = await load("eslint/lib/api.js");
const js = (await load("@eslint/js/src/index.js")).default;
const globals = (await load("globals/index.js")).default;

const eslint = new ESLint({
  cwd: web,
  overrideConfigFile: true, // no configuration file is looked for: this one is the whole of it
  overrideConfig: [
    js.configs.recommended,
    {
      files: ["src/**/*.js"],
      languageOptions: { ecmaVersion: 2020, sourceType: "module", globals: { ...globals.browser, uPlot: "readonly" } },
      rules: {
        "no-unused-vars": ["error", { args: "none" }],
        eqeqeq: ["error", "always"],
        "no-var": "error",
        "prefer-const": "error",
        "no-implicit-globals": "error",
        "no-restricted-properties": ["error", { property: "innerHTML", message: "store text goes in as text nodes (el())" },
          { property: "outerHTML", message: "store text goes in as text nodes (el())" }],
        "no-restricted-syntax": ["error", { selector: "CallExpression[callee.property.name='insertAdjacentHTML']",
          message: "store text goes in as text nodes (el())" }],
      },
    },
    {
      files: ["build.mjs"],
      languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.node },
    },
  ],
});
const results = await eslint.lintFiles(["src/**/*.js", "build.mjs"]);
let problems = 0;
for (const r of results)
  for (const m of r.messages) {
    problems++;
    console.log(`${r.filePath}:${m.line}:${m.column}: ${m.ruleId || "parse"}: ${m.message}`);
  }
console.log(`eslint: ${results.length} files, ${problems} problems`);
if (!results.length) {
  console.error("eslint: no file was linted (wrong WEB_DIR?)");
  process.exit(1);
}
process.exit(problems ? 1 : 0);
