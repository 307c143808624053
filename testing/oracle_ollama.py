"""oracle_ollama.py -- bankml's Ollama API (/api/*) against llama-server b11669's /v1/chat/completions on the same
models and flags (-t 2 -c 2048 -np 1 --jinja): the same conversation gives the same text, streamed and not, with
prompt_eval_count/eval_count equal to llama-server's token counts (3 generated models and stories260K); keep_alive
(expiry, 0, a swap, `--keep-alive` as the default) seen in /api/ps and in the server's /proc/<pid>/maps; num_ctx
fitting (0, 1 and several drops, counted independently through llama-server's /apply-template and /tokenize) and
generation stopping at num_ctx; names as users type them; Ollama v0.13.3's exact error bodies for unknown and
invalid names; derived models through /api/create and `bankml create`; bad input.
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
# a trained model whose answers are words (the generated ones answer newlines); no template of its own, so both
# servers use their fallback (ChatML)
STORIES = os.path.join(oracle.find_shared() or "", "models", "stories260K.gguf")
if not os.path.exists(STORIES):
    oracle.skip_all(f"{STORIES} is missing", S)
tmp = tempfile.mkdtemp(prefix="oracle-ollama-")
FORK = os.path.join(tmp, "test.FORK.json")
for m in MODELS + [STORIES]:
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


def mapped(srv):
    """The .gguf files the server process has mapped (/proc/<pid>/maps), as real paths."""
    with open(f"/proc/{srv.proc.pid}/maps") as f:
        return sorted({l.split(None, 5)[5].strip().replace(" (deleted)", "") for l in f
                       if len(l.split(None, 5)) == 6 and ".gguf" in l})


def expires_in(ps_model):
    """Seconds from now until /api/ps's expires_at (RFC 3339, nanoseconds, UTC)."""
    import datetime
    t = ps_model["expires_at"]
    base, frac = t.rstrip("Z").split(".")
    when = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return when.timestamp() + int(frac) / 1e9 - time.time()


REAL = {n: os.path.realpath(m) for n, m in zip(NAMES, MODELS)}
TURNS = ["Hello there", "Tell me a story about a cat.", "Why is the sky blue?"]
REQ = [("greedy", {"max_tokens": 16, "temperature": 0}, {"num_predict": 16, "temperature": 0}),
       ("seeded", {"max_tokens": 12, "temperature": 0.9, "seed": 42, "top_k": 20, "repeat_penalty": 1.1},
        {"num_predict": 12, "temperature": 0.9, "seed": 42, "top_k": 20, "repeat_penalty": 1.1})]

for name, path in list(zip(NAMES, MODELS)) + [("stories260k", STORIES)]:
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
            # ---- keep_alive: /api/ps and the process's own mappings (/proc/<pid>/maps)
            B.post("/api/generate", {"model": name, "prompt": "Hi", "stream": False, "keep_alive": "1s",
                                     "options": {"num_predict": 1}})
            S.check("ps lists the model after a request", len(B.get("/api/ps")[1]["models"]) == 1)
            S.equal("the model's file is mapped after a request", mapped(B), [REAL[name]])
            time.sleep(3.2)
            S.equal("keep_alive 1s: unloaded when its time ran out", B.get("/api/ps")[1]["models"], [])
            S.equal("keep_alive 1s: its mapping released", mapped(B), [])
            st, j = B.post("/api/generate", {"model": name, "stream": False})
            S.equal("empty generate loads", [st, j.get("done_reason")], [200, "load"])
            S.check("ps after load", B.get("/api/ps")[1]["models"][0]["name"] == name + ":latest")
            S.equal("the load maps the file again", mapped(B), [REAL[name]])
            st, j = B.post("/api/chat", {"model": NAMES[1], "messages": [{"role": "user", "content": "Hi"}],
                                         "stream": False, "options": {"num_predict": 2}, "keep_alive": -1})
            ps = B.get("/api/ps")[1]["models"]
            S.check("another model swaps them", len(ps) == 1 and ps[0]["name"] == NAMES[1] + ":latest" and
                    ps[0]["expires_at"] > "2200", json.dumps(ps)[:300])
            S.equal("the swap leaves only the new model mapped", mapped(B), [REAL[NAMES[1]]])
            st, j = B.post("/api/chat", {"model": NAMES[1], "messages": [], "keep_alive": 0, "stream": False})
            S.equal("keep_alive 0 unloads at once", [st, j.get("done_reason"), B.get("/api/ps")[1]["models"]],
                    [200, "unload", []])
            S.equal("keep_alive 0: its mapping released at once", mapped(B), [])
            st, j = B.post("/api/chat", {"model": NAMES[1], "messages": [{"role": "user", "content": "Hi"}],
                                         "stream": False, "options": {"num_predict": 1}, "keep_alive": 0})
            for _ in range(40):   # the answer is sent before the engine is released
                if not mapped(B):
                    break
                time.sleep(0.05)
            S.equal("keep_alive 0 after an answer: answered, then unmapped", [st, j.get("eval_count"), mapped(B)],
                    [200, 1, []])
            # ---- names as users type them: name, name:latest, the file name, any case
            base = B.post("/api/chat", {"model": name, "messages": [{"role": "user", "content": "Hi"}],
                                        "stream": False, "options": {"num_predict": 4, "temperature": 0}})[1]
            for typed in (name + ":latest", name + ".gguf", name.upper(), name.upper() + ":LATEST",
                          name.capitalize() + ".GGUF"):
                st, j = B.post("/api/chat", {"model": typed, "messages": [{"role": "user", "content": "Hi"}],
                                             "stream": False, "options": {"num_predict": 4, "temperature": 0}})
                S.equal(f"name as typed: {typed}", [st, j.get("model"), j.get("message"), j.get("eval_count")],
                        [200, name + ":latest", base["message"], base["eval_count"]])
            # ---- num_ctx reached while generating: stops (Ollama's shift: false), num_ctx - prompt + 1 tokens
            hi = [{"role": "user", "content": "Hello there"}]
            P = count(hi)
            for room in (1, 5):
                for extra in ({}, {"shift": False}):
                    st, j = B.post("/api/chat", dict({"model": name, "messages": hi, "stream": False,
                                                      "options": {"num_ctx": P + room - 1, "temperature": 0}}, **extra))
                    want = v1_text(L, hi, {"max_tokens": room, "temperature": 0}, False)
                    S.equal(f"num_ctx = prompt + {room - 1}{' (shift false)' if extra else ''}: {room} tokens, "
                            "length", [st, j.get("message", {}).get("content"), j.get("prompt_eval_count"),
                                       j.get("eval_count"), j.get("done_reason")], [200, *want, "length"])
            st, j = B.post("/api/chat", {"model": name, "messages": hi, "shift": True, "stream": False,
                                         "options": {"num_ctx": 100}})
            S.check("shift: true refused with a reason", st == 400 and j.get("error", "").startswith(
                "shift: Ollama's context shift"), f"{st} {j}")
            for label, extra, want in (("shift not a bool", {"shift": "yes"}, [400, "shift must be true or false"]),
                                       ("truncate not a bool", {"truncate": 1}, [400, "truncate must be true or false"])):
                st, j = B.post("/api/chat", dict({"model": name, "messages": hi, "stream": False}, **extra))
                S.equal(label, [st, j.get("error")], want)
            st, j = B.post("/api/chat", {"model": name, "messages": [], "shift": True, "stream": False})
            S.equal("shift: true on a load only: loaded (nothing is generated)", [st, j.get("done_reason")],
                    [200, "load"])
            st, j = B.post("/api/chat", {"model": name, "messages": conv, "truncate": False, "stream": False,
                                         "options": {"num_ctx": full - 5, "num_predict": 2}})
            S.equal("truncate false: no messages dropped, Ollama's refusal", [st, j],
                    [400, {"error": "the input length exceeds the context length"}])
            st, j = B.post("/api/chat", {"model": name, "messages": conv, "truncate": False, "stream": False,
                                         "options": {"num_ctx": full + 50, "num_predict": 2, "temperature": 0}})
            S.equal("truncate false that fits: the whole conversation", [st, j.get("prompt_eval_count")], [200, full])
            # ---- bad input; unknown and invalid names get Ollama v0.13.3's status and words (server/routes.go)
            hi = [{"role": "user", "content": "x"}]
            for label, method, route, body, want in (
                    ("chat, unknown model", "POST", "/api/chat", {"model": "nope", "messages": hi},
                     [404, {"error": "model 'nope' not found"}]),
                    ("chat, unknown model:tag", "POST", "/api/chat", {"model": "Nope:v2", "messages": hi},
                     [404, {"error": "model 'Nope:v2' not found"}]),
                    ("chat, invalid name", "POST", "/api/chat", {"model": "a b", "messages": hi},
                     [400, {"error": "model is required"}]),
                    ("generate, unknown model", "POST", "/api/generate", {"model": "nope", "prompt": "x"},
                     [404, {"error": "model 'nope' not found"}]),
                    ("generate, invalid name", "POST", "/api/generate", {"model": "a b", "prompt": "x"},
                     [404, {"error": "model 'a b' not found"}]),
                    ("show, unknown model", "POST", "/api/show", {"model": "nope"},
                     [404, {"error": "model 'nope' not found"}]),
                    ("show, invalid name", "POST", "/api/show", {"model": "a b"},
                     [500, {"error": "invalid model path"}]),
                    ("copy, unknown source", "POST", "/api/copy", {"source": "nope", "destination": "x"},
                     [404, {"error": 'model "nope" not found'}]),
                    ("copy, invalid source (Go %q)", "POST", "/api/copy", {"source": 'a"b', "destination": "x"},
                     [400, {"error": 'source "a\\"b" is invalid'}]),
                    ("copy, invalid destination", "POST", "/api/copy", {"source": name, "destination": "x y"},
                     [400, {"error": 'destination "x y" is invalid'}]),
                    ("delete, unknown model", "DELETE", "/api/delete", {"model": "nope"},
                     [404, {"error": "model 'nope' not found"}]),
                    ("delete, no name", "DELETE", "/api/delete", {},
                     [400, {"error": 'name "" is invalid'}]),
                    ("delete, a pin (bankml's own reason)", "DELETE", "/api/delete", {"model": name.upper()},
                     [400, {"error": "bankml does not delete pins over HTTP: a pinned model is removed from its "
                                     "FORK.json"}]),
                    ("create, invalid name", "POST", "/api/create", {"model": "a b", "from": name},
                     [400, {"error": "invalid model name"}])):
                S.equal(f"bad name: {label}", list(B.request(method, route, body)), want)
            for label, opts in (("options not an object", "x"), ("option not a number", {"temperature": "hot"}),
                                ("unknown option", {"bogus": 1}), ("mirostat", {"mirostat": 2})):
                st, j = B.post("/api/chat", {"model": name, "messages": hi, "options": opts})
                S.check(f"bad options: {label} -> 400", st == 400 and list(j) == ["error"], f"{st} {j}")
            for label, extra in (("format", {"format": {"type": "string", "pattern": "^*a$"}}), ("tools", {"tools": [{"type": "function"}]}),
                                 ("think", {"think": "high"}), ("images", {"images": ["aGk="]})):
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
            for typed in ("terse", "TERSE", "terse:LATEST"):
                st, j2 = B.post("/api/chat", {"model": typed, "messages": hi, "stream": False})
                S.equal(f"derived name as typed: {typed}", [st, j2.get("model"), j2.get("message")],
                        [200, "terse:latest", j["message"]])
            # ---- `bankml create NAME -f Modelfile` writes what /api/create writes
            mfp = os.path.join(tmp, "Modelfile")
            with open(mfp, "w") as f:
                f.write(mf)
            p = subprocess.run([BIN, "create", "terse-cli", "-f", mfp, "--registry", tmp], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
            api_m = json.load(open(os.path.join(tmp, "terse.MODEL.json")))
            try:
                cli_m = json.load(open(os.path.join(tmp, "terse-cli.MODEL.json")))
            except OSError as e:
                cli_m = {"error": str(e)}
            pick = lambda b: {k: (b or {}).get(k) for k in ("name", "file", "sha256")}
            S.equal("bankml create: exit 0, same layer, digest and base as /api/create",
                    [p.returncode, cli_m.get("name"), cli_m.get("layer"), cli_m.get("digest"),
                     pick(cli_m.get("base"))], [0, "terse-cli", api_m["layer"], api_m["digest"], pick(api_m["base"])])
            with open(mfp, "w") as f:
                f.write(f"FROM {stray}\n")
            p = subprocess.run([BIN, "create", "stray", "-f", mfp, "--registry", tmp], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
            S.check("bankml create: a Modelfile naming an unpinned file is refused",
                    p.returncode != 0 and "not pinned" in p.stderr and
                    not os.path.exists(os.path.join(tmp, "stray.MODEL.json")), f"{p.returncode} {p.stderr}")
    except oracle.ServerError as e:
        S.fail(f"{name} servers", str(e))

# ---- `bankml serve --keep-alive D` is the default of an /api request without keep_alive
# (the second server also reads the registry folder, where `bankml create` wrote terse-cli)
for flag, label in (("2s", "2s"), ("-1", "-1 (forever)")):
    try:
        with oracle.Server.bankml(MODELS[0], ctx=CTX, extra=["--fork", FORK, "--keep-alive", flag, "--registry", tmp]) as K:
            st, j = K.post("/api/generate", {"model": NAMES[0], "prompt": "Hi", "stream": False,
                                             "options": {"num_predict": 1}})
            ps = K.get("/api/ps")[1]["models"]
            left = expires_in(ps[0]) if ps else None
            if flag == "2s":
                S.check(f"--keep-alive {label}: expires_at about 2 s ahead", st == 200 and left is not None and
                        0 < left <= 2.05, f"{st} {left}")
                S.equal(f"--keep-alive {label}: mapped", mapped(K), [REAL[NAMES[0]]])
                time.sleep(3.2)
                S.equal(f"--keep-alive {label}: unloaded and unmapped when it ran out",
                        [K.get("/api/ps")[1]["models"], mapped(K)], [[], []])
                st, j = K.post("/api/generate", {"model": NAMES[0], "prompt": "Hi", "stream": False,
                                                 "keep_alive": "1h", "options": {"num_predict": 1}})
                left = expires_in(K.get("/api/ps")[1]["models"][0])
                S.check("a request's keep_alive still wins over --keep-alive", 3590 < left <= 3600, str(left))
            else:
                S.check(f"--keep-alive {label}: kept for good", st == 200 and ps and ps[0]["expires_at"] > "2200",
                        json.dumps(ps)[:200])
                tags = sorted(m["name"] for m in K.get("/api/tags")[1]["models"])
                S.check("a server started on the registry lists what bankml create wrote",
                        "terse-cli:latest" in tags and "terse:latest" in tags, str(tags))
                q = {"messages": [{"role": "user", "content": "x"}], "stream": False}
                a = K.post("/api/chat", dict(q, model="terse"))
                b = K.post("/api/chat", dict(q, model="Terse-CLI"))
                S.equal("the model bankml create wrote answers as the one /api/create wrote",
                        [b[0], b[1].get("message"), b[1].get("eval_count")],
                        [200, a[1].get("message"), a[1].get("eval_count")])
    except oracle.ServerError as e:
        S.fail(f"--keep-alive {flag} server", str(e))

shutil.rmtree(tmp, ignore_errors=True)
S.finish()
