"""oracle_ollama_format.py -- Ollama's `format` with a JSON schema, end to end: bankml's /api/chat (and
/api/generate) with `format: SCHEMA` against llama-server b11669's /v1/chat/completions with `grammar:` the grammar
Ollama v0.13.3's converter writes for that schema (the committed golden, testing/schemas/ollama-v0.13.3/, made by
testing/gen_ollama_schema.sh), on the same model and conversation: the same content, prompt_eval_count and
eval_count as llama-server's text and token counts, greedy and seeded, streamed and not. Then Ollama's errors: a
schema its converter fails on is 500 `invalid JSON schema in format`; one it would crash or hang on is refused
(400) before the load. Standard library only; BANKML_BIN names the binary (default ./bankml)."""
import http.client, json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

CTX = 2048
S = oracle.Suite("oracle_ollama_format")
kit = oracle.kit_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
STORIES = os.path.join(oracle.find_shared() or "", "models", "stories260K.gguf")
if not os.path.exists(STORIES):
    oracle.skip_all(f"{STORIES} is missing", S)
tmp = tempfile.mkdtemp(prefix="oracle-ollama-format-")
FORK = os.path.join(tmp, "test.FORK.json")
p = subprocess.run([BIN, "pin", STORIES, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   text=True)
if p.returncode != 0:
    oracle.skip_all(f"bankml pin --write failed: {p.stdout.strip()}", S)

GOLD = {}
for lst in ("own.json", "ollama_extra.json", "llama_cpp_tests.json"):
    for c in json.load(open(os.path.join(oracle.ROOT, "testing", "schemas", "ollama-v0.13.3", lst)))["cases"]:
        GOLD[c["name"]] = c
PICK = ["properties required order", "additionalProperties keys with prefixes",
        "pattern group repeat"]
for n in PICK:
    if n not in GOLD or "grammar" not in GOLD[n]:
        oracle.skip_all(f"golden {n!r} is missing (run testing/gen_ollama_schema.sh)", S)


def ndjson(srv, path, body):
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, [json.loads(l) for l in r.read().decode().splitlines() if l]
    finally:
        c.close()


def v1(L, msgs, extra, grammar, stream):
    body = dict(extra, messages=msgs, grammar=grammar)
    if stream:
        st, ev = L.stream("/v1/chat/completions", dict(body, stream=True, stream_options={"include_usage": True}))
        text = "".join(((e.get("choices") or [{}])[0].get("delta") or {}).get("content") or ""
                       for e in ev if isinstance(e, dict) and e.get("choices"))
        usage = [e["usage"] for e in ev if isinstance(e, dict) and e.get("usage")][0]
        return [text, usage["prompt_tokens"], usage["completion_tokens"]]
    st, j = L.post("/v1/chat/completions", body)
    if st != 200:
        return [st, j]
    return [j["choices"][0]["message"]["content"], j["usage"]["prompt_tokens"], j["usage"]["completion_tokens"]]


def api(B, msgs, opts, fmt, stream):
    body = {"model": "stories260k", "messages": msgs, "options": opts, "stream": stream, "format": fmt}
    if stream:
        st, lines = ndjson(B, "/api/chat", body)
        if st != 200 or not lines or not lines[-1].get("done"):
            return [st, lines[-1:] if lines else None]
        return ["".join(l["message"]["content"] for l in lines[:-1]), lines[-1]["prompt_eval_count"],
                lines[-1]["eval_count"]]
    st, j = B.post("/api/chat", body)
    if st != 200:
        return [st, j]
    return [j["message"]["content"], j["prompt_eval_count"], j["eval_count"]]


REQ = [("greedy", {"max_tokens": 24, "temperature": 0}, {"num_predict": 24, "temperature": 0}),
       ("seeded", {"max_tokens": 24, "temperature": 0.9, "seed": 7, "top_k": 40},
        {"num_predict": 24, "temperature": 0.9, "seed": 7, "top_k": 40})]
msgs = [{"role": "user", "content": "Tell me about the cat as JSON."}]
with oracle.Server.llama(kit, STORIES, ctx=CTX) as L, \
        oracle.Server.bankml(STORIES, ctx=CTX, extra=["--fork", FORK, "--registry", tmp]) as B:
    for n in PICK:
        g = GOLD[n]
        for label, ex, opts in REQ:
            for stream in (False, True):
                want = v1(L, msgs, ex, g["grammar"], stream)
                got = api(B, msgs, opts, json.loads(g["schema"]), stream)
                S.equal(f"{n}: {label}{' streamed' if stream else ''} (content, prompt_eval_count, eval_count)", got, want)
    # /api/generate takes the same grammar
    g = GOLD[PICK[0]]
    st, j = B.post("/api/generate", {"model": "stories260k", "prompt": msgs[0]["content"], "stream": False,
                                     "format": json.loads(g["schema"]), "options": {"num_predict": 24, "temperature": 0}})
    S.equal("/api/generate with a schema (response, prompt_eval_count, eval_count) = the chat with the golden grammar",
            [j.get("response"), j.get("prompt_eval_count"), j.get("eval_count")],
            v1(L, msgs, {"max_tokens": 24, "temperature": 0}, g["grammar"], False))
    # Ollama's errors
    for n in ("integer exclusive bool (draft 4)", "pattern unanchored", "anyOf not array", "ref unsupported"):
        want_err = "error" in GOLD[n]
        st, j = B.post("/api/chat", {"model": "stories260k", "messages": msgs, "stream": False,
                                     "format": json.loads(GOLD[n]["schema"])})
        S.equal(f"invalid schema ({n}): Ollama's 500", [want_err, st, j], [True, 500, {"error": "invalid JSON schema in format"}])
    for n in ("pattern nothing to repeat", "pattern stray bracket", "pattern stray close curly", "regexp with non-capturing group"):
        st, j = B.post("/api/chat", {"model": "stories260k", "messages": msgs, "stream": False,
                                     "format": json.loads(GOLD[n]["schema"])})
        S.check(f"{n}: Ollama {'hangs' if 'hang' in GOLD[n] else 'crashes'}; bankml refuses (400) with the reason",
                ("crash" in GOLD[n] or "hang" in GOLD[n]) and st == 400 and j.get("error", "").startswith("format: ")
                and "Ollama v0.13.3" in j["error"], f"{st} {j}")
    st, j = B.post("/api/chat", {"model": "stories260k", "messages": msgs, "stream": False,
                                 "format": {"type": "string", "pattern": "^\\d+$"}})
    S.check("a grammar that does not parse (pattern \\d copied raw): 500 with the reason",
            st == 500 and "does not parse" in j.get("error", ""), f"{st} {j}")
S.finish()
