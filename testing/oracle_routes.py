"""oracle_routes.py -- llama-server b11669's other routes and its model names, through a real `bankml serve`
next to llama-server on stories260K with the same flags (-t 2 -c 512 -np 1 --jinja), both started fresh and
sent the same requests in the same order (so their slots, and cache_n, move alike):

- /v1/completions (OpenAI's legacy shape): greedy and seeded, logprobs (N, true, n_probs, post-sampling),
  stop strings, streamed chunks with logprobs and usage, and its errors (no prompt, not an object, bad JSON,
  n > 1, a bad logprobs type);
- /v1/messages (Anthropic) and /v1/messages/count_tokens: system as a string and as blocks, content blocks,
  stop_sequences (stop_reason, stop_sequence), max_tokens absent (4096), messages not an array, streamed
  events (message_start ... message_stop), '"messages" is required' (500), tools, a tool_result, tool_choice and
  thinking through the chat layer;
- /v1/responses: input as a string and as items (merged assistant output), instructions, max_output_tokens,
  streamed events, and its 400s; bankml's 400s for function tools and function_call items;
- the 501s b11669 answers on one model without their flags: /v1/embeddings, /embedding, /embeddings,
  /rerank, /reranking, /v1/rerank, /v1/reranking, /infill (stories260K has no FIM tokens), POST /props,
  POST /slots/0;
- names: a `model` nobody pinned is served (gpt-3.5-turbo, gpt-4o-mini, a number), `model` in answers,
  /v1/models (meta included) and /props whole (model_alias, model_path, model_ftype, the only-metrics
  default params), without and with --alias (one name; several with --tags); model_ftype and meta on each weight type bankml plays.

Each answer compared whole: status and body, with what differs by nature masked (string ids, created
times, system_fingerprint; of the timings, cache_n, prompt_n and predicted_n), and the ids' shapes checked.
Streams compared event by event (event names included). Standard library only. Ends with
"N passed, N failed, N skipped"."""
import glob, http.client, json, os, re, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle

CTX = 512
S = oracle.Suite("oracle_routes")
kit = oracle.kit_or_skip(S)
shared = oracle.shared_or_skip(S)
BIN = os.environ.get("BANKML_BIN") or os.path.join(oracle.ROOT, "bankml")
MODEL = os.path.join(shared, "models", "stories260K.gguf")
tmp = tempfile.mkdtemp(prefix="oracle-routes-")
FORK = os.path.join(tmp, "routes.FORK.json")
p = subprocess.run([BIN, "pin", MODEL, "--fork", FORK, "--write"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                   text=True)
if p.returncode != 0:
    oracle.skip_all(f"bankml pin --write {MODEL} failed: {p.stdout.strip()}", S)

ID_SHAPES = {"chatcmpl": re.compile(r"^chatcmpl-[A-Za-z0-9]{32}$"), "resp": re.compile(r"^resp_[A-Za-z0-9]{32}$"),
             "msg": re.compile(r"^msg_[A-Za-z0-9]{32}$")}
MASKED = ("created", "created_at", "completed_at", "system_fingerprint")


def id_shape(v):
    for k, rx in ID_SHAPES.items():
        if rx.match(v):
            return "<" + k + ">"
    return "<bad id " + v + ">"


def mask(v):
    """String ids become their shape, times and the fingerprint "X", timings their three counts."""
    if isinstance(v, list):
        return [mask(x) for x in v]
    if not isinstance(v, dict):
        return v
    out = {}
    for k, x in v.items():
        if k in MASKED:
            out[k] = "X"
        elif k in ("id", "item_id") and isinstance(x, str):
            out[k] = id_shape(x)
        elif k == "timings" and isinstance(x, dict):
            out[k] = {t: x.get(t) for t in ("cache_n", "prompt_n", "predicted_n")}
        else:
            out[k] = mask(x)
    return out


def call(port, path, body, method="POST"):
    """(status, content type's head, parsed body) for a whole answer, or for a stream [(event, data), ...]."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        data = None if body is None else body if isinstance(body, str) else json.dumps(body)
        c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data is not None else {})
        r = c.getresponse()
        ct = (r.getheader("Content-Type") or "").split(";")[0]
        raw = r.read().decode("utf-8", "replace")
    finally:
        c.close()
    if ct == "text/event-stream":
        events = []
        for block in raw.split("\n\n"):
            if not block.strip():
                continue
            name, payload = None, None
            for line in block.split("\n"):
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    payload = line[6:]
            try:
                payload = json.loads(payload)
            except (TypeError, ValueError):
                pass
            if isinstance(payload, dict) and "bankml_receipt" in payload:
                continue
            events.append([name, mask(payload)])
        return [r.status, ct, events]
    try:
        doc = json.loads(raw)
        if isinstance(doc, dict):
            doc.pop("bankml_receipt", None)   # bankml's own member of the chat answer
        return [r.status, ct, mask(doc)]
    except ValueError:
        return [r.status, ct, raw]


def both(name, L, B, path, body, method="POST", ignore=()):
    want = call(L.port, path, body, method)
    got = call(B.port, path, body, method)
    S.equal(name, got, want, ignore=ignore)
    return got, want


HI = [{"role": "user", "content": "hi"}]
CMPL = [
    ("greedy", {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}),
    ("greedy again (the slot reused)", {"prompt": "Once upon a time", "max_tokens": 8, "temperature": 0}),
    ("seeded", {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0.9, "seed": 42}),
    ("logprobs 2", {"prompt": "Once upon a time", "max_tokens": 3, "temperature": 0, "logprobs": 2}),
    ("logprobs true", {"prompt": "The cat", "max_tokens": 3, "temperature": 0, "logprobs": True}),
    ("logprobs and n_probs (n_probs wins)", {"prompt": "a", "max_tokens": 2, "temperature": 0, "logprobs": 2,
                                             "n_probs": 3}),
    ("post-sampling probs", {"prompt": "a", "max_tokens": 2, "temperature": 0.8, "seed": 3, "n_probs": 2,
                             "post_sampling_probs": True}),
    ("a stop string", {"prompt": "Once upon", "max_tokens": 10, "temperature": 0, "stop": [" was"]}),
    ("a stop string with logprobs", {"prompt": "Once upon", "max_tokens": 10, "temperature": 0, "stop": " was",
                                     "logprobs": 1}),
    ("token ids", {"prompt": [1, 403, 407], "max_tokens": 4, "temperature": 0}),
    ("empty prompt", {"prompt": "", "max_tokens": 3, "temperature": 0}),
    ("streamed", {"prompt": "Once upon a time", "max_tokens": 4, "temperature": 0, "stream": True}),
    ("streamed, seeded, logprobs, include_usage", {"prompt": "Lily", "max_tokens": 5, "temperature": 1.0, "seed": 9,
                                                   "stream": True, "logprobs": 2,
                                                   "stream_options": {"include_usage": True}}),
    ("streamed with a stop string", {"prompt": "Once upon", "max_tokens": 10, "temperature": 0, "stop": [" was"],
                                     "stream": True}),
    ("streamed with a stop string and logprobs", {"prompt": "Once upon", "max_tokens": 10, "temperature": 0,
                                                  "stop": [" was"], "stream": True, "logprobs": 1}),
    ("no prompt", {"max_tokens": 3}),
    ("not an object", "[1]"),
    ("bad JSON", "xx"),
    ("n 2", {"prompt": "a", "n": 2}),
    ("logprobs a string", {"prompt": "a", "logprobs": "x"}),
    ("bad prompt", {"prompt": {"a": 1}, "max_tokens": 2}),
]
MSGS = [
    ("system string", {"model": "claude-3", "max_tokens": 4, "temperature": 0, "system": "Be nice", "messages": HI}),
    ("system blocks, content blocks, stop_sequences", {
        "max_tokens": 4, "temperature": 0, "system": [{"type": "text", "text": "Be nice"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "stop_sequences": ["x"]}),
    ("a stop sequence that matches", {"max_tokens": 20, "temperature": 0, "messages": HI, "stop_sequences": ["H"]}),
    ("seeded? (b11669 passes no seed through: top_k 1)", {"max_tokens": 6, "top_k": 1, "messages": HI}),
    ("a conversation", {"max_tokens": 5, "temperature": 0, "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
        {"role": "user", "content": "Tell me a story"}]}),
    ("thinking blocks", {"max_tokens": 3, "temperature": 0, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Yo"}]},
        {"role": "user", "content": "more"}]}),
    ("messages not an array", {"max_tokens": 3, "temperature": 0, "messages": "x"}),
    ("an image without a source type (dropped)", {"max_tokens": 2, "temperature": 0, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {}}]}]}),
    ("an image (refused as llama-server refuses it without mmproj)", {"max_tokens": 2, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "http://x/y.png"}}]}]}),
    ("streamed", {"max_tokens": 4, "temperature": 0, "messages": HI, "stream": True}),
    ("streamed, a stop sequence at once", {"max_tokens": 20, "temperature": 0, "messages": HI,
                                           "stop_sequences": ["\""], "stream": True}),
    ("streamed, a stop sequence", {"max_tokens": 20, "temperature": 0, "messages": HI, "stop_sequences": ["H"],
                                   "stream": True}),
    ("no messages", {"max_tokens": 3}),
    ("not an object", "[1]"),
    ("bad JSON", "{"),
    ("a bad role type", {"max_tokens": 3, "messages": [{"role": 5, "content": "x"}]}),
    # the chat layer (testing/oracle_anthropic_tools.py has the templates that call tools)
    ("tools", {"max_tokens": 2, "temperature": 0, "messages": HI,
               "tools": [{"name": "f", "input_schema": {"type": "object"}}]}),
    ("a tool_result alone", {"max_tokens": 2, "temperature": 0, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t", "content": "x"}]}]}),
    ("tool_choice any without tools", {"max_tokens": 2, "temperature": 0, "messages": HI,
                                       "tool_choice": {"type": "any"}}),
    ("thinking enabled", {"max_tokens": 2, "temperature": 0, "messages": HI,
                          "thinking": {"type": "enabled", "budget_tokens": 10}}),
]
RESP = [
    ("input string", {"model": "gpt-4o-mini", "input": "hi", "max_output_tokens": 4, "temperature": 0}),
    ("instructions", {"input": "hi", "instructions": "Be nice", "max_output_tokens": 4, "temperature": 0}),
    ("input items", {"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
                     "max_output_tokens": 3, "temperature": 0}),
    ("output messages merged", {"input": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "type": "message", "content": [{"type": "output_text", "text": "Hello"}]},
        {"role": "assistant", "type": "message", "content": "again"},
        {"role": "developer", "content": "more"}], "max_output_tokens": 3, "temperature": 0}),
    ("seeded", {"input": "Tell me a story", "max_output_tokens": 8, "temperature": 0.9, "seed": 11}),
    ("streamed", {"input": "hi", "instructions": "Be nice", "max_output_tokens": 4, "temperature": 0,
                  "stream": True}),
    ("streamed, a stop string", {"input": "hi", "max_output_tokens": 20, "temperature": 0, "stop": ["H"],
                                 "stream": True}),
    ("streamed, a stop string at once", {"input": "hi", "max_output_tokens": 20, "temperature": 0, "stop": ["\""],
                                         "stream": True}),
    ("a stop string", {"input": "hi", "max_output_tokens": 20, "temperature": 0, "stop": ["e"]}),
    ("no input", {"max_output_tokens": 3}),
    ("input a number", {"input": 5}),
    ("previous_response_id", {"input": "hi", "previous_response_id": "x"}),
    ("input_file", {"input": [{"role": "user", "content": [{"type": "input_file"}]}]}),
    ("an unknown content type", {"input": [{"role": "user", "content": [{"type": "x"}]}]}),
    ("input_text without text", {"input": [{"role": "user", "content": [{"type": "input_text"}]}]}),
    ("an item of no known type", {"input": [{"x": 1}]}),
    ("output text without text", {"input": [{"role": "assistant", "type": "message",
                                             "content": [{"type": "output_text"}]}]}),
    ("tools not an array", {"input": "hi", "tools": 5}),
    ("not an object", "[1]"),
]
REFUSED = [("/v1/embeddings", {"input": "a"}), ("/embedding", {"content": "a"}), ("/embeddings", {"content": "a"}),
           ("/rerank", {"query": "a", "documents": ["b"]}), ("/reranking", {"query": "a", "documents": ["b"]}),
           ("/v1/rerank", {"query": "a", "documents": ["b"]}), ("/v1/reranking", {"query": "a", "documents": ["b"]}),
           ("/infill", {"input_prefix": "a", "input_suffix": "b"}), ("/infill", {}), ("/props", {}),
           ("/props", {"n_ctx": 8}), ("/slots/0?action=save", {"filename": "x.bin"}),
           ("/slots/0?action=restore", {"filename": "x.bin"}), ("/slots/0?action=erase", {})]
BANKML_400 = [
    ("/v1/responses", {"input": "hi", "tools": [{"type": "function", "name": "f"}]},
     "function 'tools' are refused: bankml does not reproduce tool calls yet"),
    ("/v1/responses", {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]},
     "input items of type 'function_call' are refused: bankml does not reproduce tool calls and reasoning items "
     "yet"),
]


def t_routes(L, B):
    for label, body in CMPL:
        both(f"/v1/completions: {label}", L, B, "/v1/completions", body)
    for label, body in MSGS:
        both(f"/v1/messages: {label}", L, B, "/v1/messages", body)
    for label, body in (("system and a message", {"system": "Be nice", "messages": HI}),
                        ("blocks", {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}),
                        ("no messages", {})):
        both(f"/v1/messages/count_tokens: {label}", L, B, "/v1/messages/count_tokens", body)
    for label, body in RESP:
        both(f"/v1/responses: {label}", L, B, "/v1/responses", body)
    for path, body in REFUSED:
        both(f"POST {path} {json.dumps(body)}: llama-server's refusal", L, B, path, body)
    for path, body, msg in BANKML_400:
        S.equal(f"{path}: bankml refuses what it cannot reproduce ({msg[:40]}...)", call(B.port, path, body),
                [400, "application/json", {"error": {"code": 400, "message": msg, "type": "invalid_request_error"}}])
    # after every refusal both slots are where they were: one more request, equal
    both("after the refusals: /v1/completions", L, B, "/v1/completions",
         {"prompt": "Once upon a time", "max_tokens": 6, "temperature": 0})


MARKER = re.compile(r"^<__media_[0-9A-Za-z]{32}__>$")


def props_equal(label, got, want):
    """GET /props whole, members in order: build_info is each server's own, media_marker random per start
    (its shape checked), the top-level n_ctx bankML's own (Savante reads it; equal to the slot's);
    chat_template_caps (src/text/template_caps.c) equal with the rest."""
    got, want = dict(got), dict(want)
    for d in (got, want):
        d.pop("build_info", None)
        S.check(f"{label}: media_marker's shape", MARKER.match(d.pop("media_marker", "")) is not None, "")
    S.equal(f"{label}: bankML's n_ctx is the slot's", got.pop("n_ctx", None),
            want["default_generation_settings"]["n_ctx"])
    S.equal(f"{label}: every other member, in order", list(got.items()), list(want.items()))


def t_ftypes():
    """/props model_ftype and /v1/models meta on every weight type bankml plays (general.file_type and the
    guess from the tensor types)."""
    models = sorted(glob.glob(os.path.join(oracle.ensure_models(S), "*.gguf")))
    picked = [m for m in models if re.search(r"(qwen3-e128|llama-e200-odd|llama-e256-untied)-(f32|f16|bf16|q8_0|q1_0|q2_0)"
                                             r"\.gguf$", m)]
    if not picked:
        S.fail("ftypes: models", "no build/models/*.gguf (make models)")
    fork = os.path.join(tmp, "ftypes.FORK.json")
    for m in picked:
        subprocess.run([BIN, "pin", m, "--fork", fork, "--write"], check=True, stdout=subprocess.DEVNULL)
    for m in picked:
        name = os.path.basename(m)
        with oracle.Server.llama(kit, m, ctx=CTX, name="llama-ftype") as L, \
                oracle.Server.bankml(m, ctx=CTX, extra=["--fork", fork], name="bankml-ftype") as B:
            got, want = call(B.port, "/v1/models", None, "GET"), call(L.port, "/v1/models", None, "GET")
            S.equal(f"{name}: /v1/models meta", got[2]["data"][0].get("meta"), want[2]["data"][0].get("meta"))
            got, want = call(B.port, "/props", None, "GET"), call(L.port, "/props", None, "GET")
            S.equal(f"{name}: /props model_ftype", got[2].get("model_ftype"), want[2].get("model_ftype"))


def t_names(L, B, alias):
    want_name = alias or MODEL
    for asked in ("gpt-3.5-turbo", "gpt-4o-mini", 5, "", "stories260K", alias or "x"):
        body = {"model": asked, "prompt": "Once", "max_tokens": 2, "temperature": 0}
        got, _ = both(f"model {asked!r}: served (one model)", L, B, "/v1/completions", body)
        S.equal(f"model {asked!r}: the answer's model", got[2].get("model") if isinstance(got[2], dict) else got,
                want_name)
    both("chat with model gpt-4o-mini", L, B, "/v1/chat/completions",
         {"model": "gpt-4o-mini", "messages": HI, "max_tokens": 2, "temperature": 0})
    for path in ("/v1/models", "/models"):
        got, want = call(B.port, path, None, "GET"), call(L.port, path, None, "GET")
        S.equal(f"GET {path}: llama-server's list, meta included", got, want)
    got, want = call(B.port, "/props", None, "GET"), call(L.port, "/props", None, "GET")
    props_equal(f"GET /props{' with --alias' if alias else ''}", got[2], want[2])
    S.equal("GET /props: model_alias and model_path",
            [got[2].get("model_alias"), got[2].get("model_path")],
            [want[2].get("model_alias"), want[2].get("model_path")])
    S.equal("GET /props: model_alias is the alias or the path", got[2].get("model_alias"), want_name)


try:
    with oracle.Server.llama(kit, MODEL, ctx=CTX) as L, oracle.Server.bankml(MODEL, ctx=CTX, extra=["--fork", FORK]) as B:
        S.run("routes", t_routes, L, B)
        S.run("names", t_names, L, B, None)
except oracle.ServerError as e:
    S.fail("servers", str(e))
try:
    with oracle.Server.llama(kit, MODEL, ctx=CTX, extra=["--alias", "my-model"], name="llama-routes-alias") as L, \
            oracle.Server.bankml(MODEL, ctx=CTX, extra=["--fork", FORK, "--alias", "my-model"],
                                 name="bankml-routes-alias") as B:
        S.run("names with --alias", t_names, L, B, "my-model")
except oracle.ServerError as e:
    S.fail("servers with --alias", str(e))
try:
    # several names and tags: split at ',', stripped, empty ones dropped, a std::set each (the first names it)
    names, tags = " tinyllama-2, fim ,code,,fim\t", "chat, fim,small,,chat,Zeta,\u00e9t\u00e9"
    with oracle.Server.llama(kit, MODEL, ctx=CTX, extra=["--alias", names, "--tags", tags],
                             name="llama-routes-aliases") as L, \
            oracle.Server.bankml(MODEL, ctx=CTX, extra=["--fork", FORK, "--alias", names, "--tags", tags],
                                 name="bankml-routes-aliases") as B:
        S.run("names with several aliases and tags", t_names, L, B, "code")
        got = call(B.port, "/v1/models", None, "GET")[2]["data"][0]
        S.equal("several aliases: /v1/models' aliases and tags", [got["aliases"], got["tags"]],
                [["code", "fim", "tinyllama-2"], ["Zeta", "chat", "fim", "small", "\u00e9t\u00e9"]])
except oracle.ServerError as e:
    S.fail("servers with several aliases", str(e))
try:
    S.run("ftypes", t_ftypes)
except oracle.ServerError as e:
    S.fail("servers for the weight types", str(e))
S.finish()
