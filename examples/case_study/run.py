#!/usr/bin/python3
"""The case study gpuscope was made for, replayed in about two minutes (`make demo` runs it).

A vision team's GPU sat idle most of the time: decoding and augmenting JPEGs on the CPU starved it.
They moved the loading into worker processes, decoded the JPEGs once ahead of time, and measured
what each change bought. Here the same steps run under `gpuscope run`, and the doctor's advice for
the first run decides the second:

  1. images.py     a few hundred real JPEG files (500x375), made once
  2. baseline      train.py --step baseline: decode + augment every JPEG per sample, no workers
  3. processes     the same with as many loader processes as the baseline's `loader_workers`
                   finding advises (read from `gpuscope report --json`)
  4. predecoded    predecode.py decodes the JPEGs once into a memory-mapped uint8 file; training
                   only crops and flips (the fix `input_bound` names)
  5. `gpuscope compare baseline processes predecoded`, HTML reports and the compare page
  6. each estimate of the doctor against what the run that applied it measured

    run.py --build BUILD_DIR [--seconds 20]

The runs are compared by their throughput, which is the fix's only if each run got the same CPU. As
root, the runs are made in a CPU cgroup that puts them before every other task on the machine
(scripts/cpufirst.py, the one the scenario tests use), so a neighbour's build does not give one run
0.6 cores and the next 1.0; otherwise they run on whatever CPU the machine gives, and the output says
which.

Everything is written under BUILD_DIR/case_study, runs into the store there (gpuscope.db)."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from cpufirst import CpuFirst  # noqa: E402


def sh(*cmd, capture=False, quiet=False, cgroup=None):
    """Runs cmd and stops the case study if it fails; returns its stdout when capture. quiet: its
    output is shown only if it fails. cgroup: a CpuFirst whose cgroup cmd runs in."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE if capture or quiet else None,
                       stderr=subprocess.STDOUT if quiet else None, text=True,
                       preexec_fn=cgroup.join if cgroup else None)
    if r.returncode:
        sys.exit(f"case study: {' '.join(cmd)} exited {r.returncode}\n{r.stdout if quiet else ''}")
    return r.stdout


def compute_ms(fig):
    """A run's mean compute per step, ms (its mean step times the compute share), else None."""
    try:
        return fig["samples"] / fig["steps"] / fig["samples_per_s"] * fig["compute_share"] * 1e3
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def predecode_what(finding):
    """What input_bound's estimate assumed of a batch produced from predecoded samples."""
    collate = (finding or {}).get("evidence", {}).get("collate_s")
    if collate is not None:
        return f"if a batch cost only its collate ({collate * 1e3:.1f} ms, measured)"
    return "if producing a batch cost nothing (its cost after predecoding not measured)"


def main():
    with CpuFirst() as cg:
        case_study(cg if cg.path else None, cg.why)


def case_study(cgroup, why):
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="the CMake build folder (holds gpuscope)")
    ap.add_argument("--seconds", type=float, default=20, help="training time of each run")
    a = ap.parse_args()
    out = os.path.join(os.path.abspath(a.build), "case_study")
    os.makedirs(out, exist_ok=True)
    store = "sqlite://" + os.path.join(out, "gpuscope.db")
    gs = [os.path.join(os.path.abspath(a.build), "gpuscope")]
    os.environ["PYTHONPATH"] = os.path.join(HERE, "..", "..", "clients", "python")
    images, pixels = os.path.join(out, "images"), os.path.join(out, "pixels.u8")

    def train(name, *args):  # one training run under gpuscope, named after its step
        print(f"\n== {name}: gpuscope run --name {name} -- train.py --step {name} {' '.join(args)}",
              flush=True)
        sh(*gs, "run", "--store", store, "--name", name, "--",
           PY, os.path.join(HERE, "train.py"), "--step", name, "--seconds", str(a.seconds), *args, cgroup=cgroup)

    cpu_condition = ("fixed: each run in a CPU cgroup that puts it before every other task (cpu.shares / "
                     "cpu.weight, scripts/cpufirst.py)" if cgroup else
                     f"as the machine gives it, which may differ between the runs ({why})")
    print(f"CPU: {cpu_condition}", flush=True)

    # 1. The images, once.
    sh(PY, os.path.join(HERE, "images.py"), images)

    # 2. The baseline, and what the doctor says about it.
    train("baseline", "--images", images)
    print("\n== the doctor's advice for the baseline: gpuscope report baseline", flush=True)
    sh(*gs, "report", "--store", store, "baseline")
    report = json.loads(sh(*gs, "report", "--store", store, "baseline", "--json", capture=True))
    advice = {f["rule"]: f for f in report["findings"]}

    # 3. As many loader processes as the doctor advised.
    runs = ["baseline"]
    workers = advice.get("loader_workers", {}).get("evidence", {}).get("recommended_workers")
    if workers:
        train("processes", "--workers", str(workers), "--images", images)
        runs.append("processes")
    else:
        cores = advice.get("input_bound", {}).get("evidence", {}).get("usable_cores")
        print("\n== processes: skipped, the doctor advised no more loader workers on this machine "
              f"(its findings: {', '.join(advice) or 'none'}; usable cores: "
              + (f"{cores:.2f}" if cores is not None else "—") + ")")

    # 4. Decode once, offline; train from the memory-mapped pixels.
    sh(PY, os.path.join(HERE, "predecode.py"), images, pixels)
    train("predecoded", "--predecoded", pixels)
    runs.append("predecoded")

    # 5. What each step bought.
    print(f"\n== gpuscope compare {' '.join(runs)}", flush=True)
    sh(*gs, "compare", "--store", store, *runs)
    compared = json.loads(sh(*gs, "compare", "--store", store, *runs, "--json", capture=True))
    measured = {r["run"]["name"]: r["speedup_vs_first"] for r in compared["runs"]}
    cpu = {r["run"]["name"]: (r["figures"]["job_cpu_pct"], r["figures"]["host_cpu_pct"])
           for r in compared["runs"]}
    compute = {r["run"]["name"]: compute_ms(r["figures"]) for r in compared["runs"]}

    # 6. The doctor's estimates for the baseline against what the runs that followed them measured.
    print("\n== the doctor's estimates (for the baseline) against what the next runs measured")
    procs = f"{workers} loader process{'es' if workers != 1 else ''}"
    for run, rule, what in [("processes", "loader_workers", "for " + procs),
                            ("predecoded", "input_bound", predecode_what(advice.get("input_bound")))]:
        if run not in measured:
            continue
        est, got = advice.get(rule, {}).get("speedup"), measured[run]
        print(f"  {run}: the doctor estimated "
              + (f"{est:.2f}x {what}" if est is not None else f"nothing (no {rule} finding)")
              + "; measured " + (f"{got:.2f}x" if got is not None else "— (unknown)"))
    # The cores a run gets decide what it measures; on a shared machine other work takes some.
    print(f"  CPU: {cpu_condition}")
    print("  the cores each run got: " + ", ".join(
        f"{run} " + (f"{cpu[run][0] / 100:.2f}" if cpu[run][0] is not None else "—")
        + " (host " + (f"{cpu[run][1]:.0f}%" if cpu[run][1] is not None else "—") + " busy)"
        for run in runs))
    # The model's compute is the same in every run (same model, same batch): where it moved, the
    # cores ran at another speed (other work on the machine's host, or loader processes beside it),
    # and the measured gain holds that as well as the fix.
    print("  compute per step (no fix here changes it): " + ", ".join(
        f"{run} " + (f"{compute[run]:.0f} ms" if compute[run] is not None else "—") for run in runs))
    moved = [run for run in runs[1:] if compute[run] and compute["baseline"]
             and abs(compute[run] / compute["baseline"] - 1) > 0.15]
    if moved:
        print(f"  note: compute per step moved by more than 15 % in {', '.join(moved)}: the cores ran at another "
              "speed than in the baseline, and that run's measured gain is not the fix's alone (a fixed CPU "
              "share does not fix a core's speed: other work on the machine's host, or the loader processes "
              "beside the model); rerun when the machine is quieter")

    print("\n== pages")
    for run in runs:
        sh(*gs, "report", "--store", store, run, "--html", os.path.join(out, run + ".html"), quiet=True)
        print("  " + os.path.join(out, run + ".html"))
    sh(*gs, "compare", "--store", store, *runs, "--html", os.path.join(out, "compare.html"), quiet=True)
    print("  " + os.path.join(out, "compare.html"))
    print(f"\nThe runs are kept in {out}/gpuscope.db: gpuscope runs --store {store}")


if __name__ == "__main__":
    main()
