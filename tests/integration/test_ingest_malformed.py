"""The agent under a flood of malformed client messages: 1,000 bad messages of every kind (metric,
param, step, mark) sent through the real `gpuscope run` socket. None may be stored; the counters
must be exact in the summary and in the run's params; each kind is logged to stderr once; and the
good messages sent after them must still be stored (the agent still answers)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

N = 1000

# Sends N bad messages of each kind, packed into datagrams of at most 4 KiB on a blocking socket (so
# nothing is lost to a full queue: every one must reach the agent), then some good ones.
JOB = r"""
import os, socket, sys
N = int(sys.argv[1])
bad = {
    "metric": ["gs1 metric badm{i} nan", "gs1 metric badm{i}", "gs1 metric badm{i} 1 -2", "gs1 metric b@dm{i} 1",
               "gs1 metric badm{i} 1e999", "gs1 metric step.badm{i} 1", "gs1 metric badm{i} 0x1f"],
    "param": ["gs1 param badp{i} \x01", "gs1 param b@dp{i} v", "gs1 param badp{i} " + "x" * 1025,
              "gs1 param ingest.badp{i} 1", "gs1 param badp{i} \xff"],
    "step": ["gs1 step -{i}", "gs1 step {i} data=-1", "gs1 step {i} total=1", "gs1 step {i} data=nan",
             "gs1 step {i}.5", "gs1 step {i} samples=1.5", "gs1 step {i} data=1 data=2"],
    "mark": ["gs1 mark", "gs1 mark badk{i} nan", "gs1 mark b@dk{i} 1", "gs1 mark badk{i} 1 2", "gs1 mark badk{i} t=-1"],
}
lines = []
for kind, forms in bad.items():
    lines += [forms[i % len(forms)].format(i=i) for i in range(N)]
lines += ["gs1 metric good %d %d" % (i, i) for i in range(5)]
lines += ["gs1 param good_param yes", "gs1 mark good_mark 7"]
lines += ["gs1 step %d data=0.25 h2d=0 compute=0.75 samples=8" % (100000 + i) for i in range(5)]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
path = os.environ["GPUSCOPE_SOCKET"]
chunk = b""
for line in lines:
    b = line.encode("latin-1")
    if chunk and len(chunk) + 1 + len(b) > 4096:
        s.sendto(chunk, path)
        chunk = b""
    chunk = chunk + b"\n" + b if chunk else b
s.sendto(chunk, path)
"""


def test_malformed_flood_is_counted_not_stored_and_agent_still_answers():
    sb = Sandbox()
    try:
        job = os.path.join(sb.dir, "job.py")
        with open(job, "w") as f:
            f.write(JOB)
        rc, out, err = sb.gs("run", "--name", "bad", "--", PYTHON, job, str(N))
        check(rc == 0, f"run exited {rc}\n{err}")
        check(f"client: {4 * N} bad messages rejected (metric {N}, param {N}, step {N}, mark {N}, other 0)" in err,
              f"summary lacks the exact counts:\n{err}")
        for kind in ("metric", "param", "step", "mark"):
            n = err.count(f"gpuscope: client: bad {kind} message")
            check(n == 1, f"bad {kind} messages logged {n} times, want once:\n{err}")
        params = {r["key"]: r["value"] for r in sb.csv("show", "bad", "--params", "--csv")}
        check(params.get("ingest.bad_messages") == f"{4 * N} (metric {N}, param {N}, step {N}, mark {N}, other 0)",
              f"ingest.bad_messages = {params.get('ingest.bad_messages')!r}")
        for kind in ("metric", "param", "step", "mark"):
            check(params.get(f"ingest.bad.{kind}") == str(N), f"ingest.bad.{kind} = {params.get(f'ingest.bad.{kind}')}")
        check(not [k for k in params if "badp" in k], "a bad param was stored")
        check(params.get("good_param") == "yes", "the good param after the flood was not stored")
        rows = sb.csv("show", "bad", "--metric", "*", "--csv")
        client = [r for r in rows if r["source"].startswith("client")]
        check(not [r for r in client if "bad" in r["name"]], "a bad metric was stored")
        good = sorted(float(r["value"]) for r in client if r["name"] == "good" and r["source"] == "client")
        check(good == [0, 1, 2, 3, 4], f"good metric values {good}")
        steps = sorted(float(r["value"]) for r in client if r["name"] == "step.n")
        check(steps == [100000 + i for i in range(5)], f"stored steps {steps}: only the 5 good ones may be")
        events = sb.csv("show", "bad", "--events", "--csv")
        marks = [e for e in events if e["kind"] == "mark"]
        check([e["name"] for e in marks] == ["good_mark"], f"marks stored: {[e['name'] for e in marks]}")
        notes = sb.ok("show", "bad", "--notes")
        check(notes.count("client: bad ") == 4, f"want one note per bad kind:\n{notes}")
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
