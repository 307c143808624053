"""kernel_kit.py -- what the in-process kernel oracles share (oracle_kernels_quant, _kquant, _iq, _kvq): build
testing/<name>.c against the oracle kit's ggml with our kernels compiled by the project's flags, run it under the
kit's sid-run (whose newer glibc the kit's libggml-base.so needs) with the haswell CPU backend present, and fold
its own "N passed, N failed, N skipped" line into the suite's counts. Standard library only."""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import oracle  # noqa: E402  testing/oracle.py: kit discovery, skips, counts

CFLAGS = ["-std=gnu11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread"]


def build(kit, name, sources, out_dir):
    """Compiles sources with the project's flags, then testing/<name>.c with the kit's headers, linked against
    the kit's libggml-base.so (resolved at run time by sid-run, hence --allow-shlib-undefined). Returns
    (path, None) or (None, compiler output)."""
    objs = []
    for src in sources:
        obj = os.path.join(out_dir, os.path.basename(src)[:-2] + ".o")
        cmd = ["gcc"] + CFLAGS + ["-Iinclude", "-Isrc", "-c", src, "-o", obj]
        p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            return None, f"{' '.join(cmd)}\n{p.stdout}"
        objs.append(obj)
    exe = os.path.join(out_dir, name)
    cmd = (["gcc"] + CFLAGS + ["-I" + kit.include, "-Isrc", "-o", exe, f"testing/{name}.c"] + objs +
           ["-L" + kit.lib, "-lggml-base", "-ldl", "-lm", "-Wl,--allow-shlib-undefined"])
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        return None, f"{' '.join(cmd)}\n{p.stdout}"
    return exe, None


def run(suite, name, sources, bench_args=None):
    """The whole suite: builds testing/<name>.c and runs its `check` (or `bench` with bench_args, not None),
    each case of the C program one test. Returns the exit status."""
    s = oracle.Suite(suite)
    kit = oracle.kit_or_skip(s)
    sid = kit.tool("sid-run")
    backend = os.path.join(kit.lib, "ggml", "backends0", "libggml-cpu-haswell.so")
    if not os.path.exists(sid) or not os.path.exists(backend):
        oracle.skip_all(f"the kit has no sid-run or haswell CPU backend ({backend})", s)
    with tempfile.TemporaryDirectory(prefix="kq-") as tmp:
        exe, why = build(kit, name, sources, tmp)
        if not exe:
            s.fail(f"build {name}", why.strip().splitlines()[-1] if why.strip() else "gcc failed")
            print(why)
            s.finish()
        s.ok(f"build {name}")
        if bench_args is not None:
            p = subprocess.run([sid, exe, "bench"] + bench_args, cwd=ROOT)
            s.check("bench ran", p.returncode == 0, f"exit {p.returncode}")
            s.finish()
        p = subprocess.run([sid, exe, "check"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=1200)
        out = p.stdout
        for line in out.splitlines():
            if line.startswith("FAIL") or line.startswith("  ") or line.startswith("SKIP"):
                print(line)
        m = re.search(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", out, re.M)
        if not m:
            s.fail(f"{name} check", f"no count line (exit {p.returncode}): {out.strip()[-300:]}")
            s.finish()
        n_pass, n_fail, n_skip = (int(x) for x in m.groups())
        s.passed += n_pass
        s.failed += n_fail
        s.skipped += n_skip
        if p.returncode not in (0, 1):
            s.fail(f"{name} exit status", f"exit {p.returncode}")
        elif (p.returncode == 1) != (n_fail > 0):
            s.fail(f"{name} exit status", f"exit {p.returncode} with {n_fail} failures")
        print(f"{name}: {n_pass} passed, {n_fail} failed, {n_skip} skipped (bit-exact vs b11669 haswell)")
    s.finish()
