"""A step is never a value (issue 39), and what the client cannot send is said by cause (issue 38).
Before: `log({"loss": x}, step=i)` stored the step as a second series of "loss" (source client.step)
that `show --metric loss`, gpuscope.Store.series() and the API's series?name=loss returned as points
of "loss", and no point carried its step; `log({"loss": x}, 7)` (W&B's positional step) lost the 7;
a value that is not a number was counted as "dropped (socket full or agent busy)"; `log("val loss",
1)` reached the agent as a malformed message. One job under `gpuscope run`, read back every way."""
import json
import subprocess
import urllib.request

from gstest import *

CLIENT = os.path.join(SRC, "clients", "python")

_JOB = r'''
import gpuscope
for i in range(1, 6):
    gpuscope.log({"loss": 1.0 / i, "acc": i / 10}, step=i)
gpuscope.log({"lr": 0.25}, 6)            # W&B's log(data, step)
gpuscope.log("val loss", 0.75, 6)        # a W&B name: mapped to val_loss
gpuscope.log("note", 1.5)                # no step
gpuscope.log("step.x", 1)                # refused: a name of the step series
gpuscope.log("x", "not a number")        # refused: the value
gpuscope.log({"x": 1, "y": 2}, step=-2)  # refused: the step (both values)
print("job done", gpuscope.dropped(), sorted(gpuscope.rejected().items()))
'''


def test_steps_come_with_their_points_and_refusals_are_counted_by_cause():
    sb = Sandbox()
    try:
        job = os.path.join(sb.dir, "job.py")
        with open(job, "w") as f:
            f.write(_JOB)
        rc, out, err = sb.gs("run", "--", PYTHON, job, env={"PYTHONPATH": CLIENT})
        check(rc == 0, f"run exited {rc}: {out}{err}")
        check("job done 0 [('argument', 0), ('name', 1), ('step', 2), ('value', 1)]" in out, out)
        check("metric name 'val loss' sent as 'val_loss'" in err, err)
        check("metric 'step.x' not sent" in err, err)
        check("client: 4 values refused by the job's client, not stored (value 1, name 1, step 2, argument 0)" in err,
              err)
        check("bad messages rejected" not in err, f"the agent saw malformed messages: {err}")
        prm = sb.json("show", "last", "--params", "--json")
        check(prm.get("ingest.client_rejected") == "4 (value 1, name 1, step 2, argument 0)", str(prm))
        check("ingest.client_dropped" not in prm, "a refused value is not a message the socket dropped")

        rows = sb.csv("show", "last", "--metric", "loss", "--csv")
        check([r["source"] for r in rows] == ["client"] * 5, f"the steps shown as values of loss: {rows}")
        check([(float(r["value"]), r["step"]) for r in rows] == [(1.0 / i, str(i)) for i in range(1, 6)], str(rows))
        note = sb.csv("show", "last", "--metric", "note", "--csv")
        check(len(note) == 1 and note[0]["step"] == "", f"a value without a step has none: {note}")
        doc = sb.json("show", "last", "--metric", "lr", "--json")
        check([s["steps"] for s in doc["series"]] == [[6]], f"the positional step: {doc}")

        import sys
        sys.path.insert(0, CLIENT)
        import gpuscope
        os.environ["GPUSCOPE_BIN"] = BIN
        st = gpuscope.Store(sb.store)
        loss = st.series("last", "loss")
        check([(r["value"], r["step"], r["source"]) for r in loss] == [(1.0 / i, i, "client") for i in range(1, 6)],
              str(loss))
        hist = st.history("last")
        check([h["_step"] for h in hist] == [1, 2, 3, 4, 5, 6], str(hist))
        check([h["loss"] for h in hist] == [1.0, 0.5, 1 / 3, 0.25, 0.2, None], str(hist))
        check(hist[5]["lr"] == 0.25 and hist[5]["val_loss"] == 0.75 and hist[0]["lr"] is None, str(hist))
        check("note" not in hist[0], "a value without a step is in no row of history()")
        check(hist[0]["_timestamp"] > 1e9 and hist[0]["_runtime"] >= 0, str(hist[0]))
        mh = st.metric_history("last", "acc")
        check([(m.key, m.value, m.step) for m in mh] == [("acc", i / 10, i) for i in range(1, 6)], str(mh))
        check(all(isinstance(m.timestamp, int) and m.timestamp > 1e12 for m in mh), str(mh))

        p = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0"], env=sb.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            line = p.stdout.readline()
            check("listening on http://127.0.0.1:" in line, line)
            port = int(line.rsplit(":", 1)[1].strip().strip("/"))
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/runs/last/series?name=loss") as r:
                got = json.load(r)["series"]
            check([s["source"] for s in got] == ["client"], f"the API's loss: {[s['source'] for s in got]}")
            steps = [k for k in got[0]["step"] if k is not None]
            check(steps == [1, 2, 3, 4, 5] and len(got[0]["step"]) == len(got[0]["t"]), str(got[0]))
        finally:
            p.terminate()
            p.wait(timeout=30)
    finally:
        sb.close()


run_tests(globals())
