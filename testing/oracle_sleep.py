"""oracle_sleep.py -- llama-server b11669's --sleep-idle-seconds and token-counting routes, next to a real
`bankml serve` on stories260K (-t 2 -c 512 -np 1):

- /chat/completions/input_tokens, /v1/chat/completions/input_tokens, /responses/input_tokens and
  /v1/responses/input_tokens: counts and errors equal for chat messages, a system turn, responses input as a string
  and as items, no messages, not an object;
- --sleep-idle-seconds 1: after 2.5 s idle both say is_sleeping in /props, the rest of /props equal to the awake
  one's (but what differs by nature), /health, /v1/models answered without waking; /tokenize wakes both; the next
  /completion's answer and counts equal (the sleep emptied both slots: cache_n 0); a /props poll every 0.1 s does
  not keep the model awake; --sleep-idle-seconds 0 refused by both;
- without it, llama-server never unloads: after a /completion bankml's model does not expire (/api/ps), and after
  an Ollama request it gets Ollama's 5 minutes.
Standard library only."""
import http.client, json, os, re, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("oracle_sleep")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(shared, "models", "stories260K.gguf")
FORK = oracle.pinned_fork(MODEL, "oracle-sleep-")


def call(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        return r.status, json.loads(raw)
    except ValueError:
        return r.status, raw.decode("utf-8", "replace")


HELLO = [{"role": "user", "content": "Hello world"}]
COUNTS = [
    ("/chat/completions/input_tokens", {"messages": HELLO}),
    ("/v1/chat/completions/input_tokens", {"messages": [{"role": "system", "content": "Be brief."}] + HELLO}),
    ("/chat/completions/input_tokens", {"messages": HELLO, "max_tokens": 5}),
    ("/chat/completions/input_tokens", {}),
    ("/chat/completions/input_tokens", b"[1, 2]"),
    ("/responses/input_tokens", {"input": "Hello world"}),
    ("/v1/responses/input_tokens", {"input": HELLO}),
    ("/v1/responses/input_tokens", {"input": "Hi", "instructions": "Be brief."}),
    ("/v1/responses/input_tokens", {}),
]


def t_counts(L, B):
    for path, body in COUNTS:
        S.equal(f"{path} {body if isinstance(body, bytes) else json.dumps(body)}", call(B.port, "POST", path, body),
                call(L.port, "POST", path, body))


def props_view(body):
    d = dict(body)
    for k in ("build_info", "media_marker", "n_ctx", "chat_template_caps"):
        d.pop(k, None)
    return d


def wait_sleeping(port, want=True, limit=10.0):
    t0 = time.time()
    while time.time() - t0 < limit:
        if call(port, "GET", "/props")[1].get("is_sleeping") == want:
            return True
        time.sleep(0.1)
    return False


def t_sleep(L, B):
    awake = {s: call(s.port, "GET", "/props")[1] for s in (L, B)}
    S.equal("awake: is_sleeping false", [awake[L]["is_sleeping"], awake[B]["is_sleeping"]], [False, False])
    # polled every 0.1 s, /props must not keep either awake
    S.check("llama-server sleeps while /props is polled", wait_sleeping(L.port), "")
    S.check("bankml sleeps while /props is polled", wait_sleeping(B.port), "")
    asleep = {s: call(s.port, "GET", "/props")[1] for s in (L, B)}
    S.equal("asleep: /props is the awake one with is_sleeping true",
            props_view(asleep[B]), dict(props_view(awake[B]), is_sleeping=True))
    S.equal("asleep: /props equal to llama-server's", props_view(asleep[B]), props_view(asleep[L]))
    S.equal("asleep: /health", call(B.port, "GET", "/health"), call(L.port, "GET", "/health"))
    lm, bm = call(L.port, "GET", "/v1/models")[1], call(B.port, "GET", "/v1/models")[1]
    for d in (lm, bm):
        for x in d["data"]:
            x.pop("created", None)
    S.equal("asleep: /v1/models (meta included)", bm, lm)
    S.equal("asleep: still sleeping after /health, /props and /v1/models",
            [call(s.port, "GET", "/props")[1]["is_sleeping"] for s in (L, B)], [True, True])
    S.equal("/tokenize wakes", call(B.port, "POST", "/tokenize", {"content": "Hello"}),
            call(L.port, "POST", "/tokenize", {"content": "Hello"}))
    S.equal("awake again after /tokenize", [call(s.port, "GET", "/props")[1]["is_sleeping"] for s in (L, B)],
            [False, False])
    body = {"prompt": "Once upon a time", "n_predict": 8, "temperature": 0}
    got, want = call(B.port, "POST", "/completion", body), call(L.port, "POST", "/completion", body)
    S.equal("after the sleep: /completion's content, counts and cache_n",
            [got[0], got[1]["content"], got[1]["tokens_predicted"], got[1]["timings"]["cache_n"]],
            [want[0], want[1]["content"], want[1]["tokens_predicted"], want[1]["timings"]["cache_n"]])


def expires_year(port):
    ps = call(port, "GET", "/api/ps")[1]
    m = re.match(r"^(\d{4})-", ps["models"][0]["expires_at"]) if ps.get("models") else None
    return int(m.group(1)) if m else None


try:
    with oracle.Server.llama(kit, MODEL, name="llama-sleep-counts") as L, \
            oracle.Server.bankml(MODEL, extra=["--fork", FORK], name="bankml-sleep-counts") as B:
        S.run("token counts", t_counts, L, B)
        call(B.port, "POST", "/completion", {"prompt": "Hi", "n_predict": 2})
        S.check("no --sleep-idle-seconds: a llama-server route keeps the model for good", (expires_year(B.port) or 0) > 2200,
                f"expires in {expires_year(B.port)}")
        call(B.port, "POST", "/api/generate", {"model": "stories260k", "prompt": "Hi", "stream": False,
                                               "options": {"num_predict": 2}})
        S.check("an Ollama request gives Ollama's 5 minutes", expires_year(B.port) == time.gmtime().tm_year or
                expires_year(B.port) == time.gmtime().tm_year + 1, f"expires in {expires_year(B.port)}")
    with oracle.Server.llama(kit, MODEL, extra=["--sleep-idle-seconds", "1"], name="llama-sleep") as L, \
            oracle.Server.bankml(MODEL, extra=["--fork", FORK, "--sleep-idle-seconds", "1"], name="bankml-sleep") as B:
        S.run("sleep", t_sleep, L, B)
except oracle.ServerError as e:
    S.fail("servers", str(e))
for srv, argv in (("llama-server", [kit.tool("llama-server"), "-m", MODEL]),
                  ("bankml", [BIN, "serve", MODEL, "--fork", FORK])):
    p = subprocess.run(argv + ["--sleep-idle-seconds", "0", "--port", "0"], capture_output=True, text=True, timeout=60)
    S.check(f"--sleep-idle-seconds 0 refused by {srv}", p.returncode != 0 and
            "invalid value: cannot be 0 or less than -1" in p.stderr, p.stderr[-300:])
S.finish()
