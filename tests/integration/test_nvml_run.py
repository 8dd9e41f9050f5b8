"""Integration: `gpuscope run` with the simulated libnvidia-ml.so.1 (tests/gpusim) playing each
scenario, read back through `show --csv`, `show --events --csv`, `show --notes` and
`show --params --json`. Scenario time starts at the collector's nvmlInit, a few milliseconds after
the run's t_s = 0, so every time window below keeps well clear of the scenario's edges."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
SCN = os.path.join(SRC, "tests/gpusim/scenarios")
GIB = 1 << 30


def run(box, scenario, name, seconds, *extra):
    """Runs `sleep SECONDS` (as a shell that writes its pid first) under gpuscope with the scenario;
    returns the job's pid."""
    check(os.path.exists(SIM), f"{SIM} is not built")
    pidfile = os.path.join(box.dir, name + ".pid")
    env = {"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": os.path.join(SCN, scenario)}
    box.env.pop("GPUSIM_JOBPID", None)  # $JOBPID must resolve to the job gpuscope starts
    box.ok("run", "--quiet", "--name", name, *extra, "--", "sh", "-c", f"echo $$ > {pidfile}; exec sleep {seconds}",
           env=env)
    with open(pidfile) as f:
        return int(f.read())


def series(rows, name, labels):
    return [(float(r["t_s"]), float(r["value"])) for r in rows if r["name"] == name and r["labels"] == labels]


def series_times(rows, name, labels):
    return [t for t, _ in series(rows, name, labels)]


def test_busy8_every_gpu_is_sampled_with_static_facts_as_params():
    box = Sandbox()
    try:
        run(box, "busy8_h200.scn", "busy8", 3)
        rows = box.csv("show", "busy8", "--csv")
        for g in range(8):
            for name in ("gpu.util_pct", "gpu.power_w", "gpu.mem_used_bytes", "gpu.sm_active_pct",
                         "gpu.tensor_active_pct", "gpu.energy_j", "gpu.throttle_reasons"):
                check(len(series(rows, name, f"gpu={g}")) >= 5, f"too few {name} points for gpu {g}")
            check(not series(rows, "gpu.fan_pct", f"gpu={g}"), "fan is not supported: no series")
        check(all(r["source"] == "nvml" for r in rows if r["name"].startswith("gpu.")), "source is nvml")
        p = box.json("show", "busy8", "--params", "--json")
        check(p.get("gpu.count") == "8", f"gpu.count {p.get('gpu.count')}")
        check(p.get("gpu.5.name") == "NVIDIA H200", f"gpu.5.name {p.get('gpu.5.name')}")
        check(p.get("gpu.5.cc") == "9.0" and p.get("gpu.0.mig_mode") == "disabled", "cc / mig mode")
        check(p.get("gpu.7.uuid") == "GPU-5a1c0000-0000-4000-8000-000000000007", "uuid")
        check(p.get("nvml.driver_version") == "550.54.15", "driver version")
        host = {r["t_s"] for r in rows if r["source"] == "host"}
        gpu = [r["t_s"] for r in rows if r["name"] == "gpu.temp_c" and r["labels"] == "gpu=0"]
        shared = sum(t in host for t in gpu)
        # A reading the NVML thread took late carries its read time (counted in nvml.late_readings);
        # every other tick's reading shares the host's tick time, but the thread's first tick or two
        # before it picks up the run loop's grid.
        late = int(p.get("nvml.late_readings", "0"))
        check(shared >= len(gpu) - 3 - late,
              f"only {shared} of {len(gpu)} GPU ticks share the host's tick times ({late} readings late)")
        notes = box.ok("show", "busy8", "--notes").splitlines()
        check(sum("fan speed: Not Supported" in n for n in notes) == 8, f"one fan note per GPU: {notes}")
    finally:
        box.close()


def test_busy8_values_follow_the_timeline():
    box = Sandbox()
    try:
        run(box, "busy8_h200.scn", "tl", 3.2)
        rows = box.csv("show", "tl", "--csv")
        u0, u3 = series(rows, "gpu.util_pct", "gpu=0"), series(rows, "gpu.util_pct", "gpu=3")
        check([v for t, v in u0 if 0.3 < t < 1.9] and all(v == 97 for t, v in u0 if 0.3 < t < 1.9), f"gpu0 {u0}")
        check(any(v == 5 for t, v in u0 if 2.05 < t < 2.45), f"the stall at 2 s is missing on gpu 0: {u0}")
        check(all(v == 40 for t, v in u3 if 1.6 < t < 1.9 or 2.6 < t < 3.0), f"gpu3 straggles at 40 %: {u3}")
        check(all(v == 640 for t, v in series(rows, "gpu.power_w", "gpu=1") if 0.2 < t < 1.9), "power 640 W")
        mem = series(rows, "gpu.mem_used_bytes", "gpu=2")
        check(mem and all(v == 120 * GIB for _, v in mem), "mem used 120 GiB")
        e = series(rows, "gpu.energy_j", "gpu=0")
        pairs = [(a, b) for a, b in zip(e, e[1:]) if 0.2 < a[0] and b[0] < 1.9]
        check(len(pairs) > 5, "energy points")
        check(all(e2 > e1 for (_, e1), (_, e2) in pairs), "energy is a rising counter")
        # The counter is read when the NVML thread runs but stamped with the tick's scheduled time,
        # so one reading may lag under load: check the slope over the whole window, not per tick.
        (t1, e1), (t2, e2) = pairs[0][0], pairs[-1][1]
        check(abs((e2 - e1) / (t2 - t1) - 640) < 640 * 0.15, f"energy grows at 640 W: {t1} {e1} {t2} {e2}")
        nv = series(rows, "gpu.nvlink_rx_bytes_s", "gpu=4")
        check(nv and all(abs(v - 120 * GIB) < 1 for t, v in nv if 0.3 < t < 1.9), f"nvlink rx {nv[:3]}")
    finally:
        box.close()


def test_busy8_process_memory_joins_the_job_process_tree():
    box = Sandbox()
    try:
        pid = run(box, "busy8_h200.scn", "procs", 2)
        rows = box.csv("show", "procs", "--csv")
        mine = series(rows, "gpu.proc_mem_bytes", f"gpu=0,pid={pid}")
        check(len(mine) >= 5 and mine[-1][1] == 118 * GIB, f"gpu.proc_mem_bytes for the job's pid {pid}: {mine[:3]}")
        others = {r["labels"] for r in rows if r["name"] == "gpu.proc_mem_bytes"} - \
            {f"gpu={g},pid={pid}" for g in range(8)}
        check(not others, f"only the job's pid: {others}")
        ev = box.csv("show", "procs", "--events", "--csv")
        started = {r["labels"] for r in ev if r["kind"] == "proc_start"}
        check(f"pid={pid}" in started, f"the process tree saw the same pid: {started}")
    finally:
        box.close()


def test_throttle_events_start_and_stop_with_the_scenario():
    box = Sandbox()
    try:
        run(box, "throttled.scn", "hot", 5.6)
        ev = box.csv("show", "hot", "--events", "--csv")

        def times(kind, name):
            return [float(r["t_s"]) for r in ev if r["kind"] == kind and r["name"] == name and r["labels"] == "gpu=0"]

        for name in ("SwThermalSlowdown", "HwThermalSlowdown"):
            s, e = times("throttle_start", name), times("throttle_stop", name)
            check(len(s) == 1 and 1.95 < s[0] < 2.6, f"{name} start {s}")
            check(len(e) == 1 and 3.95 < e[0] < 4.6, f"{name} stop {e}")
        s = times("throttle_start", "SwPowerCap")
        check(len(s) == 1 and 2.95 < s[0] < 3.6, f"SwPowerCap start {s}")
        check(not times("throttle_start", "GpuIdle"), "GpuIdle makes no event")
        rows = box.csv("show", "hot", "--csv", "--metric", "gpu.throttle_reasons")
        mask = series(rows, "gpu.throttle_reasons", "gpu=0")
        check(any(v == 0x60 for t, v in mask if 2.2 < t < 2.9), "thermal bits in the mask")
        check(any(v == 1 for t, v in mask if t > 5.2), "GpuIdle stays in the mask")
    finally:
        box.close()


def test_lost_gpu_ends_with_an_event_and_the_others_continue():
    box = Sandbox()
    try:
        run(box, "lost.scn", "lost", 4)
        ev = box.csv("show", "lost", "--events", "--csv")
        lost = {r["labels"]: float(r["t_s"]) for r in ev if r["kind"] == "gpu_lost"}
        check(set(lost) == {"gpu=1", "gpu=2"}, f"lost GPUs {lost}")
        check(1.95 < lost["gpu=1"] < 2.6 and 2.95 < lost["gpu=2"] < 3.6, f"lost at {lost}")
        rows = box.csv("show", "lost", "--csv", "--metric", "gpu.temp_c")
        t1 = [t for t, _ in series(rows, "gpu.temp_c", "gpu=1")]
        check(t1 and max(t1) < lost["gpu=1"], "no sample of gpu 1 after it was lost")
        t0 = [t for t, _ in series(rows, "gpu.temp_c", "gpu=0")]
        check(t0 and max(t0) > 3.6, "gpu 0 carries on")
    finally:
        box.close()


def test_basic_only_gpu_notes_what_is_missing():
    box = Sandbox()
    try:
        run(box, "old_basic.scn", "old", 1.5)
        notes = box.ok("show", "old", "--notes")
        for n in ("gpu0: utilization samples: Not Supported", "gpu0: energy: Not Supported",
                  "gpu0: running processes: Insufficient Permissions"):
            check(n in notes, f"note '{n}' missing from:\n{notes}")
        rows = box.csv("show", "old", "--csv")
        names = {r["name"] for r in rows if r["source"] == "nvml"}
        check("gpu.util_pct" in names and "gpu.fan_pct" in names, f"basic series: {names}")
        check(not names & {"gpu.energy_j", "gpu.proc_mem_bytes", "gpu.sm_active_pct"}, f"absent, not zero: {names}")
        p = box.json("show", "old", "--params", "--json")
        check("gpu.0.mig_mode" not in p and p.get("gpu.0.cc") == "7.0", f"params {p}")
    finally:
        box.close()


def test_mig_gpu_reports_memory_without_utilisation():
    box = Sandbox()
    try:
        run(box, "mig.scn", "mig", 1.5)
        p = box.json("show", "mig", "--params", "--json")
        check(p.get("gpu.0.mig_mode") == "enabled" and p.get("gpu.1.mig_mode") == "disabled", f"params {p}")
        rows = box.csv("show", "mig", "--csv")
        check(not series(rows, "gpu.util_pct", "gpu=0") and series(rows, "gpu.util_pct", "gpu=1"), "util")
        check(series(rows, "gpu.mem_used_bytes", "gpu=0"), "memory on the MIG GPU")
        check("gpu0: utilization: Not Supported" in box.ok("show", "mig", "--notes"), "note")
    finally:
        box.close()


def test_mig_gpu0_hides_no_gpu_after_it():
    # GPU 0 in MIG mode has no util series at all: the summary and the live line still show GPUs 1-3,
    # GPU 0's util as "—" (they stopped at the first GPU without util, so a MIG GPU 0 hid them all).
    import pty
    import re
    import select
    import signal
    import time
    box = Sandbox()
    try:
        env = dict(box.env, GPUSCOPE_NVML_LIB=SIM, GPUSIM_SCENARIO=os.path.join(SCN, "mig4.scn"))
        env.pop("GPUSIM_JOBPID", None)
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(BIN, [BIN, "run", "--name", "mig4", "--", "sleep", "120"], env)
        buf, want = b"", "GPU — 81% 62% 43%"
        deadline = time.monotonic() + 60  # bounds a hang only: the line comes within a second or two
        while want.encode() not in buf and time.monotonic() < deadline:
            if select.select([fd], [], [], 1)[0]:
                try:
                    buf += os.read(fd, 4096)
                except OSError:
                    break
        os.kill(pid, signal.SIGINT)  # forwarded to the job; gpuscope then prints the summary
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
        os.waitpid(pid, 0)
        text = buf.decode(errors="replace")
        live = [seg for seg in text.split("\r") if seg.startswith("[gpuscope]")]
        check(any(want in seg for seg in live), f"live line: every GPU, GPU 0 as —:\n{live}")
        check(not any("nan" in seg for seg in live), f"an unknown is —, never nan:\n{live}")
        for g, util in ((1, 81), (2, 62), (3, 43)):
            check(re.search(rf"GPU {g}: util mean {util}%", text), f"summary line for GPU {g}:\n{text}")
        check(re.search(r"GPU 0: util mean —, min —.*MIG", text), f"GPU 0 without util:\n{text}")
    finally:
        box.close()


def test_dips_shorter_than_the_interval_are_kept():
    box = Sandbox()
    try:
        run(box, "dips.scn", "dips", 4.3, "--interval", "1s")
        rows = box.csv("show", "dips", "--csv", "--metric", "gpu.util_pct")
        for g in range(8):
            u = series(rows, "gpu.util_pct", f"gpu={g}")
            check(len(u) >= 15, f"gpu {g}: {len(u)} points at a 1 s interval: every driver sample is kept")
            for start in (1.8, 3.8):
                inside = [v for t, v in u if start + 0.03 < t < start + 0.17]
                check(inside and all(v == 0 for v in inside), f"gpu {g}: the dip at {start} s: {inside}")
    finally:
        box.close()


def test_slow_driver_call_does_not_stall_the_host_collector():
    box = Sandbox()
    try:
        run(box, "slow.scn", "slow", 5)
        rows = box.csv("show", "slow", "--csv")
        host = [float(r["t_s"]) for r in rows if r["source"] == "host"]
        name = next((r["name"] for r in rows if r["source"] == "host"), None)
        check(name, "host series exist")
        ticks = sorted({round(t, 3) for t in host if 1.2 < t < 2.8})
        check(len(ticks) >= 8, f"host sampled only at {ticks} while GPU 0's power call was slow")
        power = [t for t, _ in series(rows, "gpu.power_w", "gpu=0")]
        check(sum(1.05 < t < 2.95 for t in power) <= 2, f"each slow power read took 1.5 s: {power}")
        # The read started at ~2.6 s sleeps until ~4.1 s; after that both GPUs are sampled again.
        check(any(t > 4.3 for t in series_times(rows, "gpu.util_pct", "gpu=1")), "gpu 1 sampled after")
    finally:
        box.close()


def test_hung_driver_call_does_not_hold_up_the_end_of_the_run():
    box = Sandbox()
    try:
        # From 1 s on, GPU 0's temperature read sleeps 60 s; gs() gives up after 40 s.
        env = {"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": os.path.join(SCN, "hang.scn")}
        rc, out, err = box.gs("run", "--quiet", "--name", "hang", "--", "sh", "-c", "exit 3", env=env, timeout=40)
        check(rc == 3, f"exit {rc}: {err}")
        rc, out, err = box.gs("run", "--quiet", "--name", "hang2", "--", "sleep", "2", env=env, timeout=40)
        check(rc == 0, f"exit {rc}: {err}")
        rows = box.csv("show", "hang2", "--csv", "--metric", "gpu.util_pct")
        check(series(rows, "gpu.util_pct", "gpu=0"), "sampled before the call hung")
    finally:
        box.close()


def test_without_nvml_the_run_goes_on_and_says_why():
    box = Sandbox()
    try:
        box.ok("run", "--quiet", "--name", "nogpu", "--", "sleep", "0.5",
               env={"GPUSCOPE_NVML_LIB": "/nonexistent/libnvidia-ml.so.1"})
        notes = box.ok("show", "nogpu", "--notes")
        check("nvml collector off: cannot load /nonexistent/libnvidia-ml.so.1" in notes, f"notes:\n{notes}")
        rows = box.csv("show", "nogpu", "--csv")
        check(rows and not [r for r in rows if r["source"] == "nvml"], "host series, no GPU series")
    finally:
        box.close()


if __name__ == "__main__":
    run_tests(globals())
