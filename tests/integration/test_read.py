"""The read-back commands (`runs`, `show`, `metrics`) on a real run: formats, filters, run
references and errors."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from gstest import Sandbox, check, run_tests

SB = None


def sandbox():
    global SB
    if SB is None:
        SB = Sandbox()
        # A busy loop that lasts 1.2 s of wall time however fast the machine is, so the 0.3-0.6 s
        # window below always holds ticks (a fixed iteration count ended before 0.3 s on a fast core).
        # It writes its own CPU share (process CPU time over wall time, in %), which the job CPU
        # series is checked against: on a loaded machine the loop gets less CPU, and says so.
        own, script = os.path.join(SB.dir, "own_cpu"), os.path.join(SB.dir, "busy.py")
        with open(script, "w") as f:
            f.write("import time\nt0 = time.monotonic(); t = t0 + 1.2\nwhile time.monotonic() < t: pass\n"
                    f"open({own!r}, 'w').write(str(100 * time.process_time() / (time.monotonic() - t0)))\n")
        SB.ok("run", "--quiet", "--name", "base", "--", "sh", "-c", f"exec {os.environ.get('GS_PYTHON', '/usr/bin/python3')} {script}")
    return SB


def test_runs_table_and_json():
    sb = sandbox()
    out = sb.ok("runs")
    check(out.splitlines()[0].split()[:4] == ["ID", "NAME", "STATUS", "START"], out)
    runs = sb.json("runs", "--json")
    check(runs[0]["name"] == "base" and runs[0]["duration_s"] > 0 and "sh -c" in runs[0]["command"], str(runs))


def test_run_references_resolve():
    sb = sandbox()
    rid = sb.json("runs", "--json")[0]["id"]
    for ref in (rid, rid[:12], "base", "last"):
        out = sb.json("metrics", ref, "--json")
        check(len(out) > 10, f"{ref}: {len(out)} series")


def test_unknown_run_is_exit_2():
    sb = sandbox()
    for cmd in (["show", "nope"], ["metrics", "nope"], ["show"]):
        rc, _, err = sb.gs(*cmd)
        check(rc == 2 and len(err.strip().splitlines()) == 1, f"{cmd}: {rc} {err!r}")


def test_show_csv_glob_and_window():
    sb = sandbox()
    rows = sb.csv("show", "last", "--metric", "host.cpu.*", "--csv")
    names = {r["name"] for r in rows}
    check(names and all(n.startswith("host.cpu.") for n in names), str(names))
    check({r["labels"] for r in rows} >= {"cpu=total", "cpu=0"}, str({r["labels"] for r in rows}))
    win = sb.csv("show", "last", "--metric", "tree.cpu_pct", "--from", "0.3s", "--to", "0.6s", "--csv")
    check(win and all(0.3 <= float(r["t_s"]) <= 0.6 for r in win), str(win))
    job = sb.csv("show", "last", "--metric", "tree.cpu_pct", "--csv")
    with open(os.path.join(sb.dir, "own_cpu")) as f:
        own = float(f.read())
    peak = max(float(r["value"]) for r in job)
    check(own > 0 and peak >= own / 2, f"the busy loop used {own:.0f}% of a core by its own count; the job CPU "
          f"series peaks at {peak:.0f}%")


def test_show_json_and_label_glob():
    sb = sandbox()
    data = sb.json("show", "last", "--metric", "*{cpu=total}", "--json")
    check(data["series"] and all(s["labels"] == "cpu=total" for s in data["series"]), str(data)[:300])
    check(all(s["points"] for s in data["series"]) and all(len(p) == 2 for s in data["series"] for p in s["points"]),
          str(data)[:300])


def test_show_rejects_conflicting_formats():
    sb = sandbox()
    rc, _, err = sb.gs("show", "last", "--csv", "--json")
    check(rc == 2, err)


def test_metrics_lists_units_and_counts():
    sb = sandbox()
    ms = sb.json("metrics", "last", "--json")
    by = {(m["name"], m["labels"]): m for m in ms}
    check(by[("host.mem.used_bytes", "")]["unit"] == "B", str(by.get(("host.mem.used_bytes", ""))))
    check(by[("tree.cpu_pct", "")]["count"] >= 3)


def test_metrics_json_with_a_filter_is_valid_json():
    # the first series (sorted by source) is filtered out: the list must not start with a comma
    sb = sandbox()
    ms = sb.json("metrics", "last", "--metric", "tree.*", "--json")
    check(ms and all(m["name"].startswith("tree.") for m in ms), str(ms)[:300])
    check(sb.json("metrics", "last", "--metric", "no.such.*", "--json") == [], "an empty filter is []")


def test_metrics_catalog_lists_every_collector():
    sb = sandbox()
    cat = sb.json("metrics", "--catalog", "--json")
    names = {m["name"] for m in cat}
    check({"host.cpu.busy_pct", "tree.cpu_pct", "gpu.util_pct"} <= names, str(sorted(names))[:400])
    check(all(m["help"] for m in cat), "a metric without a description")


if __name__ == "__main__":
    try:
        run_tests(globals())
    finally:
        if SB:
            SB.close()
