// Unit tests of web/src/log.js: the job's output cut into lines as a terminal showed them, the same
// whether read whole or in pieces (a live page), and the search box's matcher.
import { test } from "node:test";
import assert from "node:assert/strict";
import { logFeed, logFinish, logMatcher, shown } from "../../web/src/log.js";

test("a line is what the terminal last showed, without its escape sequences", () => {
  assert.equal(shown("10%\r50%\r100%"), "100%");
  assert.equal(shown("\x1b[31mred\x1b[0m text"), "red text");
  assert.equal(shown("\x1b]0;title\x07after"), "after");
  assert.equal(shown("done\r"), "done");
  assert.equal(shown("a\x00b\tc"), "ab\tc");
});

test("lines per stream, the same read whole or in pieces", () => {
  const chunks = [
    { seq: 0, t_s: 1, stream: "out", text: "one\ntw" },
    { seq: 1, t_s: 2, stream: "err", text: "E1\n" },
    { seq: 2, t_s: 3, stream: "out", text: "o\nthree" },
  ];
  const whole = {};
  logFeed(whole, chunks);
  logFinish(whole);
  const parts = {};
  for (const c of chunks) logFeed(parts, [c]);
  logFinish(parts);
  const want = [
    { t_s: 1, stream: "out", text: "one" },
    { t_s: 2, stream: "err", text: "E1" },
    { t_s: 1, stream: "out", text: "two" },
    { t_s: 3, stream: "out", text: "three" },
  ];
  assert.deepEqual(whole.lines, want);
  assert.deepEqual(parts.lines, want);
});

test("the search box: a regular expression, else plain text", () => {
  const l = (text) => ({ text });
  assert.ok(logMatcher("cuda.*memory")(l("RuntimeError: CUDA out of memory")));
  assert.ok(!logMatcher("nccl")(l("loss 0.1")));
  assert.ok(logMatcher("(x")(l("a (x) b")));
  assert.ok(logMatcher("")(l("anything")));
});
