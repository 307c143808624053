#!/usr/bin/env python3
"""oracle_kernels_f16.py -- builds testing/kit_kernels_f16.c (bankml's src/ops/f16.c and src/base/par.c linked with
the oracle kit's libggml-base.so; the CPU backend libggml-cpu-haswell.so dlopen'ed by the program) and runs
it under the kit's sid-run, which compares every element's bits of conversions, vec_dot, get_rows and
mul_mat products between the shipped ggml (llama.cpp b11669) and bankml.

Each kit check is one count; this suite relays the program's own count line, plus one count for the build.
Without the kit the suite is skipped with the reason (a failure under BANKML_REQUIRE_ORACLE=1).
Options: --quick (a quarter of the shapes, a coarser fp32->fp16 sweep), --bench (the benchmark instead).
"""
import os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import oracle  # noqa: E402

BUILD = os.path.join(ROOT, "build")


def main():
    quick = "--quick" in sys.argv
    bench = "--bench" in sys.argv
    s = oracle.Suite("oracle_kernels_f16")
    kit = oracle.kit_or_skip(s)
    sid_run = kit.tool("sid-run")
    if not os.path.exists(os.path.join(kit.include, "ggml-cpu.h")) or not os.path.exists(sid_run):
        oracle.skip_all(f"the kit at {kit.bin} has no ggml headers or sid-run", s)
    os.makedirs(BUILD, exist_ok=True)
    exe = os.path.join(BUILD, "kit_kernels_f16")
    cmd = ["gcc", "-std=gnu11", "-D_GNU_SOURCE", "-O2", "-Wall", "-Wextra", "-Werror",
           "-I" + os.path.join(ROOT, "src"), "-I" + kit.include, "-o", exe,
           os.path.join(HERE, "kit_kernels_f16.c"), os.path.join(ROOT, "src", "ops", "f16.c"), os.path.join(ROOT, "src", "base", "base.c"),
           os.path.join(ROOT, "src", "base", "par.c"), "-L" + kit.lib, "-lggml-base",
           "-Wl,--allow-shlib-undefined", "-ldl", "-lm", "-pthread"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not s.check("build kit_kernels_f16", p.returncode == 0, p.stdout.strip()[-2000:]):
        s.finish()
    args = [sid_run, exe] + (["--bench"] if bench else []) + (["--quick"] if quick and not bench else [])
    env = dict(os.environ)
    env.setdefault("LLAMA_ORACLE_CPU", "haswell")
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out = p.stdout.strip().splitlines()
    for line in out[:-1] if not bench else out:
        print(line)
    if bench:
        s.check("benchmark ran", p.returncode == 0, f"exit {p.returncode}")
        s.finish()
    last = out[-1] if out else ""
    parts = last.split()
    if len(parts) == 6 and parts[1] == "passed," and parts[3] == "failed,":
        s.passed += int(parts[0])
        s.failed += int(parts[2])
        s.skipped += int(parts[4])
        if p.returncode not in (0, 1):
            s.fail("kit_kernels_f16 exit status", str(p.returncode))
    else:
        s.fail("kit_kernels_f16 ran", f"exit {p.returncode}: {last}")
    s.finish()


if __name__ == "__main__":
    main()
