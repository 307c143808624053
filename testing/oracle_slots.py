"""oracle_slots.py -- several slots and llama-server's batch sizes: `bankml serve -np N -b B -ub U` against
llama-server b11669 with the same flags (-t 2 -c 512 --jinja), on stories260K and two random-weight models.

Each configuration (-np 2 -b 32, -np 1 -b 32, -np 2 -ub 32, -np 2 -ub 128) runs, on both servers, the same
sequence of requests: /props (total_slots, the per-slot n_ctx), /completion prompts that pick slots by prompt
similarity, by least recent use and by `id_slot` (in range, wrapped, negative, of other JSON types), prompts past
a batch boundary (-b 32: 200 tokens are 7 decode calls), greedy and seeded; streamed /completion (id_slot in
each event); multi-turn greedy and seeded chats;
two conversations interleaved turn by turn (each keeps its own slot); then /metrics' n_decode_total and
n_tokens_max. Every answer equal: content, usage, cache_n, prompt_n, id_slot, tokens_cached, and the
probabilities (n_probs 3 on /completion, top_logprobs 2 on the greedy chat), where the logits' bits show.

The bankml binary is BANKML_BIN or ./bankml. Standard library only."""
import os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

CTX = 512
S = oracle.Suite("oracle_slots")
kit = oracle.kit_or_skip(S)
models = oracle.ensure_models(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")

MODELS = [os.path.join(shared, "models", "stories260K.gguf"), os.path.join(models, "qwen3-e128-f32.gguf"),
          os.path.join(models, "llama-e384-q8_0.gguf")]
CONFIGS = [["-np", "2", "-b", "32"], ["-np", "1", "-b", "32"], ["-np", "2", "-ub", "32"], ["-np", "2", "-ub", "128"]]

tmp = tempfile.mkdtemp(prefix="oracle-slots-")
FORK = os.path.join(tmp, "test.FORK.json")
for m in MODELS:
    p = subprocess.run([BIN, "pin", m, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        oracle.skip_all(f"bankml pin --write {m} failed: {p.stdout.strip()}", S)

IGN = ("created", "id", "system_fingerprint", "bankml_receipt", "prompt_ms", "prompt_per_token_ms",
       "prompt_per_second", "predicted_ms", "predicted_per_token_ms", "predicted_per_second")


def completion_view(body):
    """What must be equal in a /completion answer: the answer, the slot and what it held."""
    if not isinstance(body, dict) or "content" not in body:
        return body
    return {"content": body["content"], "id_slot": body.get("id_slot"), "tokens_cached": body.get("tokens_cached"),
            "tokens_predicted": body.get("tokens_predicted"), "tokens_evaluated": body.get("tokens_evaluated"),
            "stop_type": body.get("stop_type"), "truncated": body.get("truncated"),
            "timings": {k: body["timings"][k] for k in ("cache_n", "prompt_n", "predicted_n")},
            "completion_probabilities": body.get("completion_probabilities")}   # the logits' bits show here


def chat_view(body):
    if not isinstance(body, dict) or "choices" not in body:
        return body
    return {"choices": body["choices"], "usage": body["usage"],
            "timings": {k: body["timings"][k] for k in ("cache_n", "prompt_n", "predicted_n")}}


def same(L, B, label, path, body, view):
    (sl, jl), (sb, jb) = L.post(path, body), B.post(path, body)
    S.equal(label, [sb, view(jb)], [sl, view(jl)])
    return sl, jl


A = "Once upon a time there was a little girl named Lily. She loved to play"
P_B = "The dog ran to the park and saw a big red ball on the grass"
# the slot sequence: A and B each get a slot (BOS alone is under 10 % of either), their continuations find
# them by similarity; id_slot 0, 5 (wraps to 1), -3 (wraps to 1 as size_t), "1" (a string: ignored), true (1),
# 1.7 (1); 200 tokens past six -b 32 boundaries, then the same plus one token (a cached prefix of 201)
SEQ = [({"prompt": A}, "A"), ({"prompt": P_B}, "B"), ({"prompt": A + " outside"}, "A+"),
       ({"prompt": P_B + " and"}, "B+"), ({"prompt": A, "id_slot": 0}, "A id_slot 0"),
       ({"prompt": A, "id_slot": 5}, "A id_slot 5"), ({"prompt": "Hello", "id_slot": -3}, "Hello id_slot -3"),
       ({"prompt": "x " * 100}, "x*100"), ({"prompt": "x " * 100 + "y"}, "x*100 y"),
       ({"prompt": "Once " * 60, "seed": 3, "temperature": 0.8}, "seeded Once*60"),
       ({"prompt": A, "id_slot": "1"}, "A id_slot '1'"), ({"prompt": P_B, "id_slot": True}, "B id_slot true"),
       ({"prompt": A, "id_slot": 1.7}, "A id_slot 1.7"),
       ({"prompt": P_B + " and", "cache_prompt": False}, "B+ cache_prompt false")]

TURNS = ["Hello there", "Tell me a story about a cat.", "Why is the sky blue?", "Thanks! One more: count to five."]
CONVS = [("You are a helpful assistant.", ["Hello there", "Tell me a story about a cat.", "Why is the sky blue?"]),
         ("Answer like a pirate.", ["Where is the treasure?", "How big is your ship?", "What do you eat?"])]


def conversation(L, B, label, turns, extra):
    msgs = []
    for i, q in enumerate(turns):
        msgs.append({"role": "user", "content": q})
        sl, jl = same(L, B, f"{label} turn {i + 1}", "/v1/chat/completions", dict(extra, messages=msgs), chat_view)
        text = jl["choices"][0]["message"]["content"] if sl == 200 else ""
        msgs.append({"role": "assistant", "content": text or "ok"})


def interleaved(L, B, label, extra):
    """Two conversations turn by turn: returns llama-server's cache_n of each turn."""
    hist = [[{"role": "system", "content": s}] for s, _ in CONVS]
    seen = []
    for t in range(3):
        for ci, (_, turns) in enumerate(CONVS):
            hist[ci].append({"role": "user", "content": turns[t]})
            sl, jl = same(L, B, f"{label} {'AB'[ci]}{t + 1}", "/v1/chat/completions", dict(extra, messages=hist[ci]),
                          chat_view)
            text = jl["choices"][0]["message"]["content"] if sl == 200 else ""
            seen.append(jl.get("timings", {}).get("cache_n") if sl == 200 else None)
            hist[ci].append({"role": "assistant", "content": text or "ok"})
    return seen


def metrics(srv):
    st, text = srv.get("/metrics")
    if st != 200 or not isinstance(text, str):
        return st, text
    keep = ("llamacpp:n_decode_total", "llamacpp:n_tokens_max", "llamacpp:prompt_tokens_total",
            "llamacpp:tokens_predicted_total")
    return st, sorted(l for l in text.splitlines() if l.split(" ")[0] in keep)


for path in MODELS:
    base = os.path.basename(path)
    stories = base.startswith("stories")
    for cfg in CONFIGS:
        label = f"{base} {' '.join(cfg)}"
        try:
            # Server.llama's flags with the configuration's -np instead of its -np 1
            largv = [kit.tool("llama-server"), "-m", path, "--host", "127.0.0.1", "--port", "{port}", "-t", "2",
                     "-c", str(CTX), "--jinja", "--no-webui", "--metrics", *cfg]
            with oracle.Server(largv, name="llama-slots") as L, \
                    oracle.Server.bankml(path, ctx=CTX, extra=["--fork", FORK, "--metrics", *cfg]) as B:
                (sl, pl), (sb, pb) = L.get("/props"), B.get("/props")
                view = lambda p: [p.get("total_slots"), p.get("default_generation_settings", {}).get("n_ctx")] \
                    if isinstance(p, dict) else p
                S.equal(f"{label} /props total_slots, n_ctx", [sb, view(pb)], [sl, view(pl)])
                n_pred = 8 if stories else 12
                for body, name in SEQ:
                    b = dict({"n_predict": n_pred, "temperature": 0, "n_probs": 3}, **body)
                    same(L, B, f"{label} /completion {name}", "/completion", b, completion_view)
                # streamed: the partial events carry id_slot -1 (llama-server sets it only on the final result)
                for body, name in ((dict(SEQ[0][0]), "A"), (dict(SEQ[1][0], id_slot=0), "B id_slot 0")):
                    body.update(n_predict=6, temperature=0, stream=True)
                    (sl, el), (sb, eb) = L.stream("/completion", body), B.stream("/completion", body)
                    view = lambda ev: [{k: e.get(k) for k in ("content", "id_slot", "stop", "tokens_cached")}
                                       if isinstance(e, dict) else e for e in ev]
                    S.equal(f"{label} /completion streamed {name}", [sb, view(eb)], [sl, view(el)])
                conversation(L, B, f"{label} greedy chat", TURNS, {"max_tokens": 16, "temperature": 0,
                                                                   "logprobs": True, "top_logprobs": 2})
                conversation(L, B, f"{label} seeded chat", TURNS[:3], {"max_tokens": 12, "temperature": 0.9,
                                                                       "seed": 42})
                cn = interleaved(L, B, f"{label} interleaved", {"max_tokens": 10, "temperature": 0})
                S.check(f"{label} interleaved: later turns keep their conversation's cells",
                        all(isinstance(c, int) and c > 10 for c in cn[2:]), f"cache_n {cn}")
                S.equal(f"{label} /metrics", list(metrics(B)), list(metrics(L)))
        except oracle.ServerError as e:
            S.fail(label, str(e))

S.finish()
