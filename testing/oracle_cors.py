"""oracle_cors.py -- llama-server b11669's CORS rules, through a real `bankml serve` next to llama-server on
stories260K: the default (--cors-origins "*" with credentials: the Origin echoed, an empty header without one),
--cors-origins localhost (only a localhost Origin reflected, by llama.cpp's URL parser: user info, IPv6
brackets, ports stoi reads), a literal list with --no-cors-credentials, --cors-methods and --cors-headers, and
--api-key (a preflight needs no key). For each: GET /health, OPTIONS /completions with a preflight's headers, a
404 path and a 400 answer, with no Origin and with origins that are and are not localhost; the status, the
Content-Type, the body and every Access-Control-* header compared. Then bankML's own rules where they apply:
--allow-origin (exact origins, a 403 preflight for others) and Ollama's /api/ routes (no llama-server CORS).
Standard library only."""
import http.client, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("oracle_cors")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(shared, "models", "stories260K.gguf")
FORK = oracle.pinned_fork(MODEL, "oracle-cors-")

ORIGINS = [None, "http://evil.com", "http://localhost", "http://localhost:8080", "http://127.0.0.1:3000",
           "https://[::1]:3000", "http://[::1]", "http://localhost.evil.com", "http://notlocalhost",
           "http://evil.com/@localhost", "http://user:pw@127.0.0.1", "http://localhost:abc", "http://localhost: 80",
           "http://localhost:", "http://localhost:99999999999", "http://[::1", "ftp://localhost", "HTTP://localhost",
           "http://LOCALHOST", "localhost", ""]


def call(port, method, path, origin, body=None, headers=()):
    h = dict(headers)
    if origin is not None:
        h["Origin"] = origin
    if method == "OPTIONS":
        h.update({"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "Authorization"})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    cors = sorted((k.lower(), v) for k, v in r.getheaders() if k.lower().startswith("access-control-"))
    c.close()
    return [r.status, (r.getheader("Content-Type") or "").split(";")[0], data.decode("latin-1") if method == "OPTIONS" else "",
            [list(x) for x in cors]]


REQS = [("GET", "/health", None), ("OPTIONS", "/completions", None), ("GET", "/nowhere", None),
        ("POST", "/completion", b"{not json")]


def compare(label, flags, origins=ORIGINS, headers=()):
    with oracle.Server.llama(kit, MODEL, extra=flags, name="llama-cors") as L, \
            oracle.Server.bankml(MODEL, extra=["--fork", FORK, *flags], name="bankml-cors") as B:
        for method, path, body in REQS:
            for o in origins:
                S.equal(f"{label}: {method} {path} Origin {o!r}", call(B.port, method, path, o, body, headers),
                        call(L.port, method, path, o, body, headers))


compare("default", [])
compare("--cors-origins localhost", ["--cors-origins", "localhost"])
compare("--cors-origins list --no-cors-credentials", ["--cors-origins", "http://a.com,http://b.com",
                                                      "--no-cors-credentials", "--cors-methods", "GET",
                                                      "--cors-headers", "X-A"], ORIGINS[:4])
compare("--no-cors-credentials (\"*\" written as given)", ["--no-cors-credentials"], ORIGINS[:3])
compare("--api-key (no key sent)", ["--api-key", "k1"], ORIGINS[:3])

# bankML's own rules: --allow-origin, and Ollama's routes
with oracle.Server.bankml(MODEL, extra=["--fork", FORK, "--allow-origin", "https://space.example"],
                          name="bankml-allow") as B:
    S.equal("--allow-origin: an allowed preflight", call(B.port, "OPTIONS", "/completions", "https://space.example")[:2],
            [204, ""])
    S.equal("--allow-origin: a foreign preflight is refused", call(B.port, "OPTIONS", "/completions",
                                                                  "http://evil.com")[0], 403)
    S.equal("--allow-origin: no header for a foreign origin", call(B.port, "GET", "/health", "http://evil.com")[3], [])
with oracle.Server.bankml(MODEL, extra=["--fork", FORK], name="bankml-api") as B:
    S.equal("/api/: a foreign preflight is refused (no llama-server CORS on Ollama's routes)",
            call(B.port, "OPTIONS", "/api/chat", "http://evil.com")[0], 403)
    S.equal("/api/: no CORS header", call(B.port, "GET", "/api/tags", "http://evil.com")[3], [])
p = subprocess.run([BIN, "serve", MODEL, "--fork", FORK, "--allow-origin", "https://x", "--cors-origins", "localhost"],
                   capture_output=True, text=True, timeout=30)
S.equal("--allow-origin with --cors-origins: refused at start", (p.returncode, p.stderr),
        (2, "bankml serve: give bankML's --allow-origin or llama-server's --cors-* flags, not both\n"))
S.finish()
