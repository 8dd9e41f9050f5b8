"""A real Prometheus (Debian's prometheus) scrapes `gpuscope agent` every second on a simulated
8-GPU node (tests/gpusim/scenarios/node8_mig.scn: GPU 2 in MIG mode, GPU 5 without an energy
counter; GPU 2 holds two MIG instances, GI 1 3g.40gb and GI 9 1g.10gb). Prometheus' HTTP API must
hold the DCGM-named values with dcgm-exporter's labels (GPU_I_PROFILE / GPU_I_ID on an instance), and
they must match the simulator's timeline; the readings the simulator does not support must have no
series at all (never a 0). `promtool check metrics` must find no format error in a scrape.

Prometheus and promtool are found by tests/metrics/CMakeLists.txt (a missing package stops the
configuration) and passed as GS_PROMETHEUS / GS_PROMTOOL."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from gstest import *  # noqa: E402,F401

PROMETHEUS = os.environ.get("GS_PROMETHEUS", "/usr/bin/prometheus")
PROMTOOL = os.environ.get("GS_PROMTOOL", "/usr/bin/promtool")
SCN = os.path.join(SRC, "tests/gpusim/scenarios/node8_mig.scn")
SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
MODEL = "NVIDIA H100 80GB HBM3"
MIG_GPU, NO_ENERGY_GPU = 2, 5
# GPU 2's instances as the scenario declares them: profile, MiB in total and used, GPM shares (%)
MIG = {"1": dict(profile="3g.40gb", total=40448, used=20 * 1024, gr=70, sm=60, occ=30, tensor=40, dram=25),
       "9": dict(profile="1g.10gb", total=9984, used=3 * 1024, gr=20, sm=15, occ=10, tensor=5, dram=8)}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start_agent(sb, *extra):
    env = dict(sb.env, GPUSIM_SCENARIO=SCN, GPUSCOPE_NVML_LIB=SIM)
    p = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:0", "--interval", "1s", *extra], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    check(line.startswith("gpuscope agent: metrics at http://127.0.0.1:"), f"no address line: {line!r}")
    return p, line.strip().rsplit(" ", 1)[1]


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        return p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise AssertionError("did not stop on SIGTERM within 30 s")


def get(url, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers.get("Content-Type", ""), r.read().decode()


class Prom:
    def __init__(self, sb, target):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cfg = os.path.join(sb.dir, "prometheus.yml")
        hostport = urllib.parse.urlparse(target).netloc
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n  - job_name: gpuscope\n    static_configs:\n"
                    f"      - targets: ['{hostport}']\n")
        self.log = open(os.path.join(sb.dir, "prometheus.log"), "w")
        self.p = subprocess.Popen([PROMETHEUS, f"--config.file={cfg}", f"--web.listen-address=127.0.0.1:{self.port}",
                                   f"--storage.tsdb.path={os.path.join(sb.dir, 'tsdb')}"],
                                  stdout=self.log, stderr=subprocess.STDOUT)
        self.wait(lambda: self.ready(), 60, "Prometheus never became ready")

    def ready(self):
        try:
            return get(self.base + "/-/ready")[1] is not None
        except OSError:
            check(self.p.poll() is None, "prometheus exited; see prometheus.log in the sandbox (GS_KEEP=1)")
            return False

    def wait(self, cond, limit, msg):
        # A bounded wait for something to be true, not a timing assertion.
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if cond():
                return
            time.sleep(0.5)
        raise AssertionError(msg)

    def query(self, q):
        _, body = get(self.base + "/api/v1/query?" + urllib.parse.urlencode({"query": q}))
        d = json.loads(body)
        check(d["status"] == "success", f"query {q}: {d}")
        return d["data"]["result"]

    def close(self):
        self.p.terminate()
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()


_state = {}


def setup(sb):
    agent, url = start_agent(sb)
    prom = Prom(sb, url)
    _state.update(agent=agent, url=url, prom=prom)
    # Twelve seconds of scrapes: two full 6 s periods of the timeline (both temperatures, twice).
    prom.wait(lambda: prom.query('count_over_time(DCGM_FI_DEV_POWER_USAGE{gpu="0"}[1m])') and
              float(prom.query('count_over_time(DCGM_FI_DEV_POWER_USAGE{gpu="0"}[1m])')[0]["value"][1]) >= 12,
              90, "Prometheus did not get 12 scrapes of the agent")
    _state["devices"] = {d["index"]: d for d in json.loads(
        subprocess.run([BIN, "devices", "--json"], env=dict(sb.env, GPUSIM_SCENARIO=SCN, GPUSCOPE_NVML_LIB=SIM),
                       capture_output=True, text=True, check=True).stdout)["devices"]}


sandbox = shared_sandbox(setup)


def by_gpu(result):
    """The whole GPUs' lines by GPU index (a MIG instance's line, with GPU_I_ID, is not a GPU's)."""
    rows = {}
    for r in result:
        if "GPU_I_ID" not in r["metric"]:
            g = int(r["metric"]["gpu"])
            check(g not in rows, f"two lines for GPU {g}: {rows.get(g)} and {r}")
            rows[g] = r
    return rows


def by_instance(result):
    return {r["metric"]["GPU_I_ID"]: r for r in result if "GPU_I_ID" in r["metric"]}


def test_target_is_up():
    sandbox()
    up = _state["prom"].query('up{job="gpuscope"}')
    check(len(up) == 1 and up[0]["value"][1] == "1", f"up: {up}")


def test_dcgm_labels_are_dcgm_exporters():
    sandbox()
    rows = by_gpu(_state["prom"].query("DCGM_FI_DEV_POWER_USAGE"))
    check(sorted(rows) == list(range(8)), f"GPUs: {sorted(rows)}")
    host = socket.gethostname()
    for g, r in rows.items():
        m, dev = r["metric"], _state["devices"][g]
        check(m["UUID"] == dev["uuid"], f"gpu {g}: UUID {m.get('UUID')} != {dev['uuid']}")
        check(m["pci_bus_id"] == dev["pci_bus_id"], f"gpu {g}: pci_bus_id {m.get('pci_bus_id')}")
        check(m["device"] == f"nvidia{g}", f"gpu {g}: device {m.get('device')}")
        check(m["modelName"] == MODEL, f"gpu {g}: modelName {m.get('modelName')}")
        check(m["hostname"] == host and "Hostname" not in m, f"gpu {g}: host label {m}")
        check(m["DCGM_FI_DRIVER_VERSION"] == "550.54.15", f"gpu {g}: driver {m}")


def test_values_match_the_simulator():
    sandbox()
    prom = _state["prom"]
    power = by_gpu(prom.query("DCGM_FI_DEV_POWER_USAGE"))
    used = by_gpu(prom.query("DCGM_FI_DEV_FB_USED"))
    for g in range(8):
        check(float(power[g]["value"][1]) == 100 + 10 * g, f"gpu {g}: power {power[g]['value']}")
        check(float(used[g]["value"][1]) == (10 + g) * 1024, f"gpu {g}: FB_USED {used[g]['value']} (MiB)")
    total = 81559
    free = by_gpu(prom.query("DCGM_FI_DEV_FB_FREE"))
    for g in range(8):
        f = float(free[g]["value"][1])
        check(0 < f <= total - (10 + g) * 1024, f"gpu {g}: FB_FREE {f} MiB")
    for name, want in (("DCGM_FI_DEV_SM_CLOCK", 1980), ("DCGM_FI_DEV_MEM_CLOCK", 2619),
                       ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 0)):
        rows = by_gpu(prom.query(name))
        check(sorted(rows) == list(range(8)) and all(float(r["value"][1]) == want for r in rows.values()),
              f"{name}: {rows}")


def test_utilisation_in_percent_and_prof_fields_as_ratios():
    sandbox()
    prom = _state["prom"]
    util = by_gpu(prom.query("DCGM_FI_DEV_GPU_UTIL"))
    check(sorted(util) == [g for g in range(8) if g != MIG_GPU], f"GPU_UTIL on {sorted(util)}")
    check(all(float(r["value"][1]) == 90 for r in util.values()), f"GPU_UTIL {util}")
    copy = by_gpu(prom.query("DCGM_FI_DEV_MEM_COPY_UTIL"))
    check(sorted(copy) == [g for g in range(8) if g != MIG_GPU], f"MEM_COPY_UTIL on {sorted(copy)}")
    check(all(float(r["value"][1]) == 40 for r in copy.values()), f"MEM_COPY_UTIL {copy}")
    for name, want in (("DCGM_FI_PROF_SM_ACTIVE", 0.80), ("DCGM_FI_PROF_SM_OCCUPANCY", 0.40),
                       ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.50), ("DCGM_FI_PROF_DRAM_ACTIVE", 0.30)):
        rows = by_gpu(prom.query(name))
        check(sorted(rows) == [g for g in range(8) if g != MIG_GPU], f"{name} on {sorted(rows)}")
        for g, r in rows.items():
            check(abs(float(r["value"][1]) - want) < 1e-6, f"{name} gpu {g}: {r['value']} (a ratio 0-1)")
    for name, want in (("DCGM_FI_PROF_PCIE_TX_BYTES", 1 << 30), ("DCGM_FI_PROF_PCIE_RX_BYTES", 3 << 30)):
        rows = by_gpu(prom.query(name))
        check(sorted(rows) == list(range(8)), f"{name} on {sorted(rows)}")
        for g, r in rows.items():
            check(abs(float(r["value"][1]) - want) / want < 1e-6, f"{name} gpu {g}: {r['value']} (bytes/s)")


def test_unsupported_readings_have_no_series_at_all():
    sandbox()
    prom = _state["prom"]
    # Not in the last minute of the TSDB at all: no line was ever scraped, so never a 0.
    # (GPU 2's instances have PROF lines of their own, with GPU_I_ID; the GPU's own lines have none)
    for q in (f'DCGM_FI_DEV_GPU_UTIL{{gpu="{MIG_GPU}"}}', f'DCGM_FI_PROF_SM_ACTIVE{{gpu="{MIG_GPU}",GPU_I_ID=""}}',
              f'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{gpu="{NO_ENERGY_GPU}"}}'):
        check(prom.query(f"count_over_time({q}[1h])") == [], f"{q} has samples")
    energy = by_gpu(prom.query("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"))
    check(sorted(energy) == [g for g in range(8) if g != NO_ENERGY_GPU], f"energy on {sorted(energy)}")


def test_mig_instances_arrive_with_dcgm_exporters_labels():
    sandbox()
    prom, dev = _state["prom"], _state["devices"][MIG_GPU]
    rows = by_instance(prom.query("DCGM_FI_DEV_FB_USED"))
    check(sorted(rows) == sorted(MIG), f"instances: {sorted(rows)}")
    for gi, r in rows.items():
        m = r["metric"]
        # dcgm-exporter's GPU-instance entity: the parent GPU's gpu, UUID, device and model
        check(m["gpu"] == str(MIG_GPU) and m["UUID"] == dev["uuid"] and m["device"] == f"nvidia{MIG_GPU}", f"{m}")
        check(m["GPU_I_PROFILE"] == MIG[gi]["profile"] and m["modelName"] == MODEL, f"GI {gi}: {m}")
        check(m["pci_bus_id"] == dev["pci_bus_id"] and m["hostname"] == socket.gethostname(), f"GI {gi}: {m}")


def test_mig_instances_values_match_the_simulator():
    sandbox()
    prom = _state["prom"]
    used, free = by_instance(prom.query("DCGM_FI_DEV_FB_USED")), by_instance(prom.query("DCGM_FI_DEV_FB_FREE"))
    for gi, want in MIG.items():
        check(float(used[gi]["value"][1]) == want["used"], f"GI {gi}: FB_USED {used[gi]['value']} MiB")
        check(float(free[gi]["value"][1]) == want["total"] - want["used"], f"GI {gi}: FB_FREE {free[gi]['value']}")
    for name, key in (("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gr"), ("DCGM_FI_PROF_SM_ACTIVE", "sm"),
                      ("DCGM_FI_PROF_SM_OCCUPANCY", "occ"), ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor"),
                      ("DCGM_FI_PROF_DRAM_ACTIVE", "dram")):
        rows = by_instance(prom.query(name))
        check(sorted(rows) == sorted(MIG), f"{name} on instances {sorted(rows)}")
        for gi, r in rows.items():
            check(abs(float(r["value"][1]) - MIG[gi][key] / 100) < 1e-6, f"{name} GI {gi}: {r['value']}")
    # what an instance does not measure has no instance line, never a 0
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_PCIE_TX_BYTES"):
        check(prom.query(f'count_over_time({name}{{GPU_I_ID!=""}}[1h])') == [], f"{name} has instance lines")
    # the parent keeps its own memory line (the whole GPU's 12 GiB)
    check(float(by_gpu(prom.query("DCGM_FI_DEV_FB_USED"))[MIG_GPU]["value"][1]) == 12 * 1024, "GPU 2's FB_USED")


def test_gr_engine_active_on_gpm_gpus_and_not_on_the_mig_parent():
    sandbox()
    prom = _state["prom"]
    rows = by_gpu(prom.query("DCGM_FI_PROF_GR_ENGINE_ACTIVE"))
    check(sorted(rows) == [g for g in range(8) if g != MIG_GPU], f"GR_ENGINE_ACTIVE on {sorted(rows)}")
    for g, r in rows.items():
        check(abs(float(r["value"][1]) - 0.85) < 1e-6, f"gpu {g}: GR_ENGINE_ACTIVE {r['value']} (85 %, a ratio)")
    q = f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="{MIG_GPU}",GPU_I_ID=""}}'
    check(prom.query(f"count_over_time({q}[1h])") == [], "GPU 2's parent has a GR_ENGINE_ACTIVE line")


def test_energy_counter_in_millijoules_rises_at_the_power_draw():
    sandbox()
    # Each scrape carries the value of the agent's last sample with Prometheus' scrape time, and a
    # busy agent's sample can be up to a tick late: two samples 8 s apart (rate over [8s]) then
    # differ by anything from 7 to 9 s of energy. The slope of a least-squares line through every
    # raw sample since the agent started (12 or more, each off by under a tick) is held instead.
    rows = by_gpu(_state["prom"].query("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[10m]"))
    # every GPU with an energy counter has samples (an empty answer would check nothing)
    check(sorted(rows) == [g for g in range(8) if g != NO_ENERGY_GPU], f"energy on {sorted(rows)}")
    for g, r in rows.items():
        pts = [(float(t), float(v)) for t, v in r["values"]]
        check(len(pts) >= 12 and pts[-1][0] - pts[0][0] >= 11, f"gpu {g}: {len(pts)} samples")
        n = len(pts)
        mt, mv = sum(t for t, _ in pts) / n, sum(v for _, v in pts) / n
        got = sum((t - mt) * (v - mv) for t, v in pts) / sum((t - mt) ** 2 for t, _ in pts)
        want = (100 + 10 * g) * 1000.0  # W = J/s = 1000 mJ/s
        check(abs(got - want) / want < 0.05, f"gpu {g}: energy rises at {got:.0f} mJ/s, power says {want:.0f}")


def test_temperature_timeline_as_played():
    sandbox()
    prom = _state["prom"]
    for g in range(8):
        mx = float(prom.query(f'max_over_time(DCGM_FI_DEV_GPU_TEMP{{gpu="{g}"}}[1m])')[0]["value"][1])
        mn = float(prom.query(f'min_over_time(DCGM_FI_DEV_GPU_TEMP{{gpu="{g}"}}[1m])')[0]["value"][1])
        other = prom.query(f'count_over_time((DCGM_FI_DEV_GPU_TEMP{{gpu="{g}"}} != 60 and '
                           f'DCGM_FI_DEV_GPU_TEMP{{gpu="{g}"}} != 70)[1m:1s])')
        check((mn, mx) == (60, 70), f"gpu {g}: temperatures {mn}..{mx}, the timeline plays 60 and 70")
        check(other == [], f"gpu {g}: a temperature other than 60 or 70: {other}")


def test_gpuscope_families_have_help_and_type():
    sandbox()
    _, body = get(_state["url"])
    names = set()
    for line in body.splitlines():
        if line and not line.startswith("#"):
            names.add(line.split("{")[0].split(" ")[0])
    own = sorted(n for n in names if n.startswith("gpuscope_"))
    check("gpuscope_host_cpu_busy_ratio" in own and "gpuscope_gpu_power_limit_watts" in own, own)
    for n in own:
        check(f"# HELP {n} " in body and f"# TYPE {n} gauge" in body, f"{n}: no HELP or TYPE")
    check(not (names - {n for n in names if n.startswith(("gpuscope_", "DCGM_FI_", "DCGM_EXP_"))}), f"others: {names}")
    # everything under gpuscope_ is in Prometheus too
    got = {r["metric"]["__name__"] for r in _state["prom"].query('{__name__=~"gpuscope_.+"}')}
    check(set(own) <= got, f"not in Prometheus: {set(own) - got}")


def test_promtool_finds_no_format_error():
    sandbox()
    # promtool reads the text format only; the OpenMetrics answer is what Prometheus itself scraped
    # above (its Accept header prefers OpenMetrics), and its values arrived.
    for accept in (None,):
        ctype, body = get(_state["url"], accept)
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, text=True)
        # promtool's lint asks for snake_case label names and a _total counter: dcgm-exporter's own
        # labels (UUID, modelName, DCGM_FI_DRIVER_VERSION) and DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION
        # are what the DCGM boards query, so those remarks are allowed on DCGM_ names, nothing else (and
        # DCGM_FI_DEV_PCIE_REPLAY_COUNTER, a counter whose name says so, is dcgm-exporter's too).
        problems = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
        bad = [l for l in problems if not (l.startswith("DCGM_FI_") and (
            "label names should be written in 'snake_case'" in l or 'counter metrics should have "_total"' in l
            or "metric name should not include type 'counter'" in l))]
        check(p.returncode in (0, 3) and not bad, f"promtool ({ctype}): rc {p.returncode}\n" + "\n".join(bad[:20]))
        own = "\n".join(l for l in body.splitlines() if "DCGM_FI_" not in l) + "\n"
        q = subprocess.run([PROMTOOL, "check", "metrics"], input=own, capture_output=True, text=True)
        check(q.returncode == 0, f"promtool on gpuscope_*: rc {q.returncode}\n{q.stdout}{q.stderr}")


def test_openmetrics_when_asked():
    sandbox()
    ctype, body = get(_state["url"], "application/openmetrics-text;version=1.0.0,text/plain;q=0.5")
    check(ctype.startswith("application/openmetrics-text"), ctype)
    check(body.endswith("# EOF\n"), body[-200:])
    ctype, body = get(_state["url"])
    check(ctype.startswith("text/plain; version=0.0.4"), ctype)
    check("# EOF" not in body, "text format with an OpenMetrics end")


def test_zz_agent_stops_on_sigterm():
    sandbox()
    _state["prom"].close()
    check(stop(_state["agent"]) == 0, "agent exit status")


if __name__ == "__main__":
    run_tests(globals())
