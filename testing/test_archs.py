#!/usr/bin/env python3
"""test_archs.py -- README's table of the architectures that play is `bankml help archs --markdown`, printed from
src/graph/arch.c's table (never written by hand), and `bankml help archs` lists the same rows.
Standard library only; prints `N passed, N failed, N skipped`."""
import os, re, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("test_archs")
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")


def run(args):
    p = subprocess.run([BIN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=10)
    return p.returncode, p.stdout, p.stderr


rc, md, err = run(["help", "archs", "--markdown"])
S.equal("help archs --markdown: exit 0, nothing on stderr", (rc, err), (0, ""))
rows = [l for l in md.splitlines() if l.startswith("| `")]
names = [re.match(r"\| `([^`]+)`", l).group(1) for l in rows[1:]] if rows else []
S.equal("help archs --markdown: one row per architecture, in table order", names, ["llama", "qwen2", "qwen3", "gemma3", "granite", "smollm3", "phi3"])
S.check("help archs --markdown: qwen2's optional biases and llama's rope_freqs are listed",
        "`blk.N.attn_q.bias` (optional)" in md and "`rope_freqs.weight` (optional)" in md, md)
readme = open(os.path.join(oracle.ROOT, "README.md"), encoding="utf-8").read()
S.check("README.md holds `bankml help archs --markdown` verbatim", md and md in readme,
        "regenerate it: ./bankml help archs --markdown")
rc, out, err = run(["help", "archs"])
S.check("help archs: exit 0, a line per architecture",
        rc == 0 and all(re.search(rf"^  {n} ", out, re.M) for n in names) and len(out.splitlines()) == 1 + len(names),
        out)
rc, out, err = run(["help", "archs", "--json"])
S.equal("help archs --json: exit 1, why and help's usage line", (rc, out, err),
        (1, "", "bankml help: unknown option --json\nusage: bankml help [COMMAND|archs] [--markdown]\n"))
rc, out, _ = run(["help"])
S.check("help lists `help archs`", "bankml help archs [--markdown]" in out, out[-400:])
S.finish()
