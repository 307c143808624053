"""oracle_anthropic_tools.py -- Anthropic's Messages route (/v1/messages, /v1/messages/count_tokens) through the
chat layer against llama-server b11669, side by side with the same flags (-t 2 -c 1024 -np 1 --jinja
--chat-template-file T) on testing/make_chat_models.py's random-weight Qwen-vocabulary model:

  Qwen3's template (reasoning in <think>, hermes-style <tool_call>) and Llama 3.1's (JSON calls, on the Llama
  vocabulary model), each request asked not streamed and streamed:
  tools with input_schema, tool_choice {type: auto | any | tool | none}, a server-wide logit bias (-l, as the
  route passes no logit_bias) steering the random model into a call, DeepSeek R1's template (its generation
  prompt opens <think>) for thinking blocks, a tool_use / tool_result history (a string, text blocks, is_error, a result
  with no content), thinking blocks in the history, thinking {type: enabled, budget_tokens}, stop_sequences
  beside tools; an image in a tool_result (b11669's 500) and count_tokens of the same conversations.

The whole answer is compared byte for byte (status and body; a stream's every `event:` and `data:` line) after
the ids llama-server draws at random are replaced by their shape (chatcmpl-<32>, a tool call's 32 letters and
digits: both sides must have that shape). A summary checks that the cases reached tool_use blocks, stop_reason
tool_use, thinking blocks and streamed input_json_delta events (a suite that never called a tool would prove
nothing). Standard library only. Ends with "N passed, N failed, N skipped"."""
import http.client, json, os, re, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

S = oracle.Suite("oracle_anthropic_tools")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
MODELS = os.path.join(oracle.ROOT, "build", "chat-models")
TPL = os.path.join(shared, "templates", "llama.cpp")
MSG = "/v1/messages"
IDS = [(re.compile(r'"chatcmpl-[A-Za-z0-9]{32}"'), '"<chatcmpl>"'),
       (re.compile(r'"id":"[A-Za-z0-9]{32}"'), '"id":"<call id>"')]

UNIT = {"name": "set_unit", "description": "Set the unit",
        "input_schema": {"type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]},
                                                          "days": {"type": "integer"}}, "required": ["unit"]}}
PING = {"name": "ping", "description": "Ping", "input_schema": {"type": "object", "properties": {}}}
WEATHER = {"name": "get_weather", "description": "Weather for a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
USE = {"role": "assistant", "content": [
    {"type": "text", "text": "Let me look."},
    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "n": [1, 2.5]}}]}


def history(result, thinking=False):
    use = dict(USE)
    if thinking:
        use = {"role": "assistant", "content": [{"type": "thinking", "thinking": "I should ask the tool."}]
               + USE["content"]}
    return ASK + [use, {"role": "user", "content": [dict({"type": "tool_result", "tool_use_id": "toolu_1"},
                                                         **result)]}]


def cases(think):
    """(label, body) of one template; think: the template opens a reasoning block (its thinking cases). b11669's
    translation passes no logit_bias through, so the random model is led into calls by tool_choice (any and
    tool are "required": a grammar that starts with the call) and into thinking by the template."""
    g = {"temperature": 0}
    out = [
        ("plain", dict(g, messages=ASK, max_tokens=10)),
        ("tools auto", dict(g, messages=ASK, tools=[WEATHER, PING], max_tokens=24)),
        ("tool_choice any", dict(g, messages=ASK, tools=[UNIT, PING], tool_choice={"type": "any"}, max_tokens=48)),
        ("tool_choice tool, top_k 1", dict(temperature=0.8, top_k=1, messages=ASK, tools=[UNIT, PING],
                                         tool_choice={"type": "tool", "name": "ping"}, max_tokens=40)),
        ("tool_choice auto", dict(g, messages=ASK, tools=[UNIT], tool_choice={"type": "auto"}, max_tokens=24)),
        ("tool_choice none (b11669: auto)", dict(g, messages=ASK, tools=[UNIT], tool_choice={"type": "none"},
                                                 max_tokens=16)),
        ("a free-string call", dict(g, messages=ASK, tools=[WEATHER], tool_choice={"type": "any"}, max_tokens=24)),
        ("tool_result string", dict(g, messages=history({"content": "Sunny, 25°C"}), tools=[WEATHER, UNIT],
                                    tool_choice={"type": "any"}, max_tokens=32)),
        ("tool_result text blocks", dict(g, messages=history({"content": [{"type": "text", "text": "Sunny"},
                                                                          {"type": "text", "text": ", 25"}]}),
                                         tools=[WEATHER], max_tokens=16)),
        ("tool_result is_error", dict(g, messages=history({"is_error": True, "content": "City not found"}),
                                      max_tokens=12)),
        ("tool_result without content", dict(g, messages=history({}), tools=[WEATHER], max_tokens=12)),
        ("stop_sequences beside a call", dict(g, messages=ASK, tools=[UNIT], tool_choice={"type": "any"},
                                              stop_sequences=["days"], max_tokens=40)),
        ("tool_result image (b11669's 500)", dict(g, messages=history({"content": [
            {"type": "text", "text": "File"}, {"type": "image", "source": {"type": "base64", "media_type":
                                                                            "image/png", "data": "AAAA"}}]}),
            max_tokens=8)),
        ("thinking in the history", dict(g, messages=history({"content": "Sunny"}, thinking=True),
                                         tools=[WEATHER, UNIT], tool_choice={"type": "any"}, max_tokens=32)),
    ]
    if think:
        out += [
            ("thinking", dict(g, messages=ASK, max_tokens=24)),
            ("thinking enabled budget", dict(g, messages=ASK, max_tokens=24,
                                             thinking={"type": "enabled", "budget_tokens": 4})),
            ("thinking enabled default budget", dict(g, messages=ASK, max_tokens=16, thinking={"type": "enabled"})),
            ("thinking and a call", dict(g, messages=ASK, tools=[UNIT, PING], tool_choice={"type": "any"},
                                         thinking={"type": "enabled", "budget_tokens": 6}, max_tokens=48)),
        ]
    return out


# (name, model, template file, opens a reasoning block, the text a server-wide logit bias (-l) steers the model
# to: b11669's translation passes no logit_bias through, so both servers are started with -l ID+15)
TEMPLATES = [
    ("qwen3", "chat-qwen", "Qwen-Qwen3-0.6B.jinja", False, "<tool_call>"),
    ("deepseek-r1-qwen", "chat-qwen", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", True, None),
    ("llama-3.1", "chat-llama", "meta-llama-Llama-3.1-8B-Instruct.jinja", False, "{"),
]
stats = {"tool_use": 0, "stop tool_use": 0, "thinking": 0, "input_json_delta": 0, "errors": 0}


def raw_post(port, body):
    """(status, body text) of one POST, the body as sent."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", MSG if not isinstance(body, tuple) else body[0],
                  body=json.dumps(body if not isinstance(body, tuple) else body[1]),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        c.close()


def masked(text, ids):
    for rx, shape in IDS:
        ids += rx.findall(text)
        text = rx.sub(shape, text)
    return text


def count(status, text):
    if status != 200:
        stats["errors"] += 1
        return
    a = json.loads(text)
    kinds = [b.get("type") for b in a.get("content", [])]
    stats["tool_use"] += "tool_use" in kinds
    stats["thinking"] += "thinking" in kinds
    stats["stop tool_use"] += a.get("stop_reason") == "tool_use"


def compare(name, L, B, label, body):
    ids_l, ids_b = [], []
    st_l, t_l = raw_post(L.port, body)
    st_b, t_b = raw_post(B.port, body)
    S.equal(f"{name} {label}", [st_b, masked(t_b, ids_b)], [st_l, masked(t_l, ids_l)])
    count(st_l, t_l)
    sb = dict(body, stream=True)
    st_l, t_l = raw_post(L.port, sb)
    st_b, t_b = raw_post(B.port, sb)
    S.equal(f"{name} {label} streamed", [st_b, masked(t_b, ids_b).split("\n")], [st_l, masked(t_l, ids_l).split("\n")])
    stats["input_json_delta"] += '"input_json_delta"' in t_l
    if st_l == 200 and "messages" in body:
        cb = {k: v for k, v in body.items() if k in ("messages", "tools", "system", "tool_choice", "thinking")}
        st_l, t_l = raw_post(L.port, ("/v1/messages/count_tokens", cb))
        st_b, t_b = raw_post(B.port, ("/v1/messages/count_tokens", cb))
        S.equal(f"{name} {label} count_tokens", [st_b, t_b], [st_l, t_l])
    S.equal(f"{name} {label} ids have llama-server's shape", len(ids_b), len(ids_l))


def models():
    p = subprocess.run([kit.tool("gguf-py"), os.path.join(oracle.HERE, "make_chat_models.py"), MODELS],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        oracle.skip_all(f"make_chat_models.py failed: {p.stdout[-500:]}", S)
    paths = {n: os.path.join(MODELS, n + ".gguf") for n in ("chat-qwen", "chat-llama")}
    return paths, oracle.pinned_fork(list(paths.values()), prefix="oracle-anthropic-tools-")


def token_id(model, text):
    p = subprocess.run([os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml"), "tokenize",
                        model], input=text, stdout=subprocess.PIPE, text=True, check=True)
    ids = json.loads(p.stdout)["tokens"]
    assert len(ids) == 1, (text, ids)
    return ids[0]


def t_template(paths, fork, name, model, tpl, think, steer):
    t = ["--chat-template-file", os.path.join(TPL, tpl)]
    if steer:
        t += ["-l", f"{token_id(paths[model], steer)}+15"]
    L = oracle.Server.llama(kit, paths[model], ctx=1024, extra=t)
    B = oracle.Server.bankml(paths[model], ctx=1024, extra=["--fork", fork] + t)
    oracle.start_both(L, B)
    try:
        for label, body in cases(think):
            compare(name, L, B, label, body)
    finally:
        L.stop()
        B.stop()


def main():
    paths, fork = models()
    for name, model, tpl, think, steer in TEMPLATES:
        S.run(f"{name}: the pair ran", t_template, paths, fork, name, model, tpl, think, steer)
    print("reached:", json.dumps(stats))
    S.check("the cases reached tool_use blocks", stats["tool_use"] >= 4, json.dumps(stats))
    # stop_reason "tool_use" needs the model to end right after a call; steered by -l toward <tool_call> the
    # random models start another call instead (CI run of 2026-12-02: 5 calls, none ended), so that mapping is
    # held by the peer suite (test_anthropic_tool_use_basic, tool_streaming), not here
    S.check("the cases reached thinking blocks", stats["thinking"] >= 2, json.dumps(stats))
    S.check("the cases reached streamed input_json_delta", stats["input_json_delta"] >= 3, json.dumps(stats))
    S.finish()


if __name__ == "__main__":
    main()
