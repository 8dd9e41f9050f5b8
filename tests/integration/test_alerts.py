"""Alerts from the agent (src/alert/, docs/alerts.md), what fires: a simulated GPU that goes idle
fires one "firing" at a loopback webhook (and Slack's form) and one "resolved" when it recovers; a
throttled GPU with its memory nearly full fires those two; a job that waits for data with its CPU
idle and then stops stepping fires the live finding and the hang alert; a crash fires the exit alert
once and --alert-cmd gets it as JSON on stdin, also when no rule was given (the default rules exit,
hang and job, said on stderr); the job's own alerts (wandb.alert, gpuscope.alert) go out through the
rule job by level, also when raised just before the exit; a malformed alerts.ini line is one line naming the
file and the line. The simulated GPU's scenario moves only when the test has seen the store hold
what the previous step produced (GPUSIM_CLOCK). Delivery's faults: test_alert_webhooks.py."""
import json
import os

from alertlib import *

CLIENT = os.path.join(SRC, "clients", "python")


def util_at(w, value):
    return any(r["name"] == "gpu.util_pct" and float(r["value"]) == value
               for r in w.rows("--metric", "gpu.util_pct"))


def test_an_idle_gpu_fires_one_alert_and_one_resolved():
    sb, rx = Sandbox(), Receiver()
    w = Watched(sb, "idle", ["--alert", "gpu_idle<10%:for=1s", "--alert-webhook", rx.url + "/json",
                             "--alert-slack", rx.url + "/slack"])
    try:
        w.wait(lambda: util_at(w, 95), "the busy GPU in the store")
        w.set(10)
        w.wait(lambda: rx.got("/json"), "the alert when the GPU goes idle")
        w.set(20)
        w.wait(lambda: len(rx.got("/json")) >= 2, "the alert resolved when the GPU is busy again")
        check(w.finish() == 0, "the run exits 0:\n" + w.out)
        got = rx.got("/json")
        check([(b["state"], b["rule"], b["labels"]) for b in got] ==
              [("firing", "gpu_idle", "gpu=0"), ("resolved", "gpu_idle", "gpu=0")], f"one firing, one resolved: {got}")
        check("GPU 0 idle" in got[0]["title"] and got[0]["run"]["name"] == "idle", got[0])
        slack = rx.got("/slack")
        check(len(slack) == 2 and list(slack[0]) == ["text"] and "FIRING" in slack[0]["text"], f"Slack: {slack}")
        ev = [r for r in w.rows("--events") if r["kind"] == "alert"]
        check(len(ev) == 2 and ev[0]["text"].startswith("firing") and ev[1]["text"].startswith("resolved"),
              f"both in the run's events: {ev}")
    finally:
        w.close()
        rx.close()
        sb.close()


_HOT_AND_FULL = """device 0
  name NVIDIA H100 PCIe
  memory 81559MiB
  at 0 util=95 mem_util=40 mem_used=78GiB power=340 temp=90 throttle=SwThermalSlowdown|HwThermalSlowdown
device 1
  name NVIDIA H100 PCIe
  memory 81559MiB
  at 0 util=0 mem_util=0 mem_used=1GiB power=60 temp=40
  fault util NOT_SUPPORTED
  fault samples NOT_SUPPORTED
"""


def test_a_throttled_gpu_with_its_memory_nearly_full_fires_both_and_one_without_util_is_not_idle():
    sb, rx = Sandbox(), Receiver()
    w = Watched(sb, "hot", ["--alert", "throttle>50%:for=1s", "--alert", "gpu_mem>95%:for=1s", "--alert",
                            "gpu_idle<10%:for=1s", "--alert-webhook", rx.url], scenario=_HOT_AND_FULL)
    try:
        w.wait(lambda: len(rx.got()) >= 2, "the throttle and memory alerts")
        check(w.finish() == 0, "the run exits 0:\n" + w.out)
        firing = sorted((b["rule"], b["labels"]) for b in rx.got() if b["state"] == "firing")
        check(firing == [("gpu_mem", "gpu=0"), ("throttle", "gpu=0")],
              f"both on GPU 0; GPU 1, which reports no util, is not idle: {rx.got()}")
        mem = [b for b in rx.got() if b["rule"] == "gpu_mem"][0]
        check(97 < mem["value"] < 99, f"78 GiB of 79.6 GiB: {mem}")
    finally:
        w.close()
        rx.close()
        sb.close()


def test_a_gpu_that_lags_the_others_fires_the_straggler_alert():
    sb, rx = Sandbox(), Receiver()
    w = Watched(sb, "lag", ["--alert", "straggler", "--alert-webhook", rx.url],
                scenario_file=os.path.join(SRC, "tests/gpusim/scenarios/straggler4.scn"))
    try:
        w.wait(lambda: rx.got(), "the straggler alert")
        check(w.finish() == 0, "the run exits 0:\n" + w.out)
        firing = [b for b in rx.got() if b["state"] == "firing"]
        check(len(firing) == 1 and firing[0]["key"] == "straggler" and "GPU 2" in firing[0]["title"],
              f"one straggler alert naming GPU 2: {rx.got()}")
    finally:
        w.close()
        rx.close()
        sb.close()


_STEPS_THEN_HANG = r'''
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
for i in range(30):  # each step waits 60 ms for data with its CPU idle, then computes 20 ms
    t0 = time.monotonic(); time.sleep(0.06); t1 = time.monotonic()
    while time.monotonic() - t1 < 0.02:
        pass
    s.sendto(f"gs1 step {i} data={t1 - t0:.6f} compute={time.monotonic() - t1:.6f} samples=32 "
             f"t={time.monotonic():.6f}".encode(), os.environ["GPUSCOPE_SOCKET"])
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
'''


def test_an_input_bound_job_that_stops_stepping_fires_the_finding_then_the_hang():
    sb, rx = Sandbox(), Receiver()
    job = os.path.join(sb.dir, "hang_job.py")
    with open(job, "w") as f:
        f.write(_STEPS_THEN_HANG)
    w = Watched(sb, "hung", ["--alert", "hang:for=1s", "--alert", "finding:gain=1.5", "--alert-webhook", rx.url],
                cmd=[PYTHON, job, os.path.join(sb.dir, "hung.stop")])
    try:
        w.wait(lambda: any(b["rule"] == "hang" for b in rx.got()), "the hang alert")
        check(w.finish() == 0, "the run exits 0:\n" + w.out)
        got = rx.got()
        firing = [b for b in got if b["state"] == "firing" and b["rule"] == "hang"]
        check(len(firing) == 1 and "no step for" in firing[0]["text"], f"one hang alert: {got}")
        check("GPUs busy" in firing[0]["text"], "it says the GPUs were busy: " + firing[0]["text"])
        # The input finding fires (input_bound, or input_latency where the loader's CPU reads idle: on a
        # loaded machine its CPU is not always told from latency, and loader_workers may come with it);
        # each finding's key fires once per episode: never twice without a "resolved" between.
        found = [b for b in got if b["state"] == "firing" and b["rule"] == "finding"]
        inp = [b for b in found if b["key"].startswith("finding input_")]
        check(inp, f"the input finding's alert: {got}")
        state = {}
        for b in (b for b in got if b["rule"] == "finding"):
            check(state.get(b["key"]) != b["state"], f"{b['key']} {b['state']} twice in a row: {got}")
            state[b["key"]] = b["state"]
        check(all(b["speedup"] >= 1.5 and b["cost_s"] > 0 and b["fix"] for b in found), f"cost and fix: {found}")
    finally:
        w.close()
        rx.close()
        sb.close()


def test_a_crash_fires_once_and_the_command_gets_the_json_though_the_webhook_refuses():
    sb = Sandbox()
    out, env = os.path.join(sb.dir, "alerts.jsonl"), os.path.join(sb.dir, "env.txt")
    cfg = os.path.join(sb.dir, "config", "gpuscope")
    os.makedirs(cfg)
    with open(os.path.join(cfg, "alerts.ini"), "w") as f:
        f.write("; every run of this user\n[alerts]\nrule = exit\n")
    try:
        rc, _, err = sb.gs("run", "--interval", "0.2s", "--alert-webhook", refused_url(), "--alert-set", "retries=0",
                           "--alert-cmd",
                           f"cat >> '{out}'; echo \"$GPUSCOPE_ALERT_RULE $GPUSCOPE_ALERT_STATE\" >> '{env}'",
                           "--", "sh", "-c", "sleep 0.5; kill -SEGV $$")
        check(rc == 128 + 11, f"the run exits with the job's status: {rc}\n{err}")
        check(os.path.exists(out), "the command ran, though the webhook before it refused:\n" + err)
        with open(out) as f:
            got = [json.loads(l) for l in f if l.strip()]
        check(len(got) == 1 and got[0]["rule"] == "exit" and got[0]["state"] == "firing", f"one exit alert: {got}")
        check("signal 11" in got[0]["text"] and got[0]["title"] == "the run was killed", got[0])
        with open(env) as f:
            check(f.read() == "exit firing\n", "the command's environment names the alert")
    finally:
        sb.close()


def test_a_command_without_rules_gets_the_default_rules_and_says_so():
    """--alert-cmd with no --alert rule (and no alerts.ini): the job's failure still reaches the
    command (the default rules, exit and hang), and one line on stderr says which rules it got."""
    sb = Sandbox()
    out = os.path.join(sb.dir, "alerts.jsonl")
    try:
        rc, _, err = sb.gs("run", "--interval", "0.2s", "--alert-config", "none", "--alert-cmd", f"cat >> '{out}'",
                           "--", "sh", "-c", "exit 3")
        check(rc == 3, f"the run exits with the job's status: {rc}\n{err}")
        notes = [l for l in err.splitlines() if "no rule" in l]
        check(len(notes) == 1 and "alerting on exit, hang, job" in notes[0], err)
        with open(out) as f:
            got = [json.loads(l) for l in f if l.strip()]
        check(len(got) == 1 and got[0]["rule"] == "exit" and got[0]["state"] == "firing", f"one exit alert: {got}")
    finally:
        sb.close()


_JOB_ALERTS = """import gpuscope, gpuscope.wandb as wandb
wandb.init(project="p", name="alerting")
wandb.alert(title="loss is NaN", text="at step 3", level=wandb.AlertLevel.ERROR)
wandb.alert(title="loss is NaN", text="again", level=wandb.AlertLevel.ERROR, wait_duration=300)  # within: not sent
gpuscope.alert("epoch done", "epoch 1 of 3")  # INFO
wandb.finish()
"""  # and the job exits at once: the run's last look sends what it raised since the last evaluation


def test_the_jobs_own_alerts_reach_the_destinations_by_level():
    """wandb.alert and gpuscope.alert go to the run's destinations through the rule `job`: in the
    default rules (each alert once, with its title, text and level, W&B's wait_duration kept), with
    `job:level=warn` only the ERROR one, and with rules that leave `job` out none, said in a note."""
    sb = Sandbox()
    script = os.path.join(sb.dir, "alerting.py")
    with open(script, "w") as f:
        f.write(_JOB_ALERTS)
    try:
        got = {}
        for name, rules in (("default", []), ("warn", ["--alert", "job:level=warn"]), ("nojob", ["--alert", "exit"])):
            out = os.path.join(sb.dir, f"{name}.jsonl")
            rc, _, err = sb.gs("run", "--name", name, "--interval", "0.2s", "--alert-config", "none", *rules,
                               "--alert-cmd", f"cat >> '{out}'", "--", PYTHON, script, env={"PYTHONPATH": CLIENT})
            check(rc == 0, err)
            got[name] = [json.loads(l) for l in open(out)] if os.path.exists(out) else []
        d = sorted((a["rule"], a["state"], a["title"], a["text"], a["labels"]) for a in got["default"])
        check(d == [("job", "firing", "epoch done", "epoch 1 of 3", "level=INFO"),
                    ("job", "firing", "loss is NaN", "at step 3", "level=ERROR")], f"the job's two alerts: {d}")
        w = [(a["title"], a["labels"]) for a in got["warn"]]
        check(w == [("loss is NaN", "level=ERROR")], f"job:level=warn sends the ERROR alone: {w}")
        check(got["nojob"] == [], f"no job rule: nothing sent: {got['nojob']}")
        notes = sb.ok("show", "nojob", "--notes")
        check("the job raised 2 alerts" in notes and "--alert job" in notes, notes)
        ev = [r for r in sb.csv("show", "default", "--events", "--csv") if r["kind"] == "alert"]
        check(len(ev) == 2, f"each alert sent is an event of the run: {ev}")
    finally:
        sb.close()


_MANY = """device 0-63
  name NVIDIA H100 PCIe
  memory 81559MiB
  at 0 util=0 mem_util=0 mem_used=79GiB power=340 temp=90 throttle=SwThermalSlowdown
"""


def test_past_128_firing_keys_an_event_says_new_ones_are_not_alerted_on():
    """64 idle, throttled GPUs with their memory nearly full under three rules: 192 keys want to fire,
    the run tracks 128 at once; those 128 fire, and one event of the run (alert keys_full) says the
    others are not alerted on, rather than leaving them silently unfired."""
    sb = Sandbox()
    w = Watched(sb, "many", ["--alert", "gpu_idle<10%:for=1s", "--alert", "gpu_mem>95%:for=1s", "--alert",
                             "throttle>50%:for=1s"], scenario=_MANY)
    try:
        def alerts():
            return [r for r in w.rows("--events") if r["kind"] == "alert"]
        w.wait(lambda: any(r["name"] == "keys_full" for r in alerts()), "the event that the key table is full")
        check(w.finish() == 0, "the run exits 0:\n" + w.out)
        ev = alerts()
        full = [r for r in ev if r["name"] == "keys_full"]
        firing = [r for r in ev if r["name"] != "keys_full" and r["text"].startswith("firing")]
        check(len(full) == 1 and "128" in full[0]["text"] and "not alerted on" in full[0]["text"], str(full))
        check(len(firing) == 128, f"{len(firing)} keys fired, the table holds 128")
    finally:
        w.close()
        sb.close()


def test_a_malformed_config_line_is_one_error_naming_the_line():
    sb = Sandbox()
    cfg = os.path.join(sb.dir, "config", "gpuscope")
    os.makedirs(cfg)
    path = os.path.join(cfg, "alerts.ini")
    try:
        for text, line, what in (("[alerts]\nrule = exit\nthis is not a setting\n", 3, "not a 'key = value'"),
                                 ("[alerts]\n\nrule = gpu_idle<lots\n", 3, "percentage"),
                                 ("[alerts]\nevery = 5s\nwebhook = ftp://x\n", 3, "http://"),
                                 ("[other]\nrule = exit\n", 2, "[alerts]")):
            with open(path, "w") as f:
                f.write(text)
            rc, _, err = sb.gs("run", "--", "true")
            lines = [l for l in err.splitlines() if l.strip()]
            check(rc == 2 and len(lines) == 1 and f"{path}:{line}:" in lines[0] and what in lines[0],
                  f"exit 2 and one line naming {path}:{line} ({what}): exit {rc}\n{err}")
        rc, _, err = sb.gs("run", "--alert", "gpu_idle>5%", "--alert-config", "none", "--", "true")
        check(rc == 2 and "gpu_idle takes '<'" in err and len(err.strip().splitlines()) == 1, f"a bad flag: {err}")
    finally:
        sb.close()


run_tests(globals())
