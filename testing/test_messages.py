"""test_messages.py -- messages a person reads: every file they name exists, every command's help describes every
option, and errors say what to do next.

  - Every path-like reference (`docs/...`, `src/...`, `a/b.py`, a bare `*.md`) in a string literal of src/ (comments
    and #include lines left out, adjacent literals joined as the compiler joins them) names a file of this
    repository (from its root, or from src/ as messages cite `graph/arch.c`). A self-test runs the scanner on the
    two messages that once cited files that do not exist here (`docs/OLLAMA.md`, `sAGI/models.py`).
  - `bankml help` lists every command; for each, `bankml COMMAND --help` equals `bankml help COMMAND` (exit 0,
    usage line first) and every option has its meaning line with its default (`(default: …)`), or says it is
    required, or is an action that exits (--help, --version, the listings).
  - An unknown command names the nearest one (`bankml servr` → `did you mean bankml serve?`; `bankml help
    genrate` → `bankml help generate`); one near none gets the plain line.
  - An unpinned file's refusal names the command that pins it, and that command, run as printed, works (the same
    verify then plays).
  - `bankml create` reads its options through the one parser: `--help`, and `-f` missing.

The bankml binary is BANKML_BIN or ./bankml; models/demo.gguf is made by `make demo-model` when missing."""
import glob, json, os, re, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("test_messages")
ROOT = oracle.ROOT
BIN = os.environ.get("BANKML_BIN") or os.path.join(ROOT, "bankml")
DEMO = os.path.join(ROOT, "models", "demo.gguf")

if not os.path.exists(BIN):
    oracle.skip_all(f"{BIN} is not built", S)


def run(*args):
    p = subprocess.run([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


# ---------------------------------------------------------------- file references in src/ string literals

def literals(text):
    """The string literals of C source, comments and #include lines skipped, adjacent literals joined."""
    text = re.sub(r"(?m)^[ \t]*#[ \t]*include.*$", "", text)
    out, i, n, last_end = [], 0, len(text), None
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        c = text[i]
        if c == "'":
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            last_end = None
            continue
        if c == '"':
            j, buf = i + 1, []
            while j < n and text[j] != '"':
                if text[j] == "\\":
                    buf.append(text[j:j + 2])
                    j += 2
                else:
                    buf.append(text[j])
                    j += 1
            s = "".join(buf)
            if last_end is not None and text[last_end:i].strip() == "":
                out[-1] += s          # "a" "b" is one literal
            else:
                out.append(s)
            i = j + 1
            last_end = i
            continue
        if not c.isspace():
            last_end = None
        i += 1
    return out


PATH = re.compile(r"(?<![\w./-])((?:[\w.-]+/)+[\w.-]*\.(?:md|py|c|h|json|sh|txt|js|css|html|mk))(?![\w/])")
BARE_MD = re.compile(r"(?<![\w./-])([\w-]+\.md)\b")


def references(text):
    """(path, literal) for every file a literal of text names."""
    refs = []
    for lit in literals(text):
        for m in PATH.finditer(lit):
            refs.append((m.group(1), lit))
        for m in BARE_MD.finditer(lit):
            refs.append((m.group(1), lit))
    return refs


def exists(path):
    if "/" not in path:   # a bare doc name: README.md, or one of docs/ or docs/modules/
        return any(os.path.exists(os.path.join(ROOT, d, path)) for d in ("", "docs", os.path.join("docs", "modules")))
    return os.path.exists(os.path.join(ROOT, path)) or os.path.exists(os.path.join(ROOT, "src", path))


def t_references():
    old = ('bk_err(err, errlen, "tools: tool calling needs the template\'s tool rendering and a grammar (O6 in "\n'
           '                     "docs/OLLAMA.md); not reproduced yet");\n'
           'static const char M[] = "models are imported sha256-pinned (sAGI/models.py import), then served";\n'
           '/* a comment naming docs/NOPE.md is no message */\n#include "api/nope.h"\n')
    bad = [p for p, _ in references(old) if not exists(p)]
    S.equal("self-test: the scanner finds the two former dead references (and skips comments, #include)", bad,
            ["docs/OLLAMA.md", "sAGI/models.py"])
    S.equal("self-test: a reference that exists passes", [exists(p) for p, _ in references(
        'x("see docs/modules/ui.md and " "src/graph/arch.c, graph/arch.c, README.md")')], [True, True, True, True])
    files = sorted(glob.glob(os.path.join(ROOT, "src", "**", "*.[ch]"), recursive=True))
    n, dead = 0, []
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            for p, lit in references(fh.read()):
                n += 1
                if not exists(p):
                    dead.append(f"{os.path.relpath(f, ROOT)}: {p} in {lit[:80]!r}")
    S.check(f"every file named in src/'s string literals exists ({n} references in {len(files)} files)",
            not dead and n > 0, "; ".join(dead))


# ---------------------------------------------------------------- help

ACTIONS = ("-h, --help", "--version", "--list-devices", "--completion-bash", "--cache-list")


def t_help():
    rc, out, err = run("help")
    S.equal("help: exit 0, nothing on stderr", (rc, err), (0, ""))
    cmds = re.findall(r"(?m)^  bankml ([a-z0-9-]+)", out)
    cmds = [c for c in dict.fromkeys(cmds)]
    S.equal("help lists every command", cmds, ["guard", "sha256", "pin", "verify", "tokenize", "detokenize",
                                               "chat-template", "bench", "usage", "generate", "serve", "create",
                                               "version", "help"])
    for cmd in cmds:
        rc, o, e = run(cmd, "--help")
        rc2, o2, e2 = run("help", cmd)
        S.check(f"{cmd} --help == help {cmd}: exit 0, usage first", rc == 0 and e == "" and (rc2, o2, e2) == (0, o, "")
                and o.startswith("usage: bankml " + cmd), f"{rc} {e!r} {o[:80]!r}")
        lines = o.split("\n")
        missing = []
        for i, line in enumerate(lines):
            if not re.match(r"^  -", line):
                continue
            meaning = lines[i + 1] if i + 1 < len(lines) else ""
            if not meaning.startswith("        ") or len(meaning.strip()) < 4:
                missing.append(f"{line.strip()}: no meaning line")
            elif not ("(default: " in meaning or "(required)" in meaning or line.strip().startswith(ACTIONS)
                      or any(a in line for a in ACTIONS[1:])):
                missing.append(f"{line.strip()}: no default")
        S.check(f"{cmd} --help: every option with its meaning and default", not missing, "; ".join(missing[:5]))
    rc, o, _ = run("help", "create")
    S.check("help create: -f and --registry (default: .) described",
            "\n  -f Modelfile\n        the Ollama Modelfile to read (required)" in o
            and "\n  --registry DIR\n" in o and "(default: .)" in o, o)
    rc, o, e = run("create", "x")
    S.equal("create without -f: what is missing, then its usage", (rc, o, e),
            (1, "", "bankml create: -f Modelfile is required\nusage: bankml create NAME -f Modelfile [--registry DIR]\n"))
    rc, o, e = run("create", "x", "-f", "m", "--frob")
    S.equal("create with an unknown option: the one parser's message", (rc, e),
            (1, "bankml create: unknown option --frob\nusage: bankml create NAME -f Modelfile [--registry DIR]\n"))
    S.equal("version --help", run("version", "--help")[:2], (0, "usage: bankml version\nprints bankml's version "
                                                               "(also --version, -V)\n\noptions:\n  -h, --help\n"
                                                               "        print this help and exit\n"))


def t_usage():
    """bankml usage [PID ...]: the machine and the processes as JSON (spec §1)."""
    rc, o, e = run("usage")
    j = json.loads(o) if rc == 0 else {}
    keys = ["source", "cores", "mem_total_bytes", "mem_available_bytes", "swap_total_bytes", "swap_free_bytes",
            "rss_bytes", "cpu_percent", "interval_ms", "processes", "package_watts", "gpus", "gpu_limiter"]
    S.equal("usage: exit 0, its keys in order", [rc, e, list(j)], [0, "", keys])
    S.check("usage: bankml itself, sampled over 0.5 s", [p["name"] for p in j.get("processes", [])] == ["bankml"]
            and 500 <= j.get("interval_ms", 0) < 2000 and j["rss_bytes"] == j["processes"][0]["rss_bytes"] > 0, o)
    rc, o, e = run("usage", "1", str(os.getpid()))
    j = json.loads(o) if rc == 0 else {}
    S.equal("usage PID PID: each named pid N", [p["name"] for p in j.get("processes", [])],
            ["pid 1", f"pid {os.getpid()}"])
    S.equal("usage with a word: not a process id", run("usage", "12x"), (1, "", "bankml usage: not a process id: 12x\n"))


def t_nearest():
    for argv, first in ((["servr"], "bankml: unknown command servr (did you mean bankml serve?)"),
                        (["tokenise", "m.gguf"], "bankml: unknown command tokenise (did you mean bankml tokenize?)"),
                        (["sha"], "bankml: unknown command sha (did you mean bankml sha256?)"),
                        (["verfy"], "bankml: unknown command verfy (did you mean bankml verify?)"),
                        (["help", "genrate"], "bankml help: unknown command genrate (did you mean bankml help "
                                              "generate?)"),
                        (["frobnicate"], "bankml: unknown command frobnicate"),
                        (["help", "nope"], "bankml help: unknown command nope"),
                        (["x"], "bankml: unknown command x")):
        rc, o, e = run(*argv)
        S.equal(f"bankml {' '.join(argv)}: exit 1, {first.split(': ', 1)[1]}", (rc, o, e.split("\n")[0]),
                (1, "", first))


def t_unpinned():
    if not os.path.exists(DEMO):
        subprocess.run(["make", "demo-model"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not os.path.exists(DEMO):
        S.fail("unpinned refusal", "models/demo.gguf is missing and `make demo-model` did not make it")
        return
    tmp = tempfile.mkdtemp(prefix="bankml-msg-")
    try:
        g = os.path.join(tmp, "mine.gguf")
        fork = os.path.join(tmp, "mine.FORK.json")
        shutil.copyfile(DEMO, g)
        with open(fork, "w") as f:
            json.dump({"files": []}, f)
        rc, o, e = run("verify", g, "--fork", fork)
        hint = f"bankml pin {g} --fork {fork} --write"
        S.equal("unpinned: the refusal names the command that pins it", (rc, o, e),
                (2, "refuse: mine.gguf has no sha256 record in FORK.json: unpinned, refused (if it is the file you "
                    f"mean to run, pin it: {hint})\n", ""))
        m = re.search(r"pin it: (bankml pin \S+ --fork \S+ --write)\)", o)
        argv = m.group(1).split()[1:] if m else []
        rc, o, e = run(*argv)
        S.check("the printed command, run as printed, pins it", m and rc == 0 and o.startswith("pinned "),
                f"{rc} {o!r} {e!r}")
        rc, o, e = run("verify", g, "--fork", fork)
        S.check("then verify plays", rc == 0 and o.startswith("play pinned "), f"{rc} {o!r} {e!r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


S.run("references", t_references)
S.run("help", t_help)
S.run("usage", t_usage)
S.run("nearest command", t_nearest)
S.run("unpinned", t_unpinned)
S.finish()
