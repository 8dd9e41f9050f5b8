"""Moving runs between stores: `gpuscope export RUN... -o FILE`, `gpuscope import FILE` and `gpuscope
copy RUN... --to URL` (docs/export.md).

Three runs are made in a SQLite store (a job speaking gs1 with params, steps and a mark; a job that
fails; a generated run of 4 GPUs at 10 Hz, more points than one import append takes) and reported
(so their findings are kept). They are exported, imported into a second SQLite store, and copied
from there into a real PostgreSQL server (tests/pg/pgserver.py) and back out of it: every run reads back identical
through `report --json`, `show --json` (every sample), `show --events/--params/--notes --json` in
each store (but for the mark the store that takes a run gives it, param gpuscope.imported), the
second store's export (and that of the copy back from the server) is the first byte for byte, and a second import or copy adds nothing. A truncated file, a damaged line, a newer format and a run that is there in another state
are refused with one line and exit 2, writing nothing."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pg"))
from gstest import *  # noqa: E402,F401,F403
from pgserver import PgServer, free_port  # noqa: E402

GEN = os.path.join(BUILD, "bench/serve_gen")


def setup(sb):
    sb.ok("run", "--name", "steps", "--", *sb.step_job(0.002, 0.003, 60, "batch_size=32", mark=True))
    rc, _, _ = sb.gs("run", "--name", "fails", "--", "sh", "-c", "echo oops; exit 3")
    check(rc == 3, f"the failing job exited {rc}")
    p = subprocess.run([GEN, "--url", sb.store, "--name", "gen", "--hours", "0.08", "--gpus", "4", "--hz", "10",
                        "--metrics", "6", "--start", "1764547200"], capture_output=True, text=True, env=sb.env,
                       timeout=300)
    check(p.returncode == 0, f"serve_gen: {p.stderr}")
    sb.ids = [r["id"] for r in sb.json("runs", "--json")]
    check(len(sb.ids) == 3, f"three runs made: {sb.ids}")
    for rid in sb.ids:
        sb.ok("report", rid, "--json")  # keeps the findings
    sb.file = os.path.join(sb.dir, "runs.jsonl")
    sb.ok("export", *sb.ids, "-o", sb.file)
    sb.b = "sqlite://" + os.path.join(sb.dir, "b.db")
    sb.ok("import", sb.file, "--store", sb.b)


shared = shared_sandbox(setup)


def read_back(sb, store, rid):
    """Everything a reader sees of run rid in store."""
    return {"report": sb.json("report", rid, "--json", "--store", store),
            "samples": sb.json("show", rid, "--json", "--store", store),
            "events": sb.json("show", rid, "--events", "--json", "--store", store),
            "params": sb.json("show", rid, "--params", "--json", "--store", store),
            "notes": sb.json("show", rid, "--notes", "--json", "--store", store),
            "log": sb.gs("log", rid, "--raw", "--times", "--store", store)}


def same_runs(sb, store):
    check(len(sb.ids) == 3, "three runs to compare")
    # the job's output goes with its run (the log section): at least one of the runs printed some
    check(any(read_back(sb, sb.store, rid)["log"][0] == 0 for rid in sb.ids), "no run kept any output")
    for rid in sb.ids:
        a, b = read_back(sb, sb.store, rid), read_back(sb, store, rid)
        # the one difference: the store the run moved into marks it (where from, when); export leaves
        # the mark out, so the exports below are still the same bytes
        mark = b["params"].pop("gpuscope.imported", None)
        check(mark and "gpuscope.imported" not in a["params"] and b["report"]["params"].pop("gpuscope.imported") == mark,
              f"run {rid}: marked imported in {store} ({mark!r}), not in {sb.store}")
        for part in a:
            check(a[part] == b[part], f"run {rid}: its {part} differ between {sb.store} and {store}")
    check(sb.json("runs", "--json") == sb.json("runs", "--json", "--store", store), "the runs lists differ")


def test_import_reads_back_identical():
    sb = shared()
    same_runs(sb, sb.b)
    gen = next(r["id"] for r in sb.json("runs", "--json") if r["name"] == "gen")
    points = sum(len(s["points"]) for s in read_back(sb, sb.b, gen)["samples"]["series"])
    check(points > 65536, f"the generated run spans several appends: {points} points")


def test_export_of_the_import_is_the_same_file():
    sb = shared()
    again = os.path.join(sb.dir, "again.jsonl")
    sb.ok("export", *sb.ids, "-o", again, "--store", sb.b)
    with open(sb.file, "rb") as f1, open(again, "rb") as f2:
        check(f1.read() == f2.read(), "the second store's export differs from the first's")


def test_second_import_adds_nothing():
    sb = shared()
    rc, out, err = sb.gs("import", sb.file, "--store", sb.b)
    check(rc == 0, f"exit {rc}: {err}")
    check("0 runs added, 3 in the store already" in err, err)
    check(out.count("in the store already, nothing added") == 3, out)
    check(len(sb.json("runs", "--json", "--store", sb.b)) == 3, "three runs in the second store")


def test_copy_to_postgresql_and_again_adds_nothing():
    sb = shared()
    with PgServer() as pg:
        env = pg.env(sb.env)
        env["GPUSCOPE_SPOOL_DIR"] = os.path.join(sb.dir, "spool")
        saved, sb.env = sb.env, env
        try:
            url = pg.url("moved")
            rc, _, err = sb.gs("copy", *sb.ids, "--store", sb.b, "--to", url)
            check(rc == 0 and "3 runs added, 0 in the store already" in err, f"exit {rc}: {err}")
            same_runs(sb, url)
            chunks = pg.psql("SELECT count(*) FROM chunks", db="moved")
            rc, _, err = sb.gs("copy", *sb.ids, "--store", sb.b, "--to", url)
            check(rc == 0 and "0 runs added, 3 in the store already" in err, f"exit {rc}: {err}")
            check(pg.psql("SELECT count(*) FROM runs", db="moved") == "3", "three runs on the server")
            check(pg.psql("SELECT count(*) FROM chunks", db="moved") == chunks, "the second copy wrote chunks")
            back = "sqlite://" + os.path.join(sb.dir, "back.db")  # and out of the server again
            sb.ok("copy", *sb.ids, "--store", url, "--to", back)
            again = os.path.join(sb.dir, "back.jsonl")
            sb.ok("export", *sb.ids, "-o", again, "--store", back)
            with open(sb.file, "rb") as f1, open(again, "rb") as f2:
                check(f1.read() == f2.read(), "SQLite -> PostgreSQL -> SQLite changed the export")
        finally:
            sb.env = saved


def test_a_run_of_many_events_imports_whole():
    sb = shared()
    lines = whole(sb).splitlines(keepends=True)
    first = json.loads(lines[1])
    check(first["type"] == "run", "the first run's line")
    rid = first["id"]
    end = next(i for i, ln in enumerate(lines) if '"type":"run_end"' in ln)
    count = json.loads(lines[end])["lines"]
    extra = [json.dumps({"type": "event", "run": rid, "t": 10 ** 12 + k, "kind": "mark", "name": "many", "labels": "",
                         "text": "", "value": k}, separators=(",", ":")) + "\n" for k in range(40000)]
    lines[end] = lines[end].replace(f'"lines":{count}', f'"lines":{count + len(extra)}')
    lines[end:end] = extra  # more events than one append takes (16,384)
    path = os.path.join(sb.dir, "many.jsonl")
    with open(path, "w") as f:
        f.write("".join(lines))
    store = "sqlite://" + os.path.join(sb.dir, "many.db")
    sb.ok("import", path, "--store", store)
    before = sb.json("show", rid, "--events", "--json")
    after = sb.json("show", rid, "--events", "--json", "--store", store)
    check(len(after) == len(before) + 40000, f"{len(after)} events, want {len(before)} + 40000")
    check([e["value"] for e in after if e["name"] == "many"] == list(range(40000)), "the events in their order")


def test_copy_to_a_server_that_is_not_there_says_so_and_spools_nothing():
    sb = shared()
    spool = os.path.join(sb.dir, "spool-away")
    url = f"postgresql://gs@127.0.0.1:{free_port()}/gone?connect_timeout=5"  # a port nobody listens on
    rc, out, err = sb.gs("copy", *sb.ids, "--to", url, env={"GPUSCOPE_SPOOL_DIR": spool})
    check(rc == 3 and "unreachable" in err and len(err.strip().splitlines()) == 1, f"exit {rc}: {err!r}")
    check(out == "" and not os.path.exists(spool), "a copy to a server away wrote something")


def refused(sb, text, why, name="bad.jsonl"):
    path = os.path.join(sb.dir, name)
    with open(path, "w") as f:
        f.write(text)
    store = os.path.join(sb.dir, "never.db")
    rc, out, err = sb.gs("import", path, "--store", "sqlite://" + store)
    check(rc == 2, f"{name}: exit {rc}, not 2: {err}")
    check(why in err and len(err.strip().splitlines()) == 1, f"{name}: not one line saying '{why}': {err!r}")
    check(not os.path.exists(store), f"{name}: a store was made of a refused file")


def whole(sb):
    with open(sb.file) as f:
        return f.read()


def test_truncated_file_refused():
    sb = shared()
    text = whole(sb)
    refused(sb, text[:len(text) // 2], "truncated", "cut_mid_line.jsonl")
    lines = text.splitlines(keepends=True)
    refused(sb, "".join(lines[:-1]), "truncated", "without_end.jsonl")
    refused(sb, "".join(lines[:len(lines) // 2]), "truncated", "cut_at_line.jsonl")
    refused(sb, "", "an empty file", "empty.jsonl")


def test_damaged_line_refused():
    sb = shared()
    lines = whole(sb).splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if '"type":"points"' in ln)
    lines[at] = lines[at].replace('"t":[', '"t":[x', 1)
    refused(sb, "".join(lines), f"line {at + 1}: ", "damaged.jsonl")
    lines = whole(sb).splitlines(keepends=True)
    del lines[at]
    refused(sb, "".join(lines), "lines, the file holds", "line_lost.jsonl")


def test_series_without_a_name_refused():
    # the store's own refusal, in one line, not taken for a repeated series (mutation: store_move.c's
    # `if (id < 0) return id` skipped)
    sb = shared()
    text = whole(sb)
    at = text.index('"type":"series"')
    name = text.index('"name":"', at) + len('"name":"')
    bad = text[:name] + text[text.index('"', name):]
    rc, out, err = sb.gs("import", write_file(sb, "noname.jsonl", bad), "--store",
                         "sqlite://" + os.path.join(sb.dir, "noname.db"))
    check(rc != 0 and "without a name" in err and "repeats" not in err and len(err.strip().splitlines()) == 1,
          f"exit {rc}: {err!r}")


def write_file(sb, name, text):
    path = os.path.join(sb.dir, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_newer_format_refused():
    sb = shared()
    refused(sb, whole(sb).replace('"version":1', '"version":2', 1), "upgrade gpuscope", "newer.jsonl")
    refused(sb, whole(sb).replace(',finding"', ',finding,telemetry"', 1), "'telemetry' section", "section.jsonl")


def test_run_there_in_another_state_refused():
    sb = shared()
    path = os.path.join(sb.dir, "other_state.jsonl")
    with open(path, "w") as f:
        f.write(whole(sb).replace('"status":"finished"', '"status":"killed"'))
    rc, _, err = sb.gs("import", path, "--store", sb.b)
    check(rc == 2 and "in the store already, but finished where the file has it killed" in err, f"exit {rc}: {err}")


def test_running_run_and_unknown_run_refused():
    sb = shared()
    rc, _, err = sb.gs("export", "nosuchrun", "-o", os.path.join(sb.dir, "x.jsonl"))
    check(rc == 2 and "nosuchrun" in err, f"exit {rc}: {err}")
    check(not os.path.exists(os.path.join(sb.dir, "x.jsonl")), "a file was written for an unknown run")
    rc, _, err = sb.gs("copy", sb.ids[0], "--to", sb.store)
    check(rc == 2 and "the store the runs are in" in err, f"exit {rc}: {err}")


def test_job_output_is_exported_as_standard_base64():
    # The job's output as the file carries it: standard base64 with its padding, whatever the length's
    # remainder by 3 (mutation: store_move.c's `i + 1 < n` -> `<=`, a data byte for the padding).
    sb = Sandbox()
    try:
        sb.ok("run", "--name", "out", "--", "sh", "-c", "printf abcd; printf e >&2")
        path = os.path.join(sb.dir, "out.jsonl")
        sb.ok("export", sb.json("runs", "--json")[0]["id"], "-o", path)
        with open(path) as f:
            logs = [json.loads(line) for line in f if '"type":"log"' in line]
        got = sorted((x["stream"], x["data"]) for x in logs)
        check(got == [("err", "ZQ=="), ("out", "YWJjZA==")], f"the log lines: {got}")
    finally:
        sb.close()


run_tests(globals())
