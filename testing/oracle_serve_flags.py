"""oracle_serve_flags.py -- llama-server b11669 and `bankml serve` started with the same server-wide defaults
(--seed, --temp, -n, --top-k; -t 2 -c 512 -np 1) on stories260K answer alike: greedy (--temp 0) and seeded
(--seed 42 --temp 0.8 --top-k 20), requests without their own fields and with them (a request field beats the
flag), --samplers / --sampler-seq / --dry-sequence-breaker, /completion and /v1/chat/completions, content and token counts equal; /props shows the same defaults.
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
        keys = ("seed", "temperature", "top_k", "top_p", "min_p", "n_predict", "dry_multiplier", "dry_sequence_breakers",
                "samplers")
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
# the sampler chain and DRY's breakers as flags (lists: read as a request's `samplers` / `dry_sequence_breakers`)
SEQ_REQS = [r for r in REQS if r[0] != "/completion, seed 7 and temperature 1.2 beat the flags"]
# (the default order given explicitly: a custom order is refused at startup, checked below)
DEFAULT_SEQ = "penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature"
both(["--seed", "3", "--temp", "0.9", "--samplers", DEFAULT_SEQ, "--top-k", "5", "-n", "16"],
     "--samplers (the default order)", SEQ_REQS)
both(["--seed", "3", "--temp", "0.9", "--sampler-seq", "edskypmxt", "--top-p", "0.5", "-n", "16"],
     "--sampler-seq edskypmxt", SEQ_REQS)
# a repeated text across the default breakers ("\n", ":", "\"", "*"), so breakers or none change the answer
REP = "Tom said: \"Hi\".\nTom said: \"Hi\".\nTom said: \"Hi\".\nTom said: \"Hi\".\nTom said:"
DRY_REQS = [("/completion, a repeated text", "/completion", {"prompt": REP}),
            ("chat, a repeated text", "/v1/chat/completions", {"messages": [{"role": "user", "content": REP}]})]
for brk in ("none", "x"):
    both(["--temp", "0", "--dry-multiplier", "3", "--dry-allowed-length", "1", "--dry-sequence-breaker", brk,
          "-n", "24"], f"--dry-multiplier 3 --dry-sequence-breaker {brk}", DRY_REQS)
REFUSE = ("bankml serve: refused the server-wide sampling flags: samplers: a custom sampler order is not reproduced; "
          "bankML runs llama-server's default order (penalties, dry, top-n-σ, top-k, typical-p, top-p, min-p, xtc, "
          "temperature)\n")
for flag, val in (("--samplers", "top_k;temperature"), ("--sampler-seq", "kt"), ("--samplers", "top_k")):
    p = subprocess.run([BIN, "serve", "-m", MODEL, "--fork", FORK, "--port", "0", flag, val], capture_output=True,
                       text=True, timeout=30)
    S.equal(f"{flag} {val}: refused at startup", (p.returncode, p.stderr), (2, REFUSE))
S.finish()
