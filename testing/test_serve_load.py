"""test_serve_load.py -- 200 requests sent at once to `bankml serve` on the demo model are all answered, one at a
time, each as if alone.

serve.c holds at most 32 connections open; the rest wait in the kernel's accept queue (backlog 512) and the engine
runs one completion at a time (llama-server -np 1). Five different short greedy chats (max_tokens 4) are each asked
once alone for the reference answer, then 200 requests (40 of each, interleaved) are sent at once from 200 threads.
Every answer must be 200 with the reference's content, finish_reason and token counts; the interleaving also makes
the host prompt cache save and restore between them. Loopback only; bounded: each request has a 120 s timeout, the
whole burst must finish within 180 s.

The bankml binary is BANKML_BIN or ./bankml. Standard library only."""
import json, os, subprocess, sys, threading, time, urllib.request, urllib.error

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("test_serve_load")
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(oracle.ROOT, "models", "demo.gguf")
FORK = os.path.join(oracle.ROOT, "models.FORK.json")
N = 200

if not os.path.exists(BIN):
    oracle.skip_all(f"{BIN} is not built", S)
if not os.path.exists(MODEL):
    subprocess.run(["make", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if not os.path.exists(MODEL):
    oracle.skip_all("models/demo.gguf is missing and `make demo-model` did not make it", S)

PROMPTS = ["Hello", "What is two plus two?", "Name a colour.", "Say something short.", "Why?"]


def body(q):
    return {"messages": [{"role": "user", "content": q}], "max_tokens": 4, "temperature": 0}


def post(port, b, timeout=120):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(b).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")
    except Exception as e:  # a reset or timeout is a failed answer, not a crash of the suite
        return None, f"{type(e).__name__}: {e}"


def fetch(port, path):
    """GET path: the body text, or None (a failure of the check that reads it)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
            return r.read().decode()
    except Exception:
        return None


def view(j):
    if not isinstance(j, dict) or "choices" not in j:
        return j
    c = j["choices"][0]
    return {"content": c["message"]["content"], "finish": c["finish_reason"],
            "prompt_tokens": j["usage"]["prompt_tokens"], "completion_tokens": j["usage"]["completion_tokens"]}


try:
    with oracle.Server.bankml(MODEL, ctx=2048, extra=["--fork", FORK, "--metrics"]) as B:
        ref = {}
        for q in PROMPTS:
            st, j = post(B.port, body(q))
            S.check(f"alone: {q!r} answered 200", st == 200, f"{st} {j}")
            ref[q] = view(j)
        results = [None] * N
        start = threading.Barrier(N)

        def one(i):
            q = PROMPTS[i % len(PROMPTS)]
            try:
                start.wait(timeout=60)
            except threading.BrokenBarrierError:
                pass
            results[i] = post(B.port, body(q))

        t0 = time.time()
        threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(N)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1.0, 180 - (time.time() - t0)))
        dt = time.time() - t0
        S.check(f"{N} at once: done within 180 s", all(not t.is_alive() for t in threads), f"{dt:.1f} s")
        statuses = {}
        for r in results:
            k = r[0] if r else None
            statuses[k] = statuses.get(k, 0) + 1
        S.equal(f"{N} at once: every answer 200", statuses, {200: N})
        bad = [(i, view(r[1]), ref[PROMPTS[i % len(PROMPTS)]]) for i, r in enumerate(results)
               if r and r[0] == 200 and view(r[1]) != ref[PROMPTS[i % len(PROMPTS)]]]
        S.check(f"{N} at once: each answer equals the lone request's (content, finish, token counts)", not bad,
                f"{len(bad)} differ, first {bad[:1]}")
        # one at a time: the engine's records show every completion, never two at once
        m = json.loads(fetch(B.port, "/bankml/metrics") or "{}")
        S.equal(f"{N} at once: {N + len(PROMPTS)} completions recorded", m.get("kept"), N + len(PROMPTS))
        text = fetch(B.port, "/metrics") or ""
        vals = dict(ln.split(" ", 1) for ln in text.splitlines() if ln and not ln.startswith("#"))
        S.equal("/metrics afterwards: idle, tokens counted",
                (vals.get("llamacpp:requests_processing"), vals.get("llamacpp:requests_deferred"),
                 vals.get("llamacpp:tokens_predicted_total")),
                ("0", "0", str(sum(ref[PROMPTS[i % len(PROMPTS)]]["completion_tokens"] for i in range(N)) +
                               sum(v["completion_tokens"] for v in ref.values()))))
        print(f"      {N} requests in {dt:.1f} s ({N / dt:.1f} requests/s)")
        st, j = post(B.port, body(PROMPTS[0]))
        S.equal("serving normally afterwards", (st, view(j)), (200, ref[PROMPTS[0]]))
except oracle.ServerError as e:
    S.fail("bankml serve", str(e))

S.finish()
