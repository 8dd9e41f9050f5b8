"""Untrusted text in the read-back commands (issue 11, item 4): a run name, a tag or a process name
holding terminal escapes or newlines never reaches the terminal as such from `runs`, `show --params`,
`show --events`, `show --notes` or `metrics`, and CSV quotes by doubling '"' (RFC 4180), so every
row reads back whole."""
import csv
import io
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from gstest import Sandbox, check, run_tests, shared_sandbox

EVIL = "ev\x1b[2Jil\nname\x07\x9b"
QUOTED = 'say "hi" "twice"'
PROC = "p\x1b[31mq\nr"  # an executable's name becomes the process name in proc_* events


def setup(sb):
    script = os.path.join(sb.dir, PROC)
    with open(script, "w") as f:
        f.write("#!/bin/sh\nsleep 0.4\n")
    os.chmod(script, 0o755)
    sb.ok("run", "--quiet", "--name", EVIL, "--tag", "q=" + QUOTED, "--tag", "e=x\x1b]0;title\x07y", "--",
          "sh", "-c", f"'{script}'; true")


sandbox = shared_sandbox(setup)


def clean(out, what):
    check("\x1b" not in out and "\x07" not in out and "\x9b" not in out, f"{what}: a control character came through: {out!r}")


def test_runs_table_has_no_escapes_and_one_line_per_run():
    sb = sandbox()
    out = sb.ok("runs")
    clean(out, "runs")
    lines = out.splitlines()
    check(len(lines) == 2, f"a newline in the name broke the table: {lines!r}")
    check("ev[2Jil name" in lines[1], lines[1])
    check(sb.json("runs", "--json")[0]["name"] == EVIL, "JSON keeps the name exactly")


def test_show_params_table_and_csv():
    sb = sandbox()
    out = sb.ok("show", "last", "--params")
    clean(out, "show --params")
    rows = list(csv.reader(io.StringIO(sb.ok("show", "last", "--params", "--csv"))))
    check(rows[0] == ["key", "value"] and all(len(r) == 2 for r in rows), f"CSV rows: {rows}")
    check(["tag.q", QUOTED] in rows, f"the quoted tag did not read back: {rows}")
    check(sb.json("show", "last", "--params", "--json")["tag.q"] == QUOTED, "JSON")


def test_show_events_table_and_csv():
    sb = sandbox()
    out = sb.ok("show", "last", "--events")
    clean(out, "show --events")
    check(any("p[31mq r" in l for l in out.splitlines()), f"the process name should show, cleaned: {out!r}")
    rows = list(csv.reader(io.StringIO(sb.ok("show", "last", "--events", "--csv"))))
    check(all(len(r) == 6 for r in rows), f"every CSV row has 6 fields: {rows}")
    names = {r[2] for r in rows[1:]}
    check(any(n.startswith("p") and "q" in n for n in names), f"names: {names}")
    check(not any("\x1b" in c for r in rows for c in r), "CSV carries no escape")


def test_show_notes_and_metrics_have_no_escapes():
    sb = sandbox()
    clean(sb.ok("show", "last", "--notes"), "show --notes")
    clean(sb.ok("metrics", "last"), "metrics")
    clean(sb.gs("show", "last", "--metric", "no\x1b[2Jsuch")[2], "the 'no series matches' line")


def test_samples_csv_quotes_every_text_field():
    sb = sandbox()
    rows = list(csv.DictReader(io.StringIO(sb.ok("show", "last", "--metric", "host.cpu.busy_pct", "--csv"))))
    check(rows and all(r["labels"].startswith("cpu=") for r in rows), str(rows[:3]))


if __name__ == "__main__":
    run_tests(globals())
