"""test_logs.py -- bankml serve's log for a person and an operator, through real servers on the demo model:
the start line, one line per request (route, model, prompt and generated tokens, cache_n, ms, status), every
refusal with its reason, the shutdown line with what was served; --log-format json / --log-jsonl (JSON lines on
stdout that parse and carry the fields), --log-file, --log-disable, --log-prefix and --log-timestamps, --log-colors,
-lv / -v thresholds, and the ring /bankml/status returns. Each expected value is exact where the value is (token
counts from the answers themselves, the words of the refusals); only the milliseconds are matched by form.

Standard library only. Ends with "N passed, N failed, N skipped"; exit 1 on failure."""
import json, os, re, signal, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402

S = oracle.Suite("test_logs")
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
DEMO = os.path.join(oracle.ROOT, "models", "demo.gguf")
FORK = os.path.join(oracle.ROOT, "models.FORK.json")
if not os.path.exists(DEMO):
    p = subprocess.run(["make", "-s", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0 or not os.path.exists(DEMO):
        S.fail("make demo-model", p.stdout.strip()[-300:])
        S.finish()

N_INDENT = "n_indent: stopping at an indentation limit is not reproduced yet; send the request without it"
MS = r"ms=\d+\.\d"


class Run:
    """bankml serve with its stdout and stderr kept apart; stop() sends SIGTERM and returns both texts."""

    def __init__(self, *flags):
        self.tmp = tempfile.mkdtemp(prefix="bankml-logs-")
        self.port = oracle.free_port()
        self.out = open(os.path.join(self.tmp, "out"), "w+b")
        self.err = open(os.path.join(self.tmp, "err"), "w+b")
        self.srv = oracle.Server([BIN, "serve", DEMO, "--fork", FORK, "--port", str(self.port), "-c", "256",
                                  *flags], port=self.port)
        self.proc = subprocess.Popen(self.srv.argv, stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL)
        t_end = time.time() + 60
        while time.time() < t_end:
            if self.proc.poll() is not None:
                break
            try:
                if self.srv.get("/health", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=20)
        return self.texts()

    def texts(self):
        self.out.flush()
        self.err.flush()
        with open(self.out.name, encoding="utf-8", errors="replace") as f:
            o = f.read()
        with open(self.err.name, encoding="utf-8", errors="replace") as f:
            e = f.read()
        return o, e


def completion(srv):
    st, body = srv.post("/completion", {"prompt": "Once upon a time", "n_predict": 3, "temperature": 0})
    return st, body


def t_text():
    r = Run()
    st, body = completion(r.srv)
    S.equal("text: the completion answered", st, 200)
    st2, body2 = completion(r.srv)   # the same prompt again: its prefix comes from the slot
    st3, bad = r.srv.post("/completion", {"prompt": "x", "n_indent": 2})
    S.equal("text: the refusal answered", [st3, bad.get("error", {}).get("message")], [400, N_INDENT])
    r.srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                                        "stream": True})
    r.srv.get("/health")
    out, err = r.stop()
    lines = err.splitlines()
    S.check("text: the start line", any(re.fullmatch(r"bankml serve \S+ --native: \S+demo\.gguf verified \(sha256 "
                                                     r"44a44f02[0-9a-f]{56}\); models demo; listening on "
                                                     rf"http://127\.0\.0\.1:{r.port}", ln) for ln in lines), err[-800:])
    want1 = (rf"bankml serve: POST /completion 200 model=\S+demo\.gguf prompt_tokens={body['tokens_evaluated']} "
             rf"completion_tokens=3 cache_n=0 {MS}")
    want2 = (rf"bankml serve: POST /completion 200 model=\S+demo\.gguf prompt_tokens={body2['tokens_evaluated']} "
             rf"completion_tokens=3 cache_n={body2['timings']['cache_n']} {MS}")
    req = [ln for ln in lines if ln.startswith("bankml serve: POST") or ln.startswith("bankml serve: GET")]
    S.check("text: one line per request, in order", len(req) == 4, "\n".join(req))
    S.check("text: the first completion's line", len(req) > 0 and re.fullmatch(want1, req[0]), f"{req[:1]} !~ {want1}")
    S.check("text: the second's, with its cache_n", len(req) > 1 and re.fullmatch(want2, req[1]),
            f"{req[1:2]} !~ {want2}")
    S.check("text: cache_n of the repeat is not 0", body2["timings"]["cache_n"] > 0, str(body2["timings"]))
    want3 = rf"bankml serve: POST /completion 400 {MS} refused: " + re.escape(N_INDENT)
    S.check("text: the refusal with its reason", len(req) > 2 and re.fullmatch(want3, req[2]), f"{req[2:3]}")
    S.check("text: the streamed chat's line", len(req) > 3 and re.fullmatch(
        rf"bankml serve: POST /v1/chat/completions 200 model=\S+demo\.gguf prompt_tokens=\d+ completion_tokens=2 "
        rf"cache_n=\d+ {MS}", req[3]), f"{req[3:4]}")
    S.check("text: health checks only at debug level", not any("/health" in ln for ln in lines), err[-400:])
    S.equal("text: nothing on stdout", out, "")
    S.check("text: the shutdown line", lines[-1:] == [
        f"bankml serve: stopped; served {body['tokens_evaluated'] + body2['tokens_evaluated'] + int(req[3].split('prompt_tokens=')[1].split()[0])} "
        f"prompt tokens and 8 generated since start"] if len(req) > 3 else False, lines[-1:])


def t_json():
    for flag in (["--log-format", "json"], ["--log-jsonl"]):
        r = Run(*flag)
        st, body = completion(r.srv)
        r.srv.post("/completion", {"prompt": "x", "n_indent": 2})
        r.srv.post("/api/generate", {"model": "demo", "prompt": "hi", "stream": False,
                                     "options": {"num_predict": 2, "temperature": 0}})
        # a request's line is written once its answer is out, so the ring may lag the client by one line
        for _ in range(50):
            st_s, status = r.srv.get("/bankml/status")
            ring = status.get("log", []) if isinstance(status, dict) else []
            if sum(1 for x in ring if x.get("type") == "request" and x.get("route") != "/bankml/status") >= 3:
                break
            time.sleep(0.1)
        out, err = r.stop()
        name = " ".join(flag)
        recs = []
        bad = []
        for ln in out.splitlines():
            try:
                recs.append(json.loads(ln))
            except ValueError:
                bad.append(ln)
        S.check(f"{name}: every stdout line is JSON", out and not bad, f"{bad[:2]}")
        S.check(f"{name}: nothing on stderr", err == "", err[-300:])
        reqs = [x for x in recs if x.get("type") == "request" and x.get("route") != "/bankml/status"]
        S.equal(f"{name}: the request records' keys", [sorted(x) for x in reqs], [
            sorted(["type", "time", "level", "msg", "unix_ms", "method", "route", "status", "model", "prompt_tokens",
                    "completion_tokens", "cache_n", "ms"]),
            sorted(["type", "time", "level", "msg", "unix_ms", "method", "route", "status", "ms", "reason"]),
            sorted(["type", "time", "level", "msg", "unix_ms", "method", "route", "status", "model", "prompt_tokens",
                    "completion_tokens", "cache_n", "ms"])])
        if len(reqs) == 3:
            a, b, c = reqs
            S.equal(f"{name}: the completion's record", {k: a[k] for k in a if k not in ("unix_ms", "ms", "model")},
                    {"type": "request", "time": 0, "level": "info", "msg": "bankml serve: POST /completion 200",
                     "method": "POST", "route": "/completion", "status": 200,
                     "prompt_tokens": body["tokens_evaluated"], "completion_tokens": 3, "cache_n": 0})
            S.check(f"{name}: model and ms", a["model"].endswith("demo.gguf") and isinstance(a["ms"], float)
                    and a["ms"] >= 0 and abs(a["unix_ms"] / 1000 - time.time()) < 120, str(a))
            S.equal(f"{name}: the refusal's record", {k: b[k] for k in ("level", "status", "reason", "route")},
                    {"level": "warn", "status": 400, "reason": N_INDENT, "route": "/completion"})
            S.equal(f"{name}: Ollama's record names the tag", [c["route"], c["model"], c["completion_tokens"]],
                    ["/api/generate", "demo:latest", 2])
        logs = [x for x in recs if x.get("type") == "log"]
        start = [x for x in logs if "listening on" in x["msg"]]
        S.check(f"{name}: start and stop are log records of level none (llama-server's generic output)",
                len(start) == 1 and start[0]["level"] == "none" and logs[-1]["level"] == "none" and
                logs[-1]["msg"].startswith("bankml serve: stopped;"), f"{start} {logs[-1:]}")
        ring = status.get("log") if isinstance(status, dict) else None
        S.check(f"{name}: /bankml/status returns the ring", st_s == 200 and isinstance(ring, list) and
                [x.get("msg") for x in ring if x.get("type") == "request" and x.get("route") != "/bankml/status"] ==
                [x["msg"] for x in reqs], f"{str(ring)[:300]}")


def t_flags():
    fd, path = tempfile.mkstemp(prefix="bankml-logfile-")
    os.close(fd)
    r = Run("--log-file", path, "--log-prefix", "--log-timestamps")
    completion(r.srv)
    r.srv.post("/completion", {"prompt": "x", "n_indent": 2})
    out, err = r.stop()
    req = [ln for ln in err.splitlines() if "bankml serve: POST" in ln]
    S.check("--log-prefix --log-timestamps: time then the level letter",
            len(req) == 2 and re.fullmatch(r"\d+\.\d\d\.\d{3}\.\d{3} I bankml serve: POST /completion 200 .*", req[0])
            and re.fullmatch(r"\d+\.\d\d\.\d{3}\.\d{3} W bankml serve: POST /completion 400 .*", req[1]), str(req))
    with open(path) as f:
        filed = f.read()
    S.equal("--log-file holds the same lines", filed, err)
    os.unlink(path)

    r = Run("--log-disable")
    completion(r.srv)
    for _ in range(50):   # the completion's line is written once its answer is out
        st, status = r.srv.get("/bankml/status")
        if any(x.get("route") == "/completion" for x in status.get("log", [])):
            break
        time.sleep(0.1)
    out, err = r.stop()
    S.equal("--log-disable: nothing written", [out, err], ["", ""])
    S.check("--log-disable: the ring still kept", any(x.get("type") == "request" for x in status.get("log", [])),
            str(status)[:300])

    r = Run("-lv", "2")
    completion(r.srv)
    r.srv.post("/completion", {"prompt": "x", "n_indent": 2})
    out, err = r.stop()
    req = [ln for ln in err.splitlines() if "bankml serve: POST" in ln]
    S.check("-lv 2: refusals only", len(req) == 1 and " 400 " in req[0], str(req))
    S.check("-lv 2: start and stop still written", "listening on" in err and "stopped;" in err, err[-300:])

    r = Run("-v", "--log-colors", "on")
    r.srv.get("/health")
    r.srv.post("/completion", {"prompt": "x", "n_indent": 2})
    out, err = r.stop()
    S.check("-v: health checks written at debug level, in yellow",
            re.search(r"\x1b\[33mbankml serve: GET /health 200 ms=\d+\.\d\x1b\[0m", err), err[-600:])
    S.check("--log-colors on: a refusal in magenta",
            re.search(r"\x1b\[35mbankml serve: POST /completion 400 ms=\d+\.\d refused: " + re.escape(N_INDENT) +
                      r"\x1b\[0m", err), err[-600:])

    for flags, words in ((["--log-format", "xml"], "bankml serve: --log-format wants text or json, not xml"),
                         (["--log-colors", "pink"], "bankml serve: --log-colors: unknown value 'pink' (on, off or auto)"),
                         (["-lv", "many"], "bankml serve: -lv wants a number, not many"),
                         (["--log-file", "/nonexistent-dir/x.log"], "bankml serve: --log-file /nonexistent-dir/x.log: "
                          "cannot open it for writing: No such file or directory")):
        p = subprocess.run([BIN, "serve", DEMO, "--fork", FORK, "--port", "0", *flags], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        S.check(f"{' '.join(flags)}: refused at start with the reason", p.returncode != 0 and
                p.stderr.splitlines()[:1] == [words], f"rc {p.returncode}: {p.stderr[:300]}")


S.run("text lines", t_text)
S.run("JSON lines", t_json)
S.run("the --log-* flags", t_flags)
S.finish()
