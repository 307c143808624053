"""test_hostile.py -- issue #22's probes against `bankml serve` on the demo model, as an attacker and an unlucky
operator would try them (loopback only, bounded in count and time). Each section reproduces one break and asserts
the exact outcome:

- a reader that does not read: its stream is cut once serve.c's 4 MiB (plus the kernel's 1 MiB, SO_SNDBUF fixed)
  wait for it, its generation stops, and while it is connected /health answers at once and the next completion
  as soon as that generation has stopped;
- cross-site writes: Ollama's /api/ routes refuse a foreign Origin with 403 as Ollama does (gin-contrib/cors over
  OLLAMA_ORIGINS' defaults), `text/plain` from a page included; localhost origins and no Origin are served;
- the registry: names with NUL, '/', '..' refused, never cut; a planted manifest naming `../victim` and a planted
  symlink at a temp name change nothing outside the registry; leftover temp files removed at start;
- the model file: an in-place edit with its mtime restored is refused at the next request; a file truncated during
  a generation ends that request with an error and the server serves on.

The connection-level probes (64 slow clients, deadlines, a lagging reader at the transport) are in
testing/test_serve.py. The bankml binary is BANKML_BIN or ./bankml. Standard library only. Ends with
"N passed, N failed, N skipped"."""
import json, os, shutil, socket, subprocess, sys, tempfile, time, urllib.error, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

S = oracle.Suite("test_hostile")
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(oracle.ROOT, "models", "demo.gguf")
FORK = os.path.join(oracle.ROOT, "models.FORK.json")

if not os.path.exists(BIN):
    oracle.skip_all(f"{BIN} is not built", S)
if not os.path.exists(MODEL):
    subprocess.run(["make", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if not os.path.exists(MODEL):
    oracle.skip_all("models/demo.gguf is missing and `make demo-model` did not make it", S)


def http(port, method, path, body=None, headers=None, timeout=60):
    """(status, body bytes, headers dict lower-case)."""
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    if data is not None and not any(k.lower() == "content-type" for k in (headers or {})):
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as e:
        return e.code, e.read(), {k.lower(): v for k, v in e.headers.items()}


def timed(fn, *a, **kw):
    t0 = time.time()
    r = fn(*a, **kw)
    return r, time.time() - t0


# ---------------------------------------------------------------- a reader that does not read

def sse_events(raw):
    head, _, body = raw.partition(b"\r\n\r\n")
    out = []
    for ev in body.split(b"\n\n"):
        if ev.startswith(b"data: "):
            try:
                out.append(json.loads(ev[6:]))
            except ValueError:
                pass   # the cut one
    return head, out


def t_lagging_reader(B):
    body = json.dumps({"prompt": "Once upon a time", "n_predict": 1500, "stream": True, "n_probs": 100, "temperature": 0,
                       "ignore_eos": True}).encode()
    req = (b"POST /completion HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body) + body)
    # the reference: the same stream read as it comes (its time bounds what the next request may wait)
    t_ref = time.time()
    with socket.create_connection(("127.0.0.1", B.port), timeout=600) as c:
        c.sendall(req)
        raw = b""
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            raw += b
    t_ref = time.time() - t_ref
    _, full = sse_events(raw)
    S.check("a reader that reads: 1500 events, the last one stop:true",
            len(full) == 1501 and full[-1].get("stop") is True and all(not e["stop"] for e in full[:-1]),
            f"{len(full)} events ({len(raw)} bytes)")
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.settimeout(max(30, 4 * t_ref))
    c.connect(("127.0.0.1", B.port))
    try:
        c.sendall(req)
        time.sleep(0.3)
        (st, _, _), dt = timed(http, B.port, "GET", "/health")
        S.check("while a reader does not read: /health within 1 s", st == 200 and dt < 1.0, f"{st} {dt:.2f} s")
        # the engine runs one completion at a time: the next waits for the stalled reader's generation, which
        # ends once the reader is cut (before #22.2 it waited 120 s per blocked write)
        (st, b, _), dt = timed(http, B.port, "POST", "/completion", {"prompt": "Hi", "n_predict": 4},
                               timeout=max(60, 4 * t_ref))
        S.check("... another completion once that generation ends (within the whole stream's time + 10 s)",
                st == 200 and dt < t_ref + 10, f"{st} {dt:.2f} s (the stream read whole: {t_ref:.1f} s) {b[:100]!r}")
        raw = b""
        while True:
            try:
                b = c.recv(1 << 16)
            except (ConnectionResetError, socket.timeout):
                break
            if not b:
                break
            raw += b
        head, evs = sse_events(raw)
        S.check("the reader that did not read was cut: its stream ends early, with no stop:true event",
                head.startswith(b"HTTP/1.1 200") and 0 < len(evs) < 1500 and not any(e.get("stop") for e in evs),
                f"{len(evs)} events, {len(raw)} bytes")
        S.equal("the cut stream's events are the reference's, as far as they go",
                [e["content"] for e in evs], [e["content"] for e in full[:len(evs)]])
    finally:
        c.close()
    st, b, _ = http(B.port, "GET", "/slots")
    S.equal("its slot is idle afterwards", (st, [s["is_processing"] for s in json.loads(b)]), (200, [False]))
    st, b, _ = http(B.port, "POST", "/completion", {"prompt": "Once upon a time", "n_predict": 8, "temperature": 0})
    S.equal("serving on: the same prompt answers as before", (st, json.loads(b)["content"]),
            (200, "".join(e["content"] for e in full[:8])))


# ---------------------------------------------------------------- cross-site writes

MSG_ORIGIN = (b"bankml serve: Ollama's /api/ routes refuse requests from this web origin, as Ollama does (allowed: "
              b"localhost, 127.0.0.1 and 0.0.0.0 on any port over http or https, app://, file://, tauri://, "
              b"vscode-webview://, vscode-file://, this server itself, and each --allow-origin ORIGIN)")


def t_origin(B, reg):
    page = {"Origin": "http://evil.example", "Content-Type": "text/plain;charset=UTF-8"}
    create = {"model": "pwned", "from": "demo", "system": "replaced"}
    for method, path, body in [("POST", "/api/create", create), ("POST", "/api/copy", {"source": "demo",
                                                                                      "destination": "pwned"}),
                               ("DELETE", "/api/delete", {"model": "good"}), ("POST", "/api/pull", {"model": "x"}),
                               ("POST", "/api/push", {"model": "x"}), ("GET", "/api/tags", None),
                               ("POST", "/api/chat", {"model": "demo", "messages": []})]:
        st, b, h = http(B.port, method, path, None if body is None else json.dumps(body).encode(), page)
        S.equal(f"a page's {method} {path} (text/plain, Origin http://evil.example): 403 with the reason, no CORS",
                (st, b, h.get("access-control-allow-origin")), (403, MSG_ORIGIN, None))
    st, b, _ = http(B.port, "POST", "/api/create", json.dumps(create).encode(), {"Origin": "null"})
    S.equal("Origin null (a sandboxed page, a file): 403", (st, b), (403, MSG_ORIGIN))
    S.equal("nothing was written", sorted(os.listdir(reg)), ["good.MODEL.json"])
    st, b, _ = http(B.port, "POST", "/api/show", {"model": "good"})
    S.check("good's SYSTEM is still its own", st == 200 and json.loads(b).get("system") == "kept", b[:200])
    st, b, h = http(B.port, "POST", "/api/create", {"model": "local1", "from": "demo"},
                    {"Origin": "http://localhost:3000"})
    S.equal("Origin http://localhost:3000 (Ollama's default list): served, the origin echoed",
            (st, h.get("access-control-allow-origin"), h.get("vary")), (200, "http://localhost:3000", "Origin"))
    st, b, h = http(B.port, "POST", "/api/copy", {"source": "local1", "destination": "local2"},
                    {"Origin": f"http://127.0.0.1:{B.port}"})
    S.equal("this server's own origin: served, no CORS header", (st, h.get("access-control-allow-origin")),
            (200, None))
    st, b, _ = http(B.port, "POST", "/api/copy", json.dumps({"source": "local1", "destination": "local3"}).encode(),
                    {"Content-Type": "text/plain"})
    S.equal("no Origin (curl, a script): served, whatever the content type", st, 200)
    for n in ("local1", "local2", "local3"):
        http(B.port, "DELETE", "/api/delete", {"model": n})
    st, b, h = http(B.port, "POST", "/completion", {"prompt": "Hi", "n_predict": 1}, {"Origin": "http://evil.example"})
    S.equal("llama-server's routes keep llama-server's rule (--cors-origins * echoes any origin)",
            (st, h.get("access-control-allow-origin")), (200, "http://evil.example"))


# ---------------------------------------------------------------- the registry

def t_registry(B, reg, outside):
    raw = b'{"model": "e\\u0000vil", "from": "demo"}'
    st, b, _ = http(B.port, "POST", "/api/create", raw)
    S.equal('create "e\\u0000vil": refused, not cut to "e"', (st, os.path.exists(os.path.join(reg, "e.MODEL.json"))),
            (400, False))
    S.equal("create e", http(B.port, "POST", "/api/create", {"model": "e", "from": "demo"})[0], 200)
    st, b, _ = http(B.port, "DELETE", "/api/delete", b'{"model": "e\\u0000zzz"}')
    S.equal('delete "e\\u0000zzz": refused, e kept', (st, os.path.exists(os.path.join(reg, "e.MODEL.json"))),
            (400, True))
    st, b, _ = http(B.port, "POST", "/api/chat", b'{"model": "demo\\u0000x", "messages": [{"role": "user", '
                                                 b'"content": "Hi"}], "stream": false}')
    S.check('chat with "demo\\u0000x": not served as demo', st in (400, 404) and b"message" not in b[:12], f"{st} {b[:200]!r}")
    st, b, _ = http(B.port, "POST", "/api/copy", b'{"source": "demo\\u0000x", "destination": "f"}')
    S.equal('copy from "demo\\u0000x": refused', st, 400)
    st, b, _ = http(B.port, "POST", "/api/create", b'{"model": "g", "from": "demo\\u0000x"}')
    S.equal('create FROM "demo\\u0000x": refused with the reason',
            (st, json.loads(b).get("error")), (400, "from holds a NUL byte: no model or file has such a name"))
    http(B.port, "DELETE", "/api/delete", {"model": "e"})
    S.equal("the planted manifest naming ../victim is not listed",
            sorted(m["name"] for m in json.loads(http(B.port, "GET", "/api/tags")[1])["models"]),
            ["demo:latest", "good:latest"])
    st, b, _ = http(B.port, "DELETE", "/api/delete", {"model": "../victim"})
    S.equal("DELETE ../victim: refused, the file outside the registry kept",
            (st, os.path.exists(os.path.join(outside, "victim.MODEL.json"))), (400, True))
    # a symlink planted at each of the next temporary names: O_EXCL never writes through it, the writer moves on
    for k in range(4):
        os.symlink(os.path.join(outside, "target.txt"), os.path.join(reg, f".good2.MODEL.json.{B.proc.pid}.{k}.tmp"))
    st, b, _ = http(B.port, "POST", "/api/create", {"model": "good2", "from": "demo"})
    S.equal("create past planted symlinks: written, the symlinks' target untouched",
            (st, open(os.path.join(outside, "target.txt")).read(), os.path.isfile(os.path.join(reg, "good2.MODEL.json"))),
            (200, "untouched\n", True))
    for k in range(4):
        os.unlink(os.path.join(reg, f".good2.MODEL.json.{B.proc.pid}.{k}.tmp"))
    http(B.port, "DELETE", "/api/delete", {"model": "good2"})
    for frm in ["/no/such/dir/x.gguf", "/etc/hostname.gguf", os.path.join(outside, "target.txt")]:
        st, b, _ = http(B.port, "POST", "/api/create", {"model": "h", "from": frm})
        S.equal(f"FROM {frm}: one answer whether or not it exists (no stat text)", (st, json.loads(b).get("error")),
                (400, f"FROM {frm}: the file is not pinned by a FORK.json of the registry: pin it (bankml pin {frm} "
                      f"--fork <registry>/<name>.FORK.json --write) and name it"))
    for v, want in [(0, "options.num_ctx 0: a context holds at least 1 token"),
                    (-5, "options.num_ctx -5: a context holds at least 1 token"),
                    (1e9, "num_ctx 1000000000 is larger than the context this server holds (2048); restart bankml "
                          "serve with --ctx 1000000000 if it fits in memory")]:
        st, b, _ = http(B.port, "POST", "/api/generate", {"model": "demo", "prompt": "Hi", "stream": False,
                                                          "options": {"num_ctx": v, "num_predict": 1}})
        S.equal(f"num_ctx {v}: refused with the reason", (st, json.loads(b).get("error")), (400, want))


def plant(reg, outside):
    """Before the server starts: a real manifest copied under another file name and made to name ../victim; a
    victim file outside; leftovers of killed writers (dead pid) and of a live one (this process)."""
    with open(os.path.join(outside, "victim.MODEL.json"), "w") as f:
        f.write("victim\n")
    with open(os.path.join(outside, "target.txt"), "w") as f:
        f.write("untouched\n")
    p = subprocess.Popen(["true"])
    p.wait()
    dead = p.pid
    with open(os.path.join(reg, "good.MODEL.json")) as f:
        m = json.load(f)
    m["name"] = "../victim"
    with open(os.path.join(reg, "planted.MODEL.json"), "w") as f:
        json.dump(m, f)
    left = [f".x.MODEL.json.{dead}.0.tmp", f".y.MODEL.json.{dead}.tmp", f"demo.FORK.json.tmp.{dead}"]
    live = [f".z.MODEL.json.{os.getpid()}.0.tmp"]
    for n in left + live:
        with open(os.path.join(reg, n), "w") as f:
            f.write("{")
    os.symlink(os.path.join(outside, "target.txt"), os.path.join(reg, f".w.MODEL.json.{dead}.1.tmp"))
    return left + [f".w.MODEL.json.{dead}.1.tmp"], live


def t_leftovers(reg, outside, left, live):
    names = set(os.listdir(reg))
    S.equal("at start: the dead writers' temporaries removed (a symlink among them, its target kept)",
            (sorted(n for n in left if n in names), os.path.exists(os.path.join(outside, "target.txt"))), ([], True))
    S.equal("... a live writer's kept", sorted(n for n in live if n in names), live)
    for n in live:
        os.unlink(os.path.join(reg, n))
    os.unlink(os.path.join(reg, "planted.MODEL.json"))


def t_kill9(reg, tmp):
    """`bankml create` and `bankml pin --write` killed at random moments; the next run leaves no temporary."""
    mf = os.path.join(tmp, "Modelfile")
    with open(mf, "w") as f:
        f.write("FROM demo\nSYSTEM brief\n")
    fork = os.path.join(tmp, "pins", "demo.FORK.json")
    os.makedirs(os.path.dirname(fork), exist_ok=True)
    shutil.copy(FORK, fork)
    import random
    rnd = random.Random(22)
    for i in range(30):
        for argv in ([BIN, "create", f"k{i % 3}", "-f", mf, "--registry", reg],
                     [BIN, "pin", MODEL, "--fork", fork, "--write"]):
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rnd.uniform(0, 0.03))
            p.kill()
            p.wait()
    subprocess.run([BIN, "create", "k0", "-f", mf, "--registry", reg], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)
    subprocess.run([BIN, "pin", MODEL, "--fork", fork, "--write"], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)
    temps = [n for d in (reg, os.path.dirname(fork)) for n in os.listdir(d) if n.endswith(".tmp") or ".tmp." in n]
    S.equal("after 60 kill -9s and one more run of each: no temporary file left", temps, [])


# ---------------------------------------------------------------- the model file under the server

CHANGED = ("demo.gguf changed since bankml verified it: unloaded, and refused; the next request verifies it again")


def t_model_file(tmp):
    d = os.path.join(tmp, "model")
    os.makedirs(d)
    m, fork = os.path.join(d, "demo.gguf"), os.path.join(d, "demo.FORK.json")
    shutil.copy(MODEL, m)
    subprocess.run([BIN, "pin", m, "--fork", fork, "--write"], stdout=subprocess.DEVNULL, check=True, timeout=60)
    ask = {"prompt": "Once upon a time", "n_predict": 8, "temperature": 0}
    sha = json.load(open(fork))["files"][0]["sha256"]
    with oracle.Server.bankml(m, ctx=2048, extra=["--fork", fork]) as B:
        st, b, _ = http(B.port, "POST", "/completion", ask)
        want = json.loads(b)["content"]
        S.equal("the copy answers", st, 200)
        # a byte flipped in place, the mtime put back (touch -r): ctime moved, the next request is refused
        size = os.path.getsize(m)
        st0 = os.stat(m)
        with open(m, "r+b") as f:
            f.seek(size - 100)
            old = f.read(1)
            f.seek(size - 100)
            f.write(bytes([old[0] ^ 0xFF]))
        os.utime(m, ns=(st0.st_atime_ns, st0.st_mtime_ns))
        S.equal("an in-place edit with the mtime restored: same size and mtime", (os.path.getsize(m),
                os.stat(m).st_mtime_ns), (size, st0.st_mtime_ns))
        st, b, _ = http(B.port, "POST", "/completion", ask)
        S.equal("... the next request: refused, as at load", (st, json.loads(b)["error"]["message"]), (503, CHANGED))
        st, b, _ = http(B.port, "POST", "/completion", ask)
        S.check("... the one after: the pin refuses the edited bytes",
                st == 400 and json.loads(b)["error"]["message"].endswith(f"!= pinned {sha}: refused"), b[:300])
        with open(m, "r+b") as f:
            f.seek(size - 100)
            f.write(old)
        st, b, _ = http(B.port, "POST", "/completion", ask)
        S.equal("the byte put back: verified again, the same answer", (st, json.loads(b).get("content")), (200, want))
        # truncated during a long generation: the request ends with that error, the server lives
        c = socket.create_connection(("127.0.0.1", B.port), timeout=60)
        body = json.dumps({"prompt": "Once upon a time", "n_predict": 1500, "stream": True, "ignore_eos": True,
                           "n_probs": 50}).encode()
        c.sendall(b"POST /completion HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        first = c.recv(1 << 16)
        os.truncate(m, 100000)
        raw = first
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            raw += b
        c.close()
        evs = [e[6:] for e in raw.partition(b"\r\n\r\n")[2].split(b"\n\n") if e.startswith(b"data: ")]
        last = json.loads(evs[-1]) if evs else {}
        S.check("truncated mid-generation: the stream ends with the error, before its 1500 tokens",
                last == {"error": {"code": 500, "message": CHANGED, "type": "server_error"}} and len(evs) < 1500, f"{len(evs)} events, last {evs[-1][:200] if evs else b''!r}")
        S.equal("... the server is alive", (B.proc.poll(), http(B.port, "GET", "/health")[0]), (None, 200))
        st, b, _ = http(B.port, "POST", "/completion", ask)
        S.equal("... the next request: refused, as at load", (st, json.loads(b)["error"]["message"]), (503, CHANGED))
        st, b, _ = http(B.port, "POST", "/completion", ask)
        S.check("... then refused by the guard or the pin (the file is cut)", st == 400, b[:300])
        shutil.copy(MODEL, m)
        st, b, _ = http(B.port, "POST", "/completion", ask)
        S.equal("the file put back: serving again, the same answer", (st, json.loads(b).get("content")), (200, want))


def main():
    tmp = tempfile.mkdtemp(prefix="bankml-hostile-")
    reg, outside = os.path.join(tmp, "registry"), os.path.join(tmp, "outside")
    os.makedirs(reg)
    os.makedirs(outside)
    try:
        with oracle.Server.bankml(MODEL, ctx=2048, extra=["--fork", FORK, "--registry", reg]) as B:
            S.run("[lagging reader] ran", t_lagging_reader, B)
            S.equal("create good", http(B.port, "POST", "/api/create", {"model": "good", "from": "demo",
                                                                         "system": "kept"})[0], 200)
            S.run("[origin] ran", t_origin, B, reg)
        left, live = plant(reg, outside)
        with oracle.Server.bankml(MODEL, ctx=2048, extra=["--fork", FORK, "--registry", reg]) as B:
            S.run("[leftovers] ran", t_leftovers, reg, outside, left, live)
            S.run("[registry] ran", t_registry, B, reg, outside)
        S.run("[kill -9] ran", t_kill9, reg, tmp)
        S.run("[model file] ran", t_model_file, tmp)
    except oracle.ServerError as e:
        S.fail("bankml serve", str(e))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    S.finish()


if __name__ == "__main__":
    main()
