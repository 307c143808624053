"""oracle.py -- what every oracle suite of bankml needs: the llama.cpp b11669 kit, ../shared, the test
models, a llama-server (or `bankml serve`) harness, JSONL records and comparisons. Standard library only.

A suite reads like this:

    import oracle
    s = oracle.Suite("oracle_chat")
    kit = oracle.kit_or_skip(s)                  # skips the whole suite (or fails under CI) without the kit
    models = oracle.ensure_models(s)             # `make models`, then build/models
    with oracle.Server.llama(kit, models + "/qwen3-e128-f32.gguf", ctx=512) as srv:
        status, body = srv.post("/v1/chat/completions", {...})
        s.equal("chat status", status, 200)
    s.finish()                                   # prints "N passed, N failed, N skipped", exits 0/1

Environment: BANKML_REQUIRE_ORACLE=1 (CI) turns every skip into a failure; BANKML_SHARED points at the
shared folder (default ../shared beside the repository); BANKML_ORACLE_BIN names a kit bin folder to use
instead of running ../shared/oracle/install.sh.
"""
import hashlib, http.client, json, os, signal, socket, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS_DIR = os.path.join(ROOT, "build", "models")
LOG_DIR = os.path.join(ROOT, "build", "oracle-logs")


def require_oracle():
    """True under CI (BANKML_REQUIRE_ORACLE=1): a missing oracle is then a failure, not a skip."""
    return os.environ.get("BANKML_REQUIRE_ORACLE") == "1"


# ---------------------------------------------------------------- suites and counts

class Suite:
    """Counts passes, failures and skips; prints each failure with its detail and, last, the count line
    that testing/run_tests.py reads."""

    def __init__(self, name):
        self.name = name
        self.passed = self.failed = self.skipped = 0
        self.t0 = time.time()

    def ok(self, name, detail=""):
        self.passed += 1
        print(f"ok    {name}{'  ' + detail if detail else ''}", flush=True)

    def fail(self, name, detail=""):
        self.failed += 1
        print(f"FAIL  {name}{': ' + detail if detail else ''}", flush=True)

    def skip(self, name, reason):
        """A test that cannot run here; under BANKML_REQUIRE_ORACLE=1 the runner counts it as a failure."""
        self.skipped += 1
        print(f"skip  {name}: {reason}", flush=True)

    def check(self, name, cond, detail=""):
        (self.ok if cond else self.fail)(name, "" if cond else detail)
        return bool(cond)

    def equal(self, name, got, want, ignore=()):
        """One test: got == want, else each differing field is printed (see diff)."""
        d = diff(got, want, ignore=ignore)
        if not d:
            self.ok(name)
            return True
        self.fail(name, f"{len(d)} mismatch{'es' if len(d) > 1 else ''}")
        for line in d[:20]:
            print(f"        {line}")
        if len(d) > 20:
            print(f"        ... {len(d) - 20} more")
        return False

    def run(self, name, fn, *args):
        """Runs fn(*args) as one test: passes if it returns without raising; an exception fails it."""
        try:
            fn(*args)
            self.ok(name)
            return True
        except Exception as e:  # a harness error is a test failure, never a crash of the suite
            self.fail(name, f"{type(e).__name__}: {e}")
            return False

    def finish(self):
        """Prints the count line and exits: 1 if anything failed, else 0."""
        print(f"({self.name}: {time.time() - self.t0:.1f} s)")
        print(f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped", flush=True)
        sys.exit(1 if self.failed else 0)


def skip_all(reason, suite=None):
    """The whole suite cannot run (no kit, no ../shared): one line saying why, then the count line.
    Under BANKML_REQUIRE_ORACLE=1 that is one failure."""
    name = suite.name if suite else os.path.basename(sys.argv[0])
    if require_oracle():
        print(f"{name}: cannot run: {reason} (BANKML_REQUIRE_ORACLE=1)")
        print("0 passed, 1 failed, 0 skipped", flush=True)
        sys.exit(1)
    print(f"{name}: skipped: {reason}")
    print("0 passed, 0 failed, 1 skipped", flush=True)
    sys.exit(0)


# ---------------------------------------------------------------- the kit and ../shared

def find_shared():
    """The shared folder (BANKML_SHARED, else ../shared beside the repository) or None."""
    p = os.environ.get("BANKML_SHARED") or os.path.join(ROOT, "..", "shared")
    p = os.path.abspath(p)
    return p if os.path.isdir(p) else None


class Kit:
    """The installed oracle kit: `bin` holds the llama.cpp tools' wrappers, `sid-run` and `gguf-py`."""

    def __init__(self, bin_dir):
        self.bin = bin_dir
        self.root = os.path.join(os.path.dirname(bin_dir), "root")
        self.include = os.path.join(self.root, "usr", "include")
        self.lib = os.path.join(self.root, "usr", "lib", "x86_64-linux-gnu")

    def tool(self, name):
        return os.path.join(self.bin, name)


_kit = None


def find_kit():
    """(Kit, None) or (None, reason). Runs ../shared/oracle/install.sh once per process (seconds when the
    kit is installed, minutes the first time)."""
    global _kit
    if _kit:
        return _kit, None
    env_bin = os.environ.get("BANKML_ORACLE_BIN")
    if env_bin:
        if not os.path.exists(os.path.join(env_bin, "llama-server")):
            return None, f"BANKML_ORACLE_BIN={env_bin} has no llama-server"
        _kit = Kit(env_bin)
        return _kit, None
    shared = find_shared()
    if not shared:
        return None, "no ../shared beside the repository (set BANKML_SHARED)"
    inst = os.path.join(shared, "oracle", "install.sh")
    if not os.path.exists(inst):
        return None, f"no {inst}"
    try:
        p = subprocess.run(["sh", inst], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"install.sh: {e}"
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines or not os.path.exists(os.path.join(lines[-1], "llama-server")):
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"install.sh failed ({p.returncode}): {tail}"
    _kit = Kit(lines[-1])
    return _kit, None


def kit_or_skip(suite):
    """The kit, or the whole suite skipped (failed under CI) with the reason."""
    kit, why = find_kit()
    if not kit:
        skip_all(f"the oracle kit is missing: {why}", suite)
    return kit


def shared_or_skip(suite):
    p = find_shared()
    if not p:
        skip_all("no ../shared beside the repository (set BANKML_SHARED)", suite)
    return p


# ---------------------------------------------------------------- models

def model_list():
    """[(sha256, file name)] from testing/models.sha256: every generated model, in order."""
    out = []
    with open(os.path.join(HERE, "models.sha256")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                h, name = line.split(None, 1)
                out.append((h, name))
    return out


def ensure_models(suite=None):
    """Runs `make models` (a no-op when they are there and their generator is unchanged) and returns
    build/models. A failure to make them skips the suite (fails under CI)."""
    p = subprocess.run(["make", "-s", "models"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, errors="replace")
    if p.stdout.strip():
        print(p.stdout.rstrip())
    if p.returncode != 0:
        skip_all(f"`make models` failed ({p.returncode})", suite)
    return MODELS_DIR


def start_both(L, B):
    """Starts two Servers at once (a model load each); if either fails, both are stopped and one ServerError
    carries both reasons. Returns (L, B), running."""
    errs = []

    def go(srv):
        try:
            srv.start()
        except ServerError as e:
            errs.append(str(e))

    ts = [threading.Thread(target=go, args=(s,)) for s in (L, B)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        L.stop()
        B.stop()
        raise ServerError("; ".join(errs))
    return L, B


def strip_answer(v, keys):
    """An answer without the members that differ by nature (keys, at any depth) and without bankml's own
    receipt events (a list item with bankml_receipt and no choices)."""
    if isinstance(v, dict):
        return {k: strip_answer(x, keys) for k, x in v.items() if k not in keys}
    if isinstance(v, (list, tuple)):
        return [strip_answer(x, keys) for x in v
                if not (isinstance(x, dict) and "bankml_receipt" in x and "choices" not in x)]
    return v


def pinned_fork(models, prefix="oracle-"):
    """A FORK.json in a new temporary folder pinning each model (`bankml pin --write`): its path."""
    fork = os.path.join(tempfile.mkdtemp(prefix=prefix), "t.FORK.json")
    binary = os.environ.get("BANKML_BIN") or os.path.join(ROOT, "bankml")
    for m in [models] if isinstance(models, str) else models:
        subprocess.run([binary, "pin", m, "--fork", fork, "--write"], check=True, stdout=subprocess.DEVNULL)
    return fork


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- the in-process ggml program

class Ggml:
    """Runs build/ggml-oracle under the kit's sid-run. Byte-string arguments are written to temporary files
    first; the output file's bytes are returned (see testing/ggml_oracle.c for the operations)."""

    def __init__(self, kit):
        self.kit = kit
        self.exe = os.path.join(ROOT, "build", "ggml-oracle")
        p = subprocess.run(["make", "-s", "build/ggml-oracle"], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace")
        if p.returncode != 0:
            raise RuntimeError(f"make build/ggml-oracle failed:\n{p.stdout[-2000:]}")
        self.tmp = tempfile.mkdtemp(prefix="ggml-oracle-")

    def __call__(self, op, *args, threads=1):
        argv = [self.kit.tool("sid-run"), self.exe, "-t", str(threads), op]
        for i, a in enumerate(args):
            if isinstance(a, (bytes, bytearray)):
                path = os.path.join(self.tmp, f"in{i}")
                with open(path, "wb") as f:
                    f.write(a)
                argv.append(path)
            else:
                argv.append(str(a))
        out = os.path.join(self.tmp, "out")
        if os.path.exists(out):
            os.remove(out)
        argv.append(out)
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
        if p.returncode != 0:
            raise RuntimeError(f"ggml-oracle {op}: {p.stderr.strip() or 'exit %d' % p.returncode}")
        with open(out, "rb") as f:
            return f.read()

    def close(self):
        for name in os.listdir(self.tmp):
            os.remove(os.path.join(self.tmp, name))
        os.rmdir(self.tmp)


# ---------------------------------------------------------------- servers

_given_ports = set()


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick), never one this process handed out
    before: two servers built before either starts could otherwise get the same port, the second fail to bind, and
    its health check be answered by the first (a CI run saw bankml's requests reach llama-server that way)."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _given_ports:
            _given_ports.add(port)
            return port
    raise ServerError("no TCP port on 127.0.0.1 left that this process has not handed out")


class ServerError(RuntimeError):
    pass


class Server:
    """A server process on 127.0.0.1:<port>: started with any command line (`{port}` in it is replaced),
    ready when GET /health answers 200, stopped by SIGTERM then SIGKILL. Its output goes to a log file
    under build/oracle-logs/, whose tail is in every error."""

    def __init__(self, argv, name="server", port=None, env=None, start_timeout=120.0):
        self.port = port or free_port()
        self.argv = [str(a).replace("{port}", str(self.port)) for a in argv]
        self.name = name
        self.env = env
        self.start_timeout = start_timeout
        self.proc = None
        os.makedirs(LOG_DIR, exist_ok=True)
        self.log_path = os.path.join(LOG_DIR, f"{name}-{self.port}.log")

    @classmethod
    def llama(cls, kit, model, ctx=512, threads=2, extra=(), name=None, **kw):
        """llama-server with the flags bankml mirrors: -t 2 -c N -np 1 --jinja --no-webui (+ extra)."""
        argv = [kit.tool("llama-server"), "-m", model, "--host", "127.0.0.1", "--port", "{port}",
                "-t", str(threads), "-c", str(ctx), "-np", "1", "--jinja", "--no-webui", *extra]
        return cls(argv, name=name or "llama-" + os.path.basename(model).replace(".gguf", ""), **kw)

    @classmethod
    def bankml(cls, model, ctx=512, threads=2, extra=(), binary=None, name=None, **kw):
        """./bankml serve MODEL --listen 127.0.0.1:P --llama-threads T --ctx N (+ extra, e.g. --fork F)."""
        binary = binary or os.environ.get("BANKML_BIN") or os.path.join(ROOT, "bankml")
        argv = [binary, "serve", model, "--listen", "127.0.0.1:{port}",
                "--llama-threads", str(threads), "--ctx", str(ctx), *extra]
        return cls(argv, name=name or "bankml-" + os.path.basename(model).replace(".gguf", ""), **kw)

    def log_tail(self, n=15):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def start(self):
        self.log = open(self.log_path, "w")
        self.log.write("$ " + " ".join(self.argv) + "\n")
        self.log.flush()
        try:
            self.proc = subprocess.Popen(self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=self.env)
        except OSError as e:
            raise ServerError(f"{self.name}: cannot start {self.argv[0]}: {e}")
        t_end = time.time() + self.start_timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise ServerError(f"{self.name} exited with {rc} before it was ready; log "
                                  f"{self.log_path}:\n{self.log_tail()}")
            try:
                status, _ = self.request("GET", "/health", timeout=2)
                if status == 200 and self.proc.poll() is None:
                    return self
            except (OSError, http.client.HTTPException):
                pass
            if time.time() > t_end:
                self.stop()
                raise ServerError(f"{self.name} not ready after {self.start_timeout:.0f} s; log "
                                  f"{self.log_path}:\n{self.log_tail()}")
            time.sleep(0.05)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None):
            self.log.close()
            self.log = None
        return self.proc.returncode if self.proc else None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, body): body parsed as JSON when it is JSON, else the text."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            hdrs = dict(headers or {})
            data = None
            if body is not None:
                data = body if isinstance(body, (bytes, str)) else json.dumps(body)
                hdrs.setdefault("Content-Type", "application/json")
            c.request(method, path, body=data, headers=hdrs)
            r = c.getresponse()
            raw = r.read().decode("utf-8", "replace")
            try:
                return r.status, json.loads(raw)
            except ValueError:
                return r.status, raw
        finally:
            c.close()

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def stream(self, path, body, timeout=120):
        """POST and read a server-sent event stream: (status, [event, ...]), each `data:` payload parsed as
        JSON when it is JSON ("[DONE]" stays a string). A non-stream answer (an error) is the one event."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = c.getresponse()
            events = []
            if "text/event-stream" not in (r.getheader("Content-Type") or ""):
                raw = r.read().decode("utf-8", "replace")
                try:
                    return r.status, [json.loads(raw)]
                except ValueError:
                    return r.status, [raw]
            for line in r:
                line = line.decode("utf-8", "replace").rstrip("\r\n")
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                try:
                    events.append(json.loads(payload))
                except ValueError:
                    events.append(payload)
                if payload == "[DONE]":
                    break
            return r.status, events
        finally:
            c.close()


# ---------------------------------------------------------------- records and comparisons

def write_jsonl(path, records):
    """Writes records, one JSON object per line, keys sorted (stable files to diff and commit)."""
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def diff(got, want, path="$", ignore=()):
    """Every difference between two JSON-like values, as "path: got X, want Y" lines. Keys listed in
    `ignore` (at any depth: "created", "id", ...) are not compared. Floats compare exactly."""
    out = []
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got), key=str):
            if k in ignore:
                continue
            p = f"{path}.{k}"
            if k not in got:
                out.append(f"{p}: missing, want {short(want[k])}")
            elif k not in want:
                out.append(f"{p}: unexpected {short(got[k])}")
            else:
                out += diff(got[k], want[k], p, ignore)
    elif isinstance(want, list) and isinstance(got, list):
        for i in range(max(len(got), len(want))):
            p = f"{path}[{i}]"
            if i >= len(got):
                out.append(f"{p}: missing, want {short(want[i])}")
            elif i >= len(want):
                out.append(f"{p}: unexpected {short(got[i])}")
            else:
                out += diff(got[i], want[i], p, ignore)
    elif type(got) != type(want) or got != want:
        out.append(f"{path}: got {short(got)}, want {short(want)}")
    return out


def short(v, n=120):
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, bytes) else repr(v)
    return s if len(s) <= n else s[:n] + "..."


def compare_records(suite, label, got, want, key="id", ignore=()):
    """Compares two lists of records matched by `key` (records recorded from llama-server against bankml's
    answers, say): one test per wanted record, each mismatch printed, then a line
    "LABEL: N match, N differ". Returns (match, differ)."""
    by_key = {r.get(key): r for r in got}
    same = bad = 0
    for w in want:
        k = w.get(key)
        g = by_key.get(k)
        name = f"{label} {key}={k}"
        if g is None:
            suite.fail(name, "no answer recorded")
            bad += 1
        elif suite.equal(name, {x: y for x, y in g.items() if x not in ignore},
                         {x: y for x, y in w.items() if x not in ignore}):
            same += 1
        else:
            bad += 1
    print(f"{label}: {same} match, {bad} differ", flush=True)
    return same, bad


def stream_view(events):
    """Each streamed event without the values that differ by nature (ids, times, bankml's receipt): the timings
    keep cache_n, prompt_n and predicted_n."""
    out = []
    for e in events:
        if isinstance(e, dict):
            e = {k: v for k, v in e.items() if k not in ("created", "id", "system_fingerprint", "bankml_receipt")}
            if "timings" in e:
                e["timings"] = {k: e["timings"][k] for k in ("cache_n", "prompt_n", "predicted_n")}
        out.append(e)
    return out
