"""Integration: `gpuscope devices [--json]` on every gpusim scenario, on the legacy library (only an
old driver's symbol names), and without NVML at all (exit 0, the reason on stderr, an empty list)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
LEGACY = os.path.join(BUILD, "tests/gpusim/legacy/libnvidia-ml.so.1")
SCN = os.path.join(SRC, "tests/gpusim/scenarios")
KEYS = {"index", "name", "uuid", "pci_bus_id", "memory_total_bytes", "cc", "mig_mode", "families", "health"}
ALL = {"basic": True, "samples": True, "per_process": True, "gpm": True}

# scenario -> (GPU count, name of GPU 0, families of GPU 0)
EXPECTED = {
    "idle1.scn": (1, "NVIDIA H100 PCIe", ALL),
    "busy8_h200.scn": (8, "NVIDIA H200", ALL),
    "old_basic.scn": (1, "Tesla V100-SXM2-16GB", {"basic": True, "samples": False, "per_process": False, "gpm": False}),
    "mig.scn": (2, "NVIDIA A100-SXM4-80GB", {"basic": True, "samples": False, "per_process": True, "gpm": False}),
    "throttled.scn": (1, "NVIDIA H200", ALL),
    "lost.scn": (3, "NVIDIA H100 80GB HBM3", ALL),
    "slow.scn": (2, "NVIDIA H100 80GB HBM3", ALL),
    "hang.scn": (1, "NVIDIA H100 80GB HBM3", {"basic": True, "samples": True, "per_process": True, "gpm": False}),
    "dips.scn": (8, "NVIDIA H200", ALL),
    "node8_mig.scn": (8, "NVIDIA H100 80GB HBM3", ALL),
}


def devices(box, scenario, *args, lib=SIM):
    env = {"GPUSCOPE_NVML_LIB": lib, "GPUSIM_SCENARIO": os.path.join(SCN, scenario) if scenario else ""}
    return box.gs("devices", *args, env=env)


def test_every_scenario_lists_its_gpus_as_json():
    box = Sandbox()
    try:
        found = sorted(f for f in os.listdir(SCN) if f.endswith(".scn"))
        check(set(EXPECTED) <= set(found), f"scenarios {found}")
        for scn, (count, name, fam) in EXPECTED.items():
            rc, out, err = devices(box, scn, "--json")
            check(rc == 0, f"{scn}: exit {rc}\n{err}")
            d = json.loads(out)
            check(set(d) == {"driver_version", "devices"}, f"{scn}: top-level keys {set(d)}")
            check(len(d["devices"]) == count, f"{scn}: {len(d['devices'])} devices, expected {count}")
            for i, dev in enumerate(d["devices"]):
                # a GPU in MIG mode also lists its instances (maybe none)
                mig = (dev["mig_mode"] or "").startswith("enabled")
                check(set(dev) == KEYS | ({"mig_instances"} if mig else set()), f"{scn}: keys {set(dev)}")
                check(dev["index"] == i and dev["uuid"].startswith("GPU-"), f"{scn}: {dev}")
            g0 = d["devices"][0]
            check(g0["name"] == name, f"{scn}: name {g0['name']}")
            check(g0["families"] == fam, f"{scn}: families {g0['families']}, expected {fam}")
    finally:
        box.close()


def test_json_lists_mig_instances():
    box = Sandbox()
    try:
        d = json.loads(devices(box, "node8_mig.scn", "--json")[1])
        got = [(m["gpu_instance_id"], m["compute_instance_id"], m["profile"], m["memory_total_bytes"] >> 20)
               for m in d["devices"][2]["mig_instances"]]
        check(got == [(1, 0, "3g.40gb", 40448), (9, 0, "1g.10gb", 9984)], f"GPU 2's instances: {got}")
        check(all(m["uuid"].startswith("MIG-") for m in d["devices"][2]["mig_instances"]), d["devices"][2])
        check(d["devices"][2]["mig_instances"][1]["name"] == "NVIDIA H100 80GB HBM3 MIG 1g.10gb", d["devices"][2])
        check(json.loads(devices(box, "mig.scn", "--json")[1])["devices"][0]["mig_instances"] == [], "mig.scn")
    finally:
        box.close()


def test_json_carries_memory_cc_and_mig_mode():
    box = Sandbox()
    try:
        d = json.loads(devices(box, "busy8_h200.scn", "--json")[1])
        check(d["driver_version"] == "550.54.15", d["driver_version"])
        g = d["devices"][7]
        check(g["memory_total_bytes"] == 143771 * 1024 * 1024 and g["cc"] == "9.0", f"{g}")
        check(g["pci_bus_id"] == "00000000:88:00.0" and g["mig_mode"] == "disabled", f"{g}")
        d = json.loads(devices(box, "mig.scn", "--json")[1])
        check([g["mig_mode"] for g in d["devices"]] == ["enabled", "disabled"], f"{d}")
        check(d["devices"][1]["families"]["samples"] is True, "the non-MIG GPU keeps its samples")
        d = json.loads(devices(box, "old_basic.scn", "--json")[1])
        check(d["devices"][0]["mig_mode"] is None and d["devices"][0]["cc"] == "7.0", "no MIG on Volta: null")
    finally:
        box.close()


def test_table_reads_like_nvidia_smi_list():
    box = Sandbox()
    try:
        rc, out, _ = devices(box, "busy8_h200.scn")
        check(rc == 0 and out.startswith("NVIDIA driver 550.54.15, 8 GPUs\n"), out)
        check("GPU 3: NVIDIA H200 (UUID: GPU-5a1c0000-0000-4000-8000-000000000003)\n" in out, out)
        check(out.count("families: basic samples per-process GPM\n") == 8, out)
        check("memory 140.4 GiB  CC 9.0  MIG disabled" in out, out)
        rc, out, _ = devices(box, "old_basic.scn")
        check("CC 7.0  MIG n/a  families: basic\n" in out, out)
    finally:
        box.close()


def test_legacy_library_with_old_symbol_names_still_lists():
    box = Sandbox()
    try:
        check(os.path.exists(LEGACY), f"{LEGACY} is not built")
        rc, out, err = devices(box, "old_basic.scn", "--json", lib=LEGACY)
        check(rc == 0, err)
        g = json.loads(out)["devices"][0]
        check(g["name"] == "Tesla V100-SXM2-16GB" and g["mig_mode"] is None, f"{g}")
        check(g["families"] == {"basic": True, "samples": False, "per_process": False, "gpm": False}, f"{g}")
    finally:
        box.close()


def test_no_nvml_is_not_an_error():
    box = Sandbox()
    try:
        rc, out, err = devices(box, None, "--json", lib="/nonexistent/libnvidia-ml.so.1")
        check(rc == 0, f"exit {rc}")
        check(json.loads(out) == {"devices": []}, out)
        check("no NVIDIA GPU found: cannot load /nonexistent/libnvidia-ml.so.1" in err, err)
        rc, out, err = devices(box, None)
        check(rc == 0 and out == "" and "no NVIDIA GPU found: nvmlInit: Driver Not Loaded" in err, f"{out!r} {err!r}")
    finally:
        box.close()


def test_usage():
    box = Sandbox()
    try:
        rc, out, _ = box.gs("devices", "--help")
        check(rc == 0 and "usage: gpuscope devices" in out, out)
        rc, _, err = box.gs("devices", "--bogus")
        check(rc == 2 and "unknown argument '--bogus'" in err, err)
    finally:
        box.close()


if __name__ == "__main__":
    run_tests(globals())
