"""test_progress.py -- progress lines for a person at a terminal, and none anywhere else: `bankml pin` and
`bankml verify` show the hashing line (label, percent, bytes of the total) on a pseudo-terminal and erase it before
their answer; in a pipe neither shows a byte of it; BANKML_PROGRESS=0 keeps it off on a terminal. `bankml serve`
on a terminal shows hashing and loading before its start line and a long prompt's prefill (tokens of the total)
before the request's log line, and writes none of it to --log-file; in a pipe none.

Standard library only (a pty from Python's pty module). Ends with "N passed, N failed, N skipped"."""
import json, os, pty, re, select, signal, subprocess, sys, tempfile, time, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402

S = oracle.Suite("test_progress")
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
DEMO = os.path.join(oracle.ROOT, "models", "demo.gguf")
if not os.path.exists(DEMO):
    p = subprocess.run(["make", "-s", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0 or not os.path.exists(DEMO):
        S.fail("make demo-model", p.stdout.strip()[-300:])
        S.finish()
FORK = os.path.join(tempfile.mkdtemp(prefix="bankml-progress-"), "t.FORK.json")
subprocess.run([BIN, "pin", DEMO, "--fork", FORK, "--write"], check=True, stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL)
ENV = {k: v for k, v in os.environ.items() if k != "BANKML_PROGRESS"}
ERASE = "\r\x1b[K"
HASHING = ERASE + "hashing demo.gguf    0% 0 B of 7.6 MiB"


def on_tty(argv, env=None, until=None, timeout=60):
    """Runs argv with stdout and stderr on a new pseudo-terminal; returns what it wrote. until(text) may act
    while it runs (e.g. send a request once the server listens) and return True when it is done."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env or ENV)
    os.close(slave)
    out = b""
    t_end = time.time() + timeout
    acted = False
    while time.time() < t_end:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if until and not acted and until(out.decode("utf-8", "replace")):
            acted = True
            proc.send_signal(signal.SIGTERM)
        if proc.poll() is not None and not r:
            break
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    os.close(master)
    return out.decode("utf-8", "replace").replace("\r\n", "\n")


def in_pipe(argv, env=None):
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or ENV,
                       timeout=60)
    return (p.stdout + p.stderr).decode("utf-8", "replace")


def t_pin_verify():
    for cmd in (["pin", DEMO, "--fork", FORK], ["verify", DEMO, "--fork", FORK]):
        name = "bankml " + cmd[0]
        tty = on_tty([BIN, *cmd])
        S.check(f"{name}, a terminal: the hashing line, then erased before the answer",
                re.search(re.escape(HASHING) + r".*" + re.escape(ERASE) + r"(pinned|play pinned) 44a44f02", tty, re.S),
                repr(tty[:300]))
        pipe = in_pipe([BIN, *cmd])
        S.check(f"{name}, a pipe: no progress at all", "hashing" not in pipe and "\x1b" not in pipe and "\r" not in pipe
                and "44a44f02" in pipe, repr(pipe[:300]))
        off = on_tty([BIN, *cmd], env=dict(ENV, BANKML_PROGRESS="0"))
        S.check(f"{name}, a terminal with BANKML_PROGRESS=0: none", "hashing" not in off and "44a44f02" in off,
                repr(off[:300]))


PROMPT = " ".join(["once upon a time"] * 40)


def t_serve():
    port = oracle.free_port()
    logf = os.path.join(tempfile.mkdtemp(prefix="bankml-progress-log-"), "serve.log")
    got = {}

    def ask(text):
        if "listening on" not in text:
            return False
        if "answer" not in got:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(
                {"prompt": PROMPT, "n_predict": 2, "temperature": 0}).encode())
            got["answer"] = json.loads(urllib.request.urlopen(req, timeout=30).read())
        return "POST /completion 200" in text

    tty = on_tty([BIN, "serve", DEMO, "--fork", FORK, "--port", str(port), "-c", "512", "-b", "32", "-ub", "32",
                  "--log-file", logf], until=ask)
    n = got.get("answer", {}).get("tokens_evaluated")
    S.check("serve, a terminal: hashing, then loading, then the start line",
            re.search(re.escape(HASHING) + r".*" + re.escape(ERASE + "loading demo.gguf  ") + r"\d+\.\d s" +
                      re.escape(ERASE) + r"bankml serve \S+ --native:", tty, re.S), repr(tty[:500]))
    S.check("serve, a terminal: the prefill line of the prompt's tokens, erased before the request's line",
            n and re.search(re.escape(f"{ERASE}prompt    0% 0 tokens of {n} tokens") + r".*" + re.escape(ERASE) +
                            r"bankml serve: POST /completion 200 ", tty, re.S), f"n={n} {tty[-400:]!r}")
    with open(logf, encoding="utf-8", errors="replace") as f:
        logged = f.read()
    S.check("serve --log-file: the log lines, no progress", "POST /completion 200" in logged and "hashing" not in logged
            and "\x1b" not in logged and "\r" not in logged, repr(logged[:300]))

    srv = oracle.Server([BIN, "serve", DEMO, "--fork", FORK, "--port", "{port}", "-c", "512", "-b", "32", "-ub", "32"],
                        name="bankml-progress", env=ENV)
    with srv:
        srv.post("/completion", {"prompt": PROMPT, "n_predict": 2, "temperature": 0})
    with open(srv.log_path, encoding="utf-8", errors="replace") as f:
        piped = f.read()
    S.check("serve, a pipe: the log lines, no progress", "POST /completion 200" in piped and "hashing" not in piped and
            "loading demo" not in piped and "\x1b" not in piped and "\r" not in piped, repr(piped[-300:]))


S.run("pin and verify", t_pin_verify)
S.run("serve", t_serve)
S.finish()
