"""oracle_kv_types.py -- KV cache types: `bankml serve -ctk K -ctv V` against llama-server b11669 with the same
flags (-t 2 -c 1024 -np 1 --jinja), on a qwen3 model with heads of 128 and a llama model with heads of 64
(random weights, testing/make_models.py).

For each model and each type pair: a greedy /completion over a prompt past 512 keys (with n_probs 3: the logits'
bits show), a seeded one, and a two-turn greedy chat (the slot's prompt reuse, top_logprobs 2); every answer's
content, tokens, probabilities and counts equal. Then: the Hadamard rotation off (LLAMA_ATTN_ROT_DISABLE=1); the
refusals (an unknown type's words, a quantized K on heads of 8: llama-server's load-time exit, a quantized V
without flash attention); with iq4_nl, the greedy /completion and a seeded chat streamed too; a slot saved from a q8_0
and from an iq4_nl cache byte-equal to llama-server's file for the same conversation, and restored.

ORACLE_KV_ONLY=TYPE runs only the pairs and slot files naming that cache type (`ORACLE_KV_ONLY=iq4_nl`: 5 pairs,
2 slot files, 42 checks), without the refusals and the --cache-ram cases.

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
           ("bf16", "bf16"), ("f16", "q8_0"), ("q8_0", "f16"), ("f32", "f16"), ("f32", "f32"), ("bf16", "q4_1"),
           ("iq4_nl", "iq4_nl"), ("iq4_nl", "f16"), ("f16", "iq4_nl")],
    LLAMA: [("q8_0", "q8_0"), ("q4_0", "q5_1"), ("q5_0", "q4_1"), ("q4_1", "q8_0"), ("q5_1", "q4_0"),
            ("f16", "bf16"), ("f16", "f32"), ("iq4_nl", "iq4_nl"), ("q8_0", "iq4_nl")],
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


def same_stream(L, B, label, path, body):
    (sl, el), (sb, eb) = L.stream(path, body), B.stream(path, body)
    S.equal(label, [sb, oracle.stream_view(eb)], [sl, oracle.stream_view(el)])


def same(L, B, label, path, body, view):
    (sl, jl), (sb, jb) = L.post(path, body), B.post(path, body)
    S.equal(label, [sb, view(jb)], [sl, view(jl)])
    return sl, jl


LONG = "The quick brown fox jumps over the lazy dog while the cat watches from the old wooden fence. " * 40
TURNS = ["Hello there", "Tell me a story about a cat."]


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
        if "iq4_nl" in (k, v):   # and streamed: the same tokens as events
            same_stream(L, B, f"{label} streamed greedy, prompt past 512 keys", "/completion",
                        {"prompt": LONG + " Then", "n_predict": 6, "temperature": 0, "n_probs": 2, "stream": True})
            same_stream(L, B, f"{label} streamed seeded chat", "/v1/chat/completions",
                        {"messages": [{"role": "user", "content": LONG[:1500]}], "max_tokens": 6, "temperature": 0.8,
                         "seed": 11, "stream": True, "stream_options": {"include_usage": True}})
    finally:
        L.stop()
        B.stop()


ONLY = os.environ.get("ORACLE_KV_ONLY", "")
for path, pairs in PAIRS.items():
    for k, v in pairs:
        if not ONLY or ONLY in (k, v):
            run_pair(path, k, v)

# the rotation off: both servers read LLAMA_ATTN_ROT_DISABLE (the answers differ from the rotated ones)
env = dict(os.environ, LLAMA_ATTN_ROT_DISABLE="1")
if not ONLY:
    run_pair(QWEN, "q8_0", "q4_0", env=env, tag=" LLAMA_ATTN_ROT_DISABLE=1")


def exit_words(argv, env=None):
    """(exit code, the output's lines) of a server that should exit at start."""
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                       timeout=60, env=env)
    return p.returncode, p.stdout


# refusals: llama-server exits with these words, bankml refuses with the same ones
REFUSALS = [
    (STORIES, ["-ctk", "q8_0"], "K cache type q8_0 with block size 32 does not divide n_embd_head_k=8"),
    (STORIES, ["-ctv", "q5_1"], "V cache type q5_1 with block size 32 does not divide n_embd_head_v=8"),
    (STORIES, ["-ctk", "iq4_nl"], "K cache type iq4_nl with block size 32 does not divide n_embd_head_k=8"),
    (QWEN, ["-fa", "off", "-ctv", "q8_0"], "quantized V cache requires flash_attn to be enabled"),
    (QWEN, ["-ctk", "q9"], 'error while handling argument "-ctk": Unsupported cache type: q9'),
]
for path, fl, words in ([] if ONLY else REFUSALS):
    label = f"{os.path.basename(path)} {' '.join(fl)}"
    port = str(oracle.free_port())
    rl, ol = exit_words([kit.tool("llama-server"), "-m", path, "--host", "127.0.0.1", "--port", port, "-t", "2",
                         "-c", "512", *fl])
    rb, ob = exit_words([BIN, "serve", path, "--fork", FORK, "--listen", "127.0.0.1:" + port, "--ctx", "512", *fl])
    S.check(f"{label}: llama-server exits with its words", rl != 0 and words in ol, f"rc {rl}: {ol[-400:]}")
    S.check(f"{label}: bankml refuses with them", rb != 0 and words in ob, f"rc {rb}: {ob[-400:]}")
rb, ob = exit_words([BIN, "serve", QWEN, "--fork", FORK, "--listen", "127.0.0.1:" + str(oracle.free_port()),
                     "--ctx", "512"], env=dict(os.environ, BANKML_CACHE_TYPE="q3_0"))
ONLY or S.check("BANKML_CACHE_TYPE=q3_0: refused with the types", rb != 0 and "BANKML_CACHE_TYPE=q3_0: Unsupported cache "
        "type (allowed: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)" in ob, f"rc {rb}: {ob[-400:]}")

# the host prompt cache counts each state's real bytes: with --cache-ram 1 (MiB) a state of ~600 cells fits as
# q8_0 (1,088 bytes a cell on qwen3-e128) but not as f16 (2,048), so A's prompt comes back from the cache after B
for fl, what in () if ONLY else ((["-ctk", "q8_0", "-ctv", "q8_0"], "q8_0 (fits)"),
                                 (["-ctk", "f16", "-ctv", "f16"], "f16 (too big)")):
    extra = [*fl, "--cache-ram", "1"]
    L = oracle.Server.llama(kit, QWEN, ctx=CTX, extra=extra)
    B = oracle.Server.bankml(QWEN, ctx=CTX, extra=["--fork", FORK, *extra])
    try:
        oracle.start_both(L, B)
        for i, prompt in enumerate((LONG[:2600], "Hello " * 40, LONG[:2600] + " again")):
            sl, jl = same(L, B, f"qwen3 --cache-ram 1 {what}: prompt {i + 1} (cache_n)", "/completion",
                          {"prompt": prompt, "n_predict": 3, "temperature": 0}, completion_view)
        cn = jl.get("timings", {}).get("cache_n", -1) if isinstance(jl, dict) else -1
        S.check(f"qwen3 --cache-ram 1 {what}: llama-server {'restores' if 'q8' in what else 'cannot keep'} A's state",
                (cn > 500) == ("q8" in what), f"cache_n {cn}")
    except oracle.ServerError as e:
        S.fail(f"qwen3 --cache-ram 1 {what}", str(e))
    finally:
        L.stop()
        B.stop()

# slot files of a q8_0 and an iq4_nl cache: the same conversation saved by both servers gives the same bytes; each
# file restores in the other server, and a file of another cache type is refused with the reason
for path, ct in ((QWEN, "q8_0"), (LLAMA, "q8_0"), (QWEN, "iq4_nl"), (LLAMA, "iq4_nl")):
    if ONLY and ct != ONLY:
        continue
    base = os.path.basename(path)
    dl, db = tempfile.mkdtemp(prefix="kvt-l-", dir=tmp), tempfile.mkdtemp(prefix="kvt-b-", dir=tmp)
    fl = ["-ctk", ct, "-ctv", ct]
    L = oracle.Server.llama(kit, path, ctx=CTX, extra=[*fl, "--slot-save-path", dl])
    B = oracle.Server.bankml(path, ctx=CTX, extra=["--fork", FORK, *fl, "--slot-save-path", db],
                             env=dict(os.environ, BANKML_CACHE_TYPE="q4_0"))   # the flags win over the variable
    try:
        oracle.start_both(L, B)
    except oracle.ServerError as e:
        S.fail(f"{base} slot files", str(e))
        continue
    try:
        body = {"prompt": LONG[:400], "n_predict": 5, "temperature": 0}
        same(L, B, f"{base} {ct} slot: the conversation", "/completion", body, completion_view)
        (sl, jl), (sb, jb) = L.post("/slots/0?action=save", {"filename": "s.bin"}), \
            B.post("/slots/0?action=save", {"filename": "s.bin"})
        view = lambda j: {k: j.get(k) for k in ("id_slot", "filename", "n_saved", "n_written")} \
            if isinstance(j, dict) else j
        S.equal(f"{base} {ct} slot save answer", [sb, view(jb)], [sl, view(jl)])
        with open(os.path.join(dl, "s.bin"), "rb") as f:
            fl_bytes = f.read()
        with open(os.path.join(db, "s.bin"), "rb") as f:
            fb_bytes = f.read()
        S.check(f"{base} {ct} slot file: bankml's bytes are llama-server's ({len(fl_bytes)} bytes)",
                fl_bytes == fb_bytes, f"{len(fb_bytes)} vs {len(fl_bytes)} bytes, first difference at "
                f"{next((i for i, (x, y) in enumerate(zip(fb_bytes, fl_bytes)) if x != y), min(len(fb_bytes), len(fl_bytes)))}")
        # llama-server's file restored by bankml (no sidecar: its structure), then the same next answer
        with open(os.path.join(db, "from-llama.bin"), "wb") as f:
            f.write(fl_bytes)
        for srv, name in ((L, "s.bin"), (B, "from-llama.bin")):
            srv.post("/slots/0?action=erase", {})
        (sl, jl), (sb, jb) = L.post("/slots/0?action=restore", {"filename": "s.bin"}), \
            B.post("/slots/0?action=restore", {"filename": "from-llama.bin"})
        rview = lambda j: {k: j.get(k) for k in ("id_slot", "n_restored", "n_read")} if isinstance(j, dict) else j
        S.equal(f"{base} {ct} slot restore answer", [sb, rview(jb)], [sl, rview(jl)])
        same(L, B, f"{base} {ct} slot: the answer after the restore", "/completion",
             dict(body, prompt=LONG[:400] + " and the"), completion_view)
    finally:
        L.stop()
        B.stop()
    # a quantized cache's file in an f16 server: refused with the reason, then a correct answer
    B = oracle.Server.bankml(path, ctx=CTX, extra=["--fork", FORK, "--slot-save-path", db])
    try:
        B.start()
        st, j = B.post("/slots/0?action=restore", {"filename": "from-llama.bin"})
        msg = j.get("error", {}).get("message", "") if isinstance(j, dict) else str(j)
        S.check(f"{base} {ct} slot file in an f16 server: refused", st == 400 and "Unable to restore slot: it was "
                f"saved with a K cache of type {ct}; this server keeps f16 (start it with -ctk {ct}" in msg,
                f"{st} {msg}")
    except oracle.ServerError as e:
        S.fail(f"{base} f16 server", str(e))
    finally:
        B.stop()

S.finish()
