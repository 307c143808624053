"""oracle_serve_http.py -- bad requests, the API key and a client that leaves mid-stream, through a real
`bankml serve` next to llama-server b11669 on the demo model with the same flags (-t 2 -c 2048 -np 1 --jinja,
and --api-key K for the key cases).

Where llama-server refuses a request, bankml must answer the same status and the same body, byte for byte
once parsed (invalid JSON with nlohmann's exact parse error, wrong types, malformed messages, a body past
100 MiB, a missing or wrong key). Where llama-server takes what bankml refuses (a chunked body, a Host that is
not loopback, a body between 16 and 100 MiB, a `model` that is not pinned), bankml must answer its documented
refusal with its reason. After every case both servers answer the next request again, and equally: content,
usage and cache_n (the slot state must not have moved on either side, or moved the same way).

A client that disconnects after a few SSE chunks: the next requests (the same prompt, another prompt, a
/completion, cache_prompt false) must give llama-server's content, token counts and cache_n; bankml must have
stopped the abandoned generation early.

Standard library only. Ends with "N passed, N failed, N skipped"."""
import http.client, json, os, socket, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

CTX = 2048
S = oracle.Suite("oracle_serve_http")
kit = oracle.kit_or_skip(S)
DEMO = os.path.join(oracle.ROOT, "models", "demo.gguf")
FORK = os.path.join(oracle.ROOT, "models.FORK.json")
if not os.path.exists(DEMO):
    p = subprocess.run(["make", "-s", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0 or not os.path.exists(DEMO):
        oracle.skip_all(f"no models/demo.gguf (make demo-model: {p.stdout.strip()[-200:]})", S)

HI = [{"role": "user", "content": "hi"}]
PROBE = {"messages": [{"role": "user", "content": "Hello there"}], "max_tokens": 6, "temperature": 0}
MSG_HOST = "bankml serve answers loopback clients only (Host must be 127.0.0.1, localhost or [::1])"
MSG_CHUNKED = "chunked requests are not accepted; send Content-Length"
MiB = 1024 * 1024


def view(status, body):
    """What must be equal in an answer: everything but what differs by nature (ids, times, the receipt,
    the build in system_fingerprint); of the timings, cache_n, prompt_n and predicted_n."""
    if isinstance(body, dict) and ("choices" in body or "timings" in body):
        body = {k: v for k, v in body.items() if k not in ("created", "id", "system_fingerprint", "bankml_receipt")}
        if "timings" in body:
            body["timings"] = {k: body["timings"].get(k) for k in ("cache_n", "prompt_n", "predicted_n")}
    return [status, body]


def request(port, method, path, body=None, headers=None, host=None, chunked=False, timeout=60):
    """(status, parsed body or text). host, when given, replaces the Host header ("" sends none)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        if isinstance(data, str):
            data = data.encode()
        c.putrequest(method, path, skip_host=host is not None, skip_accept_encoding=True)
        if host:
            c.putheader("Host", host)
        hdrs = dict(headers or {})
        if data is not None:
            hdrs.setdefault("Content-Type", "application/json")
            if chunked:
                hdrs["Transfer-Encoding"] = "chunked"
            else:
                hdrs["Content-Length"] = str(len(data))
        for k, v in hdrs.items():
            c.putheader(k, v)
        c.endheaders()
        if data is not None:
            if chunked:
                half = len(data) // 2
                for part in (data[:half], data[half:]):
                    c.send(b"%x\r\n%s\r\n" % (len(part), part))
                c.send(b"0\r\n\r\n")
            else:
                c.send(data)
        r = c.getresponse()
        raw = r.read().decode("utf-8", "replace")
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw
    finally:
        c.close()


def big_post(port, path, size):
    """POSTs a valid JSON body padded with spaces to `size` bytes, sending it all while a thread reads the
    answer (a server may answer before the body is in). Returns (status, body bytes)."""
    head_json = b'{"content":"hi"}'
    body = head_json + b" " * (size - len(head_json))
    head = (b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n" % (path.encode(), len(body)))
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    got = []

    def reader():
        buf = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                buf += b
                h, sep, rest = buf.partition(b"\r\n\r\n")
                if sep:
                    cl = [ln for ln in h.split(b"\r\n") if ln.lower().startswith(b"content-length:")]
                    if cl and len(rest) >= int(cl[0].split(b":")[1]):
                        break
        except OSError:
            pass
        got.append(buf)

    t = threading.Thread(target=reader)
    t.start()
    try:
        s.sendall(head + body)
    except OSError:
        pass   # bankml answers 413 and closes before the body is in
    t.join()
    s.close()
    h, _, rest = got[0].partition(b"\r\n\r\n")
    status = int(h.split(b" ", 2)[1]) if h.startswith(b"HTTP/") else None
    return status, rest


def probe_both(label, L, B, body=PROBE):
    """The next request, on both: equal content, usage and cache_n."""
    a = view(*request(L.port, "POST", "/v1/chat/completions", body))
    b = view(*request(B.port, "POST", "/v1/chat/completions", body))
    return S.equal(f"{label}: next answer equal", b, a)


# ---------------------------------------------------------------- the cases

# Each: (label, path, raw body). llama-server refuses all of them; bankml must answer the same.
JSON_CASES = [
    ("invalid JSON: bad key", "/v1/chat/completions", "{bad"),
    ("invalid JSON: empty body", "/v1/chat/completions", ""),
    ("invalid JSON: whitespace only", "/v1/chat/completions", " \n\t "),
    ("invalid JSON: trailing text", "/v1/chat/completions", '{"messages": [], "max_tokens": 2} trailing'),
    ("invalid JSON: trailing comma", "/v1/chat/completions", '{"a":1,}'),
    ("invalid JSON: bad literal", "/v1/chat/completions", '{"a":tru}'),
    ("invalid JSON: raw newline in string", "/v1/chat/completions", '{"a":"x\n"}'),
    ("invalid JSON: raw control bytes", "/v1/chat/completions", b'{"a":"\x01\x1f"}'),
    ("invalid JSON: byte 0xff", "/v1/chat/completions", b'{"a":"\xff"}'),
    ("invalid JSON: overlong UTF-8", "/v1/chat/completions", b'{"a":"\xe0\x80\x80"}'),
    ("invalid JSON: cut UTF-8, no closing quote", "/v1/chat/completions", b'{"a":"\xf0\x9f\x98'),
    ("invalid JSON: UTF-8 outside a string", "/v1/chat/completions", b'{"a":\xf0\x9f\x98\x80}'),
    ("invalid JSON: leading zero", "/v1/chat/completions", '{"a":01}'),
    ("invalid JSON: empty exponent", "/v1/chat/completions", '{"a":1e}'),
    ("invalid JSON: exponent sign only", "/v1/chat/completions", '{"a":1e+}'),
    ("invalid JSON: no fraction digits", "/v1/chat/completions", '{"a":1.}'),
    ("invalid JSON: minus alone", "/v1/chat/completions", '  \n {"a":\n  -}'),
    ("invalid JSON: number overflow", "/v1/chat/completions", '{"a":1e999}'),
    ("invalid JSON: short \\u", "/completion", '{"a":"\\u12"}'),
    ("invalid JSON: lone high surrogate", "/completion", '{"a":"\\ud800"}'),
    ("invalid JSON: high surrogate, no low", "/completion", '{"a":"\\ud800\\u0041"}'),
    ("invalid JSON: lone low surrogate", "/completion", '{"a":"\\udc00"}'),
    ("invalid JSON: bad escape", "/completion", '{"a":"\\x"}'),
    ("invalid JSON: no closing quote", "/completion", '{"a":"abc'),
    ("invalid JSON: no colon", "/tokenize", '{"a" 1}'),
    ("invalid JSON: no comma in array", "/tokenize", '[1 2]'),
    ("invalid JSON: cut array", "/tokenize", '[1,'),
    ("invalid JSON: nested bad literal", "/tokenize", '{"a":{"b":[1,{"c":nul}]}}'),
    ("invalid JSON: no comma in object", "/detokenize", '{"a":1 "b":2}'),
    ("invalid JSON: extra brace", "/detokenize", '{"a":1}}'),
    ("invalid JSON: lines counted", "/apply-template", '{"a":\n\n\n'),
    ("invalid JSON: broken byte order mark", "/apply-template", b'\xef\xbb{"a":1}'),
    ("invalid JSON: NUL first", "/tokenize", b'\x00{"content":"hi"}'),
    ("wrong type: stream", "/v1/chat/completions", {"messages": HI, "stream": "yes"}),
    ("wrong type: max_tokens", "/v1/chat/completions", {"messages": HI, "max_tokens": "5"}),
    ("wrong type: temperature", "/v1/chat/completions", {"messages": HI, "temperature": "0"}),
    ("wrong type: seed", "/v1/chat/completions", {"messages": HI, "seed": "x"}),
    ("wrong type: logprobs", "/v1/chat/completions", {"messages": HI, "logprobs": "yes"}),
    ("wrong type: cache_prompt", "/v1/chat/completions", {"messages": HI, "cache_prompt": "no"}),
    ("wrong type: n_cmpl", "/v1/chat/completions", {"messages": HI, "n_cmpl": "x"}),
    ("out of range: n 2 on one slot", "/v1/chat/completions", {"messages": HI, "n": 2}),
    ("top_logprobs without logprobs", "/v1/chat/completions", {"messages": HI, "top_logprobs": 3}),
    ("body is an array", "/v1/chat/completions", [1, 2]),
    ("body is a string", "/v1/chat/completions", '"str"'),
    ("no messages", "/v1/chat/completions", {}),
    ("messages not an array", "/v1/chat/completions", {"messages": "x"}),
    ("message not an object", "/v1/chat/completions", {"messages": ["x"]}),
    ("content a number", "/v1/chat/completions", {"messages": [{"role": "user", "content": 5}]}),
    ("role a number", "/v1/chat/completions", {"messages": [{"role": 5, "content": "x"}]}),
    ("no role (message dumped)", "/v1/chat/completions",
     {"messages": [{"content": "x\t\u0001\u00e9\"", "n": 1.5, "b": [True, None, -3, 1.0]}]}),
    ("assistant without content", "/v1/chat/completions", {"messages": [{"role": "assistant"}]}),
    ("image part", "/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
    ("unknown part type", "/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "foo"}]}]}),
    ("text part without text", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": [{"type": "text"}]}]}),
    ("text part a number", "/v1/chat/completions",
     {"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}),
    ("name a number", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x", "name": 3}]}),
    ("/completion without prompt", "/completion", {}),
    ("/completion prompt a number", "/completion", {"prompt": 5}),
    ("/completion prompt an object", "/completion", {"prompt": {"a": 1}}),
    ("/completion n_probs a string", "/completion", {"prompt": "x", "n_probs": "3"}),
    ("/tokenize content a number", "/tokenize", {"content": 5}),
    ("/tokenize content null", "/tokenize", {"content": None}),
    ("/tokenize content nested array", "/tokenize", {"content": [[1]]}),
    ("/detokenize tokens a string", "/detokenize", {"tokens": "x"}),
    ("/detokenize tokens of strings", "/detokenize", {"tokens": ["x"]}),
    ("/detokenize tokens null", "/detokenize", {"tokens": None}),
    ("/apply-template role a number", "/apply-template", {"messages": [{"role": 5, "content": "x"}]}),
    ("/apply-template messages a string", "/apply-template", {"messages": "x"}),
]

# Requests llama-server takes that bankml used to mishandle: the answers must be equal.
ACCEPTED = [
    ("tokenize mixed strings and ids", "/tokenize", {"content": ["hi", 5, "there", True]}),
    ("tokenize ids then text, add_special", "/tokenize", {"content": [5, "hi"], "add_special": True}),
    ("tokenize after a byte order mark", "/tokenize", b'\xef\xbb\xbf{"content":"hi"}'),
    ("tokenize: a NUL byte ends the JSON", "/tokenize", b'{"content":"hi"}\x00junk'),
    ("detokenize a boolean id", "/detokenize", {"tokens": [348, True]}),
    ("n 1 on one slot", "/v1/chat/completions", dict(PROBE, n=1)),
    ("stop of another type is ignored", "/v1/chat/completions", dict(PROBE, stop=5)),
    ("n_predict a fraction", "/v1/chat/completions", dict(PROBE, n_predict=1.5)),
]


def t_json_cases(L, B):
    S.equal("first answer", view(*request(B.port, "POST", "/v1/chat/completions", PROBE)),
            view(*request(L.port, "POST", "/v1/chat/completions", PROBE)))
    for label, path, body in JSON_CASES:
        want = request(L.port, "POST", path, body)
        got = request(B.port, "POST", path, body)
        S.check(f"{label}: llama-server refuses it", want[0] >= 400, f"llama-server answered {want[0]}")
        S.equal(f"{label}: {want[0]} and llama-server's body", list(got), list(want))
    probe_both("after the bad requests", L, B)
    for label, path, body in ACCEPTED:
        S.equal(label, view(*request(B.port, "POST", path, body)), view(*request(L.port, "POST", path, body)))
    probe_both("after the accepted ones", L, B)


def t_transport(L, B):
    tok = {"content": "hi"}
    # a body past cpp-httplib's 100 MiB: both 413, empty body
    sl, bl = big_post(L.port, "/tokenize", 100 * MiB + 1)
    sb, bb = big_post(B.port, "/tokenize", 100 * MiB + 1)
    S.equal("body 100 MiB + 1: 413 with llama-server's empty body", [sb, bb], [sl, bl])
    S.equal("body 100 MiB + 1: llama-server's status is 413", sl, 413)
    # 16 MiB + 1: llama-server takes it; bankml refuses with its reason
    sl, bl = big_post(L.port, "/tokenize", 16 * MiB + 1)
    sb, bb = big_post(B.port, "/tokenize", 16 * MiB + 1)
    S.equal("body 16 MiB + 1: llama-server answers it", [sl, json.loads(bl)], [200, {"tokens": [348]}])
    S.equal("body 16 MiB + 1: bankml's 413 with its reason", [sb, bb], [413, b"request too large"])
    sb, bb = big_post(B.port, "/tokenize", 16 * MiB)
    S.equal("body of exactly 16 MiB: bankml answers it", [sb, json.loads(bb)], [sl, json.loads(bl)])
    probe_both("after the large bodies", L, B)
    # chunked: llama-server decodes it; bankml refuses
    S.equal("chunked body: llama-server answers it", request(L.port, "POST", "/tokenize", tok, chunked=True),
            (200, {"tokens": [348]}))
    S.equal("chunked body: bankml's 400 with its reason", request(B.port, "POST", "/tokenize", tok, chunked=True),
            (400, MSG_CHUNKED))
    probe_both("after a chunked body", L, B)
    # Host: llama-server answers any; bankml only loopback names
    for host in ("example.com", "10.0.0.1:8080", "localhost.evil.com", "127.0.0.1.nip.io"):
        S.equal(f"Host {host}: llama-server answers it", request(L.port, "POST", "/tokenize", tok, host=host),
                (200, {"tokens": [348]}))
        S.equal(f"Host {host}: bankml's 403 with its reason", request(B.port, "POST", "/tokenize", tok, host=host),
                (403, MSG_HOST))
    for host in ("localhost:80", "LOCALHOST", "[::1]:1234", "127.0.0.1"):
        S.equal(f"Host {host}: both answer", request(B.port, "POST", "/tokenize", tok, host=host),
                request(L.port, "POST", "/tokenize", tok, host=host))
    probe_both("after foreign Host headers", L, B)
    # a model name nobody pinned: llama-server (one model) serves its model whatever is asked, and so does a
    # single-model bankml. The request is PROBE itself, so llama-server's slot ends as it was.
    want = request(L.port, "POST", "/v1/chat/completions", dict(PROBE, model="gpt-4o"))
    got = request(B.port, "POST", "/v1/chat/completions", dict(PROBE, model="gpt-4o"))
    S.equal("model gpt-4o: llama-server answers it", view(*want)[0], 200)
    S.equal("model gpt-4o: bankml (one model) answers as llama-server", view(*got), view(*want))
    probe_both("after an unknown model", L, B)
    # mirostat: llama-server samples with it; bankml refuses what it does not reproduce. PROBE again, so
    # llama-server's slot ends as it was.
    st, _ = request(L.port, "POST", "/v1/chat/completions", dict(PROBE, mirostat=2))
    S.equal("mirostat: llama-server answers it", st, 200)
    S.equal("mirostat: bankml's 400 with its reason", request(B.port, "POST", "/v1/chat/completions",
                                                              dict(PROBE, mirostat=2)),
            (400, {"error": {"code": 400, "message": "mirostat: not reproduced; bankML reproduces llama-server's "
                                                     "default sampler chain", "type": "invalid_request_error"}}))
    probe_both("after mirostat", L, B)
    got = request(B.port, "POST", "/v1/chat/completions", dict(PROBE, model="demo"))
    S.equal("model demo (its pinned name): answered", view(*got), view(*want))


def t_api_key(LK, BK):
    for path in ("/health", "/v1/health"):
        S.equal(f"key set, GET {path} without a key: answered (public)", request(BK.port, "GET", path),
                request(LK.port, "GET", path))
    for path in ("/v1/models", "/models", "/props", "/metrics", "/slots", "/nope", "/api/tags"):
        S.equal(f"key set, GET {path} without a key: 401", request(BK.port, "GET", path),
                request(LK.port, "GET", path))
    st, body = request(LK.port, "GET", "/")
    S.equal("key set, GET /: llama-server (no web UI) 404, no key asked", [st, body["error"]["code"]], [404, 404])
    st, body = request(BK.port, "GET", "/")
    S.check("key set, GET /: bankml's status page, no key asked (documented)",
            st == 200 and "bankml" in body, f"{st} {body!r}")
    tok = {"content": "hi"}
    for hdrs in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "bearer K"},
                 {"Authorization": "Bearer  K"}, {"Authorization": "Bearer"}, {"Authorization": "Basic K"},
                 {"X-Api-Key": "wrong"}, {"Authorization": "Bearer wrong", "X-Api-Key": "K"},
                 {"Authorization": "Bearer K"}, {"Authorization": "K"}, {"X-Api-Key": "K"},
                 {"X-Api-Key": "Bearer K"}):
        name = ", ".join(f"{k}: {v}" for k, v in hdrs.items()) or "no key"
        S.equal(f"key set, POST /tokenize with {name}", request(BK.port, "POST", "/tokenize", tok, headers=hdrs),
                request(LK.port, "POST", "/tokenize", tok, headers=hdrs))
    ok = {"Authorization": "Bearer K"}
    for path, body in (("/v1/chat/completions", PROBE), ("/completion", {"prompt": "hi", "n_predict": 3,
                                                                          "temperature": 0})):
        S.equal(f"key set, POST {path} without a key: 401", request(BK.port, "POST", path, body),
                request(LK.port, "POST", path, body))
        S.equal(f"key set, POST {path} with the key: answered",
                view(*request(BK.port, "POST", path, body, headers=ok)),
                view(*request(LK.port, "POST", path, body, headers=ok)))


# ---------------------------------------------------------------- a client that leaves mid-stream

def leave_stream(port, path, body, n_events=3):
    """Starts a stream, reads n_events `data:` lines, then closes the connection. Returns the lines read."""
    data = json.dumps(dict(body, stream=True)).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(data), data))
    buf, got = b"", []
    while len(got) < n_events:
        b = s.recv(4096)
        if not b:
            break
        buf += b
        got = [ln for ln in buf.split(b"\n") if ln.startswith(b"data:")]
    s.shutdown(socket.SHUT_RDWR)
    s.close()
    return got[:n_events]


def n_records(B):
    st, m = request(B.port, "GET", "/bankml/metrics")
    return len(m.get("records") or []) if st == 200 else 0


def record_after(B, n, timeout=15.0):
    """The first record past the n already kept (waits for the abandoned generation to end), or {}."""
    t_end = time.time() + timeout
    while time.time() < t_end:
        st, m = request(B.port, "GET", "/bankml/metrics")
        recs = m.get("records") or [] if st == 200 else []
        if len(recs) > n:
            return recs[n]
        time.sleep(0.05)
    return {}


def t_disconnect(L, B):
    long_chat = {"messages": [{"role": "user", "content": "Tell me a long story about a cat."}], "max_tokens": 1500,
                 "temperature": 0}
    # the answer as if nothing had happened (llama-server, before any disconnect)
    alone = view(*request(L.port, "POST", "/v1/chat/completions", dict(long_chat, max_tokens=8)))
    n0 = n_records(B)
    for who, srv in (("llama-server", L), ("bankml", B)):
        ev = leave_stream(srv.port, "/v1/chat/completions", long_chat)
        S.check(f"{who}: 3 chunks read before leaving", len(ev) == 3, f"{ev}")
    rec = record_after(B, n0)
    S.check("bankml stopped the abandoned chat early (record: cancelled)",
            rec.get("finish") == "cancelled" and rec.get("completion_tokens", 1500) < 1500, f"record {rec}")
    # the same prompt next: every prompt token is in the slot on both sides (one less is reused)
    got = view(*request(B.port, "POST", "/v1/chat/completions", dict(long_chat, max_tokens=8)))
    want = view(*request(L.port, "POST", "/v1/chat/completions", dict(long_chat, max_tokens=8)))
    S.equal("after leaving a chat stream: the same prompt again", got, want)
    S.equal("after leaving a chat stream: content as if alone", got[1]["choices"], alone[1]["choices"])
    S.equal("after leaving a chat stream: cache_n is the prompt less one", got[1]["timings"]["cache_n"],
            got[1]["usage"]["prompt_tokens"] - 1)
    for who, srv in (("llama-server", L), ("bankml", B)):
        leave_stream(srv.port, "/v1/chat/completions", long_chat)
    # another prompt next: what is reused is the shared template head, whatever was generated
    other = {"messages": [{"role": "user", "content": "Why is the sky blue?"}], "max_tokens": 8, "temperature": 0}
    probe_both("after leaving a chat stream, another prompt", L, B, other)
    # streamed next, seeded
    seeded = dict(other, temperature=0.9, seed=7, stream=True)
    (sl, el), (sb, eb) = L.stream("/v1/chat/completions", seeded), B.stream("/v1/chat/completions", seeded)
    keep = lambda evs: [{k: v for k, v in e.items() if k in ("choices", "usage")} if isinstance(e, dict) else e
                        for e in evs]
    S.equal("after leaving a chat stream, a seeded stream", [sb, keep(eb)], [sl, keep(el)])
    # /completion: leave, then the same prompt and cache_prompt false
    comp = {"prompt": "Once upon a time", "n_predict": 1500, "temperature": 0}
    n0 = n_records(B)
    for who, srv in (("llama-server", L), ("bankml", B)):
        leave_stream(srv.port, "/completion", comp, n_events=2)
    rec = record_after(B, n0)
    S.check("bankml stopped the abandoned /completion early (record: cancelled)",
            rec.get("finish") == "cancelled" and rec.get("completion_tokens", 1500) < 1500, f"record {rec}")
    ign = ("timings", "id_slot", "generation_settings", "prompt_ms", "predicted_ms")
    for label, body in (("same prompt", dict(comp, n_predict=8)),
                        ("cache_prompt false", dict(comp, n_predict=8, cache_prompt=False))):
        sl, jl = request(L.port, "POST", "/completion", body)
        sb, jb = request(B.port, "POST", "/completion", body)
        S.equal(f"after leaving a /completion stream, {label}",
                [sb, {k: jb.get(k) for k in ("content", "tokens_cached", "tokens_evaluated", "tokens_predicted",
                                             "stop_type")},
                 jb.get("timings", {}).get("cache_n")],
                [sl, {k: jl.get(k) for k in ("content", "tokens_cached", "tokens_evaluated", "tokens_predicted",
                                             "stop_type")},
                 jl.get("timings", {}).get("cache_n")])


try:
    with oracle.Server.llama(kit, DEMO, ctx=CTX) as L, \
            oracle.Server.bankml(DEMO, ctx=CTX, extra=["--fork", FORK]) as B:
        S.run("bad requests", t_json_cases, L, B)
        S.run("transport refusals", t_transport, L, B)
        S.run("disconnects", t_disconnect, L, B)
except oracle.ServerError as e:
    S.fail("servers", str(e))
try:
    with oracle.Server.llama(kit, DEMO, ctx=CTX, extra=["--api-key", "K"], name="llama-demo-key") as LK, \
            oracle.Server.bankml(DEMO, ctx=CTX, extra=["--fork", FORK, "--api-key", "K"],
                                 name="bankml-demo-key") as BK:
        S.run("API key", t_api_key, LK, BK)
except oracle.ServerError as e:
    S.fail("servers with --api-key", str(e))
S.finish()
