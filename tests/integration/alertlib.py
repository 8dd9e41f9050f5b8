"""What the alert tests share (test_alerts.py, test_alert_webhooks.py): a loopback webhook receiver
(http.server on port 0), one that accepts and never answers, a refused address, and a run of a job on
simulated GPUs whose scenario time the test sets (GPUSIM_CLOCK)."""
import csv
import io
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gstest import *

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")

INTERVAL = 0.1  # s: the sampling interval of every run here

_SCENARIO = """device 0-{last}
  name NVIDIA H100 PCIe
  cc 9.0
  memory 81559MiB
  power_limit 350
  max_clocks 1755 1593
  at 0 util={u0} mem_util=40 mem_used=20GiB power=300 temp=60
  at 10 util=1 mem_util=0 power=60
  at 20 util=95 mem_util=40 power=300
"""


class Receiver:
    """A webhook on 127.0.0.1 that answers 200 and keeps every POST as (path, JSON)."""

    def __init__(self):
        self.posts, self.lock = [], threading.Lock()
        recv = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with recv.lock:
                    recv.posts.append((self.path, json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def got(self, path=None):
        with self.lock:
            return [b for p, b in self.posts if path is None or p == path]

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class Hanging:
    """Accepts connections and never reads or answers."""

    def __init__(self):
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(64)
        self.url = f"http://127.0.0.1:{self.s.getsockname()[1]}/hook"
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.conns.append(self.s.accept()[0])
            except OSError:
                return

    def close(self):
        self.s.close()
        for c in self.conns:
            c.close()


def refused_url():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connections are refused
    return f"http://127.0.0.1:{port}/hook"


class Watched:
    """`gpuscope run` of a job that waits for a stop file (or of cmd), on the simulated GPUs at the
    scenario time this test sets."""

    def __init__(self, sb, name, args, gpus=1, u0=95, cmd=None, scenario=_SCENARIO, scenario_file=None):
        check(os.path.exists(SIM), f"{SIM} is not built")
        self.sb, self.name = sb, name
        self.clock, self.stop = os.path.join(sb.dir, name + ".clock"), os.path.join(sb.dir, name + ".stop")
        scn = scenario_file or os.path.join(sb.dir, name + ".scn")
        if not scenario_file:
            with open(scn, "w") as f:
                f.write(scenario.format(last=gpus - 1, u0=u0))
        self.set(0)
        env = dict(sb.env, GPUSCOPE_NVML_LIB=SIM, GPUSIM_SCENARIO=scn, GPUSIM_CLOCK=self.clock)
        self.err = open(os.path.join(sb.dir, name + ".err"), "w+")
        cmd = cmd or ["sh", "-c", f"while [ ! -e '{self.stop}' ]; do sleep 0.05; done"]
        self.p = subprocess.Popen([BIN, "run", "--name", name, "--interval", f"{INTERVAL}s", "--flush", "0.4s",
                                   "--alert-every", "0.4s", *args, "--", *cmd],
                                  env=env, stdout=self.err, stderr=self.err)

    def set(self, t):
        with open(self.clock + ".tmp", "w") as f:
            f.write(f"{t}\n")
        os.replace(self.clock + ".tmp", self.clock)

    def rows(self, *args):
        rc, out, _ = self.sb.gs("show", self.name, "--csv", *args)
        return list(csv.DictReader(io.StringIO(out))) if rc == 0 else []

    def wait(self, cond, what):
        return wait_until(cond, what, timeout=120, proc=self.p, every=0.1)

    def finish(self):
        open(self.stop, "w").close()
        rc = self.p.wait(timeout=120)
        self.err.seek(0)
        self.out = self.err.read()
        return rc

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.err.close()



def params(sb, name):
    return {r["key"]: r["value"] for r in sb.csv("show", name, "--params", "--csv")}
