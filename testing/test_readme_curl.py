"""test_readme_curl.py -- README.md's curl lines work as written.

Extracts every `curl` command of README.md's ```sh blocks (backslash continuations joined), starts
`bankml serve models/demo.gguf --fork models.FORK.json` as `make run` does (on a free port: the README's
127.0.0.1:18093 is replaced by it, nothing else), and runs each command with `sh -c`. Each must exit 0 and
print an answer that is not an error; where README shows the output (a `# ...` line right under the command)
it must be exactly that. With the oracle kit, the chats and completions (seeded or greedy) must give
llama-server b11669's words and token counts for the same body (-c 4096 -np 1 -t 2 --jinja, bankml serve's
defaults); the seeded Ollama chat must give the same words twice.

Needs curl: without it the suite is skipped (a failure under BANKML_REQUIRE_ORACLE=1;
testing/install_deps.sh installs it). Standard library only."""
import json, os, re, shlex, shutil, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("test_readme_curl")
README = os.path.join(oracle.ROOT, "README.md")
DEMO = os.path.join(oracle.ROOT, "models", "demo.gguf")
FORK = os.path.join(oracle.ROOT, "models.FORK.json")
README_ADDR = "127.0.0.1:18093"

if not shutil.which("curl"):
    oracle.skip_all("curl is not installed (testing/install_deps.sh installs it)", S)
if not os.path.exists(DEMO):
    p = subprocess.run(["make", "-s", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0 or not os.path.exists(DEMO):
        S.fail("make demo-model", p.stdout.strip()[-300:])
        S.finish()


def readme_commands():
    """[(command, expected output or None)] from README's ```sh blocks, in order."""
    out, in_sh, lines = [], False, open(README, encoding="utf-8").read().splitlines()
    i = 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith("```"):
            in_sh = ln.strip() in ("```sh", "```bash", "```shell")
            i += 1
            continue
        if in_sh and ln.lstrip().startswith("curl "):
            cmd = ln.strip()
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1].rstrip() + " " + lines[i].strip()
            want = None
            if i + 1 < len(lines) and lines[i + 1].startswith("# "):
                want = lines[i + 1][2:]
                i += 1
            out.append((cmd, want))
        i += 1
    return out


def body_of(cmd):
    """The -d argument of a curl command, parsed as JSON."""
    argv = shlex.split(cmd)
    for k, a in enumerate(argv):
        if a in ("-d", "--data", "--data-raw", "--data-binary") and k + 1 < len(argv):
            return json.loads(argv[k + 1])
    return None


def path_of(cmd):
    m = re.search(r"http://[^/\s]+(/[^\s'\"]*)", cmd)
    return m.group(1) if m else ""


def answer_view(path, text, stream):
    """What a chat or completion answer says: its words and its token counts."""
    if stream:
        evs = [json.loads(ln[5:].strip()) for ln in text.splitlines()
               if ln.startswith("data:") and ln[5:].strip() != "[DONE]"]
        words = "".join(((e.get("choices") or [{}])[0].get("delta") or {}).get("content") or "" for e in evs)
        usage = [e["usage"] for e in evs if e.get("usage")]
        return {"content": words, "usage": usage[-1] if usage else None,
                "done": text.rstrip().endswith("data: [DONE]")}
    j = json.loads(text)
    if path.endswith("/chat/completions"):
        return {"content": j["choices"][0]["message"]["content"], "usage": j["usage"]}
    if path == "/completion":
        return {k: j.get(k) for k in ("content", "tokens_predicted", "tokens_evaluated", "stop_type")}
    return j


cmds = readme_commands()
S.check("README has its curl lines (health, tokenize, chat, stream, completion, Ollama chat)", len(cmds) >= 6,
        f"found {len(cmds)}")
S.check("every README curl line names 127.0.0.1:18093 (what `make run` serves)",
        all(README_ADDR in c for c, _ in cmds), "\n".join(c for c, _ in cmds if README_ADDR not in c))
kit, _ = oracle.find_kit()
try:
    with oracle.Server.bankml(DEMO, ctx=4096, extra=["--fork", FORK], name="bankml-readme") as B:
        L = None
        if kit:
            L = oracle.Server.llama(kit, DEMO, ctx=4096, name="llama-readme").start()
        try:
            ollama_runs = {}
            for n, (cmd, want) in enumerate(cmds, 1):
                run = cmd.replace(README_ADDR, f"127.0.0.1:{B.port}")
                path = path_of(cmd)
                p = subprocess.run(["sh", "-c", run], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   timeout=120)
                label = f"curl #{n} {path}"
                if not S.check(f"{label}: exits 0", p.returncode == 0, f"{p.returncode}: {p.stderr.strip()}"):
                    continue
                if want is not None:
                    S.equal(f"{label}: prints README's line", p.stdout.strip(), want)
                    continue
                body = body_of(cmd) or {}
                stream = body.get("stream") is True
                try:
                    got = answer_view(path, p.stdout, stream) if not path.startswith("/api/") else \
                        json.loads(p.stdout)
                except (ValueError, KeyError, IndexError) as e:
                    S.fail(f"{label}: a parsable answer", f"{type(e).__name__}: {e}: {p.stdout[:300]!r}")
                    continue
                S.check(f"{label}: an answer with words, not an error",
                        isinstance(got, dict) and "error" not in got and
                        bool((got.get("message") or {}).get("content") or got.get("content")), p.stdout[:300])
                if path.startswith("/api/"):
                    # Ollama's shape; seeded, so the same words a second time
                    again = json.loads(subprocess.run(["sh", "-c", run], stdout=subprocess.PIPE, text=True,
                                                      timeout=120).stdout)
                    S.equal(f"{label}: the same words again (seeded)", again["message"], got["message"])
                    S.equal(f"{label}: Ollama's shape", [got.get("done"), got["message"].get("role"),
                                                         got.get("eval_count")], [True, "assistant", 16])
                    continue
                if stream:
                    S.check(f"{label}: the stream ends with [DONE]", got.pop("done"), p.stdout[-200:])
                if L:
                    st, j = L.request("POST", path, body, timeout=120) if not stream else (None, None)
                    if stream:
                        st, evs = L.stream(path, body)
                        text = "".join(f"data: {json.dumps(e) if isinstance(e, dict) else e}\n\n" for e in evs)
                        want_v = answer_view(path, text, True)
                        want_v.pop("done")
                    else:
                        want_v = answer_view(path, json.dumps(j), False)
                    S.equal(f"{label}: llama-server's words and counts for the same body", got, want_v)
                else:
                    S.skip(f"{label}: llama-server's words", "no oracle kit")
        finally:
            if L:
                L.stop()
except oracle.ServerError as e:
    S.fail("servers", str(e))
S.finish()
