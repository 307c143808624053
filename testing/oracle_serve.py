"""oracle_serve.py -- `bankml serve` against llama-server b11669 on the same models and flags
(-t 2 -c 2048 -np 1 --jinja): multi-turn chats (greedy and seeded, non-streamed and streamed) with content,
token counts and cache_n equal on every turn, cache_prompt false, a context overflow, a stop string across
token boundaries, /tokenize, /detokenize, /apply-template and error bodies.

The bankml binary is BANKML_BIN or ./bankml; it must have `serve` wired to cli/serve_cmd.c.
Standard library only."""
import json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

CTX = 2048
S = oracle.Suite("oracle_serve")
kit = oracle.kit_or_skip(S)
models = oracle.ensure_models(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")

MODELS = [os.path.join(models, "qwen3-e128-f32.gguf"), os.path.join(models, "llama-e384-q8_0.gguf"),
          os.path.join(shared, "models", "stories260K.gguf")]
tmp = tempfile.mkdtemp(prefix="oracle-serve-")
FORK = os.path.join(tmp, "test.FORK.json")
for m in MODELS:
    p = subprocess.run([BIN, "pin", m, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        oracle.skip_all(f"bankml pin --write {m} failed: {p.stdout.strip()}", S)

def tolist(v):
    """Tuples as lists, so that diff() prints each differing field."""
    if isinstance(v, (tuple, list)):
        return [tolist(x) for x in v]
    if isinstance(v, dict):
        return {k: tolist(x) for k, x in v.items()}
    return v


def eq(name, got, want, ignore=()):
    return S.equal(name, tolist(got), tolist(want), ignore=ignore)


IGN = ("created", "id", "system_fingerprint", "bankml_receipt", "prompt_ms", "prompt_per_token_ms",
       "prompt_per_second", "predicted_ms", "predicted_per_token_ms", "predicted_per_second")


def chat_view(body):
    """What must be equal in a non-streamed chat answer."""
    if not isinstance(body, dict) or "choices" not in body:
        return body
    return {"choices": body["choices"], "usage": body["usage"], "object": body["object"], "model": body["model"],
            "timings": {k: body["timings"][k] for k in ("cache_n", "prompt_n", "predicted_n")},
            "keys": [k for k in body if k not in ("bankml_receipt",)]}


def both(name, fn):
    """Runs fn(server) on llama-server then bankml and compares."""
    return fn(L), fn(B)


def conversation(label, turns, extra, stream=False):
    """4+ user turns; each turn's assistant answer (llama-server's) goes back into both histories."""
    msgs = []
    for i, q in enumerate(turns):
        msgs.append({"role": "user", "content": q})
        body = dict(extra, messages=msgs)
        if stream:
            body["stream"] = True
            (sl, el), (sb, eb) = L.stream("/v1/chat/completions", body), B.stream("/v1/chat/completions", body)
            eq(f"{label} turn {i + 1} (streamed)", [sb, oracle.stream_view(eb)], [sl, oracle.stream_view(el)])
            if sb == 200:
                last = [e for e in eb if e != "[DONE]"][-1:]
                S.check(f"{label} turn {i + 1} (streamed) receipt in the last chunk, which has choices",
                        bool(last) and isinstance(last[0], dict) and "bankml_receipt" in last[0] and
                        isinstance(last[0].get("choices"), list), str(last)[:300])
            text = "".join(((e.get("choices") or [{}])[0].get("delta") or {}).get("content") or ""
                           for e in el if isinstance(e, dict) and "choices" in e)
        else:
            sl, jl = L.post("/v1/chat/completions", body)
            sb, jb = B.post("/v1/chat/completions", body)
            eq(f"{label} turn {i + 1}", [sb, chat_view(jb)], [sl, chat_view(jl)])
            if isinstance(jb, dict):
                S.check(f"{label} turn {i + 1} receipt", "bankml_receipt" in jb, "no bankml_receipt")
            text = jl["choices"][0]["message"]["content"] if sl == 200 else ""
        msgs.append({"role": "assistant", "content": text or "ok"})


def interleaved(label, convs, extra, stream=False):
    """Conversations interleaved turn by turn (A1 B1 C1 A2 B2 ...): each one evicts the other from the one slot,
    so llama-server's host prompt cache saves and restores them. Content, usage and cache_n equal on every turn;
    returns the list of cache_n values llama-server reported."""
    hist = [[{"role": "system", "content": sysmsg}] for sysmsg, _ in convs]
    seen = []
    for t in range(max(len(turns) for _, turns in convs)):
        for ci, (_, turns) in enumerate(convs):
            if t >= len(turns):
                continue
            hist[ci].append({"role": "user", "content": turns[t]})
            body = dict(extra, messages=hist[ci])
            name = f"{label} {'ABC'[ci]}{t + 1}"
            if stream:
                body["stream"] = True
                body["stream_options"] = {"include_usage": True}
                (sl, el), (sb, eb) = L.stream("/v1/chat/completions", body), B.stream("/v1/chat/completions", body)
                eq(f"{name} (streamed)", [sb, oracle.stream_view(eb)], [sl, oracle.stream_view(el)])
                text = "".join(((e.get("choices") or [{}])[0].get("delta") or {}).get("content") or ""
                               for e in el if isinstance(e, dict) and "choices" in e)
                tm = [e["timings"] for e in el if isinstance(e, dict) and "timings" in e]
                seen.append(tm[-1]["cache_n"] if tm else None)
            else:
                sl, jl = L.post("/v1/chat/completions", body)
                sb, jb = B.post("/v1/chat/completions", body)
                eq(name, [sb, chat_view(jb)], [sl, chat_view(jl)])
                text = jl["choices"][0]["message"]["content"] if sl == 200 else ""
                seen.append(jl.get("timings", {}).get("cache_n") if sl == 200 else None)
            hist[ci].append({"role": "assistant", "content": text or "ok"})
    return seen


CONVS = [("You are a helpful assistant.", ["Hello there", "Tell me a story about a cat.", "Why is the sky blue?",
                                           "Thanks! One more: count to five."]),
         ("Answer like a pirate.", ["Where is the treasure?", "How big is your ship?", "What do you eat?",
                                    "Sing a song."]),
         ("Reply in French.", ["Good morning", "What is the weather like?", "Name three cheeses."])]

TURNS = ["Hello there", "Tell me a story about a cat.", "Why is the sky blue?", "Thanks! One more: count to five.",
         "And a haiku?"]

for path in MODELS:
    base = os.path.basename(path)
    try:
        with oracle.Server.llama(kit, path, ctx=CTX) as L, \
                oracle.Server.bankml(path, ctx=CTX, extra=["--fork", FORK]) as B:
            if base.startswith("stories"):
                # /completion: a story, a stop word across tokens, ids as the prompt, n_probs
                for body in ({"prompt": "Once upon a time", "n_predict": 32, "temperature": 0},
                             {"prompt": "Once upon a time", "n_predict": 24, "temperature": 0.8, "seed": 11},
                             {"prompt": [1, 403, 261, 50], "n_predict": 8, "temperature": 0},
                             {"prompt": [1, 403, 99999], "n_predict": 8, "temperature": 0},
                             {"prompt": "One day", "n_predict": 6, "temperature": 0, "n_probs": 3}):
                    (sl, jl), (sb, jb) = L.post("/completion", body), B.post("/completion", body)
                    eq(f"{base} /completion {json.dumps(body)[:60]}", [sb, jb], [sl, jl], ignore=IGN)
                first = {"prompt": "Once upon a time", "n_predict": 32, "temperature": 0}
                sl, jl = L.post("/completion", first)
                B.post("/completion", first)   # the same slot state on both sides
                text = jl.get("content", "") if isinstance(jl, dict) else ""
                toks = L.post("/tokenize", {"content": text, "with_pieces": True})[1].get("tokens", [])
                # a stop word made of the end of one token and the start of the next
                stop = None
                for a, b in zip(toks, toks[1:]):
                    pa, pb = a["piece"], b["piece"]
                    if isinstance(pa, str) and isinstance(pb, str) and len(pa) >= 2 and len(pb) >= 2:
                        stop = pa[-2:] + pb[:2]
                        break
                if stop:
                    for st in (False, True):
                        body = {"prompt": "Once upon a time", "n_predict": 32, "temperature": 0, "stop": [stop],
                                "stream": st}
                        if st:
                            (sl, el), (sb, eb) = L.stream("/completion", body), B.stream("/completion", body)
                            eq(f"{base} stop {stop!r} across tokens (streamed)", (sb, oracle.stream_view(eb)),
                                    (sl, oracle.stream_view(el)), ignore=IGN)
                        else:
                            (sl, jl), (sb, jb) = L.post("/completion", body), B.post("/completion", body)
                            eq(f"{base} stop {stop!r} across tokens", [sb, jb], [sl, jl], ignore=IGN)
                else:
                    S.skip(f"{base} stop across tokens", "no two multi-character pieces in the answer")
                continue
            conversation(f"{base} greedy", TURNS, {"max_tokens": 24, "temperature": 0})
            conversation(f"{base} seeded", TURNS[:4], {"max_tokens": 16, "temperature": 0.9, "seed": 42,
                                                        "top_k": 20})
            conversation(f"{base} greedy streamed", TURNS[:4], {"max_tokens": 12, "temperature": 0}, stream=True)
            conversation(f"{base} seeded streamed", TURNS[:4], {"max_tokens": 12, "temperature": 0.9, "seed": 3},
                         stream=True)
            # the host prompt cache: two then three conversations interleaved; the first turn of each keeps only
            # the template's head, a later turn resumes its conversation from the cache (cache_n well past it)
            cn = interleaved(f"{base} interleaved x2", CONVS[:2], {"max_tokens": 12, "temperature": 0})
            S.check(f"{base} interleaved x2: a turn resumed from the host prompt cache",
                    any(isinstance(c, int) and c > 20 for c in cn[2:]), f"cache_n {cn}")
            cn = interleaved(f"{base} interleaved x3 seeded", CONVS, {"max_tokens": 10, "temperature": 0.8,
                                                                      "seed": 5})
            S.check(f"{base} interleaved x3: a turn resumed from the host prompt cache",
                    any(isinstance(c, int) and c > 20 for c in cn[3:]), f"cache_n {cn}")
            interleaved(f"{base} interleaved x2 streamed", [CONVS[2], CONVS[0]], {"max_tokens": 8, "temperature": 0},
                        stream=True)
            conversation(f"{base} cache_prompt false", TURNS[:2], {"max_tokens": 8, "temperature": 0,
                                                                   "cache_prompt": False})
            lp = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0,
                  "logprobs": True, "top_logprobs": 3}
            (sl, jl), (sb, jb) = L.post("/v1/chat/completions", lp), B.post("/v1/chat/completions", lp)
            eq(f"{base} logprobs", [sb, chat_view(jb)], [sl, chat_view(jl)])
            (sl, el), (sb, eb) = L.stream("/v1/chat/completions", dict(lp, stream=True)), \
                B.stream("/v1/chat/completions", dict(lp, stream=True))
            eq(f"{base} logprobs streamed", [sb, oracle.stream_view(eb)], [sl, oracle.stream_view(el)])
            # a context overflow: llama-server's 400 body exactly
            big = {"messages": [{"role": "user", "content": "hello " * (CTX + 10)}], "max_tokens": 4}
            eq(f"{base} context overflow", B.post("/v1/chat/completions", big),
                    L.post("/v1/chat/completions", big))
            # the tokenizer and template routes
            for route, body in (("/tokenize", {"content": "Hello <|im_end|> world"}),
                                ("/tokenize", {"content": "Hello world", "with_pieces": True}),
                                ("/detokenize", {"tokens": [9707, 1879, 13]}),
                                ("/apply-template", {"messages": [{"role": "system", "content": "Be brief."},
                                                                  {"role": "user", "content": "Hi"}]})):
                eq(f"{base} {route} {json.dumps(body)[:40]}", B.post(route, body), L.post(route, body))
            # error bodies
            hi = [{"role": "user", "content": "hi"}]
            for label, body in (("stream type", {"messages": hi, "stream": "yes"}),
                                ("max_tokens range", {"messages": hi, "max_tokens": -5}),
                                ("top_k type", {"messages": hi, "top_k": "x"}),
                                ("no messages", {}),
                                ("messages type", {"messages": "x"})):
                eq(f"{base} error {label}", B.post("/v1/chat/completions", body),
                        L.post("/v1/chat/completions", body))
            st, jb = B.request("POST", "/v1/chat/completions", "{bad", headers={"Content-Type": "application/json"})
            sl, jl = L.request("POST", "/v1/chat/completions", "{bad", headers={"Content-Type": "application/json"})
            eq(f"{base} error invalid JSON (nlohmann's message)", (st, jb), (sl, jl))
            st, jb = B.post("/v1/chat/completions", {"messages": hi, "mirostat": 2, "max_tokens": 2})
            S.check(f"{base} mirostat refused with 400", st == 400 and "mirostat" in json.dumps(jb), f"{st} {jb}")
            eq(f"{base} still serving after errors", chat_view(B.post("/v1/chat/completions",
                                                                          {"messages": hi, "max_tokens": 2,
                                                                           "temperature": 0})[1])["choices"],
                    chat_view(L.post("/v1/chat/completions", {"messages": hi, "max_tokens": 2,
                                                              "temperature": 0})[1])["choices"])
    except oracle.ServerError as e:
        S.fail(f"{base} servers", str(e))

S.finish()
