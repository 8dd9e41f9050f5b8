"""The bidirectional controls (U+202A-U+202E embeddings and overrides, U+2066-U+2069 isolates) never
reach the terminal raw: a run named "\u202Egnp.exe" would display as "exe.png". `runs`, `show`,
`report`, `compare` and the run's own summary show each as the visible text "<U+202E>"; CSV fields too;
`tune`'s table and progress lines as '?'; `devices` shows the driver's GPU name the same way (an
escape sequence dropped); JSON keeps the text exactly (`top` is test_tui's gs_term_escape, which every
string `top` draws goes through)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from gstest import BUILD, Sandbox, check, run_tests, shared_sandbox

RLO, LRI, PDI, LRE = "\u202e", "\u2066", "\u2069", "\u202a"
BIDI = [chr(c) for c in list(range(0x202A, 0x202F)) + list(range(0x2066, 0x206A))]
NAME = RLO + "gnp.exe"
TAG = "x" + LRI + "y" + PDI + LRE + "z"
SUMMARY = {}


def setup(sb):
    rc, out, err = sb.gs("run", "--name", NAME, "--tag", "t=" + TAG, "--", "true")
    check(rc == 0, err)
    SUMMARY["err"] = err
    sb.ok("run", "--quiet", "--name", "plain", "--", "true")


sandbox = shared_sandbox(setup)


def raw(out, what):
    check(not any(c in out for c in BIDI), f"{what}: a bidirectional control came through raw: {out!r}")


def test_runs_shows_the_override_escaped():
    sb = sandbox()
    out = sb.ok("runs")
    raw(out, "runs")
    check("<U+202E>gnp.exe" in out, out)
    check(NAME in [r["name"] for r in sb.json("runs", "--json")], "JSON keeps the name exactly")


def test_show_params_table_and_csv():
    sb = sandbox()
    out = sb.ok("show", NAME, "--params")
    raw(out, "show --params")
    check("x<U+2066>y<U+2069><U+202A>z" in out, out)
    csv = sb.ok("show", NAME, "--params", "--csv")
    raw(csv, "show --params --csv")
    check(sb.json("show", NAME, "--params", "--json")["tag.t"] == TAG, "JSON keeps the tag exactly")


def test_report_and_the_run_summary():
    sb = sandbox()
    out = sb.ok("report", NAME)
    raw(out, "report")
    check("<U+202E>gnp.exe" in out, out)
    raw(SUMMARY["err"], "the run's summary")


def test_compare():
    sb = sandbox()
    out = sb.ok("compare", NAME, "plain")
    raw(out, "compare")
    check("<U+202E>gnp.exe" in out, out)


def test_tune_table_and_progress():
    sb = Sandbox()
    try:
        rc, out, err = sb.gs("tune", "--name", "bidi", "--steps", "2", "--warmup", "0",
                             "--param", "v=" + RLO + "a," + LRI + "b", "--", "sh", "-c", "exit 0", "{v}")
        check(rc == 1, f"nothing measured: exit {rc}\n{out}\n{err}")
        raw(out, "tune's table")
        raw(err, "tune's progress")
        check("v=?a" in out and "v=?b" in out, out)
    finally:
        sb.close()


def test_devices_escapes_the_drivers_gpu_name():
    sb = Sandbox()
    try:
        scn = os.path.join(sb.dir, "name.scn")
        with open(scn, "w") as f:
            f.write("driver 550.54.15\ndevice 0\n  name NVIDIA " + RLO + "evil\x1b[31m H100\n  memory 81559MiB\n"
                    "  at 0 util=1\n")
        env = {"GPUSCOPE_NVML_LIB": os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1"), "GPUSIM_SCENARIO": scn}
        out = sb.ok("devices", env=env)
        raw(out, "devices")
        check("\x1b" not in out and "GPU 0: NVIDIA <U+202E>evil[31m H100 (UUID:" in out, out)
        name = sb.json("devices", "--json", env=env)["devices"][0]["name"]
        check(name == "NVIDIA " + RLO + "evil\x1b[31m H100", f"JSON keeps the name exactly: {name!r}")
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
