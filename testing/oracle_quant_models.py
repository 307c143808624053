#!/usr/bin/env python3
"""oracle_quant_models.py -- models quantized by llama-quantize's mixes (not --pure) against llama.cpp b11669.

The models (make quant-models; testing/make_models.py --quant): qwen3-e256 (every row a multiple of 256; also in
Q3_K_M: Q3_K with Q4_K/Q5_K/Q6_K, and Q2_K: Q2_K with Q3_K/Q6_K),
llama-e320 (rows of 320: Q4_K falls back to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, beside K-quant ffn_down rows of
1024), llama-e512-untied (4 layers, 49,155 output rows: not a multiple of 8, so not repacked), each in Q4_K_M,
Q5_K_M, Q6_K, Q4_0, Q5_0, Q4_1, Q5_1 and variants with token_embd/output in the base type (a tied Q4_0
embedding, repacked as the output's own copy; a Q4_K / Q4_0 output that is not repacked); and IQ4_XS mixes
(qwen3-e256: IQ4_XS layers, plain; llama-e320: IQ4_NL where rows are 320, repacked, beside IQ4_XS ffn_down
and Q5_1 attn_v), qwen3-e256-iq4_nl-emb (IQ4_NL layers and tied embedding) and llama-e512-untied-iq4_nl-out
(IQ4_NL layers, an IQ4_NL output of 49,155 rows: the plain IQ4_NL product); TQ1_0 and TQ2_0 (qwen3-e256:
ternary layers; llama-e320-tq2_0: Q4_0 where rows are 320, TQ2_0 ffn_down); and the grid IQ mixes of qwen3-e256 made
with a fixed importance matrix: IQ3_XXS, IQ3_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ2_M, IQ1_S, IQ1_M.

  (a) per-layer dumps (build/kit-llama-dump through libllama vs testing/forward_driver.c), every file: prompts
      of 1, 3, 4, 5, 6, 7, 8, 9 and 13 tokens (every column class of the repacked gemm: groups of 4 through
      gemm, the rest through gemv; 8+ columns on a plain Q4_K / Q5_K / Q6_K matrix: b11669's tiled K-quant
      kernel), two decode steps after the 5-token one; 40 tokens too on the files with a plain K-quant
      in the layers, and 300 tokens on three files (the tiled attention kernel; on qwen3-e256-q4_k_m also
      the tiled K-quant kernel over more than one 256-column window); every layer's tensors, result_norm,
      result_output and the logits bit-equal.
  (b) answers, on 18 of the files: `bankml serve` beside llama-server (-t 2 -c 512 -np 1) on /completion with
      token ids, greedy and seeded (temperature 0.8, seed 7), equal bodies (timings and id_slot aside), for
      a 6-token and a 12-token prompt, and a 40-token one where a plain K-quant is in the layers.

Ends with "N passed, N failed, N skipped"; a missing kit skips (fails under BANKML_REQUIRE_ORACLE=1).
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import oracle  # noqa: E402
import oracle_forward as F  # noqa: E402

QDIR = os.path.join(ROOT, "build", "quant-models")
BIN = os.environ.get("BANKML_BIN") or os.path.join(ROOT, "bankml")

# (file stem, has a matrix b11669 multiplies with its tiled K-quant kernel at 8+ columns: a plain K-quant)
MODELS = [
    ("qwen3-e256-q4_k_m", True), ("qwen3-e256-q5_k_m", True), ("qwen3-e256-q6_k", True),
    ("qwen3-e256-q4_0", False), ("qwen3-e256-q5_0", False), ("qwen3-e256-q4_1", False), ("qwen3-e256-q5_1", False),
    ("qwen3-e256-q4_0-emb", False), ("qwen3-e256-q3_k_m", True), ("qwen3-e256-q2_k", True),
    ("llama-e320-q4_k_m", False), ("llama-e320-q5_k_m", True), ("llama-e320-q6_k", True),
    ("llama-e320-q4_0", False), ("llama-e320-q5_0", False), ("llama-e320-q4_1", False), ("llama-e320-q5_1", False),
    ("llama-e512-untied-q4_k_m", True), ("llama-e512-untied-q4_0", False),
    ("llama-e512-untied-q4_k_m-out", True), ("llama-e512-untied-q4_0-out", False),
    ("qwen3-e256-iq4_xs", True), ("qwen3-e256-iq4_nl-emb", False), ("llama-e320-iq4_xs", True),
    ("llama-e512-untied-iq4_nl-out", True),
    ("qwen3-e256-tq1_0", False), ("qwen3-e256-tq2_0", False), ("llama-e320-tq2_0", False),
    ("qwen3-e256-iq3_xxs", True), ("qwen3-e256-iq3_m", True),
    ("qwen3-e256-iq2_xxs", True), ("qwen3-e256-iq2_xs", True), ("qwen3-e256-iq2_s", True), ("qwen3-e256-iq2_m", True),
    ("qwen3-e256-iq1_s", True), ("qwen3-e256-iq1_m", True),
]
# the qwen3 files keep a Q6_K token_embd (-emb aside) and llama-e512-untied-q4_0 a Q6_K output: a plain
# K-quant, but its product has one column (the server's last token; the dumps' last layer computes one row)
LONG = ["llama-e320-q5_0", "qwen3-e256-q4_0-emb", "qwen3-e256-q4_k_m"]
# the files served side by side (one per graph and mix; the dumps hold every file)
SERVED = ["qwen3-e256-q4_k_m", "qwen3-e256-q5_k_m", "qwen3-e256-q6_k", "qwen3-e256-q3_k_m", "qwen3-e256-q2_k",
          "qwen3-e256-q4_0", "qwen3-e256-q5_1",
          "qwen3-e256-q4_0-emb", "llama-e320-q4_k_m", "llama-e320-q5_0", "llama-e320-q4_1",
          "llama-e512-untied-q4_k_m", "llama-e512-untied-q4_0-out",
          "qwen3-e256-iq4_xs", "llama-e320-tq2_0", "qwen3-e256-iq3_xxs", "qwen3-e256-iq3_m",
          "qwen3-e256-iq2_xxs", "qwen3-e256-iq2_xs", "qwen3-e256-iq2_s", "qwen3-e256-iq2_m",
          "qwen3-e256-iq1_s", "qwen3-e256-iq1_m"]
# files whose column classes other files already hold: fewer prompt lengths (qwen3-e256-iq4_nl-emb: its IQ4_NL
# tied embedding, get_rows and the output's repacked copy; the repacked IQ4_NL layers are llama-e512's too)
# (the IQ4 and TQ kernels' column classes are oracle_kernels_iq's, at 1-65 columns: these files show the mixes)
FEW = {"qwen3-e256-iq4_nl-emb": [1, 5, 9], "qwen3-e256-tq2_0": [1, 5, 9], "qwen3-e256-iq4_xs": [1, 4, 5, 8, 13],
       "llama-e320-iq4_xs": [1, 5, 8], "llama-e512-untied-iq4_nl-out": [1, 4, 5, 9], "qwen3-e256-tq1_0": [1, 5, 9],
       "llama-e320-tq2_0": [1, 5], "qwen3-e256-iq3_xxs": [1, 5, 9], "qwen3-e256-iq3_m": [1, 5, 9],
       "qwen3-e256-iq2_xxs": [1, 5, 9], "qwen3-e256-iq2_xs": [1, 5, 9], "qwen3-e256-iq2_s": [1, 5, 9],
       "qwen3-e256-iq2_m": [1, 5, 9], "qwen3-e256-iq1_s": [1, 5, 9], "qwen3-e256-iq1_m": [1, 5, 9]}
if os.environ.get("BANKML_QUANT_ONLY"):  # development: only the files whose stem holds this text
    MODELS = [m for m in MODELS if os.environ["BANKML_QUANT_ONLY"] in m[0]]
    SERVED = [m for m in SERVED if os.environ["BANKML_QUANT_ONLY"] in m]


def n_vocab(stem):
    return 151936 if stem.startswith("qwen3") else (49155 if "untied" in stem else 49152)


def tiled_anywhere(stem):
    """Files whose layer matrices include a plain K-quant (prompts of 8+ tokens take the tiled K-quant kernel)."""
    return dict(MODELS)[stem]


def main():
    s = oracle.Suite("oracle_quant_models")
    kit = oracle.kit_or_skip(s)
    oracle.shared_or_skip(s)
    ok, out = F.build()
    if not s.check("build/forward-driver builds", ok, out[-2000:]):
        s.finish()
    p = subprocess.run(["make", "-s", "build/kit-llama-dump", "quant-models"], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace")
    if not s.check("build/kit-llama-dump and the quant models build", p.returncode == 0, p.stdout[-2000:]):
        s.finish()
    tmp = tempfile.mkdtemp(prefix="bankml-quant-")
    fork = os.path.join(tmp, "quant.FORK.json")
    try:
        # (a) per-layer dumps
        for stem, _ in MODELS:
            path = os.path.join(QDIR, stem + ".gguf")
            nv = n_vocab(stem)
            lens = FEW.get(stem) or [1, 3, 4, 5, 6, 7, 8, 9, 13] + ([40] if tiled_anywhere(stem) else [])
            for n in lens:
                F.dump_case(s, kit, tmp, f"{stem} {n} tokens", path, F.rand_ids(100 + n, n, 3, nv - 3),
                            2 if n == 5 else 0)
            if stem in LONG:
                F.dump_case(s, kit, tmp, f"{stem} 300 tokens (tiled attention)", path,
                            F.rand_ids(7, 300, 3, nv - 3), 1)
        # (b) and (c) through the servers
        for stem in SERVED:
            path = os.path.join(QDIR, stem + ".gguf")
            q = subprocess.run([BIN, "pin", path, "--fork", fork, "--write"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if not s.check(f"{stem}: bankml pin --write", q.returncode == 0, q.stdout[-400:]):
                continue
        ign = ("timings", "bankml_receipt")
        for stem in SERVED:
            path = os.path.join(QDIR, stem + ".gguf")
            nv = n_vocab(stem)
            try:
                with oracle.Server.llama(kit, path, ctx=512) as L, \
                        oracle.Server.bankml(path, ctx=512, extra=["--fork", fork]) as B:
                    short = F.rand_ids(31, 6, 3, nv - 3)
                    bodies = [{"prompt": short, "n_predict": 24, "temperature": 0, "cache_prompt": False},
                              {"prompt": short, "n_predict": 24, "temperature": 0.8, "seed": 7, "cache_prompt": False}]
                    bodies.append({"prompt": F.rand_ids(37, 12, 3, nv - 3), "n_predict": 24, "temperature": 0,
                                   "cache_prompt": False})
                    if tiled_anywhere(stem):
                        long_ = F.rand_ids(41, 40, 3, nv - 3)
                        bodies += [{"prompt": long_, "n_predict": 24, "temperature": 0, "cache_prompt": False},
                                   {"prompt": long_, "n_predict": 24, "temperature": 0.8, "seed": 7,
                                    "cache_prompt": False}]
                    for body in bodies:
                        (sl, jl), (sb, jb) = L.post("/completion", body), B.post("/completion", body)
                        kind = "greedy" if body["temperature"] == 0 else "seeded"
                        s.equal(f"{stem}: {len(body['prompt'])}-token prompt, {kind} /completion equals "
                                f"llama-server's", [sb, jb], [sl, jl], ignore=ign)
            except oracle.ServerError as e:
                s.fail(f"{stem}: servers", str(e)[:800])
    finally:
        subprocess.run(["rm", "-rf", tmp])
    s.finish()


if __name__ == "__main__":
    main()
