#!/usr/bin/env python3
"""Checks that the layout tells the architecture (docs/architecture.md, "Layout").

Reads every C file under src/ (stdlib only, no compiler needed) and reports:
  * include cycles between folders (a folder that includes a header of a folder that includes it
    back, directly or through others) and between files inside a folder;
  * call cycles between folders and between files inside a folder: file A calls a function that
    file B defines, and B (or a file B reaches) calls back into A;
  * functions longer than --max-lines (80) lines, counted from the line of the name to the closing
    brace. Tables are arrays, not functions, and are not counted;
  * a folder that includes or calls into another folder its row in docs/architecture.md's layout
    table does not list under "reads from" (core/ may be used by all; "everything above" by cli/),
    and a folder that has no row: the table is the drawing of the rooms, and must stay true.

The parser is deliberately small: comments, strings and preprocessor lines are blanked, then the
text is scanned for top-level `name(...) {` bodies; inside a body every `identifier(` is a call.
A call through a function pointer (a struct of function pointers: the store's and collectors'
interfaces) is not seen as a call, which is what the interfaces are for.

Known violations are listed in scripts/layout_allow.txt, one per line, exactly as this script prints
them. The list may only shrink: a violation not in it fails the check (exit 1), and an entry that no
longer occurs is reported so it can be removed (exit 1 with --strict-allow). Run from anywhere:
  scripts/check_layout.py            # the check CI's format step runs
  scripts/check_layout.py --all      # every violation, ignoring the allow list
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case", "_Alignof",
            "defined", "offsetof", "va_arg", "_Static_assert", "__attribute__", "typeof", "_Generic"}


def blank(text):
    """Comments, string and char literals and preprocessor lines replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("  \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
            continue
        out.append(c)
        if c == "\n":
            at_line_start = True
        elif not c.isspace():
            at_line_start = False
        i += 1
    return "".join(out)


def functions(text):
    """[(name, first_line, last_line, calls, is_static)] of the functions a blanked file defines."""
    found = []
    depth = 0
    i, n = 0, len(text)
    ident = re.compile(r"[A-Za-z_]\w*")
    while i < n:
        c = text[i]
        if c == "{" and depth == 0:
            # a function body when the text before it ends with ')' (after attributes/whitespace)
            head = text[:i].rstrip()
            if head.endswith(")"):
                # find the matching '(' of the parameter list
                k, d = len(head) - 1, 0
                while k >= 0:
                    if head[k] == ")":
                        d += 1
                    elif head[k] == "(":
                        d -= 1
                        if d == 0:
                            break
                    k -= 1
                m = re.search(r"([A-Za-z_]\w*)\s*$", head[:k])
                prev = head[:k].rstrip()[:-len(m.group(1))] if m else ""
                if m and m.group(1) not in KEYWORDS and not prev.rstrip().endswith("="):
                    name = m.group(1)
                    # the body's extent
                    j, d = i, 0
                    while j < n:
                        if text[j] == "{":
                            d += 1
                        elif text[j] == "}":
                            d -= 1
                            if d == 0:
                                break
                        j += 1
                    body = text[i:j]
                    calls = {x.group(1) for x in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", body)} - KEYWORDS
                    first = text.count("\n", 0, m.start()) + 1
                    last = text.count("\n", 0, j) + 1
                    decl_start = max(head.rfind(";", 0, k), head.rfind("}", 0, k)) + 1
                    is_static = re.search(r"\bstatic\b", head[decl_start:k]) is not None
                    found.append((name, first, last, calls, is_static))
                    i = j + 1
                    continue
            depth += 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth = max(0, depth - 1)
        i += 1
    del ident
    return found


def sccs(nodes, edges):
    """Strongly connected components of more than one node (or a node with a self edge)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def layout_table():
    """{folder: set of folders it reads from, or None for "everything above"} from docs/architecture.md."""
    doc = open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8").read()
    table = {}
    for m in re.finditer(r"^\| `(\w+)/` \|.*\| ([^|]*) \|$", doc, re.M):
        reads = m.group(2).strip()
        table[m.group(1)] = None if reads == "everything above" else {
            x.strip() for x in reads.split(",") if x.strip() not in ("", "—")}
    return table


def table_violations(folders, inc_folders, call_folders):
    """The folder edges docs/architecture.md's table does not draw, and folders it lacks."""
    table = layout_table()
    out = []
    for f in sorted(folders):
        if f not in table:
            out.append(f"folder not in docs/architecture.md's layout table: {f}/")
            continue
        if table[f] is None:
            continue
        for kind, edges in (("includes", inc_folders), ("calls", call_folders)):
            for t in sorted(edges.get(f, ())):
                if t != "core" and t not in table[f]:
                    out.append(f"{f}/ {kind} {t}/, which docs/architecture.md's layout table does not list")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-lines", type=int, default=80)
    ap.add_argument("--all", action="store_true", help="ignore scripts/layout_allow.txt")
    ap.add_argument("--strict-allow", action="store_true", help="fail on allow-list entries that no longer occur")
    args = ap.parse_args()

    files = {}
    for dirpath, _, names in os.walk(SRC):
        for f in names:
            if f.endswith((".c", ".h")):
                p = os.path.join(dirpath, f)
                files[os.path.relpath(p, SRC)] = open(p, encoding="utf-8", errors="replace").read()

    def folder(rel):
        return rel.split(os.sep)[0]

    violations = []

    # Includes: "folder/file.h" or "file.h" (the same folder).
    inc_files, inc_folders = {}, {}
    for rel, text in files.items():
        for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
            target = m.group(1)
            cand = target if target in files else os.path.join(folder(rel), target)
            if cand not in files:
                continue
            if folder(cand) == folder(rel):
                inc_files.setdefault(rel, set()).add(cand)
            else:
                inc_folders.setdefault(folder(rel), set()).add(folder(cand))
    for comp in sccs(set(inc_folders) | {w for s in inc_folders.values() for w in s}, inc_folders):
        violations.append("include cycle between folders: " + " <-> ".join(comp))
    for comp in sccs(set(files), inc_files):
        violations.append("include cycle in " + folder(comp[0]) + "/: " + " <-> ".join(comp))

    # Calls: who defines each non-static name (static names stay inside their file).
    defs, calls_of, long_funcs = {}, {}, []
    for rel, text in files.items():
        if not rel.endswith(".c"):
            continue
        b = blank(text)
        for name, first, last, calls, is_static in functions(b):
            if not is_static:
                defs.setdefault(name, set()).add(rel)
            calls_of.setdefault(rel, set()).update(calls)
            if last - first + 1 > args.max_lines:
                long_funcs.append((rel, name, last - first + 1))
    call_files, call_folders = {}, {}
    for rel, calls in calls_of.items():
        own = {f[0] for f in functions(blank(files[rel]))}
        for name in calls - own:
            for target in defs.get(name, ()):
                if target == rel:
                    continue
                if folder(target) == folder(rel):
                    call_files.setdefault(rel, set()).add(target)
                else:
                    call_folders.setdefault(folder(rel), set()).add(folder(target))
    for comp in sccs(set(call_folders) | {w for s in call_folders.values() for w in s}, call_folders):
        violations.append("call cycle between folders: " + " <-> ".join(comp))
    for comp in sccs(set(calls_of), call_files):
        violations.append("call cycle in " + folder(comp[0]) + "/: " + " <-> ".join(comp))
    violations += table_violations(set(inc_folders) | set(call_folders) | {folder(r) for r in files},
                                   inc_folders, call_folders)
    for rel, name, nlines in sorted(long_funcs):
        violations.append(f"function over {args.max_lines} lines: {rel}: {name} ({nlines} lines)")

    allow_path = os.path.join(ROOT, "scripts", "layout_allow.txt")
    allowed = set()
    if not args.all and os.path.exists(allow_path):
        for line in open(allow_path, encoding="utf-8"):
            line = line.strip()
            if line and not line.startswith("#"):
                # a long function is allowed by file and name, whatever its length now
                allowed.add(re.sub(r" \(\d+ lines\)$", "", line))

    def key(v):
        return re.sub(r" \(\d+ lines\)$", "", v)

    new = [v for v in violations if key(v) not in allowed]
    gone = sorted(allowed - {key(v) for v in violations})
    for v in violations:
        print(("  allowed: " if key(v) in allowed else "VIOLATION: ") + v)
    for g in gone:
        print("  no longer occurs (remove from scripts/layout_allow.txt): " + g)
    print(f"check_layout: {len(violations)} violations, {len(new)} not in the allow list, "
          f"{len(gone)} allow-list entries gone")
    return 1 if new or (args.strict_allow and gone) else 0


if __name__ == "__main__":
    sys.exit(main())
