#!/usr/bin/env python3
"""oracle_kernels_kvq.py -- builds testing/kit_kernels_kvq.c against the oracle kit's ggml (llama.cpp b11669:
libggml-base.so and the CPU backend libggml-cpu-haswell.so) and runs it under the kit's sid-run: the KV cache's
row writers and readers of src/ops/kvq.c (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl) against the CPU type
traits' from_float and ggml-base's to_float, the Hadamard rotation against a ggml_mul_mat graph hinted
GGML_HINT_SRC0_IS_HADAMARD, and src/ops/attn.c over typed K/V rows against ggml_flash_attn_ext graphs (1, 7 and
70 query rows, 256 to 768 cells, 1 and 2 threads), each compared bit for bit, with our AVX2 kernels and with our
portable C. Every case the C program runs is one test here.

Without the kit the suite is skipped with the reason (a failure under BANKML_REQUIRE_ORACLE=1).
Ends with the line "N passed, N failed, N skipped"; exit status 1 on any failure.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_kit  # noqa: E402  testing/kernel_kit.py: the build, the run and the counts

SOURCES = ["src/ops/kvq.c", "src/ops/attn.c", "src/ops/vec.c", "src/ops/q4_0.c", "src/ops/iq4.c", "src/ops/q8_0.c", "src/ops/f16.c", "src/base/par.c", "src/base/base.c"]

if __name__ == "__main__":
    sys.exit(kernel_kit.run("oracle_kernels_kvq", "kit_kernels_kvq", SOURCES))
