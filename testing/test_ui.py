"""test_ui.py -- the chat page at / (src/api/ui/) in Debian's Chromium, headless, driven through the DevTools
protocol over --remote-debugging-pipe (Python's standard library only: no websocket, no npm).

`bankml serve --registry DIR` serves two pinned models (models/demo.gguf, `make demo-model`, and
../shared/models/stories260K.gguf). The browser loads /, and the suite checks, each against the API itself:

  - the page asks only its own origin (every request the browser makes is under the server's address);
  - a message typed into the box and sent with Enter streams an answer whose text on the page equals the content
    of the same request (the body the page sent, read from the DevTools Fetch domain) answered non-streamed, at
    temperature 0; the receipt mark is ✓ and the receipt's response_sha256 is the API's;
  - the pin line names the pinned file, its sha256 and "verified";
  - Stop (Escape) mid-answer: the page keeps a strict prefix of the full answer, and the slot is free at once
    (GET /slots: is_processing false; /bankml/metrics' last record `cancelled`);
  - Regenerate with the stream tampered by the test (Fetch.fulfillRequest with one byte of a content delta
    changed): the mark is ✗;
  - switching to the second model: the request names it, the answer equals the API's, the receipt's
    model_sha256 is that file's pin and the pin line shows it once it is resident;
  - screenshots at 1280x800 and 390x844 (build/ui/chat-1280x800.png, build/ui/chat-390x844.png), and at 390 px
    the page does not scroll sideways.

Before the browser, without one: GET / by Accept (the page, or the text line as before), the page's files byte
for byte from src/api/ui/, /bankml/status (JSON = /bankml's, HTML for a browser), `--api-key` (the page and its
files public, the routes it reads not) and `--no-webui` (the text line for a browser too). Without Chromium
(testing/install_deps.sh installs Debian's `chromium`) the browser session is skipped with the reason, a
failure under BANKML_REQUIRE_ORACLE=1."""
import base64, json, os, queue, shutil, subprocess, sys, tempfile, threading, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("test_ui")
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
DEMO = os.path.join(oracle.ROOT, "models", "demo.gguf")
OUT = os.path.join(oracle.ROOT, "build", "ui")

CHROME = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
if not os.path.exists(BIN):
    oracle.skip_all(f"{BIN} is not built", S)
if not os.path.exists(DEMO):
    subprocess.run(["make", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if not os.path.exists(DEMO):
    oracle.skip_all("models/demo.gguf is missing and `make demo-model` did not make it", S)
SHARED = oracle.shared_or_skip(S)
STORIES = os.path.join(SHARED, "models", "stories260K.gguf")
if not os.path.exists(STORIES):
    oracle.skip_all(f"{STORIES} is missing", S)


class CDP:
    """The DevTools protocol over Chromium's pipe (fd 3 commands in, fd 4 answers and events out, each message
    NUL-terminated). A reader thread routes answers to their callers and events to a queue that a second thread
    hands to the handlers (so a handler may send commands and wait for their answers)."""

    def __init__(self, chrome, profile):
        r_in, w_in = os.pipe()     # we write, Chromium reads on fd 3
        r_out, w_out = os.pipe()   # Chromium writes on fd 4, we read

        def child():
            os.dup2(r_in, 3)
            os.dup2(w_out, 4)

        self.proc = subprocess.Popen(
            [chrome, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "--user-data-dir=" + profile,
             "--window-size=1280,800", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=False,
            preexec_fn=child)
        os.close(r_in)
        os.close(w_out)
        self.w = os.fdopen(w_in, "wb", buffering=0)
        self.r = os.fdopen(r_out, "rb", buffering=0)
        self.next_id = 0
        self.lock = threading.Lock()
        self.waiting = {}
        self.events = queue.Queue()
        self.handlers = {}
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._dispatch, daemon=True).start()

    def _read(self):
        buf = b""
        while True:
            chunk = self.r.read(65536)
            if not chunk:
                self.closed = True
                for q in list(self.waiting.values()):
                    q.put({"error": {"message": "Chromium closed the pipe"}})
                self.events.put(None)
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                m = json.loads(raw)
                if "id" in m:
                    q = self.waiting.pop(m["id"], None)
                    if q:
                        q.put(m)
                else:
                    self.events.put(m)

    def _dispatch(self):
        while True:
            m = self.events.get()
            if m is None:
                return
            fn = self.handlers.get(m.get("method"))
            if fn:
                try:
                    fn(m.get("params", {}))
                except Exception as e:  # reported through the test that waits for it
                    print(f"        handler {m.get('method')}: {type(e).__name__}: {e}", flush=True)

    def send(self, method, params=None, session=None, timeout=60):
        with self.lock:
            self.next_id += 1
            i = self.next_id
            q = queue.Queue()
            self.waiting[i] = q
            msg = {"id": i, "method": method, "params": params or {}}
            if session:
                msg["sessionId"] = session
            self.w.write(json.dumps(msg).encode() + b"\0")
        m = q.get(timeout=timeout)
        if "error" in m:
            raise RuntimeError(f"{method}: {m['error'].get('message')}")
        return m.get("result", {})

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def http(port, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_for(fn, timeout=30.0, step=0.05):
    t_end = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() > t_end:
            return v
        time.sleep(step)


def main():
    tmp = tempfile.mkdtemp(prefix="bankml-ui-")
    reg = os.path.join(tmp, "registry")
    os.makedirs(reg)
    pins = {}
    for src, stem in ((DEMO, "demo"), (STORIES, "stories260K")):
        dst = os.path.join(reg, stem + ".gguf")
        shutil.copyfile(src, dst)
        p = subprocess.run([BIN, "pin", dst, "--fork", os.path.join(reg, stem + ".FORK.json"), "--write"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            S.fail(f"bankml pin {stem}", p.stdout)
            return
        pins[stem] = oracle.sha256_file(dst)
    srv = oracle.Server([BIN, "serve", "--registry", reg, "--listen", "127.0.0.1:{port}", "--ctx", "4096",
                         "--llama-threads", "2"], name="bankml-ui")
    srv.start()
    cdp = None
    try:
        cdp = CDP(CHROME, os.path.join(tmp, "profile"))
        run(srv, cdp, pins)
    finally:
        if cdp:
            cdp.close()
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def run(srv, cdp, pins):
    base = f"http://127.0.0.1:{srv.port}"
    tid = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    sid = cdp.send("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]

    def cmd(method, params=None, timeout=60):
        return cdp.send(method, params, session=sid, timeout=timeout)

    def js(expr, timeout=60):
        r = cmd("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True}, timeout)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr[:60]}: {r['exceptionDetails'].get('text')} "
                               f"{r['exceptionDetails'].get('exception', {}).get('description', '')}")
        return r["result"].get("value")

    urls = []
    sent = []                  # the chat request bodies the page sent, in order
    mode = {"tamper": False}

    def on_request(p):
        urls.append(p["request"]["url"])

    def on_paused(p):
        body = p["request"].get("postData") or ""
        sent.append(json.loads(body) if body else None)
        if not mode["tamper"]:
            cdp.send("Fetch.continueRequest", {"requestId": p["requestId"]}, session=sid)
            return
        mode["tamper"] = False
        st, raw = http(srv.port, "POST", "/v1/chat/completions", json.loads(body))
        # change one byte of the first content delta: the text received no longer hashes to the receipt
        i = raw.index(b'"delta":{"content":"') + len(b'"delta":{"content":"')
        raw = raw[:i] + (b"Y" if raw[i:i + 1] != b"Y" else b"Z") + raw[i + 1:]
        cdp.send("Fetch.fulfillRequest", {"requestId": p["requestId"], "responseCode": st,
                                          "responseHeaders": [{"name": "Content-Type", "value": "text/event-stream"}],
                                          "body": base64.b64encode(raw).decode()}, session=sid)

    cdp.handlers["Network.requestWillBeSent"] = on_request
    cdp.handlers["Fetch.requestPaused"] = on_paused
    cmd("Network.enable")
    cmd("Page.enable")
    cmd("Fetch.enable", {"patterns": [{"urlPattern": "*/v1/chat/completions", "requestStage": "Request"}]})
    cmd("Emulation.setDeviceMetricsOverride", {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    cmd("Page.navigate", {"url": base + "/"})
    ready = wait_for(lambda: js("document.readyState === 'complete' && document.getElementById('model') "
                                "&& document.getElementById('model').options.length === 2 "
                                "&& /sha256/.test(document.getElementById('pin').textContent)"))
    if not S.check("GET / in Chromium: the chat page, two models listed, the pin read", ready,
                   js("document.body ? document.body.innerText.slice(0, 300) : ''")):
        return
    models = js("Array.from(document.getElementById('model').options, o => o.value)")
    S.equal("model list: /v1/models' ids", models,
            [m["id"] for m in json.loads(http(srv.port, "GET", "/v1/models")[1])["data"]])
    pin = js("document.getElementById('pin').textContent")
    S.check("pin line: the resident file, its sha256, verified and the time",
            "demo.gguf" in pin and pins["demo"] in pin and "verified" in pin and "resident: demo" in pin, pin)

    def set_field(fid, value):
        js(f"(() => {{ const e = document.getElementById({json.dumps(fid)}); e.value = {json.dumps(str(value))}; "
           "e.dispatchEvent(new Event('change')); return true; })()")

    def key(k, code, vk, text=None):
        for t in ("keyDown", "keyUp"):
            p = {"type": t, "key": k, "code": code, "windowsVirtualKeyCode": vk}
            if text and t == "keyDown":
                p["text"] = text
            cmd("Input.dispatchKeyEvent", p)

    def type_and_send(text):
        js("document.getElementById('input').focus(), true")
        cmd("Input.insertText", {"text": text})
        key("Enter", "Enter", 13, "\r")

    def n_answers():
        return js("document.querySelectorAll('.msg.assistant').length")

    def last_answer():
        return js("(() => { const a = document.querySelectorAll('.msg.assistant'); const m = a[a.length - 1]; "
                  "return m ? {text: m.querySelector('.text').textContent, receipt: m.dataset.receipt || null, "
                  "meta: m.querySelector('.meta').textContent} : null; })()")

    def done(n):
        return wait_for(lambda: n_answers() == n and last_answer()["receipt"] is not None
                        and js("document.getElementById('send').disabled === false"), timeout=60)

    def api_answer(body):
        b = dict(body, stream=False)
        st, raw = http(srv.port, "POST", "/v1/chat/completions", b)
        j = json.loads(raw)
        return st, j["choices"][0]["message"]["content"], j.get("bankml_receipt", {})

    for fid, v in (("temperature", 0), ("top_p", 1), ("top_k", 40), ("max_tokens", 24), ("seed", 1)):
        set_field(fid, v)

    # 1. a message, streamed, equal to the API's answer to the same request
    type_and_send("Tell me a story about a dog.")
    S.check("Enter sends: the answer arrives (receipt read)", done(1), repr(last_answer()))
    got = last_answer()
    body = sent[-1] if sent else {}
    S.equal("the request the page sent", {k: body.get(k) for k in ("stream", "temperature", "top_p", "top_k",
                                                                  "max_tokens", "seed", "model")},
            {"stream": True, "temperature": 0, "top_p": 1, "top_k": 40, "max_tokens": 24, "seed": 1,
             "model": models[0]})
    S.equal("the request's messages", body.get("messages"), [{"role": "user", "content": "Tell me a story about a dog."}])
    st, want, rec = api_answer(body)
    S.check("the API answers the same request", st == 200 and want, f"{st} {want!r}")
    S.equal("streamed answer on the page == the API's content", got["text"], want)
    S.equal("receipt checked in the page: ✓", [got["receipt"], "✓ receipt" in got["meta"]], ["ok", True])
    S.check("the page shows the API's response_sha256", rec.get("response_sha256", "?") in got["meta"], got["meta"])
    S.check("tokens/s and the context used shown", "tokens/s" in got["meta"] and "/ 4096" in got["meta"], got["meta"])

    # 2. a system prompt goes first
    set_field("system", "You are terse.")
    type_and_send("And a cat?")
    S.check("second turn answered", done(2), repr(last_answer()))
    body = sent[-1]
    S.equal("system prompt first, then the conversation", [m["role"] for m in body["messages"]],
            ["system", "user", "assistant", "user"])
    S.equal("second turn == the API's", last_answer()["text"], api_answer(body)[1])
    set_field("system", "")

    # 3. stop mid-answer: a prefix stays, the slot is free
    js("document.getElementById('clear').click(), true")
    set_field("max_tokens", 3000)
    type_and_send("Once upon a time")   # greedy: 3000 tokens on the demo model
    started = wait_for(lambda: len(js("(() => { const a = document.querySelectorAll('.msg.assistant');"
                                      " return a.length ? a[a.length-1].querySelector('.text').textContent : ''; })()")
                                   or "") > 20, timeout=30, step=0.01)
    key("Escape", "Escape", 27)
    S.check("the answer was streaming when Escape was pressed", started)
    stopped = done(1)
    partial = last_answer()
    S.check("Escape stops: the page says stopped", stopped and "stopped" in partial["meta"], oracle.short(partial, 300))
    slot_free = wait_for(lambda: not any(s.get("is_processing") for s in json.loads(http(srv.port, "GET", "/slots")[1])),
                         timeout=5)
    S.check("stop frees the slot (GET /slots: is_processing false)", slot_free)
    recs = json.loads(http(srv.port, "GET", "/bankml/metrics")[1])["records"]
    S.equal("the stopped completion is recorded cancelled", recs[-1]["finish"] if recs else None, "cancelled")
    full = api_answer(dict(sent[-1], max_tokens=400))[1]   # the stop came long before 400 tokens
    S.check("the stopped text is a strict prefix of the full answer",
            len(partial["text"]) < len(full) and full.startswith(partial["text"]),
            f"{len(partial['text'])} of {len(full)} chars")

    # 4. regenerate, tampered by the test: ✗
    set_field("max_tokens", 24)
    mode["tamper"] = True
    js("document.getElementById('regen').focus(), true")
    key("Enter", "Enter", 13, "\r")   # the focused Regenerate button, from the keyboard
    ok = wait_for(lambda: sent and sent[-1]["messages"] == [{"role": "user", "content": "Once upon a time"}]
                  and not mode["tamper"] and last_answer()["receipt"] not in (None, "none")
                  and js("document.getElementById('send').disabled === false"), timeout=60)
    bad = last_answer()
    S.check("regenerate: one answer in place of the stopped one", ok and n_answers() == 1, repr(bad))
    S.equal("tampered stream: the receipt check shows ✗", [bad["receipt"], "✗ receipt" in bad["meta"]], ["bad", True])
    # the same regenerate untampered: ✓ again
    js("document.getElementById('regen').click(), true")
    S.check("regenerate again untampered", done(1))
    S.equal("untampered: ✓", last_answer()["receipt"], "ok")

    # 5. switch to the second model
    js("document.getElementById('clear').click(), true")
    set_field("model", models[1])
    type_and_send("Once upon a time")
    S.check("second model answered", done(1), repr(last_answer()))
    body = sent[-1]
    S.equal("the request names the chosen model", body.get("model"), models[1])
    st, want, rec = api_answer(body)
    S.equal("second model: page == API", last_answer()["text"], want)
    S.equal("second model: receipt ✓", last_answer()["receipt"], "ok")
    S.check("second model: the receipt's model_sha256 is its pin", pins["stories260K"] in last_answer()["meta"],
            last_answer()["meta"])
    pin2 = wait_for(lambda: (lambda t: pins["stories260K"] in t and t)(js("document.getElementById('pin').textContent")),
                    timeout=10)
    S.check("pin line follows the resident model", pin2, js("document.getElementById('pin').textContent"))
    set_field("model", models[0])
    type_and_send("Back to the first")
    S.check("and back: first model answered", done(2))
    S.equal("back to the first model: page == API", last_answer()["text"], api_answer(sent[-1])[1])

    # 6. same origin only, screenshots
    S.check("every request the page made is to its own origin", urls and all(u.startswith(base + "/") for u in urls),
            repr([u for u in urls if not u.startswith(base + "/")]))
    os.makedirs(OUT, exist_ok=True)
    shot = cmd("Page.captureScreenshot", {"format": "png"})["data"]
    with open(os.path.join(OUT, "chat-1280x800.png"), "wb") as f:
        f.write(base64.b64decode(shot))
    cmd("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True})
    time.sleep(0.3)
    sw = js("document.documentElement.scrollWidth")
    S.check("390 px wide: no sideways scrolling", sw <= 390, f"scrollWidth {sw}")
    shot = cmd("Page.captureScreenshot", {"format": "png"})["data"]
    with open(os.path.join(OUT, "chat-390x844.png"), "wb") as f:
        f.write(base64.b64decode(shot))
    S.check("screenshots saved under build/ui/", all(os.path.getsize(os.path.join(OUT, n)) > 1000
                                                     for n in ("chat-1280x800.png", "chat-390x844.png")))


def t_http():
    """The routes themselves, without a browser: / and /bankml/status by Accept, the page's files, --no-ui."""
    fork = os.path.join(oracle.ROOT, "models.FORK.json")
    html = {"Accept": "text/html,application/xhtml+xml"}
    with oracle.Server.bankml(DEMO, extra=("--fork", fork), name="bankml-ui-http") as b:
        st, body = b.get("/", headers=html)
        S.check("GET / (Accept: text/html): the chat page", st == 200 and "<title>bankml chat</title>" in body
                and '<script src="/bankml/ui/chat.js">' in body, f"{st} {oracle.short(body)}")
        S.equal("GET / (no Accept): the text line, as before", b.get("/"),
                (200, "bankml is running (Ollama's API at /api, native only)\n"))
        for path, ct, src in (("/bankml/ui/chat.js", "text/javascript", "chat.js"),
                              ("/bankml/ui/chat.css", "text/css", "chat.css")):
            with urllib.request.urlopen(f"http://127.0.0.1:{b.port}{path}") as r:
                got = (r.status, r.headers["Content-Type"], r.read())
            with open(os.path.join(oracle.ROOT, "src", "api", "ui", src), "rb") as f:
                S.equal(f"GET {path}: src/api/ui/{src} byte for byte", got, (200, ct + "; charset=utf-8", f.read()))
        st_s, status = b.get("/bankml/status")
        ring = status.pop("log", None) if isinstance(status, dict) else None
        S.equal("GET /bankml/status (no Accept): /bankml's JSON and the log", (st_s, status), b.get("/bankml"))
        S.check("GET /bankml/status: the log ring holds this server's request lines", isinstance(ring, list) and
                any(x.get("type") == "request" and x.get("route") == "/bankml/ui/chat.js" and x.get("status") == 200
                    for x in ring), oracle.short(str(ring)))
        st, body = b.get("/bankml/status", headers=html)
        S.check("GET /bankml/status (Accept: text/html): the status page", st == 200
                and "<h1>bankml serve" in body and oracle.sha256_file(DEMO) in body, f"{st} {oracle.short(body)}")
    with oracle.Server.bankml(DEMO, extra=("--fork", fork, "--api-key", "K"), name="bankml-ui-key") as b:
        got = [b.get("/", headers=html)[0], b.get("/bankml/ui/chat.js")[0], b.get("/bankml/ui/chat.css")[0],
               b.get("/bankml/status", headers=html)[0], b.get("/bankml")[0], b.get("/v1/models")[0],
               b.get("/bankml", headers={"Authorization": "Bearer K"})[0]]
        S.equal("--api-key: the page and its files are public, the routes it reads ask for the key",
                got, [200, 200, 200, 401, 401, 401, 200])
    with oracle.Server.bankml(DEMO, extra=("--fork", fork, "--no-webui"), name="bankml-ui-off") as b:
        S.equal("--no-webui: GET / (Accept: text/html) is the text line", b.get("/", headers=html),
                (200, "bankml is running (Ollama's API at /api, native only)\n"))


t_http()
if CHROME:
    S.run("browser session", main)
else:
    S.skip("the browser session", "Chromium is not installed (testing/install_deps.sh installs Debian's chromium)")
S.finish()
