"""oracle_progress.py -- streamed `timings_per_token` and `return_progress` (issue #15) through a real
`bankml serve` next to llama-server b11669 on stories260K, both started fresh with the same flags
(-t 2 -c 512 -np 1 --jinja, then -b 32 -ub 32, then -b 64) and sent the same requests in the same order, so
their slots (and cache_n) move alike:

- every route x case: /completion, /v1/chat/completions, /v1/completions, /v1/responses, /v1/messages, each
  with timings_per_token (streamed), return_progress, both, and timings_per_token not streamed; a 226-token
  prompt, cache_prompt false, greedy, 3 tokens (the requests of /work/facts/progress/cap.py);
- cache_prompt true after a first request (the first progress event then has cache > 0), on /completion and
  chat;
- a prompt shorter than one batch (one progress event before the prompt, one after);
- the routes' aliases (/completions, /chat/completions, /responses) with both fields.

Answers are compared whole and streams event by event (event names included), every object as its list of
members in order, so member names and order count; of the values only the times are masked (prompt_ms,
prompt_per_token_ms, prompt_per_second, predicted_ms, predicted_per_token_ms, predicted_per_second,
time_ms), the ids by their shape, created times and system_fingerprint; every count (cache_n, prompt_n,
predicted_n, total, cache, processed, tokens_*) is compared as it is. The masked values are checked on both
servers' streams instead: each per-token and per-second value is b11669's formula of the same object's
times and counts (exactly, in doubles), prompt_ms is 0.0 before the first decode call, predicted_ms is at
least 0.001 once a token is out, time_ms is an integer that never decreases and is at least prompt_ms.
Standard library only. Ends with "N passed, N failed, N skipped"."""
import http.client, json, os, re, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

CTX = 512
S = oracle.Suite("oracle_progress")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(shared, "models", "stories260K.gguf")
tmp = tempfile.mkdtemp(prefix="oracle-progress-")
FORK = os.path.join(tmp, "progress.FORK.json")
p = subprocess.run([BIN, "pin", MODEL, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   text=True)
if p.returncode != 0:
    oracle.skip_all(f"bankml pin --write {MODEL} failed: {p.stdout.strip()}", S)

TIMES = {"prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_ms", "predicted_per_token_ms",
         "predicted_per_second", "time_ms"}
MASKED = {"created", "created_at", "completed_at", "system_fingerprint"}
ID = re.compile(r"^(chatcmpl-|resp_|msg_)[A-Za-z0-9]{32}$")


def norm(v, key=None):
    """An object as its [member, value] list in order; times, created times and the fingerprint "X", ids
    their shape."""
    if isinstance(v, dict):
        return [[k, norm(x, k)] for k, x in v.items() if k != "bankml_receipt"]
    if isinstance(v, list):
        return [norm(x) for x in v]
    if key in TIMES or key in MASKED:
        return "X"
    if key in ("id", "item_id") and isinstance(v, str):
        m = ID.match(v)
        return "<" + m.group(1) + ">" if m else "<bad id " + v + ">"
    return v


def call(port, path, body):
    """(status, [(event name, parsed data), ...]) for a stream, (status, [parsed body]) for an answer."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        ct = (r.getheader("Content-Type") or "").split(";")[0]
        raw = r.read().decode("utf-8", "replace")
    finally:
        c.close()
    if ct != "text/event-stream":
        try:
            return r.status, [(None, json.loads(raw))]
        except ValueError:
            return r.status, [(None, raw)]
    events = []
    for block in raw.split("\n\n"):
        if not block.strip():
            continue
        name, data = None, None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        try:
            data = json.loads(data)
        except (TypeError, ValueError):
            pass
        events.append((name, data))
    return r.status, events


def timings_of(events):
    """Every timings object and prompt_progress of a stream, in order: [(timings or None, progress or None)]."""
    out = []
    for _, d in events:
        if isinstance(d, dict) and ("timings" in d or "prompt_progress" in d):
            out.append((d.get("timings"), d.get("prompt_progress")))
    return out


def check_values(label, events):
    """The masked values as b11669 derives them (server_slot_stats): a list of what is wrong."""
    bad = []
    last_ms = -1
    for t, pp in timings_of(events):
        if t is not None:
            pn, pms, gn, gms = t["prompt_n"], t["prompt_ms"], t["predicted_n"], t["predicted_ms"]
            steps = gn - 1 if gn > 0 else 0
            want = {
                "prompt_per_token_ms": pms / pn if pn > 0 else 0.0,
                "prompt_per_second": 1e3 / pms * pn if pms > 0.0 else 0.0,
                "predicted_per_token_ms": gms / steps if steps > 0 else 0.0,
                "predicted_per_second": 1e3 / gms * steps if gms > 0.0 else 0.0,
            }
            for k, w in want.items():
                if t[k] != w:
                    bad.append(f"{k} {t[k]!r}, its formula gives {w!r}")
            if pn == 0 and pms != 0.0:
                bad.append(f"prompt_ms {pms} before the first decode call")
            if gn == 0 and gms != 0.0:
                bad.append(f"predicted_ms {gms} before any token")
            if gn > 0 and gms < 0.001:
                bad.append(f"predicted_ms {gms} under 0.001 with {gn} tokens")
        if pp is not None:
            tm = pp["time_ms"]
            if not isinstance(tm, int) or tm < last_ms:
                bad.append(f"time_ms {tm!r} after {last_ms}")
            elif t is not None and tm < int(t["prompt_ms"]):
                bad.append(f"time_ms {tm} under prompt_ms {t['prompt_ms']}")
            last_ms = tm if isinstance(tm, int) else last_ms
    return bad


def both(L, B, name, path, body):
    sl, el = call(L.port, path, body)
    sb, eb = call(B.port, path, body)
    ok = S.equal(name, [sb, [[n, norm(d)] for n, d in eb]], [sl, [[n, norm(d)] for n, d in el]])
    for side, ev in (("llama-server", el), ("bankml", eb)):
        bad = check_values(name, ev)
        S.check(f"{name}: {side}'s times as b11669 derives them", not bad, "; ".join(bad[:4]))
    return ok, el, eb


P = "the quick brown fox jumps over the lazy dog " * 8   # 226 tokens on /completion, 266 as a chat
ROUTES = [
    ("/completion", {"prompt": P, "n_predict": 3}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": P}], "max_tokens": 3}),
    ("/v1/completions", {"prompt": P, "max_tokens": 3}),
    ("/v1/responses", {"input": P, "max_output_tokens": 3}),
    ("/v1/messages", {"messages": [{"role": "user", "content": P}], "max_tokens": 3}),
]
CASES = [
    ("tpt", {"timings_per_token": True}),
    ("rp", {"return_progress": True}),
    ("both", {"timings_per_token": True, "return_progress": True}),
    ("tpt-ns", {"timings_per_token": True, "stream": False}),
]
BOTH = {"timings_per_token": True, "return_progress": True}


def progress_list(events):
    return [[pp["total"], pp["cache"], pp["processed"]] for _, pp in timings_of(events) if pp is not None]


def run_config(flags, nb):
    tag = " ".join(flags)
    with oracle.Server.llama(kit, MODEL, ctx=CTX, extra=flags) as L, \
            oracle.Server.bankml(MODEL, ctx=CTX, extra=["--fork", FORK, "-np", "1", *flags]) as B:
        for path, base in ROUTES:
            for case, extra in CASES:
                body = dict(base, temperature=0, stream=True, cache_prompt=False)
                body.update(extra)
                _, el, _ = both(L, B, f"[{tag}] {path} {case}", path, body)
                if case == "rp" and path == "/completion":
                    # the progress b11669 reports: before the first call, then after each n_batch call
                    want = [[226, 0, 0]] + [[226, 0, min(226, k * nb)] for k in range(1, (226 + nb - 1) // nb + 1)]
                    S.equal(f"[{tag}] /completion's progress events: one per n_batch call", progress_list(el), want)
        # cache_prompt true after a first request: the first progress event has cache > 0
        for path, base in ROUTES[:2]:
            body = dict(base, temperature=0, stream=True, cache_prompt=True, **BOTH)
            both(L, B, f"[{tag}] {path} cache_prompt, the first request", path, body)
            body2 = dict(body)
            if path == "/completion":
                body2["prompt"] = P + "and the cat"
            else:
                body2["messages"] = [{"role": "user", "content": P + "and the cat"}]
            _, el, _ = both(L, B, f"[{tag}] {path} cache_prompt, the prefix kept", path, body2)
            pl = progress_list(el)
            S.check(f"[{tag}] {path}: the first progress event has cache == processed > 0 (llama-server)",
                    pl and pl[0][1] == pl[0][2] > 0, json.dumps(pl[:2]))
        # a prompt shorter than one batch
        for path, base in ROUTES:
            body = dict(base, temperature=0, stream=True, cache_prompt=False, **BOTH)
            if "prompt" in body:
                body["prompt"] = "Once upon a time"
            elif "input" in body:
                body["input"] = "Once upon a time"
            else:
                body["messages"] = [{"role": "user", "content": "Once upon a time"}]
            both(L, B, f"[{tag}] {path} a prompt shorter than one batch", path, body)
        if nb == 32:
            for path, base in (("/completions", ROUTES[0][1]), ("/chat/completions", ROUTES[1][1]),
                               ("/responses", ROUTES[3][1])):
                both(L, B, f"[{tag}] {path} (alias) both", path,
                     dict(base, temperature=0, stream=True, cache_prompt=False, **BOTH))


def main():
    for flags, nb in ((["-b", "32", "-ub", "32"], 32), (["-b", "64"], 64)):
        try:
            run_config(flags, nb)
        except oracle.ServerError as e:
            S.fail(f"servers with {' '.join(flags)}", str(e))
    S.finish()


main()
