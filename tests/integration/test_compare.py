"""`gpuscope compare` on real runs: the side-by-side table, each run's speed-up over the first (the
ratio of measured throughputs), the params that differ, the findings that appeared or disappeared,
JSON and self-contained HTML forms, and exit codes. The throughputs are checked against what each job
measured itself (its own step count and wall time), not against a band."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from gstest import check, run_tests, shared_sandbox


def two_runs(sb):
    # "slow" waits 30 ms for each batch; "fast" is the same loop with the wait gone.
    for name, data, steps, workers in (("slow", 0.03, 60, "0"), ("fast", 0.0, 150, "4")):
        out = os.path.join(sb.dir, f"{name}.json")
        sb.ok("run", "--quiet", "--name", name, "--",
              *sb.step_job(data, 0.01, steps, f"num_workers={workers}", "batch_size=32", out=out), first=True)


def measured(name):
    """What job `name` measured itself: {steps, samples, wall_s}."""
    with open(os.path.join(sandbox().dir, f"{name}.json")) as f:
        return json.load(f)


sandbox = shared_sandbox(two_runs)


def test_table_shows_speedup_params_and_findings():
    out = sandbox().ok("compare", "slow", "fast")
    for row in ("throughput (samples/s)", "speed-up vs first", "median step", "data wait", "GPU util",
                "energy per sample", "GPU-hours idle"):
        check(row in out, f"no row {row!r}:\n{out}")
    check("num_workers" in out and "batch_size" not in out.split("params that differ")[1].split("findings")[0],
          f"only differing params:\n{out}")
    check("disappeared: input_latency" in out, out)
    check("\033[" not in out, "no colour off a terminal")


def test_json_speedup_is_the_throughput_ratio():
    cmp = sandbox().json("compare", "slow", "fast", "--json")
    a, b = cmp["runs"]
    check(a["speedup_vs_first"] == 1, str(a["speedup_vs_first"]))
    ratio = b["figures"]["samples_per_s"] / a["figures"]["samples_per_s"]
    check(abs(b["speedup_vs_first"] - ratio) < 1e-6, f"{b['speedup_vs_first']} vs {ratio}")
    # Against the jobs' own measure: samples over their wall time from the first step's start to the
    # last step's end (the window the tool measures over; 2 % for the clock and message rounding).
    own = {}
    for run, name in ((a, "slow"), (b, "fast")):
        m = measured(name)
        own[name] = m["samples"] / m["wall_s"]
        got = run["figures"]["samples_per_s"]
        print(f"     {name}: {got:.2f} samples/s by gpuscope, {own[name]:.2f} by the job")
        check(abs(got - own[name]) / own[name] < 0.02, f"{name}: {got:.1f} samples/s, the job measured {own[name]:.1f}")
    want = own["fast"] / own["slow"]
    check(abs(b["speedup_vs_first"] - want) / want < 0.03, f"speed-up {b['speedup_vs_first']:.3f}, the jobs' own {want:.3f}")
    check(cmp["params_differing"]["num_workers"] == ["0", "4"], str(cmp["params_differing"]))
    check("input_latency" in b["disappeared"] and "input_latency" in a["rules"], str(b))
    check(a["appeared"] == [] and a["disappeared"] == [], "the first run is the baseline")


def test_html_is_self_contained():
    sb = sandbox()
    path = os.path.join(sb.dir, "cmp.html")
    out = sb.ok("compare", "slow", "fast", "--html", path)
    check(path in out, out)
    html = open(path, encoding="utf-8").read()
    for bad in ("<link", " src=", "@import", "url(http"):
        check(bad not in html, f"{bad} in a self-contained page")
    urls = set(re.findall(r"https?://[^\s\"'`)<>]+", html))
    # only XML namespace names and uPlot's licence notice; nothing is fetched (tests/e2e watches the requests)
    check(all(u.startswith(("http://www.w3.org/", "https://github.com/leeoniya/uPlot")) for u in urls),
          f"network addresses in the page: {urls}")
    check('"mode":"compare"' in html and '"params_differ":[{"key":"num_workers"' in html and '"speedup":' in html,
          "the compare page's data: runs with speed-ups, differing params")


def test_three_runs_each_against_the_first():
    cmp = sandbox().json("compare", "slow", "fast", "slow", "--json")
    check(len(cmp["runs"]) == 3 and abs(cmp["runs"][2]["speedup_vs_first"] - 1) < 1e-9, str(cmp["runs"][2]))


def test_exit_codes():
    sb = sandbox()
    for args in (["compare"], ["compare", "slow"], ["compare", "slow", "nope"], ["compare", "slow", "fast", "-x"]):
        rc, _, err = sb.gs(*args)
        check(rc == 2 and err.startswith("gpuscope: "), f"{args}: {rc} {err!r}")
    junk = os.path.join(sb.dir, "junk.db")
    with open(junk, "w") as f:
        f.write("not a store\n" * 100)
    rc, _, _ = sb.gs("compare", "slow", "fast", "--store", "sqlite://" + junk)
    check(rc == 3, f"not a store: {rc}")


if __name__ == "__main__":
    run_tests(globals())
