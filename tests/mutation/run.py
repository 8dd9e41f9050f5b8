#!/usr/bin/env python3
"""The mutation pass (docs/mutation.md): how much of the code whose numbers users act on (src/doctor/,
src/store/, the gs1 parser) the tests would catch changing. For each sampled mutant of a file
(mutate.py: a comparison's boundary moved, an operator swapped, a constant changed, a branch removed),
it writes the mutant into a private copy of the source tree, rebuilds only what the file's tests need
(one object, the library, the test executables) in a build folder of its own, runs those tests
fastest first until one fails (the mutant is killed) or all pass (it survived), each under a timeout
that only bounds a hang (a mutant that hangs is killed), and puts the file back. It prints the share
killed per file and per folder, and every survivor as file:line and its mutation.

Not in CI: a full pass takes hours on two cores. One folder:
    nice -n 10 /usr/bin/python3 tests/mutation/run.py --folder src/store
Every mutant (no sample): --all. The last pass's survivors again (after adding tests): --survivors.
The named memory/leak survivors under ASan + UBSan (as make check's second pass builds), in a work
folder of its own (build-mutation-asan/, the plain pass's results-FOLDER.json copied there first):
    --survivors --sanitize
Exit status: 0 when the pass ran (whatever its score), 2 for bad arguments, 3 when the unmutated
tree fails to build or a test fails on it (no score means anything then).
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mutate  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Which tests judge a file's mutants: per folder, and per file where the folder's set is not the
# right one (a back end's own files are tested by its own suite). Each is a ctest name of this tree;
# they are run fastest first. docs/mutation.md explains the choice.
STORE_COMMON = ["unit_test_store_mutants", "unit_test_store", "pg_unit_test_store_mutants", "pg_unit_test_store",
                "unit_test_store_sqlite"]
STORE_SQLITE = ["unit_test_store_mutants", "unit_test_store", "unit_test_store_sqlite", "it_test_store_safety"]
STORE_PG = ["unit_test_store_mutants", "pg_unit_test_store_mutants", "pg_unit_test_store"]
TESTS = {
    "src/store": STORE_COMMON,
    "src/store/chunk.c": ["unit_test_chunk"] + STORE_COMMON,
    "src/store/store_sqlite.c": STORE_SQLITE,
    "src/store/sqlite_read.c": STORE_SQLITE,
    "src/store/sqlite_write.c": STORE_SQLITE,
    "src/store/sqlite_run.c": STORE_SQLITE,
    "src/store/sqlite_util.c": STORE_SQLITE,
    "src/store/store_pg.c": STORE_PG + ["it_test_pg_outage"],  # it migrates a version-2 store
    "src/store/pg_read.c": STORE_PG,
    "src/store/pg_write.c": STORE_PG + ["it_test_pg_outage"],
    "src/store/pg_run.c": STORE_PG + ["it_test_pg_outage"],
    "src/store/pg_util.c": STORE_PG,
    "src/store/pg_spool.c": STORE_PG + ["it_test_pg_outage"],
    "src/store/store_util.c": STORE_COMMON + ["it_test_store_full_disk"],  # a kept end read back (store_spool_end)
    "src/store/store_group.c": ["unit_test_store_mutants", "unit_test_doctor_rules", "unit_test_store"],
    # The files that came after the first pass have tests of their own: the export file's parser and
    # mover, the runs filter, the edits (tags, names, notes, removal), the job's log, the end a full
    # disk could not take.
    "src/store/move_parse.c": ["unit_test_move_parse", "it_test_move"],
    "src/store/store_move.c": ["unit_test_move_parse", "it_test_move"],
    "src/store/store_where.c": ["unit_test_store_where", "it_test_runs_where"],
    "src/store/store_meta.c": ["unit_test_store_where", "it_test_runs_edit"],
    "src/store/sqlite_meta.c": STORE_SQLITE + ["it_test_runs_edit", "it_test_runs_where"],
    "src/store/pg_meta.c": STORE_PG + ["it_test_runs_edit", "it_test_runs_where"],
    "src/store/sqlite_log.c": STORE_SQLITE + ["it_test_joblog"],
    "src/store/pg_log.c": STORE_PG + ["it_test_joblog_pg"],
    "src/store/sqlite_kept.c": STORE_SQLITE + ["it_test_store_full_disk"],
    "src/doctor": ["unit_test_doctor_mutants", "unit_test_doctor_rules", "unit_test_report", "it_test_doctor", "it_test_compare"],
    "src/ingest/ingest_parse.c": ["unit_test_ingest_parse", "unit_test_ingest_parse_mutants", "unit_test_ingest_poll",
                                  "unit_test_client_c", "it_test_ingest_malformed"],
}
# The folders a bare run covers, and the files it mutates in each.
FOLDERS = ["src/ingest/ingest_parse.c", "src/store", "src/doctor"]
# The survivors named equivalent (docs/mutation.md): a mutant that no test can tell from the code.
EQUIVALENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "equivalent.txt")
# The build targets a test needs beyond the executable its command names.
EXTRA_TARGETS = {"it_test_move": ["serve_gen"], "it_test_runs_edit": ["serve_gen"], "it_test_runs_where": ["gpusim"],
                 "it_test_store_full_disk": ["gpusim"]}


def log(*a):
    print(*a, flush=True)


def tests_for(path):
    best = None
    for key in TESTS:
        if path == key or path.startswith(key.rstrip("/") + "/"):
            if best is None or len(key) > len(best):
                best = key
    return TESTS[best] if best else None


def files_of(spec):
    full = os.path.join(REPO, spec)
    if os.path.isfile(full):
        return [spec]
    if not os.path.isdir(full):
        log(f"run.py: no such file or folder: {spec}")
        sys.exit(2)
    return sorted(os.path.join(spec, f) for f in os.listdir(full) if f.endswith(".c"))


# -- the private copy of the source tree and its build folder --------------------------------------


def tree_files():
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                         capture_output=True).stdout.decode()
    return [f for f in out.split("\0") if f and os.path.isfile(os.path.join(REPO, f))]


def sync_copy(copy):
    """Makes copy hold the work tree's files (tracked and untracked, not ignored): a file is written
    only when its bytes differ, so the build folder rebuilds only what changed. Puts back a file a
    killed pass left mutated."""
    want = set(tree_files())
    changed = 0
    for rel in want:
        src, dst = os.path.join(REPO, rel), os.path.join(copy, rel)
        with open(src, "rb") as f:
            data = f.read()
        try:
            with open(dst, "rb") as f:
                same = f.read() == data
        except OSError:
            same = False
        if not same:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "wb") as f:
                f.write(data)
            shutil.copymode(src, dst)
            changed += 1
    for root, dirs, files in os.walk(copy):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), copy)
            if rel not in want and not rel.startswith("web/node_modules"):
                os.unlink(os.path.join(root, name))
                changed += 1
    return changed


_last_mtime = [0]


def write_source(path, text):
    """Writes a source file with an mtime later than any written before, so the build sees it."""
    with open(path, "w") as f:
        f.write(text)
    t = max(time.time_ns(), _last_mtime[0] + 1_000_000)
    _last_mtime[0] = t
    os.utime(path, ns=(t, t))


def configure(copy, build, changed, sanitize=False):
    if os.path.exists(os.path.join(build, "CMakeCache.txt")):
        if not changed:
            return True
        # files came or went: the globs must be read again before targets are named
        return subprocess.run(["cmake", build], capture_output=True).returncode == 0
    # -O1 without -g: the object of a mutant compiles fast and the tests still run at speed; no
    # -Werror, as a mutant may draw a warning and still be a program the tests must judge.
    cmd = ["cmake", "-S", copy, "-B", build, "-G", "Unix Makefiles",  # Ninja: tests/fuzz names a target and its output alike
           "-DCMAKE_BUILD_TYPE=None", "-DCMAKE_C_FLAGS=-O1", "-DBUILD_TESTING=ON", "-DGS_WERROR=OFF"]
    if sanitize:  # what make check-asan builds: a read past an array or a leak fails the test
        cmd.append("-DGS_SANITIZE=ON")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        log(r.stdout[-3000:], r.stderr[-3000:])
    return r.returncode == 0


def build_targets(build, targets, timeout, jobs=1):
    cmd = ["cmake", "--build", build, f"-j{jobs}", "--target", *targets]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, "build timed out"
    return r.returncode == 0, (r.stdout + r.stderr)[-4000:]


# -- the tests -------------------------------------------------------------------------------------


class Test:
    def __init__(self, name, command, env, cwd, skip_rc):
        self.name, self.command, self.env, self.cwd, self.skip_rc = name, command, env, cwd, skip_rc
        self.baseline = None
        # An integration test drives real jobs whose timing a loaded machine changes: a failure of
        # one counts only when it fails twice running (on the unmutated tree: passes once of twice).
        self.flaky = name.startswith("it_")

    def run(self, timeout):
        """'pass', 'fail', 'timeout' or 'skip', and the output's tail."""
        env = dict(os.environ)
        for e in self.env:
            k, _, v = e.partition("=")
            env[k] = v
        p = subprocess.Popen(self.command, cwd=self.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, _ = p.communicate()
            return "timeout", out.decode(errors="replace")[-2000:]
        text = out.decode(errors="replace")[-2000:]
        if p.returncode == 0:
            return "pass", text
        if self.skip_rc is not None and p.returncode == self.skip_rc:
            return "skip", text
        return "fail", text


def load_tests(build):
    r = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True, text=True, check=True)
    tests = {}
    for t in json.loads(r.stdout)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        if "command" not in t:
            continue
        tests[t["name"]] = Test(t["name"], t["command"], props.get("ENVIRONMENT", []),
                                props.get("WORKING_DIRECTORY", build), props.get("SKIP_RETURN_CODE"))
    return tests


def targets_of(name):
    """The build targets a test runs: its executable (unit_test_X runs test_X, pg_unit_test_X too) or,
    for an integration test, the program."""
    for prefix in ("pg_unit_", "unit_"):
        if name.startswith(prefix):
            return [name[len(prefix):]] + EXTRA_TARGETS.get(name, [])
    return ["gpuscope"] + EXTRA_TARGETS.get(name, [])


def hang_bound(test, factor):
    """A timeout that only bounds a hang: several times the unmutated run, never under 20 s."""
    return max(20.0, factor * (test.baseline or 10.0) + 10.0)


# -- the pass --------------------------------------------------------------------------------------


def sample(path, src, n, seed, all_):
    ms = mutate.mutants(src)
    live = [m for m in ms if not m.excluded]
    excluded = [m for m in ms if m.excluded]
    if all_ or n >= len(live):
        chosen = live
    else:
        rng = random.Random(f"{seed}:{path}")
        chosen = sorted(rng.sample(live, n), key=lambda m: m.start)
    return chosen, excluded, len(live)


def load_equivalent():
    """{(file, the line's code, the mutation): why} from equivalent.txt: lines
    `FILE | CODE | MUTATION | WHY`, with # comments."""
    out = {}
    with open(EQUIVALENT) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [x.strip() for x in line.split(" | ")]
            if len(parts) < 4:
                log(f"{EQUIVALENT}:{n}: not FILE | CODE | MUTATION | WHY")
                sys.exit(2)
            # the code may hold " | " itself (`O_RDONLY | O_CLOEXEC`): the mutation and why never do
            out[(parts[0], " | ".join(parts[1:-2]), parts[-2])] = parts[-1]
    return out


def code_at(src, m):
    start = src.rfind("\n", 0, m.start) + 1
    end = src.find("\n", m.start)
    return " ".join(src[start : end if end >= 0 else len(src)].split())


def mutant_id(path, m):
    return f"{path}:{m.line}:{m.start}:{m.op}:{m.repl}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folder", action="append", help="a folder or file under the repo (repeatable); "
                    "default: " + ", ".join(FOLDERS))
    ap.add_argument("--per-file", type=int, default=12, help="mutants sampled per file (default 12)")
    ap.add_argument("--all", action="store_true", help="every mutant, no sample")
    ap.add_argument("--seed", default="1", help="the sample's seed (default 1)")
    ap.add_argument("--survivors", action="store_true", help="only the last pass's survivors (its JSON)")
    ap.add_argument("--extra-test", action="append", default=[], metavar="CTEST_NAME",
                    help="a test run too for every file, after the mapped ones (repeatable): "
                    "with --survivors, whether a slow test the pass leaves out kills them")
    ap.add_argument("--resume", action="store_true", help="keep the last pass's results (its JSON) and run "
                    "only the sampled mutants it has none for (a pass cut short)")
    ap.add_argument("--report", action="store_true", help="print the last pass's table again (its JSON), "
                    "with equivalent.txt as it is now; run nothing")
    ap.add_argument("--list", action="store_true", help="list the sampled mutants, run nothing")
    ap.add_argument("--work", default=os.path.join(REPO, "build-mutation"),
                    help="the private copy and build folder (default build-mutation/)")
    ap.add_argument("--hang-factor", type=float, default=5.0, help="test timeout: this times its unmutated run")
    ap.add_argument("--sanitize", action="store_true", help="build with ASan + UBSan (default work folder "
                    "build-mutation-asan/); with --survivors, the named memory: and leak: survivors are judged too")
    ap.add_argument("--json", help="where the results go (default WORK/results-FOLDERS.json)")
    args = ap.parse_args()
    if args.sanitize:
        if args.work == os.path.join(REPO, "build-mutation"):
            args.work = os.path.join(REPO, "build-mutation-asan")
        os.environ["ASAN_OPTIONS"] = "detect_leaks=1"  # as make check-asan runs the tests

    specs = args.folder or FOLDERS
    files = [f for s in specs for f in files_of(s.rstrip("/"))]
    for f in files:
        if tests_for(f) is None:
            log(f"run.py: no tests are mapped for {f} (TESTS in tests/mutation/run.py)")
            return 2
    copy, build = os.path.join(args.work, "src"), os.path.join(args.work, "build")
    slug = "+".join(s.rstrip("/").replace("/", "_") for s in specs)
    out_json = args.json or os.path.join(args.work, f"results-{slug}.json")

    last = None
    equivalent = load_equivalent()
    if args.survivors or args.report or args.resume:
        try:
            with open(out_json) as f:
                last = json.load(f)
        except OSError as e:
            log(f"run.py: --survivors and --report need the last pass's results: {e}")
            return 2
        for r in last["results"]:
            if "code" not in r:  # a pass from before the code was recorded: the line as it is now
                with open(os.path.join(REPO, r["file"])) as f:
                    lines = f.read().split("\n")
                r["code"] = " ".join(lines[r["line"] - 1].split()) if r["line"] <= len(lines) else ""
            r["equivalent"] = equivalent.get((r["file"], r.get("code", ""), r["mutation"])) \
                if r["verdict"] == "survived" else None
        wanted = {r["id"] for r in last["results"] if r["verdict"] == "survived" and not r["equivalent"]}
        if args.sanitize:  # what only a sanitizer would see: judged here
            wanted |= {r["id"] for r in last["results"] if r["verdict"] == "survived"
                       and (r["equivalent"] or "").startswith(SANITIZER_CLASSES)}
        if args.resume:  # everything sampled that the last pass did not judge
            done = {r["id"] for r in last["results"]}
            wanted = None

    plan = []
    for path in files:
        with open(os.path.join(REPO, path)) as f:
            src = f.read()
        chosen, excluded, nlive = sample(path, src, args.per_file, args.seed, args.all)
        if last is not None and args.resume:
            chosen = [m for m in chosen if mutant_id(path, m) not in done]
        elif last is not None:
            chosen = [m for m in chosen if mutant_id(path, m) in wanted]
        plan.append((path, src, chosen, excluded, nlive))
    if args.report:
        args.per_file, args.all, args.seed = last.get("per_file"), last.get("per_file") is None, last.get("seed")
        log(f"(the pass of {last.get('commit')})")
        report(last["results"], plan, args, 0)
        return 0
    if args.list:
        for path, _, chosen, excluded, nlive in plan:
            log(f"{path}: {len(chosen)} of {nlive} mutants; {len(excluded)} left out by rule")
            for m in chosen:
                log(f"  {path}:{m.line}: {m.describe()}")
            for m in excluded:
                log(f"  {path}:{m.line}: ({m.excluded}) {m.describe()}")
        return 0

    os.makedirs(copy, exist_ok=True)
    t0 = time.time()
    n = sync_copy(copy)
    log(f"copy: {n} files updated in {copy}")
    if not configure(copy, build, n, args.sanitize):
        log("run.py: the mutation build folder does not configure")
        return 3
    names = sorted({name for path, _, chosen, _, _ in plan for name in tests_for(path) + args.extra_test})
    targets = sorted({tg for name in names for tg in targets_of(name)})
    ok, out = build_targets(build, targets, 3600, jobs=2)
    if not ok:
        log(out)
        log("run.py: the unmutated tree does not build")
        return 3
    tests = load_tests(build)  # after the build: ctest lists no command for an executable not built
    missing = [n for n in names if n not in tests]
    if missing:
        log(f"run.py: mapped tests not in this tree's ctest: {', '.join(missing)}")
        return 3
    for name in names:  # the baseline: every mapped test passes on the unmutated tree
        t = tests[name]
        s = time.time()
        verdict, text = t.run(600)
        if verdict != "pass" and t.flaky:
            log(f"baseline {name}: {verdict}, once more (an integration test)")
            s = time.time()
            verdict, text = t.run(600)
        t.baseline = time.time() - s
        log(f"baseline {name}: {verdict} in {t.baseline:.1f} s")
        if verdict != "pass":
            log(text)
            log(f"run.py: {name} does not pass on the unmutated tree")
            return 3

    # --survivors: the last pass's other results stand; the survivors rerun replace their own
    rerun = {mutant_id(path, m) for path, _, chosen, _, _ in plan for m in chosen}
    results = [r for r in last["results"] if r["id"] not in rerun] if last else []

    def save():
        os.makedirs(os.path.dirname(out_json), exist_ok=True)
        with open(out_json + ".tmp", "w") as f:
            json.dump({"commit": commit(), "seed": args.seed, "per_file": None if args.all else args.per_file,
                       "results": results, "excluded": excl}, f, indent=1)
        os.replace(out_json + ".tmp", out_json)

    excl = [{"file": p, "line": m.line, "rule": m.excluded, "mutation": m.describe()}
            for p, _, _, ex, _ in plan for m in ex]
    for path, src, chosen, excluded, nlive in plan:
        mine = sorted((tests[n] for n in tests_for(path)), key=lambda t: t.baseline)
        mine += [tests[n] for n in args.extra_test if n not in tests_for(path)]
        tg = sorted({x for t in mine for x in targets_of(t.name)})
        dst = os.path.join(copy, path)
        for k, m in enumerate(chosen):
            write_source(dst, m.apply(src))
            s = time.time()
            ok, out = build_targets(build, tg, 600)
            verdict, by = "stillborn", None
            if ok:
                verdict = "survived"
                for t in mine:
                    v, _text = t.run(hang_bound(t, args.hang_factor))
                    if v in ("fail", "timeout") and t.flaky:
                        v, _text = t.run(hang_bound(t, args.hang_factor))
                    if v in ("fail", "timeout"):
                        verdict, by = "killed", f"{t.name}{' (hang)' if v == 'timeout' else ''}"
                        break
            write_source(dst, src)
            code, why = code_at(src, m), None
            if verdict == "survived":
                why = equivalent.get((path, code, m.describe()))
            results.append({"id": mutant_id(path, m), "file": path, "line": m.line, "op": m.op, "code": code,
                            "mutation": m.describe(), "verdict": verdict, "by": by, "equivalent": why,
                            "secs": round(time.time() - s, 1)})
            log(f"[{k + 1}/{len(chosen)}] {path}:{m.line}: {m.describe()}: {verdict}{' by ' + by if by else ''}"
                f"{' (equivalent)' if why else ''} ({time.time() - s:.0f} s)")
            save()
    build_targets(build, targets, 3600)  # leave the build folder matching the unmutated tree
    save()
    report(results, plan, args, time.time() - t0)
    return 0


def commit():
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                           text=True).stdout.strip()
    return r.stdout.strip() + ("+changes" if dirty else "")


# equivalent.txt's classes that leave the score's denominator: no test could tell the mutant (same,
# boundary) or none of this suite can (oom: malloc does not fail here). memory, leak and reach
# survivors are named but stay survivors: a sanitizer build would catch the first two on a test that
# reached them; reach names a case no test brings about.
EQUIVALENT_CLASSES = ("same:", "boundary:", "oom:")
SANITIZER_CLASSES = ("memory:", "leak:")  # the named survivors --sanitize judges again


def is_equivalent(r):
    return r["verdict"] == "survived" and (r.get("equivalent") or "").startswith(EQUIVALENT_CLASSES)


def score(rs):
    """(killed, judged, equivalent, stillborn): judged counts the mutants that built, equivalent the
    survivors equivalent.txt names in an equivalent class."""
    judged = [r for r in rs if r["verdict"] in ("killed", "survived")]
    killed = sum(r["verdict"] == "killed" for r in judged)
    equiv = sum(is_equivalent(r) for r in judged)
    return killed, len(judged), equiv, sum(r["verdict"] == "stillborn" for r in rs)


def pct(k, n):
    return f"{100.0 * k / n:5.1f}%" if n else "    -"


def report(results, plan, args, secs):
    """The table: per file and per folder, the mutants killed of those that built, the score
    (killed / (built - named equivalent)) and the raw score (killed / built)."""
    log("")
    sample_desc = "every mutant" if args.all else f"a sample of {args.per_file} per file, seed {args.seed}"
    if args.survivors:
        sample_desc = "the last pass's survivors"
    log(f"mutation pass on {commit()}, {sample_desc}, {secs / 60:.0f} min")
    head = f"{'':40} {'killed':>6} {'built':>6} {'equiv':>6} {'score':>7} {'raw':>7} {'no-build':>8} {'of':>5}"
    log(head)
    folders = {}
    for path, _, chosen, excluded, nlive in plan:
        rs = [r for r in results if r["file"] == path]
        folders.setdefault(os.path.dirname(path) if not path.endswith("ingest_parse.c") else path, []).extend(rs)
        k, j, e, sb = score(rs)
        log(f"{path:40} {k:6} {j:6} {e:6} {pct(k, j - e):>7} {pct(k, j):>7} {sb:8} {nlive:5}")
    log("")
    for folder, rs in folders.items():
        k, j, e, sb = score(rs)
        log(f"{folder:40} {k:6} {j:6} {e:6} {pct(k, j - e):>7} {pct(k, j):>7} {sb:8}")
    surv = [r for r in results if r["verdict"] == "survived" and not r.get("equivalent")]
    log(f"\nsurvivors not named in equivalent.txt ({len(surv)}):")
    for r in surv:
        log(f"  {r['file']}:{r['line']}: {r['mutation']}    | {r.get('code', '')}")
    named = [r for r in results if r["verdict"] == "survived" and r.get("equivalent") and not is_equivalent(r)]
    log(f"\nsurvivors named, not equivalent (memory, leak: a sanitizer would see them; reach: no test"
        f" brings the case about; counted as survivors) ({len(named)}):")
    for r in named:
        log(f"  {r['file']}:{r['line']}: {r['mutation']}: {r['equivalent']}")
    eq = [r for r in results if is_equivalent(r)]
    log(f"\nsurvivors named equivalent (left out of the score) ({len(eq)}):")
    for r in eq:
        log(f"  {r['file']}:{r['line']}: {r['mutation']}: {r['equivalent']}")


if __name__ == "__main__":
    sys.exit(main())
