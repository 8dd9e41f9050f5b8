// Unit tests of web/src/router.js's parseRoute: which page a location hash draws.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseRoute } from "../../web/src/router.js";

test("the runs page is the default", () => {
  for (const h of ["", "#", "#/", "#/nope", "#/run", "#/run/", "#/compare/"])
    assert.deepEqual(parseRoute(h), { page: "runs", arg: "" }, h);
});

test("a run's page, with its reference decoded", () => {
  assert.deepEqual(parseRoute("#/run/01abc"), { page: "run", arg: "01abc" });
  assert.deepEqual(parseRoute("#/run/bs%2064"), { page: "run", arg: "bs 64" });
  assert.deepEqual(parseRoute("#/run/a/b"), { page: "run", arg: "a/b" }); // a name may hold a slash
});

test("a comparison keeps its list", () => {
  assert.deepEqual(parseRoute("#/compare/a,b,c"), { page: "compare", arg: "a,b,c" });
});
