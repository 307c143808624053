"""oracle_router.py -- llama-server b11669 started without a model (its router mode, with no models found: an
empty LLAMA_CACHE and HOME) next to `bankml serve` with no model and an empty FORK.json: /health, /v1/models,
/models, /props (build_info masked), completions, chat, /tokenize, /v1/completions, /v1/responses and /v1/messages
with no model, an empty one and an unknown one; OPTIONS with --cors-origins localhost (what the peer suite's
CORS tests start); --models-max and --no-models-autoload in the router's /props. Status and body equal. Standard library only."""
import http.client, json, os, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("oracle_router")
kit = oracle.kit_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
tmp = tempfile.mkdtemp(prefix="oracle-router-")
FORK = os.path.join(tmp, "empty.FORK.json")
ENV = dict(os.environ, HOME=tmp, LLAMA_CACHE=os.path.join(tmp, "cache"))


def call(port, method, path, body=None, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    c.request(method, path, body=data, headers=headers or {})
    r = c.getresponse()
    raw = r.read()
    acao = r.getheader("Access-Control-Allow-Origin")
    c.close()
    try:
        v = json.loads(raw)
    except ValueError:
        v = raw.decode("latin-1")
    if isinstance(v, dict):
        v.pop("build_info", None)
    return [r.status, v, acao]


MSG = [{"role": "user", "content": "hi"}]
REQS = [("GET", "/health", None), ("GET", "/v1/models", None), ("GET", "/models", None), ("GET", "/props", None)]
for model in (None, "", "x"):
    extra = {} if model is None else {"model": model}
    REQS += [("POST", "/completion", dict(prompt="hi", **extra)), ("POST", "/v1/chat/completions", dict(messages=MSG, **extra)),
             ("POST", "/tokenize", dict(content="hi", **extra)), ("POST", "/v1/completions", dict(prompt="hi", **extra)),
             ("POST", "/v1/responses", dict(input="hi", **extra)),
             ("POST", "/v1/messages", dict(messages=MSG, max_tokens=4, **extra))]
REQS += [("POST", p, b) for p in ("/v1/messages", "/v1/responses", "/apply-template", "/detokenize", "/infill",
                                  "/v1/chat/completions/input_tokens", "/completion")
         for b in ({}, b"{not json", {"content": 5, "tokens": "x"})]


def servers(flags, label):
    L = oracle.Server([kit.tool("llama-server"), "--host", "127.0.0.1", "--port", "{port}", "-t", "2", "--no-webui",
                       *flags], name="llama-router", env=ENV)
    B = oracle.Server([BIN, "serve", "--host", "127.0.0.1", "--port", "{port}", "-t", "2", "--fork", FORK, *flags],
                      name="bankml-router")
    return L, B


try:
    L, B = servers([], "router")
    with L, B:
        for method, path, body in REQS:
            shown = body.decode() if isinstance(body, bytes) else json.dumps(body) if body is not None else ""
            S.equal(f"{method} {path} {shown}", call(B.port, method, path, body),
                    call(L.port, method, path, body))
    L, B = servers(["--cors-origins", "localhost"], "cors")
    with L, B:
        pre = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "Authorization"}
        for origin in ("http://localhost", "http://127.0.0.1:3000", "http://[::1]:3000", "http://evil.com",
                       "http://localhost.evil.com"):
            h = dict(pre, Origin=origin)
            S.equal(f"--cors-origins localhost: OPTIONS /completions from {origin}",
                    call(B.port, "OPTIONS", "/completions", None, h), call(L.port, "OPTIONS", "/completions", None, h))
    L, B = servers(["--models-max", "2", "--no-models-autoload"], "models-max")
    with L, B:
        S.equal("--models-max 2 --no-models-autoload: /props", call(B.port, "GET", "/props"),
                call(L.port, "GET", "/props"))
except oracle.ServerError as e:
    S.fail("servers", str(e))
S.finish()
