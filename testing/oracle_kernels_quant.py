#!/usr/bin/env python3
"""oracle_kernels_quant.py -- builds testing/kit_kernels_quant.c against the oracle kit's ggml (llama.cpp
b11669: libggml-base.so and the CPU backend libggml-cpu-haswell.so) and runs it under the kit's sid-run:
Q8_0, Q1_0 and Q2_0 dequantization, the q8_0 activation quantizer, vec_dot and whole mul_mat products of
src/ops/q8_0.c, src/ops/q1_0.c and src/ops/q2_0.c, each compared bit for bit with ggml's, with our AVX2 kernels and
with our portable C. Every case the C program runs is one test here.

Without the kit the suite is skipped with the reason (a failure under BANKML_REQUIRE_ORACLE=1).
`--bench [ROWS K RUNS]` runs the benchmark mode instead and prints its table.
Ends with the line "N passed, N failed, N skipped"; exit status 1 on any failure.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_kit  # noqa: E402  testing/kernel_kit.py: the build, the run and the counts

SOURCES = ["src/ops/q8_0.c", "src/ops/q1_0.c", "src/ops/q2_0.c", "src/ops/f16.c", "src/base/par.c", "src/base/base.c"]

if __name__ == "__main__":
    bench = [a for a in sys.argv[1:] if a != "--bench"] if "--bench" in sys.argv else None
    sys.exit(kernel_kit.run("oracle_kernels_quant", "kit_kernels_quant", SOURCES, bench))
