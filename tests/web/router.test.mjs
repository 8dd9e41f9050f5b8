// Unit tests of web/src/router.js's parseRoute: which page a location hash draws.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseRoute, routeQuery, searchHash } from "../../web/src/router.js";

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

test("a search in the runs page's hash is its query, not part of a page's argument", () => {
  assert.deepEqual(parseRoute("#/?where=name%20%3D%20a&sort=-samples_per_s"), { page: "runs", arg: "" });
  assert.deepEqual(parseRoute("#/run/01abc?x=1"), { page: "run", arg: "01abc" });
  const q = routeQuery("#/?where=param.batch_size%20%3E%3D%2064%20and%20tag.team%20%3D%20vision&sort=-samples_per_s");
  assert.equal(q.get("where"), "param.batch_size >= 64 and tag.team = vision");
  assert.equal(q.get("sort"), "-samples_per_s");
  assert.equal(q.get("columns"), null);
  assert.equal(routeQuery("#/").toString(), "");
});

test("searchHash writes what routeQuery reads back, and no search is the plain runs page", () => {
  const search = { where: "name ~ 'a&b' or param.x = \"#1\"", sort: "-samples_per_s", columns: "name,tag.team" };
  const q = routeQuery(searchHash(search));
  for (const k of ["where", "sort", "columns"]) assert.equal(q.get(k), search[k], k);
  assert.equal(searchHash({ where: "", sort: "", columns: "" }), "#/");
  assert.deepEqual(parseRoute(searchHash(search)), { page: "runs", arg: "" });
});
