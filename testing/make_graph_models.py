#!/usr/bin/env python3
"""Writes the random-weight models of real graphs' shapes (issue 20) into a folder, deterministically.

Run with the oracle kit's gguf-py (`make graph-models` does, into build/graph-models):

    gguf-py testing/make_graph_models.py build/graph-models
    gguf-py testing/make_graph_models.py --list
    gguf-py testing/make_graph_models.py --only qwen2.5-0.5b-shape DIR

Each model has a real model's attention shape (width, head count, KV heads, head size), its real vocabulary
from ../shared/vocab (tokens, types, merges, the pre-tokenizer's name), its real special tokens and chat
template, its hyper-parameters (RoPE base, RMS epsilon, context) and its architecture's extra tensors, in two
layers; only the feed-forward width may be cut (the file size is the embedding's: 151,936 or 128,256 rows).
The weights come from testing/make_models.py's splitmix64 stream (the same bits on every machine). The F16
file is written directly with gguf-py (as convert_hf_to_gguf writes an F16 model); `llama-quantize --pure`
makes Q8_0 from it.

  qwen2.5-0.5b-shape   qwen2: E 896, 14 heads, 2 KV heads, head 64, FF 4864 (real), Q/K/V biases, tied,
                       RoPE base 1e6 (NeoX), eps 1e-6, Qwen2.5-Instruct's template and specials
  llama-3.2-1b-shape   llama: E 2048, 32 heads, 8 KV heads, head 64, FF 2048 (real 8192, cut), tied,
                       RoPE base 500000 with rope_freqs.weight computed as convert_hf_to_gguf computes
                       Llama 3.2's "llama3" rope_scaling (factor 32, low 1, high 4, original 8192),
                       eps 1e-5, llama-bpe, Llama 3.2 Instruct's template and specials
  granite-3.3-2b-shape granite: E 2048, 32 heads, 8 KV heads, head 64, FF 2048 (real 8192, cut), tied, RoPE
                       base 1e7, eps 1e-5, embedding_scale 12, residual_scale 0.22, attention.scale 1/64,
                       logit_scale 8 (Granite 3.3 2B's); the refact vocabulary (Granite 3.x's pre-tokenizer
                       is refact; its 49,155-token vocabulary is not in ../shared/vocab) with token 0 renamed
                       <|end_of_text|>, Granite 3.3 Instruct's template
  smollm3-3b-shape     smollm3: E 2048, 16 heads, 4 KV heads, head 128, FF 2048 (real 11008, cut), 4 layers
                       (real 36; layer 3 without RoPE), tied, RoPE base 5e6, eps 1e-6, llama-bpe (SmolLM3's
                       is Llama 3's), SmolLM3-3B's template
  phi-3-mini-shape     phi3: E 3072, 32 heads, 32 KV heads, head 96, FF 2048 (real 8192, cut), fused attn_qkv and
                       ffn_up (gate then up), tied (real: untied), RoPE base 10000 (NeoX), eps 1e-5,
                       sliding_window 2047 (ignored by llama.cpp), the phi-3 SPM vocabulary, Phi-3.5-mini's
                       template
  mistral-nemo-shape   llama: E 5120, 32 heads, 8 KV heads, head 128 (key_length: Q is 4096 wide), FF 2048 (real
                       14336, cut), tied (real: untied), RoPE base 1e6, eps 1e-5, context 1,024,000; the tekken
                       pre-tokenizer over llama-bpe's tokens with Mistral's eleven control tokens (<unk>, <s>, </s>,
                       [INST], ...) at ids 128000-128010, Mistral-Nemo-Instruct-2407's template
  phi-3.5-mini-shape   phi-3-mini-shape with LongRoPE: context 131072, original 4096, rope_factors_long/short
                       (48 each: stand-ins shaped as the real lists), rope.scaling.attn_factor 1.190238
  phi-4-mini-shape     phi3: E 3072, 24 heads, 8 KV heads, head 128, RoPE on 96 of the 128 dimensions, FF 2048
                       (real 8192, cut), tied, LongRoPE as above; the gpt-4o pre-tokenizer over llama-bpe's
                       tokens with Phi-4-mini's specials (<|endoftext|>, <|user|>, <|end|>, ...) at 128000-128010,
                       Phi-4-mini-instruct's template
  gemma-3-1b-shape     gemma3: E 1152, 4 heads, 1 KV head, head 256 (key_length), FF 2048 (real 6912, cut),
                       6 layers (real 26; the default pattern 6 makes 0-4 window layers, 5 global), window
                       128 (real 512), RoPE base 1e6 (window layers: the default 10000), eps 1e-6, tied,
                       Q/K norms and the two post-norms; Llama 2's SPM vocabulary (llama-spm: Gemma 3's own
                       is not in ../shared/vocab) with gemma-2-2b-it's template

Incremental: DIR/.generator holds the sha256 of both scripts and the quantizer; when it matches, only
missing files are written.
"""
import argparse, hashlib, math, os, sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import make_models as mm  # noqa: E402

GRAPHS = [
    dict(name="qwen2.5-0.5b-shape", arch="qwen2", vocab="qwen2", E=896, L=2, H=14, KV=2, hd=64, FF=4864,
         ctx=32768, base=1000000.0, eps=1e-6, bias=True, llama3=False, types=["F16", "Q8_0"], seed=21),
    dict(name="llama-3.2-1b-shape", arch="llama", vocab="llama-bpe", E=2048, L=2, H=32, KV=8, hd=64, FF=2048,
         ctx=131072, base=500000.0, eps=1e-5, bias=False, llama3=True, types=["F16", "Q8_0"], seed=22),
    # Gemma 3 1B: 26 layers (pattern 6: five window layers, then a global one) cut to 6, so one of each kind
    # plays; the window cut from 512 to 128 so that the suite's prompts cross it; its 262,144-token SPM
    # vocabulary is not in ../shared/vocab (gemma-4's is another tokenizer), so Llama 2's SPM one stands in.
    dict(name="gemma-3-1b-shape", arch="gemma3", vocab="llama-spm", E=1152, L=6, H=4, KV=1, hd=256, FF=2048,
         ctx=32768, base=1000000.0, eps=1e-6, bias=False, llama3=False, swa=128, types=["F16", "Q8_0"], seed=23),
    # Granite 3.3 2B: 40 layers cut to 2, FF 8192 cut to 2048; its four multipliers as the real file has them
    dict(name="granite-3.3-2b-shape", arch="granite", vocab="refact", E=2048, L=2, H=32, KV=8, hd=64, FF=2048,
         ctx=131072, base=10000000.0, eps=1e-5, bias=False, llama3=False, types=["F16", "Q8_0"], seed=24,
         scales=dict(embedding=12.0, residual=0.22, attention=0.015625, logit=8.0)),
    # SmolLM3 3B: 36 layers cut to 4 (layer 3 has no RoPE), FF 11008 cut to 2048
    dict(name="smollm3-3b-shape", arch="smollm3", vocab="llama-bpe", E=2048, L=4, H=16, KV=4, hd=128, FF=2048,
         ctx=65536, base=5000000.0, eps=1e-6, bias=False, llama3=False, types=["F16", "Q8_0"], seed=25),
    # Phi-3 mini 4k: 32 layers cut to 2, FF 8192 cut to 2048, output tied (the real one has its own); the
    # sliding_window key it carries (2047), which llama.cpp reads and drops
    dict(name="phi-3-mini-shape", arch="phi3", vocab="phi-3", E=3072, L=2, H=32, KV=32, hd=96, FF=2048,
         ctx=4096, base=10000.0, eps=1e-5, bias=False, llama3=False, swa=2047, types=["F16", "Q8_0"], seed=26),
    # Mistral Nemo 12B (2407): 40 layers cut to 2, FF 14336 cut to 2048, head 128 with E 5120 (Q is 4096 wide),
    # output tied (the real one has its own: half the file); Mistral's tekken pre-tokenizer over llama-bpe's tokens
    # (its 131,072-token vocabulary is not in ../shared/vocab) with Mistral's specials in place of Llama 3's
    dict(name="mistral-nemo-shape", arch="llama", vocab="tekken", E=5120, L=2, H=32, KV=8, hd=128, FF=2048,
         ctx=1024000, base=1000000.0, eps=1e-5, bias=False, llama3=False, types=["F16", "Q8_0"], seed=27),
    # Phi-3.5 mini: Phi-3 mini's shape with LongRoPE (context 131072 over an original 4096: the short factors up
    # to 4096 cells, the long ones past it; rope.scaling.attn_factor as convert_hf_to_gguf computes it)
    dict(name="phi-3.5-mini-shape", arch="phi3", vocab="phi-3", E=3072, L=2, H=32, KV=32, hd=96, FF=2048,
         ctx=131072, base=10000.0, eps=1e-5, bias=False, llama3=False, swa=262144, types=["F16", "Q8_0"], seed=28,
         longrope=4096),
    # Phi-4-mini: 24 heads, 8 KV heads, head 128, partial RoPE (partial_rotary_factor 0.75: 96 of 128 dimensions),
    # LongRoPE as Phi-3.5's, tied; the gpt-4o pre-tokenizer over llama-bpe's tokens (its 200,064-token o200k
    # vocabulary is not in ../shared/vocab) with Phi-4-mini's specials, Phi-4-mini-instruct's template
    dict(name="phi-4-mini-shape", arch="phi3", vocab="gpt-4o", E=3072, L=2, H=24, KV=8, hd=128, rot=96, FF=2048,
         ctx=131072, base=10000.0, eps=1e-5, bias=False, llama3=False, swa=262144, types=["F16", "Q8_0"], seed=29,
         longrope=4096),
]

# Phi-4-mini-instruct's chat template (its tokenizer_config.json's)
PHI4_MINI_TEMPLATE = ("{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and "
                      "message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + "
                      "'<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}{{ '<|' + "
                      "message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if "
                      "add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}")
PHI4_SPECIALS = ["<|endoftext|>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|tool|>", "<|/tool|>",
                 "<|tool_call|>", "<|/tool_call|>", "<|tool_response|>", "<|/tool_response|>"]


def longrope_factors(n):
    """Deterministic stand-ins for Phi-3.5's rope_scaling short_factor / long_factor (n each, float32): short
    close to 1, long rising to ~60 over the pairs, as the real lists do."""
    x = np.arange(n, dtype=np.float64) / max(1, n - 1)
    short = (1.0 + 0.1 * x * x).astype(np.float32)
    long_ = (1.0 + 60.0 * x ** 3).astype(np.float32)
    return long_, short


def longrope_attn_factor(ctx, orig):
    """convert_hf_to_gguf's Phi3MiniModel: sqrt(1 + log(scale) / log(orig)) for longrope / su."""
    scale = ctx / orig
    return math.sqrt(1 + math.log(scale) / math.log(orig)) if scale > 1.0 else 1.0


# Mistral's control tokens (ids 0-10 of its tekken vocabulary), put where llama-bpe has Llama 3's
MISTRAL_SPECIALS = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
                    "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "<pad>"]


def fname(spec, t):
    return f"{spec['name']}-{t.lower()}.gguf"


def files_of(specs):
    return [fname(s, t) for s in specs for t in s["types"]]


def llama3_factors(base, dim, factor=32.0, low=1.0, high=4.0, old_ctx=8192):
    """convert_hf_to_gguf's LlamaModel.generate_extra_tensors for rope_type "llama3", in float32 freqs."""
    freqs = 1.0 / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
    low_wl, high_wl = old_ctx / low, old_ctx / high
    out = []
    for f in freqs.astype(np.float32):
        wl = 2 * math.pi / float(f)
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (old_ctx / wl - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def spm_vocab(path):
    """Every tokenizer.* key of an SPM vocab GGUF (tokens, scores, types, special ids, flags)."""
    r = gguf.GGUFReader(path)
    out = []
    for name, f in r.fields.items():
        if not name.startswith("tokenizer.") or name == "tokenizer.chat_template":
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            vals = [f.parts[i] for i in f.data]
            if f.types[1] == gguf.GGUFValueType.STRING:
                out.append((name, "arr", [bytes(v).decode("utf-8", "surrogateescape") for v in vals]))
            else:
                out.append((name, "arr", [v.tolist()[0] for v in vals]))
        elif vt == gguf.GGUFValueType.STRING:
            out.append((name, "str", bytes(f.parts[f.data[0]]).decode("utf-8")))
        elif vt == gguf.GGUFValueType.BOOL:
            out.append((name, "bool", bool(f.parts[f.data[0]][0])))
        else:
            out.append((name, "u32", int(f.parts[f.data[0]][0])))
    return out


def vocab_of(spec, shared):
    if spec["vocab"] in ("llama-spm", "phi-3"):
        keys = spm_vocab(os.path.join(shared, "vocab", f"ggml-vocab-{spec['vocab']}.gguf"))
        tokens = dict((k, v) for k, _, v in keys)["tokenizer.ggml.tokens"]
        tpl = "google-gemma-2-2b-it.jinja" if spec["vocab"] == "llama-spm" else "microsoft-Phi-3.5-mini-instruct.jinja"
        with open(os.path.join(shared, "templates", "llama.cpp", tpl), encoding="utf-8") as fh:
            template = fh.read()
        return dict(spm=keys, tokens=tokens, template=template)
    base = "llama-bpe" if spec["vocab"] in ("tekken", "gpt-4o") else spec["vocab"]
    v = mm.read_vocab(os.path.join(shared, "vocab", f"ggml-vocab-{base}.gguf"))
    tokens = v["tokenizer.ggml.tokens"]
    if spec["vocab"] == "gpt-4o":
        assert tokens[128000] == "<|begin_of_text|>"
        tokens = list(tokens[:128000]) + PHI4_SPECIALS + list(tokens[128000 + len(PHI4_SPECIALS):])
        assert len(set(tokens)) == len(tokens)
        return dict(pre="gpt-4o", tokens=tokens, types=v["tokenizer.ggml.token_type"],
                    merges=v["tokenizer.ggml.merges"], template=PHI4_MINI_TEMPLATE, bos=128000, eos=128000,
                    pad=128000, add_bos=False)
    if spec["vocab"] == "tekken":
        assert tokens[128000] == "<|begin_of_text|>"
        tokens = list(tokens[:128000]) + MISTRAL_SPECIALS + list(tokens[128000 + len(MISTRAL_SPECIALS):])
        assert len(set(tokens)) == len(tokens)
        tpl = "mistralai-Mistral-Nemo-Instruct-2407.jinja"
        ids = dict(bos=128001, eos=128002, pad=None, add_bos=True, unk=128000)
    elif spec["vocab"] == "qwen2":
        assert tokens[151643] == "<|endoftext|>" and tokens[151645] == "<|im_end|>"
        tpl = "Qwen-Qwen2.5-7B-Instruct.jinja"
        ids = dict(bos=151643, eos=151645, pad=151643, add_bos=False)
    elif spec["vocab"] == "refact":
        assert tokens[0] == "<|endoftext|>"
        tokens = ["<|end_of_text|>"] + list(tokens[1:])
        tpl = "ibm-granite-granite-3.3-2B-Instruct.jinja"
        ids = dict(bos=0, eos=0, pad=0, add_bos=False)
    elif spec["arch"] == "smollm3":
        assert tokens[128000] == "<|begin_of_text|>" and tokens[128009] == "<|eot_id|>"
        tpl = "HuggingFaceTB-SmolLM3-3B.jinja"
        ids = dict(bos=128000, eos=128009, pad=None, add_bos=False)
    else:
        assert tokens[128000] == "<|begin_of_text|>" and tokens[128009] == "<|eot_id|>"
        tpl = "meta-llama-Llama-3.2-3B-Instruct.jinja"
        ids = dict(bos=128000, eos=128009, pad=None, add_bos=True)
    with open(os.path.join(shared, "templates", "llama.cpp", tpl), encoding="utf-8") as fh:
        template = fh.read()
    return dict(pre=spec["vocab"], tokens=tokens, types=v["tokenizer.ggml.token_type"],
                merges=v["tokenizer.ggml.merges"], template=template, **ids)


def tensor_plan(spec, n_vocab):
    """(name, numpy shape, std, mean) of every tensor, in file order (as convert_hf_to_gguf orders them)."""
    E, L, H, KV, hd, FF = spec["E"], spec["L"], spec["H"], spec["KV"], spec["hd"], spec["FF"]
    plan = []
    if spec["llama3"]:
        plan.append(("rope_freqs.weight", (hd // 2,), None, None))
    if spec.get("longrope"):   # convert_hf_to_gguf's generate_extra_tensors: long, then short
        plan.append(("rope_factors_long.weight", (spec.get("rot", hd) // 2,), None, None))
        plan.append(("rope_factors_short.weight", (spec.get("rot", hd) // 2,), None, None))
    # gemma3 scales the embedding by sqrt(E): rows of std 1/sqrt(E) keep the logits O(1), as in Gemma 3
    plan.append(("token_embd.weight", (n_vocab, E), 1 / math.sqrt(E) if spec["arch"] == "gemma3" else 1.0, 0.0))
    for i in range(L):
        p = f"blk.{i}."
        plan.append((p + "attn_norm.weight", (E,), 0.1, 1.0))
        if spec["arch"] == "phi3":   # fused, as convert_hf_to_gguf keeps Phi-3's qkv_proj and gate_up_proj
            plan.append((p + "attn_qkv.weight", ((H + 2 * KV) * hd, E), 1 / math.sqrt(E), 0.0))
            plan.append((p + "attn_output.weight", (E, H * hd), 1 / math.sqrt(H * hd), 0.0))
            plan.append((p + "ffn_norm.weight", (E,), 0.1, 1.0))
            plan.append((p + "ffn_up.weight", (2 * FF, E), 1 / math.sqrt(E), 0.0))
            plan.append((p + "ffn_down.weight", (E, FF), 1 / math.sqrt(FF), 0.0))
            continue
        plan.append((p + "attn_q.weight", (H * hd, E), 1 / math.sqrt(E), 0.0))
        plan.append((p + "attn_k.weight", (KV * hd, E), 1 / math.sqrt(E), 0.0))
        plan.append((p + "attn_v.weight", (KV * hd, E), 1 / math.sqrt(E), 0.0))
        if spec["bias"]:
            plan.append((p + "attn_q.bias", (H * hd,), 0.5, 0.0))
            plan.append((p + "attn_k.bias", (KV * hd,), 0.5, 0.0))
            plan.append((p + "attn_v.bias", (KV * hd,), 0.1, 0.0))
        if spec["arch"] == "gemma3":
            plan.append((p + "attn_q_norm.weight", (hd,), 0.1, 1.0))
            plan.append((p + "attn_k_norm.weight", (hd,), 0.1, 1.0))
        plan.append((p + "attn_output.weight", (E, H * hd), 1 / math.sqrt(H * hd), 0.0))
        if spec["arch"] == "gemma3":
            plan.append((p + "post_attention_norm.weight", (E,), 0.1, 1.0))
        plan.append((p + "ffn_norm.weight", (E,), 0.1, 1.0))
        plan.append((p + "ffn_gate.weight", (FF, E), 1 / math.sqrt(E), 0.0))
        plan.append((p + "ffn_up.weight", (FF, E), 1 / math.sqrt(E), 0.0))
        plan.append((p + "ffn_down.weight", (E, FF), 1 / math.sqrt(FF), 0.0))
        if spec["arch"] == "gemma3":
            plan.append((p + "post_ffw_norm.weight", (E,), 0.1, 1.0))
    plan.append(("output_norm.weight", (E,), 0.1, 1.0))
    return plan


def write_f16(spec, voc, path):
    arch = spec["arch"]
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"bankml-test {spec['name']}")
    w.add_context_length(spec["ctx"])
    w.add_embedding_length(spec["E"])
    w.add_block_count(spec["L"])
    w.add_feed_forward_length(spec["FF"])
    w.add_head_count(spec["H"])
    w.add_head_count_kv(spec["KV"])
    w.add_rope_freq_base(spec["base"])
    w.add_layer_norm_rms_eps(spec["eps"])
    if "scales" in spec:  # granite's multipliers
        sc = spec["scales"]
        w.add_embedding_scale(sc["embedding"])
        w.add_residual_scale(sc["residual"])
        w.add_attention_scale(sc["attention"])
        w.add_logit_scale(sc["logit"])
    if arch in ("llama", "granite", "smollm3"):   # what a converted Llama 3.2 carries beyond qwen2's keys
        w.add_vocab_size(len(voc["tokens"]))
        w.add_rope_dimension_count(spec["hd"])
        w.add_key_length(spec["hd"])
        w.add_value_length(spec["hd"])
    if arch == "gemma3":  # what convert_hf_to_gguf's Gemma3Model writes
        w.add_key_length(spec["hd"])
        w.add_value_length(spec["hd"])
        w.add_sliding_window(spec["swa"])
    if arch == "phi3":    # Phi3MiniModel's
        w.add_rope_dimension_count(spec.get("rot", spec["hd"]))
        w.add_sliding_window(spec["swa"])
        if spec["hd"] != spec["E"] // spec["H"]:
            w.add_key_length(spec["hd"])
            w.add_value_length(spec["hd"])
        if spec.get("longrope"):
            w.add_rope_scaling_orig_ctx_len(spec["longrope"])
            w.add_rope_scaling_attn_factors(longrope_attn_factor(spec["ctx"], spec["longrope"]))
    w.add_file_type(1)
    if "spm" in voc:
        for name, kind, val in voc["spm"]:
            {"arr": w.add_array, "str": w.add_string, "bool": w.add_bool, "u32": w.add_uint32}[kind](name, val)
        w.add_chat_template(voc["template"])
        return finish_f16(spec, voc, w)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(voc["pre"])
    w.add_token_list(voc["tokens"])
    w.add_token_types(voc["types"])
    w.add_token_merges(voc["merges"])
    w.add_bos_token_id(voc["bos"])
    w.add_eos_token_id(voc["eos"])
    if voc["pad"] is not None:
        w.add_pad_token_id(voc["pad"])
    w.add_add_bos_token(voc["add_bos"])
    if voc.get("unk") is not None:
        w.add_unk_token_id(voc["unk"])
    if voc["pre"] == "tekken":
        w.add_add_eos_token(False)
    w.add_chat_template(voc["template"])
    return finish_f16(spec, voc, w)


def finish_f16(spec, voc, w):
    plan = tensor_plan(spec, len(voc["tokens"]))
    for name, shape, _, _ in plan:
        dt = np.float16 if len(shape) == 2 else np.float32
        w.add_tensor_info(name, shape, np.dtype(dt), int(np.prod(shape)) * np.dtype(dt).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, std, mean in plan:
        if name == "rope_freqs.weight":
            w.write_tensor_data(llama3_factors(spec["base"], spec["hd"]))
            continue
        if name.startswith("rope_factors_"):
            lf, sf = longrope_factors(shape[0])
            w.write_tensor_data(lf if "long" in name else sf)
            continue
        dt = np.float16 if len(shape) == 2 else np.float32
        n = int(np.prod(shape))
        w.write_tensor_data(mm.uniform(mm.tensor_key(spec["seed"], name), n, dt, std, mean).reshape(shape))
    w.close()


def make_model(spec, outdir, shared, kit_bin, want):
    todo = [t for t in spec["types"] if fname(spec, t) in want]
    if not todo:
        return
    base = os.path.join(outdir, fname(spec, "F16"))
    if "F16" in todo or not os.path.exists(base):
        tmp = base + ".tmp"
        write_f16(spec, vocab_of(spec, shared), tmp)
        os.replace(tmp, base)
    for t in todo:
        if t != "F16":
            mm.quantize(kit_bin, base, os.path.join(outdir, fname(spec, t)), t)
        print(f"  {fname(spec, t)}", flush=True)


def generator_id(kit_bin):
    h = hashlib.sha256()
    h.update(open(os.path.abspath(__file__), "rb").read())
    h.update(mm.generator_id(kit_bin).encode())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--shared", default=os.environ.get("BANKML_SHARED") or os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--kit", default=os.path.expanduser("~/.cache/bankml-oracle/bin"))
    a = ap.parse_args()
    specs = [s for s in GRAPHS if not a.only or s["name"] in a.only]
    if a.list:
        for s in specs:
            print(f"{s['name']:<20} {s['arch']:<5} E={s['E']} L={s['L']} H={s['H']} KV={s['KV']} hd={s['hd']} "
                  f"FF={s['FF']} vocab={s['vocab']} {' '.join(s['types'])}")
        return 0
    if not a.outdir:
        ap.error("OUTDIR is required")
    if not os.path.exists(os.path.join(a.kit, "llama-quantize")):
        sys.exit(f"make_graph_models: no llama-quantize in {a.kit}: run sh ../shared/oracle/install.sh")
    os.makedirs(a.outdir, exist_ok=True)
    gid = generator_id(a.kit)
    stamp = os.path.join(a.outdir, ".generator")
    same = os.path.exists(stamp) and open(stamp).read().strip() == gid
    want = set(f for f in files_of(specs) if not same or not os.path.exists(os.path.join(a.outdir, f)))
    if not want:
        return 0
    if not same and os.path.exists(stamp):
        os.remove(stamp)
    print(f"make_graph_models: writing {len(want)} files into {a.outdir}", flush=True)
    for s in specs:
        make_model(s, a.outdir, a.shared, a.kit, want)
    if not a.only:
        with open(stamp, "w") as f:
            f.write(gid + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
