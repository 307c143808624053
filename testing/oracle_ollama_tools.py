"""oracle_ollama_tools.py -- tools and think on bankml's Ollama /api/chat (and think on /api/generate) against
llama-server b11669's /v1/chat/completions on the same conversation: the same model file, the same template
(--chat-template-file Qwen3-0.6B, -t 2 -c 1024 -np 1 --jinja), tool_choice auto. The model is
make_steered_model.py's copy of make_chat_models.py's chat-qwen.gguf, whose greedy answer opens a reasoning
block and calls a tool by itself (Ollama has no logit_bias to steer a random model with).

Each case is one Ollama request and the llama-server request it stands for (think true/false as
chat_template_kwargs.enable_thinking; tools as they are; a history's tool_calls with arguments as objects on the
Ollama side and JSON text on llama-server's, tool_name as name). Compared exactly: message.content ==
content, message.thinking == reasoning_content, message.tool_calls == tool_calls (name, arguments parsed,
index 0, 1, ...), prompt_eval_count == prompt_tokens, eval_count == completion_tokens, done_reason; not streamed
and streamed (the lines' content and thinking joined, the calls in order, each whole on one line with done
false, the ids Ollama's shape call_[a-z0-9]{8}). Refusals with their status and words. The official `ollama` npm client (when node and npm are there) asks the
tool cases through its chat(), streamed and not: its tool_calls, content and thinking equal llama-server's. A summary checks the cases
reached tool calls and thinking. ORACLE_OLLAMA_TOOLS_CASES=history,seeded runs the cases whose label holds a word (no summary). Standard library
only. Ends with "N passed, N failed, N skipped"."""
import json, os, re, shutil, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle  # noqa: E402

S = oracle.Suite("oracle_ollama_tools")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
MODELS = os.path.join(oracle.ROOT, "build", "chat-models")
OUT = os.path.join(oracle.ROOT, "build", "ollama-tools")
TPL = os.path.join(shared, "templates", "llama.cpp", "Qwen-Qwen3-0.6B.jinja")
CALL_ID = re.compile(r"^call_[a-z0-9]{8}$")
WANT = [w for w in os.environ.get("ORACLE_OLLAMA_TOOLS_CASES", "").split(",") if w]   # labels holding a word
stats = {"cases": 0, "tool_calls": 0, "thinking": 0, "content": 0}

UNIT = {"type": "function", "function": {"name": "set_unit", "description": "Set the unit",
                                         "parameters": {"type": "object", "properties": {
                                             "unit": {"type": "string", "enum": ["c", "f"]},
                                             "days": {"type": "integer"}}, "required": ["unit"]}}}
PING = {"type": "function", "function": {"name": "ping", "description": "Ping",
                                         "parameters": {"type": "object", "properties": {}}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
# a history: Ollama's shape, and llama-server's
HIST_OL = ASK + [
    {"role": "assistant", "content": "", "tool_calls": [
        {"function": {"name": "set_unit", "arguments": {"unit": "c", "days": 3}}}]},
    {"role": "tool", "tool_name": "set_unit", "content": "{\"ok\": true}"},
]
HIST_L = ASK + [
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "set_unit", "arguments": "{\"unit\":\"c\",\"days\":3}"}}]},
    {"role": "tool", "name": "set_unit", "content": "{\"ok\": true}"},
]
HIST_THINK_OL = ASK + [{"role": "assistant", "content": "Paris.", "thinking": "The user asks."},
                       {"role": "user", "content": "And Rome?"}]
HIST_THINK_L = ASK + [{"role": "assistant", "content": "Paris.", "reasoning_content": "The user asks."},
                      {"role": "user", "content": "And Rome?"}]


def case(label, msgs_ol, msgs_l, tools=None, think=None, n=48, sampling=None, generate=None):
    """(label, ollama route, ollama body, llama body)."""
    opts = dict(sampling or {"temperature": 0}, num_predict=n)
    lb = dict(sampling or {"temperature": 0}, messages=msgs_l, max_tokens=n)
    if generate is not None:
        ob = {"model": "steered-qwen", "prompt": generate, "options": opts}
        lb["messages"] = [{"role": "user", "content": generate}]
    else:
        ob = {"model": "steered-qwen", "messages": msgs_ol, "options": opts}
    if tools is not None:
        ob["tools"] = lb["tools"] = tools
    if think is not None:
        ob["think"] = think
        lb["chat_template_kwargs"] = {"enable_thinking": think}
    return label, "/api/generate" if generate is not None else "/api/chat", ob, lb


SEEDED = {"temperature": 0.8, "seed": 7, "top_k": 40}
CASES = [
    case("tools, think false", ASK, ASK, tools=[UNIT, PING], think=False),
    case("tools, think true", ASK, ASK, tools=[UNIT, PING], think=True, n=64),
    case("tools, think absent", ASK, ASK, tools=[UNIT, PING], n=64),
    case("one tool, think false", ASK, ASK, tools=[PING], think=False),
    case("tools, cut short", ASK, ASK, tools=[UNIT, PING], think=False, n=6),
    case("tools seeded", ASK, ASK, tools=[UNIT, PING], think=False, sampling=SEEDED),
    case("think true", ASK, ASK, think=True, n=12),
    case("think false", ASK, ASK, think=False, n=12),
    case("history with a tool call", HIST_OL, HIST_L, tools=[UNIT, PING], think=False),
    case("history with thinking", HIST_THINK_OL, HIST_THINK_L, think=True, n=12),
    case("generate think true", None, None, think=True, n=12, generate="What is the weather in Paris?"),
    case("generate think false", None, None, think=False, n=12, generate="What is the weather in Paris?"),
]


def want_of(status, a):
    """llama-server's answer as Ollama's fields."""
    if status != 200:
        return [status, a]
    ch = a["choices"][0]
    msg = ch["message"]
    calls = [{"index": i, "name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"])}
             for i, c in enumerate(msg.get("tool_calls") or [])]
    return [200, {"content": msg.get("content") or "", "thinking": msg.get("reasoning_content") or "",
                  "tool_calls": calls, "prompt_eval_count": a["usage"]["prompt_tokens"],
                  "eval_count": a["usage"]["completion_tokens"],
                  "done_reason": "length" if ch["finish_reason"] == "length" else "stop"}]


def want_stream(status, events):
    """llama-server's stream (its deltas joined, the calls by index) as Ollama's fields."""
    if status != 200:
        return [status, events[0] if events else None]
    content = thinking = ""
    calls, usage, finish = {}, {}, None
    for e in events:
        if not isinstance(e, dict):
            continue
        usage = e.get("usage") or usage
        for ch in e.get("choices") or []:
            finish = ch.get("finish_reason") or finish
            d = ch.get("delta") or {}
            content += d.get("content") or ""
            thinking += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls") or []:
                c = calls.setdefault(tc["index"], {"name": "", "arguments": ""})
                f = tc.get("function") or {}
                c["name"] += f.get("name") or ""
                c["arguments"] += f.get("arguments") or ""
    tcs = [{"index": i, "name": calls[i]["name"], "arguments": json.loads(calls[i]["arguments"])} for i in sorted(calls)]
    return [200, {"content": content, "thinking": thinking, "tool_calls": tcs,
                  "prompt_eval_count": usage.get("prompt_tokens"), "eval_count": usage.get("completion_tokens"),
                  "done_reason": "length" if finish == "length" else "stop"}]


def calls_of(tcs, ids):
    out = []
    for c in tcs or []:
        ids.append(c.get("id"))
        f = c["function"]
        out.append({"index": f["index"], "name": f["name"], "arguments": f["arguments"]})
    return out


def got_of(route, status, a, ids):
    if status != 200:
        return [status, a]
    m = a if route == "/api/generate" else a["message"]
    text = a.get("response", "") if route == "/api/generate" else m.get("content", "")
    return [200, {"content": text, "thinking": m.get("thinking", ""), "tool_calls": calls_of(m.get("tool_calls"), ids),
                  "prompt_eval_count": a["prompt_eval_count"], "eval_count": a["eval_count"],
                  "done_reason": a["done_reason"]}]


def ndjson(srv, path, body):
    st, raw = srv.request("POST", path, json.dumps(body))
    if not isinstance(raw, str):
        return st, [raw]
    return st, [json.loads(x) for x in raw.splitlines() if x.strip()]


def joined(route, lines, ids, whole):
    """A stream's lines as one answer; whole collects, per line with calls, (done, calls are objects)."""
    content = thinking = ""
    calls = []
    for ln in lines:
        m = ln if route == "/api/generate" else ln.get("message", {})
        content += ln.get("response", "") if route == "/api/generate" else m.get("content", "")
        thinking += m.get("thinking", "")
        if m.get("tool_calls"):
            whole.append((ln["done"], all(isinstance(c["function"]["arguments"], dict) for c in m["tool_calls"])))
            calls += calls_of(m["tool_calls"], ids)
    last = lines[-1]
    return [200, {"content": content, "thinking": thinking, "tool_calls": calls,
                  "prompt_eval_count": last.get("prompt_eval_count"), "eval_count": last.get("eval_count"),
                  "done_reason": last.get("done_reason")}]


def compare(L, B, label, route, ob, lb):
    stats["cases"] += 1
    st_l, a_l = L.post("/v1/chat/completions", lb)
    want = want_of(st_l, a_l)
    ids = []
    st_b, a_b = B.post(route, dict(ob, stream=False))
    S.equal(f"{label}", got_of(route, st_b, a_b, ids), want)
    if st_l == 200:
        w = want[1]
        stats["tool_calls"] += bool(w["tool_calls"])
        stats["thinking"] += bool(w["thinking"])
        stats["content"] += bool(w["content"])
    st_ls, ev = L.stream("/v1/chat/completions", dict(lb, stream=True, stream_options={"include_usage": True}))
    want = want_stream(st_ls, ev)
    st_s, lines = ndjson(B, route, dict(ob, stream=True))
    whole = []
    if st_s != 200 or not lines:
        S.equal(f"{label} streamed", [st_s, lines], want)
    else:
        S.equal(f"{label} streamed", joined(route, lines, ids, whole), want)
        S.check(f"{label} streamed: one done line, last", [x.get("done") for x in lines].count(True) == 1 and
                lines[-1].get("done") is True, json.dumps(lines[-1])[:300])
        S.check(f"{label} streamed: each call whole on a line before the done one",
                all(not done and objs for done, objs in whole), repr(whole))
    S.check(f"{label}: ids have Ollama's shape", all(isinstance(i, str) and CALL_ID.match(i) for i in ids), repr(ids))


def refusals(B):
    chat = {"model": "steered-qwen", "messages": ASK, "stream": False}
    rows = [
        ("think high", "/api/chat", dict(chat, think="high"), 400,
         "think value \"high\" is not supported for this model"),
        ("think max", "/api/chat", dict(chat, think="max"), 400,
         "invalid think value: \"max\" (must be \"high\", \"medium\", \"low\", true, or false)"),
        ("think 1", "/api/chat", dict(chat, think=1), 400,
         "think must be a boolean or string (\"high\", \"medium\", \"low\", true, or false)"),
        ("tools on generate", "/api/generate", {"model": "steered-qwen", "prompt": "hi", "stream": False, "tools": [PING]}, 400,
         "tools: /api/generate takes no tools (Ollama's GenerateRequest has none); send them to /api/chat"),
        ("tools and format", "/api/chat", dict(chat, tools=[PING], format="json"), 400,
         "format beside tools or think: Ollama applies the format grammar only once thinking ends (it restarts "
         "the answer), which bankML does not reproduce; send one of them"),
        ("think and logprobs", "/api/chat", dict(chat, think=True, logprobs=True), 400,
         "logprobs beside tools or think: the parsed answer's lines are not matched to tokens yet; send the "
         "request without logprobs"),
        ("think on a raw prompt", "/api/generate", {"model": "steered-qwen", "prompt": "hi", "raw": True, "think": True,
                                                    "stream": False}, 400,
         "think: a raw prompt is not rendered by the template, so thinking cannot be set; send the prompt without "
         "raw"),
        ("a tool without a function", "/api/chat", dict(chat, tools=[{"type": "function"}]), 400,
         "Failed to parse tools: Missing tool function: {\"type\":\"function\"}; tools = [\n  {\n    \"type\": "
         "\"function\"\n  }\n]"),
        ("a call whose arguments are a string", "/api/chat",
         dict(chat, messages=ASK + [{"role": "assistant", "content": "", "tool_calls": [
             {"function": {"name": "ping", "arguments": "{}"}}]}, {"role": "user", "content": "x"}], tools=[PING]),
         400, "tool_calls[0]: a call is {function: {name: a string, arguments: an object}}"),
    ]
    for label, route, body, st, msg in rows:
        got = B.post(route, body)
        S.equal(f"refusal: {label}", list(got), [st, {"error": msg}])


def no_thinking(paths, fork):
    """think true on a template without thinking tags: Ollama's capability error."""
    tpl = os.path.join(shared, "templates", "llama.cpp", "meta-llama-Llama-3.2-3B-Instruct.jinja")
    B = oracle.Server.bankml(paths["steered"], ctx=1024, extra=["--fork", fork, "--chat-template-file", tpl])
    B.start()
    try:
        got = B.post("/api/chat", {"model": "steered-qwen", "messages": ASK, "stream": False, "think": True})
        S.equal("refusal: think true on a template without thinking", list(got),
                [400, {"error": "\"steered-qwen:latest\" does not support thinking"}])
        got = B.post("/api/chat", {"model": "steered-qwen", "messages": ASK, "stream": False, "think": False,
                                   "options": {"num_predict": 2, "temperature": 0}})
        S.check("think false on a template without thinking answers", got[0] == 200, repr(got)[:300])
    finally:
        B.stop()


def models():
    p = subprocess.run([kit.tool("gguf-py"), os.path.join(oracle.HERE, "make_chat_models.py"), MODELS],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        oracle.skip_all(f"make_chat_models.py failed: {p.stdout[-500:]}", S)
    os.makedirs(OUT, exist_ok=True)
    steered = os.path.join(OUT, "steered-qwen.gguf")
    if not os.path.exists(steered):
        p = subprocess.run([kit.tool("gguf-py"), os.path.join(oracle.HERE, "make_steered_model.py"),
                            os.path.join(MODELS, "chat-qwen.gguf"), steered],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            oracle.skip_all(f"make_steered_model.py failed: {p.stdout[-500:]}", S)
    paths = {"steered": steered}
    return paths, oracle.pinned_fork(list(paths.values()), prefix="oracle-ollama-tools-")


CLIENT = r"""
const { Ollama } = require('ollama');
const o = new Ollama({ host: process.argv[2] });
const req = JSON.parse(process.argv[3]);
(async () => {
  const out = {};
  try { out.chat = await o.chat(Object.assign({}, req, { stream: false })); } catch (e) { out.chat = { error: String(e.message || e) }; }
  try {
    const s = { content: '', thinking: '', tool_calls: [], last: null };
    for await (const p of await o.chat(Object.assign({}, req, { stream: true }))) {
      s.content += p.message.content || ''; s.thinking += p.message.thinking || '';
      for (const c of p.message.tool_calls || []) s.tool_calls.push(c);
      s.last = p;
    }
    out.stream = s;
  } catch (e) { out.stream = { error: String(e.message || e) }; }
  console.log(JSON.stringify(out));
})();
"""


def client_dir():
    """A folder with the official `ollama` npm package, or None (with the reason skipped)."""
    if not shutil.which("npm") or not shutil.which("node"):
        S.skip("the ollama client", "node and npm are not installed")
        return None
    tmp = tempfile.mkdtemp(prefix="ollama-tools-client-")
    p = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "ollama"], cwd=tmp,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    if p.returncode != 0:
        S.skip("the ollama client", f"npm install ollama failed: {p.stdout.strip()[-300:]}")
        return None
    with open(os.path.join(tmp, "client.js"), "w") as f:
        f.write(CLIENT)
    return tmp


def client_cases(L, B, cdir):
    """The ollama client's chat with tools (and think) returns llama-server's calls, content and thinking."""
    for label, route, ob, lb in CASES:
        if route != "/api/chat" or "tools" not in ob or (WANT and not any(w in label for w in WANT)):
            continue
        r = subprocess.run(["node", "client.js", f"http://127.0.0.1:{B.port}", json.dumps(ob)], cwd=cdir,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        try:
            out = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            S.fail(f"client {label}: ran", r.stdout[-300:])
            continue
        want = want_of(*L.post("/v1/chat/completions", lb))
        ids = []
        S.equal(f"client {label}", got_of(route, 200, out["chat"], ids) if "error" not in out["chat"]
                else out["chat"], want)
        st, ev = L.stream("/v1/chat/completions", dict(lb, stream=True, stream_options={"include_usage": True}))
        ws = want_stream(st, ev)[1]
        sm = out["stream"]
        S.equal(f"client {label} streamed", [sm.get("content"), sm.get("thinking"),
                                             calls_of(sm.get("tool_calls"), ids)],
                [ws["content"], ws["thinking"], ws["tool_calls"]])
        S.check(f"client {label}: ids have Ollama's shape", all(CALL_ID.match(i or "") for i in ids), repr(ids))


def t_pair(paths, fork):
    cdir = client_dir()
    t = ["--chat-template-file", TPL]
    L = oracle.Server.llama(kit, paths["steered"], ctx=1024, extra=t)
    B = oracle.Server.bankml(paths["steered"], ctx=1024, extra=["--fork", fork] + t)
    oracle.start_both(L, B)
    try:
        for label, route, ob, lb in CASES:
            if not WANT or any(w in label for w in WANT):
                compare(L, B, label, route, ob, lb)
        refusals(B)
        if cdir:
            client_cases(L, B, cdir)
    finally:
        if cdir:
            shutil.rmtree(cdir, ignore_errors=True)
        L.stop()
        B.stop()


def main():
    paths, fork = models()
    S.run("the pair ran", t_pair, paths, fork)
    S.run("the template without thinking ran", no_thinking, paths, fork)
    print("reached:", json.dumps(stats))
    if WANT:
        S.finish()
    S.check("the cases reached tool calls", stats["tool_calls"] >= 5, json.dumps(stats))
    S.check("the cases reached thinking", stats["thinking"] >= 3, json.dumps(stats))
    S.finish()


if __name__ == "__main__":
    main()
