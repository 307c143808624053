"""oracle_json_mode.py -- JSON schemas and JSON mode through the grammar sampler, against llama-server b11669
side by side with the same flags (-t 2 -c 512 -np 1 --jinja), on stories260K and the random-weight qwen3-e128-f16:

  - /completion `json_schema`: a varied subset of testing/schemas/own.json (every ASUBSET-th case: types,
    objects, arrays, tuples, strings with lengths/formats/patterns, bounds, enum/const, anyOf/oneOf/allOf,
    $defs/$ref, and the converter's refusals), greedy with return_tokens, some seeded and streamed: the whole
    answer but the clock (content, token ids, counts, stop type, generation_settings.grammar = the converted
    text) or the 400 `Field 'json_schema': "json_schema": JSON schema conversion failed:\n...`;
  - the field's edges: null (no grammar), {} ({"type":"object"}), a non-object (refused), `grammar` present
    (json_schema never read, even when it is "" or not a string), with grammar_lazy; on /v1/completions and
    /infill too, streamed and not.

Answers are capped (n_predict) because random weights run a schema's answer to the limit.
ORACLE_JSON_MODELS=stories260K,... runs some models only. Standard library only. Ends with
"N passed, N failed, N skipped"."""
import json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

CTX = 512
S = oracle.Suite("oracle_json_mode")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
models_dir = oracle.ensure_models(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
HERE = os.path.dirname(os.path.abspath(__file__))

CLOCK = ("timings", "created", "id", "system_fingerprint", "bankml_receipt", "created_at", "completed_at", "item_id")


def own_schemas(step, offset=0):
    with open(os.path.join(HERE, "schemas", "own.json"), encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    out = []
    for c in cases[offset::step]:
        try:
            out.append((c["name"], json.loads(c["schema"])))
        except ValueError:
            continue
    return out


def strip(v):
    return oracle.strip_answer(v, CLOCK)


def start_pair(model, fork):
    return oracle.start_both(oracle.Server.llama(kit, model, ctx=CTX, name="llama-json"),
                             oracle.Server.bankml(model, ctx=CTX, extra=["--fork", fork], name="bankml-json"))


def same(L, B, label, path, body):
    if body.get("stream"):
        want, got = L.stream(path, body), B.stream(path, body)
    else:
        want, got = L.post(path, body), B.post(path, body)
    return S.equal(label, strip(got), strip(want))


def completion_schemas(L, B, tag, prompt, schemas, n, n_variants):
    for i, (name, sch) in enumerate(schemas):
        base = {"prompt": prompt, "n_predict": n, "json_schema": sch, "return_tokens": True}
        variants = [("greedy", dict(base, temperature=0)),
                    ("seed 7 stream", dict(base, temperature=1.0, seed=7, stream=True)),
                    ("seed 3", dict(base, temperature=0.9, seed=3))]
        for vname, body in variants[:n_variants if i % 3 == 0 else 1]:
            same(L, B, f"{tag} json_schema {name} {vname}", "/completion", body)


def completion_edges(L, B, tag, prompt):
    obj = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    edges = [{"json_schema": None}, {"json_schema": {}}, {"json_schema": {}, "stream": True},
             {"json_schema": 5}, {"json_schema": "x"}, {"json_schema": []}, {"json_schema": True},
             {"json_schema": {"type": "strin"}, "stream": True},
             {"json_schema": {"type": "strin"}, "grammar": ""}, {"json_schema": {"type": "strin"}, "grammar": 5},
             {"json_schema": {"type": "strin"}, "grammar": None},
             {"json_schema": obj, "grammar": 'root ::= "yes" | "no"'},
             {"json_schema": {"type": "strin"}, "grammar_lazy": "x"},
             {"json_schema": obj, "grammar_lazy": True},
             {"json_schema": obj, "grammar_lazy": True, "grammar_triggers": []},
             {"json_schema": obj, "n_probs": 2},
             {"json_schema": {"type": "string", "pattern": "^(a$"}},
             {"json_schema": {"type": "integer", "minimum": 3, "maximum": 41}, "stream": True}]
    for k, extra in enumerate(edges):
        body = dict({"prompt": prompt, "n_predict": 8, "temperature": 0.8, "seed": 5}, **extra)
        same(L, B, f"{tag} /completion #{k} {json.dumps(extra)[:80]}", "/completion", body)
    for stream in (False, True):
        sfx = " stream" if stream else ""
        for sch in (obj, {"type": "array", "items": {"type": "boolean"}, "maxItems": 3}, {"type": "strin"}):
            same(L, B, f"{tag} /v1/completions {json.dumps(sch)[:50]}{sfx}", "/v1/completions",
                 {"prompt": prompt, "max_tokens": 10, "json_schema": sch, "temperature": 0.9, "seed": 2,
                  "stream": stream})
    for sch in (obj, {"type": "strin"}):
        same(L, B, f"{tag} /infill {json.dumps(sch)[:50]}", "/infill",
             {"input_prefix": "a", "input_suffix": "b", "n_predict": 8, "json_schema": sch, "temperature": 0})


# Ollama v0.13.3's llm/server.go grammarJSON, the grammar its "format": "json" hands the runner (transcribed from
# its source as the fixture; src/sampling/json_schema.c holds bankml's own copy: a difference shows as answers
# that differ)
OLLAMA_JSON = (
    '\nroot   ::= object\n'
    'value  ::= object | array | string | number | ("true" | "false" | "null") ws\n'
    'object ::=\n'
    '  "{" ws (\n'
    '         string ":" ws value\n'
    '    ("," ws string ":" ws value)*\n'
    '  )? ws "}" \n'
    'array  ::=\n'
    '  "[" ws (\n'
    '            value\n'
    '    ("," ws value)*\n'
    '  )? ws "]" \n'
    'string ::=\n'
    '  "\\"" (\n'
    '    [^"\\\\\\x7F\\x00-\\x1F] |\n'
    '    "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F]) # escapes\n'
    '  )* "\\"" \n'
    'number ::= ("-"? ([0-9] | [1-9] [0-9]*)) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? \n'
    '# Optional space: by convention, applied in this grammar after literal chars when allowed\n'
    'ws ::= ([ \\t\\n] ws)?\n')


def chat_fields(L, B, tag):
    """What chat answers the same on both: response_format's unknown type (400), "text" and an empty type (no
    grammar), /v1/responses's text.format (never read by b11669)."""
    hi = [{"role": "user", "content": "hi"}]
    for k, rf in enumerate(({"type": "bogus"}, {"type": "json_objec", "schema": {}}, {"type": "text"},
                            {"type": ""}, {})):
        for stream in (False, True):
            same(L, B, f"{tag} chat response_format #{k} {json.dumps(rf)}{' stream' if stream else ''}",
                 "/v1/chat/completions", {"messages": hi, "max_tokens": 6, "temperature": 0, "response_format": rf,
                                          "stream": stream})
    for fmt in ({"type": "json_object"}, {"type": "json_schema", "name": "a", "schema": {"type": "object"}}):
        same(L, B, f"{tag} /v1/responses text.format {json.dumps(fmt)[:40]}", "/v1/responses",
             {"model": "x", "input": "hi", "max_output_tokens": 6, "temperature": 0, "text": {"format": fmt}})


def ollama_format(L, B, tag, name, n):
    """format "json" on /api/generate (raw) and /api/chat: the answer is what llama-server's /completion gives
    with Ollama's grammarJSON on the same prompt (the chat prompt from llama-server's /apply-template), and a
    finished one parses as JSON; Ollama's 500 for an invalid format; a schema Ollama crashes or hangs on refused."""
    opts = [("greedy", {"temperature": 0}, {"temperature": 0}),
            ("seed 6", {"temperature": 0.9, "seed": 6, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
                        "repeat_penalty": 1.0}, {"temperature": 0.9, "seed": 6})]
    prompts = ["Once", "Once upon a time", "{\"name\":", "The list is"]
    for p in prompts:
        for oname, o, lo in opts:
            for route in ("/api/generate", "/api/chat"):
                if route == "/api/generate":
                    body = {"model": name, "prompt": p, "raw": True, "stream": False, "format": "json",
                            "options": dict(o, num_predict=n)}
                    lp = p
                else:
                    msgs = [{"role": "user", "content": p}]
                    body = {"model": name, "messages": msgs, "stream": False, "format": "json",
                            "options": dict(o, num_predict=n)}
                    st, t = L.post("/apply-template", {"messages": msgs})
                    lp = t["prompt"]
                st, want = L.post("/completion", dict(lo, prompt=lp, n_predict=n, grammar=OLLAMA_JSON))
                bst, got = B.post(route, body)
                text = got.get("response") if route == "/api/generate" else (got.get("message") or {}).get("content")
                label = f"{tag} ollama {route} format json {oname} {p[:12]!r}"
                S.equal(label, [bst, text, got.get("eval_count"), got.get("done_reason")],
                        [200, want["content"], want["tokens_predicted"],
                         "stop" if want["stop_type"] == "eos" else "length"])
                if got.get("done_reason") == "stop":
                    try:
                        json.loads(text)
                        S.ok(label + " parses")
                    except ValueError as e:
                        S.fail(label + " parses", f"{e}: {text!r}")
    hi = [{"role": "user", "content": "hi"}]
    bad = [("xml", 500, {"error": 'invalid format: "\\"xml\\""; expected "json" or a valid JSON Schema object'}),
           (5, 500, {"error": 'invalid format: "5"; expected "json" or a valid JSON Schema object'}),
           (False, 500, {"error": 'invalid format: "false"; expected "json" or a valid JSON Schema object'})]
    for fmt, st, want in bad:
        for stream in (False, True):
            got = B.post("/api/chat", {"model": name, "messages": hi, "format": fmt, "stream": stream})
            S.equal(f"{tag} ollama format {json.dumps(fmt)}{' stream' if stream else ''}", list(got), [st, want])
    # a schema constrains (testing/oracle_ollama_format.py); one Ollama v0.13.3 crashes or hangs on is refused
    for fmt in ({"type": "string", "pattern": "^*a$"}, {"type": "string", "pattern": "^a]$"}):
        st, j = B.post("/api/generate", {"model": name, "prompt": "x", "format": fmt, "stream": False})
        S.check(f"{tag} ollama format schema {json.dumps(fmt)} refused", st == 400 and
                j.get("error", "").startswith("format: format with a JSON schema: Ollama v0.13.3 "),
                f"{st} {j}")
    for fmt in (None, ""):
        st, j = B.post("/api/generate", {"model": name, "prompt": "Once", "raw": True, "format": fmt,
                                         "stream": False, "options": {"temperature": 0, "num_predict": 4}})
        st2, want = L.post("/completion", {"prompt": "Once", "n_predict": 4, "temperature": 0})
        S.equal(f"{tag} ollama format {json.dumps(fmt)} is none", [st, j.get("response")], [200, want["content"]])


def run_model(tag, model, fork, plan):
    step, n, n_variants = plan
    prompt = "Once upon a time" if "stories" in tag else "The answer is"
    L, B = start_pair(model, fork)
    try:
        completion_schemas(L, B, tag, prompt, own_schemas(step), n, n_variants)
        completion_edges(L, B, tag, prompt)
        chat_fields(L, B, tag)
        ollama_format(L, B, tag, "stories260k" if "stories" in tag else tag, n if "stories" in tag else 6)
    finally:
        L.stop()
        B.stop()


def main():
    stories = os.path.join(shared, "models", "stories260K.gguf")
    # stories260K (512 tokens) takes every 4th schema of own.json; qwen3's 151,936-token vocabulary costs
    # llama-server 0.2-0.3 s per constrained token on 2 shared cores, so it takes every 12th, 6 tokens
    models = [("stories260K", stories, (4, 24, 3)),
              ("qwen3-e128-f16", os.path.join(models_dir, "qwen3-e128-f16.gguf"), (12, 6, 2))]
    only = [x for x in os.environ.get("ORACLE_JSON_MODELS", "").split(",") if x]
    if only:
        models = [x for x in models if x[0] in only]
    tmp = tempfile.mkdtemp(prefix="oracle-json-")
    fork = os.path.join(tmp, "json.FORK.json")
    for _, m, _ in models:
        p = subprocess.run([BIN, "pin", m, "--fork", fork, "--write"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            oracle.skip_all(f"bankml pin --write {m} failed: {p.stdout.strip()}", S)
    for tag, m, plan in models:
        S.run(f"{tag} (harness)", run_model, tag, m, fork, plan)
    S.finish()


main()
