"""test_fields.py -- every request field bankml refuses, through a real `bankml serve` on the demo model:
for each refused field of src/api/llama_fields.c's table, a value that would change llama-server b11669's
answer gets 400 with the exact reason, and the value b11669 treats as absent is served (200). Also
streamed timings_per_token / return_progress served (once refused), llama-server's own
errors the table reproduces (response_format's type, lora's shape, n_keep / n_discard limits, ignore_eos's
type), fields a route does not read (tools on /completion), hostile logit_bias shapes, and that the server
still answers afterwards.

Standard library only. Ends with "N passed, N failed, N skipped"; exit 1 on failure."""
import json, os, subprocess, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle  # noqa: E402

S = oracle.Suite("test_fields")
DEMO = os.path.join(oracle.ROOT, "models", "demo.gguf")
FORK = os.path.join(oracle.ROOT, "models.FORK.json")
if not os.path.exists(DEMO):
    p = subprocess.run(["make", "-s", "demo-model"], cwd=oracle.ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0 or not os.path.exists(DEMO):
        S.fail("make demo-model", p.stdout.strip()[-300:])
        S.finish()

CMPL = "/completion"
CHAT = "/v1/chat/completions"
BASE = {CMPL: {"prompt": "Once upon", "n_predict": 2, "temperature": 0},
        CHAT: {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0}}
G16 = "constrained generation is not reproduced yet (issue #16); send the request without it"

# (field, refused value, a value b11669 treats as absent, the reason, routes)
BOTH = (CMPL, CHAT)
REFUSED = [
    ("n_indent", 2, 0, "n_indent: stopping at an indentation limit is not reproduced yet; send the request without it",
     BOTH),
    ("n_cache_reuse", 4, 0, "n_cache_reuse: KV-shifted chunk reuse is not reproduced; send the request without it",
     BOTH),
    ("t_max_predict_ms", 100, 0, "t_max_predict_ms: a time limit makes the answer depend on the machine's speed, so "
                                 "it is not reproduced; send the request without it", BOTH),
    ("backend_sampling", True, False, "backend_sampling: sampling on the backend is not reproduced; send the request "
                                      "without it", BOTH),
    ("lora", [{"id": 0, "scale": 1.0}], [], "lora: LoRA adapters are not reproduced; send the request without it",
     BOTH),
    ("chat_format", 2, 0, "chat_format: only the content-only format (0) is reproduced; send the request without it",
     BOTH),
    ("reasoning_format", "none", "deepseek", 'reasoning_format: only the server\'s default, "deepseek", is '
                                             'reproduced; send the request without it', (CMPL,)),
    ("generation_prompt", "<think>", "", "generation_prompt: a generation prompt for the chat parser is not "
                                         "reproduced; send the request without it", BOTH),
    ("parse_tool_calls", True, False, "parse_tool_calls: tool calls are not parsed on this route; send the request "
                                      "without it", (CMPL,)),
    ("chat_parser", "x", None, "chat_parser: chat parsers are not reproduced yet; send the request without it", BOTH),
    ("echo", True, False, "echo: echoing the prompt is not reproduced; send the request without it", BOTH),
    ("message_delimiters", ["x"], [], "message_delimiters: not reproduced; send the request without it", BOTH),
    ("reasoning_control", True, False, "reasoning_control: ending the reasoning at run time (llama-server's "
                                       "reasoning_end control) is not reproduced yet; send the request without it",
     BOTH),
]

# requests with llama-server's own errors, or bankml's that depend on two fields
OTHER = [
    (CHAT, {"response_format": {"type": "bogus"}}, 400,
     'response_format type must be one of "text" or "json_object", but got: bogus'),
    (CMPL, {"json_schema": {"type": "strin"}}, 400, "Field 'json_schema': \"json_schema\": JSON schema conversion "
                                                   "failed:\nJSON schema error at #: unrecognized type strin"),
    (CMPL, {"json_schema": {"type": "strin"}, "grammar": None}, 200, None),
    (CMPL, {"json_schema": {}}, 200, None),
    (CMPL, {"grammar_triggers": 5}, 400, "Field 'grammar_triggers': [json.exception.type_error.304] cannot use at() "
                                         "with number"),
    (CMPL, {"grammar_triggers": [{"type": 9, "value": "x"}]}, 400, "grammar_triggers: type 9 is no trigger type (0 "
     "token, 1 word, 2 pattern, 3 full pattern); llama-server b11669 aborts on it, bankml refuses it"),
    (CMPL, {"grammar": "root ::= [a-z]+", "grammar_lazy": True, "grammar_triggers": [{"type": 2, "value": "a**"}]},
     400, "grammar_triggers: the trigger pattern uses a quantifier right after a quantifier, which bankml does not "
          "reproduce; send the request without it"),
    (CMPL, {"grammar": "root ::= [a-z]+", "grammar_lazy": True, "grammar_triggers": [{"type": 2, "value": "[b-a]"}]},
     400, "Failed to initialize samplers: Invalid range in bracket expression."),
    (CMPL, {"grammar_triggers": [{"type": 1, "value": "no such words here"}]}, 200, None),
    (CMPL, {"preserved_tokens": "x"}, 400, "Field 'preserved_tokens': [json.exception.type_error.302] type must be "
                                           "array, but is string"),
    (CMPL, {"preserved_tokens": ["x"]}, 200, None),
    (CMPL, {"reasoning_budget_tokens": -2}, 400, "Field 'reasoning_budget_tokens': Value must be between -1 <= value "
                                                 "<= 2147483647, but got -2"),
    (CMPL, {"reasoning_budget_end_tag": 5}, 400, "Field 'reasoning_budget_end_tag': [json.exception.type_error.302] "
                                                 "type must be string, but is number"),
    (CMPL, {"reasoning_budget_tokens": 1, "reasoning_budget_start_tag": "Once", "reasoning_budget_end_tags": ["."],
            "reasoning_budget_message": "x"}, 200, None),
    (CMPL, {"lora": {}}, 400, "Field 'lora': Error: 'lora' must be an array of objects with 'id' and 'scale' fields"),
    (CMPL, {"n_keep": -2}, 400, "Field 'n_keep': Value must be between -1 <= value <= 2147483647, but got -2"),
    (CMPL, {"n_discard": -1}, 400, "Field 'n_discard': Value must be between 0 <= value <= 2147483647, but got -1"),
    (CMPL, {"n_keep": "x"}, 400, "Field 'n_keep': [json.exception.type_error.302] type must be number, but is string"),
    (CHAT, {"verbose": 1}, 400, "Field 'verbose': [json.exception.type_error.302] type must be boolean, but is "
                                "number"),
    (CMPL, {"verbose": True}, 200, None),
    (CHAT, {"verbose": True}, 200, None),
    (CHAT, {"ignore_eos": 1}, 400, "Field 'ignore_eos': [json.exception.type_error.302] type must be boolean, but is "
                                   "number"),
    (CMPL, {"return_tokens": "yes"}, 400, "Field 'return_tokens': [json.exception.type_error.302] type must be "
                                          "boolean, but is string"),
    (CMPL, {"return_progress": "yes"}, 400, "Field 'return_progress': [json.exception.type_error.302] type must be "
                                            "boolean, but is string"),
    # streamed per-token timings and progress events are reproduced (oracle_progress.py compares them)
    (CMPL, {"stream": True, "timings_per_token": True}, 200, None),
    (CHAT, {"stream": True, "return_progress": True}, 200, None),
    # the chat's template inputs (oracle_chat_prompt.py compares them with llama-server); a chat with tools,
    # JSON mode, a schema, the reasoning fields go through the chat layer (oracle_chat_tools.py compares them)
    (CHAT, {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}, 200, None),
    (CHAT, {"response_format": {"type": "json_object"}}, 200, None),
    (CHAT, {"json_schema": {"type": "object"}}, 200, None),
    (CHAT, {"reasoning_format": "none", "parse_tool_calls": True, "reasoning_budget_tokens": 3}, 200, None),
    (CHAT, {"reasoning_format": "bogus"}, 500, "Unknown reasoning format: bogus"),
    (CHAT, {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"}, 200, None),
    (CHAT, {"tool_choice": "bogus"}, 400, "Invalid tool_choice: bogus"),
    (CHAT, {"add_generation_prompt": False}, 200, None),
    (CHAT, {"continue_final_message": True}, 400,
     "Cannot set both add_generation_prompt and continue_final_message to true."),
    (CHAT, {"continue_final_message": True, "add_generation_prompt": False}, 200, None),
    (CHAT, {"chat_template_kwargs": {"enable_thinking": False}}, 200, None),
    (CHAT, {"chat_template_kwargs": {"enable_thinking": "no"}}, 400,
     'invalid type for "enable_thinking" (expected boolean, got string)'),
    (CHAT, {"chat_template_kwargs": [1]}, 400, "chat_template_kwargs: bankml reads an object here (b11669 takes the "
                                               "items of this array as template arguments); send an object"),
    (CHAT, {"reasoning_effort": "low"}, 200, None),
    # what a route does not read cannot change its answer
    (CMPL, {"tools": [{"type": "function"}], "response_format": {"type": "bogus"}, "add_generation_prompt": False},
     200, None),
    (CMPL, {"timings_per_token": True, "return_progress": True, "n_keep": 3, "n_discard": 1}, 200, None),
    (CHAT, {"tool_choice": "required", "parallel_tool_calls": True, "user": "u", "sse_ping_interval": 5}, 200, None),
    # hostile logit_bias shapes: ignored entries, never an error
    (CMPL, {"logit_bias": [[1, 2, 3], [[1], 2], [None, 1], ["a" * 5000, False], [2 ** 70, 1], [1e300, 1]]}, 200, None),
    (CMPL, {"logit_bias": {"x" * 100: 1, "\u0000": False, "": 2, "99999999999999999999": 1, "-5": 1}}, 200, None),
    (CMPL, {"logit_bias": "nonsense"}, 200, None),
]


def message(body):
    return body.get("error", {}).get("message") if isinstance(body, dict) else body


def expect(srv, label, path, extra, status, msg):
    body = dict(BASE[path], **extra)
    st, got = srv.post(path, body)
    if status != 200:
        S.equal(label, [st, message(got)], [status, msg])
    else:
        S.equal(label, st, 200)


def t_all(srv):
    for field, bad, absent, words, routes in REFUSED:
        for path in routes:
            expect(srv, f"{path} {field}={json.dumps(bad)[:40]} refused", path, {field: bad}, 400, words)
            expect(srv, f"{path} {field}=null served", path, {field: None}, 200, None)
            if absent is not None:
                expect(srv, f"{path} {field}={json.dumps(absent)} served", path, {field: absent}, 200, None)
    for path, extra, status, msg in OTHER:
        expect(srv, f"{path} {json.dumps(extra)[:70]}", path, extra, status, msg)
    # fields a route does not read are not refused on /completion, and refused ones are on chat
    st, body = srv.post(CMPL, dict(BASE[CMPL], tools=[{"type": "function"}]))
    S.equal("/completion ignores tools as llama-server does", st, 200)
    # the server still answers, and reports what it was asked
    st, body = srv.post(CMPL, dict(BASE[CMPL], n_keep=4, n_discard=2, ignore_eos=True, timings_per_token=True,
                                   return_tokens=True, logit_bias=[[5, -1.5]]))
    gs = body.get("generation_settings", {}) if isinstance(body, dict) else {}
    S.equal("generation_settings report the request",
            {k: gs.get(k) for k in ("n_keep", "n_discard", "ignore_eos", "timings_per_token")},
            {"n_keep": 4, "n_discard": 2, "ignore_eos": True, "timings_per_token": True})
    S.equal("logit_bias reported first, the EOG bans after", (gs.get("logit_bias") or [{}])[0],
            {"bias": -1.5, "token": 5})
    S.check("every EOG ban is null (-inf)", all(b["bias"] is None for b in (gs.get("logit_bias") or [])[1:]) and
            len(gs.get("logit_bias") or []) > 1, json.dumps(gs.get("logit_bias"))[:200])
    S.equal("return_tokens: one id per predicted token", len(body.get("tokens", [])), body.get("tokens_predicted"))


def main():
    with oracle.Server.bankml(DEMO, ctx=512, extra=["--fork", FORK], name="bankml-fields") as srv:
        S.run("field refusals", t_all, srv)
        st, _ = srv.get("/health")
        S.equal("still serving after every refusal", st, 200)
    S.finish()


main()
