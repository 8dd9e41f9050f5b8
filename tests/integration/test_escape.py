"""Untrusted text in the read-back commands (issue 11, item 4): a run name, a tag or a process name
holding terminal escapes or newlines never reaches the terminal as such from `runs`, `show --params`,
`show --events`, `show --notes` or `metrics`, and CSV quotes by doubling '"' (RFC 4180), so every
row reads back whole. Hostile names (quotes, newlines, `\`, invalid UTF-8, `{}`) sent as a job's
metric names are refused, and the `metrics` listing stays clean; in a process name and a host name
they reach Prometheus labels (the node agent's process trees, its hostname label) escaped: the
scrape is one valid UTF-8 line per sample that promtool accepts."""
import csv
import io
import os
import re
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from gstest import BIN, PYTHON, Sandbox, check, run_tests, shared_sandbox  # noqa: E402

EVIL = "ev\x1b[2Jil\nname\x07\x9b"
QUOTED = 'say "hi" "twice"'
PROC = "p\x1b[31mq\nr"  # an executable's name becomes the process name in proc_* events


# Metric names a job may send over gs1 that no listing may show as they are: each is refused (the
# protocol's names are [A-Za-z0-9_./-]); GOOD, an odd but valid name, is kept exactly.
HOSTILE = [b'lo"ss', b"lo\\ss", b"lo{ss}", b"lo\xffss", b"lo\x1b[2Jss", b'{name="x"}']
GOOD = "train/lo_ss-1.x"
SENDER = r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
lines = [b"gs1 metric " + n + b" 1" for n in eval(sys.argv[1])] + [b"gs1 metric %s 0.5" % sys.argv[2].encode()]
for ln in lines:
    s.sendto(ln, os.environ["GPUSCOPE_SOCKET"])
"""


def setup(sb):
    script = os.path.join(sb.dir, PROC)
    with open(script, "w") as f:
        f.write("#!/bin/sh\nsleep 0.4\n")
    os.chmod(script, 0o755)
    sb.ok("run", "--quiet", "--name", EVIL, "--tag", "q=" + QUOTED, "--tag", "e=x\x1b]0;title\x07y", "--",
          "sh", "-c", f"'{script}'; true")


def setup_metrics(sb):
    sender = os.path.join(sb.dir, "sender.py")
    with open(sender, "w") as f:
        f.write(SENDER)
    sb.ok("run", "--quiet", "--name", "hostile-metrics", "--", PYTHON, sender, repr(HOSTILE), GOOD)


sandbox = shared_sandbox(setup)
metrics_sandbox = shared_sandbox(setup_metrics)


def clean(out, what):
    check("\x1b" not in out and "\x07" not in out and "\x9b" not in out, f"{what}: a control character came through: {out!r}")


def test_runs_table_has_no_escapes_and_one_line_per_run():
    sb = sandbox()
    out = sb.ok("runs")
    clean(out, "runs")
    lines = out.splitlines()
    check(len(lines) == 2, f"a newline in the name broke the table: {lines!r}")
    check("ev[2Jil name" in lines[1], lines[1])
    check(sb.json("runs", "--json")[0]["name"] == EVIL, "JSON keeps the name exactly")


def test_show_params_table_and_csv():
    sb = sandbox()
    out = sb.ok("show", "last", "--params")
    clean(out, "show --params")
    rows = list(csv.reader(io.StringIO(sb.ok("show", "last", "--params", "--csv"))))
    check(rows[0] == ["key", "value"] and all(len(r) == 2 for r in rows), f"CSV rows: {rows}")
    check(["tag.q", QUOTED] in rows, f"the quoted tag did not read back: {rows}")
    check(sb.json("show", "last", "--params", "--json")["tag.q"] == QUOTED, "JSON")


def test_show_events_table_and_csv():
    sb = sandbox()
    out = sb.ok("show", "last", "--events")
    clean(out, "show --events")
    check(any("p[31mq r" in l for l in out.splitlines()), f"the process name should show, cleaned: {out!r}")
    rows = list(csv.reader(io.StringIO(sb.ok("show", "last", "--events", "--csv"))))
    check(all(len(r) == 6 for r in rows), f"every CSV row has 6 fields: {rows}")
    names = {r[2] for r in rows[1:]}
    check(any(n.startswith("p") and "q" in n for n in names), f"names: {names}")
    check(not any("\x1b" in c for r in rows for c in r), "CSV carries no escape")


def test_show_notes_and_metrics_have_no_escapes():
    sb = sandbox()
    clean(sb.ok("show", "last", "--notes"), "show --notes")
    clean(sb.ok("metrics", "last"), "metrics")
    clean(sb.gs("show", "last", "--metric", "no\x1b[2Jsuch")[2], "the 'no series matches' line")


def test_metrics_listing_refuses_hostile_metric_names_and_keeps_a_valid_one():
    sb = metrics_sandbox()
    out = sb.ok("metrics", "hostile-metrics")
    clean(out, "metrics")
    listed = sb.json("metrics", "hostile-metrics", "--json")
    client = sorted(m["name"] for m in listed if m["source"] == "client")
    check(client == [GOOD], f"client series: {client} (want only {GOOD!r})")
    check(GOOD in out and "lo" not in out.replace(GOOD, "").split("SAMPLES", 1)[-1].replace("load", ""),
          f"a hostile name in the listing:\n{out}")
    rows = list(csv.reader(io.StringIO(sb.ok("metrics", "hostile-metrics", "--csv"))))
    check(len(rows) == len(listed) + 1 and all(len(r) == len(rows[0]) for r in rows), f"CSV rows: {rows[:3]}")
    params = sb.json("show", "hostile-metrics", "--params", "--json")
    check(params.get("ingest.bad.metric") == str(len(HOSTILE)), f"refused and counted: {params}")


def unescape(v):
    """A label value of the text exposition, read back (\\, \" and \\n)."""
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_]\w*="(?:[^"\\\n]|\\.)*",?)*)\})? (\S+)')
LABEL = re.compile(r'([a-zA-Z_]\w*)="((?:[^"\\\n]|\\.)*)"')


def parse(body, name):
    """[(labels, value)] of family `name`, the label values read back; a line of the scrape that does
    not parse whole (a label value cut by a quote, a brace or a newline) is a failure."""
    out = []
    for l in body.splitlines():
        if not l or l.startswith("#"):
            continue
        m = SAMPLE.fullmatch(l)
        check(m, f"not one whole sample on this line: {l!r}")
        if m.group(1) == name:
            out.append(({k: unescape(v) for k, v in LABEL.findall(m.group(2) or "")}, float(m.group(3))))
    return out


# A process that names itself argv[1] (prctl PR_SET_NAME: any 15 bytes) and waits to be killed.
NAMED = r"""
import ctypes, os, signal, sys, time
ctypes.CDLL(None).prctl(15, os.fsencode(sys.argv[1]), 0, 0, 0)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("ready", flush=True)
while True:
    time.sleep(1)
"""
COMM = b'q"\\{x}\n\xff"x' + b"}"  # a quote, a backslash, braces, a newline, invalid UTF-8
HOST = b'n"o\\de{1}\xfe'  # the host name label (a UTS namespace of the agent's own)


def test_prometheus_labels_escape_hostile_process_and_host_names():
    from test_metrics import stop, wait_for
    from test_node_trees import PROMTOOL, SIM, dead_pid, scenario
    sb = Sandbox()
    job = agent = None
    try:
        script = os.path.join(sb.dir, "named.py")
        with open(script, "w") as f:
            f.write(NAMED)
        job = subprocess.Popen([PYTHON, script, COMM], stdout=subprocess.PIPE)
        check(job.stdout.readline().strip() == b"ready", "the named process did not start")
        env = dict(sb.env, GPUSIM_SCENARIO=scenario(sb, dead_pid()), GPUSCOPE_NVML_LIB=SIM, GPUSIM_JOBPID=str(job.pid))
        prefix = ["unshare", "-u"] if os.geteuid() == 0 else ["unshare", "-r", "-u"]
        agent = subprocess.Popen([*prefix, PYTHON, "-c", "import os, socket, sys; socket.sethostname(os.fsencode("
                                  "sys.argv[1])); os.execv(sys.argv[2], sys.argv[2:])", HOST, BIN, "agent", "--listen", "127.0.0.1:0", "--interval",
                                  "200ms"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = agent.stdout.readline()
        check(" metrics at http://" in line, f"no address line: {line!r}; {agent.stderr.read() if agent.poll() is not None else ''}")
        url = line.strip().rsplit(" ", 1)[1]
        raw = wait_for(lambda: (lambda b: b if b'gpuscope_tree_procs{pid="%d"' % job.pid in b else None)(
            urllib.request.urlopen(url, timeout=10).read()), 60, "no tree line for the named process")
        try:
            body = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise AssertionError(f"the scrape is not UTF-8 ({e}): {raw[max(0, e.start - 60):e.end + 20]!r}")
        tree = parse(body, "gpuscope_tree_procs")
        mine = [lab for lab, _ in tree if lab.get("pid") == str(job.pid)]
        check(len(mine) == 1, f"one tree line for the named process: {tree}")
        comm = mine[0]["comm"]
        check(comm.startswith('q"\\{x}') and "\n" not in comm and all(c.isprintable() for c in comm),
              f"the process name as a label: {comm!r}")
        hosts = {lab["hostname"] for lab, _ in parse(body, "DCGM_FI_DEV_GPU_UTIL")}
        check(len(hosts) == 1 and next(iter(hosts)).startswith('n"o\\de{1}'), f"the host name label: {hosts}")
        own = "\n".join(l for l in body.splitlines() if "DCGM_FI_" not in l) + "\n"
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=own, capture_output=True, text=True)
        check(p.returncode == 0 and not (p.stdout + p.stderr).strip(), f"promtool: rc {p.returncode}\n{p.stdout}{p.stderr}")
        stop(agent)
        agent = None
    finally:
        if agent:
            agent.kill()
            agent.wait()
        if job:
            job.kill()
            job.wait()
        sb.close()


def test_samples_csv_quotes_every_text_field():
    sb = sandbox()
    rows = list(csv.DictReader(io.StringIO(sb.ok("show", "last", "--metric", "host.cpu.busy_pct", "--csv"))))
    check(rows and all(r["labels"].startswith("cpu=") for r in rows), str(rows[:3]))


if __name__ == "__main__":
    run_tests(globals())
