"""test_serve.py -- black-box test of src/api/serve.c (the HTTP transport of `bankml serve`) through
testing/serve_driver.c, a small binary that serves a few demo routes on a free loopback port.

Checks status lines, headers and bodies, the limits and refusals of §2.1 (16 KiB line, 100 headers,
16 MiB body, chunked, Host, Content-Type, Content-Length, connection places, slow clients, deadlines, read timeout), the API key
(llama-server's 401 body), CORS preflight, SSE and NDJSON framing, client-gone detection, pipelining,
concurrency and a clean stop on SIGTERM/SIGINT. With the oracle kit it also asks llama-server b11669
the same bad requests and compares the bodies serve.c copies from it.

Standard library only. Builds the driver with $CC (default gcc) unless BANKML_SERVE_DRIVER names one.
Ends with "N passed, N failed, N skipped"; exit 1 on failure.
"""
import http.client, json, os, signal, socket, struct, subprocess, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import oracle  # noqa: E402  (Suite, the kit, Server.llama)

BODY_401 = b'{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}'
BODY_404 = b'{"error":{"message":"File Not Found","type":"not_found_error","code":404}}'
MSG_HOST = b"bankml serve answers loopback clients only (Host must be 127.0.0.1, localhost or [::1])"
JSON_CT = "application/json; charset=utf-8"
TEXT_CT = "text/plain; charset=utf-8"
SHED = (b"bankml serve: connection shed: too many connections whose request is still arriving; "
        b"send the request at once")
HEAD_408 = b"request timed out: the request head did not arrive within 3 s"

s = oracle.Suite("test_serve")


# ---------------------------------------------------------------- the driver

def build_driver():
    exe = os.environ.get("BANKML_SERVE_DRIVER")
    if exe:
        return exe
    exe = os.path.join(ROOT, "build", "serve_driver")
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    srcs = ["testing/serve_driver.c", "src/api/serve.c", "src/api/serve_nljson.c", "src/base/json.c", "src/base/log.c",
            "src/base/progress.c", "src/base/base.c"]
    cc = os.environ.get("CC", "gcc")
    flags = ["-std=gnu11", "-D_GNU_SOURCE", "-Iinclude", "-Isrc", "-pthread", "-O2", "-Wall", "-Wextra", "-Werror"]
    flags += os.environ.get("SERVE_CFLAGS", "").split()
    p = subprocess.run([cc, *flags, "-o", exe, *srcs, "-lm"], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print(p.stdout)
        s.fail("build serve_driver", p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "")
        s.finish()
    return exe


class Driver:
    """serve_driver on 127.0.0.1:0 (and a second listener with upstream=True)."""

    def __init__(self, exe, *args, upstream=False):
        argv = [exe, "--listen", "127.0.0.1:0", *args]
        if upstream:
            argv += ["--upstream", "127.0.0.1:0"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "listening":
            raise RuntimeError(f"serve_driver did not start: {line} {self.proc.stderr.read()}")
        self.port = int(line[1])
        self.port2 = int(line[2]) if len(line) > 2 else None

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ---------------------------------------------------------------- raw HTTP

def connect(port, timeout=10):
    return socket.create_connection(("127.0.0.1", port), timeout=timeout)


def read_all(sock):
    out = b""
    try:
        while True:
            b = sock.recv(65536)
            if not b:
                break
            out += b
    except (ConnectionResetError, socket.timeout):
        pass
    return out


def parse_response(raw):
    """(status, reason, {lower name: value}, body, header names in order)."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        return None, None, {}, raw, []
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    hdrs, names = {}, []
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        hdrs[k.strip().lower()] = v.strip()
        names.append(k.strip())
    return int(parts[1]), parts[2] if len(parts) > 2 else "", hdrs, body, names


def raw(port, data, timeout=10, shut=False):
    with connect(port, timeout) as c:
        c.sendall(data)
        if shut:
            c.shutdown(socket.SHUT_WR)
        return parse_response(read_all(c))


def get(port, path, headers=b"", host=b"127.0.0.1"):
    return raw(port, b"GET " + path.encode() + b" HTTP/1.1\r\nHost: " + host + b"\r\n" + headers + b"\r\n")


def post(port, path, body, ctype=b"application/json", headers=b""):
    if isinstance(body, str):
        body = body.encode()
    return raw(port, b"POST " + path.encode() + b" HTTP/1.1\r\nHost: localhost\r\nContent-Type: " + ctype +
               b"\r\nContent-Length: %d\r\n" % len(body) + headers + b"\r\n" + body)


# ---------------------------------------------------------------- tests

def t_basic(d):
    st, reason, h, body, names = get(d.port, "/health")
    s.equal("GET /health status", (st, reason), (200, "OK"))
    s.equal("GET /health body", body, b'{"status":"ok"}')
    # llama-server's default CORS ("*" with credentials): the Origin echoed, an empty value without one
    s.equal("GET /health headers", names, ["Content-Type", "Content-Length", "Access-Control-Allow-Origin",
                                           "Connection"])
    s.equal("GET /health: no Origin, an empty Access-Control-Allow-Origin", h["access-control-allow-origin"], "")
    s.equal("GET /health header values", (h["content-type"], h["content-length"], h["connection"]),
            (JSON_CT, "15", "close"))
    # the same routes on the second listener, which the handler can tell apart
    st, _, _, body, _ = get(d.port2, "/echo?a=1")
    e = json.loads(body)
    s.equal("second listener answers", (st, e["listener"], e["path"], e["query"]), (200, 1, "/echo", "a=1"))
    st, _, _, body, _ = get(d.port, "/echo")
    s.equal("first listener is 0", json.loads(body)["listener"], 0)
    # http.client as a normal client
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    c.request("POST", "/echo?x=%41+b", body=json.dumps({"k": "v"}), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    e = json.loads(r.read())
    c.close()
    s.equal("http.client POST /echo", (r.status, e["method"], e["path"], e["query"], e["body"], e["body_len"],
                                       e["content_type"]),
            (200, "POST", "/echo", "x=%41+b", '{"k": "v"}', 10, "application/json"))
    s.check("peer is loopback", e["peer"].startswith("127.0.0.1:"), e["peer"])
    st, _, _, body, _ = post(d.port, "/slots/0?action=save", "{}")
    e = json.loads(body)
    s.equal("path parameter :id", (st, e["params"]), (200, {"id": "0"}))
    st, _, _, body, _ = get(d.port, "/api/show%20x")
    s.equal("tail parameter *", (st, json.loads(body)["params"]), (200, {"*": "show x"}))
    st, _, _, body, _ = raw(d.port, b"DELETE /echo HTTP/1.1\r\nHost: [::1]:9\r\n\r\n")
    s.equal("DELETE route, Host [::1]:port", (st, json.loads(body)["method"]), (200, "DELETE"))
    st, _, h, body, _ = raw(d.port, b"HEAD /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
    s.equal("HEAD /health: GET's headers, no body", (st, h.get("content-length"), body), (200, "15", b""))
    st, _, h, body, _ = get(d.port, "/")
    s.equal("GET / text", (st, h["content-type"], body), (200, TEXT_CT, b"serve_driver is running"))


def t_errors(d):
    st, reason, h, body, _ = get(d.port, "/nope")
    s.equal("unknown route: llama-server's 404", (st, reason, h["content-type"], body),
            (404, "Not Found", JSON_CT, BODY_404))
    st, _, _, body, _ = get(d.port, "/json")
    s.equal("wrong method on a known path: 404 as cpp-httplib", (st, body), (404, BODY_404))
    st, _, _, body, _ = get(d.port, "/health/")
    s.equal("trailing slash is another path", st, 404)
    st, _, h, body, _ = get(d.port, "/silent")
    s.equal("handler without an answer: 500", (st, h["content-type"], body),
            (500, JSON_CT, b'{"error":{"code":500,"message":"the handler gave no answer","type":"server_error"}}'))
    for code, typ in [(400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"),
                      (404, "not_found_error"), (500, "server_error"), (501, "not_supported_error"),
                      (503, "unavailable_error")]:
        st, _, _, body, _ = get(d.port, f"/error?code={code}")
        s.equal(f"error body {code}", (st, body),
                (code, b'{"error":{"code":%d,"message":"demo error","type":"%s"}}' % (code, typ.encode())))
    st, _, h, body, _ = post(d.port, "/json", "{abc}")
    e = json.loads(body)
    s.equal("invalid JSON: 400 in llama-server's shape", (st, list(e["error"]), e["error"]["code"], e["error"]["type"]),
            (400, ["code", "message", "type"], 400, "invalid_request_error"))
    st, _, _, body, _ = post(d.port, "/json", '{"a": [1, 2]}')
    s.equal("valid JSON", (st, body), (200, b'{"ok":true}'))


def t_limits(d):
    H = b"Host: 127.0.0.1\r\n"
    # request line: 16 KiB is fine (404: no such route), one byte more is refused
    base = len(b"GET / HTTP/1.1")
    st, _, _, body, _ = raw(d.port, b"GET /" + b"a" * (16384 - base) + b" HTTP/1.1\r\n" + H + b"\r\n")
    s.equal("request line of 16 KiB passes", st, 404)
    st, _, h, body, _ = raw(d.port, b"GET /" + b"a" * (16385 - base) + b" HTTP/1.1\r\n" + H + b"\r\n")
    s.equal("request line 16 KiB + 1: 400", (st, h.get("content-type"), body), (400, TEXT_CT, b"request line too long"))
    st, _, _, body, _ = raw(d.port, b"GET /health HTTP/1.1\r\n" + H + b"X-Big: " + b"v" * 16384 + b"\r\n\r\n")
    s.equal("header line > 16 KiB: 400", (st, body), (400, b"request head too large"))
    hdrs = b"".join(b"X-%d: v\r\n" % i for i in range(99))
    st, _, _, body, _ = raw(d.port, b"GET /health HTTP/1.1\r\n" + H + hdrs + b"\r\n")
    s.equal("100 header lines pass", st, 200)
    st, _, _, body, _ = raw(d.port, b"GET /health HTTP/1.1\r\n" + H + hdrs + b"X-100: v\r\n\r\n")
    s.equal("101 header lines: 400", (st, body), (400, b"request head too large"))
    # 413 on a declared 16 MiB + 1 without sending the body: the answer must come at once
    t0 = time.time()
    st, reason, _, body, _ = raw(d.port, b"POST /json HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\n"
                                 b"Content-Length: 16777217\r\n\r\n{", timeout=5)
    s.equal("Content-Length 16 MiB + 1: 413", (st, reason, body), (413, "Payload Too Large", b"request too large"))
    s.check("413 answered without the body", time.time() - t0 < 2, f"{time.time() - t0:.2f} s")
    st, _, _, body, _ = raw(d.port, b"POST /json HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\n"
                            b"Content-Length: 99999999999999999999999999\r\n\r\n")
    s.equal("overflowing Content-Length: 413, empty body as llama-server's past 100 MiB", (st, body), (413, b""))
    st, _, _, body, _ = raw(d.port, b"POST /json HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\n"
                            b"Content-Length: 104857600\r\n\r\n")
    s.equal("Content-Length 100 MiB: 413 with the reason", (st, body), (413, b"request too large"))
    st, _, _, body, _ = raw(d.port, b"POST /json HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\n"
                            b"Content-Length: 104857601\r\n\r\n")
    s.equal("Content-Length 100 MiB + 1: 413, empty body", (st, body), (413, b""))
    for name, cl in [("negative", b"-1"), ("not a number", b"12abc"), ("empty", b""), ("hex", b"0x10")]:
        st, _, _, body, _ = raw(d.port, b"POST /json HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\n"
                                b"Content-Length: " + cl + b"\r\n\r\n{}", shut=True)
        s.equal(f"Content-Length {name}: 400", (st, body), (400, b"bad Content-Length"))
    st, _, _, body, _ = raw(d.port, b"POST /json HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\n"
                            b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{} ")
    s.equal("two different Content-Lengths: 400", (st, body), (400, b"bad Content-Length"))
    st, _, _, body, _ = raw(d.port, b"POST /json HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\n"
                            b"Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}")
    s.equal("two equal Content-Lengths: one body", (st, body), (200, b'{"ok":true}'))
    st, _, _, body, _ = raw(d.port, b"POST /json HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\n"
                            b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    s.equal("chunked request: 400", (st, body), (400, b"chunked requests are not accepted; send Content-Length"))
    st, _, h, body, _ = raw(d.port, b"GET /health HTTP/1.1\r\nHost: evil.example\r\n\r\n")
    s.equal("non-loopback Host: 403", (st, h.get("content-type"), body), (403, TEXT_CT, MSG_HOST))
    st, _, _, body, _ = raw(d.port, b"GET /health HTTP/1.1\r\nHost: LOCALHOST:80\r\n\r\n")
    s.equal("Host LOCALHOST:80 passes", st, 200)
    st, _, _, body, _ = raw(d.port, b"GET /health HTTP/1.0\r\n\r\n")
    s.equal("no Host: 403", (st, body), (403, MSG_HOST))
    # a refused request's body is read first, so the answer is not lost to a reset
    big = b"x" * (4 << 20)
    st, _, _, body, _ = raw(d.port, b"POST /json HTTP/1.1\r\nHost: 10.0.0.1\r\nContent-Type: application/json\r\n"
                            b"Content-Length: %d\r\n\r\n" % len(big) + big)
    s.equal("403 after a 4 MiB body", (st, body), (403, MSG_HOST))
    st, _, _, body, _ = post(d.port, "/json", "{}", ctype=b"text/plain")
    s.equal("POST text/plain: 415", (st, body), (415, b"POST bodies must be Content-Type: application/json"))
    st, _, _, body, _ = raw(d.port, b"POST /json HTTP/1.1\r\n" + H + b"Content-Length: 2\r\n\r\n{}")
    s.equal("POST without Content-Type: 415", st, 415)
    st, _, _, body, _ = raw(d.port, b"GET /he\x00lth HTTP/1.1\r\n" + H + b"\r\n")
    s.equal("NUL in the head: 400", (st, body), (400, b"NUL byte in the request head"))
    st, _, _, body, _ = raw(d.port, b"HELLO\r\n\r\n")
    s.equal("garbage request line: 400", (st, body), (400, b"malformed request line"))
    st, _, _, body, _ = raw(d.port, b"GET /health HTTP/1.1\n" + b"Host: localhost\n\n")
    s.equal("bare LF line ends accepted", st, 200)
    # exactly 16 MiB of body is taken
    payload = b'"' + b"a" * (16777216 - 2) + b'"'
    st, _, _, body, _ = post(d.port, "/json", payload)
    s.equal("16 MiB body accepted", (st, body), (200, b'{"ok":true}'))
    # Expect: 100-continue gets its interim answer before the body is sent
    with connect(d.port) as c:
        c.sendall(b"POST /json HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\nContent-Length: 2\r\n"
                  b"Expect: 100-continue\r\n\r\n")
        first = c.recv(100)
        c.sendall(b"{}")
        rest = read_all(c)
    s.equal("Expect: 100-continue", first, b"HTTP/1.1 100 Continue\r\n\r\n")
    s.equal("then the answer", parse_response(rest)[0], 200)


def t_trickle(d):
    """A head and body sent in small pieces with pauses between them."""
    data = (b"POST /echo?t=1 HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: 8\r\n\r\n{\"a\": 1}")
    with connect(d.port) as c:
        for i in range(0, len(data), 7):
            c.sendall(data[i:i + 7])
            time.sleep(0.01)
        st, _, _, body, _ = parse_response(read_all(c))
    e = json.loads(body) if st == 200 else {}
    s.equal("trickled request", (st, e.get("query"), e.get("body")), (200, "t=1", '{"a": 1}'))


def t_pipelining(d):
    with connect(d.port) as c:
        c.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\nGET /echo HTTP/1.1\r\nHost: localhost\r\n\r\n")
        out = read_all(c)
    s.equal("pipelined second request ignored: one answer", (out.count(b"HTTP/1.1 "), out.endswith(b'{"status":"ok"}')),
            (1, True))


def t_streams(d):
    st, _, h, body, names = get(d.port, "/sse?n=3")
    s.equal("SSE headers", (st, names, h["content-type"], h["cache-control"], h["connection"]),
            (200, ["Content-Type", "Cache-Control", "Access-Control-Allow-Origin", "Connection"], "text/event-stream",
             "no-cache", "close"))
    s.equal("SSE framing", body, b'data: {"i": 0}\n\ndata: {"i": 1}\n\ndata: {"i": 2}\n\ndata: [DONE]\n\n')
    st, _, h, body, names = get(d.port, "/ndjson?n=2")
    s.equal("NDJSON", (st, h["content-type"], "content-length" in h, body),
            (200, "application/x-ndjson", False, b'{"i": 0, "done": false}\n{"i": 1, "done": true}\n'))
    # each event is flushed when it is written, not at the end
    with connect(d.port) as c:
        t0 = time.time()
        c.sendall(b"GET /sse?n=4&ms=300 HTTP/1.1\r\nHost: localhost\r\n\r\n")
        got, t_first = b"", None
        while b'{"i": 0}' not in got:
            got += c.recv(4096)
        t_first = time.time() - t0
        got += read_all(c)
        t_all = time.time() - t0
    s.check("SSE first event before the stream ends", t_first < 0.25 and t_all > 1.0,
            f"first {t_first:.3f} s, all {t_all:.3f} s")
    # http.client reads a stream delimited by the close
    c = http.client.HTTPConnection("127.0.0.1", d.port, timeout=10)
    c.request("GET", "/sse?n=2")
    r = c.getresponse()
    lines = [ln for ln in r.read().split(b"\n") if ln]
    c.close()
    s.equal("http.client reads the SSE stream", lines, [b'data: {"i": 0}', b'data: {"i": 1}', b"data: [DONE]"])


def slow_case(d, how):
    c = connect(d.port)
    c.sendall(b"GET /slow?ms=10000 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    got = b""
    while b"started" not in got:
        got += c.recv(4096)
    time.sleep(0.1)
    if how == "reset":
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    t0 = time.time()
    c.close()
    res = None
    while time.time() - t0 < 5:
        st, _, _, body, _ = get(d.port, "/slow/result")
        res = json.loads(body)
        if res["gone"] != -1:
            break
        time.sleep(0.02)
    return res, time.time() - t0


def t_client_gone(d):
    for how in ("close", "reset"):
        res, dt = slow_case(d, how)
        s.check(f"client gone ({how}) noticed", res and res["gone"] == 1 and res["ticks"] < 50 and dt < 1.0,
                f"{res} after {dt:.2f} s")


def t_concurrency(d):
    results = []

    def one():
        st, _, _, body, _ = get(d.port, "/hold?ms=400")
        results.append((st, body))
    t0 = time.time()
    ts = [threading.Thread(target=one) for _ in range(20)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.time() - t0
    s.check("20 concurrent slow requests run at once", results == [(200, b"held")] * 20 and dt < 2.5,
            f"{len(results)} answers, {dt:.2f} s")


def t_too_many(exe):
    """Past 32 open connections (--max-conns 32) a client waits (on a reserve place, then in the kernel's accept
    queue) and is served once one closes; a SERVE_ALWAYS route is answered at once on a reserve place."""
    with Driver(exe, "--max-conns", "32") as d:
        socks = []
        try:
            t0 = time.time()
            for _ in range(32):
                c = connect(d.port)
                c.sendall(b"GET /hold?ms=1500 HTTP/1.1\r\nHost: localhost\r\n\r\n")
                socks.append(c)
            time.sleep(0.3)
            t1 = time.time()
            st, _, _, body, _ = get(d.port, "/always")
            s.check("33rd connection to a SERVE_ALWAYS route: answered at once on a reserve place",
                    st == 200 and time.time() - t1 < 0.5, f"{st} {body!r} {time.time() - t1:.2f} s")
            st, reason, h, body, _ = get(d.port, "/health")
            dt = time.time() - t0
            s.equal("33rd connection: queued, then answered 200", (st, reason), (200, "OK"))
            s.check("33rd connection waited for a slot to free", 1.3 < dt < 6.0, f"{dt:.2f} s")
            held = [parse_response(read_all(c))[3] for c in socks]
            s.equal("the 32 holders all answered", held, [b"held"] * 32)
        finally:
            for c in socks:
                c.close()
        # a burst of 120 at once: none refused, 32 at a time
        results = []
        lock = threading.Lock()

        def one():
            st, _, _, body, _ = get(d.port, "/hold?ms=150")
            with lock:
                results.append((st, body))
        t0 = time.time()
        ts = [threading.Thread(target=one) for _ in range(120)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        dt = time.time() - t0
        s.equal("120 at once: all answered 200", sorted(results), [(200, b"held")] * 120)
        s.check("120 at once: served 32 at a time (>= 4 rounds of 150 ms)", 0.55 < dt < 20, f"{dt:.2f} s")
        st, _, _, _, _ = get(d.port, "/health")
        s.equal("served again afterwards", st, 200)


def t_slow_clients(exe):
    """Issue #22.1: 64 clients that never finish a head (a partial head, or a byte a second) cannot keep /health
    from answering within 1 s, with the default places and with 32; they are shed (503 with the reason) or cut
    by the head deadline (408 with the reason), and the server serves on."""
    for label, args in [("default places", ["--head-timeout-ms", "3000"]),
                        ("32 places", ["--max-conns", "32", "--head-timeout-ms", "3000"])]:
        with Driver(exe, *args) as d:
            socks, stop = [], threading.Event()
            try:
                for i in range(64):
                    c = connect(d.port, timeout=15)
                    c.sendall(b"GET /health HTTP/1.1\r\nHost: loc" if i % 2 else b"G")
                    socks.append(c)

                def trickle():   # the odd ones: a byte a second, forever
                    while not stop.wait(0.5):
                        for c in socks[1::2]:
                            try:
                                c.send(b"a")
                            except OSError:
                                pass
                tr = threading.Thread(target=trickle, daemon=True)
                tr.start()
                time.sleep(1.3)
                t0 = time.time()
                st, _, _, body, _ = get(d.port, "/health")
                dt = time.time() - t0
                s.check(f"{label}: /health answered within 1 s while 64 slow clients are connected",
                        st == 200 and dt < 1.0, f"{st} {body!r} {dt:.2f} s")
                answers = []
                for c in socks:
                    answers.append(parse_response(read_all(c))[::3][:2])
                stop.set()
                kinds = {}
                for st, body in answers:
                    kinds[(st, body)] = kinds.get((st, body), 0) + 1
                s.check(f"{label}: every slow client shed (503) or cut at the head deadline (408), with the reason",
                        set(kinds) <= {(503, SHED), (408, HEAD_408)} and sum(kinds.values()) == 64, str(kinds))
                if label == "default places":
                    s.check(f"{label}: most cut by the deadline, a few shed as 127.0.0.1 keeps > 16 idle",
                            kinds.get((408, HEAD_408), 0) >= 48, str(kinds))
            finally:
                stop.set()
                for c in socks:
                    c.close()
            st, _, _, _, _ = get(d.port, "/health")
            s.equal(f"{label}: serving afterwards", st, 200)
    with Driver(exe, "--body-timeout-ms", "1500") as d:
        with connect(d.port) as c:
            c.sendall(b"POST /json HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100\r\n\r\n{")
            t0 = time.time()
            for _ in range(8):   # a byte every 0.3 s: never idle for the read timeout, but past the body's deadline
                time.sleep(0.3)
                try:
                    c.send(b" ")
                except OSError:
                    break
            st, _, _, body, _ = parse_response(read_all(c))
            s.equal("a body trickled past its deadline: 408 with the reason", (st, body),
                    (408, b"request timed out: the body did not arrive within 1 s"))
            s.check("cut at the body deadline", time.time() - t0 < 3.5, f"{time.time() - t0:.2f} s")


def t_lagging_reader(exe):
    """Issue #22.2: a handler's writes never wait for its reader. A reader that never reads is cut once its
    stream has --stream-buffer bytes waiting (the handler sees -1 at once); one that reads gets every byte."""
    with Driver(exe, "--stream-buffer", "65536") as d:
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.settimeout(10)
        c.connect(("127.0.0.1", d.port))
        try:
            c.sendall(b"GET /flood?n=20000&size=1000 HTTP/1.1\r\nHost: localhost\r\n\r\n")
            res = {}
            for _ in range(100):
                time.sleep(0.05)
                res = json.loads(get(d.port, "/flood/result")[3])
                if res["done"] >= 0:
                    break
            s.check("a reader that never reads: its 20 MB stream is cut, the handler told at once",
                    res.get("cut") == 1 and 0 < res.get("done", 0) < 20000 and res.get("ms", 9999) < 1000, str(res))
            t0 = time.time()
            got = read_all(c)
            s.check("the cut reader then sees the end of its stream, short", len(got) < 20000 * 1000 and
                    time.time() - t0 < 5, f"{len(got)} bytes")
        finally:
            c.close()
    with Driver(exe) as d:   # the default bound (4 MiB) holds a 3 MB stream written at memory speed
        with connect(d.port, timeout=30) as c:
            c.sendall(b"GET /flood?n=3000&size=1000 HTTP/1.1\r\nHost: localhost\r\n\r\n")
            st, _, _, body, _ = parse_response(read_all(c))
        evs = body.split(b"\n\n")
        want = [b"data: " + b"%08d" % i + b"x" * 992 for i in range(3000)] + [b"data: [DONE]", b""]
        s.check("a reader that reads: all 3000 events of 1000 bytes, in order", st == 200 and evs == want,
                f"{st} {len(evs)} events")
        res = json.loads(get(d.port, "/flood/result")[3])
        s.equal("... and its handler was never cut", (res["done"], res["cut"]), (3000, 0))


def t_timeout(exe):
    with Driver(exe, "--read-timeout-ms", "400") as d:
        t0 = time.time()
        st, _, _, body, _ = raw(d.port, b"GET /health HTTP/1.1\r\nHost: loc")
        dt = time.time() - t0
        s.equal("partial head then silence: 408", (st, body), (408, b"request timed out"))
        s.check("after the read timeout", 0.35 < dt < 2.0, f"{dt:.2f} s")
        with connect(d.port) as c:
            t0 = time.time()
            out = read_all(c)
        s.equal("silent connection closed without an answer", out, b"")
        st, _, _, body, _ = raw(d.port, b"POST /json HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                                b"Content-Length: 10\r\n\r\n{")
        s.equal("body that stops coming: 408", (st, body), (408, b"request timed out"))


def t_api_key(exe):
    with Driver(exe, "--api-key", "sekret,other") as d:
        st, reason, h, body, _ = get(d.port, "/echo")
        s.equal("no key: llama-server's 401", (st, reason, h["content-type"], body),
                (401, "Unauthorized", JSON_CT, BODY_401))
        for name, hdr, want in [("Bearer", b"Authorization: Bearer sekret\r\n", 200),
                                ("second key", b"Authorization: Bearer other\r\n", 200),
                                ("bare key", b"Authorization: sekret\r\n", 200),
                                ("X-Api-Key", b"X-Api-Key: sekret\r\n", 200),
                                ("lowercase bearer", b"Authorization: bearer sekret\r\n", 401),
                                ("wrong key", b"Authorization: Bearer nope\r\n", 401),
                                ("both keys in one", b"Authorization: Bearer sekret,other\r\n", 401)]:
            st, _, _, body, _ = get(d.port, "/echo", hdr)
            s.equal(f"api key {name}", st, want)
        st, _, _, body, _ = get(d.port, "/health")
        s.equal("/health is public", st, 200)
        st, _, _, body, _ = get(d.port, "/v1/health")
        s.equal("/v1/health is public", st, 200)
        st, _, _, body, _ = get(d.port, "/nope")
        s.equal("unknown route without a key: 401 (as llama-server)", (st, body), (401, BODY_401))
        st, _, _, body, _ = get(d.port, "/nope", b"X-Api-Key: sekret\r\n")
        s.equal("unknown route with the key: 404", (st, body), (404, BODY_404))
        st, _, _, body, _ = get(d.port, "/health", host=b"evil")
        s.equal("Host check comes before the key", st, 403)


def t_cors(exe):
    with Driver(exe, "--allow-origin", "http://a.example,https://b.example:8443") as d:
        st, _, h, body, _ = raw(d.port, b"OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:1\r\n"
                                b"Origin: https://b.example:8443\r\nAccess-Control-Request-Method: POST\r\n"
                                b"Access-Control-Request-Headers: content-type,authorization\r\n"
                                b"Access-Control-Request-Private-Network: true\r\n\r\n")
        s.equal("preflight from an allowed origin", (st, h.get("access-control-allow-origin"),
                                                     h.get("access-control-allow-methods"),
                                                     h.get("access-control-allow-headers"),
                                                     h.get("access-control-allow-private-network"),
                                                     h.get("vary"), body),
                (204, "https://b.example:8443", "GET, HEAD, POST, DELETE, OPTIONS", "content-type,authorization",
                 "true", "Origin", b""))
        st, _, h, body, _ = raw(d.port, b"OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                                b"Origin: http://evil.example\r\nAccess-Control-Request-Method: POST\r\n\r\n")
        s.equal("preflight from another origin: 403, no CORS header",
                (st, "access-control-allow-origin" in h), (403, False))
        st, _, h, body, _ = raw(d.port, b"OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                                b"Origin: http://a.example.evil\r\n\r\n")
        s.equal("origin match is exact", st, 403)
        st, _, h, body, _ = get(d.port, "/health", b"Origin: http://a.example\r\n")
        s.equal("answer to an allowed origin", (st, h.get("access-control-allow-origin"), h.get("vary")),
                (200, "http://a.example", "Origin"))
        st, _, h, body, _ = get(d.port, "/health", b"Origin: http://evil.example\r\n")
        s.equal("answer to another origin has no CORS header", (st, "access-control-allow-origin" in h), (200, False))
        st, _, h, body, _ = get(d.port, "/sse?n=1", b"Origin: http://a.example\r\n")
        s.equal("streams carry the CORS header", h.get("access-control-allow-origin"), "http://a.example")
    with Driver(exe, "--api-key", "k") as d:
        st, _, h, _, _ = raw(d.port, b"OPTIONS /echo HTTP/1.1\r\nHost: localhost\r\nOrigin: http://a.example\r\n"
                             b"Access-Control-Request-Method: POST\r\n\r\n")
        s.equal("no --allow-origin: llama-server's preflight, 200 and its headers (not 401: preflights carry no key)",
                (st, h.get("access-control-allow-origin"), h.get("access-control-allow-credentials"),
                 h.get("access-control-allow-methods"), h.get("access-control-allow-headers")),
                (200, "http://a.example", "true", "GET, POST, DELETE, OPTIONS", "*"))
        st, _, h, _, _ = raw(d.port, b"OPTIONS /api/chat HTTP/1.1\r\nHost: localhost\r\nOrigin: http://a.example\r\n"
                             b"Access-Control-Request-Method: POST\r\n\r\n")
        s.equal("no --allow-origin: Ollama's routes refuse a foreign preflight (403)", st, 403)
        st, _, h, _, _ = raw(d.port, b"OPTIONS /api/chat HTTP/1.1\r\nHost: localhost\r\n\r\n")
        s.equal("OPTIONS /api/ without Origin: 204 with Allow", (st, h.get("allow")),
                (204, "GET, HEAD, POST, DELETE, OPTIONS"))


def t_stop(exe):
    # an in-flight request finishes; the process exits 0; nothing listens afterwards
    d = Driver(exe)
    out = []
    th = threading.Thread(target=lambda: out.append(get(d.port, "/hold?ms=800")))
    th.start()
    time.sleep(0.2)
    t0 = time.time()
    rc = d.stop(signal.SIGTERM)
    th.join()
    s.equal("SIGTERM: exit 0", rc, 0)
    s.equal("SIGTERM: the in-flight request is answered", (out[0][0], out[0][3]) if out else None, (200, b"held"))
    s.equal("SIGTERM: 'stopped' printed", d.proc.stdout.read().strip(), "stopped")
    try:
        connect(d.port, timeout=1).close()
        s.fail("SIGTERM: listener closed", "still accepts")
    except OSError:
        s.ok("SIGTERM: listener closed")
    # SIGHUP stops it the same way
    d = Driver(exe)
    out = []
    th = threading.Thread(target=lambda: out.append(get(d.port, "/hold?ms=500")))
    th.start()
    time.sleep(0.2)
    rc = d.stop(signal.SIGHUP)
    th.join()
    s.equal("SIGHUP: exit 0, the in-flight request answered", [rc, (out[0][0], out[0][3]) if out else None],
            [0, (200, b"held")])
    # a stream that would run for a minute is cut after the grace period
    d = Driver(exe, "--grace-ms", "300")
    c = connect(d.port)
    c.sendall(b"GET /slow?ms=60000 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    got = b""
    while b"started" not in got:
        got += c.recv(4096)
    t0 = time.time()
    rc = d.stop(signal.SIGINT)
    dt = time.time() - t0
    rest = read_all(c)
    c.close()
    s.check("SIGINT with a long stream: exit 0 after the grace period", rc == 0 and 0.25 < dt < 3.0,
            f"rc {rc}, {dt:.2f} s")
    s.equal("the cut stream ends without [DONE]", b"[DONE]" in rest, False)


def t_llama_server(exe):
    """The bodies serve.c copies from llama-server, asked of llama-server itself."""
    kit, why = oracle.find_kit()
    shared = oracle.find_shared()
    model = os.path.join(shared, "models", "stories260K.gguf") if shared else None
    if not kit or not model or not os.path.exists(model):
        s.skip("llama-server comparison", why or "no ../shared/models/stories260K.gguf")
        return
    srv = oracle.Server.llama(kit, model, ctx=256, extra=("--api-key", "sekret"), name="llama-serve-test")
    with srv, Driver(exe, "--api-key", "sekret") as d:
        hdr = b"Authorization: Bearer sekret\r\n"
        for label, req in [("no key", b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
                           ("wrong key", b"GET /props HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer x\r\n\r\n"),
                           ("unknown route", b"GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n" + hdr + b"\r\n"),
                           ("wrong method", b"GET /completion HTTP/1.1\r\nHost: 127.0.0.1\r\n" + hdr + b"\r\n")]:
            ls, _, lh, lb, _ = raw(srv.port, req)
            bs, _, bh, bb, _ = raw(d.port, req)
            s.equal(f"llama-server vs serve.c: {label}", (bs, bh.get("content-type"), bb),
                    (ls, lh.get("content-type"), lb))
        body = b"{abc}"
        req = (b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\n" + hdr +
               b"Content-Type: application/json\r\nContent-Length: 5\r\n\r\n" + body)
        ls, _, lh, lb, _ = raw(srv.port, req)
        bs, _, bh, bb, _ = raw(d.port, req.replace(b"/completion", b"/json"))
        le, be = json.loads(lb)["error"], json.loads(bb)["error"]
        s.equal("llama-server vs serve.c: invalid JSON error shape",
                (bs, bh.get("content-type"), list(be), be["code"], be["type"]),
                (ls, lh.get("content-type"), list(le), le["code"], le["type"]))
        ls, _, lh, lb, _ = raw(srv.port, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        s.equal("llama-server: /health needs no key", ls, 200)


def main():
    exe = build_driver()
    with Driver(exe, upstream=True) as d:
        for name, fn in [("basic", t_basic), ("errors", t_errors), ("limits", t_limits),
                         ("trickle", t_trickle), ("pipelining", t_pipelining), ("streams", t_streams), ("client gone", t_client_gone),
                         ("concurrency", t_concurrency)]:
            s.run(f"[{name}] ran", fn, d)
        st, _, _, _, _ = get(d.port, "/health")
        s.equal("still serving after every refusal", st, 200)
    for name, fn in [("too many", t_too_many), ("slow clients", t_slow_clients), ("lagging reader", t_lagging_reader), ("timeout", t_timeout), ("api key", t_api_key), ("cors", t_cors),
                     ("stop", t_stop), ("llama-server", t_llama_server)]:
        s.run(f"[{name}] ran", fn, exe)
    s.finish()


if __name__ == "__main__":
    main()
