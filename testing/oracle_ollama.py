"""oracle_ollama.py -- bankml's Ollama API (/api/*) against llama-server b11669's /v1/chat/completions on the same
models and flags (-t 2 -c 2048 -np 1 --jinja): the same conversation gives the same text, streamed and not, with
prompt_eval_count/eval_count equal to llama-server's token counts; keep_alive (expiry, 0, a swap); num_ctx fitting
(0, 1 and several drops, counted independently through llama-server's /apply-template and /tokenize); bad input.
Standard library only; BANKML_BIN names the binary (default ./bankml)."""
import http.client, json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

CTX = 2048
S = oracle.Suite("oracle_ollama")
kit = oracle.kit_or_skip(S)
models = oracle.ensure_models(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
NAMES = ["qwen3-e128-f32", "llama-e384-q8_0", "llama-e384-f16"]
MODELS = [os.path.join(models, n + ".gguf") for n in NAMES]
tmp = tempfile.mkdtemp(prefix="oracle-ollama-")
FORK = os.path.join(tmp, "test.FORK.json")
for m in MODELS:
    p = subprocess.run([BIN, "pin", m, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    if p.returncode != 0:
        oracle.skip_all(f"bankml pin --write {m} failed: {p.stdout.strip()}", S)


def ndjson(srv, path, body):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.getheader("Content-Type"), [json.loads(l) for l in r.read().decode().splitlines() if l]
    finally:
        c.close()


def v1_text(L, msgs, extra, stream):
    body = dict(extra, messages=msgs)
    if stream:
        st, ev = L.stream("/v1/chat/completions", dict(body, stream=True, stream_options={"include_usage": True}))
        text = "".join(((e.get("choices") or [{}])[0].get("delta") or {}).get("content") or ""
                       for e in ev if isinstance(e, dict) and e.get("choices"))
        usage = [e["usage"] for e in ev if isinstance(e, dict) and e.get("usage")][0]
        return text, usage["prompt_tokens"], usage["completion_tokens"]
    st, j = L.post("/v1/chat/completions", body)
    return j["choices"][0]["message"]["content"], j["usage"]["prompt_tokens"], j["usage"]["completion_tokens"]


def api_text(B, model, msgs, options, stream):
    body = {"model": model, "messages": msgs, "options": options, "stream": stream}
    if stream:
        st, ct, lines = ndjson(B, "/api/chat", body)
        S.check(f"{model} stream content type", st == 200 and ct.startswith("application/x-ndjson"), f"{st} {ct}")
        fin = lines[-1]
        text = "".join(l["message"]["content"] for l in lines[:-1])
    else:
        st, fin = B.post("/api/chat", body)
        text = fin["message"]["content"]
    S.check(f"{model} done fields", fin.get("done") is True and fin.get("done_reason") in ("stop", "length") and
            all(k in fin for k in ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")),
            json.dumps(fin)[:200])
    return text, fin["prompt_eval_count"], fin["eval_count"]


TURNS = ["Hello there", "Tell me a story about a cat.", "Why is the sky blue?"]
REQ = [("greedy", {"max_tokens": 16, "temperature": 0}, {"num_predict": 16, "temperature": 0}),
       ("seeded", {"max_tokens": 12, "temperature": 0.9, "seed": 42, "top_k": 20, "repeat_penalty": 1.1},
        {"num_predict": 12, "temperature": 0.9, "seed": 42, "top_k": 20, "repeat_penalty": 1.1})]

for name, path in zip(NAMES, MODELS):
    try:
        with oracle.Server.llama(kit, path, ctx=CTX) as L, \
                oracle.Server.bankml(path, ctx=CTX, extra=["--fork", FORK, "--registry", tmp]) as B:
            for label, v1, opts in REQ:
                for stream in (False, True):
                    msgs = []
                    for i, q in enumerate(TURNS):
                        msgs.append({"role": "user", "content": q})
                        want = v1_text(L, msgs, v1, stream)
                        got = api_text(B, name, msgs, opts, stream)
                        S.equal(f"{name} {label}{' streamed' if stream else ''} turn {i + 1} (text, prompt, eval)",
                                list(got), list(want))
                        msgs.append({"role": "assistant", "content": want[0] or "ok"})
            if name != NAMES[0]:
                continue
            # ---- num_ctx fitting: counted independently through llama-server
            def count(ms):
                p = L.post("/apply-template", {"messages": ms})[1]["prompt"]
                return len(L.post("/tokenize", {"content": p, "add_special": True, "parse_special": True})[1]["tokens"])

            def ollama_fit(ms, num_ctx):
                n, system = len(ms) - 1, []
                for i in range(len(ms) - 1, -1, -1):
                    if i == len(ms) - 1:
                        continue
                    system = [m for m in ms[:i] if m["role"] == "system"]
                    if count(system + ms[i:]) <= num_ctx:
                        n = i
                    else:
                        break
                return system + ms[n:]

            conv = [{"role": "system", "content": "You are terse."}]
            for q in TURNS + ["Count to three.", "Thanks"]:
                conv += [{"role": "user", "content": q}, {"role": "assistant", "content": "Sure, " + q.lower()}]
            conv = conv[:-1]
            full = count(conv)
            for drops_label, num_ctx in (("0 drops", full + 50), ("1 drop", full - 5), ("several drops", full // 2)):
                kept = ollama_fit(conv, num_ctx)
                st, j = B.post("/api/chat", {"model": name, "messages": conv, "stream": False,
                                             "options": {"num_ctx": num_ctx, "num_predict": 2, "temperature": 0}})
                S.equal(f"num_ctx {drops_label} ({len(conv) - len(kept)} dropped): prompt_eval_count",
                        [st, j.get("prompt_eval_count")], [200, count(kept)])
            S.check("num_ctx 0-drop case keeps all", len(ollama_fit(conv, full + 50)) == len(conv))
            S.check("num_ctx several-drop case drops > 1", len(conv) - len(ollama_fit(conv, full // 2)) > 1)
            st, j = B.post("/api/chat", {"model": name, "messages": [{"role": "user", "content": "hi " * 200}],
                                         "stream": False, "options": {"num_ctx": 20}})
            S.check("num_ctx still too long refused", st == 400 and "num_ctx 20" in j.get("error", ""), f"{st} {j}")
            # ---- keep_alive
            B.post("/api/generate", {"model": name, "prompt": "Hi", "stream": False, "keep_alive": "1s",
                                     "options": {"num_predict": 1}})
            S.check("ps lists the model after a request", len(B.get("/api/ps")[1]["models"]) == 1)
            time.sleep(3.2)
            S.equal("keep_alive 1s: unloaded when its time ran out", B.get("/api/ps")[1]["models"], [])
            st, j = B.post("/api/generate", {"model": name, "stream": False})
            S.equal("empty generate loads", [st, j.get("done_reason")], [200, "load"])
            S.check("ps after load", B.get("/api/ps")[1]["models"][0]["name"] == name + ":latest")
            st, j = B.post("/api/chat", {"model": NAMES[1], "messages": [{"role": "user", "content": "Hi"}],
                                         "stream": False, "options": {"num_predict": 2}, "keep_alive": -1})
            ps = B.get("/api/ps")[1]["models"]
            S.check("another model swaps them", len(ps) == 1 and ps[0]["name"] == NAMES[1] + ":latest" and
                    ps[0]["expires_at"] > "2200", json.dumps(ps)[:300])
            st, j = B.post("/api/chat", {"model": NAMES[1], "messages": [], "keep_alive": 0, "stream": False})
            S.equal("keep_alive 0 unloads at once", [st, j.get("done_reason"), B.get("/api/ps")[1]["models"]],
                    [200, "unload", []])
            # ---- bad input
            st, j = B.post("/api/chat", {"model": "nope", "messages": [{"role": "user", "content": "x"}]})
            S.check("unknown model 404 {error}", st == 404 and list(j) == ["error"] and "nope" in j["error"], f"{st} {j}")
            hi = [{"role": "user", "content": "x"}]
            for label, opts in (("options not an object", "x"), ("option not a number", {"temperature": "hot"}),
                                ("unknown option", {"bogus": 1}), ("mirostat", {"mirostat": 2})):
                st, j = B.post("/api/chat", {"model": name, "messages": hi, "options": opts})
                S.check(f"bad options: {label} -> 400", st == 400 and list(j) == ["error"], f"{st} {j}")
            for label, extra in (("format", {"format": "json"}), ("tools", {"tools": [{"type": "function"}]}),
                                 ("think", {"think": True}), ("images", {"images": ["aGk="]})):
                st, j = B.post("/api/generate", dict({"model": name, "prompt": "x"}, **extra))
                S.check(f"refused: {label}", st == 400 and label in j.get("error", ""), f"{st} {j}")
            for route in ("/api/pull", "/api/push", "/api/embed"):
                st, j = B.post(route, {"model": name})
                S.check(f"{route} refused with a reason", st == 400 and len(j.get("error", "")) > 20, f"{st} {j}")
            st, j = B.post("/api/generate", {"model": name, "prompt": "x", "keep_alive": "soon"})
            S.check("bad keep_alive 400", st == 400 and "keep_alive" in j.get("error", ""), f"{st} {j}")
            # ---- derived models
            stray = os.path.join(tmp, "stray.gguf")
            shutil.copy(MODELS[2], stray)
            st, j = B.post("/api/create", {"model": "bad", "modelfile": f"FROM {stray}\n", "stream": False})
            S.check("Modelfile naming an unpinned file refused", st == 400 and "not pinned" in j.get("error", ""),
                    f"{st} {j}")
            mf = f"FROM {name}\nSYSTEM You are terse.\nPARAMETER temperature 0\nPARAMETER num_predict 6\n"
            st, j = B.post("/api/create", {"model": "terse", "modelfile": mf, "stream": False})
            S.equal("create", [st, j], [200, {"status": "success"}])
            S.check("manifest written", os.path.exists(os.path.join(tmp, "terse.MODEL.json")))
            st, j = B.post("/api/chat", {"model": "Terse:latest", "messages": hi, "stream": False})
            want = v1_text(L, [{"role": "system", "content": "You are terse."}] + hi,
                           {"temperature": 0, "max_tokens": 6}, False)
            S.equal("derived model answers as its layer says", [st, j["message"]["content"], j["prompt_eval_count"],
                                                                 j["eval_count"]], [200, *want])
    except oracle.ServerError as e:
        S.fail(f"{name} servers", str(e))

shutil.rmtree(tmp, ignore_errors=True)
S.finish()
