#!/usr/bin/env python3
"""oracle_kernels_iq.py -- builds testing/kit_kernels_iq.c against the oracle kit's ggml (llama.cpp b11669:
libggml-base.so and the CPU backend libggml-cpu-haswell.so) and runs it under the kit's sid-run: dequantization
and vec_dot of src/ops/iq4.c (IQ4_NL, IQ4_XS) and src/ops/tq.c (TQ1_0, TQ2_0), repack.c's IQ4_NL 8x8 form (bytes, gemv, gemm, whole repacked
products) and whole plain ggml_mul_mat graphs (IQ4_NL, TQ1_0, TQ2_0: vec_dot; IQ4_XS: vec_dot / the tiled kernel),
each compared bit for bit with ggml's, with our AVX2 kernels and with our portable C. Every case the C program
runs is one test here.

Without the kit the suite is skipped with the reason (a failure under BANKML_REQUIRE_ORACLE=1).
Ends with the line "N passed, N failed, N skipped"; exit status 1 on any failure.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_kit  # noqa: E402  testing/kernel_kit.py: the build, the run and the counts

SOURCES = ["src/ops/iq4.c", "src/ops/iq3.c", "src/ops/iq2.c", "src/ops/iq1.c", "src/ops/iq_grids.c", "src/ops/tq.c", "src/ops/q4_k.c", "src/ops/repack.c", "src/ops/q8_0.c", "src/ops/f16.c", "src/base/par.c", "src/base/base.c"]

if __name__ == "__main__":
    sys.exit(kernel_kit.run("oracle_kernels_iq", "kit_kernels_iq", SOURCES))
