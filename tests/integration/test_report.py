"""`gpuscope report` on real runs: terminal text (no colour off a TTY), JSON with findings and their
evidence, one self-contained HTML file (the web app's run page, its data embedded), the doctor run on demand, exit codes, and a
store with garbage in it that must still report without a crash."""
import json
import os
import re
import sqlite3
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from gstest import BUILD, SRC, Sandbox, check, run_tests, shared_sandbox

def waiting_run(sb):
    # CPU first (where ctest makes the cgroup): a loader that sleeps reads input_latency only when it
    # did not wait for a CPU as well, which a CPU-first neighbour test makes it do
    sb.ok("run", "--quiet", "--name", "waits", "--",
          *sb.step_job(0.03, 0.01, 60, "num_workers=0", "batch_size=32", mark=True,
                       out=os.path.join(sb.dir, "waits.json")), first=True)


sandbox = shared_sandbox(waiting_run)


def test_text_report_names_findings_evidence_and_fix():
    out = sandbox().ok("report", "waits")
    check("findings" in out and "fix:" in out and "evidence:" in out, out)
    check("\033[" not in out, "no colour when stdout is not a terminal")
    check(re.search(r"\d+ steps, [\d.]+ samples/s", out), out)


def test_text_evidence_is_in_units_json_keeps_raw_numbers():
    sb = sandbox()
    out = sb.ok("report", "waits")
    # data_wait_share=0.74 in JSON, "74%" for people; step_s=0.04 in JSON, "40.1 ms" for people
    check(re.search(r"data_wait_share=\d+%", out) and re.search(r"step_s=[\d.]+ ms", out), out)
    check(not re.search(r"_share=0\.\d+\s", out) and "e+0" not in out, "raw numbers in the text evidence")
    # the model's internals are for --json: the text says where they are
    check("step_model=" not in out and "change=" not in out and "model=" not in out
          and "how this was estimated" in out, out)
    rep = sb.json("report", "waits", "--json")
    ev = rep["findings"][0]["evidence"]
    check("step_model" in ev and "change" in ev, f"--json keeps the model: {ev}")
    check(isinstance(ev["data_wait_share"], float) and ev["data_wait_share"] < 1, str(ev))
    # one combined estimate for two or more findings, else null (one finding has nothing to combine)
    c = rep["combined"]
    n = len([f for f in rep["findings"] if f["rule"] not in ("healthy", "underused_gpus")])
    check((c is None) == (n < 2), f"combined {c} for {n} findings")
    if c:
        check(c["speedup"] <= max(f["speedup"] for f in rep["findings"]) * 20 and "Together" in out, str(c))


def test_json_report_has_run_figures_and_findings():
    rep = sandbox().json("report", "waits", "--json")
    check(rep["run"]["name"] == "waits" and rep["run"]["status"] == "finished", str(rep["run"]))
    check(rep["params"]["num_workers"] == "0", str(rep["params"]))
    fig = rep["figures"]
    with open(os.path.join(sandbox().dir, "waits.json")) as f:
        own = json.load(f)  # what the job measured itself (a loaded machine preempts its compute spin)
    share = own["data_s"] / (own["data_s"] + own["compute_s"])
    check(fig["steps"] >= 50 and abs(fig["samples_per_s"] - own["samples"] / own["wall_s"]) < 0.02 * fig["samples_per_s"]
          and abs(fig["data_share"] - share) < 0.02, f"{fig}; the job measured {own}")
    check(fig["gpus"] == 0 and fig["gpu_util_pct"] is None, "no GPU: absent, not zero")
    check(rep["findings"], "at least one finding (or healthy)")
    for f in rep["findings"]:
        check(set(f) >= {"rule", "severity", "share", "lost_s", "speedup", "title", "evidence", "fix"}, str(f))
        check(isinstance(f["evidence"], dict) and f["fix"], str(f))
    top = rep["findings"][0]
    check(top["rule"] == "input_latency", f"a sleeping loader: {top['rule']}")
    # one share, one place: the finding's cost is the run's data share, the same number (the run view's),
    # however loaded the machine (the speed-up is the step model's and may say the fix wins back less)
    # (the evidence keeps six digits)
    check(top["share"] == fig["data_share"] and abs(top["evidence"]["data_wait_share"] - fig["data_share"]) < 1e-6,
          f"input_latency's share {top['share']!r}, the run's data share {fig['data_share']!r}")


def embedded(html):
    """The data a self-contained page carries (window.GS_EMBED), parsed."""
    start = html.index("window.GS_EMBED = ") + len("window.GS_EMBED = ")
    return json.loads(html[start:html.index(";</script>", start)])


def check_self_contained(html):
    check(html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>"), html[:80])
    for bad in ("<link", " src=", "@import", "url(http"):
        check(bad not in html, f"{bad} in a self-contained page")
    urls = set(re.findall(r"https?://[^\s\"'`)<>]+", html))
    # only XML namespace names and uPlot's licence notice; nothing is fetched (tests/e2e watches the requests)
    check(all(u.startswith(("http://www.w3.org/", "https://github.com/leeoniya/uPlot")) for u in urls),
          f"network addresses in the page: {urls}")
    check(html.count("<script>") == 3 and "window.GS_EMBED" in html, "the web page: its data, uPlot and the app, inline")


def test_html_report_is_one_self_contained_file():
    sb = sandbox()
    path = os.path.join(sb.dir, "r.html")
    out = sb.ok("report", "waits", "--html", path)
    check(path in out, out)
    html = open(path, encoding="utf-8").read()
    check_self_contained(html)
    emb = embedded(html)
    check(emb["mode"] == "run" and len(emb["runs"]) == 1, "the run page")
    run = next(iter(emb["runs"].values()))
    check(run["run"]["name"] == "waits" and run["findings"], "the run and its findings")
    names = {s["name"] for s in next(iter(emb["series"].values()))}
    check({"step.total_s", "step.data_s", "host.cpu.busy_pct"} <= names, f"step chart and CPU heat map data: {names}")
    check(any(e["kind"] == "mark" and e["name"] == "epoch" for e in run["events"]), "the mark")
    check(oct(os.stat(path).st_mode & 0o777) != "0o600", "a report is created like any file")


def test_html_to_stdout_with_dash():
    rc, out, _ = sandbox().gs("report", "waits", "--html", "-")
    check(rc == 0 and out.startswith("<!DOCTYPE html>"), out[:80])


def test_gpu_report_charts_gpus_and_throttling():
    lib = os.path.join(BUILD, "tests", "gpusim", "libnvidia-ml.so.1")
    # The simulated library is built with the project (tests/gpusim): missing, the build is broken.
    check(os.path.exists(lib), f"{lib} is missing: tests/gpusim was not built")
    sb = sandbox()
    # The scenario's clock (GPUSIM_CLOCK) runs at a twentieth of real time from 2.05 s, inside its
    # thermal slowdown (2-4 s): throttled for the whole run however long a loaded machine makes it
    # (on the wall clock, its 2 s of throttling were a share of a run of any length, and fell under the
    # rule's threshold when the job ran slower). The clock still moves, as GPM readings need.
    import threading
    clock, done = os.path.join(sb.dir, "clock"), threading.Event()

    def tick():
        t0 = time.monotonic()
        while not done.is_set():
            with open(clock + ".tmp", "w") as f:
                f.write(f"{min(3.95, 2.05 + (time.monotonic() - t0) / 20):.4f}\n")
            os.replace(clock + ".tmp", clock)
            done.wait(0.05)
    tick_thread = threading.Thread(target=tick, daemon=True)
    tick_thread.start()
    env = {"GPUSCOPE_NVML_LIB": lib, "GPUSIM_CLOCK": clock,
           "GPUSIM_SCENARIO": os.path.join(SRC, "tests", "gpusim", "scenarios", "throttled.scn")}
    try:
        sb.ok("run", "--quiet", "--name", "hot", "--", *sb.step_job(0.001, 0.02, 300, mark=True), env=env, timeout=600)
    finally:
        done.set()
        tick_thread.join()
    path = os.path.join(sb.dir, "hot.html")
    sb.ok("report", "hot", "--html", path)
    html = open(path, encoding="utf-8").read()
    emb = embedded(html)
    names = {s["name"] for s in next(iter(emb["series"].values()))}
    for name in ("gpu.util_pct", "gpu.sm_active_pct", "gpu.mem_used_bytes", "gpu.power_w", "gpu.temp_c"):
        check(name in names, f"no {name} for its chart")
    events = next(iter(emb["runs"].values()))["events"]
    check(any(e["kind"] == "throttle_start" and e["name"] == "SwThermalSlowdown" for e in events),
          "throttle spans are marked")
    rep = sb.json("report", "hot", "--json")
    check(rep["figures"]["gpus"] == 1 and rep["gpus"][0]["name"] == "NVIDIA H200", str(rep["gpus"]))
    check("throttled" in [f["rule"] for f in rep["findings"]], str([f["rule"] for f in rep["findings"]]))


def test_a_gpu_that_gave_no_figure_is_still_shown():
    # dark1of3.scn: GPU 1 answers UNKNOWN to every call, so it has no series at all, but the agent
    # counted it (gpu.count 3). The report's text, --json and the web page's GPU table list all three,
    # GPU 1's figures unknown (they listed GPUs 0 and 2 only); the run summary too.
    lib = os.path.join(BUILD, "tests", "gpusim", "libnvidia-ml.so.1")
    sb = Sandbox()
    try:
        env = {"GPUSCOPE_NVML_LIB": lib,
               "GPUSIM_SCENARIO": os.path.join(SRC, "tests", "gpusim", "scenarios", "dark1of3.scn")}
        rc, _, err = sb.gs("run", "--name", "dark", "--", "sleep", "1", env=env)
        check(rc == 0 and re.search(r"GPU 1: util mean —, min —; memory peak —", err), f"the summary:\n{err}")
        check(re.search(r"GPU 2: util mean 80%", err), f"GPU 2 after it:\n{err}")
        out = sb.ok("report", "dark")
        check(re.search(r"^  GPU 1: util — \(min —\)", out, re.M) and re.search(r"^  GPU 2: util 80%", out, re.M)
              and "3 GPUs: NVIDIA H100 80GB HBM3, —, NVIDIA H100" in out,
              f"the text report:\n{out}")
        rep = sb.json("report", "dark", "--json")
        check([g["index"] for g in rep["gpus"]] == [0, 1, 2] and rep["gpus"][1]["util_pct"] is None,
              f"--json gpus: {rep['gpus']}")
        path = os.path.join(sb.dir, "dark.html")
        sb.ok("report", "dark", "--html", path)
        gpus = next(iter(embedded(open(path, encoding="utf-8").read())["runs"].values()))["gpus"]
        check([g["index"] for g in gpus] == [0, 1, 2] and gpus[1]["util"] is None and gpus[1]["mem_peak_bytes"] is None,
              f"the page's GPU table: {gpus}")
    finally:
        sb.close()


def test_exit_codes():
    sb = sandbox()
    for args, code in ((["report"], 2), (["report", "nope"], 2), (["report", "waits", "--bogus"], 2),
                       (["report", "waits", "--html"], 2), (["report", "a", "b"], 2)):
        rc, _, err = sb.gs(*args)
        check(rc == code and err.startswith("gpuscope: "), f"{args}: {rc} {err!r}")
    junk = os.path.join(sb.dir, "junk.db")
    with open(junk, "w") as f:
        f.write("not a store\n" * 100)
    rc, _, err = sb.gs("report", "last", "--store", "sqlite://" + junk)
    check(rc == 3, f"not a store: {rc} {err!r}")
    rc, _, _ = sb.gs("report", "waits", "--html", "/nonexistent/dir/r.html")
    check(rc == 2, f"unwritable --html: {rc}")
    rc, out, _ = sb.gs("report", "--help")
    check(rc == 0 and "usage: gpuscope report" in out, out)


def test_report_diagnoses_a_run_without_findings():
    sb = sandbox()
    rid = sb.json("report", "waits", "--json")["run"]["id"]
    db = sqlite3.connect(sb.db)
    db.execute("DELETE FROM findings WHERE run_id = ?", (rid,))
    db.commit()
    rep = sb.json("report", "waits", "--json")
    check(rep["diagnosed_now"] is True and rep["findings"], "the doctor ran")
    n = db.execute("SELECT count(*) FROM findings WHERE run_id = ?", (rid,)).fetchone()[0]
    check(n == len(rep["findings"]), "and its findings were stored")
    check(sb.json("report", "waits", "--json")["diagnosed_now"] is False, "the next report reads them")
    db.close()


def test_garbage_in_the_store_does_not_break_the_report():
    sb = Sandbox()
    try:
        sb.ok("run", "--quiet", "--name", "g", "--", *sb.step_job(0.001, 0.01, 30, mark=True))
        rid = sb.json("report", "g", "--json")["run"]["id"]
        db = sqlite3.connect(sb.db)
        evil = b"\x1b[31mred\x1b[0m \xff\xfe bad utf-8 \xc0\xaf <script>alert(1)</script> \"quote\\"
        db.execute("UPDATE findings SET evidence = ?, title = ?, fix = ?, rule = ?, severity = ? WHERE run_id = ?",
                   (b'{"unterminated": [1, 2', evil, evil, evil[:20], evil[:10], rid))
        db.execute("INSERT INTO findings VALUES(?, 99, 'x', 'high', 1e308, -5, 'nan', ?, '{\"a\":{\"b\":[1,{}]}}', '')",
                   (rid, evil))
        db.execute("INSERT OR REPLACE INTO params VALUES(?, ?, ?)", (rid, evil, evil))
        db.execute("UPDATE runs SET name = ?, command = ?, start_wall_ns = ?, end_wall_ns = ? WHERE id = ?",
                   (evil, evil, -(2 ** 63) + 1, 2 ** 63 - 1, rid))
        db.commit()
        db.close()
        out = sb.ok("report", rid)
        check("\x1b" not in out, "no escape sequence from the store reaches the terminal")
        rc, raw, err = sb.gs("report", rid, "--json")
        check(rc == 0, err)
        rep = json.loads(raw)
        check(any("evidence_text" in f for f in rep["findings"]), "invalid evidence comes back as text")
        path = os.path.join(sb.dir, "g.html")
        sb.ok("report", rid, "--html", path)
        html = open(path, encoding="utf-8").read()
        check("<script>alert" not in html and "&lt;script&gt;alert" in html, "store text is escaped in HTML")
        sb.ok("compare", rid, rid)
    finally:
        sb.close()


def test_a_diagnosis_that_fails_is_an_error_with_its_cause():
    # The host CPU series' chunks damaged (as a cut write or a bad disk leaves them) and no findings
    # stored: the doctor cannot read what it needs. Before, the report said "the diagnosis could not
    # run" with no reason, --json gave "findings": [] and both exited 0.
    sb = Sandbox()
    try:
        sb.ok("run", "--quiet", "--name", "dmg", "--", *sb.step_job(0.01, 0.01, 20))
        rid = sb.json("report", "dmg", "--json")["run"]["id"]
        db = sqlite3.connect(sb.db)
        db.execute("DELETE FROM findings WHERE run_id = ?", (rid,))
        db.execute("UPDATE chunks SET data = x'0102' WHERE series_id IN (SELECT id FROM series WHERE run_id = ? "
                   "AND name = 'host.cpu.busy_pct' AND labels = 'cpu=total')", (rid,))
        db.execute("DELETE FROM rollups")
        db.commit()
        db.close()
        rc, out, err = sb.gs("report", "dmg")
        check(rc == 1, f"exit 1 for a failed diagnosis: {rc}\n{err}")
        check(re.search(r"^gpuscope: report: run \w+: the diagnosis could not run: .*corrupt", err, re.M), err)
        check(re.search(r"none: the diagnosis could not run: .*corrupt", out), out)
        rc, raw, err = sb.gs("report", "dmg", "--json")
        rep = json.loads(raw)
        check(rc == 1 and "corrupt" in rep.get("error", "") and rep["findings"] is None,
              f"--json: rc {rc}, error {rep.get('error')!r}, findings {rep['findings']!r}")
        path = os.path.join(sb.dir, "dmg.html")
        rc, _, err = sb.gs("report", "dmg", "--html", path)
        check(rc == 1 and "could not run" in err and "findings_error" in open(path, encoding="utf-8").read(),
              f"--html: rc {rc} {err!r}")
        rc, _, err = sb.gs("compare", "dmg", "dmg")
        check(rc == 1 and "compare: run" in err and "could not run" in err, f"compare: rc {rc} {err!r}")
    finally:
        sb.close()


def test_findings_the_store_refuses_are_said_and_still_reported():
    # The store refuses the new findings (a trigger stands in for a full disk): the report still has
    # them and exits 0, and stderr says they were not kept. Before, nothing said so.
    sb = Sandbox()
    try:
        sb.ok("run", "--quiet", "--name", "ro", "--", *sb.step_job(0.01, 0.01, 20))
        rid = sb.json("report", "ro", "--json")["run"]["id"]
        db = sqlite3.connect(sb.db)
        db.execute("DELETE FROM findings WHERE run_id = ?", (rid,))
        db.execute("CREATE TRIGGER refuse BEFORE INSERT ON findings BEGIN SELECT RAISE(ABORT, 'disk full (test)'); END")
        db.commit()
        db.close()
        rc, raw, err = sb.gs("report", "ro", "--json")
        rep = json.loads(raw)
        check(rc == 0 and rep["findings"] and "error" not in rep, f"rc {rc}: {rep.get('findings')}")
        check(re.search(r"run \w+: the findings were not saved in the store: .*disk full \(test\)", err), err)
    finally:
        sb.close()


def test_run_summary_ends_with_the_diagnosis():
    sb = sandbox()
    rc, _, err = sb.gs("run", "--name", "sum", "--", *sb.step_job(0.03, 0.01, 40, mark=True))
    check(rc == 0, err)
    lines = err.splitlines()
    steps = [i for i, l in enumerate(lines) if l.strip().startswith("steps:")]
    diag = [i for i, l in enumerate(lines) if l.strip().startswith("diagnosis")]
    check(steps and diag and diag[0] > steps[0], err)
    check(any(re.match(r"\s+1\. \w+ ", l) for l in lines[diag[0]:]), err)


if __name__ == "__main__":
    run_tests(globals())
