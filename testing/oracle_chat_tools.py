"""oracle_chat_tools.py -- the chat-format layer on /v1/chat/completions against llama-server b11669, side by side
with the same flags (-t 2 -c 1024 -np 1 --jinja --chat-template-file T), on the random-weight untied models of
testing/make_chat_models.py (Qwen's and Llama 3's real vocabularies with <think>, <tool_call>, <|python_tag|> as
single tokens), one server pair per template:

  Qwen3 (reasoning, hermes-style <tool_call>), Hermes 2 Pro, Llama 3.1 / 3.2 / 3.3 (JSON calls), Mistral Nemo
  ([TOOL_CALLS] with call ids), DeepSeek R1 distill Qwen, Granite 4, Functionary v3.1 -- the templates that take
  b11669's differential autoparser -- Qwen3-Coder and GPT-OSS (specialised parsers, chat_gen_specialized; GPT-OSS
  on chat-harmony, Qwen's vocabulary with the harmony markers as control tokens, its prompt rewritten as
  common_chat_params_init_gpt_oss does and /apply-template with tools compared), and, for the refusals,
  muse-glimmer (a specialised parser whose prompt side is not reproduced) and Gemma 2 (a template that cannot
  call tools).

Each case is asked greedy or seeded, not streamed and streamed: tools with tool_choice auto / required / none /
a named function (b11669 reads it as auto), parallel_tool_calls, logit_bias steering the random model into a
call or a reasoning block, reasoning_format none, enable_thinking false, a tool-call history with tool results,
response_format json_object / json_schema and the json_schema field. The whole answer is compared (content,
reasoning_content, tool_calls, finish_reason, usage; every chunk's delta when streamed) except the clock and
the ids llama-server draws at random (32 letters and digits: both sides must have that shape); errors with their
status and words. A summary checks that the cases reached tool calls, reasoning and JSON (a suite that never
called a tool would prove nothing). ORACLE_CHAT_TOOLS_ONLY=qwen3,refusals,no-jinja runs those parts,
ORACLE_CHAT_TOOLS_CASES=budget,parallel the cases whose label holds a word. Standard library only. Ends with "N passed, N failed, N skipped"."""
import json, os, re, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

S = oracle.Suite("oracle_chat_tools")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODELS = os.path.join(oracle.ROOT, "build", "chat-models")
TPL = os.path.join(shared, "templates", "llama.cpp")
CHAT = "/v1/chat/completions"
CLOCK = ("timings", "created", "system_fingerprint", "bankml_receipt", "model")
RANDOM_ID = re.compile(r"^[0-9A-Za-z]{32}$")

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                            "parameters": {"type": "object", "properties": {
                                                "city": {"type": "string"}, "days": {"type": "integer"}},
                                                "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "description": "Search the web",
                                           "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
                                                          "required": ["q"]}}}
# tools whose arguments are no free strings: the random model finishes its calls
UNIT = {"type": "function", "function": {"name": "set_unit", "description": "Set the unit",
                                         "parameters": {"type": "object", "properties": {
                                             "unit": {"type": "string", "enum": ["c", "f"]},
                                             "days": {"type": "integer"}}, "required": ["unit"]}}}
PING = {"type": "function", "function": {"name": "ping", "description": "Ping",
                                         "parameters": {"type": "object", "properties": {}}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
# a past turn with reasoning beside its call (gpt-oss: the reasoning rendered as analysis, the content dropped)
HISTORY_R = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "Let me check.", "reasoning_content": "The user wants the weather.",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21}"},
    {"role": "assistant", "content": "It is 21 degrees.", "reasoning_content": "Report it."},
    {"role": "user", "content": "And tomorrow?"},
]
HISTORY = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "{\"temp\": 21}"},
]
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}}, "required": ["ok"]}


def mk(*parts, **kw):
    out = {}
    for d in parts:
        out.update(d)
    out.update(kw)
    return out


CORE = ("tools required steered", "parallel calls", "json_schema", "reasoning steered", "reasoning with tools")


def cases(start, think=None, full=True):
    """(label, body) of one template: start is the text that opens a call (steered with logit_bias), think the
    reasoning tag when the template has one; not full: the CORE cases only."""
    g = {"temperature": 0}
    seeded = {"temperature": 0.8, "seed": 7, "top_k": 40}
    go = {"logit_bias": [[start, 15]]}
    out = [
        ("plain", dict(g, messages=ASK, max_tokens=12)),
        ("tools auto", dict(g, messages=ASK, tools=[WEATHER, SEARCH], max_tokens=24)),
        ("tools auto steered", mk(g, go, messages=ASK, tools=[UNIT, PING], max_tokens=32)),
        ("tools required steered", mk(g, go, messages=ASK, tools=[UNIT, PING], tool_choice="required",
                                        max_tokens=64)),
        ("tools required seeded", mk(seeded, go, messages=ASK, tools=[UNIT, PING], tool_choice="required",
                                       max_tokens=32)),
        ("tools required free strings", mk(g, go, messages=ASK, tools=[WEATHER], tool_choice="required",
                                             max_tokens=32)),
        ("parallel calls", mk(g, go, messages=ASK, tools=[UNIT, PING], tool_choice="required",
                                parallel_tool_calls=True, max_tokens=80)),
        ("tool_choice none", mk(g, go, messages=ASK, tools=[UNIT], tool_choice="none", max_tokens=16)),
        ("named tool_choice", mk(g, go, messages=ASK, tools=[UNIT, PING], max_tokens=32,
                                   tool_choice={"type": "function", "function": {"name": "ping"}})),
        ("history with a tool result", mk(g, go, messages=HISTORY, tools=[WEATHER, UNIT], max_tokens=32)),
        ("json_object", dict(g, messages=ASK, response_format={"type": "json_object"}, max_tokens=24)),
        ("json_schema", dict(g, messages=ASK, max_tokens=32,
                             response_format={"type": "json_schema", "json_schema": {"schema": SCHEMA}})),
        ("json_schema field", dict(seeded, messages=ASK, json_schema=SCHEMA, max_tokens=32)),
    ]
    if think:
        tb = {"logit_bias": [[think, 12]]}
        out += [
            ("reasoning steered", mk(g, tb, messages=ASK, max_tokens=24)),
            ("reasoning with tools", mk(g, logit_bias=[[think, 12], [start, 8]], messages=ASK, tools=[UNIT, PING],
                                          tool_choice="required", max_tokens=32)),
            ("reasoning_format none", mk(g, tb, messages=ASK, reasoning_format="none", max_tokens=24)),
            ("enable_thinking false", mk(g, tb, messages=ASK, chat_template_kwargs={"enable_thinking": False},
                                           max_tokens=24)),
            ("reasoning budget", mk(g, tb, messages=ASK, reasoning_budget_tokens=4, max_tokens=24)),
            ("reasoning budget message", mk(g, tb, messages=ASK, thinking_budget_tokens=2,
                                            reasoning_budget_message="Enough.", max_tokens=24)),
            ("history with reasoning and a tool result", mk(g, tb, messages=HISTORY_R, tools=[WEATHER, UNIT],
                                                            max_tokens=32)),
            ("reasoning budget with tools", mk(g, logit_bias=[[think, 12], [start, 8]], messages=ASK,
                                               tools=[UNIT, PING], reasoning_budget_tokens=3, max_tokens=32)),
        ]
    return out if full else [c for c in out if c[0] in CORE]


def harmony_cases():
    """GPT-OSS's cases: a random model writes no harmony by itself, so the steering follows its markers (after
    " to=functions.NAME<|channel|>commentary", <|message|> opens the arguments; <|end|> closes an analysis)."""
    g = {"temperature": 0}
    call = {"logit_bias": [["<|message|>", 15], ["<|end|>", 16]]}
    auto = {"logit_bias": [[" to", 15], ["<|message|>", 12]]}
    return [
        ("plain", dict(g, messages=ASK, max_tokens=8)),
        ("tools required steered", mk(g, call, messages=ASK, tools=[UNIT, PING], tool_choice="required",
                                        max_tokens=40)),
        ("tools auto steered", mk(g, auto, messages=ASK, tools=[UNIT, PING], max_tokens=40)),
        ("history with a tool result", mk(g, auto, messages=HISTORY, tools=[UNIT, PING], max_tokens=40)),
        ("history with reasoning and a tool result", mk(g, call, messages=HISTORY_R, tools=[UNIT, PING],
                                                        tool_choice="required", max_tokens=40)),
        ("reasoning with tools", mk(g, messages=ASK, tools=[UNIT, PING], tool_choice="required",
                                    logit_bias=[["<|end|>", 8]], max_tokens=12)),
        ("json_schema", dict(g, messages=ASK, max_tokens=12,
                             response_format={"type": "json_schema", "json_schema": {"schema": SCHEMA}})),
    ]


# (name, model, template file, call start, reasoning tag); the first two get every case, the others CORE
TEMPLATES = [
    ("qwen3", "chat-qwen", "Qwen-Qwen3-0.6B.jinja", "<tool_call>", "<think>"),
    ("llama-3.1", "chat-llama", "meta-llama-Llama-3.1-8B-Instruct.jinja", "{", None),
    ("hermes-2-pro", "chat-qwen", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "<tool_call>", None),
    ("deepseek-r1-qwen", "chat-qwen", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "<｜tool▁calls▁begin｜>",
     "<think>"),
    ("granite-4", "chat-qwen", "ibm-granite-granite-4.0.jinja", "<tool_call>", None),
    ("llama-3.2", "chat-llama", "meta-llama-Llama-3.2-3B-Instruct.jinja", "{", None),
    ("llama-3.3", "chat-llama", "meta-llama-Llama-3.3-70B-Instruct.jinja", "{", None),
    ("mistral-nemo", "chat-llama", "mistralai-Mistral-Nemo-Instruct-2407.jinja", "[TOOL_CALLS]", None),
    ("functionary-3.1", "chat-llama", "meetkai-functionary-medium-v3.1.jinja", "<function=", None),
    # a specialised parser (chat_gen_specialized): Qwen3-Coder's XML-style calls
    ("qwen3-coder", "chat-qwen", "Qwen3-Coder.jinja", "<tool_call>", None),
    # GPT-OSS's harmony (gpt_oss: reasoning_content rendered as "thinking", content dropped beside tool calls),
    # on Qwen's vocabulary with the harmony markers as control tokens (make_chat_models.py's chat-harmony)
    ("gpt-oss", "chat-harmony", "openai-gpt-oss-120b.jinja", " to", "<|channel|>"),
    # Ministral 3 (ministral_3: reasoning_content and content as thinking / text blocks), on Llama 3's vocabulary
    # with Mistral's bracket markers as control tokens (chat-mistral)
    ("ministral-3", "chat-mistral", "mistralai-Ministral-3-14B-Reasoning-2512.jinja", "[TOOL_CALLS]", "[THINK]"),
]
# the specialised templates whose prompt side is rewritten: /apply-template with tools compared too
SPEC_FULL = ("gpt-oss", "ministral-3")
# and, beside CORE, these cases (auto calls, the histories)
SPEC_CASES = ("tools auto steered", "history with a tool result", "history with reasoning and a tool result")

stats = {"tool_calls": 0, "finish tool_calls": 0, "reasoning": 0, "json": 0, "errors": 0, "cases": 0}


def norm(v, ids):
    """The answer without the clock, llama-server's random ids replaced by their shape (collected in ids)."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k in CLOCK:
                continue
            if k == "id" and isinstance(x, str):
                ids.append(x)
                x = "<random id>" if RANDOM_ID.match(x) or x.startswith("chatcmpl-") else x
            out[k] = norm(x, ids)
        return out
    if isinstance(v, list):
        return [norm(x, ids) for x in v if not (isinstance(x, dict) and "bankml_receipt" in x and "choices" not in x)]
    return v


def count(ans):
    """What a non-streamed answer reached."""
    if not isinstance(ans, dict) or "choices" not in ans:
        stats["errors"] += 1
        return
    ch = ans["choices"][0]
    msg = ch.get("message", {})
    stats["tool_calls"] += bool(msg.get("tool_calls"))
    stats["finish tool_calls"] += ch.get("finish_reason") == "tool_calls"
    stats["reasoning"] += bool(msg.get("reasoning_content"))
    c = msg.get("content") or ""
    stats["json"] += c.startswith("{") or c.startswith("```json")


def compare(name, L, B, label, body):
    stats["cases"] += 1
    st_l, a_l = L.post(CHAT, body)
    st_b, a_b = B.post(CHAT, body)
    ids_l, ids_b = [], []
    S.equal(f"{name} {label}", [st_b, norm(a_b, ids_b)], [st_l, norm(a_l, ids_l)])
    if st_l == 200:
        count(a_l)
    body = dict(body, stream=True, stream_options={"include_usage": True})
    st_l, e_l = L.stream(CHAT, body)
    st_b, e_b = B.stream(CHAT, body)
    sl, sb = [], []
    S.equal(f"{name} {label} streamed", [st_b, norm(e_b, sb)], [st_l, norm(e_l, sl)])
    # the ids llama-server draws: bankml's have their shape (32 letters and digits after the chat's prefix)
    shape = lambda ids: [("chatcmpl" if i.startswith("chatcmpl-") else "random" if RANDOM_ID.match(i) else i)
                         for i in ids]
    if st_l == 200 and st_b == 200 and (len(ids_l) > 1 or len(sl) > 1):
        S.equal(f"{name} {label} ids have llama-server's shape", shape(ids_b + sb), shape(ids_l + sl))


def models():
    p = subprocess.run([kit.tool("gguf-py"), os.path.join(oracle.HERE, "make_chat_models.py"), MODELS],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        oracle.skip_all(f"make_chat_models.py failed: {p.stdout[-500:]}", S)
    paths = {n: os.path.join(MODELS, n + ".gguf") for n in ("chat-qwen", "chat-llama", "chat-harmony",
                                                               "chat-mistral")}
    paths["stories"] = os.path.join(shared, "models", "stories260K.gguf")
    return paths, oracle.pinned_fork(list(paths.values()), prefix="oracle-chat-tools-")


def pair(model, tpl, fork, extra=()):
    t = ["--chat-template-file", tpl] if tpl else []
    L = oracle.Server.llama(kit, model, ctx=1024, extra=t + list(extra))
    B = oracle.Server.bankml(model, ctx=1024, extra=["--fork", fork] + t + list(extra))
    return oracle.start_both(L, B)


def t_template(paths, fork, name, model, tpl, start, think, full):
    L, B = pair(paths[model], os.path.join(TPL, tpl), fork)
    want = os.environ.get("ORACLE_CHAT_TOOLS_CASES")
    try:
        todo = harmony_cases() if name == "gpt-oss" else cases(start, think, True)
        if name != "gpt-oss" and not full:
            todo = [c for c in todo if c[0] in CORE or (name in SPEC_FULL and c[0] in SPEC_CASES)]
        for label, body in todo:
            if want and not any(w in label for w in want.split(",")):
                continue
            compare(name, L, B, label, body)
        if name in SPEC_FULL and not want:
            # /apply-template: the prompt the rewritten messages render, with tools
            for label, msgs in (("history", HISTORY), ("reasoning history", HISTORY_R), ("ask", ASK)):
                body = {"messages": msgs, "tools": [WEATHER, UNIT]}
                S.equal(f"{name} /apply-template {label} with tools", B.post("/apply-template", body),
                        L.post("/apply-template", body))
    finally:
        L.stop()
        B.stop()


def t_refusals(paths, fork):
    # muse-glimmer takes a specialised parser whose prompt side (its own generation prompt) bankml does not
    # reproduce yet: refused when the request needs it, the rest answered
    L, B = pair(paths["chat-qwen"], os.path.join(TPL, "muse-glimmer.jinja"), fork)
    try:
        st, a = B.post(CHAT, {"messages": ASK, "tools": [PING], "max_tokens": 4})
        S.equal("muse-glimmer tools refused with the reason", [st, a.get("error", {}).get("message", "")[:85]],
                [400, 'this template takes b11669\'s specialised chat parser "muse_glimmer" (common/parsers/)'])
        st, _ = B.get("/health")
        S.equal("muse-glimmer still serving", st, 200)
    finally:
        L.stop()
        B.stop()
    # Gemma 2 cannot call tools; a bad schema; reasoning_format's errors
    L, B = pair(paths["chat-llama"], os.path.join(TPL, "google-gemma-2-2b-it.jinja"), fork)
    try:
        g = {"messages": ASK, "temperature": 0}
        for label, body in [
            ("gemma-2 tools", dict(g, tools=[UNIT], tool_choice="required", max_tokens=12)),
            ("bad schema", dict(g, response_format={"type": "json_schema", "json_schema": {"schema": {"type": "foo"}}},
                                max_tokens=4)),
            ("bad schema field", dict(g, json_schema={"type": "object", "properties": {"a": {"type": 3}}},
                                      max_tokens=4)),
            ("reasoning_format bogus", dict(g, reasoning_format="bogus", max_tokens=4)),
            ("reasoning_format number", dict(g, reasoning_format=3, max_tokens=4)),
            ("grammar with tools", dict(g, tools=[UNIT], grammar="root ::= \"a\"", max_tokens=4)),
            ("grammar and json_schema", dict(g, json_schema={"type": "object"}, grammar="root ::= \"a\"",
                                             max_tokens=4)),
        ]:
            compare("gemma-2", L, B, label, body)
    finally:
        L.stop()
        B.stop()


def t_no_jinja(paths, fork):
    """--no-jinja: the chat's schema through json_schema_to_grammar (common_chat_templates_apply_legacy), its
    refusals in llama-server's words; the budget's fields read as /completion reads them."""
    L = oracle.Server.llama(kit, paths["stories"], ctx=512, extra=["--no-jinja"])
    B = oracle.Server.bankml(paths["stories"], ctx=512, extra=["--fork", fork, "--no-jinja"])
    oracle.start_both(L, B)
    try:
        g = {"messages": [{"role": "user", "content": "hi"}], "temperature": 0, "max_tokens": 10}
        for label, body in [
            ("json_object", dict(g, response_format={"type": "json_object"})),
            ("json_schema const", dict(g, response_format={"type": "json_schema",
                                                           "json_schema": {"schema": {"const": "foooooo"}}})),
            ("json_schema field", dict(g, json_schema={"type": "integer"})),
            ("schema not an object", dict(g, response_format={"type": "json_object", "schema": 123})),
            ("schema type number", dict(g, response_format={"type": "json_object", "schema": {"type": 123}})),
            ("schema type unknown", dict(g, json_schema={"type": "hiccup"})),
            ("budget fields as /completion", dict(g, reasoning_budget_tokens=2, reasoning_budget_start_tag=" the",
                                                  reasoning_budget_end_tags=["."])),
        ]:
            compare("no-jinja", L, B, label, body)
    finally:
        L.stop()
        B.stop()


def main():
    paths, fork = models()
    # ORACLE_CHAT_TOOLS_ONLY=qwen3,refusals,no-jinja runs those parts; ORACLE_CHAT_TOOLS_CASES=budget,parallel
    # the cases whose label holds one of the words
    only = [w for w in os.environ.get("ORACLE_CHAT_TOOLS_ONLY", "").split(",") if w]
    pick = lambda name: not only or any(w == name or (w not in ("refusals", "no-jinja") and w in name) for w in only)
    for i, (name, model, tpl, start, think) in enumerate(TEMPLATES):
        if pick(name):
            S.run(f"{name}: the pair ran", t_template, paths, fork, name, model, tpl, start, think, i < 2)
    if pick("refusals"):
        S.run("refusals: the pairs ran", t_refusals, paths, fork)
    if pick("no-jinja"):
        S.run("no-jinja: the pair ran", t_no_jinja, paths, fork)
    print("reached:", json.dumps(stats))
    if not only and not os.environ.get("ORACLE_CHAT_TOOLS_CASES"):
        S.check("the cases reached tool calls", stats["tool_calls"] >= 4, json.dumps(stats))
        S.check("the cases reached finish_reason tool_calls", stats["finish tool_calls"] >= 1, json.dumps(stats))
        S.check("the cases reached reasoning_content", stats["reasoning"] >= 2, json.dumps(stats))
        S.check("the cases reached JSON answers", stats["json"] >= 5, json.dumps(stats))
    S.finish()


if __name__ == "__main__":
    main()
