"""The mutants of one C source file: a small C tokenizer (comments, strings, character literals and
preprocessor lines are never mutated, except the value of a #define) and the mutation operators, each
a rewrite of one token or one `if` condition that still reads as C. run.py applies them one at a
time; this module only lists them. Python stdlib only.

Operators (docs/mutation.md):
  ror    a comparison's boundary moved: < <=, <= <, > >=, >= >
  eq     an equality flipped: == !=, != ==
  lor    a logical connective swapped: && ||, || &&
  aor    an arithmetic operator swapped: + -, - +, * /, / *, % * (and += -=, -= +=, *= /=, /= *=)
  bit    a bitwise operator swapped: & |, | &, << >>, >> <<
  const  a constant changed: integer 0 1, 1 0, n n+1; float 0.0 1.0, x x/2
  if0    a branch removed: if (c) -> if (0)
  if1    a branch always taken: if (c) -> if (1)
  not    a negation removed: !x -> x

Left out by rule (counted, never run; docs/mutation.md says why): if0 on an allocation's failure
check (`if (!p)` right after `p = malloc(...)`: the tests cannot make malloc fail), and constants
that size an array in a declaration (a buffer one byte longer behaves the same)."""
import re

PUNCT = sorted(
    """... <<= >>= -> ++ -- << >> <= >= == != && || += -= *= /= %= &= |= ^= ##
    [ ] ( ) { } . & * + - ~ ! / % < > ^ | ? : ; = , #""".split(),
    key=len,
    reverse=True,
)
IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
NUMBER = re.compile(r"(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[uUlLfF]*")
ALLOCATORS = re.compile(
    r"\b(?:malloc|calloc|realloc|reallocarray|strdup|strndup|asprintf|sqlite3_mprintf|[a-z_]*_new|[a-z_]*_dup)\s*\("
)
TYPE_WORDS = {
    "char", "short", "int", "long", "float", "double", "void", "signed", "unsigned", "const",
    "volatile", "static", "bool", "_Bool", "struct", "enum", "union", "size_t", "ssize_t", "FILE",
}


class Tok:
    __slots__ = ("kind", "text", "start", "end", "line", "pp")

    def __init__(self, kind, text, start, line, pp):
        self.kind, self.text, self.start, self.end, self.line, self.pp = kind, text, start, start + len(text), line, pp

    def __repr__(self):
        return f"Tok({self.kind},{self.text!r},{self.line})"


def tokenize(src):
    """The code tokens of src (kind: id, num, punct), each with its offset and line, and pp: None for
    code, 'define' for a #define's value, 'other' for any other preprocessor line."""
    toks, i, n, line = [], 0, len(src), 1
    pp, pp_name_seen = None, False
    at_line_start = True
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
            pp, at_line_start = None, True
            continue
        if c == "\\" and i + 1 < n and src[i + 1] == "\n":  # a continued (preprocessor) line
            line += 1
            i += 2
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += src.count("\n", i, j)
            i = j
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == "#" and at_line_start:
            m = re.match(r"#\s*([a-z]+)", src[i:])
            pp = "define" if m and m.group(1) == "define" else "other"
            pp_name_seen = False
            at_line_start = False
            i += m.end() if m else 1
            continue
        at_line_start = False
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            j += 1
            toks.append(Tok("str" if c == '"' else "chr", src[i:j], i, line, pp))
            i = j
            continue
        m = NUMBER.match(src, i) if (c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit())) else None
        if m:
            toks.append(Tok("num", m.group(0), i, line, pp))
            i = m.end()
            continue
        m = IDENT.match(src, i)
        if m:
            kind = "id"
            if pp == "define" and not pp_name_seen:  # the macro's own name, and its parameter list
                pp_name_seen = True
                kind = "ppname"
                j = m.end()
                if j < n and src[j] == "(":
                    k = src.find(")", j)
                    toks.append(Tok(kind, m.group(0), i, line, pp))
                    i = k + 1
                    continue
            toks.append(Tok(kind, m.group(0), i, line, pp))
            i = m.end()
            continue
        for p in PUNCT:
            if src.startswith(p, i):
                toks.append(Tok("punct", p, i, line, pp))
                i += len(p)
                break
        else:
            toks.append(Tok("other", c, i, line, pp))
            i += 1
    return toks


class Mutant:
    """One mutation: replace src[start:end] with repl. excluded names the rule that leaves it out."""

    __slots__ = ("op", "line", "start", "end", "orig", "repl", "excluded")

    def __init__(self, op, line, start, end, orig, repl, excluded=None):
        self.op, self.line, self.start, self.end, self.orig, self.repl, self.excluded = (
            op, line, start, end, orig, repl, excluded)

    def apply(self, src):
        return src[: self.start] + self.repl + src[self.end :]

    def key(self):
        return f"{self.line}:{self.start}:{self.op}"

    def describe(self):
        o = " ".join(self.orig.split())
        r = " ".join(self.repl.split())
        if len(o) > 60:
            o = o[:57] + "..."
        if len(r) > 60:
            r = r[:57] + "..."
        return f"{self.op}: `{o}` -> `{r}`"


ROR = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
EQ = {"==": "!=", "!=": "=="}
LOR = {"&&": "||", "||": "&&"}
AOR = {"+": "-", "-": "+", "*": "/", "/": "*", "%": "*", "+=": "-=", "-=": "+=", "*=": "/=", "/=": "*="}
BIT = {"&": "|", "|": "&", "<<": ">>", ">>": "<<"}


KEYWORDS = {"return", "case", "sizeof", "else", "do", "goto", "if", "while", "for", "switch"}


def _is_operand_end(t):
    """Whether t ends an operand, so that the operator after it is a binary one."""
    if t is None or t.text in KEYWORDS:
        return False
    return t.kind in ("id", "num", "str", "chr") or t.text in (")", "]")


def _looks_like_declaration_star(prev, prev2):
    """`T *x`: the * after a type name is not a multiplication."""
    if prev.kind != "id":
        return False
    if prev.text in TYPE_WORDS or prev.text.endswith("_t"):
        return True
    return prev2 is not None and prev2.text in ("struct", "enum", "union", "const")


def _matching(toks, i):
    """The index of the bracket closing toks[i]."""
    depth, o, c = 0, toks[i].text, {"(": ")", "[": "]", "{": "}"}[toks[i].text]
    for j in range(i, len(toks)):
        if toks[j].text == o:
            depth += 1
        elif toks[j].text == c:
            depth -= 1
            if depth == 0:
                return j
    return None


def _const_repl(text):
    hexa = text.lower().startswith("0x")
    m = re.match(r"^(.*?)([uUlL]*)$" if hexa else r"^(.*?)([uUlLfF]*)$", text)
    body, suffix = m.group(1), m.group(2)
    if hexa:
        v = int(body, 16)
        return hex(v + 1) + suffix
    if re.fullmatch(r"\d+", body):
        v = int(body)
        if body.startswith("0") and len(body) > 1:  # octal: leave it
            return None
        return ("1" if v == 0 else "0" if v == 1 else str(v + 1)) + suffix
    v = float(body)
    if v == 0:
        return "1.0" + suffix
    return repr(v / 2) + suffix


def _alloc_check(src, toks, cond_lo, cond_hi, if_tok):
    """True when `if (cond)` tests the result of an allocation made in the statement before it."""
    cond = [t for t in toks[cond_lo:cond_hi]]
    names = [t.text for t in cond if t.kind == "id" and t.text != "NULL"]
    if not names or len(cond) > 6:
        return False
    if not (cond[0].text == "!" or any(t.text in ("==", "!=") for t in cond)):
        return False
    # the statement before the if: from the previous ';' or '{' back to the one before it
    before = src[max(0, if_tok.start - 400) : if_tok.start]
    stmt = re.split(r"[;{}]", before.rstrip().rstrip(";"))[-1] if before.rstrip().endswith(";") else ""
    if not ALLOCATORS.search(stmt):
        return False
    return names[-1] in stmt or names[0] in stmt


def mutants(src):
    """Every mutant of src, in source order (excluded ones included, with their rule)."""
    toks = tokenize(src)
    out = []
    for i, t in enumerate(toks):
        prev = toks[i - 1] if i else None
        prev2 = toks[i - 2] if i > 1 else None
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if t.pp == "other":
            continue
        if t.kind == "num":
            if t.pp is None and prev is not None and prev.text == "[":
                close = _matching(toks, i - 1)
                j = i - 2
                decl = j >= 1 and toks[j].kind == "id" and (
                    toks[j - 1].kind == "id" or toks[j - 1].text in ("*", ",") or toks[j].text in TYPE_WORDS)
                if decl and close is not None:
                    r = _const_repl(t.text)
                    if r:
                        out.append(Mutant("const", t.line, t.start, t.end, t.text, r, "array size"))
                    continue
            r = _const_repl(t.text)
            if r is not None:
                out.append(Mutant("const", t.line, t.start, t.end, t.text, r))
            continue
        if t.pp == "define":  # only a #define's constants
            continue
        if t.kind != "punct":
            if t.kind == "id" and t.text == "if" and nxt is not None and nxt.text == "(":
                close = _matching(toks, i + 1)
                if close is None:
                    continue
                lo, hi = toks[i + 1].end, toks[close].start
                cond = src[lo:hi]
                alloc = _alloc_check(src, toks, i + 2, close, t)
                out.append(Mutant("if0", t.line, lo, hi, cond, "0", "allocation failure" if alloc else None))
                out.append(Mutant("if1", t.line, lo, hi, cond, "1"))
            continue
        op = t.text
        if op in ROR and _is_operand_end(prev):
            out.append(Mutant("ror", t.line, t.start, t.end, op, ROR[op]))
        elif op in EQ:
            out.append(Mutant("eq", t.line, t.start, t.end, op, EQ[op]))
        elif op in LOR:
            out.append(Mutant("lor", t.line, t.start, t.end, op, LOR[op]))
        elif op in AOR and len(op) == 2:
            out.append(Mutant("aor", t.line, t.start, t.end, op, AOR[op]))
        elif op in AOR and _is_operand_end(prev):
            if op == "*" and _looks_like_declaration_star(prev, prev2):
                continue
            if op in "+-" and nxt is not None and nxt.text == op:
                continue
            out.append(Mutant("aor", t.line, t.start, t.end, op, AOR[op]))
        elif op in BIT and _is_operand_end(prev):
            out.append(Mutant("bit", t.line, t.start, t.end, op, BIT[op]))
        elif op == "!" and nxt is not None and (prev is None or not _is_operand_end(prev)):
            out.append(Mutant("not", t.line, t.start, t.end, op, ""))
    return out
