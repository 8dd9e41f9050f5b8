"""`gpuscope runs --where --since --sort --columns` through the binary, on SQLite and on a real
PostgreSQL server (tests/pg/pgserver.py), over the same four runs in each: two on simulated GPUs
(an A100, an H100), one without, one whose name is an SQL injection. Every operator, and/or/not and
parentheses, missing values (never matching, not even under not), a param that is not a number;
each filter is asked twice — as it is (the store's SQL decides it) and or-ed with a column only C
reads (`or samples_per_s < 0`, which no run matches, so C decides the whole) — and both must give
the expected runs. Malformed filters are usage errors naming the token; injections find nothing
and leave the store whole."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pg"))
from gstest import *  # noqa: E402,F401,F403
from pgserver import PgServer  # noqa: E402
from test_serve_api import Server  # noqa: E402

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
SCN = os.path.join(SRC, "tests/gpusim/scenarios")
EVIL = "x' OR '1'='1"
_made = {}


def make_runs(sb, url):
    def run(name, scenario, *job, tags=()):
        env = {"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": os.path.join(SCN, scenario)} if scenario else None
        args = [a for t in tags for a in ("--tag", t)]
        sb.ok("run", "--quiet", "--store", url, "--name", name, *args, "--", *job, env=env)
    run("a", "fp32_a100.scn", *sb.step_job(0, 0.01, 10, "batch_size=64", "lr=0.1", "model=resnet"),
        tags=["team=vision"])
    run("b", None, *sb.step_job(0, 0.002, 10, "batch_size=32", "model=bert"), tags=["team=nlp"])
    run("c", "healthy_h100.scn", *sb.step_job(0, 0.002, 10, "batch_size=128", "lr=oops"))
    run(EVIL, None, "true")


def stores():
    """[(kind, sandbox, url)]: the four runs in a SQLite store and in a PostgreSQL server."""
    if not _made:
        pg = PgServer()
        _made["pg"] = pg
        sb = Sandbox()
        sb.env = pg.env(sb.env)
        sb.env["GPUSCOPE_SPOOL_DIR"] = os.path.join(sb.dir, "spool")
        _made["sb"] = sb
        _made["urls"] = [("sqlite", sb.store), ("pg", pg.url("where"))]
        for _, url in _made["urls"]:
            make_runs(sb, url)
    return [(kind, _made["sb"], url) for kind, url in _made["urls"]]


def names(sb, url, where, *more):
    return sorted(r["name"] for r in sb.json("runs", "--store", url, "--where", where, "--columns", "name", "--json",
                                             *more))


CASES = [
    ("param.batch_size = 64", {"a"}),
    ("param.batch_size = 64.0", {"a"}),
    ("param.batch_size != 64", {"b", "c"}),
    ("param.batch_size < 64", {"b"}),
    ("param.batch_size <= 64", {"a", "b"}),
    ("param.batch_size > 64", {"c"}),
    ("param.batch_size >= 64", {"a", "c"}),
    ("param.model ~ es", {"a"}),
    ("param.model = bert", {"b"}),
    ("param.model < c", {"b"}),
    ("param.lr > 0", {"a"}),              # c's lr is "oops": not a number, so unknown
    ("not param.lr > 1", {"a"}),          # unknown stays unknown under not
    ("param.lr = oops", {"c"}),
    ("gpu.name ~ A100", {"a"}),
    ("not gpu.name ~ A100", {"c"}),       # b and the evil run have no GPU
    ("gpu.name = 'NVIDIA H100 80GB HBM3'", {"c"}),
    ("tag.team = vision or tag.team = nlp", {"a", "b"}),
    ("not tag.team = vision", {"b"}),
    ("param.missing != 1 or not param.missing = 1", set()),
    ("(param.batch_size >= 64 and tag.team = vision) or name = b", {"a", "b"}),
    ("NOT (name = a OR name = b) AND command ~ step_job", {"c"}),
    ("exit_code = 0 and duration_s > 0 and start > 1700000000", {"a", "b", "c", EVIL}),
    ("name = \"x' OR '1'='1\"", {EVIL}),
    ("name = 'a'' OR ''1''=''1'", set()),
    ("name = 'x''; DROP TABLE runs; --'", set()),
    ("host ~ \"'\"", set()),
]


def test_every_operator_and_missing_values_on_both_stores_in_sql_and_in_c():
    for kind, sb, url in stores():
        for where, want in CASES:
            got = names(sb, url, where)
            check(set(got) == want, f"{kind}: --where {where!r}: {got}, want {sorted(want)}")
            got = names(sb, url, f"({where}) or samples_per_s < 0")
            check(set(got) == want, f"{kind}: decided in C: --where {where!r}: {got}, want {sorted(want)}")
        check(len(sb.json("runs", "--json", "--store", url)) == 4, f"{kind}: the injections changed the store")


def test_computed_columns_filter_sort_and_print():
    for kind, sb, url in stores():
        check(names(sb, url, "samples_per_s > 0") == ["a", "b", "c"], kind)
        check(names(sb, url, "not samples_per_s > 0") == [], kind)
        check(names(sb, url, "status = finished") == sorted(["a", "b", "c", EVIL]), kind)
        rows = sb.json("runs", "--store", url, "--sort", "-samples_per_s", "--columns",
                       "name,param.batch_size,samples_per_s,exit_code,top_finding", "--json")
        check(len(rows) == 4 and rows[-1]["name"] == EVIL and rows[-1]["samples_per_s"] is None, f"{kind}: {rows}")
        rates = [r["samples_per_s"] for r in rows[:3]]
        check(all(isinstance(x, float) and x > 0 for x in rates) and rates == sorted(rates, reverse=True),
              f"{kind}: {rows}")
        check(all(isinstance(r["param.batch_size"], str) for r in rows[:3]) and rows[-1]["param.batch_size"] is None,
              f"{kind}: {rows}")
        check(all(r["exit_code"] == 0 for r in rows) and all(isinstance(r["top_finding"], str) for r in rows[:3]),
              f"{kind}: {rows}")
        up = sb.json("runs", "--store", url, "--sort", "samples_per_s", "--columns", "name,samples_per_s", "--json")
        check([r["name"] for r in up] == [r["name"] for r in rows[2::-1]] + [EVIL], f"{kind}: {up}")
        fastest = sb.json("runs", "--store", url, "--where",
                          "param.batch_size >= 64 and tag.team = vision and gpu.name ~ A100 and samples_per_s > 500",
                          "--since", "7d", "--sort", "-samples_per_s", "--columns",
                          "name,param.batch_size,samples_per_s,top_finding", "--json")
        check([r["name"] for r in fastest] == ["a"] and fastest[0]["param.batch_size"] == "64", f"{kind}: {fastest}")
        table = sb.ok("runs", "--store", url, "--sort", "name", "--columns", "name,param.batch_size,gpu.name")
        lines = table.splitlines()
        check(lines[0].split() == ["NAME", "PARAM.BATCH_SIZE", "GPU.NAME"] and lines[1].startswith("a ") and
              "A100" in lines[1] and lines[2].split() == ["b", "32", "-"], f"{kind}: {table}")
        csv = sb.ok("runs", "--store", url, "--sort", "name", "--columns", "name,param.batch_size", "--csv")
        check(csv.splitlines()[:2] == ['"name","param.batch_size"', '"a","64"'], f"{kind}: {csv}")


def test_since_and_the_default_listing_filtered():
    for kind, sb, url in stores():
        check(len(sb.json("runs", "--store", url, "--since", "1h", "--json")) == 4, kind)
        check(sb.json("runs", "--store", url, "--since", "0s", "--json") == [], kind)
        out = sb.ok("runs", "--store", url, "--where", "param.batch_size > 64")
        check(len(out.splitlines()) == 2 and " c " in out, f"{kind}: {out}")


def test_the_serve_api_answers_the_same_search_and_refuses_a_bad_one():
    from urllib.parse import urlencode
    for kind, sb, url in stores():
        srv = Server(sb, "--store", url)
        try:
            where = "(param.batch_size >= 64 and gpu.name ~ A1) or tag.team = nlp"
            q = urlencode({"where": where, "sort": "-samples_per_s", "columns": "name,param.batch_size,tag.team"})
            got = srv.json("/api/runs?" + q)["runs"]
            cli = sb.json("runs", "--store", url, "--where", where, "--sort", "-samples_per_s", "--columns",
                          "name,param.batch_size,tag.team", "--json")
            check([r["name"] for r in got] == [r["name"] for r in cli] and len(got) == 2, f"{kind}: {got} / {cli}")
            check([r["columns"] for r in got] == cli, f"{kind}: columns {[r['columns'] for r in got]} / {cli}")
            check(all("samples_per_s" in r and "notes" in r for r in got), f"{kind}: rows keep their figures")
            check(len(srv.json("/api/runs")["runs"]) == 4 and len(srv.json("/api/runs?where=")["runs"]) == 4, kind)
            for bad, named in (({"where": "param.batch_size >="}, "where: "), ({"sort": "bogus"}, "sort: "),
                               ({"columns": "name,bogus"}, "columns: "), ({"where": EVIL}, "where: ")):
                err = srv.json("/api/runs?" + urlencode(bad), status=400)["error"]
                check(err.startswith(named), f"{kind}: {bad}: {err}")
            before = {r["name"]: r for r in srv.json("/api/runs")["runs"]}  # a finished run's row is cached
            sb.ok("tag", "a", "extra=1", "--store", url)
            sb.ok("note", "a", "seen by serve", "--store", url)
            after = {r["name"]: r for r in srv.json("/api/runs")["runs"]}
            check(after["a"]["tags"] == before["a"]["tags"] + ",extra=1" and "seen by serve" in after["a"]["notes"],
                  f"{kind}: a cached row kept the old tags or notes: {after['a']['tags']} {after['a']['notes']}")
            sb.ok("tag", "a", "--rm", "extra", "--store", url)
        finally:
            srv.stop()


def test_filters_at_the_limits_run_on_both_stores_and_one_past_them_is_refused():
    """The deepest and longest filters the parser takes make SQL both back ends' parsers take (SQLite's
    parser stack holds 100 levels; a chain of 256 ors nested 256 deep before it was flattened)."""
    def nest(open_, close, leaf, levels):
        return open_ * levels + leaf + close * levels
    leaf = "param.batch_size >= 1 and gpu.name ~ A"
    at_limit = {  # (filter at the limit, one level more)
        "not": ("not " * 30 + "not name = a", "not " * 32 + "name = a"),
        "parentheses": (nest("(", ")", "name = a", 31), nest("(", ")", "name = a", 32)),
        "not/or": (nest("not (name = b or ", ")", leaf, 15), nest("not (name = b or ", ")", leaf, 16)),
        "not/and/or": (nest("not (name = b and not (name = c or ", "))", leaf, 7) + " or name = a",
                       nest("not (name = b and not (name = c or ", "))", leaf, 8)),
        "or": (" or ".join(f"param.batch_size = {i}" for i in range(256)),
               " or ".join(f"param.batch_size = {i}" for i in range(257))),
    }
    for kind, sb, url in stores():
        for name, (ok, over) in at_limit.items():
            rc, out, err = sb.gs("runs", "--store", url, "--where", ok, "--columns", "name")
            check(rc == 0, f"{kind}: {name} at the limit: {rc} {err!r}")
            rc, out, err = sb.gs("runs", "--store", url, "--where", over, "--columns", "name")
            check(rc == 2 and ("nested more than 32" in err or "more than 256 comparisons" in err),
                  f"{kind}: {name} past the limit: {rc} {err!r}")


MALFORMED = [
    ("param.batch_size >=", "the end"),
    ("foo = 1", "'foo'"),
    ("name = a and", "the end"),
    ("(name = a", "')'"),
    ("name == a", "'='"),
    ("duration_s > fast", "'duration_s'"),
    ("duration_s > '\x1b]0;owned\x07'", "'?]0;owned?' is not one"),
    ("exit_code ~ 1", "~"),
    ("name = 'open", "never closed"),
    ("name = a b", "'b'"),
    ("param. = 1", "param."),
    ("param.a'b = 1", "expected an operator"),
    ("", "empty"),
    ("(" * 40 + "name = a" + ")" * 40, "nested more than 32 deep"),
]


def test_a_malformed_filter_column_or_age_is_a_usage_error_naming_it():
    for kind, sb, url in stores():
        for where, named in MALFORMED:
            rc, out, err = sb.gs("runs", "--store", url, "--where", where)
            check(rc == 2 and err.startswith("gpuscope: --where: ") and named in err and not out and
                  "\x1b" not in err and "\x07" not in err,
                  f"{kind}: --where {where!r}: {rc} {out!r} {err!r}")
        for args, named in ((["--sort", "-bogus"], "'bogus'"), (["--columns", "name,bogus"], "'bogus'"),
                            (["--since", "soon"], "--since")):
            rc, out, err = sb.gs("runs", "--store", url, *args)
            check(rc == 2 and named in err, f"{kind}: {args}: {rc} {out!r} {err!r}")
        rc, _, err = sb.gs("show", "last", "--where", "name = a", "--store", url)
        check(rc == 2 and "options of 'gpuscope runs'" in err, f"{kind}: {rc} {err!r}")


def _close():
    if "pg" in _made:
        _made["pg"].close()
    if "sb" in _made:
        _made["sb"].close()


if __name__ == "__main__":
    try:
        run_tests(globals())
    finally:
        _close()
