"""oracle_verbose.py -- llama-server b11669's `__verbose` against bankml's, on stories260K with the same command
line (-t 2 -c 256 -np 1 --jinja --seed 42): with -v, -lv 10, -lv 9 and none, and the request's own `verbose`.
Compared: every answer (and every streamed event) member for member in llama-server's order, __verbose's
content, tokens, prompt, generation_settings, stop_type, stopping_word, tokens_cached and the token counts of
its timings; only what the clock and chance decide (created, id, system_fingerprint, the milliseconds) and
bankml's receipt are left out. Also: no __verbose on /completion, nor with `"verbose": false`, nor on
/v1/messages and /v1/responses; `"verbose": 1` refused with nlohmann's words.

Standard library only. Ends with "N passed, N failed, N skipped"."""
import os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("oracle_verbose")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(shared, "models", "stories260K.gguf")
FORK = os.path.join(tempfile.mkdtemp(prefix="oracle-verbose-"), "t.FORK.json")
p = subprocess.run([BIN, "pin", MODEL, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   text=True)
if p.returncode != 0:
    oracle.skip_all(f"bankml pin --write failed: {p.stdout.strip()}", S)

CLOCK = {"created", "id", "system_fingerprint", "bankml_receipt"}
MS = {"prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_ms", "predicted_per_token_ms",
      "predicted_per_second", "time_ms"}


def norm(v):
    """The answer without what the clock decides; dicts as (key, value) lists so that the order is compared."""
    if isinstance(v, dict):
        return [[k, norm(x)] for k, x in v.items() if k not in CLOCK and k not in MS]
    if isinstance(v, list):
        return [norm(x) for x in v if not (isinstance(x, dict) and "bankml_receipt" in x and "choices" not in x)]
    return v


CHAT = "/v1/chat/completions"
CMPL = "/v1/completions"
BOOK = [{"role": "system", "content": "Book"}, {"role": "user", "content": "What is the best book"}]
HI = [{"role": "user", "content": "Hi"}]

# (label, route, body, streamed)
WITH_V = [
    ("chat", CHAT, {"max_tokens": 4, "messages": BOOK}, False),
    ("chat streamed", CHAT, {"max_tokens": 3, "messages": HI, "stream": True}, True),
    ("chat streamed with usage", CHAT, {"max_tokens": 3, "messages": HI, "stream": True,
                                        "stream_options": {"include_usage": True}}, True),
    ("chat, a stop word, return_tokens", CHAT, {"max_tokens": 12, "messages": HI, "stop": ["e"],
                                                "return_tokens": True, "temperature": 0}, False),
    ("chat, response_fields select __verbose's members", CHAT,
     {"max_tokens": 3, "messages": HI, "response_fields": ["content", "prompt", "generation_settings/seed", "nope"]},
     False),
    ("chat, logprobs", CHAT, {"max_tokens": 3, "messages": HI, "logprobs": True, "top_logprobs": 2}, False),
    ("chat, verbose false", CHAT, {"max_tokens": 2, "messages": BOOK, "verbose": False}, False),
    ("completions", CMPL, {"max_tokens": 3, "prompt": "Once upon", "n_probs": 2}, False),
    ("completions streamed with progress", CMPL, {"max_tokens": 3, "prompt": "Once upon a time", "stream": True,
                                                  "return_progress": True, "timings_per_token": True, "n_probs": 1},
     True),
    ("completions streamed", CMPL, {"max_tokens": 2, "prompt": "The cat", "stream": True}, True),
    ("completions, response_fields", CMPL, {"max_tokens": 3, "prompt": "Once upon",
                                            "response_fields": ["content", "tokens_cached", "timings/cache_n"]}, False),
    ("/completion has none", "/completion", {"n_predict": 3, "prompt": "Once upon"}, False),
    ("/completion, verbose true: still none", "/completion", {"n_predict": 3, "prompt": "Once", "verbose": True}, False),
    ("/v1/messages has none", "/v1/messages", {"max_tokens": 2, "messages": HI}, False),
    ("verbose 1 refused", CHAT, {"max_tokens": 2, "messages": HI, "verbose": 1}, False),
]
PLAIN = [
    ("chat without it", CHAT, {"max_tokens": 3, "messages": BOOK}, False),
    ("chat, verbose true", CHAT, {"max_tokens": 3, "messages": BOOK, "verbose": True}, False),
    ("completions streamed, verbose true", CMPL, {"max_tokens": 2, "prompt": "Once", "stream": True,
                                                  "verbose": True}, True),
    ("completions, verbose null", CMPL, {"max_tokens": 2, "prompt": "Once", "verbose": None}, False),
]
LV10 = [("chat", CHAT, {"max_tokens": 3, "messages": BOOK}, False)]


def run_pair(flags, cases):
    extra = ["--seed", "42", *flags]
    L = oracle.Server.llama(kit, MODEL, ctx=256, extra=extra, name="llama-verbose")
    B = oracle.Server.bankml(MODEL, ctx=256, extra=["--fork", FORK, "-np", "1", *extra], name="bankml-verbose")
    try:
        oracle.start_both(L, B)
    except oracle.ServerError as e:
        S.fail(f"{' '.join(flags) or 'no flags'}: both servers start", str(e))
        return
    try:
        for label, route, body, streamed in cases:
            name = f"{' '.join(flags) or 'no flags'}: {label}"
            if streamed:
                (sl, el), (sb, eb) = L.stream(route, body), B.stream(route, body)
                S.equal(name, [sb, norm(eb)], [sl, norm(el)])
                S.check(name + ": __verbose where llama-server has it",
                        [("__verbose" in e) for e in eb if isinstance(e, dict)] ==
                        [("__verbose" in e) for e in el if isinstance(e, dict)], "")
            else:
                (sl, al), (sb, ab) = L.post(route, body), B.post(route, body)
                S.equal(name, [sb, norm(ab)], [sl, norm(al)])
                if isinstance(al, dict) and "__verbose" in al:
                    S.equal(name + ": __verbose's members in order", list(ab.get("__verbose", {})),
                            list(al["__verbose"]))
    finally:
        L.stop()
        B.stop()


run_pair(["-v"], WITH_V)
run_pair([], PLAIN)
run_pair(["-lv", "10"], LV10)
run_pair(["-lv", "9"], [("chat, -lv 9: none", CHAT, {"max_tokens": 3, "messages": BOOK}, False)])
S.finish()
