"""gpuscope._core — the client's machinery: a Client (the pending lines, the socket, the step
counter and the rank of one process), the process's default Client, phase timing and the StepTimer
the framework callbacks use. The names here without a leading underscore are the interface of
gpuscope.lightning, .keras and .hf; a job uses the functions of the gpuscope package, which are
bound methods of default_client (the pattern of the random module).

State: everything mutable is an attribute of a Client and changes under its lock, except the step in
progress, which is a ContextVar (current_step): each thread and asyncio task has its own, so a
phase() times the step of the loop it runs in. A forked child keeps its Client object with its
pending lines, counters and socket reset (DataLoader workers must not resend the parent's lines).
"""
import atexit
import contextvars
import os
import socket
import sys
import threading
import time

from . import _attach
from . import _precision

PROTOCOL = "gs1"
REJECT_CAUSES = ("value", "name", "step", "argument")  # gs1 rejected CAUSE N (docs/protocol.md)
MAX_DATAGRAM = 4096
MAX_VALUE = 1024
FLUSH_EVERY_S = 0.05
FLUSH_BYTES = 3072
mono = time.monotonic  # CLOCK_MONOTONIC on Linux: the agent's clock
_CTRL = {c: " " for c in list(range(32)) + [127]}

# The phase times (a dict) of the watched step in progress in this context, or None.
current_step = contextvars.ContextVar("gpuscope_current_step", default=None)
_current_step_get = current_step.get


def env_rank(environ=os.environ):
    """This process's rank as the usual launchers give it (torchrun and accelerate: RANK; Slurm,
    Open MPI, MPICH), or 0."""
    for var in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        v = environ.get(var, "")
        if v:
            return int(v) if v.isdigit() and 0 < int(v) <= 65535 else 0
    return 0


def _param_text(v):
    if v is True or v is False:
        s = "true" if v else "false"
    elif v is None:
        s = "none"
    else:
        s = str(v).translate(_CTRL)
    b = s.encode("utf-8", "replace")
    if len(b) > MAX_VALUE:
        s = b[:MAX_VALUE].decode("utf-8", "ignore")
    return s


def _first_dim(x):
    s = getattr(x, "shape", None)
    if s is not None:
        return int(s[0]) if len(s) else None
    return len(x)


def count_samples(batch, samples):
    """Samples in a batch: samples itself (an int), samples(batch) (a callable), or inferred from
    the batch's first dimension (a tensor's shape[0]; a list/tuple's or dict's first element's)."""
    try:
        if samples is not None:
            return int(samples(batch) if callable(samples) else samples)
        s = getattr(batch, "shape", None)
        if s is not None:
            return int(s[0]) if len(s) else None
        if isinstance(batch, (list, tuple)) and batch:
            return _first_dim(batch[0])
        if isinstance(batch, dict) and batch:
            return _first_dim(next(iter(batch.values())))
    except Exception:
        pass
    return None


def _is_torch_loader(loader):
    return any(c.__name__ == "DataLoader" and c.__module__.startswith("torch.utils.data")
               for c in type(loader).__mro__)


class Client:
    """One process's connection to the agent: lines pending for the next datagram, the socket (opened
    on the first send), the dropped count, the params already sent, the step counter and the rank.
    path None: no agent (yet), every method is a cheap no-op, but for the finder's rare look for an
    attach socket when look is on. Thread-safe; no method ever raises."""

    __slots__ = ("path", "rank", "steps", "sock", "lines", "nbytes", "last", "ndropped", "nreported", "lock",
                 "params", "finder", "found", "early", "agent", "warned", "prec_user", "prec_rank", "origin",
                 "nrejected", "rreported", "said", "alerted", "n_alerts")

    def __init__(self, path=None, rank=0, look=False):
        self.path = path or None
        self.rank = rank  # > 0: steps carry rank=N, so each rank keeps its own step series
        self.steps = 0  # steps numbered from 0 across every watched loop and callback of the process
        # Without a path, look (rarely) for the socket of an agent attached later (_attach.py).
        self.finder = _attach.Finder() if look and self.path is None else None
        self.found = False  # path is an attach socket the finder (or start()) found
        self.early = {}  # params set before an agent was found, sent when one is
        self.agent = None  # the `gpuscope attach` start() ran
        self.warned = False
        self.prec_user = False  # the job set precision itself: nothing the client sees replaces it
        self.prec_rank = 0  # how sure the precision the client found is (auto_precision)
        self.origin = 0  # what of origin_params() went out: 0 nothing, 1 Python's, 2 torch's too
        self.alerted = {}  # alert() title -> when it was last sent (wait_duration)
        self.n_alerts = 0
        self._reset()

    @classmethod
    def from_env(cls, environ=os.environ):
        """The client a process needs: GPUSCOPE_SOCKET (set by `gpuscope run`) and the rank; without
        GPUSCOPE_SOCKET it looks for an attach socket, unless GPUSCOPE_ATTACH=0."""
        return cls(environ.get("GPUSCOPE_SOCKET"), env_rank(environ), look=environ.get("GPUSCOPE_ATTACH") != "0")

    def _reset(self):
        self.sock = None
        self.lines = []
        self.nbytes = 0
        self.last = 0.0
        self.ndropped = 0
        self.nreported = 0  # of ndropped, how many the agent has been told about ("gs1 dropped N")
        self.nrejected = dict.fromkeys(REJECT_CAUSES, 0)  # values refused before sending, by cause
        self.rreported = dict.fromkeys(REJECT_CAUSES, 0)  # of those, told ("gs1 rejected CAUSE N")
        self.said = set()  # what the client has said once on stderr (a name mapped, a name refused)
        self.lock = threading.Lock()
        self.params = {}

    def after_fork_in_child(self):
        """A forked child starts with nothing pending, nothing dropped and a socket of its own; the
        lock is new too (another thread of the parent may have held it at fork)."""
        if self.path is not None:
            self._reset()

    # -- the public functions of the gpuscope package (bound to default_client) --

    def enabled(self):
        """True when this process reports to an agent: GPUSCOPE_SOCKET was set at import, or an
        attached agent's socket was found (or start() began one)."""
        return self.path is not None

    # -- an agent nobody told us about: `gpuscope attach`, start() and stop() --

    def _look(self):
        """No agent yet: asks the finder (at most every few seconds) for an attach socket. True once
        there is one; the params set so far are sent to it first."""
        f = self.finder
        if f is None:
            return False
        path = f.look(mono())
        if path is None:
            return False
        self._use(path)
        return True

    def _use(self, path):
        with self.lock:
            if self.path is None:
                self.path, self.found = path, True
                for k, s in self.early.items():
                    self.params[k] = s
                    self._add(f"gs1 param {k} {s}", mono())

    def start(self, name=None, interval=None, store=None):
        """Starts recording this process: runs `gpuscope attach --quiet PID` (the binary from
        GPUSCOPE_BIN, else PATH) as a separate process that watches this one and its children until
        this process exits or stop() is called; name, interval ("100ms") and store (a URL) go to its
        options. Returns True when an agent watches this process (already so under `gpuscope run`).
        Without the binary, or when it fails, it warns once on stderr and returns False: the script
        runs on. Never raises."""
        try:
            if self.path is not None:
                return True
            try:
                agent, path = _attach.spawn(name, interval, store)
            except Exception as e:
                if not self.warned:
                    self.warned = True
                    sys.stderr.write(f"gpuscope: not recording this run: {e}\n")
                return False
            self.agent = agent
            self._use(path)
            return True
        except Exception:
            return False

    def stop(self):
        """Ends the run start() began: sends what is pending, stops the agent (it closes the run and
        diagnoses it) and waits for it. Returns True when it ended cleanly; False when start() began
        none in this process. Never raises."""
        try:
            agent = self.agent
            if agent is None or agent.owner != os.getpid():
                return False
            self.flush()
            self.agent = None
            ok = _attach.end(agent)
            with self.lock:
                if self.found:
                    self.path, self.found, self.sock = None, False, None
                    if self.finder is not None:
                        self.finder.reset()
            return ok
        except Exception:
            return False

    def dropped(self):
        """Messages that could not be sent to the agent (socket full or gone). Never raises."""
        return self.ndropped

    def rejected(self):
        """What the client refused to send, by cause: {"value": not a finite number, "name": a
        metric name that cannot be sent, "step": not a whole number >= 0, "argument": any other bad
        argument or error in the client}. The agent is told too (the run's summary and
        `gpuscope report` list them). Never raises."""
        return dict(self.nrejected)

    def flush(self):
        """Sends whatever is pending now. Never raises."""
        try:
            if self.path is not None:
                with self.lock:
                    self._flush(mono())
        except Exception:
            pass

    def set_rank(self, rank):
        """Sets this process's rank in a distributed job when no launcher variable says it (for example
        under torch.multiprocessing.spawn). Rank 0 is the job's main loop; the agent keeps every other
        rank's steps apart, labelled rank=N. Never raises."""
        try:
            r = int(rank)
            self.rank = r if 0 <= r <= 65535 else 0
        except Exception:
            self.count_error()

    def log(self, name=None, value=None, step=None, commit=None, **metrics):
        """Logs metric values (Python numbers), in whichever way the job already does:
        log("loss", 0.5), log("loss", 0.5, step), log(loss=0.5, acc=0.9, step=3), or W&B's
        log({"loss": 0.5, "acc": 0.9}, step=3) and log({"loss": 0.5}, 3) (commit= is accepted and
        ignored). step: a whole number >= 0, or None. A name outside the protocol's 1-128 of
        [A-Za-z0-9_./-] is mapped ("val loss" -> "val_loss", said once on stderr). Never raises:
        what cannot be sent (a value that is not a finite number, a bad step, a name starting with
        "step.") is skipped and counted by cause (rejected()), the others are sent."""
        try:
            if isinstance(name, dict):
                if value is not None:  # W&B's log(data, step): the second positional is the step
                    if step is not None:
                        raise TypeError("step given twice")
                    step, value = value, None
                pairs = list(name.items()) + list(metrics.items())
            elif name is None:
                pairs = list(metrics.items())
            else:
                pairs = [(name, value)] + list(metrics.items())
        except Exception:
            self.count_error()
            return
        if not pairs or (self.path is None and not self._look()):
            return
        sstep = ""
        if step is not None:
            n = _whole(step)
            if n is None:
                self.count_error("step", len(pairs))
                return
            sstep = f" {n}"
        for k, v in pairs:
            try:
                v = float(v)
            except Exception:
                v = _INF
            if v - v != 0.0:  # not finite: the protocol has no nan or inf
                self.count_error("value")
                continue
            k = self.metric_name(k)
            if k is not None:
                try:
                    self.add(f"gs1 metric {k} {v!r}{sstep} t={mono():.6f}")
                except Exception:
                    self.count_error()

    def param(self, **kv):
        """Records run parameters: param(batch_size=64, precision="bf16"). Booleans are sent as
        true/false, None as none; a value repeated unchanged is not sent again. A precision set here
        is never replaced by the one the client finds by itself (auto_precision)."""
        if "precision" in kv:
            self.prec_user = True
        self._param(kv)

    def _param(self, kv):
        if self.path is None and not self._look():
            if self.finder is not None:  # kept for an agent attached later
                for k, v in kv.items():
                    try:
                        if len(self.early) < 1000 or k in self.early:
                            self.early[k] = _param_text(v)
                    except Exception:
                        self.count_error()
            return
        for k, v in kv.items():
            try:
                s = _param_text(v)
                with self.lock:
                    if self.params.get(k) != s:
                        self.params[k] = s
                        self._add(f"gs1 param {k} {s}", mono())
            except Exception:
                self.count_error()

    def mark(self, name, value=None):
        """Records a marker event (epoch, eval, checkpoint) with an optional number."""
        if self.path is None and not self._look():
            return
        try:
            if value is None:
                self.add(f"gs1 mark {name} t={mono():.6f}")
            else:
                self.add(f"gs1 mark {name} {float(value)!r} t={mono():.6f}")
        except Exception:
            self.count_error("value" if value is not None else "argument")

    _LEVELS = ("INFO", "WARN", "ERROR")

    def alert(self, title, text="", level="INFO", wait_duration=None):
        """Raises an alert of the job's own: the run's alert destinations get it through the rule
        `job` (in the default rules; docs/alerts.md), and the run keeps it (a mark "alert", the params
        job.alert.N.level/.title/.text). level is INFO, WARN or ERROR (W&B's AlertLevel or its
        name); wait_duration (seconds, or a timedelta): another alert of the same title within it is
        not sent, as W&B's is not. Returns whether it was sent."""
        if self.path is None and not self._look():
            return False
        try:
            lv = str(getattr(level, "value", level) or "INFO").upper()
            lv = "WARN" if lv == "WARNING" else lv
            if lv not in self._LEVELS:
                self.count_error("argument")
                return False
            wait = wait_duration.total_seconds() if hasattr(wait_duration, "total_seconds") else wait_duration
            now = mono()
            last = self.alerted.get(str(title))
            if wait and last is not None and now - last < float(wait):
                return False
            self.alerted[str(title)] = now
            self.n_alerts += 1
            n = os.getpid() * 1000000 + self.n_alerts  # unique across the job's processes
            self._param({f"job.alert.{n}.level": lv, f"job.alert.{n}.title": title,
                         f"job.alert.{n}.text": text})
            self.add(f"gs1 mark alert {n} t={now:.6f}")
            return True
        except Exception:
            self.count_error("argument")
            return False

    def watch(self, loader, samples=None, model=None):
        """Wraps an iterable of batches: `for batch in gpuscope.watch(loader):`. Each step's data wait
        (the time next() takes) and compute (the rest of the iteration) are timed and sent; samples per
        step are samples (an int), samples(batch), or the batch's first dimension. For a torch
        DataLoader, batch_size, num_workers, pin_memory, prefetch_factor and persistent_workers are
        recorded as params. len() works when the loader has one. The run's precision is found as the
        loop runs (unless param(precision=...) said it): autocast around the loop, and with model (a
        torch nn.Module) autocast inside its first forward, else its parameters' dtype."""
        if self.path is not None or self.finder is not None:
            self.record_loader(loader)
        return _Watched(self, loader, samples, model)

    # -- the interface of the framework callbacks --

    def count_error(self, cause="argument", n=1):
        """Counts n messages refused for cause (REJECT_CAUSES: a bad argument or an error in the
        client by default). Never raises."""
        try:
            with self.lock:
                self.nrejected[cause] += n
        except Exception:
            pass

    def metric_name(self, name):
        """name as the protocol takes it (None: it cannot be sent, counted under "name"): characters
        outside [A-Za-z0-9_./-] become "_" and it is cut at 128; the first name mapped, and the first
        refused, are said once on stderr. Never raises."""
        try:
            got = _METRIC_NAMES.get(name)
        except Exception:  # unhashable
            got = None
        if got is not None:
            return got or self._refuse_name(name)
        try:
            s = str(name)
            got = "".join(c if c.isascii() and (c.isalnum() or c in "_./-") else "_" for c in s)[:128]
            if not got or got.startswith("step."):
                got = ""
            elif got != s:
                self._say("mapped", f"gpuscope: metric name {s[:200]!r} sent as {got!r} (a name is 1-128 of "
                          "A-Z a-z 0-9 _ . / -); further names are mapped without a word\n")
            if len(_METRIC_NAMES) < 4096:
                _METRIC_NAMES[name] = got
        except Exception:
            got = ""
        return got or self._refuse_name(name)

    def _refuse_name(self, name):
        try:
            self._say("refused", f"gpuscope: metric {str(name)[:200]!r} not sent: a name needs a letter, digit or "
                      "_ . / - and may not start with 'step.' (those are the step series); further ones are "
                      "only counted (gpuscope.rejected())\n")
        except Exception:
            pass
        self.count_error("name")
        return None

    def _say(self, what, text):
        if what not in self.said:
            self.said.add(what)
            sys.stderr.write(text)

    def auto_precision(self, value, source, rank):
        """The run's precision as the client found it (_precision's vocabulary), from source (words
        for the report: "lightning trainer.precision=16-mixed"), rank how sure: 1 a model's parameter
        dtype, 2 the framework's setting, 3 autocast seen on. Sent as the params precision and
        precision_source unless the job set precision itself or a surer finding came first. Never
        raises."""
        try:
            if value is None or self.prec_user or rank < self.prec_rank:
                return
            self.prec_rank = rank
            self._param({"precision": value, "precision_source": source})
        except Exception:
            self.count_error()

    def record_loader(self, loader):
        """A torch DataLoader's settings as params (without importing torch)."""
        try:
            if not _is_torch_loader(loader):
                return
            kv = {}
            for key in ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers"):
                if hasattr(loader, key):
                    kv[key] = getattr(loader, key)
            torch = sys.modules.get("torch")
            kv["framework"] = "pytorch"
            if torch is not None:
                kv["framework_version"] = getattr(torch, "__version__", "")
            self.param(**kv)
        except Exception:
            self.count_error()

    def emit_step(self, data, span, phases, samples, t_end):
        """Sends one step: data wait, then the step's other phases; compute is span minus the phases.
        A step without a timed h2d phase carries no h2d= field: not measured is not zero. The step's
        number is taken under the lock with the line, so numbers follow the order of the lines."""
        if self.path is None and not self._look():
            return  # no agent (yet): the step is not counted either
        try:
            h2d = phases.pop("h2d", None) if phases else None
            compute = span - (h2d or 0.0)
            if phases:  # most steps time no phase, or h2d alone
                data += phases.pop("data", 0.0)
                phases.pop("compute", None)  # compute is the rest of the step anyway
                compute -= sum(phases.values())
            if compute < 0:
                compute = 0.0
            fields = f"data={data:.9f}"
            if h2d is not None:
                fields += f" h2d={h2d:.9f}"
            fields += f" compute={compute:.9f}"
            if samples is not None and samples >= 0:
                fields += f" samples={samples}"
            if phases:
                for k, v in phases.items():
                    fields += f" {k}={v:.9f}"
            if self.rank > 0:
                fields += f" rank={self.rank}"
            with self.lock:
                n = self.steps
                self.steps = n + 1
                self._add(f"gs1 step {n} {fields} t={t_end:.6f}", t_end)
        except Exception:
            self.count_error()

    # -- batching and sending --

    def add(self, line):
        """Queues one message; sends the batch when 50 ms have passed or 3 KiB are pending."""
        with self.lock:  # _add's body, written out: this is the per-message path of log() and mark()
            self.lines.append(line)
            self.nbytes += len(line) + 1
            now = mono()
            if now - self.last >= FLUSH_EVERY_S or self.nbytes >= FLUSH_BYTES:
                self._flush(now)

    def _add(self, line, now):  # add() with the lock held and the time taken
        self.lines.append(line)
        self.nbytes += len(line) + 1
        if now - self.last >= FLUSH_EVERY_S or self.nbytes >= FLUSH_BYTES:
            self._flush(now)

    def _flush(self, now):  # the lock held
        self.last = now
        if self.lines and self.origin < 2:
            self._origin()
        lines, self.lines, self.nbytes = self.lines, [], 0
        if not lines:
            # a flush with nothing pending (at exit) still reports drops and refusals, even when
            # nothing else was ever sent
            if (self.ndropped > self.nreported or self.nrejected != self.rreported) and self._open():
                self._report_dropped()
            return
        if not self._open():
            self.ndropped += len(lines)
            return
        chunk, size = [], 0
        for line in lines:
            b = line.encode("utf-8", "replace")
            if len(b) > MAX_DATAGRAM:
                self.ndropped += 1
                continue
            if chunk and size + 1 + len(b) > MAX_DATAGRAM:
                self._send(chunk)
                chunk, size = [], 0
            size += len(b) + (1 if chunk else 0)
            chunk.append(b)
        if chunk:
            self._send(chunk)
        self._report_dropped()

    def _open(self):  # the lock held; True when there is a socket to send with
        try:
            if self.sock is None:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                s.setblocking(False)
                self.sock = s
            return True
        except Exception:
            return False

    def _origin(self):  # the lock held; before the first datagram, then until torch is seen
        """Where the run came from, sent once as params with the first messages: the Python
        executable and version, and once the job has imported torch, torch's, CUDA's and cuDNN's
        versions (never importing torch itself)."""
        try:
            kv = origin_params(self.origin)
        except Exception:
            self.ndropped += 1
            self.origin = 2
            return
        if kv:
            self.origin = 2 if "torch.version" in kv else 1
            self.lines[:0] = [f"gs1 param {k} {v}" for k, v in kv.items()]
            for k, v in kv.items():
                self.params[k] = v

    def _report_dropped(self):  # the lock held
        """Tells the agent how many messages it missed since the last time (gs1 dropped), so a report
        built on part of the steps says so, and what the client refused by cause (gs1 rejected);
        counted as told only once the datagram went out."""
        n = self.ndropped - self.nreported
        told = [f"gs1 dropped {n}"] if n > 0 else []
        rej = {c: k - self.rreported[c] for c, k in self.nrejected.items() if k > self.rreported[c]}
        told += [f"gs1 rejected {c} {k}" for c, k in rej.items()]
        if not told or self.path is None:
            return
        try:
            self.sock.sendto("\n".join(told).encode(), self.path)
            self.nreported += max(n, 0)
            for c, k in rej.items():
                self.rreported[c] += k
        except Exception:
            pass

    def _send(self, chunk):  # the lock held
        try:
            self.sock.sendto(b"\n".join(chunk), self.path)
        except (FileNotFoundError, ConnectionRefusedError):  # the agent is gone
            self.ndropped += len(chunk)
            if self.found:  # an attached agent ended: look for the next one
                self.path, self.found = None, False
                if self.finder is not None:
                    self.finder.reset()
        except Exception:  # full (EAGAIN), anything
            self.ndropped += len(chunk)


def origin_params(sent):
    """The params of where the run came from that are not sent yet (sent: 0 none, 1 Python's) and
    can be known now: python.executable, python.version; torch.version, torch.cuda, torch.cudnn
    when the job has imported torch (absent when a CPU build has no CUDA or cuDNN)."""
    kv = {}
    if sent < 1:
        import platform
        kv["python.executable"] = sys.executable or "unknown"
        kv["python.version"] = platform.python_version()
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "__version__"):
        return kv
    kv["torch.version"] = str(torch.__version__)
    cuda = getattr(getattr(torch, "version", None), "cuda", None)
    if cuda:
        kv["torch.cuda"] = str(cuda)
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception:
        cudnn = None
    if cudnn:
        kv["torch.cudnn"] = str(cudnn)
    return kv


PROBE_STEPS = 3  # steps at whose start watch() looks for autocast around the loop


class _PrecisionProbe:
    """Finds a watched loop's precision in its first steps: autocast on at a step's start (a loop
    inside `with torch.autocast(...)`), and with a model, autocast in its first forward (a forward
    pre-hook that removes itself), else the dtype of its parameters once the first step ended."""

    __slots__ = ("client", "model", "hook", "steps")

    def __init__(self, client, model):
        self.client, self.model, self.hook, self.steps = client, model, None, 0
        try:
            if model is not None and hasattr(model, "register_forward_pre_hook"):
                self.hook = model.register_forward_pre_hook(self._forward)
        except Exception:
            self.hook = None

    def _forward(self, module, args):
        try:
            self._unhook()
            k = _precision.autocast_now()
            if k is not None:
                self.client.auto_precision(k, "torch autocast in the model's forward", 3)
            else:
                self._params("no autocast in the model's forward")
        except Exception:
            pass

    def _params(self, why):
        k = _precision.of_params(self.model)
        if k is not None:
            self.client.auto_precision(k, f"torch: the model's parameters are {k}, {why}", 1)

    def _unhook(self):
        h, self.hook = self.hook, None
        if h is not None:
            h.remove()

    def step_start(self):
        """At a step's start; False once there is nothing more to look for."""
        self.steps += 1
        k = _precision.autocast_now()
        if k is not None:
            self.client.auto_precision(k, "torch autocast around the training loop", 3)
            self._unhook()
            return False
        if self.steps == 2 and self.hook is not None:  # the model's forward was not called through it
            self._unhook()
            self._params("its forward not seen")
        return self.steps < PROBE_STEPS or self.hook is not None

    def done(self):
        self._unhook()


def _watch(client, loader, samples, model=None):
    """The generator behind watch(): times each next() as data wait and the rest of the iteration as
    the step, with the step's phases in current_step while the loop body runs. Its first steps also
    look for the run's precision (_PrecisionProbe), unless the job said it."""
    get, set_, emit = current_step.get, current_step.set, client.emit_step
    outer = get()
    in_step = False
    probe = None
    if not client.prec_user and client.prec_rank < 3 and (model is not None or "torch" in sys.modules):
        probe = _PrecisionProbe(client, model)
    collate = _CollateTimer(client)
    t0 = mono()
    try:
        for batch in collate.iterate(loader):
            t1 = mono()
            if probe is not None and not probe.step_start():
                probe = None
            phases = {}
            n = count_samples(batch, samples)
            in_step = True
            set_(phases)
            yield batch
            t2 = mono()
            set_(outer)
            in_step = False
            emit(t1 - t0, t2 - t1, phases, n, t2)
            if collate.n >= collate.next_send:
                collate.send()
            t0 = t2
    finally:
        set_(outer)
        if in_step:  # the loop left early (break, exception): the step ended now
            t2 = mono()
            emit(t1 - t0, t2 - t1, phases, n, t2)
        if probe is not None:
            probe.done()
        collate.send()
        client.flush()


class _CollateTimer:
    """What producing a batch costs beyond its samples, for the doctor's input_bound estimate: the
    time a torch DataLoader's collate_fn takes per batch, which stays when the samples are cached or
    predecoded. Timed only where the collate runs in this process (num_workers=0); the loader's own
    collate_fn attribute is swapped only while its iterator is made (the iterator keeps the wrapper),
    so the job's loader is left as it was. Its mean is sent as the param loader_collate_s after 20
    batches, every 1000 after, and when the loop ends (docs/protocol.md, "Params the client sets").
    Never raises."""

    __slots__ = ("client", "total", "n", "next_send")

    def __init__(self, client):
        self.client, self.total, self.n, self.next_send = client, 0.0, 0, 20

    def iterate(self, loader):
        try:
            fn = loader.collate_fn if _is_torch_loader(loader) and loader.num_workers == 0 else None
        except Exception:
            fn = None
        if fn is None or not getattr(loader, "_auto_collation", False):
            return iter(loader)
        timer = self

        def timed(samples):
            t = mono()
            try:
                return fn(samples)
            finally:
                timer.total += mono() - t
                timer.n += 1

        try:
            loader.collate_fn = timed
        except Exception:
            return iter(loader)
        try:
            return iter(loader)
        finally:
            loader.collate_fn = fn

    def send(self):
        if self.n:
            self.next_send = self.n + 1000
            self.client.param(loader_collate_s=round(self.total / self.n, 6))


class _Watched:
    __slots__ = ("client", "loader", "samples", "model")

    def __init__(self, client, loader, samples, model=None):
        self.client = client
        self.loader = loader
        self.samples = samples
        self.model = model

    def __iter__(self):
        if self.client.path is None and self.client.finder is None:
            return iter(self.loader)
        return _watch(self.client, self.loader, self.samples, self.model)

    def __len__(self):
        return len(self.loader)


_PHASE_NAMES = {}  # a cache: name as given -> name as sent
_METRIC_NAMES = {}  # the same for metric names ("": refused), at most 4096 kept
_INF = float("inf")


def _whole(step):
    """step as a whole number >= 0 (an int, or a float or numpy number with no fraction), else None."""
    try:
        if isinstance(step, bool):
            return None
        n = int(step)
        return n if n == step and 0 <= n <= 999999999999999 else None
    except Exception:
        return None
_RESERVED = {"n", "t", "total", "samples", "rank"}


def _phase_name(name):
    """The name as the protocol allows it: [A-Za-z0-9_./-], at most 64 characters."""
    clean = _PHASE_NAMES.get(name)
    if clean is None:
        s = "".join(c if c.isascii() and (c.isalnum() or c in "_./-") else "_" for c in str(name))[:64] or "phase"
        clean = s + "_phase" if s in _RESERVED else s
        _PHASE_NAMES[name] = clean
    return clean


class phase:  # noqa: N801 (the public gpuscope.phase, used as `with gpuscope.phase(...)`)
    """`with gpuscope.phase("h2d"):` times an explicit phase of the current step. "h2d" and "data"
    go to the step's h2d= and data= fields, any other name to its own field (step.<name>_s); the
    step's compute is what is left. Outside a watched step (of this thread or task) it does nothing.
    Phases should not nest."""

    __slots__ = ("name", "t0")

    def __init__(self, name):
        try:
            self.name = _phase_name(name)
        except Exception:
            self.name = "phase"

    def __enter__(self):
        self.t0 = mono()
        return self

    def __exit__(self, *exc):
        cur = _current_step_get()
        if cur is not None:
            try:
                cur[self.name] = cur.get(self.name, 0.0) + (mono() - self.t0)
            except Exception:
                pass
        return False


class StepTimer:
    """Steps timed from a framework's begin/end hooks: data wait is the gap since the previous
    step's end (or since reset()), compute the hooked span less explicit phases."""

    __slots__ = ("client", "last_end", "t_begin", "phases", "outer", "samples")

    def __init__(self, client=None):
        self.client = default_client if client is None else client
        self.last_end = None
        self.t_begin = None
        self.phases = None
        self.outer = None
        self.samples = None

    def reset(self):
        """Starts the data-wait clock now (train or epoch start, after eval or a checkpoint)."""
        self.last_end = mono()

    def begin(self, samples=None):
        if self.client.path is None and not self.client._look():
            return
        self.t_begin = mono()
        if self.last_end is None:
            self.last_end = self.t_begin
        self.samples = samples
        self.phases = {}
        self.outer = current_step.get()
        current_step.set(self.phases)

    def end(self):
        if self.client.path is None or self.t_begin is None:
            return
        now = mono()
        current_step.set(self.outer)
        self.client.emit_step(self.t_begin - self.last_end, now - self.t_begin, self.phases, self.samples, now)
        self.last_end = now
        self.t_begin = None


# The process's client, set up from the environment at import; the gpuscope package's functions are
# its bound methods.
default_client = Client.from_env()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=default_client.after_fork_in_child)
atexit.register(default_client.flush)
