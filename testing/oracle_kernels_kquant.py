#!/usr/bin/env python3
"""oracle_kernels_kquant.py -- builds testing/kit_kernels_kquant.c against the oracle kit's ggml (llama.cpp
b11669: libggml-base.so and the CPU backend libggml-cpu-haswell.so) and runs it under the kit's sid-run:
dequantization, the Q8_K and q8_1 activation quantizers and vec_dot of src/ops/q4_k.c (Q4_K, Q5_K, Q6_K) and
src/ops/q4_0.c (Q4_0, Q4_1, Q5_0, Q5_1), repack.c's repacked Q4_K/Q4_0 products and the tiled K-quant dots
(b11669's ggml_compute_forward_mul_mat_tiled, through whole ggml_mul_mat graphs), each compared bit for bit
with ggml's, with our AVX2 kernels and with our portable C. Every case the C program runs is one test here.

Without the kit the suite is skipped with the reason (a failure under BANKML_REQUIRE_ORACLE=1).
Ends with the line "N passed, N failed, N skipped"; exit status 1 on any failure.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_kit  # noqa: E402  testing/kernel_kit.py: the build, the run and the counts

SOURCES = ["src/ops/q2_k.c", "src/ops/q4_k.c", "src/ops/q4_0.c", "src/ops/iq4.c", "src/ops/repack.c", "src/ops/q8_0.c", "src/ops/f16.c", "src/base/par.c", "src/base/base.c"]

if __name__ == "__main__":
    sys.exit(kernel_kit.run("oracle_kernels_kquant", "kit_kernels_kquant", SOURCES))
