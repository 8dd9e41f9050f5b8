#!/usr/bin/env python3
"""Which scripts the ASan + UBSan pass must run again: the ones that reach a line of gpuscope's C that
nothing else run under the sanitizers reaches (docs/testing.md, "The suite's time").

    cmake -S . -B build-cov -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS='--coverage -O0' \\
          -DCMAKE_EXE_LINKER_FLAGS=--coverage -DCMAKE_SHARED_LINKER_FLAGS=--coverage -DBUILD_TESTING=ON
    cmake --build build-cov -j2
    /usr/bin/python3 tests/asan_select.py --build build-cov --write tests/asan_set.txt

Every test of the coverage build runs once, alone in its own GCOV_PREFIX, so each leaves the .gcda
files of only its own processes; gcov then gives the lines of src/ and clients/ each reached. The
tests that always run under the sanitizers (the unit tests and every other test that is not an
integration, end-to-end or scenario script) are the base. Then, greedily, the script that reaches
the most lines not yet reached joins the set, until no script adds a line: those scripts run in
both passes, and the others (their every line is reached under the sanitizers by another) run once,
in the plain pass. The scenario scripts never join: their verdicts measure the CPU, which the
sanitizers' slowdown changes; the lines only they reach are printed, so a gap shows.

The set is written to --write (one test name a line, with the lines it adds), which
tests/integration/CMakeLists.txt reads. A test that fails in the coverage build is run once more;
exit 0, or 1 when it failed twice (its coverage would be partial, so nothing is written).
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile

CANDIDATE_LABELS = {"integration", "e2e", "scenarios"}
NEVER = {"scenarios", "needs-pypi", "never-asan"}  # labels that never join the set (the docstring says why)
CODE = ("src/", "clients/")


def tests_of(build):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True, text=True, check=True)
    tests = []
    for t in json.loads(out.stdout)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        tests.append((t["name"], set(props.get("LABELS", [])), float(props.get("COST", 0) or 0)))
    return tests


def run_one(build, root, name):
    """Runs one test in its own GCOV_PREFIX (a folder that a passing run marks .ok, which --keep then
    reuses); a test that fails is run once more from a clean folder."""
    prefix = os.path.join(root, name)
    if os.path.exists(os.path.join(prefix, ".ok")):
        return name, True, prefix, ""
    for _ in range(2):
        shutil.rmtree(prefix, ignore_errors=True)
        env = dict(os.environ, GCOV_PREFIX=prefix, GCOV_PREFIX_STRIP="0")
        r = subprocess.run(["ctest", "-R", f"^{name}$", "--output-on-failure"], cwd=build, env=env,
                           capture_output=True, text=True)
        if r.returncode == 0 and "100% tests passed" in r.stdout and "did not run" not in r.stdout:
            os.makedirs(prefix, exist_ok=True)
            open(os.path.join(prefix, ".ok"), "w").close()
            return name, True, prefix, ""
    return name, False, prefix, r.stdout[-2000:]


def lines_of(prefix, src):
    """(file, line) pairs of src/ and clients/ that the processes under prefix executed."""
    reached = set()
    for d, _, files in os.walk(prefix):
        for f in files:
            if not f.endswith(".gcda"):
                continue
            obj = d[len(prefix):]  # the object folder in the build tree (GCOV_PREFIX_STRIP=0)
            gcno = os.path.join(obj, f[:-5] + ".gcno")
            if not os.path.exists(gcno):
                continue
            link = os.path.join(d, f[:-5] + ".gcno")
            if not os.path.exists(link):
                os.symlink(gcno, link)
            r = subprocess.run(["gcov", "--json-format", "--stdout", f], cwd=d, capture_output=True, text=True)
            for doc in r.stdout.splitlines():
                if not doc.startswith("{"):
                    continue
                for fi in json.loads(doc).get("files", []):
                    path = os.path.relpath(os.path.realpath(os.path.join(obj, fi["file"])), src) \
                        if not os.path.isabs(fi["file"]) else os.path.relpath(fi["file"], src)
                    if not path.startswith(CODE):
                        continue
                    for ln in fi["lines"]:
                        if ln["count"] > 0:
                            reached.add((path, ln["line_number"]))
    return reached


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="a build folder configured with --coverage")
    ap.add_argument("--src", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--write", help="write the set here (tests/asan_set.txt)")
    ap.add_argument("--keep", help="keep the coverage data in this folder")
    ap.add_argument("--with-never", action="store_true",
                    help="run the scenario scripts too, to print the lines only they reach (minutes)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    root = a.keep or tempfile.mkdtemp(prefix="gs-cover-")
    tests = [t for t in tests_of(build) if "fuzz" not in t[1]  # fuzz targets are clang's, no gcov
             and (a.with_never or "scenarios" not in t[1]) and "needs-pypi" not in t[1]]
    order = sorted(tests, key=lambda t: -t[2])
    reached, failed = {}, []
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for name, ok, prefix, tail in pool.map(lambda t: run_one(build, root, t[0]), order):
            if not ok:
                failed.append(name)
                print(f"FAILED in the coverage build: {name}\n{tail}", file=sys.stderr)
                continue
            reached[name] = lines_of(prefix, a.src)
            print(f"{name}: {len(reached[name])} lines", flush=True)
    if not a.keep:
        shutil.rmtree(root, ignore_errors=True)
    if failed:
        print(f"asan_select: {len(failed)} tests failed in the coverage build; nothing written", file=sys.stderr)
        return 1
    labels = {n: l for n, l, _ in tests}
    base = set()
    for n, ls in labels.items():
        if not ls & CANDIDATE_LABELS:
            base |= reached.get(n, set())
    cands = {n for n, ls in labels.items() if ls & CANDIDATE_LABELS and not ls & NEVER}
    covered, chosen = set(base), []
    while True:
        gain = {n: len(reached[n] - covered) for n in cands}
        best = max(sorted(gain), key=lambda n: gain[n], default=None)
        if best is None or gain[best] == 0:
            break
        chosen.append((best, gain[best]))
        covered |= reached[best]
        cands.discard(best)
    every = set().union(*reached.values())
    only_never = every - covered
    print(f"\nbase (always under the sanitizers): {len(base)} lines; the set adds {len(covered) - len(base)}; "
          f"{len(only_never)} lines are reached only by scripts that never join: "
          + ", ".join(f"{n} {len(reached[n] - covered)}" for n in sorted(reached)
                      if labels[n] & NEVER and reached[n] - covered))
    for n, g in chosen:
        print(f"  {n}: +{g}")
    once = sorted(cands)
    print(f"plain pass only ({len(once)}): {' '.join(once)}")
    if a.write:
        with open(a.write, "w") as f:
            f.write("# Written by tests/asan_select.py: the scripts the ASan + UBSan pass runs again, each with\n"
                    "# the lines of src/ and clients/ it reaches that nothing before it in this list, nor any\n"
                    "# test run in both passes, does. Regenerate when tests or code move (docs/testing.md).\n")
            for n, g in chosen:
                f.write(f"{n} {g}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
