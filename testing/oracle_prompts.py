"""oracle_prompts.py -- every shape of /completion's `prompt` against llama-server b11669 (stories260K,
-t 2 -c 512 -np 1 --jinja --metrics): a string, ids, strings and ids mixed (BOS only before a first string),
{"prompt_string": ...}, multimodal_data refused, [] refused, an array without integers as several prompts
(tokenize_input_prompts), each malformed shape with its words; several prompts run one task after another:
not streamed an array of answers with their index (response_fields applied to each), streamed each task's
events in turn with "data: null" between them, and the same on /v1/completions (one choice per prompt, the first
task's usage); GET /slots equal after each request (task ids included). With -np 2 bankml refuses several
prompts (their tasks would share batches), and several prompts of which one exceeds the context or has invalid tokens
(llama-server's answer is then a race between its reader's cancel and its loop).

The bankml binary is BANKML_BIN or ./bankml. Standard library only."""
import os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

S = oracle.Suite("oracle_prompts")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(shared, "models", "stories260K.gguf")
tmp = tempfile.mkdtemp(prefix="oracle-prompts-")
FORK = os.path.join(tmp, "test.FORK.json")
p = subprocess.run([BIN, "pin", MODEL, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   text=True)
if p.returncode != 0:
    oracle.skip_all(f"bankml pin --write failed: {p.stdout.strip()}", S)

CLOCK = ("prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_ms", "predicted_per_token_ms",
         "predicted_per_second", "t_prompt_processing", "t_token_generation", "created", "id", "time_ms",
         "system_fingerprint")
X = "x " * 600

SHAPES = ["Once upon", "", [""], ["Once"], [1, 2, 3], [[]], [[1, 2, 3], [4, 5]], [[1, 2], "Once"], ["a", 5, "b"],
          [5, "a", 2.5, True], {"prompt_string": "Once upon"}, {"prompt_string": [7, " upon"]},
          {"prompt_string": 5}, {"prompt_string": "Once", "multimodal_data": ["aGVsbG8="]},
          [{"prompt_string": "Once"}, "The"], [], {"x": 1}, [1.5, "a"], [True, "a"], ["a", 2.0], [1, 99999],
          [1, 99999, 2.5], ["a", None, 3], None, 5, ["Once upon", "The dog"], ["Once upon", "The dog", "A cat"],
          ["Once upon", [], "The dog"], [[], "The dog"], ["Once upon", 2.5]]
# several prompts, one failing: llama-server runs those before it, answers the error and cancels the rest while its
# loop may already have launched the next (timing decides what its slot holds): bankml refuses them
RACY = [(["Once upon", [1, 99999]], "prompt 2 of 2 has invalid tokens"), (["Once upon", X], "prompt 2 of 2 exceeds the context"),
        ([X, "Once"], "prompt 1 of 2 exceeds the context"),
        (["Once upon", "The dog", X, "A cat"], "prompt 3 of 4 exceeds the context")]


def untimed(v):
    if isinstance(v, dict):
        return {k: untimed(x) for k, x in v.items() if k not in CLOCK}
    if isinstance(v, list):
        return [untimed(x) for x in v]
    return v


def slots(L, B, label):
    rl, rb = L.get("/slots"), B.get("/slots")
    S.equal(f"{label}: GET /slots", untimed(list(rb)), untimed(list(rl)))


def t_shapes(L, B):
    for i, pr in enumerate(SHAPES):
        for extra in ({}, {"stream": True}):
            body = dict({"prompt": pr, "n_predict": 3, "temperature": 0}, **extra)
            label = f"prompt {str(pr)[:50]}{' streamed' if extra else ''}"
            if extra:
                rl, rb = L.stream("/completion", body), B.stream("/completion", body)
            else:
                rl, rb = L.post("/completion", body), B.post("/completion", body)
            S.equal(label, untimed(list(rb)), untimed(list(rl)))
            slots(L, B, label)


def t_fields(L, B):
    cases = [{"prompt": ["Once upon", "The dog"], "n_predict": 3, "temperature": 0,
              "response_fields": ["content", "index", "timings/prompt_n"]},
             {"prompt": ["Once upon", "The dog"], "n_predict": 4, "temperature": 0, "stop": [" a"]},
             {"prompt": ["Once upon", "The dog"], "n_predict": 0, "temperature": 0},
             {"prompt": ["Once upon", "The dog"], "n_predict": 4, "seed": 5, "temperature": 0.9, "n_probs": 2},
             {"prompt": ["Once upon", "The dog"], "n_predict": 3, "temperature": 0, "return_progress": True},
             {"prompt": ["Once upon", "The dog"], "n_predict": 3, "temperature": 0, "cache_prompt": False},
             {"prompt": ["Once upon", "The dog"], "n_predict": 3, "temperature": 0, "top_k": "x"}]
    for body in cases:
        label = f"several prompts {str({k: v for k, v in body.items() if k != 'prompt'})[:70]}"
        S.equal(label, untimed(list(B.post("/completion", body))), untimed(list(L.post("/completion", body))))
        slots(L, B, label)
        sb = dict(body, stream=True)
        S.equal(label + " streamed", untimed(list(B.stream("/completion", sb))),
                untimed(list(L.stream("/completion", sb))))
        slots(L, B, label + " streamed")


def t_v1(L, B):
    """/v1/completions reads the same prompts: several are one choice each (their index), not streamed with the
    first task's usage and timings, streamed each task's chunks with "data: null" between and one [DONE]."""
    cases = [{"prompt": ["Once upon", "The dog ran far away into the"], "max_tokens": 3, "temperature": 0},
             {"prompt": ["Once upon", "The dog", "A cat"], "max_tokens": 4, "temperature": 0.9, "seed": 5,
              "logprobs": 2},
             {"prompt": [[1, 403], "The dog"], "max_tokens": 3, "temperature": 0, "stop": [" a"]},
             {"prompt": ["Once upon"], "max_tokens": 3, "temperature": 0},
             {"prompt": ["Once upon", "The dog"], "max_tokens": 3, "temperature": 0, "return_progress": True},
             {"prompt": ["Once upon", "The dog"], "max_tokens": 0, "temperature": 0}]
    for body in cases:
        label = f"/v1/completions {str(body['prompt'])[:40]} {str({k: v for k, v in body.items() if k != 'prompt'})[:50]}"
        S.equal(label, untimed(list(B.post("/v1/completions", body))), untimed(list(L.post("/v1/completions", body))))
        slots(L, B, label)
        sb = dict(body, stream=True)
        S.equal(label + " streamed", untimed(list(B.stream("/v1/completions", sb))),
                untimed(list(L.stream("/v1/completions", sb))))
        slots(L, B, label + " streamed")
    st, js = B.post("/v1/completions", {"prompt": ["Once upon", [1, 99999]], "max_tokens": 3})
    S.equal("/v1/completions: one prompt failing refused as on /completion",
            [st, js.get("error", {}).get("message", "").split(":")[0]], [400, "prompt 2 of 2 has invalid tokens"])


def t_racy(L, B):
    for pr, words in RACY:
        for extra in ({}, {"stream": True}):
            body = dict({"prompt": pr, "n_predict": 3, "temperature": 0}, **extra)
            st, js = B.post("/completion", body)
            S.equal(f"refused: prompt {str(pr)[:40]}{' streamed' if extra else ''}",
                    [st, js.get("error", {}).get("message", "").split(":")[0]], [400, words])
            want = L.stream("/completion", body) if extra else L.post("/completion", body)
            S.check(f"llama-server answers it with the task's error: prompt {str(pr)[:40]}", "error" in str(want))


try:
    flags = ["--metrics"]
    with oracle.Server.llama(kit, MODEL, ctx=512, extra=flags, name="llama-prompts") as L, \
            oracle.Server.bankml(MODEL, ctx=512, extra=["--fork", FORK] + flags, name="bankml-prompts") as B:
        S.run("prompt shapes", t_shapes, L, B)
        S.run("several prompts with other fields", t_fields, L, B)
        S.run("several prompts on /v1/completions", t_v1, L, B)
        S.run("several prompts, one failing", t_racy, L, B)   # last: llama-server's slot is then timing's
    with oracle.Server.bankml(MODEL, ctx=512, extra=["--fork", FORK, "-np", "2"], name="bankml-prompts-np2") as B:
        st, js = B.post("/completion", {"prompt": ["Once upon", "The dog"], "n_predict": 2})
        S.equal("-np 2: several prompts refused with the reason", [st, js.get("error", {}).get("message", "")[:58]],
                [400, "several prompts with more than one slot are not reproduced"])
        st, js = B.post("/v1/completions", {"prompt": ["Once upon", "The dog"], "max_tokens": 2})
        S.equal("-np 2: several prompts on /v1/completions refused too",
                [st, js.get("error", {}).get("message", "")[:58]],
                [400, "several prompts with more than one slot are not reproduced"])
        st, js = B.post("/completion", {"prompt": ["Once upon"], "n_predict": 2, "temperature": 0})
        S.equal("-np 2: one prompt in a list served", [st, js.get("content") if isinstance(js, dict) else js],
                [200, " a time"])
except oracle.ServerError as e:
    S.fail("servers", str(e))
S.finish()
