"""test_readonly.py -- issue #22's "read-only routes that never wait for a generation", against `bankml serve` on
the demo model. The read-only routes (/props, /tokenize, /detokenize, /apply-template, /v1/models, /models, /api/ps,
/api/tags, /api/show, /api/version, /, /bankml, /bankml/status, /slots, /metrics, /health) read the resident model
through engine_peek (the residency lock, never the engine lock), so:

- idle, each route's answer is recorded (bytes; JSON minus its time-varying members where it has some);
- a long streamed completion whose client never reads (its generation holds the engine lock, then its stream is
  cut) and, queued behind it, one whose client reads slowly: while each of them generates (GET /slots shows the same
  task processing before and after the probes), every route answers within 1 s with exactly its idle answer;
- the slow reader's stream then ends with the same tokens and text as the same request run undisturbed first.

The bankml binary is BANKML_BIN or ./bankml. Standard library only. Ends with "N passed, N failed, N skipped"."""
import http.client, json, os, socket, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

S = oracle.Suite("test_readonly")
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(oracle.ROOT, "models", "demo.gguf")
FORK = os.path.join(oracle.ROOT, "models.FORK.json")
LIMIT = float(os.environ.get("BANKML_READONLY_LIMIT", "1.0"))   # seconds a route may take while a generation runs
# a sanitizer build is slower: `make tsan` sets 10 (waits 10 times longer, the slow reader's stream 10 times shorter)
SLOW = max(1, int(os.environ.get("BANKML_READONLY_SLOW", "1")))

if not os.path.exists(BIN):
    oracle.skip_all(f"{BIN} is not built", S)
if not os.path.exists(MODEL):
    subprocess.run(["make", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if not os.path.exists(MODEL):
    oracle.skip_all("models/demo.gguf is missing and `make demo-model` did not make it", S)


def req(port, method, path, body=None, headers=None, timeout=30):
    """(status, raw body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        h = dict(headers or {})
        if data is not None:
            h.setdefault("Content-Type", "application/json")
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def strip(keys):
    """A normaliser: the JSON answer without the members named (at any depth)."""
    def f(raw):
        return oracle.strip_answer(json.loads(raw), keys)
    return f


def slots_shape(raw):
    """GET /slots without what a running task changes by nature (is_processing and the task's counters)."""
    return [{k: v for k, v in s.items() if k in ("id", "n_ctx", "speculative")} for s in json.loads(raw)]


def metric_names(raw):
    """/metrics' HELP and TYPE lines (the values count tasks and time)."""
    return [ln for ln in raw.decode().splitlines() if ln.startswith("#")]


def exact(raw):
    return raw


HELLO = {"content": "Hello world, once upon a time", "with_pieces": True}
ROUTES = [
    ("GET", "/health", None, None, exact),
    ("GET", "/props", None, None, exact),
    ("POST", "/tokenize", HELLO, None, exact),
    ("POST", "/detokenize", None, None, exact),   # body: the ids /tokenize gave, filled in at start
    ("POST", "/apply-template", {"messages": [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": "Hello"}]}, None, exact),
    ("GET", "/v1/models", None, None, strip({"created"})),
    ("GET", "/models", None, None, strip({"created"})),
    ("GET", "/api/ps", None, None, strip({"expires_at"})),
    ("GET", "/api/tags", None, None, exact),
    ("POST", "/api/show", {"model": "demo"}, None, exact),
    ("GET", "/api/version", None, None, exact),
    ("GET", "/", None, None, exact),
    ("GET", "/", None, {"Accept": "text/html"}, exact),
    ("GET", "/bankml", None, None, exact),
    ("GET", "/bankml/status", None, None, strip({"log"})),
    ("GET", "/slots", None, None, slots_shape),
    ("GET", "/metrics", None, None, metric_names),
]


def label(r):
    return f"{r[0]} {r[1]}" + (" (Accept: text/html)" if r[3] else "")


def stream_req(body):
    data = json.dumps(body).encode()
    return (b"POST /completion HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(data) + data)


def events(raw):
    _, _, body = raw.partition(b"\r\n\r\n")
    out = []
    for ev in body.split(b"\n\n"):
        if ev.startswith(b"data: "):
            try:
                out.append(json.loads(ev[6:]))
            except ValueError:
                pass
    return out


def tokens_text(evs):
    """Every event's tokens and content, and the final event's stop flag: what an undisturbed run must match."""
    return ([t for e in evs for t in e.get("tokens", [])], "".join(e.get("content", "") for e in evs),
            bool(evs) and evs[-1].get("stop") is True)


def running_task(port):
    """(is_processing, id_task) of slot 0 now."""
    st, raw = req(port, "GET", "/slots")
    s = json.loads(raw)[0] if st == 200 else {}
    return s.get("is_processing"), s.get("id_task")


def wait_task(port, other=None, limit=60 * SLOW):
    """Waits until slot 0 processes a task (not `other`): its id, or None."""
    t_end = time.time() + limit
    while time.time() < t_end:
        busy, tid = running_task(port)
        if busy and tid != other:
            return tid
        time.sleep(0.02)
    return None


def probe(port, idle, phase):
    """Every route once while a generation runs: within LIMIT s, the idle answer."""
    for r in ROUTES:
        method, path, body, headers, norm = r
        t0 = time.time()
        st, raw = req(port, method, path, body, headers)
        dt = time.time() - t0
        S.check(f"{phase}: {label(r)} answers within {LIMIT:g} s", st == 200 and dt < LIMIT, f"{st} in {dt:.3f} s")
        S.equal(f"{phase}: {label(r)} answers as when idle", (st, norm(raw)), idle[label(r)])


A_BODY = {"prompt": "Once upon a time", "n_predict": 1000 // SLOW, "stream": True, "temperature": 0, "ignore_eos": True,
          "n_probs": 20}
B_BODY = {"prompt": "The cat", "n_predict": 1500, "stream": True, "temperature": 0, "ignore_eos": True,
          "n_probs": 100}


def slow_reader(port, out):
    """A's client: sends, then reads 8 KiB every 20 ms until the stream ends."""
    with socket.create_connection(("127.0.0.1", port), timeout=300 * SLOW) as c:
        c.sendall(stream_req(A_BODY))
        raw = b""
        while True:
            b = c.recv(8192)
            if not b:
                break
            raw += b
            time.sleep(0.02)
    out.append(raw)


def t_readonly(B):
    st, raw = req(B.port, "POST", "/tokenize", {"content": HELLO["content"]})
    ids = json.loads(raw)["tokens"]
    S.check("the probe text has tokens", st == 200 and len(ids) > 3, raw[:200])
    for i, r in enumerate(ROUTES):
        if r[1] == "/detokenize":
            ROUTES[i] = (r[0], r[1], {"tokens": ids}, r[3], r[4])
    idle = {}
    for r in ROUTES:
        st, raw = req(B.port, r[0], r[1], r[2], r[3])
        idle[label(r)] = (st, r[4](raw))
        S.check(f"idle: {label(r)} answers 200", st == 200, raw[:200])
    # the reference: A undisturbed, read as it comes
    with socket.create_connection(("127.0.0.1", B.port), timeout=300 * SLOW) as c:
        c.sendall(stream_req(A_BODY))
        ref = b""
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            ref += b
    want = tokens_text(events(ref))
    S.check(f"the reference stream: {A_BODY['n_predict']} tokens, ends stop:true",
            len(want[0]) == A_BODY["n_predict"] and want[2],
            f"{len(want[0])} tokens")
    for r in ROUTES:   # after a generation, still the idle answers (nothing cached on the way changes them)
        st, raw = req(B.port, r[0], r[1], r[2], r[3])
        S.equal(f"idle after a generation: {label(r)}", (st, r[4](raw)), idle[label(r)])
    # B: a client that never reads (its generation holds the engine lock until its stream is cut)
    nb = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    nb.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    nb.settimeout(300 * SLOW)
    nb.connect(("127.0.0.1", B.port))
    got = []
    th = None
    try:
        nb.sendall(stream_req(B_BODY))
        tb = wait_task(B.port)
        S.check("the reader that does not read: its task runs", tb is not None)
        th = threading.Thread(target=slow_reader, args=(B.port, got))
        th.start()   # queued behind B: it waits for the engine lock
        time.sleep(0.2)
        probe(B.port, idle, "while a non-reader's generation runs")
        S.equal("... that generation ran through every probe (the same task processing after them)",
                running_task(B.port), (True, tb))
        ta = wait_task(B.port, other=tb)
        S.check("the slow reader's task runs once the other is cut", ta is not None and ta != tb, f"{ta} {tb}")
        probe(B.port, idle, "while a slow reader's generation runs")
        S.equal("... that generation ran through every probe (the same task processing after them)",
                running_task(B.port), (True, ta))
        th.join(300 * SLOW)
        S.check("the slow reader's stream ended, 200", not th.is_alive() and len(got) == 1 and
                got[0].startswith(b"HTTP/1.1 200"), repr(got[0][:300]) if got else "no answer")
        have = tokens_text(events(got[0])) if got else ([], "", False)
        S.equal("the slow reader's tokens are the undisturbed run's", have[0], want[0])
        S.equal("... its text too, and it ends stop:true", have[1:], want[1:])
    finally:
        nb.close()
        if th:
            th.join(300 * SLOW)
    st, raw = req(B.port, "GET", "/slots")
    S.equal("the slot is idle afterwards", (st, [s["is_processing"] for s in json.loads(raw)]), (200, [False]))


def sanitizer_reports(path):
    """The sanitizer reports in a server's log (a BANKML_BIN built by `make tsan` or `make asan`)."""
    try:
        with open(path, errors="replace") as f:
            return [ln.strip() for ln in f if "ThreadSanitizer" in ln or "AddressSanitizer" in ln or "runtime error:" in ln]
    except OSError as e:
        return [f"cannot read {path}: {e}"]


def main():
    try:
        B = oracle.Server.bankml(MODEL, ctx=2048, extra=["--fork", FORK, "--metrics"])
        with B:
            S.run("[read-only routes] ran", t_readonly, B)
        S.equal("the server's log has no sanitizer report", sanitizer_reports(B.log_path), [])
    except oracle.ServerError as e:
        S.fail("bankml serve", str(e))
    S.finish()


if __name__ == "__main__":
    main()
