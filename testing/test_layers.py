#!/usr/bin/env python3
"""The structure checks of issue #14, over the source tree and build/obj.

  layers    no call from a folder to a folder above it, in the order
            base -> file -> ops -> graph -> text -> sampling -> engine -> api -> cli
            (each build/obj/<folder>/<name>.o is a module; each undefined symbol
            is matched, with `nm`, to the module that defines it)
  cycles    no cycle between modules (within a folder too)
  lines     no file under src/ over 2,000 lines, generated files aside (a file
            whose first lines say "generated")
  functions no C function in src/ over 200 lines, signature to closing brace
  helpers   no two `static` functions with the same name in two files under
            src/ (each small helper defined once)
  allowlist every allowlist line is well formed and still needed

Known violations go in testing/layers-allow.txt, one a line:

    <check> <thing> <reason>

where <thing> is, per check: layers `from->to` (modules, e.g. file/verify->engine/engine),
cycles the modules of the cycle sorted and joined by `,`, lines the path
(src/api/native.c), functions `path:name`, helpers the function's name.
BANKML_VERBOSE=1 lists the allowed violations under each check.
A line starting with '#' is a comment. An entry no violation needs any more is a failure, so
the file shrinks as the code is fixed; it is empty at the end of the refactor.
BANKML_LAYERS_ALLOW names another allowlist; BANKML_LAYERS_ALLOW=none uses
none (the tree as it is).

Builds nothing but `make -s bankml` when the objects are not up to date.
Prints one line per check and, last, "N passed, N failed, N skipped".
"""
import glob, os, re, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ORDER = ["base", "file", "ops", "graph", "text", "sampling", "engine", "api", "cli"]
MAX_FILE_LINES = 2000
MAX_FUNCTION_LINES = 200
CHECKS = ["layers", "cycles", "lines", "functions", "helpers"]

counts = {"passed": 0, "failed": 0, "skipped": 0}


def check(name, cond, detail="", info=""):
    """One line: ok (with info) or FAIL (with detail)."""
    if cond:
        counts["passed"] += 1
        print(f"ok   {name}" + (f" ({info})" if info else ""))
    else:
        counts["failed"] += 1
        print(f"FAIL {name}: {detail}")


def skip(name, why):
    counts["skipped"] += 1
    print(f"skip {name}: {why}")


def note(lines):
    for s in lines:
        print(f"     {s}")


# ---- the allowlist ----

def read_allowlist():
    """{(check, thing): reason} and the malformed lines."""
    path = os.environ.get("BANKML_LAYERS_ALLOW", os.path.join(HERE, "layers-allow.txt"))
    allowed, bad = {}, []
    if path in ("", "none") or not os.path.exists(path):
        return allowed, bad, None if path in ("", "none") else path
    with open(path, encoding="utf-8") as f:
        for i, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3 or parts[0] not in CHECKS:
                bad.append(f"{os.path.basename(path)}:{i}: want '<check> <thing> <reason>', <check> one of "
                           f"{', '.join(CHECKS)}: {raw.strip()!r}")
                continue
            allowed[(parts[0], parts[1])] = parts[2]
    return allowed, bad, path


def report(name, what, found, allowed, used):
    """found: {thing: [detail lines]}. One check line; the violations not
    allowed fail it, the allowed ones are listed after it."""
    new = {t: d for t, d in found.items() if (name, t) not in allowed}
    old = {t: d for t, d in found.items() if (name, t) in allowed}
    used.update((name, t) for t in old)
    if new:
        check(f"{name}: {what}", False, f"{len(new)} violation(s)" +
              (f", {len(old)} more allowed" if old else ""))
        for t in sorted(new):
            note([f"{t}"] + [f"  {d}" for d in new[t]])
    else:
        check(f"{name}: {what}", True, info=f"{len(old)} allowed" if old else "")
    if os.environ.get("BANKML_VERBOSE") == "1":
        for t in sorted(old):
            note([f"allowed: {t} ({allowed[(name, t)]})"])


# ---- modules and symbols ----

def build():
    """make -s bankml when the objects are not up to date. None, or why not."""
    q = subprocess.run(["make", "-s", "-q", "bankml"], cwd=ROOT, capture_output=True)
    if q.returncode == 0:
        return None
    p = subprocess.run(["make", "-s", "bankml"], cwd=ROOT, capture_output=True, text=True)
    return None if p.returncode == 0 else (p.stdout + p.stderr).strip()[-2000:]


def modules():
    """{module: path of its .o}, one per src/<folder>/<name>.c."""
    mods = {}
    for c in sorted(glob.glob(os.path.join(ROOT, "src", "*", "*.c"))):
        folder, name = c.split(os.sep)[-2], os.path.basename(c)[:-2]
        mods[f"{folder}/{name}"] = os.path.join(ROOT, "build", "obj", folder, name + ".o")
    return mods


def symbols(obj):
    """(defined globals, undefined) of an object file, through nm -P."""
    out = subprocess.run(["nm", "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undef = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind in ("U", "w", "v"):        # undefined (w, v: weak, undefined)
            undef.add(name)
        elif kind.isupper():               # a global definition
            defined.add(name)
    return defined, undef


def graph(mods):
    """{(from, to): sorted symbols} over the modules."""
    defs, undefs, owner = {}, {}, {}
    for m, o in mods.items():
        defs[m], undefs[m] = symbols(o)
    for m in sorted(mods):
        for s in defs[m]:
            owner.setdefault(s, m)
    edges = {}
    for m in mods:
        for s in undefs[m]:
            t = owner.get(s)
            if t and t != m:
                edges.setdefault((m, t), set()).add(s)
    return {k: sorted(v) for k, v in edges.items()}


def upcalls(mods, edges):
    """{"from->to": [detail]} of each edge into a folder above the caller's,
    and {"src/<folder>": [...]} for a folder not in ORDER."""
    rank = {f: i for i, f in enumerate(ORDER)}
    up = {}
    for (f, t), syms in sorted(edges.items()):
        ff, tf = f.split("/")[0], t.split("/")[0]
        if ff in rank and tf in rank and rank[tf] > rank[ff]:
            up[f"{f}->{t}"] = [f"{ff} calls {tf}: {', '.join(syms)}"]
    for u in sorted({m.split("/")[0] for m in mods} - set(ORDER)):
        up[f"src/{u}"] = [f"folder {u} is not in the order {' -> '.join(ORDER)}"]
    return up


def cycles(mods, edges):
    """The strongly connected components of more than one module (Tarjan)."""
    succ = {m: sorted({t for (f, t) in edges if f == m}) for m in mods}
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
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
    for m in sorted(mods):
        if m not in index:
            visit(m)
    return sorted(out)


# ---- the sources ----

def src_files():
    out = []
    for d, _, files in os.walk(os.path.join(ROOT, "src")):
        for f in files:
            if f.endswith((".c", ".h")):
                out.append(os.path.join(d, f))
    return sorted(out)


def rel(p):
    return os.path.relpath(p, ROOT)


def generated(lines):
    """A file that says, in its first lines, that it is generated."""
    return any(re.search(r"\bgenerated\b", s, re.I) for s in lines[:8])


SIG_START = re.compile(r"^[A-Za-z_]")
NAME = re.compile(r"([A-Za-z_]\w*)\s*\($")


def code(line):
    """A line without a comment at its end, nor trailing space."""
    return re.sub(r"\s*(/\*.*\*/|//.*)$", "", line).rstrip()


def functions(lines):
    """(name, first line, last line, is static) of each function definition:
    a signature beginning at column 0 (not '#', '}', a comment or space),
    running to a line ending in ')' or '{', with '(' in it and no '=' ahead
    of its first '('; the body opens with '{' at the end of that line or
    alone at column 0 on the next, and closes with '}' at column 0. A whole
    function on one line ("f(...) { ... }") counts as one line."""
    out, i, n = [], 0, len(lines)
    while i < n:
        line = lines[i]
        if not SIG_START.match(line):
            i += 1
            continue
        j, sig = i, code(line)
        while not sig.endswith((")", "{", ";")) and j + 1 < n and j - i < 12 and lines[j + 1][:1] in (" ", "\t"):
            j += 1
            sig += " " + code(lines[j]).strip()
        end = code(lines[j])
        head = sig.split("(", 1)[0]
        if "(" in sig and "=" not in head and end.endswith("}") and ") {" in end:   # on one line
            m = NAME.search(head + "(")
            if m:
                out.append((m.group(1), j + 1, j + 1, re.search(r"\b(static|INLINE)\b", head) is not None))
            i = j + 1
            continue
        if "(" not in sig or "=" in head or not end.endswith((")", "{")):
            i = j + 1
            continue
        if end.endswith("{"):
            body = j
        elif j + 1 < n and lines[j + 1].rstrip() == "{":
            body = j + 1
        else:
            i = j + 1
            continue
        k = body + 1
        while k < n and not lines[k].startswith("}"):
            k += 1
        if k == n:
            break
        m = NAME.search(head + "(")
        name = m.group(1) if m else "?"
        if name in ("if", "for", "while", "switch", "return", "sizeof"):
            i = j + 1
            continue
        # forward.c's INLINE is "static inline"
        out.append((name, i + 1, k + 1, re.search(r"\b(static|INLINE)\b", head) is not None))
        i = k + 1
    return out


SAMPLE_C = """\
/* a comment */
typedef struct {
    int a;
} pair;

static const int table[] = {
    1, 2,
};

int public_one(int a,
               int b)
{
    if (a) {
        return b;
    }
    return a;
}

static int helper(void) {    /* opens on its line */
    return 1;
}

static int tiny(int x) { return x; }

INLINE void forced(void)
{
}
"""


def self_test():
    """The checks' own machinery on inputs whose answers are known."""
    fs = functions(SAMPLE_C.split("\n"))
    check("self-test: the function scanner", fs == [("public_one", 10, 17, False), ("helper", 19, 21, True),
                                                     ("tiny", 23, 23, True), ("forced", 25, 27, True)], repr(fs))
    mods = {"base/a": "", "engine/e": "", "engine/f": "", "api/x": "", "api/y": "", "misc/z": ""}
    edges = {("api/x", "api/y"): ["y1"], ("api/y", "api/x"): ["x1"], ("engine/e", "engine/f"): ["f1"],
             ("base/a", "engine/e"): ["e1", "e2"], ("api/x", "base/a"): ["a1"]}
    cy = cycles(mods, edges)
    check("self-test: cycles", cy == [["api/x", "api/y"]], repr(cy))
    up = upcalls(mods, edges)
    check("self-test: calls upward", up == {"base/a->engine/e": ["base calls engine: e1, e2"],
                                            "src/misc": ["folder misc is not in the order " + " -> ".join(ORDER)]},
          repr(up))
    check("self-test: generated files", generated(["/*", " * GENERATED by x.py; do not edit."])
          and not generated(["/* the generator's input */"] + [""] * 8 + ["generated"]))


def main():
    self_test()
    allowed, bad, path = read_allowlist()
    used = set()
    if path is None:
        print("     (no allowlist: BANKML_LAYERS_ALLOW=none)")

    # the module graph
    why = build()
    mods = modules()
    missing = [m for m, o in mods.items() if not os.path.exists(o)]
    if why or missing:
        detail = why or f"no object for {', '.join(missing)}"
        check("layers: no call from a folder to one above it", False, detail)
        check("cycles: no cycle between modules", False, detail)
    else:
        edges = graph(mods)
        up = upcalls(mods, edges)
        report("layers", f"no call from a folder to one above it ({len(mods)} modules, {len(edges)} edges)",
               up, allowed, used)
        found = {}
        for comp in cycles(mods, edges):
            inner = [f"{f} -> {t}: {', '.join(s[:6])}{' ...' if len(s) > 6 else ''}"
                     for (f, t), s in sorted(edges.items()) if f in comp and t in comp]
            found[",".join(comp)] = inner
        report("cycles", "no cycle between modules", found, allowed, used)

    # the sources
    big, long_fns, statics = {}, {}, {}
    for p in src_files():
        with open(p, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if len(lines) > MAX_FILE_LINES and not generated(lines):
            big[rel(p)] = [f"{len(lines)} lines"]
        for name, a, b, is_static in functions(lines):
            if b - a + 1 > MAX_FUNCTION_LINES:
                long_fns[f"{rel(p)}:{name}"] = [f"{b - a + 1} lines ({a}-{b})"]
            if is_static:
                statics.setdefault(name, []).append(f"{rel(p)}:{a}")
    report("lines", f"no file under src/ over {MAX_FILE_LINES:,} lines (generated ones aside)", big, allowed, used)
    report("functions", f"no function in src/ over {MAX_FUNCTION_LINES} lines", long_fns, allowed, used)
    dups = {name: where for name, where in statics.items() if len({w.rsplit(":", 1)[0] for w in where}) > 1}
    report("helpers", "no static function defined in two files", {k: [", ".join(v)] for k, v in dups.items()},
           allowed, used)

    # the allowlist itself
    stale = sorted(k for k in allowed if k not in used)
    if bad or stale:
        check("allowlist: well formed, every entry still needed", False,
              f"{len(bad)} malformed, {len(stale)} no longer needed (remove them)")
        note(bad + [f"{c} {t}" for c, t in stale])
    else:
        check("allowlist: well formed, every entry still needed", True,
              info=f"{len(allowed)} entries" if path else "none used")

    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
