"""SM activity on a GPU without GPM (Volta to Ada) from DCGM's profiling fields, through the simulated
libdcgm.so.4 (tests/gpusim/dcgmsim.c) loaded by the real path ($GPUSCOPE_DCGM_LIB) beside the
simulated NVML: the A100 of test_doctor_nogpm, busy 96 % of the time with 12 of 80 GiB in use, whose
SMs DCGM finds busy 30 % of the time. The run gets gpu.sm_active_pct (source nvml, gpu=0, as GPM
gives it) and says it came from DCGM; the doctor's batch finding then takes its gain from the
measured fill. The same scenario without the library changes nothing: no SM series, no DCGM note,
and the report says the GPU-side fill is unknown. Profiling refused (another profiler holds the
counters, as beside Nsight): one note naming the cause, no SM series (docs/dcgm.md)."""
import ctypes

from gstest import *

NVML = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
DCGM = os.path.join(BUILD, "tests/gpusim/libdcgm.so.4")
SCN = os.path.join(SRC, "tests/gpusim/scenarios")
UNKNOWN = "GPU-side fill of a bigger batch is unknown"


def _run(sb, name, scn, dcgm=True, **more):
    env = {"GPUSCOPE_NVML_LIB": NVML, "GPUSIM_SCENARIO": scn if os.path.isabs(scn) else os.path.join(SCN, scn)}
    if dcgm:
        env["GPUSCOPE_DCGM_LIB"] = DCGM
    env.update(more)
    # no data wait at all (sleep 0): the loop is never input-bound, however loaded the machine
    sb.ok("run", "--quiet", "--name", name, "--",
          *sb.step_job(0, 0.02, 50, "batch_size=32", "precision=bf16", "pin_memory=True"), env=env)


def _setup(sb):
    _run(sb, "dcgm", "a100_dcgm_sm30.scn")
    _run(sb, "nodcgm", "a100_dcgm_sm30.scn", dcgm=False)
    _run(sb, "busy", "a100_dcgm_busy.scn")
    engine = os.path.join(sb.dir, "hostengine.scn")  # the same GPU, on a host that runs nv-hostengine
    with open(os.path.join(SCN, "a100_dcgm_sm30.scn")) as f, open(engine, "w") as out:
        out.write("dcgm hostengine\n" + f.read())
    _run(sb, "engine", engine)


SB = shared_sandbox(_setup)


def _sm_active(name):
    rows = SB().csv("show", name, "--csv", "--metric", "gpu.sm_active_pct")
    return [float(r["value"]) for r in rows if r["source"] == "nvml" and r["labels"] == "gpu=0"]


def _notes(name):
    return SB().ok("show", name, "--notes").splitlines()


def _rules(name):
    return [f["rule"] for f in SB().json("report", name, "--json")["findings"]]


def test_dcgm_gives_the_gpm_series_on_a_gpu_without_gpm_and_says_so():
    v = _sm_active("dcgm")
    check(len(v) >= 5, f"too few gpu.sm_active_pct points: {v}")
    check(all(abs(x - 30) < 1e-6 for x in v), f"DCGM's SM active is 30 %: {v}")
    for metric, want in (("gpu.sm_occupancy_pct", 12), ("gpu.tensor_active_pct", 22), ("gpu.dram_active_pct", 18)):
        rows = SB().csv("show", "dcgm", "--csv", "--metric", metric)
        check(rows and all(abs(float(r["value"]) - want) < 1e-6 for r in rows), f"{metric}: {rows[:3]}")
    p = SB().json("show", "dcgm", "--params", "--json")
    check(p.get("gpu.0.sm_active_from") == "dcgm" and p.get("nvml.dcgm") == "embedded", f"params {p}")
    check(not any("dcgm" in n.lower() for n in _notes("dcgm")), f"no DCGM note: {_notes('dcgm')}")


def test_the_batch_finding_takes_its_gain_from_the_measured_fill():
    findings = SB().json("report", "dcgm", "--json")["findings"]
    batch = [f for f in findings if f["rule"] == "batch_too_small"]
    check(batch, f"no batch_too_small: {[f['rule'] for f in findings]}")
    # SMs busy 30 % of a 96 % busy GPU: a bigger batch wins far more than the 4 % the GPU is idle
    check(batch[0]["speedup"] > 1.5, f"speedup {batch[0]['speedup']}")
    flat = " ".join(SB().ok("report", "dcgm").split())
    check(UNKNOWN not in flat, f"the fill is measured:\n{flat}")


def test_without_the_library_nothing_changes():
    if _system_has_dcgm():
        skip("this host has a libdcgm.so.4 of its own")
    check(not _sm_active("nodcgm"), "no SM activity without DCGM or GPM")
    check(not any("dcgm" in n.lower() for n in _notes("nodcgm")), f"no DCGM note: {_notes('nodcgm')}")
    p = SB().json("show", "nodcgm", "--params", "--json")
    check(not [k for k in p if "dcgm" in k or k.endswith("sm_active_from")], f"no DCGM params: {p}")
    check("batch_too_small" not in _rules("nodcgm"), f"{_rules('nodcgm')}")
    flat = " ".join(SB().ok("report", "nodcgm").split())
    check(UNKNOWN in flat, f"the fill is unknown:\n{flat}")


def test_profiling_refused_is_one_note_naming_the_cause_and_no_series():
    check(not _sm_active("busy"), "no SM activity when DCGM refuses profiling")
    notes = [n for n in _notes("busy") if "dcgm" in n.lower()]
    check(len(notes) == 1, f"one DCGM note: {notes}")
    check("profiling refused" in notes[0] and "in use" in notes[0] and "Nsight" in notes[0]
          and "SM activity unknown on gpu0" in notes[0], notes[0])
    p = SB().json("show", "busy", "--params", "--json")
    check("gpu.0.sm_active_from" not in p, f"params {p}")


def test_a_running_host_engine_is_used_before_an_embedded_one():
    p = SB().json("show", "engine", "--params", "--json")
    check(p.get("nvml.dcgm") == "host engine 127.0.0.1:5555", f"params {p}")
    check(len(_sm_active("engine")) >= 5, "SM activity through the host engine")


def _system_has_dcgm():
    try:
        ctypes.CDLL("libdcgm.so.4")
        return True
    except OSError:
        return False


if __name__ == "__main__":
    run_tests(globals())
