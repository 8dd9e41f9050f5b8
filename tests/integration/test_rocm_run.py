"""AMD GPUs through the simulated ROCm SMI (tests/gpusim/rocmsim.c, librocm_smi64.so.7) loaded by the
real path ($GPUSCOPE_ROCM_SMI_LIB), from the same scenario files as the simulated NVML (`vendor amd`
devices). An MI300X gives the series NVIDIA's GPUs give (source nvml, labels gpu=N) and the GPU
params with gpu.0.vendor=amd; what ROCm SMI has no reading for (SM activity) is absent, never 0. An
input-bound job on it gets the findings, with the same figures, that it gets on an H100 without GPM
(h100_nogpm_input.scn, the same timeline). `devices` lists it with its memory and power cap. On a box
with both vendors the AMD GPUs come after the NVIDIA ones. Without the library nothing changes
(docs/amd.md)."""
import json
import subprocess
import urllib.request

from gstest import *

NVML = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
ROCM = os.path.join(BUILD, "tests/gpusim/librocm_smi64.so.7")
SCN = os.path.join(SRC, "tests/gpusim/scenarios")
PROMTOOL = os.environ.get("GS_PROMTOOL", "/usr/bin/promtool")
# AMD device-metrics-exporter families (docs/configuration/metricslist.md, lower-cased as it exposes them)
AMD = ("gpu_gfx_activity", "gpu_umc_activity", "gpu_used_vram", "gpu_free_vram", "gpu_total_vram", "gpu_package_power",
       "gpu_energy_consumed", "gpu_edge_temperature", "gpu_junction_temperature", "gpu_memory_temperature",
       "gpu_clock", "gpu_ecc_correct_total", "gpu_ecc_uncorrect_total")
JOB = ("batch_size=32", "precision=bf16", "num_workers=0", "pin_memory=True")


def _env(scn, nvml=False, rocm=True):
    env = {"GPUSIM_SCENARIO": os.path.join(SCN, scn)}
    if nvml:
        env["GPUSCOPE_NVML_LIB"] = NVML
    if rocm:
        env["GPUSCOPE_ROCM_SMI_LIB"] = ROCM
    return env


def _setup(sb):
    # 25 ms steps, 20 ms of them waiting for data: input-bound whatever the GPU
    # (each job writes its own measured data share: on a loaded machine the 5 ms spin stretches, and
    # the two runs' shares differ by what the machine did, not by what the vendor is)
    for name, scn, nvml, rocm in (("h100", "h100_nogpm_input.scn", True, False), ("mi300x", "mi300x_input.scn", False, True)):
        job = sb.step_job(0.02, 0.005, 80, *JOB, out=os.path.join(sb.dir, f"{name}.json"))
        sb.ok("run", "--quiet", "--name", name, "--", *job, env=_env(scn, nvml=nvml, rocm=rocm))
    # fp32 on the MI300X's matrix cores (CDNA 3 takes compute capability 7's place), never input-bound
    sb.ok("run", "--quiet", "--name", "fp32", "--", *sb.step_job(0, 0.02, 40, "batch_size=32", "precision=fp32"),
          env=_env("mi300x_input.scn"))
    # busy all the time, no data wait: what test_doctor_nogpm plays on an A100 without GPM
    sb.ok("run", "--quiet", "--name", "busy", "--",
          *sb.step_job(0, 0.02, 50, "batch_size=32", "precision=bf16", "pin_memory=True"), env=_env("mi300x_busy.scn"))
    sb.ok("run", "--quiet", "--name", "mixed", "--", "sleep", "1.5", env=_env("mixed_amd.scn", nvml=True))
    sb.ok("run", "--quiet", "--name", "nolib", "--", "sleep", "0.5", env=_env("mi300x_input.scn", rocm=False))
    # held at its thermal and power limits (the metrics table's v1.6 residencies); the same GPU whose
    # firmware fills none of the table
    sb.ok("run", "--quiet", "--name", "hot", "--", "sleep", "2", env=_env("mi300x_throttled.scn"))
    sb.ok("run", "--quiet", "--name", "unfilled", "--", "sleep", "2", env=_env("mi300x_unfilled.scn"))
    # ROCm 5.x's 96-byte table (GPUSIM_RSMI_METRICS=5): no residencies in it, so no throttle reading
    sb.ok("run", "--quiet", "--name", "rocm5", "--", "sleep", "1",
          env=dict(_env("mi300x_throttled.scn"), GPUSIM_RSMI_METRICS="5"))


SB = shared_sandbox(_setup)


def _series(name):
    return {(r["name"], r["labels"]) for r in SB().csv("show", name, "--csv") if r["source"] == "nvml"}


def test_mi300x_gives_the_nvidia_series_under_gpu_labels():
    s = _series("mi300x")
    for m in ("gpu.util_pct", "gpu.mem_util_pct", "gpu.mem_used_bytes", "gpu.mem_total_bytes", "gpu.power_w",
              "gpu.power_limit_w", "gpu.energy_j", "gpu.temp_c", "gpu.sm_clock_mhz", "gpu.pcie_rx_bytes_s",
              "gpu.pcie_tx_bytes_s"):
        check((m, "gpu=0") in s, f"{m} missing: {sorted(s)}")
    check(any(n == "gpu.proc_mem_bytes" and lab.startswith("gpu=0,pid=") for n, lab in s), f"no process: {sorted(s)}")
    # no AMD counterpart: absent, never zero
    for m in ("gpu.sm_active_pct", "gpu.tensor_active_pct", "gpu.throttle_reasons", "gpu.fan_pct"):
        check((m, "gpu=0") not in s, f"{m} should be absent")


def test_mi300x_values_follow_the_scenario():
    rows = [r for r in SB().csv("show", "mi300x", "--csv") if r["source"] == "nvml" and r["labels"] == "gpu=0"]
    last = {r["name"]: float(r["value"]) for r in rows}
    check(last["gpu.util_pct"] == 30 and last["gpu.power_w"] == 320 and last["gpu.power_limit_w"] == 750, str(last))
    check(last["gpu.mem_used_bytes"] == 24 * 2**30 and last["gpu.mem_total_bytes"] == 196592 * 2**20, str(last))
    check(last["gpu.temp_c"] == 52 and last["gpu.sm_clock_mhz"] == 2100, str(last))


def test_mi300x_params_say_amd():
    p = SB().json("show", "mi300x", "--params", "--json")
    check(p.get("gpu.0.vendor") == "amd" and p.get("gpu.0.name") == "AMD Instinct MI300X", f"params {p}")
    check(p.get("gpu.count") == "1" and p.get("gpu.0.gfx") == "gfx942" and p.get("gpu.0.uuid"), f"params {p}")
    check(p.get("gpu.0.mem_total_bytes") == str(196592 * 2**20) and p.get("gpu.0.serial") == "PCB042000001", str(p))


def test_input_bound_job_gets_the_h100_findings_with_their_figures():
    a = SB().json("report", "h100", "--json")["findings"]
    b = SB().json("report", "mi300x", "--json")["findings"]
    check([f["rule"] for f in a] == [f["rule"] for f in b], f"h100 {[f['rule'] for f in a]} mi300x {[f['rule'] for f in b]}")
    check(any(f["rule"] in ("input_latency", "input_bound") for f in b), str([f["rule"] for f in b]))
    # each job's own measure of its data share; the two runs may differ by as much as those differ
    own = {}
    for name in ("h100", "mi300x"):
        with open(os.path.join(SB().dir, f"{name}.json")) as f:
            j = json.load(f)
        own[name] = j["data_s"] / (j["data_s"] + j["compute_s"])
    slack = abs(own["h100"] - own["mi300x"])
    for x, y in zip(a, b):
        check(x["severity"] == y["severity"] and set(x["evidence"]) == set(y["evidence"]), f"{x['rule']}: {x} / {y}")
        check(abs(x["share"] - y["share"]) < 0.1 + slack,
              f"{x['rule']}: share {x['share']} vs {y['share']} (the jobs measured {own['h100']:.3f} and {own['mi300x']:.3f})")
        # measured step times of two runs on a shared machine: close, never equal; the estimate follows
        # from the recommended worker count, a whole number, so only its direction is compared
        ex, ey = x["evidence"], y["evidence"]
        for k in ("data_wait_share", "gpu_util_pct"):
            if isinstance(ex.get(k), (int, float)):
                tol = 0.1 * max(1, abs(ex[k])) + (slack if k == "data_wait_share" else 0)
                check(abs(ex[k] - ey[k]) <= tol, f"{x['rule']}: {k} {ex[k]} vs {ey[k]} (jobs: {own})")
        check(ex.get("num_workers") == ey.get("num_workers"), f"{x['rule']}: {ex} / {ey}")
        check((x["speedup"] > 1.5) == (y["speedup"] > 1.5), f"{x['rule']}: {x['speedup']} vs {y['speedup']}")
    ta, tb = SB().ok("report", "h100"), SB().ok("report", "mi300x")
    line = lambda t: next(l for l in t.splitlines() if l.strip().startswith("GPU 0: util"))
    check(line(ta).split(", memory")[0] == line(tb).split(", memory")[0], f"{line(ta)}\n{line(tb)}")
    check("24.0 GiB of 192.0 GiB" in line(tb), line(tb))


def test_devices_lists_the_mi300x_with_memory_and_power_cap():
    out = SB().ok("devices", env=_env("mi300x_input.scn"))
    check("GPU 0: AMD Instinct MI300X" in out and "memory 192.0 GiB" in out and "power cap 750 W" in out, out)
    d = SB().json("devices", "--json", env=_env("mi300x_input.scn"))["devices"]
    check(len(d) == 1 and d[0]["vendor"] == "amd" and d[0]["power_cap_w"] == 750, str(d))
    check(d[0]["memory_total_bytes"] == 196592 * 2**20 and d[0]["gfx"] == "gfx942", str(d))


def test_both_vendors_amd_after_nvidia():
    p = SB().json("show", "mixed", "--params", "--json")
    check(p.get("gpu.count") == "4", f"params {p}")
    check(p.get("gpu.0.name", "").startswith("NVIDIA") and "gpu.0.vendor" not in p, f"params {p}")
    check(p.get("gpu.2.vendor") == "amd" and p.get("gpu.3.name") == "AMD Instinct MI250X", f"params {p}")
    s = _series("mixed")
    for g in range(4):
        check(("gpu.util_pct", f"gpu={g}") in s, f"gpu={g}: {sorted(s)}")
    out = SB().ok("devices", env=_env("mixed_amd.scn", nvml=True))
    check("GPU 1: NVIDIA" in out and "GPU 2: AMD Instinct MI250X" in out and "GPU 3: AMD" in out, out)


# JOB DIR K: writes DIR/K.env (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES), then reports 8 steps of 10 ms
TUNE_JOB = r'''
import os, socket, sys, time
d, k = sys.argv[1], sys.argv[2]
with open(os.path.join(d, k + ".env"), "w") as f:
    f.write(os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>") + " " + os.environ.get("HIP_VISIBLE_DEVICES", "<unset>"))
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for i in range(8):
    time.sleep(0.01)
    s.sendto(f"gs1 step {i} data=0.001 compute=0.009 samples=32 t={time.monotonic():.6f}".encode(),
             os.environ["GPUSCOPE_SOCKET"])
'''


def test_tune_gives_an_amd_gpu_its_hip_index_on_a_mixed_box():
    # mixed_amd.scn: two H100s (gpuscope's 0, 1) and an MI250X's two dies (gpuscope's 2, 3: HIP's 0, 1)
    sb = SB()
    d = os.path.join(sb.dir, "tune_env")
    os.makedirs(d, exist_ok=True)
    job = os.path.join(d, "job.py")
    with open(job, "w") as f:
        f.write(TUNE_JOB)
    rc, out, err = sb.gs("tune", "--json", "--name", "mixtune", "--gpus", "1,2,3", "--steps", "4", "--warmup", "1",
                         "--param", "k=a,b,c", "--", PYTHON, job, d, "{k}", env=_env("mixed_amd.scn", nvml=True),
                         timeout=200)
    check(rc == 0, f"tune exited {rc}\n{out}\n{err}")
    seen = {}
    for t in json.loads(out)["trials"]:
        with open(os.path.join(d, t["config"]["k"] + ".env")) as f:
            seen[t["gpu"]] = f.read()
    check(seen == {"1": "1 1", "2": "0 0", "3": "1 1"}, f"CUDA/HIP_VISIBLE_DEVICES by gpuscope GPU: {seen}")


def test_without_the_library_nothing_changes():
    check(not _series("nolib"), str(_series("nolib")))
    rep = SB().ok("report", "nolib")
    check("rocm" not in rep, rep)


def test_mixed_precision_on_cdna3_as_on_tensor_core_gpus():
    f = [x for x in SB().json("report", "fp32", "--json")["findings"] if x["rule"] == "mixed_precision"]
    check(len(f) == 1, str(SB().json("report", "fp32", "--json")["findings"])[:800])
    check("CDNA 3 (gfx942)" in f[0]["title"] and f[0]["evidence"].get("gfx") == "gfx942", str(f[0])[:800])
    check("matrix cores" in f[0]["fix"] and "torch.autocast" in f[0]["fix"], f[0]["fix"])


def test_without_sm_activity_the_report_says_the_fill_is_unknown():
    # as on an NVIDIA GPU without GPM or DCGM: no batch claim beyond the measured host overhead, and
    # the report says what is unknown and prints the two-trial tune that measures it
    findings = SB().json("report", "busy", "--json")["findings"]
    check("batch_too_small" not in [f["rule"] for f in findings], str([f["rule"] for f in findings]))
    for f in findings:
        check(f["speedup"] <= 1 / 0.96 + 1e-6, f"{f['rule']} claims {f['speedup']}")
    flat = " ".join(SB().ok("report", "busy").split())
    check("GPU-side fill of a bigger batch is unknown" in flat and "gpuscope tune --param batch_size=32," in flat,
          flat[-1500:])
    check("no SM activity readings (ROCm SMI gives none)" in flat, flat[-1500:])


def _rows(name, metric):
    return [float(r["value"]) for r in SB().csv("show", name, "--csv")
            if r["source"] == "nvml" and r["labels"] == "gpu=0" and r["name"] == metric]


def test_a_throttled_mi300x_gets_the_throttle_finding():
    masks = _rows("hot", "gpu.throttle_reasons")
    check(masks and all(m == 0x24 for m in masks), f"SwPowerCap|SwThermalSlowdown throughout: {masks}")
    ev = {(r["kind"], r["name"]) for r in SB().csv("show", "hot", "--events", "--csv") if r["labels"] == "gpu=0"}
    check({("throttle_start", "SwPowerCap"), ("throttle_start", "SwThermalSlowdown")} <= ev, str(ev))
    f = [x for x in SB().json("report", "hot", "--json")["findings"] if x["rule"] == "throttled"]
    check(len(f) == 1, str([x["rule"] for x in SB().json("report", "hot", "--json")["findings"]]))
    check("SwPowerCap" in f[0]["evidence"]["reasons"] and "SwThermalSlowdown" in f[0]["evidence"]["reasons"], str(f[0]))
    check(f[0]["evidence"]["throttled_share"] > 0.5, str(f[0]["evidence"]))
    # the firmware's instantaneous PCIe bandwidth, both directions: 8 GB/s
    bw = _rows("hot", "gpu.pcie_bw_bytes_s")
    check(bw and all(v == 8e9 for v in bw), str(bw))


def test_firmware_that_fills_no_metrics_gives_no_throttle_series_and_no_zeros():
    s = _series("unfilled")
    for m in ("gpu.throttle_reasons", "gpu.pcie_bw_bytes_s"):
        check((m, "gpu=0") not in s, f"{m} should be absent: {sorted(s)}")
    check(("gpu.util_pct", "gpu=0") in s and all(v == 98 for v in _rows("unfilled", "gpu.util_pct")), "util kept")
    ev = [r for r in SB().csv("show", "unfilled", "--events", "--csv") if r["kind"].startswith("throttle")]
    check(not ev, str(ev))
    check("throttled" not in [f["rule"] for f in SB().json("report", "unfilled", "--json")["findings"]], "no finding")


def test_rocm5s_short_metrics_table_gives_no_throttle_reading():
    s = _series("rocm5")
    check(("gpu.util_pct", "gpu=0") in s and ("gpu.throttle_reasons", "gpu=0") not in s, str(sorted(s)))
    check(("gpu.pcie_bw_bytes_s", "gpu=0") not in s, str(sorted(s)))


def _scrape(sb, env):
    p = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:0", "--interval", "1s"], env=dict(sb.env, **env),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        check(line.startswith("gpuscope agent: metrics at http://127.0.0.1:"), f"no address line: {line!r}")
        url = line.strip().rsplit(" ", 1)[1]

        def page():
            with urllib.request.urlopen(url, timeout=10) as r:
                body = r.read().decode()
            return body if all(f"\n{f}{{" in body for f in AMD) else None
        return wait_until(page, "every AMD family on /metrics", timeout=60)
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_metrics_carry_the_amd_exporters_names_and_pass_promtool():
    body = _scrape(SB(), _env("mi300x_input.scn"))
    check("DCGM_FI_" not in body, "a DCGM name on an AMD GPU")
    lines = {l.split("{")[0]: l for l in body.splitlines() if l and not l.startswith("#")}
    g = lines["gpu_gfx_activity"]
    for lab in ('gpu_id="0"', 'serial_number="PCB042000001"', 'card_model="AMD Instinct MI300X"', "hostname=",
                'gpu_uuid="0x'):
        check(lab in g, f"{lab} not in {g}")
    check(g.endswith(" 30") and lines["gpu_package_power"].endswith(" 320"), f"{g}\n{lines['gpu_package_power']}")
    check(lines["gpu_power_usage"].endswith(" 320") and 'gpu_id="0"' in lines["gpu_power_usage"], str(lines))
    check("pcie_bandwidth{" not in body, "no metrics table in mi300x_input.scn: no PCIe bandwidth, not 0")
    check(lines["gpu_used_vram"].endswith(" 24576") and lines["gpu_total_vram"].endswith(" 196592"), str(lines))
    check('clock_type="system"' in lines["gpu_clock"] and lines["gpu_clock"].endswith(" 2100"), lines["gpu_clock"])
    check("gpuscope_gpu_sm_active_ratio" not in body, "SM activity has no AMD reading: absent")
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, text=True)
    check(p.returncode == 0, f"promtool: rc {p.returncode}\n{p.stdout}{p.stderr}")


def test_metrics_give_the_pcie_bandwidth_in_the_exporters_unit():
    body = _scrape(SB(), _env("mi300x_throttled.scn"))
    bw = [l for l in body.splitlines() if l.startswith("pcie_bandwidth{")]
    # 8 GB/s in the metrics table: 64000 Mb/s
    check(len(bw) == 1 and bw[0].endswith(" 64000") and 'card_model="AMD Instinct MI300X"' in bw[0], str(bw))
    check("# TYPE pcie_bandwidth gauge" in body and "# TYPE gpu_power_usage gauge" in body, body[:2000])
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, text=True)
    check(p.returncode == 0, f"promtool: rc {p.returncode}\n{p.stdout}{p.stderr}")


def test_metrics_keep_dcgm_names_for_nvidia_on_a_mixed_box():
    body = _scrape(SB(), _env("mixed_amd.scn", nvml=True))
    nv = [l for l in body.splitlines() if l.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    amd = [l for l in body.splitlines() if l.startswith("gpu_gfx_activity{")]
    check(len(nv) == 2 and all('modelName="NVIDIA H100 80GB HBM3"' in l for l in nv), "\n".join(nv))
    # the AMD exporter numbers its own GPUs from 0: the dies are gpu_id 0 and 1 (gpuscope's gpu 2 and 3)
    check(len(amd) == 2 and 'gpu_id="0"' in amd[0] + amd[1] and 'gpu_id="1"' in amd[0] + amd[1], "\n".join(amd))


if __name__ == "__main__":
    run_tests(globals())
