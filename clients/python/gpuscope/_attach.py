"""gpuscope._attach — reaching an agent that nobody told this process about.

`gpuscope attach PID` binds its socket at a path the watched process can work out by itself
(docs/protocol.md, "Attached runs"): PID.sock in $XDG_RUNTIME_DIR/gpuscope, or /tmp/gpuscope-UID
without XDG_RUNTIME_DIR. While GPUSCOPE_SOCKET is unset, the client asks a Finder, at most every
LOOK_EVERY_S seconds and only when it has something to send, whether such a socket exists for this
process or one of its nearest ancestors (a DataLoader worker, a rank under torchrun, a script under
`sh -c`). A look costs one lstat per directory; the candidate sockets are stat'ed only when a
directory changed since the last look. start() and stop() run `gpuscope attach` from inside a script.
"""
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

LOOK_EVERY_S = 2.0
ANCESTORS = 3  # the parent, grandparent and great-grandparent are looked for too
START_WAIT_S = 10.0  # how long start() waits for the agent's socket


def socket_dirs():
    """The directories an attach socket may be in: the agent's choice first (XDG_RUNTIME_DIR when set
    and absolute), then the /tmp fallback, in case the agent's environment differed from ours."""
    dirs = []
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg.startswith("/"):
        dirs.append(os.path.join(xdg, "gpuscope"))
    dirs.append(f"/tmp/gpuscope-{os.getuid()}")
    return dirs


def _private(st):
    """A real directory of this user that nobody else may enter (as the agent makes it)."""
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def lineage(pid):
    """pid and up to ANCESTORS of its ancestors (from /proc/PID/stat), stopping before init."""
    out = [pid]
    while len(out) <= ANCESTORS:
        try:
            with open(f"/proc/{out[-1]}/stat", "rb") as f:
                s = f.read()
            ppid = int(s[s.rindex(b")") + 2:].split()[1])
        except Exception:
            break
        if ppid <= 1:
            break
        out.append(ppid)
    return out


class Finder:
    """Looks, rarely, for the attach socket of this process or an ancestor. look() returns its path
    or None; reset() makes the next look a full one (after a found agent went away)."""

    __slots__ = ("pid", "pids", "next", "seen")

    def __init__(self):
        self.pid = 0
        self.pids = []
        self.next = 0.0
        self.seen = {}  # directory -> st_mtime_ns at the last look that found nothing in it

    def reset(self):
        self.seen = {}
        self.next = 0.0

    def look(self, now):
        if now < self.next:
            return None
        self.next = now + LOOK_EVERY_S
        try:
            pid = os.getpid()
            if pid != self.pid:  # first look, or a forked child: its own lineage
                self.pid, self.pids, self.seen = pid, lineage(pid), {}
            for d in socket_dirs():
                try:
                    st = os.lstat(d)
                except OSError:
                    continue
                if self.seen.get(d) == st.st_mtime_ns or not _private(st):
                    continue
                for p in self.pids:
                    path = f"{d}/{p}.sock"
                    try:
                        if stat.S_ISSOCK(os.stat(path).st_mode):
                            return path
                    except OSError:
                        pass
                self.seen[d] = st.st_mtime_ns
        except Exception:
            pass
        return None


def socket_for(pid):
    """Where `gpuscope attach pid` binds (as the agent chooses it)."""
    return f"{socket_dirs()[0]}/{pid}.sock"


class Agent:
    """The `gpuscope attach` that start() ran: its process, and the log of its stderr."""

    __slots__ = ("proc", "log", "owner")

    def __init__(self, proc, log):
        self.proc, self.log, self.owner = proc, log, os.getpid()


def find_binary():
    """GPUSCOPE_BIN when set, else gpuscope on PATH; None when neither is an executable file."""
    b = os.environ.get("GPUSCOPE_BIN") or shutil.which("gpuscope")
    return b if b and os.path.isfile(b) and os.access(b, os.X_OK) else None


def spawn(name, interval, store):
    """Runs `gpuscope attach --quiet os.getpid()` in its own session (so a ^C meant for the script
    does not end the run first) and waits for its socket. Returns (Agent, socket path) or raises
    RuntimeError with the reason."""
    binary = find_binary()
    if not binary:
        raise RuntimeError("the gpuscope binary was not found (PATH or GPUSCOPE_BIN)")
    pid = os.getpid()
    args = [binary, "attach", "--quiet", str(pid)]
    if name:
        args += ["--name", str(name)]
    if interval:
        args += ["--interval", str(interval)]
    if store:
        args += ["--store", str(store)]
    log = tempfile.TemporaryFile(prefix="gpuscope-attach-")  # never a pipe: a full pipe would block it
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                            start_new_session=True, close_fds=True)
    path = socket_for(pid)
    end = time.monotonic() + START_WAIT_S
    while time.monotonic() < end:
        if proc.poll() is not None:
            log.seek(0)
            why = log.read().decode("utf-8", "replace").strip() or f"exit status {proc.returncode}"
            log.close()
            raise RuntimeError(f"gpuscope attach failed: {why}")
        try:
            if stat.S_ISSOCK(os.stat(path).st_mode):
                return Agent(proc, log), path
        except OSError:
            pass
        time.sleep(0.01)
    return Agent(proc, log), path  # slow to start: the Finder will pick the socket up later


def end(agent, timeout=60.0):
    """Stops the run start() began (SIGTERM: the agent closes the run and diagnoses it) and waits for
    it. Returns True when it ended cleanly."""
    try:
        agent.proc.send_signal(signal.SIGTERM)
        agent.proc.wait(timeout=timeout)
        ok = agent.proc.returncode == 0
        if not ok:
            agent.log.seek(0)
            sys.stderr.write("gpuscope: " + agent.log.read().decode("utf-8", "replace")[-500:])
        return ok
    except Exception:
        return False
    finally:
        try:
            agent.log.close()
        except Exception:
            pass
