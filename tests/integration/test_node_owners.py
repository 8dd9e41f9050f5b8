"""Whose work is on each GPU (issue 36): the node agent, in the host's namespaces, on a simulated node
whose GPUs list real processes the test starts in real cgroups — GPU 0 a Slurm job step's process
(the v1 layout /slurm/uid_0/job_42/step_0, below the test's own memory cgroup), GPU 1 a Kubernetes
pod's container process (/kubepods/burstable/pod<UID>/<ID>) in a PID namespace of its own, beside a
fake kubelet's log folders (GPUSCOPE_KUBELET_LOGS) — and GPU 2 no process but a dcgm-exporter job
file (DCGM_HPC_JOB_MAPPING_DIR) and a pod that holds it by a fake kubelet's pod-resources API
(fake_kubelet.py: Debian's python3-grpcio on GPUSCOPE_KUBELET_SOCKET). /metrics, and a real
Prometheus that scrapes it, must label GPU 0's DCGM lines hpc_job="42", GPU 1's namespace, pod and
container from the log folders, GPU 2's hpc_job="77" and its pod from the kubelet;
gpuscope_gpu_proc_owner must show the container's process with its id, pod UID and its pid inside
the container (NSpid); and when the Slurm step's process exits, its label leaves the page (bounded
cardinality). A `gpuscope run` inside a PID namespace whose NVML lists a host pid notes it once,
with the fix; there, the GPU's use is tied to the job (gpu.0.owner=job, marked inferred, in the
report's GPU line) only when the job alone holds the GPU device open and NVML lists as many
processes, and is "unknown" with the reason when another process shares it; a run in a pod's or a
Slurm step's cgroup records the container id, pod UID or job in its params."""
import json
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403
from test_cgroup_v1 import v1_dir, _remove  # noqa: E402
from test_metrics import get, samples, stop, wait_for  # noqa: E402
from test_prometheus import Prom  # noqa: E402

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
FAKE_KUBELET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_kubelet.py")
UID = "0b4f6a1c-2d3e-4f50-8a9b-c0d1e2f3a4b5"
CID = "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b"
SLEEP = "import time\nwhile True: time.sleep(1)"


def make_dirs(base, rel):
    """The cgroup base/rel and its parents, in the order to remove them (deepest first)."""
    made, d = [], base
    for part in rel.split("/"):
        d = os.path.join(d, part)
        if not os.path.isdir(d):
            os.mkdir(d)
            made.append(d)
    return made[::-1]


def enter(d):
    return lambda: open(os.path.join(d, "cgroup.procs"), "w").write(str(os.getpid()))


def children(pid):
    try:
        return [int(x) for x in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def scenario(sb, a, b):
    path = os.path.join(sb.dir, "owners.scn")
    with open(path, "w") as f:
        f.write("driver 550.54.15\ndevice 0-2\n  name NVIDIA H200\n  memory 143771MiB\n"
                "  at 0 util=10 mem_used=1GiB power=100\n"
                f"device 0\n  at 0 util=97 mem_used=20GiB power=400 procs={a}:8GiB:90\n"
                f"device 1\n  at 0 util=90 mem_used=21GiB power=380 procs={b}:8GiB:80\n")
    return path


def kubelet(sb):
    logs = os.path.join(sb.dir, "varlog")
    os.makedirs(os.path.join(logs, "pods", f"team-a_train-7f9c_{UID}", "trainer"))
    os.makedirs(os.path.join(logs, "containers"))
    open(os.path.join(logs, "containers", f"train-7f9c_team-a_trainer-{CID}.log"), "w").close()
    jobmap = os.path.join(sb.dir, "jobmap")
    os.makedirs(jobmap)
    with open(os.path.join(jobmap, "2"), "w") as f:
        f.write("77\n")
    return logs, jobmap


def gpu_line(body, gpu):
    got = [l for l, _ in samples(body, "DCGM_FI_DEV_GPU_UTIL") if l.get("gpu") == str(gpu)]
    return got[0] if got else {}


def test_node_agent_labels_each_gpu_with_its_job_pod_and_container():
    sb = Sandbox()
    base = os.path.join(v1_dir("memory"), f"gstest-{os.getpid()}")
    os.mkdir(base)
    procs, cgroups, agent = [], [], None
    try:
        slurm = make_dirs(base, "slurm/uid_0/job_42/step_0")
        pod = make_dirs(base, f"kubepods/burstable/pod{UID}/{CID}")
        cgroups = slurm + pod
        a = subprocess.Popen([PYTHON, "-c", SLEEP], preexec_fn=enter(slurm[0]))
        procs.append(a)
        u = subprocess.Popen(["unshare", "--pid", "--fork", "sh", "-c",
                              f'echo $$ > "$1/cgroup.procs" && exec {PYTHON} -c "$2"', "sh", pod[0], SLEEP])
        procs.append(u)
        b = wait_for(lambda: (children(u.pid) or [None])[0], 30, "the container's process did not start")
        wait_for(lambda: CID in open(f"/proc/{b}/cgroup").read(), 30, "the container's process is not in its cgroup")
        logs, jobmap = kubelet(sb)
        env = dict(sb.env, GPUSIM_SCENARIO=scenario(sb, a.pid, b), GPUSCOPE_NVML_LIB=SIM,
                   GPUSCOPE_KUBELET_LOGS=logs, DCGM_HPC_JOB_MAPPING_DIR=jobmap)
        # the fake kubelet's pod-resources API: GPU 2, where no process runs, is held by a pod
        uuids = {d["index"]: d["uuid"] for d in json.loads(subprocess.run(
            [BIN, "devices", "--json"], env=env, capture_output=True, text=True, check=True).stdout)["devices"]}
        pods = os.path.join(sb.dir, "pods.json")
        with open(pods, "w") as f:
            json.dump([{"namespace": "serving", "name": "infer-0", "container": "server", "devices": [uuids[2]]}], f)
        env["GPUSCOPE_KUBELET_SOCKET"] = os.path.join(sb.dir, "kubelet.sock")
        fake = subprocess.Popen([PYTHON, FAKE_KUBELET, env["GPUSCOPE_KUBELET_SOCKET"], pods], stdout=subprocess.PIPE,
                                text=True)
        procs.append(fake)
        check(fake.stdout.readline().strip() == "ready", "the fake kubelet did not start")
        agent = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:0", "--interval", "200ms"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = agent.stdout.readline()
        check(" metrics at http://" in line, f"no address line: {line!r}")
        url = line.strip().rsplit(" ", 1)[1]
        # the state wanted: every GPU's labels and both processes' owner lines in one page (a page
        # may show a GPU's labels a tick before its process's line, under load)
        def ready(t):
            own = {l["pid"] for l, v in samples(t, "gpuscope_gpu_proc_owner") if v == 1}
            return t if (gpu_line(t, 0).get("hpc_job") and gpu_line(t, 1).get("pod") and gpu_line(t, 2).get("pod")
                         and {str(a.pid), str(b)} <= own) else None
        body = wait_for(lambda: ready(get(url)[1]), 60,
                        "no hpc_job on GPU 0, no pod on GPU 1 or GPU 2, or no owner line of the two processes")
        g0, g1, g2 = gpu_line(body, 0), gpu_line(body, 1), gpu_line(body, 2)
        check(g0.get("hpc_job") == "42" and "pod" not in g0, f"GPU 0: {g0}")
        check((g1.get("namespace"), g1.get("pod"), g1.get("container")) == ("team-a", "train-7f9c", "trainer"),
              f"GPU 1: {g1}")
        check(g2.get("hpc_job") == "77", f"GPU 2 (the mapping file's job): {g2}")
        check((g2.get("namespace"), g2.get("pod"), g2.get("container")) == ("serving", "infer-0", "server"),
              f"GPU 2 (the kubelet's pod-resources, no process on it): {g2}")
        own = {l["pid"]: l for l, v in samples(body, "gpuscope_gpu_proc_owner") if v == 1}
        check(own.get(str(b), {}).get("container") == CID and own[str(b)].get("pod_uid") == UID and
              own[str(b)].get("nspid") == "1", f"the container's process from the host: {own.get(str(b))}")
        check(own.get(str(a.pid), {}).get("hpc_job") == "42" and "nspid" not in own[str(a.pid)], own.get(str(a.pid)))
        # a real Prometheus scraping the agent stores the labels as dcgm-exporter's users query them
        prom = Prom(sb, url)
        try:
            q = 'DCGM_FI_DEV_GPU_UTIL{namespace="team-a",pod="train-7f9c",container="trainer"}'
            prom.wait(lambda: prom.query(q), 60, f"Prometheus has no {q}")
            check([r["metric"]["gpu"] for r in prom.query(q)] == ["1"], prom.query(q))
            prom.wait(lambda: prom.query('DCGM_FI_DEV_GPU_UTIL{hpc_job="42"}'), 60, "Prometheus has no hpc_job 42")
            q = 'DCGM_FI_DEV_GPU_UTIL{namespace="serving",pod="infer-0",container="server"}'
            check([r["metric"]["gpu"] for r in prom.query(q)] == ["2"], f"{q}: {prom.query(q)}")
        finally:
            prom.close()
        a.kill()
        a.wait()
        after = wait_for(lambda: (lambda t: t if not gpu_line(t, 0).get("hpc_job") else None)(get(url)[1]), 60,
                         "GPU 0 still labelled with the job whose process exited")
        check(str(a.pid) not in {l["pid"] for l, _ in samples(after, "gpuscope_gpu_proc_owner")}, "its owner line")
        check(gpu_line(after, 1).get("pod") == "train-7f9c", f"GPU 1 keeps its pod: {gpu_line(after, 1)}")
    finally:
        if agent:
            stop(agent)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for d in cgroups + [base]:
            _remove(d)
        sb.close()


def test_a_run_in_a_pod_or_a_slurm_step_records_them_in_its_provenance():
    sb = Sandbox()
    base = os.path.join(v1_dir("memory"), f"gstest-{os.getpid()}")
    os.mkdir(base)
    cgroups = []
    try:
        pod = make_dirs(base, f"kubepods/burstable/pod{UID}/{CID}")
        step = make_dirs(base, "slurm/uid_0/job_4242/step_0")
        cgroups = pod + step
        env = {k: v for k, v in sb.env.items() if not k.startswith("SLURM_") and k not in ("POD_NAME", "POD_NAMESPACE")}
        for name, d in (("in-pod", pod[0]), ("in-step", step[0])):
            p = subprocess.run(["sh", "-c", 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"', "sh", d, BIN, "run",
                                "--name", name, "--", "true"], env=env, capture_output=True, text=True, timeout=120)
            check(p.returncode == 0, p.stderr)
        prm = {r["key"]: r["value"] for r in sb.csv("show", "in-pod", "--params", "--csv")}
        check(prm.get("container.id") == CID and prm.get("sched.k8s_pod_uid") == UID, prm)
        prm = {r["key"]: r["value"] for r in sb.csv("show", "in-step", "--params", "--csv")}
        check(prm.get("sched.slurm_job_id") == "4242" and "container.id" not in prm, prm)
    finally:
        for d in cgroups + [base]:
            _remove(d)
        sb.close()


def test_run_in_a_pid_namespace_notes_host_pids_once():
    sb = Sandbox()
    try:
        # NVML lists the test's own pid, which is not in the run's new PID namespace
        scn = os.path.join(sb.dir, "host_pids.scn")
        with open(scn, "w") as f:
            f.write(f"driver 550.54.15\ndevice 0\n  name NVIDIA H200\n  memory 143771MiB\n"
                    f"  at 0 util=90 mem_used=20GiB power=400 procs={os.getpid()}:8GiB:90\n")
        env = dict(sb.env, GPUSIM_SCENARIO=scn, GPUSCOPE_NVML_LIB=SIM)
        p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", BIN, "run", "--name", "ns", "--interval",
                            "200ms", "--", PYTHON, "-c", "import time; time.sleep(1.5)"], env=env, capture_output=True,
                           text=True, timeout=120)
        check(p.returncode == 0, p.stderr)
        check(p.stderr.count("NVML lists host pids") == 1 and "--pid=host" in p.stderr, p.stderr)
        notes = sb.ok("show", "ns", "--notes")
        check(notes.count("not in this container's PID namespace") == 1 and "hostPID: true" in notes, notes)
    finally:
        sb.close()


# Inside the run's own PID and mount namespaces: /dev becomes a tmpfs with the usual nodes and a
# plain file named nvidia0 for the "GPU device" (readlink of an fd names the path, not the kind);
# with "other", a process outside the job holds it too. Then gpuscope runs a job that opens it.
IN_NS = r"""set -e
T=$(mktemp -d)
mount -t tmpfs gstest-dev "$T"
mknod -m 666 "$T/null" c 1 3
mknod -m 666 "$T/zero" c 1 5
mknod -m 666 "$T/urandom" c 1 9
: > "$T/nvidia0"
mount --bind "$T" /dev
if [ "$1" = other ]; then sh -c 'exec 3</dev/nvidia0; exec sleep 60' & fi
shift
exec "$@"
"""


def test_run_in_a_container_ties_gpu_use_to_the_job_only_when_certain():
    sb = Sandbox()
    runs = []
    try:
        # "alone": NVML lists one host pid, the job alone holds the device: the GPU is the job's,
        # inferred. "shared": NVML lists two host pids for the job's one: another container's
        # process shares the GPU. "other": a process of the container outside the job holds it.
        for name, pids in (("alone", [os.getpid()]), ("shared", [os.getpid(), os.getppid()]),
                           ("other", [os.getpid()])):
            scn = os.path.join(sb.dir, f"{name}.scn")
            procs = ",".join(f"{p}:8GiB:45" for p in pids)
            with open(scn, "w") as f:
                f.write(f"driver 550.54.15\ndevice 0\n  name NVIDIA A100-SXM4-80GB\n  memory 81920MiB\n"
                        f"  at 0 util=90 mem_used=20GiB power=300 procs={procs}\n")
            env = dict(sb.env, GPUSIM_SCENARIO=scn, GPUSCOPE_NVML_LIB=SIM)
            job = "f = open('/dev/nvidia0'); import time; time.sleep(4)"
            runs.append((name, subprocess.Popen(
                ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", IN_NS, "sh", name, BIN, "run", "--name",
                 name, "--interval", "200ms", "--", PYTHON, "-c", job], env=env, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)))
        out = {}
        for name, p in runs:
            o, e = p.communicate(timeout=120)
            check(p.returncode == 0, e)
            out[name] = e
        prm = {n: {r["key"]: r["value"] for r in sb.csv("show", n, "--params", "--csv")} for n in out}
        check(prm["alone"].get("gpu.0.owner") == "job", prm["alone"])
        check("inferred: 1 process of the job holds a GPU open and NVML lists 1" in prm["alone"].get("gpu.0.owner_how", ""),
              prm["alone"])
        check("the GPUs' use is tied to the job (inferred" in out["alone"], out["alone"])
        check("GPU 0:" in sb.ok("report", "alone") and "the job's (inferred:" in sb.ok("report", "alone"),
              sb.ok("report", "alone"))
        check(prm["shared"].get("gpu.0.owner") == "unknown", prm["shared"])
        check("NVML lists 2 processes, 1 of the job holds a GPU open" in prm["shared"].get("gpu.0.owner_how", ""),
              prm["shared"])
        check("GPU use is not tied to the job (NVML lists 2" in out["shared"], out["shared"])
        check("not tied to the job (NVML lists 2" in sb.ok("report", "shared"), sb.ok("report", "shared"))
        check(prm["other"].get("gpu.0.owner") == "unknown", prm["other"])
        check("1 process of this container outside the job holds a GPU open" in prm["other"].get("gpu.0.owner_how", ""), prm["other"])
    finally:
        for _, p in runs:
            if p.poll() is None:
                p.kill()
                p.wait()
        sb.close()


if __name__ == "__main__":
    if os.geteuid() != 0:
        skip_script("needs root to make child cgroups and PID namespaces")
    if not v1_dir("memory"):
        skip_script("no cgroup v1 memory hierarchy here")
    if not shutil.which("unshare"):
        skip_script("no unshare(1) (util-linux)")
    run_tests(globals())
