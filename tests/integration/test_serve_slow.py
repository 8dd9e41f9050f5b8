"""Integration: slow clients cannot lock anyone out of `gpuscope serve` (its HTTP server is also the
agent's `--listen`). A thousand connections trickling a header byte at a time are held while a
client with the token is answered, and each is closed once its headers are late (however steadily
they trickle); connections from one address other than 127.0.0.1 are limited, those from 127.0.0.1
(every local user's) only by the total; a closed connection frees its address's slot at once; the
agent's `--listen` is served past slow clients too. Servers run on a free loopback port; other 127.x source addresses stand for other hosts. Skips when
the descriptor limit cannot hold a thousand connections on each side."""
import http.client
import os
import resource
import select
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

TOKEN = "slow-clients-token-0123456789"
SLOW = 1000
PER_IP = 64  # SERVE_MAX_PER_IP
HEADER_TIMEOUT_S = 10  # SERVE_HEADER_TIMEOUT_S


def setup(sb):
    sb.ok("run", "--quiet", "--name", "one", "--", "true")


box = shared_sandbox(setup)


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 2 * SLOW + 600
    if hard != resource.RLIM_INFINITY and hard < want:
        skip(f"the descriptor limit ({hard}) cannot hold {SLOW} connections on each side")
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(hard, 8192), hard))


def sockets_of(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


def wait_for(cond, timeout, what):
    """Waits for cond() (a state, not a pause); the timeout only bounds a hang."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.1)
    check(cond(), f"not within {timeout} s: {what}")


def closed_by_server(h):
    """True when the server has closed connection h (it reads as ended). poll, not select: the
    descriptors go past 1024."""
    p = select.poll()
    p.register(h, select.POLLIN)
    if not p.poll(0):
        return False
    try:
        return h.recv(1, socket.MSG_PEEK) == b""
    except ConnectionError:
        return True


class Server:
    """`gpuscope serve` on a free loopback port, stopped with SIGTERM."""

    def __init__(self, *args):
        # its messages to a file: a pipe nobody reads would fill
        self.err = open(os.path.join(box().dir, "serve.err"), "w+")
        self.p = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", *args], env=box().env,
                                  stdout=subprocess.PIPE, stderr=self.err, text=True)
        line = self.p.stdout.readline()
        if "listening on http://127.0.0.1:" not in line:
            self.p.kill()
            self.err.seek(0)
            raise AssertionError(f"serve printed {line!r}; stderr: {self.err.read()}")
        self.port = int(line.rsplit(":", 1)[1].strip().strip("/"))
        self.base = sockets_of(self.p.pid)

    def connect(self, source="127.0.0.1"):
        return socket.create_connection(("127.0.0.1", self.port), timeout=30, source_address=(source, 0))

    def get(self, path, source="127.0.0.1", token=None):
        """The status of GET path from source (0: the connection was closed unanswered)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30, source_address=(source, 0))
        try:
            c.request("GET", path, headers={"Authorization": f"Bearer {token}"} if token else {})
            r = c.getresponse()
            r.read()
            return r.status
        except (ConnectionError, http.client.HTTPException):
            return 0
        finally:
            c.close()

    def held(self):
        return sockets_of(self.p.pid) - self.base

    def stop(self):
        self.p.terminate()
        rc = self.p.wait(timeout=30)
        self.err.seek(0)
        lines = self.err.read().splitlines()
        self.err.close()
        check(rc == 0, f"serve exited {rc} on SIGTERM; stderr: {lines[-5:]}")


def test_clients_with_the_token_are_answered_while_a_thousand_slow_ones_are_held():
    raise_fd_limit()
    sv = Server("--token", TOKEN)
    slow = []
    try:
        opened = time.time()
        for i in range(SLOW):
            h = sv.connect()
            h.sendall(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            slow.append(h)
        wait_for(lambda: sv.held() >= SLOW, 60, f"the server holds the {SLOW} slow connections ({sv.held()})")
        for i in range(6):
            st = sv.get("/api/runs", token=TOKEN)
            check(st == 200, f"scrape {i} with the token while {SLOW} slow connections are held: {st}")
        # each trickles a header byte at a time, never a whole request: the deadline closes it anyway
        started, open_ = time.time(), list(slow)
        while open_ and time.time() - started < HEADER_TIMEOUT_S + 50:
            for h in open_:
                try:
                    h.send(b"X")
                except OSError:
                    pass
            open_ = [h for h in open_ if not closed_by_server(h)]
            time.sleep(1)
        check(not open_, f"{len(open_)} of {SLOW} trickling connections are still open after "
                         f"{time.time() - started:.0f} s (the headers' deadline is {HEADER_TIMEOUT_S} s)")
        print(f"     {SLOW} trickling connections all closed by {time.time() - opened:.1f} s after the first opened")
        check(sv.get("/api/runs", token=TOKEN) == 200, "the server answers after")
    finally:
        for h in slow:
            h.close()
        sv.stop()


def test_one_address_is_limited_but_127_0_0_1_only_by_the_total():
    raise_fd_limit()
    sv = Server()
    held = []
    try:
        for i in range(PER_IP):
            held.append(sv.connect("127.0.0.2"))
        wait_for(lambda: sv.held() >= PER_IP, 30, f"{PER_IP} connections from 127.0.0.2 held ({sv.held()})")
        check(sv.get("/api/runs", "127.0.0.2") == 0, f"connection {PER_IP + 1} from 127.0.0.2 is closed unanswered")
        check(sv.get("/api/runs", "127.0.0.3") == 200, "another address is answered")
        for i in range(2 * PER_IP):
            held.append(sv.connect("127.0.0.1"))
        wait_for(lambda: sv.held() >= 3 * PER_IP, 30, f"{2 * PER_IP} more from 127.0.0.1 held ({sv.held()})")
        check(sv.get("/api/runs") == 200, f"127.0.0.1 (every local user) is answered past {2 * PER_IP} connections")
    finally:
        for h in held:
            h.close()
        sv.stop()


def test_a_closed_connection_frees_its_slot_at_once():
    raise_fd_limit()
    sv = Server()
    try:
        conns = []
        for i in range(PER_IP):  # every slot of 127.0.0.2, each used for a request and kept alive
            c = http.client.HTTPConnection("127.0.0.1", sv.port, timeout=30, source_address=("127.0.0.2", 0))
            c.request("GET", "/api/runs")
            r = c.getresponse()
            r.read()
            check(r.status == 200, f"keep-alive request {i}: {r.status}")
            conns.append(c)
        for c in conns:
            c.close()
        # once the server has closed its side of each, the address's slots are free: no accept needed
        wait_for(lambda: sv.held() == 0, 30, f"the server closes the {PER_IP} connections ({sv.held()} left)")
        check(sv.get("/api/runs", "127.0.0.2") == 200, "the next connection from the address is answered")
    finally:
        sv.stop()


def test_the_agents_listen_is_served_past_slow_clients_from_two_addresses():
    # the probe: 64 trickling connections from two addresses locked a token-protected
    # `agent --listen` out for every scraper; here 64 from each and 200 from 127.0.0.1
    raise_fd_limit()
    err = open(os.path.join(box().dir, "agent.err"), "w+")
    p = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:0", "--token", TOKEN], env=box().env,
                         stdout=subprocess.PIPE, stderr=err, text=True)
    slow = []
    try:
        line = p.stdout.readline()
        err.seek(0)
        check(" metrics at http://" in line, f"no address line: {line!r}; stderr: {err.read()}")
        port = int(line.strip().rsplit(":", 1)[1].split("/")[0])
        for source, n in (("127.0.0.2", PER_IP), ("127.0.0.3", PER_IP), ("127.0.0.1", 200)):
            for i in range(n):
                h = socket.create_connection(("127.0.0.1", port), timeout=30, source_address=(source, 0))
                h.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                slow.append(h)
        wait_for(lambda: sockets_of(p.pid) >= len(slow), 60, f"the agent holds the {len(slow)} slow connections")
        for i in range(6):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
            r = c.getresponse()
            body = r.read()
            c.close()
            check(r.status == 200 and b"gpuscope_" in body, f"scrape {i} while {len(slow)} slow connections are held: "
                                                             f"{r.status}")
        wait_for(lambda: all(closed_by_server(h) for h in slow), HEADER_TIMEOUT_S + 50,
                 "the slow connections are closed once their headers are late")
    finally:
        for h in slow:
            h.close()
        p.terminate()
        rc = p.wait(timeout=30)
        check(rc == 0, f"the agent exited {rc} on SIGTERM")


if __name__ == "__main__":
    run_tests(globals())
