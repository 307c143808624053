#!/usr/bin/env python3
"""oracle_kernels_kvq.py -- builds testing/kit_kernels_kvq.c against the oracle kit's ggml (llama.cpp b11669:
libggml-base.so and the CPU backend libggml-cpu-haswell.so) and runs it under the kit's sid-run: the KV cache's
row writers and readers of src/ops/kvq.c (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1) against the CPU type
traits' from_float and ggml-base's to_float, the Hadamard rotation against a ggml_mul_mat graph hinted
GGML_HINT_SRC0_IS_HADAMARD, and src/ops/attn.c over typed K/V rows against ggml_flash_attn_ext graphs (1, 7 and
70 query rows, 256 to 768 cells, 1 and 2 threads), each compared bit for bit, with our AVX2 kernels and with our
portable C. Every case the C program runs is one test here.

Without the kit the suite is skipped with the reason (a failure under BANKML_REQUIRE_ORACLE=1).
Ends with the line "N passed, N failed, N skipped"; exit status 1 on any failure.
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

try:
    import oracle  # testing/oracle.py: kit discovery, skips, counts
except ImportError:  # pragma: no cover - oracle.py is part of the repository
    oracle = None

SOURCES = ["src/ops/kvq.c", "src/ops/attn.c", "src/ops/vec.c", "src/ops/q4_0.c", "src/ops/q8_0.c", "src/ops/f16.c", "src/base/par.c", "src/base/base.c"]
CFLAGS = ["-std=gnu11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread"]


def build(kit, out_dir):
    """Compiles our kernels with the project's flags, then the oracle program with the kit's headers,
    linked against the kit's libggml-base.so (which needs a newer glibc: resolved at run time by sid-run,
    hence --allow-shlib-undefined). Returns (path, None) or (None, compiler output)."""
    objs = []
    for src in SOURCES:
        obj = os.path.join(out_dir, os.path.basename(src)[:-2] + ".o")
        cmd = ["gcc"] + CFLAGS + ["-Iinclude", "-Isrc", "-c", src, "-o", obj]
        p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            return None, f"{' '.join(cmd)}\n{p.stdout}"
        objs.append(obj)
    exe = os.path.join(out_dir, "kit_kernels_kvq")
    cmd = (["gcc"] + CFLAGS + ["-I" + kit.include, "-Isrc", "-o", exe, "testing/kit_kernels_kvq.c"] + objs +
           ["-L" + kit.lib, "-lggml-base", "-ldl", "-lm", "-Wl,--allow-shlib-undefined"])
    p = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        return None, f"{' '.join(cmd)}\n{p.stdout}"
    return exe, None


def main():
    if oracle is None:
        print("oracle_kernels_kvq: testing/oracle.py is missing")
        print("0 passed, 1 failed, 0 skipped")
        return 1
    s = oracle.Suite("oracle_kernels_kvq")
    kit = oracle.kit_or_skip(s)
    sid = kit.tool("sid-run")
    backend = os.path.join(kit.lib, "ggml", "backends0", "libggml-cpu-haswell.so")
    if not os.path.exists(sid) or not os.path.exists(backend):
        oracle.skip_all(f"the kit has no sid-run or haswell CPU backend ({backend})", s)
    with tempfile.TemporaryDirectory(prefix="kq-") as tmp:
        exe, why = build(kit, tmp)
        if not exe:
            s.fail("build kit_kernels_kvq", why.strip().splitlines()[-1] if why.strip() else "gcc failed")
            print(why)
            s.finish()
        s.ok("build kit_kernels_kvq")
        p = subprocess.run([sid, exe, "check"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=1200)
        out = p.stdout
        for line in out.splitlines():
            if line.startswith("FAIL") or line.startswith("  ") or line.startswith("SKIP"):
                print(line)
        m = re.search(r"^(\d+) passed, (\d+) failed, (\d+) skipped$", out, re.M)
        if not m:
            s.fail("kit_kernels_kvq check", f"no count line (exit {p.returncode}): {out.strip()[-300:]}")
            s.finish()
        n_pass, n_fail, n_skip = (int(x) for x in m.groups())
        s.passed += n_pass
        s.failed += n_fail
        s.skipped += n_skip
        if p.returncode not in (0, 1):
            s.fail("kit_kernels_kvq exit status", f"exit {p.returncode}")
        elif (p.returncode == 1) != (n_fail > 0):
            s.fail("kit_kernels_kvq exit status", f"exit {p.returncode} with {n_fail} failures")
        print(f"kit_kernels_kvq: {n_pass} passed, {n_fail} failed, {n_skip} skipped (bit-exact vs b11669 haswell)")
    s.finish()


if __name__ == "__main__":
    sys.exit(main())
