"""oracle_serve_flags.py -- llama-server b11669 and `bankml serve` started with the same server-wide defaults
(--seed, --temp, -n, --top-k; -t 2 -c 512 -np 1) on stories260K answer alike: greedy (--temp 0) and seeded
(--seed 42 --temp 0.8 --top-k 20), requests without their own fields and with them (a request field beats the
flag), /completion and /v1/chat/completions, content and token counts equal; /props shows the same defaults.
Standard library only."""
import os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("oracle_serve_flags")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(shared, "models", "stories260K.gguf")
tmp = tempfile.mkdtemp(prefix="oracle-serve-flags-")
FORK = os.path.join(tmp, "t.FORK.json")
subprocess.run([BIN, "pin", MODEL, "--fork", FORK, "--write"], check=True, stdout=subprocess.DEVNULL)

PROMPT = "Once upon a time"
CHAT = [{"role": "user", "content": "Tell me a story about a cat"}]


def view(st, body, chat):
    if st != 200 or not isinstance(body, dict):
        return st, body
    if chat:
        return st, body["choices"][0]["message"]["content"], body["choices"][0]["finish_reason"], body["usage"]
    g = body.get("generation_settings", {})
    return (st, body["content"], body["tokens_predicted"], body["tokens_evaluated"], body["stop_type"],
            g.get("seed"), g.get("temperature"), g.get("top_k"), g.get("n_predict"))


def both(flags, label, requests):
    common = ["-t", "2", "-c", "512", "-np", "1", *flags]
    L = oracle.Server([kit.tool("llama-server"), "-m", MODEL, "--host", "127.0.0.1", "--port", "{port}", "--jinja",
                       "--no-webui", *common], name="llama-flags")
    B = oracle.Server([BIN, "serve", "-m", MODEL, "--host", "127.0.0.1", "--port", "{port}", "--fork", FORK, *common],
                      name="bankml-flags")
    with L, B:
        for name, path, body in requests:
            chat = path.startswith("/v1/")
            want = view(*L.post(path, body), chat)
            got = view(*B.post(path, body), chat)
            S.equal(f"{label}: {name}", got, want)
        lp, bp = L.get("/props")[1], B.get("/props")[1]
        keys = ("seed", "temperature", "top_k", "top_p", "min_p", "n_predict")
        S.equal(f"{label}: /props default_generation_settings",
                {k: bp["default_generation_settings"]["params"].get(k) for k in keys},
                {k: lp["default_generation_settings"]["params"].get(k) for k in keys})


REQS = [
    ("/completion, no fields of its own", "/completion", {"prompt": PROMPT}),
    ("/completion, again (same seed)", "/completion", {"prompt": PROMPT + " there"}),
    ("/completion, n_predict 7 beats -n", "/completion", {"prompt": PROMPT, "n_predict": 7}),
    ("/completion, seed 7 and temperature 1.2 beat the flags", "/completion",
     {"prompt": PROMPT, "seed": 7, "temperature": 1.2}),
    ("chat, no fields of its own", "/v1/chat/completions", {"messages": CHAT}),
    ("chat, max_tokens 5", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 5}),
]
both(["--temp", "0", "-n", "12"], "greedy (--temp 0 -n 12)", REQS)
both(["--seed", "42", "--temp", "0.8", "--top-k", "20", "-n", "16"], "seeded (--seed 42 --temp 0.8 --top-k 20 -n 16)",
     REQS)
S.finish()
