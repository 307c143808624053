"""oracle_clients_tools.py -- structured outputs and tool loops through three JS SDKs, against llama-server b11669
and `bankml serve` side by side (issues #16 and #17).

npm installs openai 6.x, Vercel's AI SDK (`ai` 5.x, `@ai-sdk/openai-compatible` 1.x) and LangChain JS
(`@langchain/openai` 1.x, `@langchain/core` 1.x) into a temporary folder; testing/clients_tools.js then runs, once
against each server (same model file, same flags: -t 2 -c 2048 -np 1 --jinja --chat-template-file T):

  #16  openai `response_format: {type: json_schema, json_schema: {name, strict, schema}}`; AI SDK `generateObject`
       (createOpenAICompatible with supportsStructuredOutputs: true); LangChain `withStructuredOutput(schema,
       {method: "jsonSchema", includeRaw: true})`;
  #17  the openai tool loop (tools + tool_choice "required" -> each call's result sent back as a tool message ->
       the answer); AI SDK `generateText` with tools (two steps: required, then none; the tools' execute results
       fed back by the SDK); LangChain `bindTools` (required, then the ToolMessages and the answer).

The model is testing/make_chat_models.py's chat-qwen (random weights, Qwen's real vocabulary with <tool_call> as
one token) under two templates, Qwen3 and Hermes 2 Pro. b11669's grammar for tool_choice "required" on these
templates lets free content precede the call (root ::= generation prompt, optional reasoning, until-"<tool_call>\\n",
tool-calls), so a greedy random model never calls; the calls that must call are steered instead: temperature 1,
seed 1, logit_bias +25 on "<tool_call>" and "\\n", +40 on <|im_end|> (so the answer ends after the first complete
call set). The AI SDK adds the bias through createOpenAICompatible's transformRequestBody on the steps whose
tool_choice is "required"; the structured-output calls and the answers after the tool results are greedy.

Compared exactly: each SDK's result (the object; every tool call's name and arguments -- the string the openai
client gets, the parsed input the AI SDK and LangChain give; content; finish reasons; token usage as each SDK
reports it) with the tool-call ids left out and replaced by their shape (32 letters and digits, drawn at random by
llama-server), and every request body the SDKs sent (recorded by a fetch wrapper) with each HTTP status. Fixed
sanity values: every request answered 200; each object parses and fits the schema; every first step holds calls
of the offered tools whose arguments fit their schemas, with finish reason tool_calls; usage adds up. One known
refusal is pinned: an assistant message last (a prefill) beside tools, which b11669 answers and bankml refuses
with its reason. Skipped with the reason without node/npm, the npm packages or the oracle kit (a failure under
BANKML_REQUIRE_ORACLE=1). ORACLE_CLIENTS_TOOLS_ONLY=qwen3 runs one template. Standard library only (plus node and npm)."""
import json, os, re, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

S = oracle.Suite("oracle_clients_tools")
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
PKGS = ["openai@6", "ai@5", "@ai-sdk/openai-compatible@1", "@langchain/openai@1", "@langchain/core@1"]
RANDOM_ID = re.compile(r"^[0-9A-Za-z]{32}$")
CHAT = "/v1/chat/completions"

UNIT = {"type": "function", "function": {"name": "set_unit", "description": "Set the unit",
                                         "parameters": {"type": "object", "properties": {
                                             "unit": {"type": "string", "enum": ["c", "f"]},
                                             "days": {"type": "integer"}}, "required": ["unit"]}}}
PING = {"type": "function", "function": {"name": "ping", "description": "Ping",
                                         "parameters": {"type": "object", "properties": {}}}}
# no free strings, every key required in order: the random model's object always finishes
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}, "unit": {"type": "string", "enum": ["c", "f"]}},
          "required": ["ok", "unit"], "additionalProperties": False}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
TEMPLATES = [("qwen3", "Qwen-Qwen3-0.6B.jinja"), ("hermes-2-pro", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja")]

if not shutil.which("npm") or not shutil.which("node"):
    oracle.skip_all("npm or node is not installed", S)
if not os.path.exists(BIN):
    oracle.skip_all(f"{BIN} is not built", S)
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)

tmp = tempfile.mkdtemp(prefix="clients-tools-")
p = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent"] + PKGS, cwd=tmp,
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
if p.returncode != 0 or not os.path.isdir(os.path.join(tmp, "node_modules", "@langchain", "openai")):
    shutil.rmtree(tmp, ignore_errors=True)
    oracle.skip_all(f"npm install {' '.join(PKGS)} failed: {p.stdout.strip()[-300:]}", S)
VERS = {}
for name in ("openai", "ai", "@ai-sdk/openai-compatible", "@langchain/openai", "@langchain/core"):
    with open(os.path.join(tmp, "node_modules", name, "package.json")) as f:
        VERS[name] = json.load(f)["version"]
shutil.copy(os.path.join(oracle.HERE, "clients_tools.js"), os.path.join(tmp, "run.js"))

MODELS = os.path.join(oracle.ROOT, "build", "chat-models")
p = subprocess.run([kit.tool("gguf-py"), os.path.join(oracle.HERE, "make_chat_models.py"), MODELS, "qwen"],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
MODEL = os.path.join(MODELS, "chat-qwen.gguf")
if p.returncode != 0 or not os.path.exists(MODEL):
    shutil.rmtree(tmp, ignore_errors=True)
    oracle.skip_all(f"make_chat_models.py failed: {p.stdout[-500:]}", S)
FORK = oracle.pinned_fork(MODEL, prefix="oracle-clients-tools-")


def run_js(port, cfg):
    p = subprocess.run(["node", "run.js", f"http://127.0.0.1:{port}/v1", json.dumps(cfg)], cwd=tmp,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[-600:])
    return json.loads(p.stdout)


def norm(v, ids):
    """v without the tool-call ids (collected in ids, in order): they are llama-server's random draws."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k in ("id", "tool_call_id", "toolCallId") and isinstance(x, str):
                ids.append(x)
                continue
            out[k] = norm(x, ids)
        return out
    if isinstance(v, list):
        return [norm(x, ids) for x in v]
    return v


def fits(obj, schema):
    """obj fits the suite's flat schemas (object, required keys, boolean / integer / enum members)."""
    if not isinstance(obj, dict) or any(k not in obj for k in schema.get("required", [])):
        return False
    props = schema.get("properties", {})
    if schema.get("additionalProperties") is False and any(k not in props for k in obj):
        return False
    for k, x in obj.items():
        s = props.get(k)
        if s is None:
            continue
        if "enum" in s and x not in s["enum"]:
            return False
        if s.get("type") == "boolean" and not isinstance(x, bool):
            return False
        if s.get("type") == "integer" and (not isinstance(x, int) or isinstance(x, bool)):
            return False
    return True


PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in (UNIT, PING)}


def calls_ok(calls, key):
    """Every call names an offered tool and its arguments (a JSON string or parsed) fit the tool's schema."""
    if not calls:
        return False
    for c in calls:
        args = c[key]
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                return False
        if c["name"] not in PARAMS or not fits(args, PARAMS[c["name"]]):
            return False
    return True


def sanity(name, got):
    """The fixed values every server must give (checked on llama-server's results and bankml's alike)."""
    for k in ("oai_schema", "ai_object", "lc_structured"):
        S.check(f"{name} {k}: no error, the object fits the schema", "error" not in got[k] and
                fits(got[k].get("object"), SCHEMA), json.dumps(got[k])[:300])
    o = got["oai_loop"]
    S.check(f"{name} openai loop: the first answer calls offered tools, finish_reason tool_calls, usage adds up",
            "error" not in o and calls_ok(o["first"]["tool_calls"], "arguments") and
            o["first"]["finish"] == "tool_calls" and
            o["first"]["usage"]["total_tokens"] == o["first"]["usage"]["prompt_tokens"] +
            o["first"]["usage"]["completion_tokens"], json.dumps(o)[:300])
    S.check(f"{name} openai loop: the answer after the tool results is text", "error" not in o and
            bool(o["answer"]["content"]) and not o["answer"]["tool_calls"], json.dumps(o)[:300])
    a = got["ai_tools"]
    S.check(f"{name} AI SDK generateText: step 1 calls offered tools (tool-calls), the SDK ran them, step 2 text",
            "error" not in a and len(a["steps"]) == 2 and calls_ok(a["steps"][0]["calls"], "input") and
            a["steps"][0]["finish"] == "tool-calls" and len(a["steps"][0]["results"]) == len(a["steps"][0]["calls"])
            and bool(a["steps"][1]["text"]) and a["text"] == a["steps"][1]["text"], json.dumps(a)[:300])
    lc = got["lc_tools"]
    S.check(f"{name} LangChain bindTools: calls of offered tools, finish tool_calls, then a text answer",
            "error" not in lc and calls_ok(lc["first"]["calls"], "args") and lc["first"]["finish"] == "tool_calls"
            and bool(lc["answer"]["content"]) and not lc["answer"]["calls"], json.dumps(lc)[:300])
    S.equal(f"{name} every SDK request answered 200", [s["status"] for s in got["sent"] if s["status"] != 200], [])


def t_template(label, tpl):
    t = ["--chat-template-file", os.path.join(shared, "templates", "llama.cpp", tpl)]
    L = oracle.Server.llama(kit, MODEL, ctx=2048, extra=t, name=f"llama-clients-{label}")
    B = oracle.Server.bankml(MODEL, ctx=2048, extra=["--fork", FORK] + t, name=f"bankml-clients-{label}")
    oracle.start_both(L, B)
    try:
        st, tk = L.post("/tokenize", {"content": "<tool_call>\n<|im_end|>"})
        S.equal(f"{label}: <tool_call>, \\n and <|im_end|> are single tokens", [st, tk.get("tokens")],
                [200, [151936, 198, 151645]])
        bias = {"151936": 25, "198": 25, "151645": 40}
        cfg = {"model": "chat-qwen", "seed": 1, "ask": ASK, "tools": [UNIT, PING], "schema": SCHEMA, "max": 96,
               "max2": 16, "steer": {"temperature": 1, "logit_bias": bias}}
        got_l = run_js(L.port, cfg)
        got_b = run_js(B.port, cfg)
        S.ok(f"{label}: the node script ran on both servers")
        sanity(f"{label} llama-server", got_l)
        sanity(f"{label} bankml", got_b)
        for k in ("oai_schema", "ai_object", "lc_structured", "oai_loop", "ai_tools", "lc_tools"):
            il, ib = [], []
            S.equal(f"{label} {k}: bankml's result equals llama-server's", norm(got_b[k], ib), norm(got_l[k], il))
            shape = lambda ids: ["random" if RANDOM_ID.match(i) else i for i in ids]
            if il or ib:
                S.equal(f"{label} {k}: the tool-call ids have llama-server's shape", shape(ib), shape(il))
        il, ib = [], []
        S.equal(f"{label}: the SDKs' request bodies and statuses", norm(got_b["sent"], ib), norm(got_l["sent"], il))
        S.equal(f"{label}: the SDKs sent these requests", [s["sdk"] for s in got_b["sent"]],
                ["openai json_schema", "openai tool loop", "openai tool loop", "ai generateObject",
                 "ai generateText tools", "ai generateText tools", "langchain bindTools", "langchain bindTools",
                 "langchain withStructuredOutput"])
        # a known refusal: a content answer under tools sent back as the last message (an assistant prefill)
        body = {"messages": ASK + [{"role": "assistant", "content": "Let me check."}], "tools": [UNIT, PING],
                "temperature": 0, "max_tokens": 4}
        st_l, _ = L.post(CHAT, body)
        st_b, a_b = B.post(CHAT, body)
        msg = a_b.get("error", {}).get("message", "") if isinstance(a_b, dict) else str(a_b)
        S.equal(f"{label}: an assistant prefill beside tools: b11669 answers, bankml refuses with the reason",
                [st_l, st_b, msg[:60]], [200, 400, "a continued final message (continue_final_message, or an ass"])
    finally:
        L.stop()
        B.stop()


print("packages:", ", ".join(f"{k} {v}" for k, v in VERS.items()), flush=True)
only = [w for w in os.environ.get("ORACLE_CLIENTS_TOOLS_ONLY", "").split(",") if w]
for label, tpl in TEMPLATES:
    if only and label not in only:
        continue
    S.run(f"{label}: the pair ran", t_template, label, tpl)
shutil.rmtree(tmp, ignore_errors=True)
S.finish()
