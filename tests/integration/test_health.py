"""GPU health end to end (issue 37; docs/nvml.md "Health", docs/alerts.md, docs/diagnosis.md): a run on
four simulated H100s (tests/gpusim/scenarios/xid79.scn) whose GPU 3 reports Xid 79 at scenario time
3 s and is lost at 3.5 s. Once the test moves the clock to 3.6 (both in one tick: the Xid is written
before the calls that find the GPU lost): the `xid` alert reaches a loopback webhook, naming the
GPU and the code's meaning; /metrics shows it under both of dcgm-exporter's names
(DCGM_FI_DEV_XID_ERRORS, the last Xid; DCGM_EXP_XID_ERRORS_COUNT{xid="79"});
`gpuscope devices --health` exits 1 naming GPU 3. The job then dies (exit 3), and the report's
first line names the Xid and the GPU. A GPU without the health counters (a consumer card: ECC,
remapping and NVLink NOT_SUPPORTED) has no such series, only one note per call. The waits are on
states (the webhook's posts, the scrape's lines), never on time."""
import re
import urllib.request

from alertlib import *

XID79 = os.path.join(SRC, "tests/gpusim/scenarios/xid79.scn")


def metrics_url(w):
    w.err.flush()
    with open(w.err.name) as f:
        m = re.search(r"gpuscope: metrics at (\S+)", f.read())
    return m.group(1) if m else None


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def test_an_xid_before_the_crash_is_alerted_exported_reported_and_fails_the_health_check():
    sb, rx = Sandbox(), Receiver()
    stop = os.path.join(sb.dir, "xid.stop")
    w = Watched(sb, "xid", ["--alert", "xid", "--alert-webhook", rx.url + "/json", "--listen", "127.0.0.1:0"],
                scenario_file=XID79, cmd=["sh", "-c", f"while [ ! -e '{stop}' ]; do sleep 0.05; done; exit 3"])
    try:
        url = w.wait(lambda: metrics_url(w), "the metrics address on stderr")
        w.wait(lambda: "DCGM_FI_DEV_PCIE_REPLAY_COUNTER{" in scrape(url), "the health counters on /metrics")
        check("DCGM_FI_DEV_XID_ERRORS" not in scrape(url), "no Xid yet, no Xid line (missing is not zero)")
        w.set(3.6)  # the Xid (at 3 s) and the GPU falling off the bus (3.5 s) come in one tick
        posts = w.wait(lambda: rx.got("/json"), "the xid alert at the webhook")
        check([(b["rule"], b["state"], b["labels"]) for b in posts] == [("xid", "firing", "gpu=3")], f"posts: {posts}")
        check(posts[0]["title"] == "GPU 3 reported Xid 79 (fallen off the bus)", posts[0])
        check("drain the node" in posts[0]["fix"], posts[0])

        def both():
            body = scrape(url)
            last = re.search(r'^DCGM_FI_DEV_XID_ERRORS\{gpu="3",[^}]*\} 79$', body, re.M)
            count = re.search(r'^DCGM_EXP_XID_ERRORS_COUNT\{gpu="3",[^}]*xid="79"\} 1$', body, re.M)
            return body if last and count else None
        body = w.wait(both, "the Xid under both DCGM names")
        check(not re.search(r'^DCGM_FI_DEV_XID_ERRORS\{gpu="[012]"', body, re.M), "only GPU 3 has an Xid")

        env = dict(sb.env, GPUSCOPE_NVML_LIB=SIM, GPUSIM_SCENARIO=XID79, GPUSIM_CLOCK=w.clock)
        rc, out, err = sb.gs("devices", "--health", env=env)
        check(rc == 1, f"devices --health exits 1 with a GPU lost: {rc}\n{out}{err}")
        check(err.strip() == "gpuscope: devices: GPU 3 unhealthy: lost (GPU is lost)", err)
        check(out.count("health OK") == 3, out)
        rc, out, _ = sb.gs("devices", "--health", "--json", env=env)
        check(rc == 1 and '"healthy": false' in out and out.count('"healthy": true') == 3, out)

        open(stop, "w").close()
        check(w.p.wait(timeout=120) == 3, "the job's exit status")
        rc, out, err = sb.gs("report", "xid")
        first = out.splitlines()[0] if out else ""
        check(rc == 0 and re.search(r"— failed, .*, exit 3: GPU 3 reported Xid 79 \(fallen off the bus\) \d+ s before "
                                    r"the job died: not the training code; drain the node$", first), first + err)
    finally:
        w.close()
        rx.close()
        sb.close()


STRAGGLER = os.path.join(SRC, "tests/gpusim/scenarios/straggler4_replays.scn")


def test_a_straggling_gpu_whose_pcie_link_replays_is_named_the_likely_cause():
    """Four simulated H100s, one rank each: GPU 2 at 45 % SM activity against 82 %, its PCIe replay
    counter rising 100 a second. The run lasts 6 s so that two 5-second counter readings see it rise."""
    sb = Sandbox()
    env = dict(sb.env, GPUSCOPE_NVML_LIB=SIM, GPUSIM_SCENARIO=STRAGGLER)
    try:
        rc, _, err = sb.gs("run", "--name", "strag", "--", "sleep", "6", env=env)
        check(rc == 0, err)
        rep = sb.json("report", "strag", "--json")
        got = [f for f in rep["findings"] if f["rule"] == "straggler"]
        check(len(got) == 1, f"findings: {[f['rule'] for f in rep['findings']]}")
        check(re.match(r"Straggler: GPU 2 is \d+ points behind the others \(SM activity 45% vs 82%\) — its PCIe link "
                       r"replayed \d+ times during the run: the likely cause$", got[0]["title"]), got[0]["title"])
        check(got[0]["evidence"]["health"].startswith("its PCIe link replayed"), got[0]["evidence"])
        check("the GPU itself is the likely cause" in got[0]["fix"], got[0]["fix"])
    finally:
        sb.close()


SICK = """device 0-1
  name NVIDIA H100 80GB HBM3
  cc 9.0
  memory 81559MiB
  nvlinks 18
  at 0 util=95 mem_used=60GiB power=600
device 1
  at 0 remap_pending=1 ecc_dbe_per_s=0.5 nvlink_replay_per_s=20
"""


def test_row_remap_ecc_and_nvlink_alerts_fire_for_the_sick_gpu_alone():
    """GPU 1 has a row remap pending from the start (row_remap fires on the first reading); once the
    scenario's clock moves to 10 s its uncorrected ECC and NVLink replay counters have risen, and the
    next reading (5 s later at most) fires ecc and nvlink. GPU 0 stays quiet."""
    sb, rx = Sandbox(), Receiver()
    scn = os.path.join(sb.dir, "sick.scn")
    with open(scn, "w") as f:
        f.write(SICK)
    w = Watched(sb, "sick", ["--alert", "row_remap", "--alert", "ecc", "--alert", "nvlink", "--alert-webhook",
                             rx.url + "/json"], scenario_file=scn)
    try:
        w.wait(lambda: rx.got("/json"), "the row_remap alert")
        w.set(10)
        w.wait(lambda: len(rx.got("/json")) >= 3, "the ecc and nvlink alerts")
        check(w.finish() == 0, w.out)
        firing = sorted((b["rule"], b["labels"], b["title"]) for b in rx.got("/json") if b["state"] == "firing")
        check(firing == [("ecc", "gpu=1", "GPU 1: ECC errors"), ("nvlink", "gpu=1", "GPU 1: NVLink errors"),
                         ("row_remap", "gpu=1", "GPU 1: row remap pending")], f"firing: {firing}")
    finally:
        w.close()
        rx.close()
        sb.close()


CONSUMER = """device 0
  name NVIDIA GeForce RTX 4090
  cc 8.9
  memory 24564MiB
  fault ecc NOT_SUPPORTED
  fault remap NOT_SUPPORTED
  fault retired NOT_SUPPORTED
  fault nvlink NOT_SUPPORTED
  at 0 util=90 mem_used=20GiB power=400
device 1
  name NVIDIA A100-SXM4-80GB
  mig on
  mig_instance 1 0 3g.40gb 40448MiB
  xid 43 at 0.3 gi 1 ci 0
"""


def test_a_card_without_ecc_or_nvlink_has_no_such_series_and_one_note_each_and_a_mig_xid_names_its_instance():
    sb = Sandbox()
    scn = os.path.join(sb.dir, "rtx.scn")
    with open(scn, "w") as f:
        f.write(CONSUMER)
    env = dict(sb.env, GPUSCOPE_NVML_LIB=SIM, GPUSIM_SCENARIO=scn)
    try:
        rc, _, err = sb.gs("run", "--name", "rtx", "--interval", "0.1s", "--", "sleep", "0.5", env=env)
        check(rc == 0, err)
        names = {r["name"] for r in sb.csv("show", "rtx", "--metric", "gpu.*{gpu=0}", "--csv")}
        check("gpu.pcie_replays" in names, f"the replay counter answers: {sorted(names)}")
        for absent in ("gpu.ecc_dbe_volatile", "gpu.remap_pending", "gpu.retired_pages_dbe", "gpu.nvlink_replay_errors"):
            check(absent not in names, f"{absent} is not written as 0: {sorted(names)}")
        notes = sb.ok("show", "rtx", "--notes", "--csv").splitlines()
        for what in ("ECC errors", "remapped rows", "retired pages", "NVLink errors"):
            check(sum(f"gpu0: {what}: Not Supported" == n for n in notes) == 1, f"one note for {what}: {notes}")
        # GPU 1, in MIG mode, reports an Xid of its GPU instance 1: the event says which instance
        events = [r for r in sb.csv("show", "rtx", "--events", "--csv") if r["kind"] == "xid"]
        check(len(events) == 1 and events[0]["labels"] == "gpu=1" and events[0]["name"] == "43", f"events: {events}")
        check(events[0]["text"].startswith("Xid 43 (GPU stopped processing) on MIG GPU instance 1, compute instance 0: "),
              events[0])
        rc, out, _ = sb.gs("devices", env=env)
        check(rc == 0 and "health OK  ECC n/a/n/a" in out and "NVLink errors n/a" in out, out)
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
