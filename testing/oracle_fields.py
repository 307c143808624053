"""oracle_fields.py -- the request fields bankml reproduces, against llama-server b11669 on the demo model
with the same flags (-t 2 -c 2048 -np 1 --jinja): logit_bias in every form llama-server reads ([[id, bias]],
[[id, false]], [[piece, bias]], an object of ids and pieces, malformed entries skipped, ids out of range
dropped, an empty key), ignore_eos (EOG tokens banned after logit_bias's entries), return_tokens (the final
answer's `tokens`, streamed and not), n_keep / n_discard, timings_per_token and return_progress without
stream, greedy and seeded, on /completion and /v1/chat/completions. Each answer is compared whole (status,
content, tokens, counts, stop type, generation_settings with every member), except what depends on the
clock: timings, created, id.

Then every value src/api/llama_fields.c lets through as "absent" for a refused field: llama-server's answer
with it must equal its answer without it (so letting it through is exact), and bankml's must equal both.

Standard library only. Ends with "N passed, N failed, N skipped"."""
import json, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

CTX = 2048
S = oracle.Suite("oracle_fields")
kit = oracle.kit_or_skip(S)
DEMO = os.path.join(oracle.ROOT, "models", "demo.gguf")
FORK = os.path.join(oracle.ROOT, "models.FORK.json")
if not os.path.exists(DEMO):
    p = subprocess.run(["make", "-s", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0 or not os.path.exists(DEMO):
        oracle.skip_all(f"no models/demo.gguf (make demo-model: {p.stdout.strip()[-200:]})", S)

# what depends on the clock, and bankml's own receipt (its members and its stream event; docs/modules/llama.md)
CLOCK = ("timings", "created", "id", "system_fingerprint", "bankml_receipt")
P = {"prompt": "Once upon", "n_predict": 8, "temperature": 0}
SEEDED = {"prompt": "Once upon a time", "n_predict": 12, "temperature": 0.9, "seed": 42}
M = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0}
EOS = 2969   # the demo vocabulary's EOS (an EOG token, as 2971)

CASES = [
    ("/completion", P),
    ("/completion", dict(P, logit_bias=[[2522, False]])),
    ("/completion", dict(P, logit_bias=[[" Wind", -100]])),
    ("/completion", dict(P, logit_bias=[["Wind", False], [" Wind", 1.5]])),
    ("/completion", dict(P, logit_bias={"2522": -5.5, "x": False, "": 1, " 7": 0.25})),
    ("/completion", dict(P, logit_bias=[[100, 50], [1.0, 3], [99999, 4], [-1, 2], [5, True], [6], 7, [2 ** 33 + 9, 1]])),
    ("/completion", dict(P, logit_bias={"99999": 3, "-2": 1, "5abc": 2, "100": 30})),
    ("/completion", dict(P, logit_bias="nonsense")),
    ("/completion", dict(P, logit_bias=[])),
    ("/completion", dict(P, logit_bias={str(EOS): 30})),
    ("/completion", dict(P, logit_bias={str(EOS): 30}, return_tokens=True)),
    ("/completion", dict(P, logit_bias={str(EOS): 30}, ignore_eos=True, return_tokens=True)),
    ("/completion", dict(P, ignore_eos=True)),
    ("/completion", dict(P, ignore_eos=False, logit_bias={})),
    ("/completion", dict(P, return_tokens=True, stop=["Wind Wind"])),
    ("/completion", dict(P, n_keep=-1, n_discard=7, timings_per_token=True, return_progress=True)),
    ("/completion", dict(P, n_keep=5, n_discard=0)),
    ("/completion", dict(SEEDED, logit_bias=[["Wind", False]], ignore_eos=True, return_tokens=True)),
    ("/completion", dict(SEEDED, logit_bias={str(EOS): 3.5}, return_tokens=True)),
    ("/completion", dict(SEEDED, logit_bias={str(EOS): 3.5}, ignore_eos=True, n_probs=3)),
    ("/completion", dict(SEEDED, logit_bias=[[1261, 4.25], [120, -2]], n_probs=2, post_sampling_probs=True)),
    ("/completion", dict(P, response_fields=["content", "generation_settings/n_predict", "prompt"])),
    ("/completion", dict(P, response_fields=["tokens_predicted", "nope", "timings/prompt_n", "content", "content",
                                             "generation_settings/", "", "/content", "stop_type",
                                             "generation_settings/samplers", "generation_settings/top_p"])),
    ("/completion", dict(SEEDED, n_probs=2, response_fields=["completion_probabilities", "stop_type"])),
    ("/completion", dict(P, response_fields=["nothing/here"])),
    ("/completion", dict(P, response_fields="content")),
    ("/completion", dict(P, response_fields=[1, "content"])),
    ("/completion", dict(P, response_fields={"content": 1})),
    ("/v1/chat/completions", dict(M, response_fields=["content"])),
    ("/v1/chat/completions", dict(M, logit_bias={"2522": False})),
    ("/v1/chat/completions", dict(M, logit_bias={str(EOS): 40})),
    ("/v1/chat/completions", dict(M, logit_bias={str(EOS): 40}, ignore_eos=True)),
    ("/v1/chat/completions", dict(M, temperature=0.8, seed=7, logit_bias=[["Fall", False]], ignore_eos=True,
                                  return_tokens=True, timings_per_token=True)),
]

STREAMS = [
    ("/completion", dict(P, stream=True, return_tokens=True, logit_bias=[[2522, False]])),
    ("/completion", dict(SEEDED, stream=True, ignore_eos=True, logit_bias={str(EOS): 3.5})),
    ("/v1/chat/completions", dict(M, stream=True, logit_bias={str(EOS): 40}, ignore_eos=True)),
    ("/completion", dict(P, stream=True, response_fields=["content", "stop_type", "tokens_predicted", "x"])),
]

# values of refused fields that b11669 treats as absent (llama_fields.c lets them through)
ABSENT = [
    ("/completion", P, {"verbose": False, "backend_sampling": False, "grammar_lazy": False, "echo": False,
                        "parse_tool_calls": False, "reasoning_control": False}),
    ("/completion", P, {"response_fields": [], "lora": [], "grammar_triggers": [], "preserved_tokens": [],
                        "message_delimiters": []}),
    ("/completion", P, {"n_indent": 0, "n_cache_reuse": 0, "t_max_predict_ms": 0, "id_slot": -1,
                        "reasoning_budget_tokens": -1}),
    ("/completion", P, {"t_max_predict_ms": -1}),
    ("/completion", P, {"grammar": "", "generation_prompt": "", "chat_format": 0, "reasoning_format": "deepseek"}),
    ("/completion", P, {"grammar": 5, "json_schema": None, "chat_parser": None}),
    ("/completion", P, {"tools": [{"type": "function"}], "response_format": {"type": "json_object"},
                        "add_generation_prompt": False, "chat_template_kwargs": {"a": 1}}),
    ("/v1/chat/completions", M, {"tools": [], "tool_choice": "none", "parallel_tool_calls": True}),
    ("/v1/chat/completions", M, {"tool_choice": "required"}),
    ("/v1/chat/completions", M, {"response_format": {"type": "text"}}),
    ("/v1/chat/completions", M, {"response_format": {}}),
    ("/v1/chat/completions", M, {"response_format": "json"}),
    ("/v1/chat/completions", M, {"add_generation_prompt": True, "continue_final_message": False,
                                 "chat_template_kwargs": {}}),
    ("/v1/chat/completions", M, {"thinking_budget_tokens": -1, "reasoning_budget_tokens": -1, "user": "x"}),
]


def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if k not in CLOCK}
    if isinstance(v, (list, tuple)):
        return [strip(x) for x in v if not (isinstance(x, dict) and "bankml_receipt" in x and "choices" not in x)]
    return v


def label(path, body, n=90):
    extra = {k: v for k, v in body.items() if k not in ("prompt", "messages", "temperature")}
    return f"{path} {json.dumps(extra)[:n]}"


def t_cases(L, B):
    for path, body in CASES:
        want = strip(L.post(path, body))
        got = strip(B.post(path, body))
        S.equal(label(path, body), got, want)
        rf = body.get("response_fields")
        selected = isinstance(rf, list) and rf and all(isinstance(x, str) for x in rf)
        if path == "/completion" and want[0] == 200 and not selected:
            # the table's fields are in the answer, so the case shows them
            gs = want[1].get("generation_settings", {})
            S.check(label(path, body, 50) + " : llama-server printed the fields",
                    "logit_bias" in gs and "n_keep" in gs and "ignore_eos" in gs)
    for path, body in STREAMS:
        want = L.stream(path, body)
        got = B.stream(path, body)
        S.equal("stream " + label(path, body), strip(got), strip(want))


def t_absent(L, B):
    for path, base, extra in ABSENT:
        body = dict(base, **extra)
        ref = strip(L.post(path, base))
        want = strip(L.post(path, body))
        S.equal("llama-server: absent " + label(path, extra), want, ref)
        S.equal("bankml: absent " + label(path, extra), strip(B.post(path, body)), want)


BIAS_FLAGS = ["-l", "403+5", "--logit-bias", " 13 - 2.5x", "-l", "99999+1", "-l", "-5-1", "-l", "20+1,30-1"]


def t_server_bias():
    """-l/--logit-bias: the server-wide biases, repeated, in order (ids outside the vocabulary kept, biasing
    nothing), the biases of every request without logit_bias; the request's field replaces them ([] clears);
    ignore_eos appends after them; and llama-server's "invalid input format" at start."""
    P = "Once upon a time"
    L, B = oracle.start_both(oracle.Server.llama(kit, DEMO, ctx=CTX, extra=BIAS_FLAGS, name="llama-bias"),
                             oracle.Server.bankml(DEMO, ctx=CTX, extra=["--fork", FORK, *BIAS_FLAGS],
                                                  name="bankml-bias"))
    try:
        cases = [("/completion", {"prompt": P, "n_predict": 6, "temperature": 0}),
                 ("/completion", {"prompt": P, "n_predict": 6, "temperature": 1, "seed": 4}),
                 ("/completion", {"prompt": P, "n_predict": 6, "temperature": 0, "logit_bias": None}),
                 ("/completion", {"prompt": P, "n_predict": 6, "temperature": 0, "logit_bias": []}),
                 ("/completion", {"prompt": P, "n_predict": 6, "temperature": 0, "logit_bias": [[20, 3.0]]}),
                 ("/completion", {"prompt": P, "n_predict": 6, "temperature": 0, "ignore_eos": True}),
                 ("/v1/completions", {"prompt": P, "max_tokens": 6, "temperature": 0}),
                 ("/v1/chat/completions", {"messages": [{"role": "user", "content": P}], "max_tokens": 6,
                                           "temperature": 0})]
        for path, body in cases:
            S.equal("server -l: " + label(path, body), strip(B.post(path, body)), strip(L.post(path, body)))
    finally:
        L.stop()
        B.stop()
    for bad in ("403+abc", "403*1", "403+", "x+1", "403+1e99"):
        lp = subprocess.run([kit.tool("llama-server"), "-m", DEMO, "--port", "0", "-l", bad], capture_output=True,
                            text=True, timeout=60)
        bp = subprocess.run([os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml"), "serve", DEMO,
                             "--fork", FORK, "--port", "0", "-l", bad], capture_output=True, text=True, timeout=60)
        words = 'error while handling argument "-l": invalid input format'
        S.check(f"-l {bad!r} refused at start", lp.returncode != 0 and bp.returncode != 0 and
                words in lp.stderr + lp.stdout and words in bp.stderr,
                f"llama {lp.returncode} / bankml {bp.returncode}: {bp.stderr[-200:]!r}")


def main():
    with oracle.Server.llama(kit, DEMO, ctx=CTX, name="llama-fields") as L, \
            oracle.Server.bankml(DEMO, ctx=CTX, extra=["--fork", FORK], name="bankml-fields") as B:
        S.run("reproduced fields", t_cases, L, B)
        S.run("absent values", t_absent, L, B)
    S.run("server-wide logit biases", t_server_bias)
    S.finish()


main()
