#!/usr/bin/env python3
"""Writes bankml's random-weight test models, deterministically, into a folder.

Run with the oracle kit's gguf-py (Python 3 with llama.cpp's `gguf` package and numpy):

    gguf-py testing/make_models.py build/models                 # the small set (make models)
    gguf-py testing/make_models.py --bench build/bench-models    # the big shapes (make bench-models)
    gguf-py testing/make_models.py --quant build/quant-models    # llama-quantize's mixes (make quant-models)
    gguf-py testing/make_models.py --list                       # names and shapes, nothing written
    gguf-py testing/make_models.py --only llama-e384 DIR        # some models only (repeatable)
    gguf-py testing/make_models.py --sha256 DIR                 # print "sha256  file" for the set in DIR

Each model is written once in F32 with gguf-py, then `llama-quantize --pure` makes the other types from
that F32 file (F16, BF16, Q8_0, Q1_0, Q2_0), as a user of llama.cpp would. Weights come from splitmix64 over
(model, tensor name, index), mapped to a uniform value by exact float64 arithmetic, so the files are the same
bytes on every machine and numpy version; llama-quantize's output is deterministic too (checked by
testing/oracle_kit.py, which also holds every file's sha256 against testing/models.sha256).

Incremental: DIR/.generator holds the sha256 of this script and of the llama-quantize binary; when it matches,
only missing files are written (nothing, in the usual case); when it does not, every model is rewritten.
"""
import argparse, hashlib, math, os, subprocess, sys, zlib

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

ALL6 = ["F32", "F16", "BF16", "Q8_0", "Q1_0", "Q2_0"]

# The small set. Row lengths (E, FF, H*hd) are multiples of 128 wherever a model is quantized (Q1_0's block;
# Q2_0 needs 64, Q8_0 32); E = 128 gives one Q1_0 block per row, 384 an odd count (3). Rows not a multiple
# of 4: the untied llama's vocabulary of 49,155 (3 control tokens appended) and llama-e200-odd's FFN of 342.
# Row lengths that are not a multiple of 32 (SIMD tails of the F32/F16/BF16 dot products): llama-e200-odd
# (200, 342) and stories260K (64, 172). Head sizes 40, 64 and 128; GQA ratios 3, 4, 5 and 2; n_embd != H*hd
# in both qwen3 models. The qwen3 untied model's F32 is only a step (156 MB): it is deleted after use.
SMALL = [
    dict(name="llama-e384", arch="llama", pre="smollm", E=384, L=2, H=6, KV=2, hd=64, FF=768,
         tied=True, extra=0, types=ALL6, seed=1),
    dict(name="llama-e256-untied", arch="llama", pre="starcoder", E=256, L=2, H=4, KV=1, hd=64, FF=640,
         tied=False, extra=3, types=ALL6, seed=2),
    dict(name="llama-e200-odd", arch="llama", pre="smollm", E=200, L=1, H=5, KV=1, hd=40, FF=342,
         tied=True, extra=0, types=["F32", "F16", "BF16"], seed=3),
    dict(name="qwen3-e128", arch="qwen3", E=128, L=2, H=4, KV=2, hd=128, FF=640,
         tied=True, extra=0, types=ALL6, seed=4),
    dict(name="qwen3-e128-untied", arch="qwen3", E=128, L=2, H=8, KV=2, hd=64, FF=768,
         tied=False, extra=0, types=["F16", "BF16", "Q8_0", "Q1_0", "Q2_0"], seed=5),
]

# make bench-models: real models' shapes. BENCH_MIXES are made as users get them (llama-quantize's mix, not
# --pure: SmolLM2's rows of 576 fall back, Q4_K to Q5_0 and Q6_K to Q8_0), the rest --pure. The F16 (or F32)
# step is deleted when only quantized files are wanted.
BENCH_MIXES = ["Q4_K_M", "Q6_K", "Q4_0"]
BENCH = [
    dict(name="smollm2-135m-shape", arch="llama", pre="smollm", E=576, L=30, H=9, KV=3, hd=64, FF=1536,
         tied=True, extra=0, types=["F16"] + BENCH_MIXES, mix=BENCH_MIXES, seed=11, direct="F16"),
    dict(name="bonsai-1.7b-shape", arch="qwen3", E=2048, L=28, H=16, KV=8, hd=128, FF=6144,
         tied=True, extra=0, types=["Q1_0", "Q2_0"] + BENCH_MIXES, mix=BENCH_MIXES, seed=12, direct="F16"),
]

# make quant-models (testing/oracle_quant_models.py): llama-quantize's mixes, NOT --pure, as users get them. A type
# is llama-quantize's name, or "NAME-variant" for one of VARIANTS (extra llama-quantize flags). qwen3-e256: every
# row a multiple of 256 (the K-quants as asked; its tied token_embd becomes Q6_K); llama-e320: rows of 320 (not
# a multiple of 256: Q4_K falls back to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0) beside ffn_down's rows of 1024 (the
# K-quant itself), 64-row attn_k/v; llama-e512-untied: 49,155 output rows (not a multiple of 8: no repacking) and
# 4 layers (Q4_K_M's Q6_K layers 2 and 3 for attn_v/ffn_down). IQ4_XS: IQ4_XS where rows are multiples of 256
# (plain: b11669 never repacks it on AVX2), IQ4_NL where not (llama-e320's rows of 320; repacked in eights), a
# Q6_K (Q8_0 for rows of 320) tied embedding; IQ4_NL-emb: the tied embedding IQ4_NL too (its output copy
# repacked); IQ4_NL-out: an IQ4_NL output of 49,155 rows (not in eights: the plain IQ4_NL product). TQ1_0 /
# TQ2_0: ternary layers where rows are multiples of 256 (llama-e320's rows of 320 fall back to Q4_0).
# IQ3_XXS / IQ3_M: the 3-bit grid mixes on qwen3-e256 (IQ3_M: IQ3_S layers, Q4_K attn_v / ffn_down, a Q6_K
# embedding; IQ3_XXS: IQ3_XXS layers, IQ2_S attn_q / attn_k, IQ3_S attn_output, a Q5_K embedding). IQ2_XXS,
# IQ2_XS, IQ2_S, IQ2_M, IQ1_S, IQ1_M: the 2-bit and 1-bit grid mixes on qwen3-e256 as llama-quantize makes them
# (beside Q2_K / Q4_K / IQ2_XXS / IQ3_S / Q5_K tensors). b11669's llama-quantize wants an importance matrix for these types: write_imatrix's
# fixed one.
QUANT_ALL = ["Q4_K_M", "Q5_K_M", "Q6_K", "Q4_0", "Q5_0", "Q4_1", "Q5_1"]
QUANT = [
    dict(name="qwen3-e256", arch="qwen3", E=256, L=2, H=4, KV=2, hd=64, FF=768,
         tied=True, extra=0, types=QUANT_ALL + ["Q4_0-emb", "Q3_K_M", "Q2_K", "IQ4_XS", "IQ4_NL-emb", "TQ1_0", "TQ2_0",
                                     "IQ3_XXS", "IQ3_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S",
                                     "IQ1_M"], seed=21,
         direct="F16"),
    dict(name="llama-e320", arch="llama", pre="smollm", E=320, L=2, H=5, KV=1, hd=64, FF=1024,
         tied=True, extra=0, types=QUANT_ALL + ["IQ4_XS", "TQ2_0"], seed=22, direct="F16"),
    dict(name="llama-e512-untied", arch="llama", pre="starcoder", E=512, L=4, H=8, KV=2, hd=64, FF=1536,
         tied=False, extra=3, types=["Q4_K_M", "Q4_0", "Q4_K_M-out", "Q4_0-out", "IQ4_NL-out"], seed=23, direct="F16"),
]
def base_type(ftype):
    """The tensor type a file type is named after: Q4_K_M -> q4_k, Q4_0 -> q4_0."""
    return ftype.split("_K")[0].lower() + "_k" if "_K" in ftype else ftype.lower()


# -emb: the (tied) token embedding in the file's base type too; -out: output and token_embd both in it
VARIANTS = {
    "emb": lambda f: ["--token-embedding-type", base_type(f)],
    "out": lambda f: ["--token-embedding-type", base_type(f), "--output-tensor-type", base_type(f)],
    "qk": lambda f: ["--tensor-type", "attn_q=" + base_type(f), "--tensor-type", "attn_k=" + base_type(f)],
}
# the types b11669's llama-quantize refuses to make without an importance matrix (--imatrix)
NEEDS_IMATRIX = {"IQ3_XXS", "IQ3_XS", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ1_S", "IQ1_M"}


def write_imatrix(src, path):
    """A GGUF importance matrix (the format b11669's common_imatrix_load reads: general.type "imatrix", the
    imatrix.datasets / chunk_count / chunk_size keys, per weight NAME.in_sum2 [k] and NAME.counts [1], F32) of
    fixed values for every 2-D tensor of src: sum2[j] = 1 + (j % 7) / 4, count 1. Deterministic, so the files
    made with it are too."""
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(path + ".tmp", arch="imatrix")
    w.add_string("general.type", "imatrix")
    w.add_array("imatrix.datasets", ["bankml-fixed"])
    w.add_uint32("imatrix.chunk_count", 1)
    w.add_uint32("imatrix.chunk_size", 512)
    for t in r.tensors:
        if len(t.shape) != 2:
            continue
        k = int(t.shape[0])
        w.add_tensor(t.name + ".in_sum2", (1.0 + (np.arange(k) % 7) / 4.0).astype(np.float32))
        w.add_tensor(t.name + ".counts", np.ones(1, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)

FTYPE = {"F32": 0, "F16": 1}


def fname(spec, t):
    return f"{spec['name']}-{t.lower()}.gguf"


def files_of(specs):
    return [fname(s, t) for s in specs for t in s["types"]]


# ---------------------------------------------------------------- deterministic weights

U64 = np.uint64


def uniform(key, n, dtype, std, mean=0.0):
    """n values, uniform with the given mean and standard deviation, from splitmix64(key, index).

    Only integer ops and IEEE float64 multiply/add, each rounded once, then one rounding to dtype: the
    same bits everywhere (no libm, no numpy Generator stream that may change between versions)."""
    out = np.empty(n, dtype=dtype)
    half = std * math.sqrt(3.0)
    step = 1 << 22
    with np.errstate(over="ignore"):
        for s in range(0, n, step):
            e = min(n, s + step)
            z = np.arange(s + 1, e + 1, dtype=np.uint64)
            z *= U64(0x9E3779B97F4A7C15)
            z += U64(key)
            z ^= z >> U64(30)
            z *= U64(0xBF58476D1CE4E5B9)
            z ^= z >> U64(27)
            z *= U64(0x94D049BB133111EB)
            z ^= z >> U64(31)
            u = ((z >> U64(40)).astype(np.float64) - 8388608.0) * (1.0 / 8388608.0)  # [-1, 1), exact
            out[s:e] = (u * half + mean).astype(dtype)
    return out


def tensor_key(seed, name):
    return ((seed * 0x100000001B3) ^ (zlib.crc32(name.encode()) << 20)) % (1 << 64)


# ---------------------------------------------------------------- vocabularies

def read_vocab(path):
    """tokens, token types, merges and the chat template (if any) of a vocab-only GGUF."""
    r = gguf.GGUFReader(path)
    out = {}
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
        f = r.fields[key]
        out[key] = [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    f = r.fields["tokenizer.ggml.token_type"]
    out["tokenizer.ggml.token_type"] = [int(f.parts[i][0]) for i in f.data]
    return out


def vocab_for(spec, shared, cache):
    """The tokenizer keys of one model: SmolLM2-like (starcoder vocab, ChatML specials at ids 1 and 2, as
    SmolLM2 has them) for llama, Qwen3's (qwen2 vocab, <|im_end|> ends a turn) for qwen3."""
    if spec["arch"] == "llama":
        key = "starcoder"
        if key not in cache:
            cache[key] = read_vocab(os.path.join(shared, "vocab", "ggml-vocab-starcoder.gguf"))
        v = cache[key]
        tokens = list(v["tokenizer.ggml.tokens"])
        types = list(v["tokenizer.ggml.token_type"])
        tokens[1], tokens[2] = "<|im_start|>", "<|im_end|>"
        for i in range(spec["extra"]):
            tokens.append(f"<|extra_{i}|>")
            types.append(int(gguf.TokenType.CONTROL))
        assert len(set(tokens)) == len(tokens)
        with open(os.path.join(shared, "templates", "smollm2-instruct.chat_template.jinja"), encoding="utf-8") as fh:
            template = fh.read()
        return dict(pre=spec["pre"], tokens=tokens, types=types, merges=v["tokenizer.ggml.merges"],
                    bos=1, eos=2, unk=0, pad=2, template=template)
    key = "qwen2"
    if key not in cache:
        cache[key] = read_vocab(os.path.join(shared, "vocab", "ggml-vocab-qwen2.gguf"))
    v = cache[key]
    tokens = v["tokenizer.ggml.tokens"]
    assert tokens[151643] == "<|endoftext|>" and tokens[151645] == "<|im_end|>"
    with open(os.path.join(shared, "templates", "qwen3.chat_template.jinja"), encoding="utf-8") as fh:
        template = fh.read()
    return dict(pre="qwen2", tokens=tokens, types=v["tokenizer.ggml.token_type"], merges=v["tokenizer.ggml.merges"],
                bos=151643, eos=151645, unk=None, pad=151643, template=template)


# ---------------------------------------------------------------- writing

def tensor_plan(spec, n_vocab):
    """(name, numpy shape (rows, cols), std, mean) of every tensor, in file order."""
    E, L, H, KV, hd, FF = spec["E"], spec["L"], spec["H"], spec["KV"], spec["hd"], spec["FF"]
    plan = [("token_embd.weight", (n_vocab, E), 1.0, 0.0)]
    for i in range(L):
        p = f"blk.{i}."
        plan.append((p + "attn_norm.weight", (E,), 0.1, 1.0))
        plan.append((p + "attn_q.weight", (H * hd, E), 1 / math.sqrt(E), 0.0))
        plan.append((p + "attn_k.weight", (KV * hd, E), 1 / math.sqrt(E), 0.0))
        plan.append((p + "attn_v.weight", (KV * hd, E), 1 / math.sqrt(E), 0.0))
        plan.append((p + "attn_output.weight", (E, H * hd), 1 / math.sqrt(H * hd), 0.0))
        if spec["arch"] == "qwen3":
            plan.append((p + "attn_q_norm.weight", (hd,), 0.1, 1.0))
            plan.append((p + "attn_k_norm.weight", (hd,), 0.1, 1.0))
        plan.append((p + "ffn_norm.weight", (E,), 0.1, 1.0))
        plan.append((p + "ffn_gate.weight", (FF, E), 1 / math.sqrt(E), 0.0))
        plan.append((p + "ffn_up.weight", (FF, E), 1 / math.sqrt(E), 0.0))
        plan.append((p + "ffn_down.weight", (E, FF), 1 / math.sqrt(FF), 0.0))
    plan.append(("output_norm.weight", (E,), 0.1, 1.0))
    if not spec["tied"]:
        plan.append(("output.weight", (n_vocab, E), 2 / math.sqrt(E), 0.0))
    return plan


def write_base(spec, voc, path, dtype_name):
    """Writes the model in F32 (or F16: bench shapes) with gguf-py, one tensor at a time."""
    arch = spec["arch"]
    E, L, H, KV, hd, FF = spec["E"], spec["L"], spec["H"], spec["KV"], spec["hd"], spec["FF"]
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"bankml-test {spec['name']}")
    w.add_context_length(4096 if arch == "llama" else 40960)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(FF)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    if arch == "qwen3":
        w.add_key_length(hd)
        w.add_value_length(hd)
        w.add_rope_freq_base(1000000.0)
        w.add_layer_norm_rms_eps(1e-6)
    else:
        w.add_rope_dimension_count(hd)
        w.add_rope_freq_base(100000.0)
        w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(FTYPE[dtype_name])
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(voc["pre"])
    w.add_token_list(voc["tokens"])
    w.add_token_types(voc["types"])
    w.add_token_merges(voc["merges"])
    w.add_bos_token_id(voc["bos"])
    w.add_eos_token_id(voc["eos"])
    if voc["unk"] is not None:
        w.add_unk_token_id(voc["unk"])
    w.add_pad_token_id(voc["pad"])
    w.add_add_bos_token(False)
    w.add_chat_template(voc["template"])
    plan = tensor_plan(spec, len(voc["tokens"]))
    big = np.float16 if dtype_name == "F16" else np.float32
    for name, shape, std, mean in plan:
        dt = big if len(shape) == 2 else np.float32
        w.add_tensor_info(name, shape, np.dtype(dt), int(np.prod(shape)) * np.dtype(dt).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, std, mean in plan:
        dt = big if len(shape) == 2 else np.float32
        n = int(np.prod(shape))
        w.write_tensor_data(uniform(tensor_key(spec["seed"], name), n, dt, std, mean).reshape(shape))
    w.close()


def quantize(kit_bin, src, dst, qtype, pure=True):
    """llama-quantize --pure SRC DST TYPE 2 (all tensors but the 1-D norms in one type); pure=False: the
    type's mix (QUANT), with a VARIANTS suffix's flags."""
    tmp = dst + ".tmp"
    flags = ["--pure"] if pure else []
    if "-" in qtype:
        qtype, var = qtype.split("-", 1)
        flags += VARIANTS[var](qtype)
    if qtype in NEEDS_IMATRIX:
        imat = src + ".imatrix.gguf"
        if not os.path.exists(imat):
            write_imatrix(src, imat)
        flags += ["--imatrix", imat]
    p = subprocess.run([os.path.join(kit_bin, "llama-quantize")] + flags + [src, tmp, qtype, "2"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    if p.returncode != 0:
        sys.exit(f"make_models: llama-quantize {qtype} of {src} failed:\n{p.stdout[-3000:]}")
    os.replace(tmp, dst)


def make_model(spec, outdir, shared, kit_bin, cache, want, pure=True):
    """Writes the files of one model listed in `want` (file names)."""
    todo = [t for t in spec["types"] if fname(spec, t) in want]
    if not todo:
        return
    voc = vocab_for(spec, shared, cache)
    base_t = spec.get("direct", "F32")
    base = os.path.join(outdir, fname(spec, base_t))
    keep_base = base_t in spec["types"]
    if not (keep_base and os.path.exists(base) and fname(spec, base_t) not in want):
        tmp = base + ".tmp"
        write_base(spec, voc, tmp, base_t)
        os.replace(tmp, base)
    for t in todo:
        if t != base_t:
            quantize(kit_bin, base, os.path.join(outdir, fname(spec, t)), t, pure and t not in spec.get("mix", ()))
        print(f"  {fname(spec, t)}", flush=True)
    if not keep_base:
        os.remove(base)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def generator_id(kit_bin):
    """What the files depend on besides the vocabularies: this script and the quantizer."""
    h = hashlib.sha256()
    h.update(open(os.path.abspath(__file__), "rb").read())
    usr = os.path.join(os.path.dirname(kit_bin), "root", "usr")
    for rel in ("bin/llama-quantize", "lib/x86_64-linux-gnu/llama/libllama-quantize-impl.so",
                "lib/x86_64-linux-gnu/libggml-base.so.0"):
        path = os.path.join(usr, rel)
        if os.path.exists(path):
            h.update(open(os.path.realpath(path), "rb").read())
    return h.hexdigest()


def describe(spec):
    n = "49,152" if spec["arch"] == "llama" else "151,936"
    if spec["extra"]:
        n = f"49,152+{spec['extra']}"
    return (f"{spec['name']:<20} {spec['arch']:<5} E={spec['E']} L={spec['L']} H={spec['H']} KV={spec['KV']} "
            f"hd={spec['hd']} FF={spec['FF']} vocab={n} {'tied' if spec['tied'] else 'untied'}  "
            f"{' '.join(spec['types'])}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--bench", action="store_true", help="the big shapes (make bench-models)")
    ap.add_argument("--quant", action="store_true", help="llama-quantize's mixes (make quant-models)")
    ap.add_argument("--only", action="append", default=[], help="this model only (repeatable)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--sha256", action="store_true", help="print sha256 lines of the set in OUTDIR")
    ap.add_argument("--force", action="store_true", help="rewrite every file")
    ap.add_argument("--shared", default=os.environ.get("BANKML_SHARED") or os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--kit", default=os.path.expanduser("~/.cache/bankml-oracle/bin"), help="the kit's bin folder")
    a = ap.parse_args()
    specs = BENCH if a.bench else QUANT if a.quant else SMALL
    if a.only:
        specs = [s for s in specs if s["name"] in a.only]
        if not specs:
            sys.exit("make_models: --only matches no model")
    if a.list:
        for s in specs:
            print(describe(s))
        return 0
    if not a.outdir:
        ap.error("OUTDIR is required")
    if a.sha256:
        for f in files_of(specs):
            print(f"{sha256_file(os.path.join(a.outdir, f))}  {f}")
        return 0
    if not os.path.exists(os.path.join(a.kit, "llama-quantize")):
        sys.exit(f"make_models: no llama-quantize in {a.kit}: run sh ../shared/oracle/install.sh")
    if not os.path.isdir(os.path.join(a.shared, "vocab")):
        sys.exit(f"make_models: no vocab folder under {a.shared} (set BANKML_SHARED)")
    os.makedirs(a.outdir, exist_ok=True)
    gid = generator_id(a.kit)
    stamp = os.path.join(a.outdir, ".generator")
    same = not a.force and os.path.exists(stamp) and open(stamp).read().strip() == gid
    want = set(f for f in files_of(specs) if not same or not os.path.exists(os.path.join(a.outdir, f)))
    if not want:
        return 0
    if not same and os.path.exists(stamp):
        os.remove(stamp)   # a half-done rewrite must not look complete
    print(f"make_models: writing {len(want)} files into {a.outdir}", flush=True)
    cache = {}
    for s in specs:
        make_model(s, a.outdir, a.shared, a.kit, cache, want, pure=not a.quant)
    if not a.only:
        with open(stamp, "w") as f:
            f.write(gid + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
