"""The Python client finds the run's precision without the job saying it (clients/python/gpuscope/
_precision.py, docs/protocol.md): the detection itself on small stand-in objects with the attributes
the frameworks have (Lightning's trainer.precision, Hugging Face TrainingArguments' bf16 / fp16,
Keras' global policy name, a torch module's parameters, torch's autocast functions of the old and the
new API) — the frameworks are not in Debian, so this is how their paths are tested here; a Client
against a socket of this test for what is sent and that the job's own precision wins; and real
PyTorch (Debian's, CPU autocast in bfloat16) under `gpuscope run`: the param reaches the store."""
import os
import socket
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT = os.path.join(SRC, "clients", "python")
sys.path.insert(0, CLIENT)
from gpuscope import _core, _precision  # noqa: E402


class Param:
    def __init__(self, dtype, floating=True):
        self.dtype = dtype
        self.floating = floating

    def is_floating_point(self):
        return self.floating


class Model:
    def __init__(self, *dtypes):
        self.params = [Param(d) for d in dtypes]

    def parameters(self):
        return iter(self.params)


def fake_torch(cuda=None, cpu=None, new_api=False):
    """A module with torch's autocast functions: cuda / cpu the dtype autocast is on with, or None."""
    t = types.SimpleNamespace()
    if new_api:
        t.is_autocast_enabled = lambda dev: {"cuda": cuda, "cpu": cpu}[dev] is not None
        t.get_autocast_dtype = lambda dev: {"cuda": cuda, "cpu": cpu}[dev]
    else:
        t.is_autocast_enabled = lambda: cuda is not None
        t.get_autocast_gpu_dtype = lambda: cuda
        t.is_autocast_cpu_enabled = lambda: cpu is not None
        t.get_autocast_cpu_dtype = lambda: cpu
    return t


def test_lightning_precision_names_map_to_the_vocabulary():
    cases = {"16-mixed": "mixed-fp16", "bf16-mixed": "mixed-bf16", "32-true": "fp32", "16-true": "fp16",
             "bf16-true": "bf16", "64-true": "fp64", 16: "mixed-fp16", 32: "fp32", "bf16": "mixed-bf16",
             "transformer-engine": None, None: None}
    for raw, want in cases.items():
        check(_precision.from_lightning(raw) == want, f"{raw!r}: {_precision.from_lightning(raw)!r}, want {want!r}")


def test_hf_flags_are_amp_and_neither_is_unknown():
    args = lambda **kw: types.SimpleNamespace(**{"bf16": False, "fp16": False, **kw})  # noqa: E731
    check(_precision.from_hf(args(bf16=True)) == "mixed-bf16", "bf16=True")
    check(_precision.from_hf(args(fp16=True)) == "mixed-fp16", "fp16=True")
    check(_precision.from_hf(args()) is None, "neither: the model's dtype decides")
    check(_precision.from_hf(object()) is None, "no such attributes")


def test_keras_policies_map_to_the_vocabulary():
    for raw, want in {"mixed_bfloat16": "mixed-bf16", "mixed_float16": "mixed-fp16", "float32": "fp32",
                      "bfloat16": "bf16", "float16": "fp16", "int8_from_float32": None}.items():
        check(_precision.from_keras(raw) == want, f"{raw}: {_precision.from_keras(raw)!r}")


def test_parameter_dtypes_say_the_model_precision():
    check(_precision.of_params(Model("torch.float32", "torch.float32", "torch.bfloat16")) == "fp32", "most")
    check(_precision.of_params(Model("torch.bfloat16")) == "bf16", "bf16 model")
    m = Model("torch.float16")
    m.params.append(Param("torch.int64", floating=False))
    check(_precision.of_params(m) == "fp16", "integer buffers do not count")
    check(_precision.of_params(Model()) is None and _precision.of_params(object()) is None, "nothing to tell")


def test_autocast_state_is_read_from_old_and_new_torch_apis():
    for new in (False, True):
        check(_precision.autocast_now(fake_torch(new_api=new)) is None, f"off (new api {new})")
        check(_precision.autocast_now(fake_torch(cpu="torch.bfloat16", new_api=new)) == "mixed-bf16", f"cpu {new}")
        check(_precision.autocast_now(fake_torch(cuda="torch.float16", new_api=new)) == "mixed-fp16", f"cuda {new}")
    check(_precision.autocast_now(types.SimpleNamespace()) is None, "a torch without these functions")


class Sock:
    """A datagram socket of this test that a Client sends to."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gstest-")
        self.path = os.path.join(self.dir, "sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(5)

    def params(self, client):
        client.flush()
        out = {}
        self.sock.setblocking(False)
        try:
            while True:
                for ln in self.sock.recv(65536).decode().split("\n"):
                    if ln.startswith("gs1 param "):
                        k, _, v = ln[len("gs1 param "):].partition(" ")
                        out[k] = v
        except BlockingIOError:
            pass
        return out

    def close(self):
        self.sock.close()
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)


def test_a_surer_finding_replaces_a_weaker_one_and_the_job_always_wins():
    s = Sock()
    try:
        c = _core.Client(s.path)
        c.auto_precision("fp32", "the model's parameters", 1)
        c.auto_precision("mixed-bf16", "torch autocast", 3)
        c.auto_precision("fp32", "the model's parameters", 1)
        p = s.params(c)
        check(p.get("precision") == "mixed-bf16" and p.get("precision_source") == "torch autocast", f"{p}")
        c = _core.Client(s.path)
        c.param(precision="fp16")
        c.auto_precision("mixed-bf16", "torch autocast", 3)
        p = s.params(c)
        check(p.get("precision") == "fp16" and "precision_source" not in p, f"the job's own precision: {p}")
    finally:
        s.close()


def test_framework_callbacks_send_the_precision_they_find():
    # The callbacks' own code on stand-in frameworks (the modules they import, with the attributes
    # they read), each against the test's socket.
    s = Sock()
    stubs = {
        "lightning": types.ModuleType("lightning"), "lightning.pytorch": types.SimpleNamespace(
            __version__="stub", Callback=object),
        "transformers": types.SimpleNamespace(__version__="stub", TrainerCallback=object),
        "keras": types.SimpleNamespace(__version__="stub", callbacks=types.SimpleNamespace(Callback=object),
                                       mixed_precision=types.SimpleNamespace(
                                           global_policy=lambda: types.SimpleNamespace(name="mixed_float16")),
                                       backend=types.SimpleNamespace(backend=lambda: "stub")),
    }
    stubs["lightning"].pytorch = stubs["lightning.pytorch"]
    saved = {k: sys.modules.get(k) for k in list(stubs) + ["gpuscope.lightning", "gpuscope.hf", "gpuscope.keras"]}
    old = _core.default_client
    try:
        sys.modules.update(stubs)
        for k in ("gpuscope.lightning", "gpuscope.hf", "gpuscope.keras"):
            sys.modules.pop(k, None)
        import importlib
        got = {}
        for which in ("lightning", "hf", "hf-model", "keras"):
            _core.default_client = c = _core.Client(s.path)
            import gpuscope
            gpuscope.param = c.param  # the package's functions are bound to the default client
            if which == "lightning":
                m = importlib.import_module("gpuscope.lightning")
                m.GpuscopeCallback().on_train_start(types.SimpleNamespace(precision="bf16-mixed"), None)
            elif which.startswith("hf"):
                m = importlib.import_module("gpuscope.hf")
                args = types.SimpleNamespace(per_device_train_batch_size=8, bf16=False, fp16=which == "hf")
                m.GpuscopeCallback().on_train_begin(args, None, None, model=Model("torch.bfloat16"))
            else:
                m = importlib.import_module("gpuscope.keras")
                cb = m.GpuscopeCallback(batch_size=4)
                cb.on_train_begin()
            got[which] = s.params(c)
        want = {"lightning": ("mixed-bf16", "lightning trainer.precision=bf16-mixed"),
                "hf": ("mixed-fp16", "transformers TrainingArguments fp16=True"),
                "hf-model": ("bf16", "transformers: neither bf16 nor fp16 set, the model's parameters are bf16"),
                "keras": ("mixed-fp16", "keras global dtype policy mixed_float16")}
        for which, (prec, src) in want.items():
            p = got[which]
            check(p.get("precision") == prec and p.get("precision_source") == src, f"{which}: {p}")
    finally:
        _core.default_client = old
        import gpuscope
        gpuscope.param = old.param
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
        s.close()


# Real PyTorch: a tiny model trained with CPU autocast in bfloat16 inside the loop body (where watch()
# itself cannot see it: only the model's forward can), then in-process the other ways to tell.
TORCH_JOB = r"""
import sys, torch, gpuscope
from gpuscope import _core
mode = sys.argv[1]
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [torch.randn(16, 8) for _ in range(6)]
def step(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
if mode == "run":
    for x in gpuscope.watch(loader, model=model):
        step(x)
    sys.exit(0)
import socket
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); sock.bind(sys.argv[2]); sock.setblocking(False)
def sent(c):
    c.flush(); out = {}
    try:
        while True:
            for ln in sock.recv(65536).decode().split("\n"):
                if ln.startswith("gs1 param precision"):
                    k, _, v = ln[10:].partition(" "); out[k] = v
    except BlockingIOError:
        return out
def loop(c, m=None, around=False, body=step):
    if around:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            for x in c.watch(loader, model=m):
                body(x)
    else:
        for x in c.watch(loader, model=m):
            body(x)
    return sent(c)
def plain(x):
    model(x).pow(2).mean().backward()
res = {}
res["around"] = loop(_core.Client(sys.argv[2]), around=True, body=plain)
res["plain_fp32"] = loop(_core.Client(sys.argv[2]), model, body=plain)
res["no_model"] = loop(_core.Client(sys.argv[2]), None)
model.to(torch.bfloat16)
res["bf16_model"] = loop(_core.Client(sys.argv[2]), model, body=lambda x: model(x.bfloat16()).float().sum().backward())
c = _core.Client(sys.argv[2]); c.param(precision="fp16")
res["job_says"] = loop(c, model)
print(repr(res))
"""


def test_real_torch_autocast_in_the_forward_reaches_the_store():
    sb = Sandbox()
    try:
        job = os.path.join(sb.dir, "job.py")
        with open(job, "w") as f:
            f.write(TORCH_JOB)
        sb.ok("run", "--quiet", "--name", "amp", "--", PYTHON, job, "run", env={"PYTHONPATH": CLIENT})
        p = sb.json("show", "amp", "--params", "--json")
        check(p.get("precision") == "mixed-bf16", f"precision param in the store: {p.get('precision')!r}")
        check(p.get("precision_source") == "torch autocast in the model's forward", f"{p.get('precision_source')!r}")
    finally:
        sb.close()


def test_real_torch_other_ways_to_tell_and_the_job_wins():
    import subprocess
    d = tempfile.mkdtemp(prefix="gstest-")
    try:
        job = os.path.join(d, "job.py")
        with open(job, "w") as f:
            f.write(TORCH_JOB)
        env = dict(os.environ, PYTHONPATH=CLIENT)
        env.pop("GPUSCOPE_SOCKET", None)
        p = subprocess.run([PYTHON, job, "local", os.path.join(d, "sock")], capture_output=True, text=True,
                           env=env, timeout=120)
        check(p.returncode == 0, f"job: {p.returncode}\n{p.stderr}")
        res = eval(p.stdout.strip().splitlines()[-1])
        check(res["around"].get("precision") == "mixed-bf16" and "around the training loop" in
              res["around"].get("precision_source", ""), f"autocast around the loop: {res['around']}")
        check(res["plain_fp32"].get("precision") == "fp32", f"an fp32 model without autocast: {res['plain_fp32']}")
        check(res["no_model"] == {}, f"autocast inside the body and no model: unknown, nothing sent: {res['no_model']}")
        check(res["bf16_model"].get("precision") == "bf16", f"a bf16 model: {res['bf16_model']}")
        check(res["job_says"] == {"precision": "fp16"}, f"the job's own precision wins: {res['job_says']}")
    finally:
        import shutil
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run_tests(globals())
