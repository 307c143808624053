#!/usr/bin/env python3
"""oracle_graphs.py -- the qwen2, Llama 3.x, Gemma 3, Granite, SmolLM3 and Phi-3 graphs in real models' shapes against
llama.cpp b11669 (issue 20).

The models are testing/make_graph_models.py's (`make graph-models`, into build/graph-models): Qwen2.5-0.5B's
shape (qwen2: Q/K/V biases, NeoX RoPE, the qwen2 vocabulary) and Llama-3.2-1B's (llama with rope_freqs.weight,
the llama-bpe vocabulary), two layers each, and Gemma-3-1B's (gemma3: six layers, five of them with a sliding
window cut to 128, GeGLU, four norms per layer, Q/K norms, the embedding scale; Llama 2's SPM vocabulary),
Granite-3.3-2B's (its four multipliers; refact), SmolLM3-3B's (four layers, the 4th without RoPE; llama-bpe) and
Phi-3-mini's (fused attn_qkv and ffn_up; phi-3), in F16 and Q8_0. For each of the twelve files (--full: every
file in (b) and (c) too; ORACLE_GRAPHS_ONLY=a,b keeps the models whose names contain a or b):

  (a) per-layer dumps: build/kit-llama-dump (libllama) against testing/forward_driver.c, every layer's
      attn_norm, Qcur (after the biases and RoPE), kqv_out, attn_out (llama), ffn_inp, ffn_out, l_out, then
      result_norm, result_output and the logits byte for byte, for a 300-token prompt (tiled attention) and
      two decode steps; a 20-token prompt (reference kernel) and one step on qwen2's, llama's and gemma3's F16
      files; on gemma3 F16 also
      200 tokens + 2 one-row steps past the window (the reference kernel masked below it) and 150 tokens
      with the portable kernels, and `bankml serve` without --swa-full refused with its reason.
  (b) HTTP (qwen2 F16, llama Q8_0, gemma3 F16 with --swa-full on both), `bankml serve` and llama-server side by side (`-t 2 -c 4096 -np 1 --jinja`; testing/oracle_e2e.py's
      helpers; --full: granite F16 too): five greedy chat conversations (one multi-turn), a prompt of more than 512 tokens (two
      micro-batches), a seeded sampled chat and a seeded sampled /completion, all with cache_prompt false,
      then a conversation continued with cache_prompt true (the second turn reuses the first's cells):
      status and the whole body equal but ids, times and the receipt.
  (c) greedy ids (qwen2 Q8_0, llama F16, gemma3 Q8_0 with llama-server --swa-full; --full: smollm3 F16, phi3
      Q8_0 too): llama-server /completion on a 530-token id prompt against
      forward_driver's argmax (the prompt crosses a micro-batch; the decode runs past 512 cells with the split-KV kernel).

Prints `N passed, N failed, N skipped`; exits 1 on a failure. Skipped without the kit or ../shared (a failure
under BANKML_REQUIRE_ORACLE=1).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import oracle  # noqa: E402
import oracle_e2e as e2e  # noqa: E402
import oracle_forward as fwd  # noqa: E402

S = oracle.Suite("oracle_graphs")
e2e.S = S   # the e2e helpers count into this suite
MODELS_DIR = os.path.join(ROOT, "build", "graph-models")
MODELS = ["qwen2.5-0.5b-shape-f16", "qwen2.5-0.5b-shape-q8_0", "llama-3.2-1b-shape-f16", "llama-3.2-1b-shape-q8_0",
          "gemma-3-1b-shape-f16", "gemma-3-1b-shape-q8_0", "granite-3.3-2b-shape-f16", "granite-3.3-2b-shape-q8_0",
          "smollm3-3b-shape-f16", "smollm3-3b-shape-q8_0", "phi-3-mini-shape-f16", "phi-3-mini-shape-q8_0",
          "mistral-nemo-shape-f16", "mistral-nemo-shape-q8_0", "phi-3.5-mini-shape-f16", "phi-3.5-mini-shape-q8_0",
          "phi-4-mini-shape-f16", "phi-4-mini-shape-q8_0"]
FULL = "--full" in sys.argv[1:]   # HTTP and greedy ids on every file
# Each graph in both weight types over HTTP or through the greedy ids, one each (the dumps run on all four):
# CI time (loading 0.2-0.6 GB files into two servers is most of a case's cost).
# CI time: granite, smollm3 and phi3 only by their dumps (their walks are llama's with options); --full adds
# granite F16 over HTTP and the greedy ids of smollm3 F16 and phi3 Q8_0 (measured equal: docs/oracles.md)
HTTP = {"qwen2.5-0.5b-shape-f16", "llama-3.2-1b-shape-q8_0", "gemma-3-1b-shape-f16"}
GREEDY = {"qwen2.5-0.5b-shape-q8_0", "llama-3.2-1b-shape-f16", "gemma-3-1b-shape-q8_0"}
# issue 20's second round (Mistral Nemo: tekken, head 128 under E 5120; Phi-3.5: LongRoPE; Phi-4-mini: partial RoPE,
# LongRoPE, gpt-4o): by default one 300-token dump per new thing (-c 512: LongRoPE's short factors; -c 8192: the long
# ones); --full: every file's dumps at both, HTTP and greedy ids on each (measured equal: docs/oracles.md)
NO_DUMP_512 = {"mistral-nemo-shape-f16", "phi-3.5-mini-shape-q8_0", "phi-4-mini-shape-f16"}
DUMP_LONG = {"phi-3.5-mini-shape-f16", "phi-4-mini-shape-f16"}
LONGROPE = {"phi-3.5-mini-shape-f16", "phi-3.5-mini-shape-q8_0", "phi-4-mini-shape-f16", "phi-4-mini-shape-q8_0"}
if FULL:
    HTTP = GREEDY = set(MODELS)
    NO_DUMP_512 = set()
    DUMP_LONG = set(LONGROPE)
elif os.environ.get("ORACLE_GRAPHS_EXTRA"):   # the --full cases of the three (development)
    HTTP = HTTP | {"granite-3.3-2b-shape-f16"}
    GREEDY = GREEDY | {"smollm3-3b-shape-f16", "phi-3-mini-shape-q8_0"}
if os.environ.get("ORACLE_GRAPHS_HTTP"):      # development: HTTP / greedy ids on these too (comma-separated)
    HTTP = HTTP | set(os.environ["ORACLE_GRAPHS_HTTP"].split(","))
if os.environ.get("ORACLE_GRAPHS_GREEDY"):
    GREEDY = GREEDY | set(os.environ["ORACLE_GRAPHS_GREEDY"].split(","))
# gemma3's sliding window: both servers with --swa-full (bankml refuses a window model without it; without it
# llama-server cuts prompts around its context checkpoints: other bits, measured)
SWA = {"gemma-3-1b-shape-f16", "gemma-3-1b-shape-q8_0"}


def n_vocab(name):
    for prefix, n in (("qwen2.5", 151936), ("gemma", 32000), ("granite", 49216), ("phi-3", 32064)):
        if name.startswith(prefix):
            return n
    return 128256


def start_pair(kit, model, fork, extra=()):
    return oracle.start_both(oracle.Server.llama(kit, model, ctx=e2e.CTX, extra=list(extra)),
                             oracle.Server.bankml(model, ctx=e2e.CTX, extra=["--fork", fork, *extra]))


def swa_refusal(model, fork):
    """bankml serve on a window model without --swa-full: refused at start, with the reason and the flag."""
    p = subprocess.run([e2e.BIN, "serve", model, "--fork", fork, "--listen", "127.0.0.1:%d" % oracle.free_port()],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", timeout=60)
    S.check(f"{os.path.basename(model)}: serve without --swa-full refuses with the reason",
            p.returncode != 0 and "sliding-window model (window of 128)" in p.stdout and "--swa-full" in p.stdout,
            f"exit {p.returncode}: {p.stdout[-600:]}")


def tekken40_model(kit):
    """A 40-layer tekken file without a chat template (E 64; llama-bpe's tokens under `tekken`, as
    testing/make_pretok_vocabs.py writes them), by ../shared/oracle/shaped_model.py, kept in build/tekken-40
    while newer than both scripts; None when it fails."""
    shared = oracle.find_shared()
    vdir = os.path.join(ROOT, "build", "tekken-40")
    out = os.path.join(vdir, "tekken-40-layers.gguf")
    scripts = [os.path.join(HERE, "make_pretok_vocabs.py"), os.path.join(shared, "oracle", "shaped_model.py")]
    if os.path.exists(out) and all(os.path.getmtime(out) > os.path.getmtime(s) for s in scripts):
        return out
    for argv in ([kit.tool("gguf-py"), os.path.join(HERE, "make_pretok_vocabs.py"), vdir, shared, "tekken"],
                 [kit.tool("gguf-py"), os.path.join(shared, "oracle", "shaped_model.py"),
                  os.path.join(vdir, "ggml-vocab-tekken.gguf"), out, "--arch", "llama", "--embd", "64", "--layers",
                  "40", "--ff", "128", "--heads", "2", "--kv", "1"]):
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        if not S.check("tekken 40 layers: " + os.path.basename(argv[1]), p.returncode == 0, p.stdout[-800:]):
            return None
    return out


def tekken40_case(kit, model, fork):
    """llama_model_chat_template's one-off: a tekken vocabulary in 40 layers without a template gets the text
    "mistral-v7-tekken" (Mistral Small 3 files); both servers render and answer the same."""
    try:
        L, B = oracle.start_both(oracle.Server.llama(kit, model, ctx=512),
                                 oracle.Server.bankml(model, ctx=512, extra=["--fork", fork]))
    except oracle.ServerError as e:
        S.fail("servers tekken 40 layers", str(e)[:800])
        return
    try:
        msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"},
                {"role": "user", "content": "Q"}]
        reqs = [("/apply-template", {"messages": msgs}), ("/v1/chat/completions", e2e.chat(msgs, 6))]
        pairs = e2e.both(L, B, reqs)
        e2e.compare(["tekken 40 layers, no template: /apply-template", "tekken 40 layers, no template: chat"],
                    pairs)
        (sb, rb) = pairs[0][1]
        S.check("tekken 40 layers, no template: the prompt is the text mistral-v7-tekken",
                sb == 200 and e2e.parse(rb) == {"prompt": "mistral-v7-tekken"}, f"{sb} {rb[:200]}")
    finally:
        L.stop()
        B.stop()


def ensure_graph_models(only_gemma=False):
    args = ["GRAPH_MODELS_ONLY=--only gemma-3-1b-shape"] if only_gemma else []
    p = subprocess.run(["make", "-s", "graph-models", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, errors="replace")
    if p.stdout.strip():
        print(p.stdout.rstrip())
    if p.returncode != 0:
        oracle.skip_all(f"`make graph-models` failed ({p.returncode})", S)


def http_cases(base, L, B):
    """(b): the requests to both servers, compared whole."""
    reqs, names = [], []
    for label, msgs in e2e.CONVERSATIONS:
        reqs.append(("/v1/chat/completions", e2e.chat(msgs, 12)))
        names.append(f"greedy chat {base} {label}")
    reqs.append(("/v1/chat/completions", e2e.chat([{"role": "user", "content": e2e.LONG_TEXT}], 8)))
    names.append(f"long prompt {base}")
    reqs.append(("/v1/chat/completions", {"messages": e2e.CONVERSATIONS[2][1], "max_tokens": 12, "seed": 42,
                                          "temperature": 0.9, "top_k": 50, "top_p": 0.95, "cache_prompt": False}))
    names.append(f"seeded chat {base}")
    reqs.append(("/completion", {"prompt": "The capital of France is", "n_predict": 12, "seed": 7,
                                 "temperature": 1.1, "min_p": 0.02, "cache_prompt": False, "n_probs": 3}))
    names.append(f"seeded completion {base} (n_probs 3)")
    first = [{"role": "user", "content": "Tell me a story about a cat."}]
    reqs.append(("/v1/chat/completions", dict(e2e.chat(first, 10), cache_prompt=True)))
    names.append(f"cached turn 1 {base}")
    pairs = e2e.both(L, B, reqs)
    # the second turn carries the first answer as llama-server gave it
    (sl, rl), _ = pairs[-1]
    j = e2e.parse(rl)
    answer = j["choices"][0]["message"]["content"] if isinstance(j, dict) and "choices" in j else "..."
    second = first + [{"role": "assistant", "content": answer}, {"role": "user", "content": "And then?"}]
    pairs += e2e.both(L, B, [("/v1/chat/completions", dict(e2e.chat(second, 10), cache_prompt=True))])
    names.append(f"cached turn 2 {base} (reuses turn 1's cells)")
    e2e.compare(names, pairs)
    n_full = 0
    for name, ((sl, rl), _) in zip(names, pairs):
        b = e2e.parse(rl)
        u = b.get("usage", {}) if isinstance(b, dict) else {}
        if name.startswith("greedy chat"):
            n_full += u.get("completion_tokens") == 12
        if name.startswith("long prompt"):
            S.check(name + ": > 512 prompt tokens", u.get("prompt_tokens", 0) > 512, f"usage {u}")
        if name.startswith("cached turn 2"):
            cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
            S.check(name + ": llama-server reused cells", cached > 0, f"usage {u}")
    S.check(f"greedy chat {base}: answers of 12 tokens (not an immediate end)", n_full >= 3,
            f"{n_full} of {len(e2e.CONVERSATIONS)}")
    return len(reqs) + 1


def swa_cases(kit, model, fork):
    """The swa part: llama-server's default window cache (no --swa-full; both servers with --cache-ram 0, which
    bankml needs without --swa-full): greedy /completion ids and n_probs as printed, on prompts shorter than, equal
    to and past the window (128), past 512 (a 14 + 512 + 4 split) and past the 768-cell window cache (cells reused,
    the attention in cell order); a resumed prefix past the window (kept, no checkpoint); a prefix within the
    window (a context checkpoint restored); a kept prefix in a wrapped window cache; a prefix no checkpoint fits
    (the whole prompt again); cache_prompt false."""
    base = os.path.basename(model).replace(".gguf", "")
    nv = n_vocab(base)
    extra = ["--cache-ram", "0"]
    try:
        L, B = start_pair(kit, model, fork, extra)
    except oracle.ServerError as e:
        S.fail(f"swa servers {base}", str(e)[:800])
        return 0
    try:
        def comp(ids, n, cache=False):
            return ("/completion", {"prompt": ids, "n_predict": n, "temperature": 0, "n_probs": 3,
                                    "cache_prompt": cache})
        lens = (100, 128, 300, 530, 1000)
        reqs = [comp(fwd.rand_ids(31 + n, n, 3, nv - 3), 8) for n in lens]
        names = [f"swa {base} {n}-token /completion (greedy, n_probs 3)" for n in lens]
        p300 = fwd.rand_ids(41, 300, 3, nv - 3)
        reqs += [comp(p300, 8, True), comp(p300 + fwd.rand_ids(42, 60, 3, nv - 3), 8, True)]
        names += [f"swa {base} cached turn 1 (300 tokens)", f"swa {base} cached turn 2 (300 kept, 60 new)"]
        pairs = e2e.both(L, B, reqs)
        e2e.compare(names, pairs, floats_as_text=True)
        b = e2e.parse(pairs[-1][0][1])
        S.check(f"swa {base} cached turn 2: llama-server kept 300 tokens",
                isinstance(b, dict) and b.get("tokens_cached", 0) >= 300 and
                b.get("timings", {}).get("cache_n") == 300, str(b)[:300])
        p100 = fwd.rand_ids(43, 100, 3, nv - 3)
        p1000 = fwd.rand_ids(45, 1000, 3, nv - 3)
        rq = [comp(p100, 4, True), comp(p100 + fwd.rand_ids(44, 20, 3, nv - 3), 4, True),
              comp(p1000, 4, True), comp(p1000[:600] + fwd.rand_ids(46, 50, 3, nv - 3), 4, True),
              comp(p1000[:300] + fwd.rand_ids(47, 50, 3, nv - 3), 4, True), comp(p100, 4, False)]
        rn = [f"swa {base} 100 tokens, cached",
              f"swa {base} its 120-token extension (a prefix within the window: checkpoint 96 restored, 95 kept)",
              f"swa {base} 1,000 tokens, cached (checkpoints at 484 and 996)",
              f"swa {base} 600 of them + 50 (the wrapped window cache kept)",
              f"swa {base} 300 of them + 50 (no checkpoint fits: the prompt again)",
              f"swa {base} cache_prompt false"]
        pr = e2e.both(L, B, rq)
        e2e.compare(rn, pr, floats_as_text=True)
        cached = [(e2e.parse(x[0][1]) or {}).get("timings", {}).get("cache_n") for x in pr]
        S.equal(f"swa {base} llama-server's cache_n of those six", cached, [0, 95, 0, 600, 0, 0])
        # chats: b11669 also cuts the prompt at user messages (the autoparser's user_start tokens)
        first = [{"role": "user", "content": "Tell me a story about a cat."}]
        cq = [("/v1/chat/completions", e2e.chat(msgs, 8)) for _, msgs in e2e.CONVERSATIONS[:3]]
        cn = [f"swa {base} greedy chat {label}" for label, _ in e2e.CONVERSATIONS[:3]]
        cq.append(("/v1/chat/completions", e2e.chat([{"role": "user", "content": e2e.LONG_TEXT}], 8)))
        cn.append(f"swa {base} chat, > 512-token prompt")
        cq.append(("/v1/chat/completions", dict(e2e.chat(first, 8), cache_prompt=True)))
        cn.append(f"swa {base} cached chat turn 1")
        pc = e2e.both(L, B, cq)
        j = e2e.parse(pc[-1][0][1])
        answer = j["choices"][0]["message"]["content"] if isinstance(j, dict) and "choices" in j else "..."
        second = first + [{"role": "assistant", "content": answer}, {"role": "user", "content": "And then?"}]
        pc += e2e.both(L, B, [("/v1/chat/completions", dict(e2e.chat(second, 8), cache_prompt=True))])
        cn.append(f"swa {base} cached chat turn 2")
        e2e.compare(cn, pc)
        return len(reqs) + len(rq) + len(cn)
    finally:
        L.stop()
        B.stop()


def main():
    kit = oracle.kit_or_skip(S)
    oracle.shared_or_skip(S)
    p = subprocess.run(["make", "-s"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not S.check("make", p.returncode == 0, p.stdout[-2000:]):
        S.finish()
    ok, out = fwd.build()
    if not S.check("build/forward-driver builds", ok, out[-2000:]):
        S.finish()
    p = subprocess.run(["make", "-s", "build/kit-llama-dump"], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, errors="replace")
    if not S.check("build/kit-llama-dump builds", p.returncode == 0, p.stdout[-2000:]):
        S.finish()
    swa_only = os.environ.get("ORACLE_GRAPHS_SWA") == "only"   # the swa part alone
    ensure_graph_models(swa_only)
    only = os.environ.get("ORACLE_GRAPHS_ONLY")   # comma-separated substrings of model names (development)
    models = [m for m in MODELS if not only or any(o in m for o in only.split(","))]
    if swa_only:
        models = [m for m in models if m in SWA]
    paths = {m: os.path.join(MODELS_DIR, m + ".gguf") for m in models}
    tmp = tempfile.mkdtemp(prefix="oracle-graphs-")
    fork = os.path.join(tmp, "graphs.FORK.json")
    tek40 = tekken40_model(kit) if not swa_only and (not only or "tekken" in only) else None
    e2e.pin(list(paths.values()) + ([tek40] if tek40 else []), fork)
    n_http = 0
    try:
        swa_models = [m for m in models if m in SWA and (FULL or m.endswith("q8_0"))]
        for m in swa_models:
            t0 = time.time()
            n_http += swa_cases(kit, paths[m], fork)
            print(f"({m} swa: {time.time() - t0:.1f} s)", flush=True)
        if swa_only:
            models, tek40 = [], None
        if tek40:
            tekken40_case(kit, tek40, fork)
        for m in models:
            t0 = time.time()
            nv = n_vocab(m)
            if m not in NO_DUMP_512:
                fwd.dump_case(S, kit, tmp, f"{m} 300 tokens (tiled; decode)", paths[m], fwd.rand_ids(7, 300, 3, nv - 3), 2)
            if m in DUMP_LONG:   # -c 8192 > the original 4096: LongRoPE's long factors
                fwd.dump_case(S, kit, tmp, f"{m} 300 tokens, -c 8192 (LongRoPE's long factors)", paths[m],
                              fwd.rand_ids(7, 300, 3, nv - 3), 2, ctx=8192)
            if m.endswith("f16") and (FULL or m.startswith(("qwen", "llama", "gemma"))):
                fwd.dump_case(S, kit, tmp, f"{m} 20 tokens (reference)", paths[m], fwd.rand_ids(9, 20, 3, nv - 3), 1)
            if m == "gemma-3-1b-shape-f16":   # window 128: a decode of one row past it (reference), portable
                fwd.dump_case(S, kit, tmp, f"{m} 200 tokens + 2 steps (window; reference decode)", paths[m],
                              fwd.rand_ids(11, 200, 3, nv - 3), 2)
                fwd.dump_case(S, kit, tmp, f"{m} 150 tokens (portable kernels; tiled past the window)", paths[m],
                              fwd.rand_ids(13, 150, 3, nv - 3), 1, extra=("-portable", "1"))
                swa_refusal(paths[m], fork)
            extra = ["--swa-full"] if m in SWA else []
            if m in HTTP:
                try:
                    L, B = start_pair(kit, paths[m], fork, extra)
                except oracle.ServerError as e:
                    S.fail(f"servers {m}", str(e)[:800])
                    continue
                try:
                    n_http += http_cases(m, L, B)
                finally:
                    L.stop()
                    B.stop()
            if m in GREEDY:
                fwd.greedy_case(S, kit, f"{m} (prompt crosses 512, decode past 512 cells)", paths[m],
                                fwd.rand_ids(19, 530, 3, nv - 3), 32, 8192 if m in LONGROPE else 1024,
                                server_extra=extra)
            print(f"({m}: {time.time() - t0:.1f} s)", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"counts: {n_http} HTTP requests to each server", flush=True)
    S.finish()


if __name__ == "__main__":
    main()
