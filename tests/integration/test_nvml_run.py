"""Integration: `gpuscope run` with the simulated libnvidia-ml.so.1 (tests/gpusim) playing each
scenario, read back through `show --csv`, `show --events --csv`, `show --notes` and
`show --params --json`. Scenario time starts at the collector's nvmlInit, a few milliseconds after
the run's t_s = 0, so every time window below keeps well clear of the scenario's edges. Where a test
is about what happens when the scenario changes (throttling starts, a GPU is lost), it drives the
simulator's clock itself (GPUSIM_CLOCK, a Clocked run): it moves the scenario on only once the store
shows what the previous step produced, so a loaded machine makes it slower, never wrong."""
import os
import subprocess
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


class Clocked:
    """A run of a job that waits for a stop file, under gpuscope with the simulator playing scenario
    at the time this test sets (GPUSIM_CLOCK): set(t) moves the scenario, wait(...) waits for a state
    of the store, finish() stops the job and returns the run's exit code."""

    def __init__(self, box, scenario, name):
        check(os.path.exists(SIM), f"{SIM} is not built")
        self.box, self.name = box, name
        self.clock, self.stop = os.path.join(box.dir, name + ".clock"), os.path.join(box.dir, name + ".stop")
        self.set(0)
        env = dict(box.env, GPUSCOPE_NVML_LIB=SIM, GPUSIM_SCENARIO=os.path.join(SCN, scenario), GPUSIM_CLOCK=self.clock)
        env.pop("GPUSIM_JOBPID", None)
        self.err = open(os.path.join(box.dir, name + ".err"), "w+")
        self.p = subprocess.Popen([BIN, "run", "--quiet", "--name", name, "--", "sh", "-c",
                                   f"while [ ! -e '{self.stop}' ]; do sleep 0.05; done"],
                                  env=env, stdout=self.err, stderr=self.err)

    def set(self, t):
        with open(self.clock + ".tmp", "w") as f:
            f.write(f"{t}\n")
        os.replace(self.clock + ".tmp", self.clock)  # the simulator never reads half a number

    def events(self, kind=None):
        rc, out, _ = self.box.gs("show", self.name, "--events", "--csv")
        import csv
        import io
        rows = list(csv.DictReader(io.StringIO(out))) if rc == 0 else []
        return [r for r in rows if kind is None or r["kind"] == kind]

    def rows(self, metric):
        rc, out, _ = self.box.gs("show", self.name, "--csv", "--metric", metric)
        import csv
        import io
        return list(csv.DictReader(io.StringIO(out))) if rc == 0 else []

    def wait(self, cond, what):
        return wait_until(cond, what, timeout=120, proc=self.p, every=0.1)

    def finish(self):
        open(self.stop, "w").close()
        rc = self.p.wait(timeout=120)
        self.err.seek(0)
        check(rc == 0, f"the run exited {rc}: {self.err.read()}")

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.err.close()


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
    # The scenario: thermal slowdown (Sw + Hw) from 2 s, SwPowerCap too from 3 s, none from 4 s,
    # GpuIdle from 5 s. Each step of the clock waits for the store to show the one before.
    box = Sandbox()
    run = Clocked(box, "throttled.scn", "hot")
    try:
        def mask():
            return [v for _, v in series(run.rows("gpu.throttle_reasons"), "gpu.throttle_reasons", "gpu=0")]

        def started(kind, *names):
            ev = [r["name"] for r in run.events(kind) if r["labels"] == "gpu=0"]
            return ev if all(n in ev for n in names) else None

        run.set(1)
        run.wait(lambda: 0 in mask(), "a throttle mask of 0 before 2 s")
        check(not started("throttle_start"), f"a throttle event before any throttling: {run.events('throttle_start')}")
        run.set(2.5)
        run.wait(lambda: started("throttle_start", "SwThermalSlowdown", "HwThermalSlowdown"), "the thermal events")
        check(0x60 in mask(), f"thermal bits in the mask: {sorted(set(mask()))}")
        check("SwPowerCap" not in started("throttle_start"), "SwPowerCap before 3 s")
        run.set(3.5)
        run.wait(lambda: started("throttle_start", "SwPowerCap"), "the SwPowerCap event")
        run.set(4.5)
        run.wait(lambda: started("throttle_stop", "SwThermalSlowdown", "HwThermalSlowdown", "SwPowerCap"),
                 "the throttle_stop events")
        run.set(5.5)
        run.wait(lambda: 1 in mask(), "GpuIdle in the mask")
        run.finish()
        ev = [(r["kind"], r["name"], float(r["t_s"])) for r in run.events() if r["labels"] == "gpu=0"
              and r["kind"] in ("throttle_start", "throttle_stop")]
        names = sorted((k, n) for k, n, _ in ev)
        check(names == [("throttle_start", "HwThermalSlowdown"), ("throttle_start", "SwPowerCap"),
                        ("throttle_start", "SwThermalSlowdown"), ("throttle_stop", "HwThermalSlowdown"),
                        ("throttle_stop", "SwPowerCap"), ("throttle_stop", "SwThermalSlowdown")],
              f"one start and one stop of each, no GpuIdle event: {ev}")
        t = {(k, n): s for k, n, s in ev}
        check(t[("throttle_start", "SwThermalSlowdown")] < t[("throttle_start", "SwPowerCap")] <
              t[("throttle_stop", "SwThermalSlowdown")], f"in the scenario's order: {ev}")
        check(mask()[-1] == 1, f"GpuIdle stays in the mask to the end: {mask()[-5:]}")
    finally:
        run.close()
        box.close()


def test_lost_gpu_ends_with_an_event_and_the_others_continue():
    # The scenario: GPU 1 lost from 2 s, GPU 2 from 3 s, GPU 0 carries on.
    box = Sandbox()
    run = Clocked(box, "lost.scn", "lost")
    try:
        def temps(g):
            return [t for t, _ in series(run.rows("gpu.temp_c"), "gpu.temp_c", f"gpu={g}")]

        def lost():
            return {r["labels"]: float(r["t_s"]) for r in run.events("gpu_lost")}

        run.set(1)
        run.wait(lambda: all(temps(g) for g in range(3)), "samples of all three GPUs")
        check(not lost(), f"a GPU lost before 2 s: {lost()}")
        run.set(2.5)
        run.wait(lambda: "gpu=1" in lost(), "GPU 1's gpu_lost event")
        check(set(lost()) == {"gpu=1"}, f"only GPU 1 is lost at 2.5 s: {lost()}")
        run.set(3.5)
        run.wait(lambda: "gpu=2" in lost(), "GPU 2's gpu_lost event")
        at = lost()["gpu=2"]
        run.wait(lambda: max(temps(0)) > at, "a sample of GPU 0 after GPU 2 was lost")
        run.finish()
        gone = lost()
        check(set(gone) == {"gpu=1", "gpu=2"} and gone["gpu=1"] < gone["gpu=2"], f"lost GPUs {gone}")
        for g in (1, 2):
            t = temps(g)
            check(t and max(t) < gone[f"gpu={g}"], f"no sample of gpu {g} after it was lost: {t[-3:]} vs {gone}")
        check(max(temps(0)) > gone["gpu=2"], "gpu 0 carries on")
    finally:
        run.close()
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
